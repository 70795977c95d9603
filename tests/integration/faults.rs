//! Faults: lost replies, connection resets, latency, client crashes and server restarts.
//! Whatever happens, no number is ever issued twice; a failed call costs at most a gap.
//!
//! Every run prints one summary line (`cargo test -- --nocapture` to see them).

use std::collections::HashSet;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dispenser::{
    Dispenser, Error, Options, Spec,
    block::BlockOptions,
    sequence::{Backoff, Strategy},
};
use futures::future::join_all;
use tokio::io::AsyncReadExt;

use crate::common::{self, DB, Fixture};
use crate::proxy::{Counts, Faults, Proxy, XorShift};

const STRATEGIES: [Strategy; 2] = [Strategy::ConditionalIncrement, Strategy::Cas];

/// The CAS retry budget under faults: short, so that a call's duration stays bounded.
const MAX_ELAPSED: Duration = Duration::from_secs(2);
/// Scheduling slack on top of the timeouts (2 shared cores, debug build).
const SLACK: Duration = Duration::from_secs(1);

fn label(s: Strategy) -> &'static str {
    match s {
        Strategy::Cas => "cas",
        _ => "inc",
    }
}

/// The longest one `next()` may take: the conditional increment is one operation; the CAS
/// may keep retrying lost races for `MAX_ELAPSED`, then read and write once more.
fn call_bound(strategy: Strategy, timeout: Duration) -> Duration {
    match strategy {
        Strategy::Cas => MAX_ELAPSED + 2 * timeout + SLACK,
        _ => timeout + SLACK,
    }
}

fn options_under_faults(o: Options, strategy: Strategy, timeout: Duration) -> Options {
    o.with_strategy(strategy)
        .with_operation_timeout(timeout)
        .with_backoff(Backoff::default().with_max_elapsed(MAX_ELAPSED))
}

/// How one call ended.
#[derive(Clone, Debug)]
enum Outcome {
    Issued(i64),
    /// `Error::Database` or `Error::Timeout`: the write may or may not have happened.
    Indeterminate,
    /// `Error::Contention`: every write lost its race; nothing was reserved.
    Contention,
}

#[derive(Clone, Debug)]
struct Call {
    task: usize,
    outcome: Outcome,
    took: Duration,
}

fn classify(r: dispenser::Result<i64>) -> Outcome {
    match r {
        Ok(n) => Outcome::Issued(n),
        Err(Error::Database { .. } | Error::Timeout { .. }) => Outcome::Indeterminate,
        Err(Error::Contention { .. }) => Outcome::Contention,
        Err(e) => panic!("unexpected error under faults: {e}"),
    }
}

/// The accounting of one run, checked by [`check_calls`].
#[derive(Debug, Default)]
struct Tally {
    attempted: usize,
    acknowledged: usize,
    indeterminate: usize,
    contention: usize,
    duplicates: usize,
    gaps: i64,
    final_value: i64,
    slowest: Duration,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "attempted {}, acknowledged {}, failed {} (indeterminate {}, contention {}), duplicates {}, gaps {}, final value {}, slowest call {:.2?}",
            self.attempted,
            self.acknowledged,
            self.indeterminate + self.contention,
            self.indeterminate,
            self.contention,
            self.duplicates,
            self.gaps,
            self.final_value,
            self.slowest
        )
    }
}

/// The unique-ids check for a sequence that started at 1 with step 1 (so its stored value
/// is the count of numbers ever reserved): no duplicates, every number within the reserved
/// range, each client's numbers increasing, every gap explained by an indeterminate call,
/// and no call slower than `bound`.
fn check_calls(what: &str, calls: &[Call], final_value: i64, bound: Duration) -> Tally {
    let mut t = Tally {
        attempted: calls.len(),
        final_value,
        ..Tally::default()
    };
    let mut seen = HashSet::new();
    let mut last_by_task = std::collections::HashMap::new();
    for c in calls {
        t.slowest = t.slowest.max(c.took);
        match c.outcome {
            Outcome::Issued(n) => {
                t.acknowledged += 1;
                if !seen.insert(n) {
                    t.duplicates += 1;
                }
                assert!(
                    (1..=final_value).contains(&n),
                    "{what}: {n} was issued but the stored value is {final_value}"
                );
                if let Some(prev) = last_by_task.insert(c.task, n) {
                    assert!(n > prev, "{what}: client {} got {n} after {prev}", c.task);
                }
            }
            Outcome::Indeterminate => t.indeterminate += 1,
            Outcome::Contention => t.contention += 1,
        }
    }
    t.gaps = final_value - i64::try_from(seen.len()).expect("small");
    assert_eq!(t.duplicates, 0, "{what}: duplicates! {t}");
    assert!(
        t.gaps <= i64::try_from(t.indeterminate).expect("small"),
        "{what}: {} numbers reserved but not issued, yet only {} calls had an unknown outcome: {t}",
        t.gaps,
        t.indeterminate
    );
    assert!(
        t.slowest <= bound,
        "{what}: a call took {:?}, more than the timeouts allow ({bound:?})",
        t.slowest
    );
    t
}

/// Opens a handle through a faulty connection: retries database errors (nothing is written).
async fn open_patiently(d: &Dispenser, name: &str) -> dispenser::Sequence {
    let mut last = None;
    for _ in 0..50 {
        match d.open(name).await {
            Ok(seq) => return seq,
            Err(e) if e.is_database() || e.is_timeout() => last = Some(e),
            Err(e) => panic!("open: {e}"),
        }
    }
    panic!("could not open {name} in 50 tries: {last:?}");
}

struct ProxyRun {
    faults: Faults,
    seed: u64,
    tasks: usize,
    per_task: usize,
    timeout: Duration,
}

/// `tasks` clients draw `per_task` numbers each through a faulty proxy; returns the checked
/// tally and what the proxy did.
/// A fresh sequence `s` (start 1, step 1) and a dispenser that reaches it through a faulty
/// proxy.
async fn behind_proxy(
    test: &str,
    strategy: Strategy,
    faults: Faults,
    seed: u64,
    timeout: Duration,
) -> (Fixture, Proxy, Dispenser) {
    let f = Fixture::new(test).await;
    f.dispenser(f.options())
        .create("s", Spec::default())
        .await
        .expect("create");
    let proxy = Proxy::to_test_server(faults, seed).await;
    let ms = timeout.as_millis();
    let uri = proxy.uri(&format!(
        "&serverSelectionTimeoutMS={ms}&connectTimeoutMS={ms}&heartbeatFrequencyMS=500"
    ));
    let options = options_under_faults(f.options(), strategy, timeout);
    let d = Dispenser::connect(&uri, options).await.expect("connect");
    (f, proxy, d)
}

/// Stops the proxy and returns what it did and the stored value of `s` (read directly).
async fn settle(f: &Fixture, proxy: Proxy) -> (Counts, i64) {
    let counts = proxy.counts();
    drop(proxy);
    // A request the proxy forwarded just before it stopped may still be executing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let value = f
        .dispenser(f.options())
        .peek("s")
        .await
        .expect("peek")
        .value;
    (counts, value)
}

async fn run_through_proxy(test: &str, strategy: Strategy, run: &ProxyRun) -> (Tally, Counts) {
    let (f, proxy, d) = behind_proxy(test, strategy, run.faults, run.seed, run.timeout).await;
    let per_task = run.per_task;
    let tasks = (0..run.tasks).map(|task| {
        let d = d.clone();
        tokio::spawn(async move {
            let seq = open_patiently(&d, "s").await;
            let mut calls = Vec::with_capacity(per_task);
            for _ in 0..per_task {
                let started = Instant::now();
                let outcome = classify(seq.next().await);
                calls.push(Call {
                    task,
                    outcome,
                    took: started.elapsed(),
                });
            }
            calls
        })
    });
    let calls: Vec<Call> = join_all(tasks)
        .await
        .into_iter()
        .flat_map(|r| r.expect("task"))
        .collect();
    let (counts, final_value) = settle(&f, proxy).await;
    let what = format!("{test}/{}", label(strategy));
    let tally = check_calls(
        &what,
        &calls,
        final_value,
        call_bound(strategy, run.timeout),
    );
    eprintln!("{what}: {tally}; {counts}");
    (tally, counts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_replies_and_resets_never_duplicate() {
    let run = ProxyRun {
        faults: Faults {
            drop_reply: 0.03,
            stall_share: 0.5,
            reset: 0.02,
            max_latency: Duration::from_millis(3),
            include_handshakes: false,
        },
        seed: 0x5EED_0001,
        tasks: 8,
        per_task: 40,
        timeout: Duration::from_secs(1),
    };
    for strategy in STRATEGIES {
        let (t, counts) = run_through_proxy("faults_lossy", strategy, &run).await;
        // The faults really happened, and the clients made progress through them.
        assert!(counts.dropped() > 0 && counts.reset_before > 0, "{counts}");
        assert!(t.indeterminate > 0, "{t}");
        assert!(t.acknowledged * 2 > t.attempted, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_handshakes_and_monitoring_never_duplicate() {
    // The same faults, now also on the driver's handshakes and heartbeats (hello/isMaster):
    // the driver loses and re-discovers the server while clients draw.
    let run = ProxyRun {
        faults: Faults {
            drop_reply: 0.04,
            stall_share: 0.5,
            reset: 0.03,
            max_latency: Duration::from_millis(2),
            include_handshakes: true,
        },
        seed: 0x5EED_0020,
        tasks: 4,
        per_task: 25,
        timeout: Duration::from_secs(1),
    };
    for strategy in STRATEGIES {
        let (t, counts) = run_through_proxy("faults_handshakes", strategy, &run).await;
        assert!(counts.dropped() + counts.reset_before > 0, "{counts}");
        assert!(t.acknowledged > 0, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_slower_than_the_timeout_make_gaps_not_duplicates() {
    // Replies take 0–400 ms against a 300 ms timeout: about one write in four is applied
    // after its caller already gave up.
    let run = ProxyRun {
        faults: Faults {
            max_latency: Duration::from_millis(400),
            ..Faults::default()
        },
        seed: 0x5EED_0002,
        tasks: 6,
        per_task: 12,
        timeout: Duration::from_millis(300),
    };
    for strategy in STRATEGIES {
        let (t, counts) = run_through_proxy("faults_slow", strategy, &run).await;
        assert!(counts.delayed > 0, "{counts}");
        assert!(t.indeterminate > 0 && t.acknowledged > 0, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_replies_with_blocks_never_duplicate() {
    let timeout = Duration::from_secs(1);
    let faults = Faults {
        drop_reply: 0.05,
        stall_share: 0.5,
        reset: 0.03,
        max_latency: Duration::from_millis(3),
        include_handshakes: false,
    };
    for (i, strategy) in STRATEGIES.into_iter().enumerate() {
        let (f, proxy, d) = behind_proxy(
            "faults_blocks",
            strategy,
            faults,
            0x5EED_0010 + i as u64,
            timeout,
        )
        .await;
        // Each task is its own block client (blocks of 8, prefetched at half).
        let tasks = (0..6).map(|task| {
            let d = d.clone();
            tokio::spawn(async move {
                let seq = open_patiently(&d, "s").await;
                let blocks = seq
                    .into_blocks(BlockOptions::default().with_size(8))
                    .expect("block options");
                let mut calls = Vec::new();
                for _ in 0..60 {
                    let started = Instant::now();
                    let outcome = classify(blocks.next().await);
                    calls.push(Call {
                        task,
                        outcome,
                        took: started.elapsed(),
                    });
                }
                let _ = blocks.close().await;
                calls
            })
        });
        let calls: Vec<Call> = join_all(tasks)
            .await
            .into_iter()
            .flat_map(|r| r.expect("task"))
            .collect();
        let (counts, value) = settle(&f, proxy).await;
        // A call may wait for a reservation in flight and then make its own.
        let bound = call_bound(strategy, timeout) + timeout;
        let what = format!("faults_blocks/{}", label(strategy));
        let mut seen = HashSet::new();
        let mut last = std::collections::HashMap::new();
        let (mut issued, mut failed) = (0_i64, 0_u32);
        for c in &calls {
            assert!(
                c.took <= bound,
                "{what}: a call took {:?} (> {bound:?})",
                c.took
            );
            match c.outcome {
                Outcome::Issued(n) => {
                    issued += 1;
                    assert!(seen.insert(n), "{what}: {n} issued twice");
                    assert!(
                        (1..=value).contains(&n),
                        "{what}: {n} beyond the stored {value}"
                    );
                    if let Some(prev) = last.insert(c.task, n) {
                        assert!(n > prev, "{what}: client {} got {n} after {prev}", c.task);
                    }
                }
                _ => failed += 1,
            }
        }
        eprintln!(
            "{what}: attempted {}, acknowledged {issued}, failed {failed}, duplicates 0, gaps {}, stored value {value}; {counts}",
            calls.len(),
            value - issued
        );
        assert!(
            counts.dropped() > 0,
            "{what}: no reply was dropped: {counts}"
        );
        assert!(
            issued * 2 > calls.len() as i64,
            "{what}: too few numbers issued"
        );
    }
}

/// Whole lines of `out` (a partial last line, cut by a kill, is discarded).
fn whole_lines(out: &[u8]) -> Vec<i64> {
    let text = String::from_utf8_lossy(out);
    let mut lines: Vec<&str> = text.split('\n').collect();
    lines.pop(); // after the last '\n': empty, or a line cut short
    lines
        .iter()
        .map(|l| l.parse().unwrap_or_else(|_| panic!("not a number: {l:?}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_processes_killed_at_random_moments_never_share_a_number() {
    const ROUNDS: usize = 6;
    const WORKERS: usize = 4;
    const COUNT: i64 = 100_000;
    let f = Fixture::new("faults_crash").await;
    let admin = f.dispenser(f.options());
    admin.create("s", Spec::default()).await.expect("create");
    // Latency on every reply widens the window in which a kill lands on a write in flight.
    let proxy = Proxy::to_test_server(
        Faults {
            max_latency: Duration::from_millis(40),
            ..Faults::default()
        },
        0x5EED_0003,
    )
    .await;
    let uri = proxy.uri("");
    let mut rng = XorShift::new(0xC0FFEE);
    let (mut completed, mut killed_silent, mut killed_mid_output) = (0, 0, 0);
    let mut block_workers = 0;
    let mut all: Vec<i64> = Vec::new();
    for round in 0..ROUNDS {
        let workers = (0..WORKERS).map(|w| {
            let strategy = if (round + w) % 2 == 0 { "inc" } else { "cas" };
            // Half the workers die at a random moment after they start, the other half at a
            // random point of their output.
            let (delay, after_bytes) = if w % 2 == 0 {
                (Duration::from_millis(rng.below(150)), None)
            } else {
                (Duration::ZERO, Some(1 + rng.below(400_000) as usize))
            };
            // A third of the workers draw through a block client (blocks of 50, prefetched):
            // a kill then loses the rest of its blocks, never issues them twice.
            let blocks: &[&str] = if (round + w) % 3 == 0 {
                &["--block", "50"]
            } else {
                &[]
            };
            let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
                .env("MONGODB_URI", &uri)
                .args(["--db", DB, "--collection", &f.collection, "--timeout", "5"])
                .args(["next", "s", "--count", &COUNT.to_string()])
                .args(["--strategy", strategy])
                .args(blocks)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("spawn dispenser");
            let mut stdout = child.stdout.take().expect("stdout");
            let mut stderr = child.stderr.take().expect("stderr");
            tokio::spawn(async move {
                let read_err = tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let _ = stderr.read_to_end(&mut buf).await;
                    buf
                });
                let deadline = tokio::time::Instant::now() + delay;
                let mut out = Vec::new();
                let mut chunk = vec![0_u8; 64 * 1024];
                let mut killed = false;
                // Read stdout until EOF (the worker finished or died); SIGKILL it on time.
                // (tokio's start_kill sends SIGKILL, like std's Child::kill; a worker that
                // already finished is not affected.)
                loop {
                    tokio::select! {
                        r = stdout.read(&mut chunk) => match r {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                out.extend_from_slice(&chunk[..n]);
                                if !killed && after_bytes.is_some_and(|b| out.len() >= b) {
                                    let _ = child.start_kill();
                                    killed = true;
                                }
                            }
                        },
                        () = tokio::time::sleep_until(deadline), if !killed && after_bytes.is_none() => {
                            let _ = child.start_kill();
                            killed = true;
                        }
                    }
                }
                let status = child.wait().await.expect("wait");
                let err = read_err.await.expect("stderr reader");
                (status, out, err, !blocks.is_empty())
            })
        });
        for r in join_all(workers.collect::<Vec<_>>()).await {
            let (status, out, err, with_blocks) = r.expect("worker");
            let got = whole_lines(&out);
            if with_blocks {
                block_workers += 1;
                // A block client's numbers increase; between its blocks others may write.
                for w in got.windows(2) {
                    assert!(w[1] > w[0], "a block worker's numbers increase: {w:?}");
                }
            } else {
                // Whatever one worker printed is one contiguous run, from its start.
                for w in got.windows(2) {
                    assert_eq!(w[1], w[0] + 1, "a worker's run is contiguous: {got:?}");
                }
            }
            if status.success() {
                completed += 1;
                assert_eq!(got.len(), COUNT as usize, "a finished worker printed all");
            } else {
                assert_eq!(
                    status.signal(),
                    Some(9),
                    "a worker failed on its own: {status:?}: {}",
                    String::from_utf8_lossy(&err)
                );
                if got.is_empty() {
                    killed_silent += 1;
                } else {
                    killed_mid_output += 1;
                }
            }
            all.extend(got);
        }
    }
    drop(proxy);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let value = admin.peek("s").await.expect("peek").value;
    let printed = all.len();
    let distinct: HashSet<i64> = all.iter().copied().collect();
    let max = all.iter().copied().max().unwrap_or(0);
    eprintln!(
        "faults_crash: {} workers ({block_workers} with blocks; {completed} finished, {killed_silent} killed before printing, {killed_mid_output} killed while printing), {printed} numbers printed, {} distinct, duplicates {}, stored value {value}, gaps {}",
        ROUNDS * WORKERS,
        distinct.len(),
        printed - distinct.len(),
        value - i64::try_from(distinct.len()).expect("small")
    );
    assert_eq!(distinct.len(), printed, "a number was printed twice");
    assert!(
        max <= value,
        "{max} printed but the stored value is {value}"
    );
    assert!(
        killed_silent + killed_mid_output > 0,
        "no worker was killed"
    );
    assert!(block_workers > 0, "no worker used blocks");
    // After all the crashes the sequence carries on above everything printed.
    let next = admin
        .open("s")
        .await
        .expect("open")
        .next()
        .await
        .expect("next");
    assert!(next > max, "{next} after {max}");
}

// ------------------------------------------------------------------ server restarts

/// `scripts/server.sh` of this repository (or `$DISPENSER_SERVER_SH`).
fn server_script() -> PathBuf {
    let path = std::env::var_os("DISPENSER_SERVER_SH").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../scripts/server.sh"
            ))
        },
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "{} is missing (set DISPENSER_SERVER_SH to the test server script)",
        path.display()
    );
    path
}

/// A test server process on an H2 data file. Killed (SIGKILL) if still running when dropped.
struct H2Server {
    child: std::process::Child,
    port: u16,
}

impl Drop for H2Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl H2Server {
    /// Starts `server.sh run --backend h2` on `dir/x.h2` and `port` (0: any), and waits until
    /// it listens.
    fn start(dir: &Path, port: u16) -> H2Server {
        let port_file = dir.join("port");
        let _ = fs::remove_file(&port_file);
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("server.log"))
            .expect("log file");
        let mut child = std::process::Command::new("bash")
            .arg(server_script())
            .args(["run", "--backend", "h2", "--data"])
            .arg(dir.join("x.h2"))
            .args(["--port", &port.to_string(), "--port-file"])
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn server.sh");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(text) = fs::read_to_string(&port_file)
                && let Ok(p) = text.trim().parse::<u16>()
            {
                return H2Server { child, port: p };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the h2 server exited ({status}) during startup: {}",
                    fs::read_to_string(dir.join("server.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "the h2 server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn uri(&self) -> String {
        format!(
            "mongodb://127.0.0.1:{}/?directConnection=true&serverSelectionTimeoutMS=1000&connectTimeoutMS=1000&heartbeatFrequencyMS=500",
            self.port
        )
    }

    /// Sends `signal` (`TERM` or `KILL`) and waits for the process to exit.
    fn stop(&mut self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().expect("try_wait").is_none() {
            assert!(Instant::now() < deadline, "the server ignored SIG{signal}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir = std::env::temp_dir().join(common::unique(test));
        fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const UP: u8 = 0;
const DOWN: u8 = 1;
const RESTARTED: u8 = 2;

/// One call during a restart: the phase when it started and when it ended.
struct PhasedCall {
    call: Call,
    started_in: u8,
    ended_in: u8,
}

/// What one stop-and-restart cycle observed.
struct Restart {
    calls: Vec<PhasedCall>,
    stored_value: i64,
}

/// `tasks` clients draw from `name` while the server is stopped with `signal` mid-run and
/// restarted on the same data file and port; returns every call once each client has drawn
/// after the restart.
async fn restart_cycle(
    server: &mut H2Server,
    dir: &Path,
    strategy: Strategy,
    signal: &str,
    collection: &str,
) -> Restart {
    const TASKS: usize = 4;
    const WARM: u64 = 80;
    let timeout = Duration::from_secs(1);
    let uri = server.uri();
    let options = options_under_faults(
        Options::default()
            .with_database(DB)
            .with_collection(collection),
        strategy,
        timeout,
    );
    let name = label(strategy);
    let d = Dispenser::connect(&uri, options).await.expect("connect");
    d.create(name, Spec::default()).await.expect("create");
    let phase = Arc::new(AtomicU8::new(UP));
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let acked_after = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (d, phase, stop) = (d.clone(), phase.clone(), stop.clone());
            let (acked, acked_after) = (acked.clone(), acked_after.clone());
            tokio::spawn(async move {
                let seq = d.open(name).await.expect("open");
                let mut calls = Vec::new();
                let mut mine_after = 0;
                // Each client keeps drawing until told to stop, and at least once after the
                // restart.
                while !(stop.load(Ordering::SeqCst) && mine_after > 0) {
                    let started_in = phase.load(Ordering::SeqCst);
                    let started = Instant::now();
                    let outcome = classify(seq.next().await);
                    let took = started.elapsed();
                    let ended_in = phase.load(Ordering::SeqCst);
                    if let Outcome::Issued(_) = outcome {
                        acked.fetch_add(1, Ordering::SeqCst);
                        if started_in == RESTARTED {
                            mine_after += 1;
                            acked_after.fetch_add(1, Ordering::SeqCst);
                        }
                    } else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    calls.push(PhasedCall {
                        call: Call {
                            task,
                            outcome,
                            took,
                        },
                        started_in,
                        ended_in,
                    });
                }
                calls
            })
        })
        .collect();
    let wait_for = |counter: Arc<AtomicU64>, n: u64, what: &'static str| async move {
        let deadline = Instant::now() + Duration::from_secs(30);
        while counter.load(Ordering::SeqCst) < n {
            assert!(Instant::now() < deadline, "clients stalled: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    wait_for(acked.clone(), WARM, "before the stop").await;
    phase.store(DOWN, Ordering::SeqCst);
    server.stop(signal);
    // Down for longer than the timeouts: every client sees errors.
    tokio::time::sleep(timeout + Duration::from_millis(500)).await;
    let port = server.port;
    *server = H2Server::start(dir, port);
    assert_eq!(server.port, port, "restarted on the same port");
    phase.store(RESTARTED, Ordering::SeqCst);
    wait_for(acked_after.clone(), WARM, "after the restart").await;
    stop.store(true, Ordering::SeqCst);
    let calls = join_all(tasks)
        .await
        .into_iter()
        .flat_map(|r| r.expect("task"))
        .collect();
    let stored_value = d.peek(name).await.expect("peek").value;
    Restart {
        calls,
        stored_value,
    }
}

/// Issued numbers of the calls matching `keep`.
fn issued(calls: &[PhasedCall], keep: impl Fn(&PhasedCall) -> bool) -> Vec<i64> {
    calls
        .iter()
        .filter(|c| keep(c))
        .filter_map(|c| match c.call.outcome {
            Outcome::Issued(n) => Some(n),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gracefully_restarted_server_keeps_its_state_and_clients_carry_on() {
    let dir = TempDir::new("faults_restart");
    let mut server = H2Server::start(&dir.0, 0);
    let collection = common::unique("faults_restart");
    for strategy in STRATEGIES {
        let r = restart_cycle(&mut server, &dir.0, strategy, "TERM", &collection).await;
        let what = format!("faults_restart/{}", label(strategy));
        let calls: Vec<Call> = r.calls.iter().map(|c| c.call.clone()).collect();
        let bound = call_bound(strategy, Duration::from_secs(1));
        let t = check_calls(&what, &calls, r.stored_value, bound);
        let before = issued(&r.calls, |c| c.ended_in != RESTARTED);
        let after = issued(&r.calls, |c| c.started_in == RESTARTED);
        let failed_while_down = r
            .calls
            .iter()
            .filter(|c| c.started_in == DOWN && !matches!(c.call.outcome, Outcome::Issued(_)))
            .count();
        let max_before = before.iter().copied().max().unwrap_or(0);
        let min_after = after.iter().copied().min().unwrap_or(0);
        eprintln!(
            "{what}: {t}; {} issued before the restart (max {max_before}), {} after (min {min_after}), {failed_while_down} calls failed while the server was down",
            before.len(),
            after.len()
        );
        assert!(
            failed_while_down > 0,
            "clients saw no errors while it was down"
        );
        // The state survived: after the restart every number is above every number issued
        // before it, and the stored value covers them all.
        assert!(
            min_after > max_before,
            "{what}: {min_after} issued after the restart, {max_before} before"
        );
        assert!(
            !after.is_empty(),
            "{what}: nothing issued after the restart"
        );
    }
}

/// The binary run with `args` in `collection` through `uri`, killed after 30 s: its exit
/// code, stdout, stderr and how long it took.
async fn cli_through(
    uri: &str,
    collection: &str,
    args: &[&str],
) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", uri)
        .args(["--db", DB, "--collection", collection, "--caller", "faults"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run dispenser");
    match tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await {
        Ok(out) => {
            let out = out.expect("output");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
                started.elapsed(),
            )
        }
        Err(_) => (
            None,
            String::new(),
            "killed after 30 s".into(),
            started.elapsed(),
        ),
    }
}

/// The index of the first request `command` on `target` the command `args` sends (learnt
/// through an untouched run of it, after `set_up` made what it needs).
async fn index_of(collection: &str, args: &[&str], command: &str, target: &str) -> usize {
    let proxy = Proxy::to_test_server(Faults::default(), 1).await;
    proxy.script(None);
    let (code, _, err, _) = cli_through(&proxy.uri(""), collection, args).await;
    assert_eq!(code, Some(0), "{args:?}: {err}");
    let seen = proxy.seen();
    seen.iter()
        .position(|s| s.command == command && s.target == target)
        .unwrap_or_else(|| panic!("{args:?} sent no {command} on {target}: {seen:?}"))
}

/// Regression (issue 49, item 3): through a server that never answered `listIndexes` (the
/// unique-index check of a gap-free sequence's first use), `--timeout 2 gapless issue` ran
/// for minutes. It ends within its timeout, and says nothing was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gapless_issue_ends_within_its_timeout_when_the_index_check_never_answers() {
    let args = ["gapless", "issue", "inv"];
    let made = |f: &Fixture, b: &str| {
        let (d, options) = (
            f.dispenser(f.options()),
            dispenser::gapless::GaplessOptions::new(b, "n"),
        );
        async move { d.create_gapless("inv", options).await.expect("create") }
    };
    let f = Fixture::new("issue_hung_index").await;
    let b = format!("{}_b", f.collection);
    made(&f, &b).await;
    let at = index_of(&f.collection, &args, "listIndexes", &b).await;
    let f = Fixture::new("issue_hung_index").await;
    let b = format!("{}_b", f.collection);
    made(&f, &b).await;
    let proxy = Proxy::to_test_server(Faults::default(), 2).await;
    proxy.script(Some((at, crate::proxy::Fault::NeverAnswer)));
    let timed = [&["--timeout", "1"][..], &args[..]].concat();
    let (code, out, err, took) = cli_through(&proxy.uri(""), &f.collection, &timed).await;
    assert!(
        took < Duration::from_secs(1) + SLACK * 4,
        "took {took:?}: {err}"
    );
    assert_eq!(code, Some(5), "{err}");
    assert!(
        out.is_empty() && err.contains("nothing was written"),
        "{err}"
    );
}

/// Regression (issue 49, item 6): a connection cut after a `queue take` was sent printed
/// "is the server running and MONGODB_URI right?" (exit 5); the server was reached and the
/// take may have happened. It says the outcome is unknown (exit 13) and to take again with
/// the same request id, which then answers the ticket the first take got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_cut_after_its_write_is_of_unknown_outcome_and_its_request_id_finds_the_ticket() {
    let take = ["queue", "take", "q", "--request-id", "kiosk-7"];
    let queues = |f: &Fixture| format!("{}_queues", f.collection);
    let f = Fixture::new("take_cut").await;
    let d = f.dispenser(f.options());
    d.create_queue("q", Default::default()).await.unwrap();
    let at = index_of(&f.collection, &take, "update", &queues(&f)).await;

    let f = Fixture::new("take_cut").await;
    let d = f.dispenser(f.options());
    d.create_queue("q", Default::default()).await.unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 3).await;
    proxy.script(Some((at, crate::proxy::Fault::ResetAfter)));
    let (code, _, err, _) = cli_through(&proxy.uri(""), &f.collection, &take).await;
    assert_eq!(code, Some(13), "{err}");
    assert!(err.contains("unknown"), "{err}");
    assert!(err.contains("--request-id kiosk-7"), "{err}");
    assert!(!err.contains("is the server running"), "{err}");
    // The take happened (the proxy forwarded it): the same id learns its ticket.
    let (code, out, err, _) = cli_through(&common::uri(), &f.collection, &take).await;
    assert_eq!((code, out.trim()), (Some(0), "1"), "{err}");
    let q = d.open_queue("q").await.unwrap();
    assert_eq!(q.peek().await.unwrap().taken, 1);
}

/// Regression (issue 49, item 9): a command's handle, dropped at its end, leaves the count of
/// the numbers it issued to a write of its own; the process ended (and shut its runtime
/// down) under that write — which lost the count, and twice in ~116 timed-out draws panicked
/// inside the driver (`JoinError::Cancelled`). The command waits for the write, even a slow
/// one, and never panics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_waits_for_its_handles_usage_count_before_it_exits() {
    let f = Fixture::new("usage_at_exit").await;
    let d = f.dispenser(f.options());
    // Three runs (one wraps): the first write carries its count, the later two stay pending
    // until the handle goes; the wrap is a compare-and-set (`update`), the count the next
    // `update`.
    d.create("t", Spec::default().with_max(2).with_cycle(true))
        .await
        .unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 4).await;
    let gate = proxy.hold_after("update", &f.collection, 1);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", proxy.uri(""))
        .args(["--db", DB, "--collection", &f.collection])
        .args(["next", "t", "--count", "6"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::select! {
        () = gate.arrived() => {
            // Slow, not lost: the count lands half a second later.
            tokio::time::sleep(Duration::from_millis(500)).await;
            gate.open();
        }
        _ = child.wait() => {}
    }
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the command ends")
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .await
        .unwrap();
    assert!(status.success() && !err.contains("panicked"), "{err}");
    let counted: i64 = d
        .peek("t")
        .await
        .unwrap()
        .issued_by_day
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert_eq!(counted, 6, "the usage counters count every number issued");
}
