//! Who draws: tasks in this process, or worker processes (this binary re-run with
//! `--worker`) that report their sample as JSON.

use std::process::Stdio;
use std::time::{Duration, Instant};

use dispenser::{Error, Options};
use indicatif::ProgressBar;

use super::samples::{Call, Sample, order_violations};
use super::sources::{Kind, Source, source_for};
use crate::cli::BenchArgs;

/// With blocks, one call in this many is timed (see [`draw`]).
pub(super) const SAMPLE_EVERY: u64 = 64;

/// Draws with `tasks` tasks from one source until `count` numbers or the deadline.
///
/// How calls are timed, so that the harness does not dominate what it measures:
/// - `every_call` (runs without blocks: every call is a database round trip of tens of
///   microseconds or more, against two clock reads of tens of nanoseconds): every call is
///   timed, and its invoke and return instants are kept for the order check
///   ([`order_violations`], within this process).
/// - otherwise (blocks: most calls take tens of nanoseconds, where two clock reads per call
///   would double the cost): one call in [`SAMPLE_EVERY`] is timed, chosen at random per
///   call by a xorshift draw (so the sample cannot lock onto the period of the block
///   boundaries); the percentiles and max come from the timed calls only, and the report
///   says how many (`timed_calls`). The order is not checked.
pub(super) async fn draw(
    source: Source,
    tasks: u32,
    count: u64,
    duration: Option<Duration>,
    every_call: bool,
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
            // Room for the whole quota up front (up to 64 Mi numbers), so the run does not
            // pay for copying the vector as it grows.
            s.numbers
                .reserve(usize::try_from(quota.min(1 << 26)).unwrap_or(0));
            let mut calls = Vec::new();
            // xorshift64 state: any non-zero seed, different per task.
            let mut rng = 0x9E37_79B9_7F4A_7C15_u64 ^ (t + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
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
                let timed = every_call || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng.is_multiple_of(SAMPLE_EVERY)
                };
                let t0 = timed.then(Instant::now);
                match source.next().await {
                    Ok(n) => {
                        if let Some(t0) = t0 {
                            let t1 = Instant::now();
                            s.latencies_ns.push(nanos(t1 - t0));
                            if every_call {
                                calls.push(Call {
                                    invoked_ns: nanos(t0 - started),
                                    returned_ns: nanos(t1 - started),
                                    number: n,
                                });
                            }
                        }
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
            (s, calls)
        }));
    }
    let mut total = Sample::default();
    let mut calls = Vec::new();
    for h in handles {
        if let Ok((s, c)) = h.await {
            total.merge(s);
            calls.extend(c);
        } else {
            total.errors += 1;
        }
    }
    total.elapsed_s = started.elapsed().as_secs_f64();
    total.order_violations = every_call.then(|| order_violations(&calls));
    total
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Runs `kind` in `args.processes` worker processes and merges what they report.
pub(super) async fn spawn_workers(
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
            .arg(args.tasks.to_string());
        // `--count` and `--duration` conflict: a worker gets one of them.
        match duration {
            Some(d) => cmd.arg("--duration").arg(d.as_secs_f64().to_string()),
            None => cmd.arg("--count").arg(quota.max(1).to_string()),
        };
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
pub(super) async fn worker(
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
        kind.every_call_a_round_trip(),
        &ProgressBar::hidden(),
    )
    .await;
    sample.set_stats(source.stats());
    source.close().await;
    println!("{}", serde_json::to_string(&sample).unwrap_or_default());
    Ok(true)
}
