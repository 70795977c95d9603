//! The command line: clap definitions only. `main.rs` turns them into library calls.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The most numbers one `next` invocation may print.
pub const MAX_COUNT: u64 = 100_000_000;

/// The largest block `next --block` may reserve.
pub const MAX_BLOCK: u64 = 10_000_000;

/// Unique numbers from MongoDB: sequences and cyclic serial numbers, never issued twice.
#[derive(Debug, Parser)]
#[command(name = "dispenser", version, about, long_about = None)]
pub struct Cli {
    /// MongoDB connection string [default: $MONGODB_URI, else mongodb://127.0.0.1:27017]
    /// (its password is never printed).
    // Not clap's `env`: an argument taken from the environment counts as given, and clap's
    // usage lines would then show `--uri <URI>` as if it were required.
    #[arg(long = "uri", id = "uri", value_name = "URI", global = true)]
    pub uri_flag: Option<String>,

    /// The connection string in effect: --uri, else MONGODB_URI, else the local default
    /// (see [`Cli::resolve_uri`]).
    #[arg(skip)]
    pub uri: String,

    /// Database holding the sequence documents.
    #[arg(long, global = true, default_value = "dispenser")]
    pub db: String,

    /// Collection holding the sequence documents.
    #[arg(long, global = true, default_value = "dispensers")]
    pub collection: String,

    /// Seconds one database operation may take (also the server selection timeout).
    #[arg(long, global = true, default_value_t = 10.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub timeout: f64,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The URI used when neither --uri nor MONGODB_URI is given.
pub const DEFAULT_URI: &str = "mongodb://127.0.0.1:27017";

impl Cli {
    /// Parses the command line and settles the URI: --uri, else a non-empty MONGODB_URI,
    /// else [`DEFAULT_URI`].
    pub fn try_parse_resolved() -> Result<Self, clap::Error> {
        let mut cli = Cli::try_parse()?;
        cli.uri = cli
            .uri_flag
            .take()
            .or_else(|| std::env::var("MONGODB_URI").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| DEFAULT_URI.to_owned());
        Ok(cli)
    }
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
    /// List all sequences (or the scopes of one template).
    List {
        /// Print JSON (one array).
        #[arg(long)]
        json: bool,
        /// List the scopes of this template instead (TEMPLATE@KEY).
        #[arg(long, value_name = "TEMPLATE")]
        scopes: Option<String>,
    },
    /// Exhaustion alerts: one line per sequence, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    Check(CheckArgs),
    /// Gaps and duplicates of a number field in any collection (exit 0 clean, 1 found).
    Audit(crate::audit::AuditArgs),
    /// Examine the server: can it keep the promise of no duplicates? Exit 0 fit, 1 unfit.
    ///
    /// Reports the server (version, wire versions, topology), whether majority + journaled
    /// writes are acknowledged, whether each operation the library sends works as it needs it,
    /// and a concurrency probe (tasks × conditional increments and compare-and-sets on a
    /// document of its own: a lost update makes the server unfit). It writes only in a scratch
    /// collection of its own in --db (dispenser_doctor_…) and removes it.
    Doctor(crate::doctor::DoctorArgs),
    /// Gap-free sequences (invoices): status, void, issue.
    #[command(subcommand)]
    Gapless(crate::gapless::GaplessCommand),
    /// Ticket queues: take a ticket, call the next one; never two waiting with one number.
    ///
    /// A queue's tickets are MIN+1 … MAX, then MIN, round again, and at most MAX-MIN+1 people
    /// wait: a take is refused while that many wait (exit 9), a call when nobody waits (exit
    /// 10). Queues are kept in the collection COLLECTION_queues (dispensers_queues by
    /// default).
    #[command(subcommand)]
    Queue(crate::queue::QueueCommand),
    /// Change the shape of a live sequence (step, bounds, cycle, format) while others draw.
    Alter {
        /// Sequence name.
        name: String,
        /// The new step (not 0).
        #[arg(long, allow_negative_numbers = true)]
        step: Option<i64>,
        /// The new lower bound.
        #[arg(long, allow_negative_numbers = true)]
        min: Option<i64>,
        /// The new upper bound.
        #[arg(long, allow_negative_numbers = true)]
        max: Option<i64>,
        /// Wrap at the bound from now on.
        #[arg(long, conflicts_with = "no_cycle")]
        cycle: bool,
        /// Stop wrapping: fail with "exhausted" at the bound.
        #[arg(long)]
        no_cycle: bool,
        /// The new serial format, e.g. 'INV-{scope}-{n:06}'.
        #[arg(long, conflicts_with = "no_format")]
        format: Option<String>,
        /// Remove the serial format.
        #[arg(long)]
        no_format: bool,
        /// Accept a bound that leaves the last issued number outside it (a non-cyclic
        /// sequence is exhausted at once, a cyclic one wraps on its next number), or --cycle
        /// on a non-cyclic sequence (numbers repeat after the wrap). Never a step of the
        /// other sign: create a new sequence for that.
        #[arg(long)]
        force: bool,
    },
    /// Move a sequence past N (after an import); never moves it backwards.
    AdvanceTo {
        /// Sequence name.
        name: String,
        /// The number the sequence must be past.
        #[arg(allow_negative_numbers = true)]
        n: i64,
    },
    /// Set the number a sequence issues next.
    Reset {
        /// Sequence name.
        name: String,
        /// The next number to issue (`--value` is accepted too, as earlier versions named it).
        #[arg(long = "next", visible_alias = "value", allow_negative_numbers = true)]
        value: i64,
        /// Allow moving the sequence backwards (numbers already issued would come again).
        #[arg(long)]
        force: bool,
    },
    /// Delete a sequence (or only its old scopes).
    Delete {
        /// Sequence name.
        name: String,
        /// Delete only the scopes of this template whose key sorts before KEY (e.g. a date
        /// 2026-01-01); the template stays.
        #[arg(long, value_name = "KEY")]
        scopes_before: Option<String>,
        /// With --scopes-before: the time zone of the daily scopes; today and later there are
        /// kept. Without it, any date that is today somewhere on Earth (UTC-12) is kept.
        #[arg(long, value_name = "ZONE", requires = "scopes_before")]
        tz: Option<String>,
    },
    /// Measure throughput and latency, check for duplicates, compare with raw driver calls.
    Bench(BenchArgs),
    /// Serve numbers over HTTP (bearer tokens, blocks with prefetch, /healthz, /metrics).
    Serve(ServeArgs),
}

/// `dispenser serve`.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the first line on stdout says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// JSON file with the tokens (else the environment variable DISPENSER_TOKENS holds the
    /// JSON): {"tokens": [{"name", "token", "sequences": [globs], "operations": [...]}]}.
    #[arg(long)]
    pub tokens: Option<std::path::PathBuf>,
    /// The starting block size of the block client each sequence is served through (blocks
    /// grow to keep ahead of fast callers, up to --max-block).
    #[arg(long, default_value_t = 1000, value_parser = whole::<u64>(1, MAX_BLOCK), allow_negative_numbers = true)]
    pub block: u64,
    /// The largest block a sequence's client may reserve (what a crash of the service can
    /// burn, twice: the current block and the prefetched one); at least --block.
    #[arg(long, default_value_t = 100_000, value_parser = whole::<u64>(1, MAX_BLOCK), allow_negative_numbers = true)]
    pub max_block: u64,
    /// The largest share of the numbers left before a sequence's bound (of one cycle, for a
    /// cyclic sequence) that one block may hold (0 < share ≤ 1; at least one number).
    #[arg(long, default_value_t = 0.01, value_parser = parse_share, allow_negative_numbers = true)]
    pub block_share: f64,
    /// Reserve the next block in the background once this share of the current one is used.
    #[arg(long, default_value_t = 0.5, value_parser = parse_share, allow_negative_numbers = true)]
    pub prefetch: f64,
    /// The largest count one request may ask for.
    #[arg(long, default_value_t = 100_000, value_parser = whole::<u64>(1, MAX_COUNT), allow_negative_numbers = true)]
    pub max_count: u64,
    /// Seconds a request may take before it is answered 503 `timeout` (a draw cut short is a
    /// gap, never a duplicate), or 408 `request_timeout` when its body had not arrived.
    #[arg(long, default_value_t = 30.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub request_timeout: f64,
    /// Seconds a request head may take to arrive: on a new connection from its start, on a
    /// kept-alive one from the request's first byte. A connection past it is closed.
    #[arg(long, default_value_t = 10.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub header_timeout: f64,
    /// Seconds a kept-alive connection may wait for its next request before it is closed.
    #[arg(long, default_value_t = 60.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub idle_timeout: f64,
    /// Connections open at once; more wait to be accepted [default: 10000, or what the
    /// open-file limit allows less 128].
    #[arg(long, value_parser = whole::<u64>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_connections: Option<u64>,
}

/// `dispenser bench`.
#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// Concurrent tasks per process.
    #[arg(long, default_value_t = 1, value_parser = whole::<u32>(1, 4096), allow_negative_numbers = true)]
    pub tasks: u32,
    /// Numbers to draw per run, over all tasks and processes.
    #[arg(long, default_value_t = 10_000, value_parser = whole::<u64>(1, MAX_COUNT), conflicts_with = "duration", allow_negative_numbers = true)]
    pub count: u64,
    /// Run each measurement for this many seconds instead of a fixed count.
    #[arg(long, value_parser = parse_duration, allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// The strategy measured (with --compare, both are measured).
    #[arg(long, value_enum, default_value_t = StrategyArg::Inc)]
    pub strategy: StrategyArg,
    /// Whether concurrent calls of one process share writes (the library's default). With
    /// --compare, `inc` is also measured with `off`.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub coalesce: OnOff,
    /// Block size: reserve this many numbers per write (1 = no blocks).
    #[arg(long, default_value_t = 1, value_parser = whole::<u64>(1, MAX_BLOCK), allow_negative_numbers = true)]
    pub block: u64,
    /// With blocks: reserve the next block in the background once this share of the current
    /// one is used (0 < share ≤ 1) [default: 0.5, the library's].
    #[arg(long, num_args = 0..=1, default_missing_value = "0.5", value_parser = parse_share, allow_negative_numbers = true)]
    pub prefetch: Option<f64>,
    /// With blocks: no prefetch (the call that finds a block empty waits for the next).
    #[arg(long, conflicts_with = "prefetch")]
    pub no_prefetch: bool,
    /// OS processes drawing at once (each runs --tasks tasks).
    #[arg(long, default_value_t = 1, value_parser = whole::<u32>(1, 64), allow_negative_numbers = true)]
    pub processes: u32,
    /// Also run the raw driver baseline and both strategies, and print ratios to the baseline.
    #[arg(long)]
    pub compare: bool,
    /// Measure gap-free numbers instead: a raw `insert_one` into a collection with a unique
    /// index beside `Gapless::issue` with the same insert (each run in its own collection).
    #[arg(long, conflicts_with_all = ["compare", "block", "prefetch", "no_prefetch"])]
    pub gapless: bool,
    /// Numbers each run draws on a scratch document first, unmeasured (server and pool
    /// warm-up).
    #[arg(long, default_value_t = 2000, value_parser = whole::<u64>(0, MAX_COUNT), allow_negative_numbers = true)]
    pub warmup: u64,
    /// Split each run into this many rounds, interleaved across the runs (fairer
    /// comparisons when the server drifts).
    #[arg(long, default_value_t = 1, value_parser = whole::<u32>(1, 1000), allow_negative_numbers = true)]
    pub rounds: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Internal: run as a worker process of a multi-process bench.
    #[arg(long, hide = true)]
    pub worker: Option<String>,
}

/// `dispenser create`.
#[derive(Debug, Args)]
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
    /// Succeed without change if the sequence exists with the same spec.
    #[arg(long)]
    pub if_not_exists: bool,
    /// Serial format for `next --formatted`: {n}, {n:0W} (zero-padded), {scope}; e.g.
    /// 'INV-{scope}-{n:06}'.
    #[arg(long)]
    pub format: Option<String>,
    /// Create (or open, as with --if-not-exists) a striped sequence of this many stripes
    /// NAME~0 … NAME~{S-1}: unique, unordered numbers spread over S documents. peek, next,
    /// reset, advance-to and delete then take NAME and act on every stripe.
    #[arg(long, value_name = "S", value_parser = whole::<u32>(1, 1024), allow_negative_numbers = true)]
    pub stripes: Option<u32>,
}

/// `dispenser next`.
#[derive(Debug, Args)]
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

/// `bench --coalesce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Concurrent calls on one handle share writes.
    On,
    /// One write per call.
    Off,
}

/// `--strategy`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StrategyArg {
    /// Compare-and-set on the version (first writer wins).
    Cas,
    /// One-round-trip conditional increment (falls back to CAS at the wrap).
    Inc,
}

/// A value parser for a whole number in `lo..=hi` whose errors name the value and the
/// limits: "-1 is not allowed: must be between 1 and 100000000" (clap's own says "invalid
/// digit found in string"). The flag is named by clap around it.
pub(crate) fn whole<T>(
    lo: u64,
    hi: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |s: &str| {
        let limits = format!("must be a whole number between {lo} and {hi}");
        let n: i128 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a whole number: {limits}"))?;
        if n < i128::from(lo) || n > i128::from(hi) {
            return Err(format!("{n} is not allowed: {limits}"));
        }
        u64::try_from(n)
            .ok()
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| format!("{n} is not allowed: {limits}"))
    }
}

fn parse_duration(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        return Err(format!("{s} must be more than 0 and at most 86400 seconds"));
    }
    Ok(v)
}

fn parse_share(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(v.is_finite() && v > 0.0 && v <= 1.0) {
        return Err(format!("{s} must be more than 0 and at most 1"));
    }
    Ok(v)
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
    fn whole_numbers_name_the_value_and_the_limits() {
        let count = whole::<u64>(1, 5);
        assert_eq!(count("3"), Ok(3));
        assert_eq!(
            count("-1"),
            Err("-1 is not allowed: must be a whole number between 1 and 5".to_owned())
        );
        assert_eq!(
            count("x"),
            Err("\"x\" is not a whole number: must be a whole number between 1 and 5".to_owned())
        );
        assert!(whole::<u32>(0, 10)("99999999999999999999999999999999999999999").is_err());
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

/// `dispenser check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Sequences to check.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub names: Vec<String>,
    /// Check every sequence in the collection.
    #[arg(long)]
    pub all: bool,
    /// WARNING at this share used (e.g. 80% or 0.8).
    #[arg(long, default_value = "80%", value_parser = crate::check::parse_share)]
    pub warn: f64,
    /// CRITICAL at this share used.
    #[arg(long, default_value = "95%", value_parser = crate::check::parse_share)]
    pub critical: f64,
    /// WARNING when the forecast runs out within this (30d, 12h, 90m, 3600s); CRITICAL within
    /// a quarter of it.
    #[arg(long, default_value = "30d", value_parser = crate::check::parse_horizon)]
    pub horizon: std::time::Duration,
    /// Forecast only from a rate observed over at least this long (30d, 12h, 90m, 3600s);
    /// before that only --warn and --critical apply, and the line says the rate is too early
    /// to tell.
    #[arg(long, default_value = "1h", value_parser = crate::check::parse_horizon)]
    pub min_history: std::time::Duration,
}
