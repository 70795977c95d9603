//! The randomized, seeded, model-based test: it interleaves draws from many kinds of handle
//! (both strategies, runs, block clients with prefetch, stripes, daily scopes, CLI
//! processes) with admin operations (reset forward, forced reset backwards, advance-to,
//! set-format, delete and re-create at another start, striped advance, scope clean-up), and
//! checks what the library promises:
//!
//! * **Within one era no number is issued twice.** An era of a sequence ends with a forced
//!   reset backwards or a delete followed by a re-create that does not continue past every
//!   issued number (a re-create at a start beyond them continues the era). A call is attributed to an
//!   era by its time window — from its start (for a block client: from the client's
//!   creation, since its numbers may have been reserved then) to its return. A window that
//!   lies inside one era is *definite*; one that overlaps an era change may belong to either
//!   side, and its number must be unique among the definite numbers of at least one of them.
//! * **Every call ends within its documented bound** (the compare-and-set's retry budget plus
//!   two operation timeouts).
//! * **`peek` agrees with the model:** at the end, the stored value is at or past every number
//!   of the last era, and fresh draws repeat none of them.
//!
//! It prints its seed; `DISPENSER_MODEL_SEED=<seed>` replays one, `DISPENSER_SOAK_SECS=<s>`
//! runs longer (default: a short run for `scripts/test.sh`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dispenser::{Backoff, Dispenser, Error, Format, Options, Spec, Strategy, block::BlockOptions};
use futures::future::join_all;

use crate::common::{self, DB, Fixture};

/// splitmix64: small, seedable, good enough to pick interleavings.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One call's numbers and the window they were fixed in.
#[derive(Clone, Debug)]
struct Obs {
    from: Instant,
    to: Instant,
    numbers: Vec<i64>,
    who: String,
}

/// What happened to the sequence under test, shared by the tasks of a run.
#[derive(Default)]
struct Log {
    obs: Vec<Obs>,
    /// The windows of era-changing operations, in order.
    era_changes: Vec<(Instant, Instant)>,
    /// The slowest call, and what it was.
    slowest: (Duration, String),
    ops: BTreeMap<&'static str, u64>,
}

type Shared = Arc<Mutex<Log>>;

fn record(log: &Shared, from: Instant, numbers: Vec<i64>, who: String) {
    let to = Instant::now();
    let mut l = log.lock().unwrap();
    if to - from > l.slowest.0 && !who.starts_with("block") && !who.starts_with("cli") {
        l.slowest = (to - from, who.clone());
    }
    if !numbers.is_empty() {
        l.obs.push(Obs {
            from,
            to,
            numbers,
            who,
        });
    }
}

fn count(log: &Shared, op: &'static str) {
    *log.lock().unwrap().ops.entry(op).or_default() += 1;
}

/// Errors a draw may meet while admin operations run: the sequence deleted for a moment,
/// a reset racing a block client's close.
fn tolerated(e: &Error) -> bool {
    matches!(
        e,
        Error::NoSuchSequence { .. } | Error::Closed { .. } | Error::WouldGoBackwards { .. }
    )
}

const OP_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_ELAPSED: Duration = Duration::from_secs(10);

fn options(f: &Fixture, strategy: Strategy) -> Options {
    f.options()
        .with_strategy(strategy)
        .with_operation_timeout(OP_TIMEOUT)
        .with_backoff(
            Backoff::default()
                .with_max_attempts(10_000)
                .with_max_elapsed(MAX_ELAPSED),
        )
}

/// Draw tasks of one round against "orders".
async fn draw_round(
    seed: u64,
    handles: Vec<dispenser::Sequence>,
    d: Dispenser,
    f_coll: String,
    log: Shared,
    blocks_allowed: bool,
) {
    let mut rng = Rng(seed);
    let mut tasks = Vec::new();
    let kinds = rng.range(3, 7);
    for t in 0..kinds {
        let kind = rng.below(if blocks_allowed { 5 } else { 4 });
        let calls = rng.range(5, 30) as usize;
        let tseed = rng.next_u64();
        let log = log.clone();
        match kind {
            // A long-lived handle (it outlives deletes and resets), single numbers.
            0 | 1 => {
                let h = handles[rng.below(handles.len() as u64) as usize].clone();
                tasks.push(tokio::spawn(async move {
                    let mut r = Rng(tseed);
                    for _ in 0..calls {
                        let from = Instant::now();
                        let n = if r.chance(30) {
                            r.range(2, 6) as u64
                        } else {
                            1
                        };
                        match h.next_n(n).await {
                            Ok(run) => {
                                record(&log, from, run.into_iter().collect(), format!("handle {t}"))
                            }
                            Err(e) if tolerated(&e) || e.is_exhausted() => {
                                record(&log, from, vec![], format!("handle {t}"))
                            }
                            Err(e) => panic!("draw failed: {e}"),
                        }
                    }
                }));
            }
            // A fresh handle per call.
            2 => {
                let d = d.clone();
                tasks.push(tokio::spawn(async move {
                    for _ in 0..calls {
                        let from = Instant::now();
                        match d.open("orders").await {
                            Ok(h) => match h.next().await {
                                Ok(n) => record(&log, from, vec![n], format!("fresh {t}")),
                                Err(e) if tolerated(&e) => {}
                                Err(e) => panic!("draw failed: {e}"),
                            },
                            Err(e) if tolerated(&e) => {}
                            Err(e) => panic!("open failed: {e}"),
                        }
                    }
                }));
            }
            // A CLI process (another OS process), either strategy, sometimes with blocks.
            3 => {
                let coll = f_coll.clone();
                let mut args: Vec<String> = vec![
                    "--db".into(),
                    DB.into(),
                    "--collection".into(),
                    coll,
                    "next".into(),
                    "orders".into(),
                    "--count".into(),
                    calls.to_string(),
                    "--strategy".into(),
                    if tseed.is_multiple_of(2) {
                        "cas"
                    } else {
                        "inc"
                    }
                    .into(),
                ];
                if tseed.is_multiple_of(3) {
                    args.push("--block".into());
                    args.push("4".into());
                }
                tasks.push(tokio::spawn(async move {
                    let from = Instant::now();
                    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
                        .env("MONGODB_URI", common::uri())
                        .args(&args)
                        .output()
                        .await
                        .expect("run the CLI");
                    let numbers: Vec<i64> = String::from_utf8_lossy(&out.stdout)
                        .lines()
                        .map(|l| l.trim().parse().expect("a number per line"))
                        .collect();
                    let code = out.status.code();
                    // 0, or 3 (deleted meanwhile), 6 (a reset raced a give-back).
                    assert!(
                        matches!(code, Some(0 | 3 | 6)),
                        "cli {args:?} exited {code:?}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    record(&log, from, numbers, format!("cli {t}"));
                }));
            }
            // A block client with prefetch, created and closed in this round.
            _ => {
                let d = d.clone();
                let size = rng.range(3, 40) as u64;
                tasks.push(tokio::spawn(async move {
                    let created = Instant::now();
                    let Ok(b) = d
                        .open_blocks("orders", BlockOptions::default().with_size(size))
                        .await
                    else {
                        return;
                    };
                    for _ in 0..calls {
                        match b.next().await {
                            Ok(n) => record(&log, created, vec![n], format!("block {t}")),
                            Err(e) if tolerated(&e) => break,
                            Err(e) => panic!("block draw failed: {e}"),
                        }
                    }
                    let _ = b.close().await;
                }));
            }
        }
    }
    for t in join_all(tasks).await {
        t.expect("draw task");
    }
}

/// Admin operations of one round against "orders". Returns after all of them.
async fn admin_round(
    seed: u64,
    d: Dispenser,
    raw: dispenser::mongodb::Collection<dispenser::mongodb::bson::Document>,
    log: Shared,
    era_changes: bool,
) {
    let mut rng = Rng(seed);
    for _ in 0..rng.range(1, 3) {
        tokio::time::sleep(Duration::from_millis(rng.below(40))).await;
        let value = match d.peek("orders").await {
            Ok(s) => s.value,
            Err(e) if tolerated(&e) => continue,
            Err(e) => panic!("peek failed: {e}"),
        };
        let op = rng.below(if era_changes { 8 } else { 5 });
        match op {
            0 => {
                count(&log, "reset forward");
                let r = d.reset("orders", value + rng.range(1, 40), false).await;
                assert!(r.is_ok() || r.as_ref().is_err_and(tolerated), "{r:?}");
            }
            1 => {
                count(&log, "advance-to");
                d.advance_to("orders", value + rng.range(0, 60))
                    .await
                    .unwrap();
            }
            2 => {
                count(&log, "set-format");
                let f = Format::parse(&format!("O-{{n:0{}}}", rng.range(1, 9))).unwrap();
                d.set_format("orders", Some(&f)).await.unwrap();
            }
            4 => {
                // Alter the live sequence: a wider bound or another step. Never backwards,
                // so the era goes on.
                count(&log, "alter (step or max)");
                let change = if rng.chance(50) {
                    dispenser::Alter::default().with_step(rng.range(1, 3))
                } else {
                    dispenser::Alter::default().with_max(i64::MAX - rng.range(0, 1000))
                };
                let r = d.alter("orders", change).await;
                assert!(r.is_ok() || r.as_ref().is_err_and(tolerated), "{r:?}");
            }
            3 => {
                count(&log, "ensure (same spec)");
                // The sequence may have been re-created at another start: a conflict then.
                let r = d.ensure("orders", Spec::default()).await;
                assert!(
                    r.is_ok() || matches!(r, Err(Error::SpecConflict { .. })),
                    "{r:?}"
                );
            }
            5 => {
                count(&log, "forced reset backwards (new era)");
                let from = Instant::now();
                let target = rng.range(1, value.clamp(1, 200));
                d.reset("orders", target, true).await.unwrap();
                log.lock().unwrap().era_changes.push((from, Instant::now()));
            }
            6 => {
                // A delete and a re-create that continues past every issued number keeps the
                // era. Then the new document is written until it reaches the version the old
                // one had: a handle that remembers the old incarnation's state must not take
                // it for the new one's.
                count(
                    &log,
                    "delete + re-create ahead, catch up the version (same era)",
                );
                // The deleted document says how far it got (draws race the delete, so a
                // peek before it could be behind).
                let old = raw
                    .find_one_and_delete(dispenser::mongodb::bson::doc! { "_id": "orders" })
                    .await
                    .unwrap()
                    .expect("orders exists");
                let (value, old_version) = (
                    old.get_i64("value").unwrap(),
                    old.get_i64("version").unwrap(),
                );
                d.create(
                    "orders",
                    Spec::default().with_start(value + rng.range(1, 50)),
                )
                .await
                .unwrap();
                let f = Format::parse("O-{n}").unwrap();
                let mut version = 0;
                while version < old_version && version < 3000 {
                    d.set_format("orders", Some(&f)).await.unwrap();
                    version = d.peek("orders").await.unwrap().version;
                }
            }
            _ => {
                count(&log, "delete + re-create (new era)");
                let from = Instant::now();
                d.delete("orders").await.unwrap();
                tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
                d.create("orders", Spec::default().with_start(rng.range(1, 300)))
                    .await
                    .unwrap();
                log.lock().unwrap().era_changes.push((from, Instant::now()));
            }
        }
    }
}

/// Checks the "orders" log: uniqueness within eras, with ambiguous windows resolved as
/// described in the module docs. Returns (eras, definite numbers, ambiguous numbers).
fn check_eras(log: &Log) -> (usize, usize, usize) {
    let changes = &log.era_changes;
    // Era k lies between the end of change k-1 and the start of change k.
    let era_of = |at: Instant, lean_late: bool| -> usize {
        changes
            .iter()
            .filter(|(s, e)| if lean_late { *s <= at } else { *e <= at })
            .count()
    };
    let mut definite: HashMap<usize, HashMap<i64, String>> = HashMap::new();
    let mut ambiguous: Vec<(usize, usize, i64, String)> = Vec::new();
    for o in &log.obs {
        let first = era_of(o.from, false);
        let last = era_of(o.to, true);
        for &n in &o.numbers {
            if first == last {
                if let Some(prev) = definite.entry(first).or_default().insert(n, o.who.clone()) {
                    panic!(
                        "number {n} issued twice in era {first}: by {prev} and by {} \
                         (window {:?} after the start)",
                        o.who,
                        o.to - o.from
                    );
                }
            } else {
                ambiguous.push((first, last, n, o.who.clone()));
            }
        }
    }
    let mut seen_amb: HashSet<(usize, i64)> = HashSet::new();
    for (first, last, n, who) in &ambiguous {
        let fits = (*first..=*last).any(|e| {
            !definite.get(&e).is_some_and(|m| m.contains_key(n)) && !seen_amb.contains(&(e, *n))
        });
        assert!(
            fits,
            "number {n} (by {who}, eras {first}..={last}) repeats a number of every era it \
             may belong to"
        );
        if let Some(e) =
            (*first..=*last).find(|e| !definite.get(e).is_some_and(|m| m.contains_key(n)))
        {
            seen_amb.insert((e, *n));
        }
    }
    let total_definite = definite.values().map(HashMap::len).sum();
    (changes.len() + 1, total_definite, ambiguous.len())
}

/// A scripted round: an optimistic compare-and-set handle draws; the sequence is deleted
/// and re-created ahead (same era); the new document is written until it stands at the very
/// version the handle remembers; the handle draws again. Its remembered state belongs to the
/// old incarnation: it must re-read, not write into the new document.
async fn stale_handle_round(
    sleeper: &dispenser::Sequence,
    d: &Dispenser,
    raw: &dispenser::mongodb::Collection<dispenser::mongodb::bson::Document>,
    log: &Shared,
    gap: i64,
) {
    count(
        log,
        "stale handle across delete + re-create ahead (same era)",
    );
    let from = Instant::now();
    let n = sleeper.next().await.unwrap();
    record(log, from, vec![n], "stale handle".into());
    let old = raw
        .find_one_and_delete(dispenser::mongodb::bson::doc! { "_id": "orders" })
        .await
        .unwrap()
        .expect("orders exists");
    let (value, version) = (
        old.get_i64("value").unwrap(),
        old.get_i64("version").unwrap(),
    );
    let fresh = d
        .create("orders", Spec::default().with_start(value + gap))
        .await
        .unwrap();
    let from = Instant::now();
    let run = fresh.next_n(3).await.unwrap();
    record(
        log,
        from,
        run.into_iter().collect(),
        "fresh after re-create".into(),
    );
    let f = Format::parse("O-{n}").unwrap();
    while d.peek("orders").await.unwrap().version < version {
        d.set_format("orders", Some(&f)).await.unwrap();
    }
    let from = Instant::now();
    let n = sleeper.next().await.unwrap();
    record(log, from, vec![n], "stale handle".into());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_interleavings_of_draws_and_admin_operations_never_duplicate_within_an_era() {
    let seed: u64 = std::env::var("DISPENSER_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let secs: u64 = std::env::var("DISPENSER_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    eprintln!("model test: seed {seed} (replay: DISPENSER_MODEL_SEED={seed}), {secs} s");
    let f = Fixture::new("model").await;
    let coll = f.collection.clone();
    let inc = f.dispenser(options(&f, Strategy::ConditionalIncrement));
    let cas = f.dispenser(options(&f, Strategy::Cas));
    inc.create("orders", Spec::default()).await.unwrap();
    // Long-lived handles of both strategies, opened before any admin operation.
    let mut handles = Vec::new();
    for d in [&inc, &cas] {
        for _ in 0..2 {
            handles.push(d.open("orders").await.unwrap());
        }
    }
    // Stripes and daily scopes, with their own admin operations.
    let ids = inc.ensure_striped("ids", 3, Spec::default()).await.unwrap();
    inc.ensure("tickets", Spec::default()).await.unwrap();
    let clock = Arc::new(AtomicI64::new(1_790_000_000)); // seconds since the epoch
    let clock_fn = {
        let clock = clock.clone();
        Arc::new(move || jiff::Timestamp::from_second(clock.load(Ordering::SeqCst)).unwrap())
    };
    let daily = cas
        .open_daily("tickets", "Europe/Paris")
        .unwrap()
        .with_clock(clock_fn);

    let sleeper = f
        .dispenser(options(&f, Strategy::Cas).with_cas_mode(dispenser::CasMode::Optimistic))
        .open("orders")
        .await
        .unwrap();
    let log: Shared = Arc::default();
    let mut stripe_numbers: Vec<i64> = Vec::new();
    let mut scoped: HashMap<String, Vec<i64>> = HashMap::new();
    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut rounds = 0;
    while Instant::now() < deadline {
        rounds += 1;
        if rng.chance(8) {
            let gap = rng.range(1, 20);
            stale_handle_round(&sleeper, &cas, &f.raw(), &log, gap).await;
            continue;
        }
        let era_round = rng.chance(35);
        let d = if rng.chance(50) {
            inc.clone()
        } else {
            cas.clone()
        };
        let draws = draw_round(
            rng.next_u64(),
            handles.clone(),
            d.clone(),
            coll.clone(),
            log.clone(),
            true,
        );
        let admin = admin_round(rng.next_u64(), d.clone(), f.raw(), log.clone(), era_round);
        // Stripes: plain and block draws racing a striped advance.
        let stripes = {
            let ids = ids.clone();
            let fast = ids
                .with_blocks(BlockOptions::default().with_size(rng.range(2, 20) as u64))
                .unwrap();
            let d = d.clone();
            let bump = rng.range(0, 50);
            async move {
                let mut got = Vec::new();
                let adv = async {
                    if let Ok(states) = d.peek_striped("ids").await {
                        let top = states.iter().map(|s| s.value).max().unwrap_or(0);
                        d.advance_striped("ids", top + bump).await.unwrap();
                    }
                };
                let draws = async {
                    let mut v = Vec::new();
                    for k in 0..20 {
                        v.push(
                            if k % 2 == 0 {
                                ids.next().await
                            } else {
                                fast.next().await
                            }
                            .unwrap(),
                        );
                    }
                    fast.close().await.unwrap();
                    v
                };
                let ((), v) = tokio::join!(adv, draws);
                got.extend(v);
                got
            }
        };
        // Daily scopes: the clock moves on; old days are cleaned up while today draws.
        let scopes = {
            let daily = daily.clone();
            let clock = clock.clone();
            let hours = rng.range(0, 30);
            async move {
                let mut got = Vec::new();
                for _ in 0..10 {
                    let t = daily.next().await.unwrap();
                    got.push((t.scope, t.number));
                }
                clock.fetch_add(hours * 3600, Ordering::SeqCst);
                let t = daily.next().await.unwrap();
                got.push((t.scope, t.number));
                let today = daily.scope_now();
                let day: jiff::civil::Date = today.parse().unwrap();
                // Today's scope exists now: a cut-off after it is refused; two days back is
                // fine while today draws.
                let refused = daily
                    .delete_scopes_before(&day.tomorrow().unwrap().to_string())
                    .await;
                assert!(
                    matches!(refused, Err(Error::InvalidArgument { .. })),
                    "{refused:?}"
                );
                let old = day.yesterday().unwrap().yesterday().unwrap().to_string();
                let (r, more) = tokio::join!(daily.delete_scopes_before(&old), async {
                    let mut v = Vec::new();
                    for _ in 0..5 {
                        let t = daily.next().await.unwrap();
                        v.push((t.scope, t.number));
                    }
                    v
                });
                r.unwrap();
                got.extend(more);
                got
            }
        };
        let ((), (), s, sc) = tokio::join!(draws, admin, stripes, scopes);
        stripe_numbers.extend(s);
        for (scope, n) in sc {
            scoped.entry(scope).or_default().push(n);
        }
    }

    // Settle: every handle draws once more, then the model is checked.
    let fresh = inc.open("orders").await.unwrap();
    let from = Instant::now();
    let tail: Vec<i64> = fresh.next_n(50).await.unwrap().into_iter().collect();
    record(&log, from, tail, "final draw".into());
    let state = inc.peek("orders").await.unwrap();
    let l = log.lock().unwrap();
    let (eras, definite, ambiguous) = check_eras(&l);
    // peek agrees: the stored value is past every number of the last era.
    let last_start = l.era_changes.last().map(|(_, e)| *e);
    for o in &l.obs {
        if last_start.is_none_or(|s| o.from >= s) {
            for &n in &o.numbers {
                assert!(
                    n <= state.value,
                    "{n} (by {}) lies beyond the stored value {}: it would be issued again",
                    o.who,
                    state.value
                );
            }
        }
    }
    // Every call within its bound.
    let bound = MAX_ELAPSED + 2 * OP_TIMEOUT;
    assert!(
        l.slowest.0 <= bound,
        "the slowest call ({}) took {:?}, beyond its bound {bound:?}",
        l.slowest.1,
        l.slowest.0
    );
    // Stripes: unique forever (no era changes there).
    let mut sorted = stripe_numbers.clone();
    sorted.sort_unstable();
    let before = sorted.len();
    sorted.dedup();
    assert_eq!(sorted.len(), before, "a striped number was issued twice");
    // Scopes: unique per scope.
    for (scope, mut v) in scoped.clone() {
        let before = v.len();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), before, "scope {scope}: a ticket was issued twice");
    }
    eprintln!(
        "model test: seed {seed}: {rounds} rounds, {eras} eras, {definite} numbers in a known \
         era + {ambiguous} across an era change, {} striped, {} scoped in {} days; slowest \
         call {:?} ({}); operations {:?}",
        stripe_numbers.len(),
        scoped.values().map(Vec::len).sum::<usize>(),
        scoped.len(),
        l.slowest.0,
        l.slowest.1,
        l.ops
    );
}
