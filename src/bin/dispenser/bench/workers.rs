//! Who draws: tasks in this process, or worker processes (this binary re-run with
//! `--worker`) that report their sample as JSON.

use std::process::Stdio;
use std::time::{Duration, Instant};

use dispenser::{Error, Options};
use indicatif::ProgressBar;

use super::samples::Sample;
use super::sources::{Kind, Source, source_for};
use crate::cli::BenchArgs;

/// Draws with `tasks` tasks from one source until `count` numbers or the deadline.
pub(super) async fn draw(
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
        &ProgressBar::hidden(),
    )
    .await;
    sample.set_stats(source.stats());
    source.close().await;
    println!("{}", serde_json::to_string(&sample).unwrap_or_default());
    Ok(true)
}
