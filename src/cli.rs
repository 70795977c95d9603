//! The command line: clap definitions only. `main.rs` turns them into library calls.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The most numbers one `next` invocation may print.
pub const MAX_COUNT: u64 = 100_000_000;

/// Unique numbers from MongoDB: sequences and cyclic serial numbers, never issued twice.
#[derive(Debug, Parser)]
#[command(name = "dispenser", version, about, long_about = None)]
pub struct Cli {
    /// MongoDB connection string (its password is never printed).
    #[arg(
        long,
        global = true,
        env = "MONGODB_URI",
        hide_env_values = true,
        default_value = "mongodb://127.0.0.1:27017"
    )]
    pub uri: String,

    /// Database holding the sequence documents.
    #[arg(long, global = true, default_value = "dispenser")]
    pub db: String,

    /// Collection holding the sequence documents.
    #[arg(long, global = true, default_value = "dispensers")]
    pub collection: String,

    /// Seconds one database operation may take (also the server selection timeout).
    #[arg(long, global = true, default_value_t = 10.0, value_parser = parse_timeout)]
    pub timeout: f64,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a sequence.
    Create(CreateArgs),
    /// Issue numbers, one per line on stdout.
    Next(NextArgs),
    /// Show the stored state of a sequence.
    Peek {
        /// Sequence name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List all sequences.
    List {
        /// Print JSON (one array).
        #[arg(long)]
        json: bool,
    },
    /// Set the number a sequence issues next.
    Reset {
        /// Sequence name.
        name: String,
        /// The next number to issue.
        #[arg(long, allow_negative_numbers = true)]
        value: i64,
        /// Allow moving the sequence backwards (numbers already issued would come again).
        #[arg(long)]
        force: bool,
    },
    /// Delete a sequence.
    Delete {
        /// Sequence name.
        name: String,
    },
}

/// `dispenser create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Sequence name (1–200 bytes, no NUL, not starting with '$').
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
    /// Succeed without change if the sequence exists with the same spec.
    #[arg(long)]
    pub if_not_exists: bool,
}

/// `dispenser next`.
#[derive(Debug, Args)]
pub struct NextArgs {
    /// Sequence name.
    pub name: String,
    /// How many numbers to issue.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = clap::value_parser!(u64).range(1..=MAX_COUNT))]
    pub count: u64,
    /// How numbers are drawn.
    #[arg(long, value_enum, default_value_t = StrategyArg::Inc)]
    pub strategy: StrategyArg,
}

/// `--strategy`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StrategyArg {
    /// Compare-and-set on the version (first writer wins).
    Cas,
    /// One-round-trip conditional increment (falls back to CAS at the wrap).
    Inc,
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    // A positive value too small for a Duration (below 1 ns) would become a zero timeout.
    if !(v.is_finite() && v > 0.0 && v <= 3600.0) || Duration::from_secs_f64(v).is_zero() {
        return Err(format!("{s} must be more than 0 and at most 3600 seconds"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn timeouts_are_checked() {
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("nan").is_err());
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("1e-12").is_err(), "rounds to a zero Duration");
        assert_eq!(parse_timeout("2.5"), Ok(2.5));
    }
}
