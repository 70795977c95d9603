//! `dispenser bench`: throughput, latency, round trips and duplicates, measured against the
//! raw driver call in the same invocation, with the same concurrency, on the same server.
//!
//! Every number drawn is kept and checked for duplicates; a duplicate fails the command.
//! With `--processes P` the same run is spread over P worker processes (this binary, re-run
//! with a hidden `--worker` flag) that report their numbers and latencies as JSON.

use std::time::Duration;

use dispenser::{Dispenser, Options, options::Strategy};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::exit::Outcome;
use args::{BenchArgs, OnOff};
use print::print_reports;
use rtt::DelayProxy;
use samples::{Sample, report, set_ratios};
use sources::{Kind, clean_up, client, prepare_target, raw_collection, source_for};
use workers::{draw, spawn_workers, worker};

pub mod args;
mod growth;
mod history;
mod http;
mod print;
mod rtt;
mod samples;
mod scale;
mod sources;
mod tls;
mod workers;

/// Entry point of `dispenser bench`: [`Outcome::Duplicate`] when a duplicate was found.
pub async fn run(uri: &str, options: Options, args: BenchArgs) -> dispenser::Result<Outcome> {
    options.validate()?;
    Ok(if measure(uri, options, args).await? {
        Outcome::Done
    } else {
        Outcome::Duplicate
    })
}

/// `bench --rtt MS --delay-line`: prints the URI through the delay line and serves it until
/// standard input closes (read on a thread: a blocking read), then says what it applied.
async fn delay_line(proxy: &DelayProxy, through: &str) -> dispenser::Result<bool> {
    use std::io::{Read, Write};
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "MONGODB_URI={through}");
        let _ = out.flush();
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = [0_u8; 256];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    let _ = rx.await;
    eprintln!(
        "dispenser: the delay line held each chunk {:.3} ms each way (median)",
        proxy.held().as_secs_f64() * 1000.0
    );
    Ok(true)
}

/// Runs the benchmark (or, with `--worker`, one worker process of it); `Ok(false)` when a
/// duplicate was found. With `--rtt` every database connection of the run (the worker
/// processes' too: they connect through this process's proxy) is made through the delay
/// proxy.
async fn measure(uri: &str, options: Options, args: BenchArgs) -> dispenser::Result<bool> {
    if let Some(spec) = &args.worker {
        return worker(uri, options, &args, spec).await;
    }
    if let Some(n) = args.scale {
        scale::run(uri, options, &args, n).await?;
        return Ok(true);
    }
    if args.queue_growth {
        growth::run(uri, options, &args).await?;
        return Ok(true);
    }
    if let Some(n) = args.history {
        history::run(uri, options, &args, n).await?;
        return Ok(true);
    }
    let proxy = match args.rtt {
        Some(ms) => Some(DelayProxy::start(uri, ms)?),
        None => None,
    };
    let through = match &proxy {
        Some(p) => p.uri(uri)?,
        None => uri.to_owned(),
    };
    if let (true, Some(p)) = (args.delay_line, &proxy) {
        return delay_line(p, &through).await;
    }
    if args.http {
        return http::run(uri, &through, options, &args, proxy.as_ref()).await;
    }
    let kinds = kinds(&args);
    let uri_shown = uri;
    let uri = through.as_str();
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
    let cap = args.count_cap();
    let total = match (duration, cap) {
        (None, Some(n)) => n * kinds.len() as u64,
        _ => 0,
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
            Some(args.warmup),
            None,
            kind.every_call_a_round_trip(),
            &ProgressBar::hidden(),
        )
        .await;
        source.close().await;
        clean_up(&d, &raw, kind, &target).await;
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
        let quota = cap.map(|c| c / rounds + u64::from(round < c % rounds));
        let slice = duration.map(|d| d / args.rounds);
        for (((kind, target), total), source) in
            kinds.iter().zip(&targets).zip(&mut samples).zip(&sources)
        {
            if quota == Some(0) {
                continue;
            }
            bar.set_message(kind.label());
            let sample = match source {
                Some(source) => {
                    let every_call = kind.every_call_a_round_trip();
                    draw(source.clone(), args.tasks, quota, slice, every_call, &bar).await
                }
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
        clean_up(&d, &raw, kind, target).await;
    }
    bar.finish_and_clear();
    set_ratios(&kinds, &mut reports);
    print_reports(
        uri_shown,
        &args,
        proxy.as_ref().map(DelayProxy::label),
        &reports,
    );
    Ok(reports.iter().all(|r| r.duplicates == 0))
}

/// The runs of this invocation, in the order they are measured in each round.
fn kinds(args: &BenchArgs) -> Vec<Kind> {
    let chosen: Strategy = args.strategy.into();
    let coalesce = args.coalesce == OnOff::On;
    if args.suite {
        // What the benchmarks chapter tabulates, each beside its raw call.
        let d = Options::default();
        return vec![
            Kind::Raw,
            Kind::HandLoop,
            Kind::Seq(d.strategy, d.coalesce),
            Kind::Seq(Strategy::Cas, true),
            Kind::Blocks(
                Strategy::ConditionalIncrement,
                SUITE_BLOCK,
                dispenser::block::DEFAULT_PREFETCH,
                true,
            ),
            Kind::RawInsert,
            Kind::Gapless,
            Kind::QueueTake,
        ];
    }
    if args.gapless {
        return vec![Kind::RawInsert, Kind::Gapless];
    }
    if args.queue {
        return vec![Kind::Raw, Kind::QueueTake];
    }
    // Blocks take the library's defaults (prefetch 0.5) unless --no-prefetch.
    let measured = if args.block > 1 || args.prefetch.is_some() {
        let prefetch = if args.no_prefetch {
            0.0
        } else {
            args.prefetch.unwrap_or(dispenser::block::DEFAULT_PREFETCH)
        };
        Kind::Blocks(chosen, args.block, prefetch, coalesce)
    } else {
        Kind::Seq(chosen, coalesce)
    };
    if !args.compare {
        return vec![measured];
    }
    // The library's default (coalesced) beside the same strategy with one write per call.
    let mut kinds = vec![
        Kind::Raw,
        Kind::RawShaped,
        Kind::Seq(Strategy::ConditionalIncrement, true),
        Kind::Seq(Strategy::Cas, true),
        Kind::Seq(Strategy::ConditionalIncrement, false),
    ];
    if !kinds.contains(&measured) {
        kinds.push(measured);
    }
    kinds
}

/// The block size of `--suite`'s block run.
const SUITE_BLOCK: u64 = 1000;
