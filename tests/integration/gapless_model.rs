//! The randomized, seeded, model-based test of gap-free sequences: for a while, everything
//! that can happen to one sequence happens at once, and then the business collection is
//! held against what every actor was told.
//!
//! **Actors** (real concurrency: tokio tasks on four threads, and OS processes):
//!
//! * three handles (as three processes would have), two tasks each, issuing with business
//!   writes that succeed, fail before writing, panic, **stall past their lease** (then
//!   write), write and then fail (a lost reply), or are **cancelled** midway;
//! * a voider that **voids the next number** (racing the holders, their hand-overs and the
//!   stalled writes) and tries numbers that are not the next one;
//! * an operator that **releases** whoever holds the next number — half the time with
//!   **force**, so live holders lose their number to a void document and their late write
//!   meets it at the unique index — and **changes the longest lease**, at times below the
//!   holders' lease (300 ms → 200 ms: their leases are cut short, by the server);
//! * **CLI holders** (`dispenser gapless issue --field meta.number`), some with a clock an
//!   hour ahead or behind (libfaketime), **SIGKILLed** at random moments or held before or
//!   after their write and then killed; CLI voiders with a skewed clock; three seconds
//!   before the end, a holder an hour ahead killed holding its number (and no skewed holder
//!   after it, which could take its lease over by its own wrong clock). In that quiet
//!   moment, chosen by the seed, the unique index is **dropped**; the next operation must
//!   create it again before it relies on it.
//!
//! The number field is nested (`meta.number`), the lease 300 ms, the wait 30 s.
//!
//! **Oracle**, after a last issue moves the sequence past whatever the dead holders left:
//!
//! * the business collection's numbers — business documents plus void documents — are
//!   exactly 1…N, none twice, and none both voided and used;
//! * every number an `issue` returned is carried by that call's own document, every number
//!   a void reported voided by a void document with that void's reason, and every number a
//!   CLI holder printed by that holder's document; a document of a call that failed exists
//!   only where its write may have landed (a lost reply, a cancelled call);
//! * calls are in order: a call that began after another returned got a larger number;
//! * nothing waited its `wait` out (`Contention`), and no error other than the business
//!   write's own came back; a CLI holder not killed exited 0 (or was refused because the
//!   operator had lowered the longest lease below its lease);
//! * every number a release reported voided is a void document with that release's reason;
//! * every look-up that could move the sequence past a number read with majority read
//!   concern (from the commands the driver sent);
//! * `audit` (library and CLI) finds 1…N clean and lists the voids; the status has no lease
//!   and `next` N + 1.
//!
//! The operator's releases, the longest lease and the dropped index were added after the
//! mutation table below was measured; they are not in it yet.
//!
//! Before the run it opens the sequence over a unique index that is partial, sparse or
//! collated (chosen by the seed) and expects a refusal that names it.
//!
//! It prints its seed; `DISPENSER_GAPLESS_SEED=<seed>` replays the choices (the timing of
//! real threads and processes is not replayable), `DISPENSER_SOAK_SECS=<s>` runs longer
//! (default: 12 s of activity, about 20 s in all).
//!
//! **Sensitivity**, measured by mutation: each fix of the gap-free protocol reverted in turn, and two
//! protocol mistakes planted, each followed by five default runs (12 s) of this test on the
//! local server (2026-11-23; each patch is named in the table):
//!
//! | mutation | caught | by |
//! |---|---|---|
//! | item 1 reverted: a void moves the state past the number and writes no void document | 5 of 5 | a voided number with no document (4 runs), a number both voided and used (1 run; 2 of 5 in an earlier batch) |
//! | item 2 reverted: leases timed by the callers' clocks (`lease.at` from the client, expiry judged with the client's time) | 5 of 5 | the last issue waits its 30 s out behind the holder an hour ahead |
//! | item 3 reverted: the look-up without majority read concern | 5 of 5 | the monitored look-up |
//! | item 4 reverted: the CLI inserts a top-level key `"meta.number"` | 5 of 5 | CLI holders fail on a duplicate key on null; documents without the number |
//! | item 5 reverted: a partial, sparse or collated unique index accepted | 5 of 5 | the refusal at the start |
//! | planted: a failed business write moves the sequence past its number | 5 of 5 | not exactly 1…N (a gap) |
//! | planted: a waiter moves a live holder's number on without looking it up | 5 of 5 | a gap |
//!
//! (Why the holder ahead is set up so carefully: with skewed holders only at random, item 2
//! reverted was caught in 0 of 7 runs — the skewed holder took over a holder's run of used
//! numbers, which waiters then moved past; with the holder ahead on a quiet sequence but
//! skewed voiders after it, 1 of 2 — a voider an hour ahead voided the held number; with the
//! number under it possibly used by a lost reply, 3 of 4.)

use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dispenser::gapless::{Gapless, GaplessAlter, GaplessOptions, Released};
use dispenser::mongodb::bson::{Bson, Document, doc};
use dispenser::{Dispenser, Error};

use crate::common::{self, DB, Fixture};
use crate::gapless::{cli, skewed};
use crate::proxy::XorShift;

const LEASE: Duration = Duration::from_millis(300);

/// Held (shared) by every in-process call and void; the CLI actor takes it alone to set up
/// the holder ahead on a quiet sequence.
type Gate = Arc<tokio::sync::RwLock<()>>;
const WAIT: Duration = Duration::from_secs(30);
const FIELD: &str = "meta.number";

/// What a business write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behaviour {
    Write,
    FailBefore,
    Panic,
    /// Sleeps this long (past the lease, often) on its first run, then writes.
    Stall(u64),
    /// Writes, then reports a failure (the reply was lost).
    WriteThenFail,
    /// The call is dropped after this long; the write sleeps up to 300 ms first.
    Cancel(u64, u64),
}

impl Behaviour {
    fn pick(rng: &mut XorShift) -> Behaviour {
        match rng.below(100) {
            0..60 => Behaviour::Write,
            60..70 => Behaviour::FailBefore,
            70..74 => Behaviour::Panic,
            74..84 => Behaviour::Stall(150 + rng.below(650)),
            84..92 => Behaviour::WriteThenFail,
            _ => Behaviour::Cancel(20 + rng.below(400), rng.below(300)),
        }
    }

    /// Whether the call's document may exist although the call did not return a number.
    fn may_leave_a_document(self) -> bool {
        matches!(self, Behaviour::WriteThenFail | Behaviour::Cancel(..))
    }
}

#[derive(Clone, Debug)]
enum Outcome {
    Issued(i64),
    BusinessWrite,
    Cancelled,
    Unexpected(String),
}

#[derive(Clone, Debug)]
struct Call {
    tag: i64,
    behaviour: Behaviour,
    started: Instant,
    ended: Instant,
    outcome: Outcome,
}

/// What the actors were told, for the oracle.
#[derive(Default)]
struct Record {
    calls: Vec<Call>,
    /// Voids that succeeded: number → reason.
    voids: BTreeMap<i64, String>,
    /// Failures that are the test's, not the business write's.
    unexpected: Vec<String>,
    /// CLI holders: tag → numbers printed.
    cli_numbers: HashMap<String, Vec<i64>>,
    /// Whether the unique index was dropped during the run.
    index_dropped: bool,
    /// Releases: voided, moved past used numbers (forced ones among them).
    released: (u32, u32, u32),
}

/// One in-process issuing task: random behaviours until the deadline.
async fn issuer(
    g: Gapless,
    mut rng: XorShift,
    deadline: Instant,
    tags: Arc<AtomicU64>,
    rec: Arc<Mutex<Record>>,
    gate: Gate,
) {
    while Instant::now() < deadline {
        let _shared = gate.read().await;
        let behaviour = Behaviour::pick(&mut rng);
        let tag = tags.fetch_add(1, SeqCst) as i64;
        let coll = g.business().clone();
        let runs = Arc::new(AtomicU64::new(0));
        let write = |n: i64| {
            let (coll, first) = (coll.clone(), runs.fetch_add(1, SeqCst) == 0);
            async move {
                let body = doc! { "meta": { "number": n }, "tag": tag };
                match behaviour {
                    Behaviour::Write => coll.insert_one(body).await.map(drop).map_err(Into::into),
                    Behaviour::FailBefore => Err::<(), Box<dyn std::error::Error + Send + Sync>>(
                        "the customer is blocked".into(),
                    ),
                    Behaviour::Panic => panic!("the invoice template is broken"),
                    Behaviour::Stall(ms) => {
                        if first {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        }
                        coll.insert_one(body).await.map(drop).map_err(Into::into)
                    }
                    Behaviour::WriteThenFail => {
                        coll.insert_one(body).await?;
                        Err("the reply was lost".into())
                    }
                    Behaviour::Cancel(_, sleep) => {
                        tokio::time::sleep(Duration::from_millis(sleep)).await;
                        coll.insert_one(body).await.map(drop).map_err(Into::into)
                    }
                }
            }
        };
        let started = Instant::now();
        let result = match behaviour {
            Behaviour::Cancel(after, _) => {
                tokio::time::timeout(Duration::from_millis(after), g.issue(write))
                    .await
                    .ok()
            }
            _ => Some(g.issue(write).await),
        };
        let outcome = match result {
            None => Outcome::Cancelled,
            Some(Ok(i)) => Outcome::Issued(i.number),
            Some(Err(Error::BusinessWrite { reason, .. })) => {
                let expected = match behaviour {
                    Behaviour::FailBefore => reason.contains("blocked"),
                    Behaviour::Panic => reason.contains("panicked"),
                    Behaviour::WriteThenFail => reason.contains("reply was lost"),
                    _ => false,
                };
                if expected {
                    Outcome::BusinessWrite
                } else {
                    Outcome::Unexpected(format!("{behaviour:?}: business write error {reason}"))
                }
            }
            Some(Err(e)) => Outcome::Unexpected(format!("{behaviour:?}: {e}")),
        };
        let mut r = rec.lock().unwrap();
        if let Outcome::Unexpected(e) = &outcome {
            r.unexpected.push(format!("call {tag}: {e}"));
        }
        r.calls.push(Call {
            tag,
            behaviour,
            started,
            ended: Instant::now(),
            outcome,
        });
    }
}

/// The voider: now and then, voids the next number — trying again every few milliseconds
/// while a live lease holds it, so it often lands right when a lease ran out (a stalled
/// holder's, a killed one's) or is handed over — and tries numbers that are not next.
async fn voider(
    g: Gapless,
    mut rng: XorShift,
    deadline: Instant,
    rec: Arc<Mutex<Record>>,
    gate: Gate,
) {
    let mut k = 0;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20 + rng.below(200))).await;
        let _shared = gate.read().await;
        for _ in 0..100 {
            let next = match g.peek().await {
                Ok(s) => s.next,
                Err(e) => {
                    rec.lock().unwrap().unexpected.push(format!("status: {e}"));
                    break;
                }
            };
            k += 1;
            let target = match rng.below(12) {
                0 => next - 1,
                1 => next + 1,
                _ => next,
            };
            let reason = format!("void-{k}");
            match g.void(target, &reason).await {
                Ok(()) => {
                    // (`next` may have moved between the status and the void: it was next then.)
                    rec.lock().unwrap().voids.insert(target, reason);
                    break;
                }
                Err(e)
                    if e.kind() == dispenser::error::ErrorKind::InvalidInput
                        || matches!(e, Error::LeaseHeld { .. }) =>
                {
                    tokio::time::sleep(Duration::from_millis(1 + rng.below(4))).await;
                }
                Err(e) => {
                    rec.lock()
                        .unwrap()
                        .unexpected
                        .push(format!("void {target}: {e}"));
                    break;
                }
            }
        }
    }
}

/// The operator: now and then ends the lease of whoever holds the next number (forced half
/// the time: a live holder then loses its number to a void document, and its late write
/// meets that document at the unique index), and changes the longest lease — at times below
/// the holders' lease, which cuts the leases short. Leaves the longest lease at 5 minutes
/// (and stops changing it 4 s before the deadline, before the CLI actors' quiet moment).
async fn operator(
    g: Gapless,
    mut rng: XorShift,
    deadline: Instant,
    rec: Arc<Mutex<Record>>,
    gate: Gate,
) {
    let mut k = 0;
    let unexpected = |e: String| rec.lock().unwrap().unexpected.push(e);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100 + rng.below(300))).await;
        let _shared = gate.read().await;
        k += 1;
        if rng.chance(0.3) {
            if deadline.saturating_duration_since(Instant::now()) > Duration::from_secs(4) {
                let ms = [200, 300, 2_000, 300_000][rng.below(4) as usize];
                if let Err(e) = g
                    .alter(GaplessAlter::default().with_max_lease(Duration::from_millis(ms)))
                    .await
                {
                    unexpected(format!("max lease {ms} ms: {e}"));
                }
            }
            continue;
        }
        let s = match g.peek().await {
            Ok(s) => s,
            Err(e) => {
                unexpected(format!("operator's status: {e}"));
                continue;
            }
        };
        let Some(lease) = s.lease else { continue };
        let reason = format!("release-{k}");
        let force = rng.chance(0.5);
        match g.release(lease.number, &reason).force(force).await {
            Ok(r) => {
                let mut rec = rec.lock().unwrap();
                match r {
                    Released::Voided(n) => {
                        rec.voids.insert(n, reason);
                        rec.released.0 += 1;
                    }
                    _ => rec.released.1 += 1,
                }
                rec.released.2 += u32::from(force);
            }
            // Raced: the holder finished, or the lease runs (not forced).
            Err(e)
                if e.kind() == dispenser::error::ErrorKind::InvalidInput
                    || matches!(e, Error::LeaseHeld { .. }) => {}
            Err(e) => unexpected(format!("release {} (force {force}): {e}", lease.number)),
        }
    }
    if let Err(e) = g
        .alter(GaplessAlter::default().with_max_lease(Duration::from_secs(300)))
        .await
    {
        unexpected(format!("max lease back to 5 min: {e}"));
    }
}

/// Starts a CLI holder; returns it with its tag.
fn cli_holder(f: &Fixture, i: usize, rng: &mut XorShift, skew: bool) -> (Child, String) {
    let tag = format!("cli-{i}");
    let mut c = cli(f);
    c.args(["gapless", "issue", "inv"])
        .args(["--lease", "0.3", "--count", &(1 + rng.below(6)).to_string()])
        .args(["--doc", &format!(r#"{{"by": "{tag}"}}"#)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match rng.below(4) {
        0 if skew => {
            skewed(&mut c, "+1h");
        }
        1 if skew => {
            skewed(&mut c, "-1h");
        }
        _ => {}
    }
    match rng.below(5) {
        0 => {
            c.env("DISPENSER_TEST_GAPLESS_HOLD", "before");
        }
        1 => {
            c.env("DISPENSER_TEST_GAPLESS_HOLD", "after");
        }
        _ => {}
    }
    (c.spawn().expect("start a CLI holder"), tag)
}

/// The CLI actors: holders started now and then, killed at random; skewed voiders.
fn cli_actors(
    f: &Fixture,
    business: &str,
    seed: u64,
    deadline: Instant,
    rec: Arc<Mutex<Record>>,
    gate: Gate,
    rt: tokio::runtime::Handle,
) {
    let mut rng = XorShift::new(seed ^ 0xC11);
    let mut i = 0;
    let mut running: Vec<(Child, String, Instant, bool)> = Vec::new();
    // Three seconds before the end, on a quiet sequence (no call running, the other CLI
    // holders killed and their leases run out), a holder whose clock runs an hour ahead
    // takes a number and is killed holding it; no skewed holder or voider follows (one could
    // take its lease over, or void its number, by its own wrong clock). The others must get
    // past it within its lease.
    let ahead_at = deadline - Duration::from_secs(3);
    let mut ahead_done = false;
    while Instant::now() < deadline {
        if !ahead_done && Instant::now() >= ahead_at {
            ahead_done = true;
            let quiet = gate.blocking_write();
            for (mut child, tag, _, _) in running.drain(..) {
                let _ = child.kill();
                finish_cli(child, tag, true, &rec);
            }
            std::thread::sleep(LEASE * 2);
            // The holders' lease fits again (the operator may have lowered the longest lease).
            let out = cli(f)
                .args(["gapless", "alter", "inv", "--max-lease", "300"])
                .output()
                .expect("run gapless alter");
            finish_output(out, "cli-alter".to_owned(), false, &rec);
            // Now and then someone drops the unique index: the next issue creates it again.
            if rng.chance(0.5) {
                let coll = f.client.database(DB).collection::<Document>(business);
                if let Err(e) = rt.block_on(std::future::IntoFuture::into_future(
                    coll.drop_index(format!("{FIELD}_1")),
                )) {
                    rec.lock()
                        .unwrap()
                        .unexpected
                        .push(format!("dropping the index: {e}"));
                }
                rec.lock().unwrap().index_dropped = true;
            }
            // One plain issue moves past whatever is used already (a lost reply's document
            // on the released number): the holder ahead then takes an unused number.
            let out = cli(f)
                .args(["gapless", "issue", "inv"])
                .args(["--lease", "0.3", "--doc", r#"{"by": "cli-before-ahead"}"#])
                .output()
                .expect("run a CLI issue");
            finish_output(out, "cli-before-ahead".to_owned(), false, &rec);
            let mut c = cli(f);
            c.args(["gapless", "issue", "inv"])
                .args(["--lease", "0.3", "--doc", r#"{"by": "cli-ahead"}"#])
                .env("DISPENSER_TEST_GAPLESS_HOLD", "before")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = skewed(&mut c, "+1h")
                .spawn()
                .expect("start the holder ahead");
            let mut line = String::new();
            let stderr = child.stderr.take().expect("stderr");
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stderr), &mut line);
            let _ = child.kill();
            let _ = child.wait();
            if !line.starts_with("holding ") {
                rec.lock()
                    .unwrap()
                    .unexpected
                    .push(format!("the holder ahead said {line:?}"));
            }
            drop(quiet);
        }
        if running.len() < 3 && rng.chance(0.5) {
            let (child, tag) = cli_holder(f, i, &mut rng, !ahead_done);
            i += 1;
            let kill_at = Instant::now() + Duration::from_millis(50 + rng.below(1200));
            let kill = rng.chance(0.6);
            running.push((child, tag, kill_at, kill));
        }
        if rng.chance(0.15) {
            let status = cli(f).args(["gapless", "peek", "inv", "--json"]).output();
            if let Ok(out) = status
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout)
                && let Some(n) = v["next"].as_i64()
            {
                let reason = format!("cli-void-{i}-{n}");
                let mut c = cli(f);
                c.args([
                    "gapless",
                    "void",
                    "inv",
                    &n.to_string(),
                    "--reason",
                    &reason,
                ]);
                if !ahead_done {
                    skewed(&mut c, if rng.chance(0.5) { "+1h" } else { "-1h" });
                }
                match c.output().map(|o| (o.status.code(), o)) {
                    Ok((Some(0), _)) => {
                        rec.lock().unwrap().voids.insert(n, reason);
                    }
                    // Refused: not the next number (2), or held by a live lease (6).
                    Ok((Some(2 | 6), _)) => {}
                    Ok((code, o)) => rec.lock().unwrap().unexpected.push(format!(
                        "CLI void exited {code:?}: {}",
                        String::from_utf8_lossy(&o.stderr)
                    )),
                    Err(e) => rec
                        .lock()
                        .unwrap()
                        .unexpected
                        .push(format!("CLI void: {e}")),
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20 + rng.below(120)));
        let now = Instant::now();
        let mut still = Vec::new();
        for (mut child, tag, kill_at, kill) in running.drain(..) {
            let held = child.try_wait().ok().flatten().is_none();
            if held && (now < kill_at || !kill) && now < kill_at + Duration::from_secs(8) {
                still.push((child, tag, kill_at, kill));
                continue;
            }
            if held {
                let _ = child.kill(); // SIGKILL
            }
            finish_cli(child, tag, held, &rec);
        }
        running = still;
    }
    for (mut child, tag, _, _) in running {
        let _ = child.kill();
        finish_cli(child, tag, true, &rec);
    }
}

fn finish_cli(child: Child, tag: String, killed: bool, rec: &Arc<Mutex<Record>>) {
    let out = child.wait_with_output().expect("wait for a CLI holder");
    finish_output(out, tag, killed, rec);
}

fn finish_output(out: std::process::Output, tag: String, killed: bool, rec: &Arc<Mutex<Record>>) {
    let printed: Vec<i64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let mut r = rec.lock().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Refused, nothing written: the operator had lowered the longest lease below 300 ms.
    let lease_refused =
        out.status.code() == Some(2) && stderr.contains("longer than the sequence's longest lease");
    if !killed && !out.status.success() && !lease_refused {
        r.unexpected.push(format!(
            "{tag} exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    r.cli_numbers.entry(tag).or_default().extend(printed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gap_free_model_holders_voids_kills_and_skewed_clocks_leave_exactly_one_to_n() {
    let seed = crate::common::seed("DISPENSER_GAPLESS_SEED");
    let secs: u64 = std::env::var("DISPENSER_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    println!("gap-free model: seed {seed} (replay: DISPENSER_GAPLESS_SEED={seed}), {secs} s");
    let f = Fixture::new("gapless_model").await;
    let business = format!("{}_inv", f.collection);
    let mut rng = XorShift::new(seed);

    // Watch the look-ups the library sends.
    let (client, finds) = common::client_recording("find", &business).await;
    let d = Dispenser::new(&client, f.options()).unwrap();
    let options = GaplessOptions::new(&business, FIELD)
        .with_lease(LEASE)
        .with_wait(WAIT)
        .with_void_extra(doc! { "status": "VOID" });

    // A weak unique index is refused, naming it.
    {
        use dispenser::mongodb::IndexModel;
        use dispenser::mongodb::options::{Collation, IndexOptions};
        let weak = format!("{business}_weak");
        let b = IndexOptions::builder().unique(true).name("weak".to_owned());
        let (kind, io) = match rng.below(3) {
            0 => (
                "partial",
                b.partial_filter_expression(doc! { FIELD: { "$gt": 0 } })
                    .build(),
            ),
            1 => ("sparse", b.sparse(true).build()),
            _ => (
                "collat",
                b.collation(Collation::builder().locale("fr").build())
                    .build(),
            ),
        };
        client
            .database(DB)
            .collection::<Document>(&weak)
            .create_index(
                IndexModel::builder()
                    .keys(doc! { FIELD: 1 })
                    .options(io)
                    .build(),
            )
            .await
            .unwrap();
        let mut o = options.clone();
        o.collection = weak;
        match d.ensure_gapless("weak", o).await {
            Err(e) => assert!(
                e.to_string().contains("\"weak\"") && e.to_string().contains(kind),
                "seed {seed}: {e}"
            ),
            Ok(_) => panic!("seed {seed}: a {kind} unique index was accepted"),
        }
    }

    let g0 = d.ensure_gapless("inv", options.clone()).await.unwrap();
    let rec: Arc<Mutex<Record>> = Arc::default();
    let tags = Arc::new(AtomicU64::new(1));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let gate: Gate = Arc::default();
    let mut tasks = Vec::new();
    for h in 0..3_u64 {
        let g = if h == 0 {
            g0.clone()
        } else {
            d.ensure_gapless("inv", options.clone()).await.unwrap()
        };
        for t in 0..2_u64 {
            let r = XorShift::new(seed ^ (h * 16 + t + 1).wrapping_mul(0x9E37_79B9));
            tasks.push(tokio::spawn(issuer(
                g.clone(),
                r,
                deadline,
                tags.clone(),
                rec.clone(),
                gate.clone(),
            )));
        }
    }
    let og = d.open_gapless("inv").await.unwrap();
    tasks.push(tokio::spawn(operator(
        og,
        XorShift::new(seed ^ 0x0BE7),
        deadline,
        rec.clone(),
        gate.clone(),
    )));
    let vg = d.open_gapless("inv").await.unwrap();
    tasks.push(tokio::spawn(voider(
        vg,
        XorShift::new(seed ^ 0x701D),
        deadline,
        rec.clone(),
        gate.clone(),
    )));
    let clis = {
        let (f2, business, rec) = (
            Fixture {
                client: f.client.clone(),
                collection: f.collection.clone(),
            },
            business.clone(),
            rec.clone(),
        );
        let (gate, rt) = (gate.clone(), tokio::runtime::Handle::current());
        std::thread::spawn(move || cli_actors(&f2, &business, seed, deadline, rec, gate, rt))
    };
    for t in tasks {
        t.await.expect("an actor panicked");
    }
    clis.join().expect("the CLI actors panicked");

    // Move past whatever the dead holders left, with one last number.
    let last = d.ensure_gapless("inv", options.clone()).await.unwrap();
    let coll = last.business().clone();
    let n = last
        .issue(|n| {
            let coll = coll.clone();
            async move {
                coll.insert_one(doc! { "meta": { "number": n }, "tag": -1_i64 })
                    .await
            }
        })
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: the last issue: {e}"))
        .number;
    last.flush().await.unwrap();
    g0.flush().await.unwrap();

    let rec = std::mem::take(&mut *rec.lock().unwrap());
    assert!(
        rec.unexpected.is_empty(),
        "seed {seed}: {:#?}",
        rec.unexpected
    );

    // The business collection: numbers 1..=n, each once; voids and uses apart.
    let docs: Vec<Document> = {
        use futures::TryStreamExt;
        client
            .database(DB)
            .collection::<Document>(&business)
            .find(doc! {})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    };
    let mut by_number: BTreeMap<i64, Vec<&Document>> = BTreeMap::new();
    for doc in &docs {
        let m = doc
            .get_document("meta")
            .ok()
            .and_then(|m| m.get_i64("number").ok())
            .unwrap_or_else(|| panic!("seed {seed}: a document without meta.number: {doc:?}"));
        by_number.entry(m).or_default().push(doc);
    }
    let is_void = |d: &Document| d.get_document("voided").is_ok();
    let voided: HashSet<i64> = by_number
        .iter()
        .filter(|(_, d)| is_void(d[0]))
        .map(|(m, _)| *m)
        .collect();

    // Every void that succeeded is a void document with its reason; no other void exists.
    for (m, reason) in &rec.voids {
        let d = by_number.get(m).unwrap_or_else(|| {
            panic!("seed {seed}: {m} was voided ({reason}) but no document carries it")
        })[0];
        assert!(
            is_void(d),
            "seed {seed}: {m} was voided ({reason}) but is used: {d:?}"
        );
        assert_eq!(
            d.get_document("voided").unwrap().get_str("reason"),
            Ok(reason.as_str()),
            "seed {seed}"
        );
        assert_eq!(d.get_str("status"), Ok("VOID"), "seed {seed}");
    }
    assert_eq!(
        voided.len(),
        rec.voids.len(),
        "seed {seed}: void documents nobody was told about"
    );

    let numbers: Vec<i64> = by_number.keys().copied().collect();
    assert_eq!(
        numbers,
        (1..=n).collect::<Vec<_>>(),
        "seed {seed}: not exactly 1..={n}"
    );
    for (m, ds) in &by_number {
        assert_eq!(ds.len(), 1, "seed {seed}: {m} carried twice: {ds:?}");
    }

    // Every number issued is its own call's document; failed calls left documents only where
    // their write may have landed.
    let calls: HashMap<i64, &Call> = rec.calls.iter().map(|c| (c.tag, c)).collect();
    let mut issued = 0;
    for c in &rec.calls {
        if let Outcome::Issued(m) = c.outcome {
            issued += 1;
            let d = by_number
                .get(&m)
                .unwrap_or_else(|| panic!("seed {seed}: issued {m} has no document"))[0];
            assert!(
                !voided.contains(&m),
                "seed {seed}: {m} both issued and voided"
            );
            assert_eq!(
                d.get_i64("tag"),
                Ok(c.tag),
                "seed {seed}: {m} issued to call {} carries {d:?}",
                c.tag
            );
        }
    }
    for d in &docs {
        match d.get("tag") {
            Some(Bson::Int64(-1)) => {}
            Some(Bson::Int64(t)) => {
                let c = calls
                    .get(t)
                    .unwrap_or_else(|| panic!("seed {seed}: unknown tag {d:?}"));
                let own = matches!(c.outcome, Outcome::Issued(m) if Some(m) == d.get_document("meta").ok().and_then(|x| x.get_i64("number").ok()));
                assert!(
                    own || c.behaviour.may_leave_a_document(),
                    "seed {seed}: call {t} ({:?}, {:?}) left {d:?}",
                    c.behaviour,
                    c.outcome
                );
            }
            _ => {
                let by = d.get_str("by").ok();
                assert!(
                    is_void(d) || by.is_some_and(|b| b.starts_with("cli-")),
                    "seed {seed}: {d:?}"
                );
            }
        }
    }
    for (tag, printed) in &rec.cli_numbers {
        for m in printed {
            assert_eq!(
                by_number[m][0].get_str("by"),
                Ok(tag.as_str()),
                "seed {seed}: {tag} printed {m}"
            );
        }
    }

    // In order: a call that began after another returned got a larger number.
    let mut ok: Vec<(Instant, Instant, i64)> = rec
        .calls
        .iter()
        .filter_map(|c| match c.outcome {
            Outcome::Issued(m) => Some((c.started, c.ended, m)),
            _ => None,
        })
        .collect();
    ok.sort_by_key(|c| c.0);
    let mut ended: Vec<(Instant, i64)> = ok.iter().map(|c| (c.1, c.2)).collect();
    ended.sort();
    let (mut j, mut max_before) = (0, i64::MIN);
    for (started, _, m) in &ok {
        while j < ended.len() && ended[j].0 < *started {
            max_before = max_before.max(ended[j].1);
            j += 1;
        }
        assert!(
            *m > max_before,
            "seed {seed}: {m} issued after {max_before} had returned"
        );
    }

    // Look-ups that can move the sequence on read majority.
    for q in finds.lock().unwrap().iter() {
        if q.get_document("filter")
            .is_ok_and(|f| f.to_string().contains("$gte"))
            && q.get("sort").is_some()
        {
            let level = q
                .get_document("readConcern")
                .ok()
                .and_then(|r| r.get_str("level").ok());
            assert_eq!(level, Some("majority"), "seed {seed}: {q:?}");
        }
    }

    // The audit and the status agree.
    let a = common::audit_of(&last, Some(1)).await.unwrap();
    assert!(a.is_clean(), "seed {seed}: {a:?}");
    assert_eq!(
        (a.numbers, a.last, a.voided),
        (n as u64, Some(n), voided.len() as u64),
        "seed {seed}"
    );
    let out = cli(&f)
        .args([
            "audit", &business, "--field", FIELD, "--from", "1", "--json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["clean"].as_bool(), v["missing"].as_u64()),
        (Some(true), Some(0)),
        "seed {seed}: {v}"
    );
    let s = last.peek().await.unwrap();
    assert_eq!(
        (s.next, s.lease.is_some(), s.unique_index),
        (n + 1, false, true),
        "seed {seed}: {s:?}"
    );
    let kinds = |b: fn(&Behaviour) -> bool| rec.calls.iter().filter(|c| b(&c.behaviour)).count();
    println!(
        "gap-free model: seed {seed}: {n} numbers, {issued} issued in process, {} voided, {} CLI holders \
         ({} numbers printed), {} stalls, {} cancels, {} lost replies, releases {:?} (voided, used, forced), index dropped: {}",
        voided.len(),
        rec.cli_numbers.len(),
        rec.cli_numbers.values().map(Vec::len).sum::<usize>(),
        kinds(|b| matches!(b, Behaviour::Stall(_))),
        kinds(|b| matches!(b, Behaviour::Cancel(..))),
        kinds(|b| matches!(b, Behaviour::WriteThenFail)),
        rec.released,
        rec.index_dropped,
    );
}
