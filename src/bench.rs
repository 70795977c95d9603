//! `dispenser bench`: throughput, latency, round trips and duplicates, measured against the
//! raw driver call in the same invocation, with the same concurrency, on the same server.
//!
//! Every number drawn is kept and checked for duplicates; a duplicate fails the command.
//! With `--processes P` the same run is spread over P worker processes (this binary, re-run
//! with a hidden `--worker` flag) that report their numbers and latencies as JSON.

use std::process::Stdio;
use std::time::{Duration, Instant};

use dispenser::mongodb::Collection;
use dispenser::mongodb::bson::{Document, doc};
use dispenser::mongodb::options::{CollectionOptions, ReturnDocument};
use dispenser::{
    Dispenser, Error, Options, Sequence, Spec, Stats, Strategy,
    block::{BlockOptions, BlockSequence},
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::cli::{BenchArgs, StrategyArg};

/// What one run measures.
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    /// `findOneAndUpdate({_id}, {$inc: {value: 1}})` with the driver, nothing else.
    Raw,
    /// The same raw call on a document of the sequence schema (10 fields): separates the
    /// server's cost of the document from the library's.
    RawShaped,
    /// `Sequence::next()` with a strategy.
    Seq(Strategy),
    /// `BlockSequence::next()`: blocks of `size`, prefetch share (0 = off).
    Blocks(Strategy, u64, f64),
}

fn strategy_code(s: Strategy) -> &'static str {
    match s {
        Strategy::Cas => "cas",
        _ => "inc",
    }
}

fn parse_strategy(s: &str) -> Option<Strategy> {
    match s {
        "cas" => Some(Strategy::Cas),
        "inc" => Some(Strategy::ConditionalIncrement),
        _ => None,
    }
}

impl Kind {
    fn label(&self) -> String {
        match self {
            Kind::Raw => "raw findOneAndUpdate $inc".into(),
            Kind::RawShaped => "raw $inc, sequence doc".into(),
            Kind::Seq(s) => format!("dispenser {}", strategy_code(*s)),
            Kind::Blocks(s, size, prefetch) => {
                let p = if *prefetch > 0.0 {
                    format!(" prefetch {prefetch}")
                } else {
                    String::new()
                };
                format!("{} block {size}{p}", strategy_code(*s))
            }
        }
    }

    /// The worker-process encoding: `raw:DOC`, `seq:inc|cas:NAME` or
    /// `blocks:inc|cas:SIZE:PREFETCH:NAME`.
    fn encode(&self, target: &str) -> String {
        match self {
            Kind::Raw | Kind::RawShaped => format!("raw:{target}"),
            Kind::Seq(s) => format!("seq:{}:{target}", strategy_code(*s)),
            Kind::Blocks(s, size, prefetch) => {
                format!("blocks:{}:{size}:{prefetch}:{target}", strategy_code(*s))
            }
        }
    }

    fn decode(s: &str) -> Result<(Kind, String), Error> {
        let bad = || Error::InvalidArgument {
            what: "--worker".into(),
            reason: format!("{s:?} is not a worker spec"),
        };
        let (head, rest) = s.split_once(':').ok_or_else(bad)?;
        match head {
            "raw" => Ok((Kind::Raw, rest.to_owned())),
            "seq" => {
                let (strategy, name) = rest.split_once(':').ok_or_else(bad)?;
                let strategy = parse_strategy(strategy).ok_or_else(bad)?;
                Ok((Kind::Seq(strategy), name.to_owned()))
            }
            "blocks" => {
                let mut parts = rest.splitn(4, ':');
                let strategy = parts.next().and_then(parse_strategy).ok_or_else(bad)?;
                let size = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
                let prefetch = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
                let name = parts.next().ok_or_else(bad)?;
                Ok((Kind::Blocks(strategy, size, prefetch), name.to_owned()))
            }
            _ => Err(bad()),
        }
    }
}

/// One source of numbers, shared by the tasks of a process.
#[derive(Clone)]
enum Source {
    Raw(Collection<Document>, String),
    Seq(Sequence),
    Blocks(BlockSequence),
}

impl Source {
    async fn next(&self) -> dispenser::Result<i64> {
        match self {
            Source::Raw(coll, id) => {
                let d = coll
                    .find_one_and_update(
                        doc! { "_id": id.as_str() },
                        doc! { "$inc": { "value": 1_i64 } },
                    )
                    .projection(doc! { "value": 1, "_id": 0 })
                    .return_document(ReturnDocument::After)
                    .await
                    .map_err(|e| Error::Database {
                        context: "raw baseline increment".into(),
                        source: e,
                    })?
                    .ok_or_else(|| Error::NoSuchSequence { name: id.clone() })?;
                d.get_i64("value").map_err(|e| Error::CorruptDocument {
                    name: id.clone(),
                    field: "value".into(),
                    problem: e.to_string(),
                })
            }
            Source::Seq(s) => s.next().await,
            Source::Blocks(b) => b.next().await,
        }
    }

    fn stats(&self) -> Option<Stats> {
        match self {
            Source::Raw(..) => None,
            Source::Seq(s) => Some(s.stats()),
            Source::Blocks(b) => Some(b.stats()),
        }
    }

    /// Gives back what a block client still holds, so the run leaves no gap it need not.
    async fn close(self) {
        if let Source::Blocks(b) = self
            && let Err(e) = b.close().await
        {
            tracing::warn!("closing the block client failed: {e}");
        }
    }
}

/// What a process measured (also the worker's JSON report).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Sample {
    numbers: Vec<i64>,
    latencies_ns: Vec<u64>,
    elapsed_s: f64,
    round_trips: u64,
    conflicts: u64,
    retries: u64,
    refills: u64,
    waits: u64,
    errors: u64,
}

impl Sample {
    /// Takes the counters of an in-process source (they cover every round).
    fn set_stats(&mut self, stats: Option<Stats>) {
        if let Some(st) = stats {
            self.round_trips = st.round_trips;
            self.conflicts = st.conflicts;
            self.retries = st.retries;
            self.refills = st.block_refills;
            self.waits = st.waits;
        }
    }

    /// Adds a later round: the elapsed times add up.
    fn append_round(&mut self, other: Sample) {
        let elapsed = self.elapsed_s + other.elapsed_s;
        self.merge(other);
        self.elapsed_s = elapsed;
    }

    /// Adds a sample taken at the same time (another process): the longer time counts.
    fn merge(&mut self, other: Sample) {
        self.numbers.extend(other.numbers);
        self.latencies_ns.extend(other.latencies_ns);
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        self.round_trips += other.round_trips;
        self.conflicts += other.conflicts;
        self.retries += other.retries;
        self.refills += other.refills;
        self.waits += other.waits;
        self.errors += other.errors;
    }
}

/// The figures of one run.
#[derive(Debug, Serialize)]
struct Report {
    run: String,
    processes: u32,
    tasks: u32,
    numbers: usize,
    seconds: f64,
    numbers_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    round_trips_per_number: f64,
    conflicts_per_number: f64,
    retries_per_number: f64,
    block_refills: u64,
    block_waits: u64,
    errors: u64,
    duplicates: usize,
    throughput_vs_raw: Option<f64>,
    p50_vs_raw: Option<f64>,
}

fn percentile(sorted: &[u64], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = (sorted.len() * p / 100).min(sorted.len() - 1);
    sorted[i] as f64 / 1000.0
}

fn report(kind: &Kind, args: &BenchArgs, mut s: Sample) -> Report {
    s.latencies_ns.sort_unstable();
    s.numbers.sort_unstable();
    let duplicates = s.numbers.windows(2).filter(|w| w[0] == w[1]).count();
    let n = s.numbers.len();
    let per = |x: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    let round_trips = if matches!(kind, Kind::Raw | Kind::RawShaped) {
        n as u64
    } else {
        s.round_trips
    };
    Report {
        run: kind.label(),
        processes: args.processes,
        tasks: args.tasks,
        numbers: n,
        seconds: s.elapsed_s,
        numbers_per_s: if s.elapsed_s > 0.0 {
            n as f64 / s.elapsed_s
        } else {
            0.0
        },
        p50_us: percentile(&s.latencies_ns, 50),
        p99_us: percentile(&s.latencies_ns, 99),
        max_us: s.latencies_ns.last().map_or(0.0, |v| *v as f64 / 1000.0),
        round_trips_per_number: per(round_trips),
        conflicts_per_number: per(s.conflicts),
        retries_per_number: per(s.retries),
        block_refills: s.refills,
        block_waits: s.waits,
        errors: s.errors,
        duplicates,
        throughput_vs_raw: None,
        p50_vs_raw: None,
    }
}

/// Draws with `tasks` tasks from one source until `count` numbers or the deadline.
async fn draw(
    source: Source,
    tasks: u32,
    count: u64,
    duration: Option<Duration>,
    bar: &ProgressBar,
) -> Sample {
    let started = Instant::now();
    let deadline = duration.map(|d| started + d);
    let mut handles = Vec::new();
    for t in 0..u64::from(tasks) {
        let quota = count / u64::from(tasks) + u64::from(t < count % u64::from(tasks));
        let source = source.clone();
        let bar = bar.clone();
        handles.push(tokio::spawn(async move {
            let mut s = Sample::default();
            let mut pending = 0;
            let mut drawn = 0;
            loop {
                match deadline {
                    Some(d) => {
                        if drawn % 64 == 0 && Instant::now() >= d {
                            break;
                        }
                    }
                    None => {
                        if drawn >= quota {
                            break;
                        }
                    }
                }
                let t0 = Instant::now();
                match source.next().await {
                    Ok(n) => {
                        s.latencies_ns.push(t0.elapsed().as_nanos() as u64);
                        s.numbers.push(n);
                    }
                    Err(e) => {
                        s.errors += 1;
                        tracing::warn!("bench draw failed: {e}");
                        if s.errors > 100 {
                            break;
                        }
                    }
                }
                drawn += 1;
                pending += 1;
                if pending == 1024 {
                    bar.inc(pending);
                    pending = 0;
                }
            }
            bar.inc(pending);
            s
        }));
    }
    let mut total = Sample::default();
    for h in handles {
        if let Ok(s) = h.await {
            total.merge(s);
        } else {
            total.errors += 1;
        }
    }
    total.elapsed_s = started.elapsed().as_secs_f64();
    total
}

fn raw_collection(d: &Dispenser, client: &dispenser::mongodb::Client) -> Collection<Document> {
    let o = d.options();
    client.database(&o.database).collection_with_options(
        &o.collection,
        CollectionOptions::builder()
            .write_concern(o.write_concern.clone())
            .build(),
    )
}

async fn source_for(
    kind: &Kind,
    target: &str,
    uri: &str,
    options: &Options,
) -> dispenser::Result<Source> {
    match kind {
        Kind::Raw | Kind::RawShaped => {
            let client = client(uri, options).await?;
            let d = Dispenser::new(&client, options.clone())?;
            Ok(Source::Raw(raw_collection(&d, &client), target.to_owned()))
        }
        Kind::Seq(strategy) => {
            let d = Dispenser::connect(uri, options.clone().with_strategy(*strategy)).await?;
            Ok(Source::Seq(d.open(target).await?))
        }
        Kind::Blocks(strategy, size, prefetch) => {
            let d = Dispenser::connect(uri, options.clone().with_strategy(*strategy)).await?;
            let opts = BlockOptions::default()
                .with_size(*size)
                .with_prefetch((*prefetch > 0.0).then_some(*prefetch));
            Ok(Source::Blocks(d.open_blocks(target, opts).await?))
        }
    }
}

async fn client(uri: &str, options: &Options) -> dispenser::Result<dispenser::mongodb::Client> {
    let invalid = |e: dispenser::mongodb::error::Error| Error::InvalidArgument {
        what: format!("MongoDB URI {}", dispenser::redact_uri(uri)),
        reason: dispenser::scrub(&dispenser::describe_driver_error(&e), uri),
    };
    dispenser::check_credentials(uri)?;
    let mut o = dispenser::mongodb::options::ClientOptions::parse(uri)
        .await
        .map_err(invalid)?;
    o.server_selection_timeout
        .get_or_insert(options.operation_timeout);
    dispenser::mongodb::Client::with_options(o).map_err(invalid)
}

/// Creates the document a run draws from: a raw counter or a fresh sequence.
async fn prepare_target(
    d: &Dispenser,
    raw: &Collection<Document>,
    kind: &Kind,
    target: &str,
) -> dispenser::Result<()> {
    match kind {
        Kind::Raw => raw
            .insert_one(doc! { "_id": target, "value": 0_i64 })
            .await
            .map(drop)
            .map_err(|e| Error::Database {
                context: "creating the raw baseline document".into(),
                source: e,
            }),
        Kind::RawShaped | Kind::Seq(_) | Kind::Blocks(..) => {
            d.create(target, Spec::default()).await.map(drop)
        }
    }
}

/// Entry point of `dispenser bench`. `Ok(false)` when a duplicate was found.
pub async fn run(uri: &str, options: Options, args: BenchArgs) -> dispenser::Result<bool> {
    if let Some(spec) = &args.worker {
        return worker(uri, options, &args, spec).await;
    }
    let chosen = match args.strategy {
        StrategyArg::Cas => Strategy::Cas,
        StrategyArg::Inc => Strategy::ConditionalIncrement,
    };
    let measured = if args.block > 1 || args.prefetch.is_some() {
        Kind::Blocks(chosen, args.block, args.prefetch.unwrap_or(0.0))
    } else {
        Kind::Seq(chosen)
    };
    let mut kinds = vec![measured.clone()];
    if args.compare {
        kinds = vec![
            Kind::Raw,
            Kind::RawShaped,
            Kind::Seq(Strategy::ConditionalIncrement),
            Kind::Seq(Strategy::Cas),
        ];
        if !kinds.contains(&measured) {
            kinds.push(measured);
        }
    }
    let d = Dispenser::connect(uri, options.clone()).await?;
    let raw_client = client(uri, &options).await?;
    let raw = raw_collection(&d, &raw_client);
    let stamp = format!(
        "bench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|t| t.as_millis())
            .unwrap_or_default()
    );
    let duration = args.duration.map(Duration::from_secs_f64);
    let total = if duration.is_some() {
        0
    } else {
        args.count * kinds.len() as u64
    };
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::with_draw_target((total > 0).then_some(total), ProgressDrawTarget::stderr())
    };
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {msg:28} [{bar:30}] {pos}/{len} {per_sec}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    let mut reports = Vec::new();
    // Warm up: every kind draws on a scratch target first, so the server's caches and JIT
    // (and the driver's pool) are warm before anything is measured.
    for (i, kind) in kinds.iter().enumerate().filter(|_| args.warmup > 0) {
        let target = format!("{stamp}-warmup-{i}");
        prepare_target(&d, &raw, kind, &target).await?;
        let source = source_for(kind, &target, uri, &options).await?;
        bar.set_message(format!("warm-up: {}", kind.label()));
        let _ = draw(
            source.clone(),
            args.tasks,
            args.warmup,
            None,
            &ProgressBar::hidden(),
        )
        .await;
        source.close().await;
        let _ = raw.delete_one(doc! { "_id": target.as_str() }).await;
    }
    // The measured runs, interleaved in rounds (raw, inc, cas, raw, inc, cas, …) so that drift
    // on the server (JIT, GC, caches) falls on every kind alike.
    let targets: Vec<String> = (0..kinds.len()).map(|i| format!("{stamp}-{i}")).collect();
    for (kind, target) in kinds.iter().zip(&targets) {
        prepare_target(&d, &raw, kind, target).await?;
    }
    let rounds = u64::from(args.rounds);
    let mut samples: Vec<Sample> = kinds.iter().map(|_| Sample::default()).collect();
    // In-process sources are made once and reused by every round (no client churn).
    let mut sources = Vec::new();
    for (kind, target) in kinds.iter().zip(&targets) {
        sources.push(if args.processes > 1 {
            None
        } else {
            Some(source_for(kind, target, uri, &options).await?)
        });
    }
    for round in 0..rounds {
        let quota = args.count / rounds + u64::from(round < args.count % rounds);
        let slice = duration.map(|d| d / args.rounds);
        for (((kind, target), total), source) in
            kinds.iter().zip(&targets).zip(&mut samples).zip(&sources)
        {
            if quota == 0 && slice.is_none() {
                continue;
            }
            bar.set_message(kind.label());
            let sample = match source {
                Some(source) => draw(source.clone(), args.tasks, quota, slice, &bar).await,
                None => {
                    let s = spawn_workers(uri, &options, &args, kind, target, quota, slice).await?;
                    bar.inc(s.numbers.len() as u64);
                    s
                }
            };
            total.append_round(sample);
        }
    }
    for (source, total) in sources.into_iter().zip(&mut samples) {
        if let Some(source) = source {
            total.set_stats(source.stats());
            source.close().await;
        }
    }
    for ((kind, target), sample) in kinds.iter().zip(&targets).zip(samples) {
        reports.push(report(kind, &args, sample));
        // Clean up: the bench leaves nothing behind.
        let _ = raw.delete_one(doc! { "_id": target.as_str() }).await;
    }
    bar.finish_and_clear();
    if let Some(base) = reports.iter().find(|r| r.run == Kind::Raw.label()) {
        let (thr, p50) = (base.numbers_per_s, base.p50_us);
        for r in &mut reports {
            r.throughput_vs_raw = (thr > 0.0).then(|| r.numbers_per_s / thr);
            r.p50_vs_raw = (p50 > 0.0).then(|| r.p50_us / p50);
        }
    }
    print_reports(uri, &args, &reports);
    Ok(reports.iter().all(|r| r.duplicates == 0))
}

fn print_reports(uri: &str, args: &BenchArgs, reports: &[Report]) {
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "server": dispenser::redact_uri(uri),
                "processes": args.processes,
                "tasks": args.tasks,
                "runs": reports,
            })
        );
        return;
    }
    println!(
        "dispenser bench: {} process(es) x {} task(s) against {}",
        args.processes,
        args.tasks,
        dispenser::redact_uri(uri)
    );
    println!(
        "{:<26} {:>9} {:>12} {:>9} {:>9} {:>10} {:>7} {:>9} {:>8} {:>7} {:>5} {:>8} {:>8}",
        "run",
        "numbers",
        "numbers/s",
        "p50 us",
        "p99 us",
        "max us",
        "rt/num",
        "confl/num",
        "retr/num",
        "refills",
        "dups",
        "x raw/s",
        "x rawp50"
    );
    let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    for r in reports {
        println!(
            "{:<26} {:>9} {:>12.0} {:>9.1} {:>9.1} {:>10.1} {:>7.4} {:>9.4} {:>8.4} {:>7} {:>6} {:>5} {:>8} {:>8}",
            r.run,
            r.numbers,
            r.numbers_per_s,
            r.p50_us,
            r.p99_us,
            r.max_us,
            r.round_trips_per_number,
            r.conflicts_per_number,
            r.retries_per_number,
            r.block_refills,
            r.block_waits,
            r.duplicates,
            ratio(r.throughput_vs_raw),
            ratio(r.p50_vs_raw),
        );
    }
    for r in reports.iter().filter(|r| r.errors > 0) {
        println!("{}: {} draw(s) failed (see the log)", r.run, r.errors);
    }
}

/// Runs `kind` in `args.processes` worker processes and merges what they report.
async fn spawn_workers(
    uri: &str,
    options: &Options,
    args: &BenchArgs,
    kind: &Kind,
    target: &str,
    count: u64,
    duration: Option<Duration>,
) -> dispenser::Result<Sample> {
    let exe = std::env::current_exe().map_err(|e| Error::InvalidArgument {
        what: "--processes".into(),
        reason: format!("cannot find this executable to start workers: {e}"),
    })?;
    let per = count / u64::from(args.processes);
    let mut children = Vec::new();
    for p in 0..u64::from(args.processes) {
        let quota = per + u64::from(p < count % u64::from(args.processes));
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.env("MONGODB_URI", uri)
            .arg("--db")
            .arg(&options.database)
            .arg("--collection")
            .arg(&options.collection)
            .arg("--timeout")
            .arg(options.operation_timeout.as_secs_f64().to_string())
            .arg("bench")
            .arg("--worker")
            .arg(kind.encode(target))
            .arg("--tasks")
            .arg(args.tasks.to_string())
            .arg("--count")
            .arg(quota.max(1).to_string());
        if let Some(d) = duration {
            cmd.arg("--duration").arg(d.as_secs_f64().to_string());
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
        children.push(cmd.spawn().map_err(|e| Error::InvalidArgument {
            what: "--processes".into(),
            reason: format!("cannot start a worker process: {e}"),
        })?);
    }
    let mut total = Sample::default();
    for child in children {
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| Error::InvalidArgument {
                what: "--processes".into(),
                reason: format!("a worker process failed: {e}"),
            })?;
        let sample: Sample =
            serde_json::from_slice(&out.stdout).map_err(|e| Error::InvalidArgument {
                what: "--processes".into(),
                reason: format!(
                    "a worker process (exit {:?}) reported no result: {e}",
                    out.status.code()
                ),
            })?;
        total.merge(sample);
    }
    Ok(total)
}

/// A worker process: draws and prints its [`Sample`] as JSON.
async fn worker(
    uri: &str,
    options: Options,
    args: &BenchArgs,
    spec: &str,
) -> dispenser::Result<bool> {
    let (kind, target) = Kind::decode(spec)?;
    let source = source_for(&kind, &target, uri, &options).await?;
    let mut sample = draw(
        source.clone(),
        args.tasks,
        args.count,
        args.duration.map(Duration::from_secs_f64),
        &ProgressBar::hidden(),
    )
    .await;
    sample.set_stats(source.stats());
    source.close().await;
    println!("{}", serde_json::to_string(&sample).unwrap_or_default());
    Ok(true)
}
