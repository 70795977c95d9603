//! Who draws: tasks in this process, or worker processes (this binary re-run with
//! `--worker`) that report their sample as JSON.

use std::process::Stdio;
use std::time::{Duration, Instant};

use dispenser::{Error, Options};
use indicatif::ProgressBar;

use super::args::BenchArgs;
use super::samples::{Call, Sample, order_violations};
use super::sources::{Kind, Source, source_for};

/// With blocks, one call in this many is timed (see [`draw`]).
pub(super) const SAMPLE_EVERY: u64 = 64;

/// Draws with `tasks` tasks from one source until `count` numbers or the deadline, whichever
/// comes first (at least one of them is given).
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
    count: Option<u64>,
    duration: Option<Duration>,
    every_call: bool,
    bar: &ProgressBar,
) -> Sample {
    let tasks_n = u64::from(tasks);
    // Where each task keeps its numbers, made before the clock starts: a run of a fixed count
    // has its whole quota allocated and written once, so that the memory's first touch (a
    // page fault per 512 numbers) is not timed as the draws'.
    let quotas: Vec<u64> = (0..tasks_n)
        .map(|t| match count {
            Some(count) => count / tasks_n + u64::from(t < count % tasks_n),
            None => u64::MAX,
        })
        .collect();
    let kept: Vec<Chunked> = quotas
        .iter()
        .map(|&q| Chunked::new(q, duration.is_none()))
        .collect();
    let started = Instant::now();
    let deadline = duration.map(|d| started + d);
    let mut handles = Vec::new();
    for (t, (quota, mut numbers)) in (0_u64..).zip(quotas.into_iter().zip(kept)) {
        let source = source.clone();
        let bar = bar.clone();
        handles.push(tokio::spawn(async move {
            let mut s = Sample::default();
            let mut calls = Vec::new();
            // xorshift64 state: any non-zero seed, different per task.
            let mut rng = 0x9E37_79B9_7F4A_7C15_u64 ^ (t + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            let mut pending = 0;
            let mut drawn = 0;
            loop {
                if drawn >= quota {
                    break;
                }
                if let Some(d) = deadline
                    && drawn % 64 == 0
                    && Instant::now() >= d
                {
                    break;
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
                        numbers.push(n);
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
            // This task's time, taken before its numbers are joined or merged with others'.
            s.elapsed_s = started.elapsed().as_secs_f64();
            bar.inc(pending);
            s.numbers = numbers.into_vec();
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
    // `total.elapsed_s` is the slowest task's (merge keeps the longest): the time spent
    // joining and merging the numbers afterwards is the bench's, not the draws'.
    total.order_violations = every_call.then(|| order_violations(&calls));
    total
}

/// The numbers a task drew, in chunks of fixed size: a long run (`--duration` draws hundreds
/// of millions) never copies what it already holds while the clock runs, as one growing
/// vector would; [`Chunked::into_vec`] joins them after the clock stops.
struct Chunked {
    full: Vec<Vec<i64>>,
    current: Vec<i64>,
}

impl Chunked {
    /// The numbers per chunk once the first is full.
    const CHUNK: usize = 1 << 20;

    /// The most numbers a task's first chunk holds when the whole quota is made ahead
    /// (`whole`): 1 GiB.
    const WHOLE_AT_MOST: usize = 1 << 27;

    /// With `whole` (a run of a fixed count), the first chunk holds the whole `quota` (at most
    /// [`Self::WHOLE_AT_MOST`]) and is written once, so that its pages are mapped before the
    /// clock starts; else it holds `quota` numbers when that is less than a chunk (a short run
    /// then allocates just its size).
    fn new(quota: u64, whole: bool) -> Self {
        let most = if whole {
            Self::WHOLE_AT_MOST
        } else {
            Self::CHUNK
        };
        let first = usize::try_from(quota).map_or(most, |q| q.clamp(1, most));
        let mut current = Vec::with_capacity(first);
        if whole {
            // Touched, then emptied: the capacity (and its mapped pages) stays.
            current.resize(first, 0);
            std::hint::black_box(&mut current);
            current.clear();
        }
        Chunked {
            full: Vec::new(),
            current,
        }
    }

    fn push(&mut self, n: i64) {
        if self.current.len() == self.current.capacity() {
            let next = Vec::with_capacity(Self::CHUNK);
            self.full.push(std::mem::replace(&mut self.current, next));
        }
        self.current.push(n);
    }

    /// Every number, in the order pushed.
    fn into_vec(mut self) -> Vec<i64> {
        if self.full.is_empty() {
            return self.current;
        }
        self.full.push(self.current);
        self.full.concat()
    }
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
    count: Option<u64>,
    duration: Option<Duration>,
) -> dispenser::Result<Sample> {
    let exe = std::env::current_exe().map_err(|e| Error::InvalidArgument {
        what: "--processes".into(),
        reason: format!("cannot find this executable to start workers: {e}"),
    })?;
    let processes = u64::from(args.processes);
    let mut children = Vec::new();
    for p in 0..processes {
        let quota = count.map(|c| c / processes + u64::from(p < c % processes));
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
        if let Some(d) = duration {
            cmd.arg("--duration").arg(d.as_secs_f64().to_string());
        }
        if let Some(q) = quota {
            cmd.arg("--count").arg(q.max(1).to_string());
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
        args.count_cap(),
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

#[cfg(test)]
mod tests {
    use super::Chunked;

    /// Across chunk boundaries (a small first chunk, then full ones, then a partial one)
    /// every number comes back once, in order.
    #[test]
    fn chunked_numbers_come_back_in_order() {
        for whole in [false, true] {
            for (quota, n) in [(0_u64, 0_i64), (3, 3), (3, 10), (5, 2 * 1024 * 1024 + 7)] {
                let mut c = Chunked::new(quota, whole);
                // Made ahead, a chunk holds nothing yet (its zeros are not numbers).
                assert!(c.current.is_empty());
                for i in 0..n {
                    c.push(i);
                }
                let v = c.into_vec();
                assert_eq!(v.len(), usize::try_from(n).unwrap(), "quota {quota}");
                assert!(
                    v.iter().copied().eq(0..n),
                    "quota {quota}, whole {whole}: numbers out of order"
                );
            }
        }
    }
}
