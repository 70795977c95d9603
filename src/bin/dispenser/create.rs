//! `dispenser create`: a sequence (or a striped sequence), printed as `peek` shows it.

use std::io::Write;

use dispenser::{Dispenser, Error, Format, Spec};

use crate::args::whole;
use crate::exit::Outcome;
use crate::output::{self, io_err};
use crate::sequence::describe;

/// `dispenser create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Sequence name (1–200 bytes, no control characters, no '@' or '~', not starting with
    /// '$').
    pub name: String,
    /// First number issued.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub start: i64,
    /// Distance between numbers (negative for descending; not 0).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub step: i64,
    /// Lowest number.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub min: i64,
    /// Highest number.
    #[arg(long, default_value_t = i64::MAX, allow_negative_numbers = true)]
    pub max: i64,
    /// Wrap to min (max when descending) after the bound instead of failing.
    #[arg(long)]
    pub cycle: bool,
    /// Succeed without change if the sequence exists: with the same start (and stripe
    /// layout), else exit 6; bounds, step, cycle and format an alter changed since are kept
    /// as stored, and stderr says each.
    #[arg(long)]
    pub if_not_exists: bool,
    /// Serial format for `next --formatted`: {n}, {n:0W} (zero-padded), {scope}; e.g.
    /// 'INV-{scope}-{n:06}'.
    #[arg(long)]
    pub format: Option<String>,
    /// Create (with --if-not-exists: or open) a striped sequence of this many stripes
    /// NAME~0 … NAME~{S-1}: unique, unordered numbers spread over S documents. peek, next,
    /// reset, advance-to and delete then take NAME and act on every stripe.
    #[arg(long, value_name = "S", value_parser = whole::<u32>(1, 1024), allow_negative_numbers = true)]
    pub stripes: Option<u32>,
}

pub async fn run(d: &Dispenser, a: CreateArgs, out: &mut impl Write) -> dispenser::Result<Outcome> {
    let spec = Spec::default()
        .with_start(a.start)
        .with_step(a.step)
        .with_min(a.min)
        .with_max(a.max)
        .with_cycle(a.cycle);
    // Parse the format first: bad input writes nothing.
    let format = a.format.as_deref().map(Format::parse).transpose()?;
    if let Some(stripes) = a.stripes {
        if format.is_some() {
            return Err(Error::InvalidArgument {
                what: "--format".into(),
                reason: "a striped sequence has no format (its numbers are not in order)".into(),
            });
        }
        let ids = if a.if_not_exists {
            let ids = d.ensure_striped(&a.name, stripes, spec).await?;
            output::kept(dispenser::Kind::Striped, &a.name, &ids.altered());
            ids
        } else {
            d.create_striped(&a.name, stripes, spec).await?
        };
        output::wrote(format!(
            "striped sequence {:?} of {stripes} stripes {}",
            a.name,
            if a.if_not_exists {
                "created or found"
            } else {
                "created"
            }
        ));
        for state in ids.peek().await? {
            writeln!(out, "{}", describe(&state)).map_err(io_err)?;
        }
        out.flush().map_err(io_err)?;
        return Ok(Outcome::Done);
    }
    // The format is written in the same insert, and compared by --if-not-exists.
    if a.if_not_exists {
        let s = d.ensure(&a.name, spec).format(format).await?;
        output::kept(dispenser::Kind::Sequence, &a.name, s.altered());
        output::wrote(format!("sequence {:?} created or found", a.name));
    } else {
        d.create(&a.name, spec).format(format).await?;
        output::wrote(format!("sequence {:?} created", a.name));
    }
    let state = d.peek(&a.name).await?;
    writeln!(out, "{}", describe(&state)).map_err(io_err)?;
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}
