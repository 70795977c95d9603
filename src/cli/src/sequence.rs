//! The admin commands of a sequence: `peek`, `list`, `alter`, `advance-to`, `reset` and
//! `delete`, and the one line that shows a sequence's state. Given the name of a striped
//! sequence, they act on every stripe.

use std::io::Write;

use dispenser::stripe::Either;
use dispenser::{
    Dispenser, Error, Format,
    sequence::{Alter, SequenceState},
};

use crate::check::{DEFAULT_MIN_HISTORY, usage_text};
use crate::exit::Outcome;
use crate::output::{io_err, one_line_name};

/// `dispenser peek`.
#[derive(Debug, clap::Args)]
pub struct PeekArgs {
    /// Sequence name.
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `dispenser list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print JSON (one array).
    #[arg(long)]
    pub json: bool,
    /// List the scopes of this template instead (TEMPLATE@KEY).
    #[arg(long, value_name = "TEMPLATE")]
    pub scopes: Option<String>,
}

/// `dispenser alter`.
#[derive(Debug, clap::Args)]
pub struct AlterArgs {
    /// Sequence name.
    pub name: String,
    /// The new step (not 0).
    #[arg(long, allow_negative_numbers = true)]
    pub step: Option<i64>,
    /// The new lower bound.
    #[arg(long, allow_negative_numbers = true)]
    pub min: Option<i64>,
    /// The new upper bound.
    #[arg(long, allow_negative_numbers = true)]
    pub max: Option<i64>,
    /// Wrap at the bound from now on.
    #[arg(long, conflicts_with = "no_cycle")]
    pub cycle: bool,
    /// Stop wrapping: fail with "exhausted" at the bound.
    #[arg(long)]
    pub no_cycle: bool,
    /// The new serial format, e.g. 'INV-{scope}-{n:06}'.
    #[arg(long, conflicts_with = "no_format")]
    pub format: Option<String>,
    /// Remove the serial format.
    #[arg(long)]
    pub no_format: bool,
    /// Accept a bound that leaves the last issued number outside it (a non-cyclic
    /// sequence is exhausted at once, a cyclic one wraps on its next number), or --cycle
    /// on a non-cyclic sequence (numbers repeat after the wrap). Never a step of the
    /// other sign: create a new sequence for that.
    #[arg(long)]
    pub force: bool,
}

/// `dispenser advance-to`.
#[derive(Debug, clap::Args)]
pub struct AdvanceToArgs {
    /// Sequence name.
    pub name: String,
    /// The number the sequence must be past.
    #[arg(allow_negative_numbers = true)]
    pub n: i64,
}

/// `dispenser reset`.
#[derive(Debug, clap::Args)]
pub struct ResetArgs {
    /// Sequence name.
    pub name: String,
    /// The next number to issue.
    #[arg(long, allow_negative_numbers = true, required_unless_present = "value")]
    pub next: Option<i64>,
    /// What earlier versions called `--next`: refused, naming it.
    #[arg(long, hide = true, allow_negative_numbers = true)]
    pub value: Option<i64>,
    /// Allow moving the sequence backwards (numbers already issued would come again).
    #[arg(long)]
    pub force: bool,
}

/// `dispenser delete`.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// Sequence name.
    pub name: String,
    /// Delete only the scopes of this template whose key sorts before KEY (e.g. a date
    /// 2026-01-01); the template stays.
    #[arg(long, value_name = "KEY")]
    pub scopes_before: Option<String>,
    /// With --scopes-before: the time zone of the daily scopes; today and later there are
    /// kept. Without it, any date that is today somewhere on Earth (UTC-12) is kept.
    #[arg(long, value_name = "ZONE", requires = "scopes_before")]
    pub tz: Option<String>,
}

pub async fn peek(d: &Dispenser, a: PeekArgs, out: &mut impl Write) -> dispenser::Result<Outcome> {
    let line = |state: &SequenceState| {
        if a.json {
            state.to_json().to_string()
        } else {
            describe(state)
        }
    };
    let states = match d.open_either(&a.name).await? {
        Either::Striped(ids) => ids.peek().await?,
        Either::Plain(s) => vec![s.peek().await?],
    };
    for state in &states {
        writeln!(out, "{}", line(state)).map_err(io_err)?;
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}

pub async fn list(d: &Dispenser, a: ListArgs, out: &mut impl Write) -> dispenser::Result<Outcome> {
    let all = match &a.scopes {
        Some(template) => d.list().scopes_of(template.as_str()).await?,
        None => d.list().await?,
    };
    let mut corrupt = None;
    let mut rows = Vec::new();
    for item in all {
        match item {
            Ok(state) => rows.push(state),
            Err(e) => {
                eprintln!("dispenser: {e}");
                corrupt = Some(e);
            }
        }
    }
    if a.json {
        let arr: Vec<_> = rows.iter().map(SequenceState::to_json).collect();
        writeln!(out, "{}", serde_json::Value::Array(arr)).map_err(io_err)?;
    } else if rows.is_empty() && corrupt.is_none() {
        // On stderr, like `kubectl get`: stdout stays one line per sequence.
        let place = format!("{}.{}", d.options().database, d.options().collection);
        match &a.scopes {
            Some(template) => eprintln!("dispenser: no scopes of {template:?} in {place}"),
            None => eprintln!("dispenser: no sequences in {place}"),
        }
    } else {
        for s in &rows {
            writeln!(out, "{}", describe(s)).map_err(io_err)?;
        }
    }
    out.flush().map_err(io_err)?;
    match corrupt {
        Some(e) => Err(e),
        None => Ok(Outcome::Done),
    }
}

pub async fn alter(
    d: &Dispenser,
    a: AlterArgs,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    let mut change = Alter::default();
    change.step = a.step;
    change.min = a.min;
    change.max = a.max;
    change.cycle = (a.cycle || a.no_cycle).then_some(a.cycle);
    if let Some(f) = a.format.as_deref() {
        change.format = Some(Some(Format::parse(f)?));
    } else if a.no_format {
        change.format = Some(None);
    }
    let states = match d.open_either(&a.name).await? {
        Either::Striped(ids) => ids.alter(change).force(a.force).await?,
        Either::Plain(s) => vec![s.alter(change).force(a.force).await?],
    };
    print_states(&states, out)
}

pub async fn advance_to(
    d: &Dispenser,
    a: AdvanceToArgs,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    let states = match d.open_either(&a.name).await? {
        Either::Striped(ids) => ids.advance_to(a.n).await?,
        Either::Plain(s) => vec![s.advance_to(a.n).await?],
    };
    print_states(&states, out)
}

pub async fn reset(
    d: &Dispenser,
    a: ResetArgs,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    let next = match (a.next, a.value) {
        (Some(next), None) => next,
        _ => {
            return Err(dispenser::Error::InvalidArgument {
                what: "--value".into(),
                reason: "reset's `--value` is now `--next` (the next number to issue)".into(),
            });
        }
    };
    let states = match d.open_either(&a.name).await? {
        Either::Striped(ids) => ids.reset(next).force(a.force).await?,
        Either::Plain(s) => vec![s.reset(next).force(a.force).await?],
    };
    print_states(&states, out)
}

pub async fn delete(
    d: &Dispenser,
    a: DeleteArgs,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    let name = a.name;
    if let Some(before) = a.scopes_before {
        let n = match a.tz {
            Some(zone) => {
                d.open_daily(&name, crate::args::time_zone(&zone)?)?
                    .delete_scopes_before(crate::args::day("--scopes-before", &before)?)
                    .await?
            }
            None => d.delete_scopes_before(&name, &before).await?,
        };
        writeln!(out, "deleted {n} scope(s) of {name} before {before}").map_err(io_err)?;
    } else {
        match d.delete(&name).await {
            Err(e @ Error::NotFound { .. }) => {
                // A striped sequence, whole or left part way by an interrupted delete.
                let n = match d.delete_striped(&name).await {
                    Err(Error::NotFound { .. } | Error::SpecConflict { .. }) => {
                        return Err(e);
                    }
                    other => other?,
                };
                writeln!(out, "deleted {name} ({n} stripes)").map_err(io_err)?;
            }
            other => {
                other?;
                writeln!(out, "deleted {name}").map_err(io_err)?;
            }
        }
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}

/// One line per state (what `alter`, `advance-to` and `reset` print).
fn print_states(states: &[SequenceState], out: &mut impl Write) -> dispenser::Result<Outcome> {
    for state in states {
        writeln!(out, "{}", describe(state)).map_err(io_err)?;
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}

/// A sequence's state as one line (what `peek`, `list` and the other commands print).
pub fn describe(s: &SequenceState) -> String {
    let next = s
        .next_number()
        .map_or_else(|| "none (exhausted)".to_owned(), |n| n.to_string());
    format!(
        "{name}: value {value} next {next} remaining {rem} step {step} min {min} max {max} cycle {cycle} cycles {cycles}{format} updated_at {updated}; {usage}",
        name = one_line_name(&s.name),
        value = s.value,
        rem = s.remaining(),
        step = s.step,
        min = s.min,
        max = s.max,
        cycle = s.cycle,
        cycles = s.cycles,
        // The format (quoted: it may hold spaces); the write counter `version` is only in
        // --json, where tools that compare-and-set read it.
        format = s
            .format
            .as_ref()
            .map(|f| format!(" format {:?}", f.as_str()))
            .unwrap_or_default(),
        updated = s.updated_at.try_to_rfc3339_string().unwrap_or_default(),
        usage = usage_text(
            &s.usage(jiff::Timestamp::now()),
            s.cycle,
            DEFAULT_MIN_HISTORY
        ),
    )
}
