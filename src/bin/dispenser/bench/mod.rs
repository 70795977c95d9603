//! `dispenser bench`: throughput, latency, round trips and duplicates, measured against the
//! raw driver call in the same invocation, with the same concurrency, on the same server.
//!
//! Every number drawn is kept and checked for duplicates; a duplicate fails the command.
//! With `--processes P` the same run is spread over P worker processes (this binary, re-run
//! with a hidden `--worker` flag) that report their numbers and latencies as JSON.

use std::time::Duration;

use dispenser::mongodb::bson::doc;
use dispenser::{Dispenser, Options, options::Strategy};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::exit::Outcome;
use args::{BenchArgs, OnOff};
use print::print_reports;
use samples::{Sample, report};
use sources::{Kind, client, prepare_target, raw_collection, source_for};
use workers::{draw, spawn_workers, worker};

pub mod args;
mod growth;
mod http;
mod print;
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

/// Runs the benchmark (or, with `--worker`, one worker process of it); `Ok(false)` when a
/// duplicate was found.
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
    if args.http {
        return http::run(uri, options, &args).await;
    }
    let chosen: Strategy = args.strategy.into();
    let coalesce = args.coalesce == OnOff::On;
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
    let mut kinds = vec![measured.clone()];
    if args.gapless {
        kinds = vec![Kind::RawInsert, Kind::Gapless];
    }
    if args.compare {
        // The library's default (coalesced) beside the same strategy with one write per call.
        kinds = vec![
            Kind::Raw,
            Kind::RawShaped,
            Kind::Seq(Strategy::ConditionalIncrement, true),
            Kind::Seq(Strategy::Cas, true),
            Kind::Seq(Strategy::ConditionalIncrement, false),
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
            kind.every_call_a_round_trip(),
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
        let _ = raw.delete_one(doc! { "_id": target.as_str() }).await;
        if matches!(kind, Kind::RawInsert | Kind::Gapless) {
            let db = raw_client.database(&options.database);
            let _ = db
                .collection::<dispenser::mongodb::bson::Document>(&sources::business_of(&d, target))
                .drop()
                .await;
            let _ = db
                .collection::<dispenser::mongodb::bson::Document>(&format!(
                    "{}_gapless",
                    options.collection
                ))
                .delete_one(doc! { "_id": target.as_str() })
                .await;
        }
    }
    bar.finish_and_clear();
    let baseline = if args.gapless {
        Kind::RawInsert
    } else {
        Kind::Raw
    };
    if let Some(base) = reports.iter().find(|r| r.run == baseline.label()) {
        let (thr, p50) = (base.numbers_per_s, base.p50_us);
        for r in &mut reports {
            r.throughput_vs_raw = (thr > 0.0).then(|| r.numbers_per_s / thr);
            r.p50_vs_raw = (p50 > 0.0).then(|| r.p50_us / p50);
        }
    }
    print_reports(uri, &args, &reports);
    Ok(reports.iter().all(|r| r.duplicates == 0))
}
