//! `dispenser bench`'s arguments (every file of the benchmark reads them).

use clap::{Args, ValueEnum};

use super::rtt::parse_rtt;
use crate::args::{MAX_BLOCK, MAX_COUNT, StrategyArg, parse_duration, parse_share, whole};

/// The numbers a run draws when neither --count nor --duration is given.
pub const DEFAULT_COUNT: u64 = 10_000;

/// `dispenser bench`.
#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// Concurrent tasks per process.
    #[arg(long, default_value_t = 1, value_parser = whole::<u32>(1, 4096), allow_negative_numbers = true)]
    pub tasks: u32,
    /// Numbers to draw per run, over all tasks and processes [default: 10000]. With
    /// --duration: the most a run draws (it stops at whichever comes first).
    #[arg(long, value_parser = whole::<u64>(1, MAX_COUNT), allow_negative_numbers = true)]
    pub count: Option<u64>,
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
    /// Measure every strategy the benchmarks chapter tabulates, each beside the raw driver
    /// call it is built on: raw `findOneAndUpdate $inc`, the hand-written
    /// read-then-conditional-update loop (no coalescing), the library's defaults, `cas`,
    /// blocks of 1000 with prefetch, a raw `insert_one` and a gap-free issue with it, a
    /// ticket taken from a queue and called.
    #[arg(long, conflicts_with_all = ["compare", "gapless", "block", "prefetch", "no_prefetch"])]
    pub suite: bool,
    /// Put the database this many milliseconds of round trip away: the benchmark's database
    /// connections (with --http: the service's) go through a proxy in this process that holds
    /// each direction half of it (0: through the proxy, no delay). For one machine: it fronts
    /// the first host of a mongodb:// URI, directly.
    #[arg(long, value_name = "MS", value_parser = parse_rtt, conflicts_with_all = ["url", "scale"], allow_negative_numbers = true)]
    pub rtt: Option<f64>,
    /// With --rtt: run only the delay line, for another program's benchmark (the Python and
    /// Node.js packages' `bench` scripts): print `MONGODB_URI=<the URI through it>` on one
    /// line, then hold each direction half of --rtt until standard input closes (or the
    /// process is stopped), and print the delay it applied on stderr.
    #[arg(long, requires = "rtt", conflicts_with_all = ["compare", "gapless", "http", "scale", "queue_growth", "suite"])]
    pub delay_line: bool,
    /// Numbers each run draws on a scratch document first, unmeasured (server and pool
    /// warm-up).
    #[arg(long, default_value_t = 2000, value_parser = whole::<u64>(0, MAX_COUNT), allow_negative_numbers = true)]
    pub warmup: u64,
    /// Split each run into this many rounds, interleaved across the runs (fairer
    /// comparisons when the server drifts).
    #[arg(long, default_value_t = 1, value_parser = whole::<u32>(1, 1000), allow_negative_numbers = true)]
    pub rounds: u32,
    /// Measure the service's cost with this many sequences instead: they are inserted into a
    /// scratch collection, a `dispenser serve` child serves it, and a scrape of /metrics, a
    /// page of /v1/overview and of /v1/sequences are timed, its memory read, and the numbers
    /// its blocks hold counted (before and after the idle release). The collection is
    /// dropped afterwards.
    #[arg(long, value_parser = whole::<u64>(1, 10_000_000), conflicts_with_all = ["compare", "gapless", "http", "suite"], allow_negative_numbers = true)]
    pub scale: Option<u64>,
    /// Measure a ticket queue under a crowd: each of --tasks takers (in each of --processes
    /// processes, one queue handle per process) takes a ticket and calls one, beside the raw
    /// driver's `findOneAndUpdate $inc` in the same run; the report counts the takes and calls
    /// that gave up (failed). With --http: takes over HTTP through the service (a queue whose
    /// range never fills), beside the same service's draws of a sequence.
    #[arg(long, conflicts_with_all = ["compare", "gapless", "suite", "scale", "block", "prefetch", "no_prefetch"])]
    pub queue: bool,
    /// Measure queues at their largest beside the fresh case, in one run: a take on a queue
    /// that stored 1 000 request ids and made 600 calls beside a take on a new queue, and
    /// the service's `/v1/overview` (for a token that sees one queue) and `/metrics` over a
    /// collection of 300 queue documents of the largest size beside the same reads over a
    /// collection of that one queue (two services, started here). Scratch collections,
    /// dropped afterwards.
    #[arg(long, conflicts_with_all = ["compare", "gapless", "http", "scale"])]
    pub queue_growth: bool,
    /// Measure the history read at scale instead: a scratch collection's history gets this
    /// many records (intents and outcomes), and `Dispenser::history` of one name with a
    /// limit of 10 (what `dispenser history NAME --limit 10` runs) is timed beside the raw
    /// driver's find with the same filter, sort and limit, in pairs; then the name's whole
    /// history page by page beside one raw find. The collections are dropped afterwards.
    #[arg(long, value_name = "N", value_parser = whole::<u64>(4, 10_000_000), conflicts_with_all = ["compare", "gapless", "http", "scale", "queue_growth", "suite", "rtt"], allow_negative_numbers = true)]
    pub history: Option<u64>,
    /// With --history: how many of the records belong to the name read [default: N/12].
    #[arg(long, value_name = "M", value_parser = whole::<u64>(2, 10_000_000), requires = "history", allow_negative_numbers = true)]
    pub history_name: Option<u64>,
    /// With --scale: how many of the sequences are drawn once through the service first.
    #[arg(long, default_value_t = 200, value_parser = whole::<u64>(0, 1_000_000), requires = "scale", allow_negative_numbers = true)]
    pub scale_drawn: u64,
    /// Measure the HTTP service instead: `POST /v1/sequences/{name}/next` of a service
    /// started in this process (or the one at --url) beside the floor, the same HTTP stack
    /// answering a constant JSON body, driven by the same keep-alive HTTP/1.1 load
    /// (--connections, --duration or --count, --rounds).
    #[arg(long, conflicts_with_all = ["gapless", "processes", "block", "prefetch", "no_prefetch", "suite"])]
    pub http: bool,
    /// With --http: the service to measure (such as http://127.0.0.1:8080), connected to the
    /// same database, with a token (--token) that may draw `bench-http-*`; without it the
    /// service is started in this process.
    #[arg(long, requires = "http")]
    pub url: Option<String>,
    /// With --http --url: the bearer token. Prefer the environment variable: a command line
    /// is visible to other users.
    #[arg(long, env = "DISPENSER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// With --http: the service started here also serves HTTPS with this certificate chain
    /// (PEM; with --tls-key), and is measured over both, beside the floor. The bench's client
    /// trusts exactly this certificate.
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"], conflicts_with = "url")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// With --http --tls-cert: its private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// With --http --url https://…: the authorities (PEM) the service's certificate must chain
    /// to.
    #[arg(long, value_name = "FILE", requires = "url")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// With --http: keep-alive HTTP/1.1 connections, each sending one request at a time.
    #[arg(long, default_value_t = 32, value_parser = whole::<u32>(1, 4096), allow_negative_numbers = true)]
    pub connections: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Internal: run as a worker process of a multi-process bench.
    #[arg(long, hide = true)]
    pub worker: Option<String>,
}

impl BenchArgs {
    /// The most numbers a run draws: --count, or [`DEFAULT_COUNT`] when it runs neither for a
    /// count nor for a time; `None` when it runs for a time without a count.
    pub fn count_cap(&self) -> Option<u64> {
        match (self.count, self.duration) {
            (Some(n), _) => Some(n),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_COUNT),
        }
    }
}

/// `bench --coalesce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Concurrent calls on one handle share writes.
    On,
    /// One write per call.
    Off,
}
