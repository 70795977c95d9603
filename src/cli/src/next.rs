//! `dispenser next`: issue numbers, one per line on stdout (from a sequence, one of its
//! scopes or a striped sequence; one at a time, in runs, or through a block client).

use std::io::Write;

use dispenser::block::BlockOptions;
use dispenser::stripe::Either;
use dispenser::{Dispenser, Error, block::CloseReport};

use crate::args::{MAX_BLOCK, MAX_COUNT, StrategyArg, whole};
use crate::exit::Outcome;
use crate::output::io_err;

/// `dispenser next`.
#[derive(Debug, clap::Args)]
pub struct NextArgs {
    /// Sequence name.
    pub name: String,
    /// How many numbers to issue.
    #[arg(long, default_value_t = 1, value_parser = whole::<u64>(1, MAX_COUNT), allow_negative_numbers = true)]
    pub count: u64,
    /// How numbers are drawn.
    #[arg(long, value_enum, default_value_t = StrategyArg::Inc)]
    pub strategy: StrategyArg,
    /// Reserve numbers in blocks of this size (1–10000000), one write per block, prefetching
    /// the next block in the background; the unused rest is given back at the end when no
    /// one else wrote meanwhile (else it is a gap).
    #[arg(long, value_parser = whole::<u64>(1, MAX_BLOCK), allow_negative_numbers = true)]
    pub block: Option<u64>,
    /// Draw from scope KEY of this template (the sequence NAME@KEY, created on first use).
    #[arg(long, value_name = "KEY", conflicts_with = "daily")]
    pub scope: Option<String>,
    /// Draw from today's scope (YYYY-MM-DD in --tz): numbering restarts every day.
    #[arg(long)]
    pub daily: bool,
    /// Time zone of --daily (an IANA name).
    #[arg(long, default_value = "UTC", requires = "daily")]
    pub tz: String,
    /// Print numbers through the sequence's format (see create --format).
    #[arg(long)]
    pub formatted: bool,
}

pub async fn run(d: &Dispenser, a: NextArgs, out: &mut impl Write) -> dispenser::Result<Outcome> {
    // `--strategy` is this command's own: the same client, drawing with that strategy.
    let d = &Dispenser::new(
        d.client(),
        d.options().clone().with_strategy(a.strategy.into()),
    )?;
    let scope = match (&a.scope, a.daily) {
        (Some(key), _) => Some(key.clone()),
        (None, true) => {
            let zone = crate::args::time_zone(&a.tz)?;
            Some(d.open_daily(&a.name, zone)?.today().to_string())
        }
        (None, false) => None,
    };
    let format = if a.formatted {
        let f = d
            .peek(&a.name)
            .await?
            .format
            .ok_or_else(|| Error::InvalidArgument {
                what: "--formatted".into(),
                reason: format!(
                    "sequence {:?} has no format (set one with create --format)",
                    a.name
                ),
            })?;
        // Refused before anything is drawn: `INV--000001` is no serial number.
        if scope.is_none() && f.uses_scope() {
            return Err(Error::InvalidArgument {
                what: "--formatted".into(),
                reason: format!(
                    "the format of sequence {:?} is {:?}, which needs a scope: add --scope KEY or --daily",
                    a.name,
                    f.as_str()
                ),
            });
        }
        Some(f)
    } else {
        None
    };
    let show = |n: i64| match &format {
        Some(f) => f.try_render(n, scope.as_deref()),
        None => Ok(n.to_string()),
    };
    let seq = match &scope {
        Some(key) => d.ensure_scope(&a.name, key).await?,
        None => match d.open_either(&a.name).await? {
            Either::Plain(s) => s,
            Either::Striped(ids) => {
                let ids = match a.block {
                    Some(size) => ids.with_blocks(run_blocks(size, a.count))?,
                    None => ids,
                };
                for _ in 0..a.count {
                    let n = ids.next().await?;
                    writeln!(out, "{n}").map_err(io_err)?;
                    out.flush().map_err(io_err)?;
                }
                close_report("block clients", ids.close().await);
                return Ok(Outcome::Done);
            }
        },
    };
    if let Some(size) = a.block {
        let blocks = seq.into_blocks(run_blocks(size, a.count))?;
        for i in 1..=a.count {
            // Only numbers already issued are printed.
            let n = blocks.next().await?;
            writeln!(out, "{}", show(n)?).map_err(io_err)?;
            if i % size == 0 {
                out.flush().map_err(io_err)?;
            }
        }
        out.flush().map_err(io_err)?;
        close_report("block client", blocks.close().await);
    } else {
        let mut left = a.count;
        while left > 0 {
            let run = seq.next_n(left).await?;
            for n in run {
                writeln!(out, "{}", show(n)?).map_err(io_err)?;
            }
            // Everything issued is on stdout before the next write is tried.
            out.flush().map_err(io_err)?;
            left -= run.count();
        }
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}

/// Block options for a `next --block SIZE --count COUNT` run: a prefetched block never grows
/// past half of what the run uses (and never below `SIZE`), so a run that knows it needs
/// three numbers does not reserve thousands (what a killed run would lose). The client holds
/// at most the rest of its current block and one prefetched block, both at most that large:
/// what it gives back is at most `max(2 × SIZE, COUNT)`.
fn run_blocks(size: u64, count: u64) -> BlockOptions {
    BlockOptions::default()
        .with_size(size)
        .with_grow_to(Some(count.div_ceil(2).max(size)))
}

/// Says on stderr what closing a block client did. A close that failed is a warning: every
/// number printed was issued, and what the close could not give back is a gap.
fn close_report(what: &str, closed: dispenser::Result<CloseReport>) {
    match closed {
        Ok(report) => {
            if let Some(line) = close_line(what, &report) {
                eprintln!("{line}");
            }
        }
        Err(e) => eprintln!(
            "dispenser: warning: {what} closed: {e} (the numbers printed were issued; what it held unused is a gap)"
        ),
    }
}

/// What closing a block client did, for stderr; `None` when there is nothing to say (no
/// number given back, none lost).
fn close_line(what: &str, report: &CloseReport) -> Option<String> {
    let mut parts = Vec::new();
    if report.given_back > 0 {
        parts.push(format!("{} unused number(s) given back", report.given_back));
    }
    if report.lost > 0 {
        parts.push(format!(
            "{} number(s) lost (a gap: reserved, never issued)",
            report.lost
        ));
    }
    (!parts.is_empty()).then(|| format!("dispenser: {what} closed: {}", parts.join(", ")))
}
