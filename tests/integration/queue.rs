//! Ticket queues (`dispenser::queue`, `dispenser queue …`, the service's `/v1/queues`):
//!
//! * the acceptance run: 6 processes taking families of 5 at once on a queue of 10 tickets:
//!   two families (tickets 1 … 9, 0), four refused with nothing taken, calls in take order;
//! * a seeded model test: takes and calls from tasks (each its own client; the strategy option
//!   does not apply to queues, whose writes are all one compare-and-set) and CLI processes at
//!   random, checked against a model — the history has one order (by
//!   the counters each answer carries) that replays exactly, respects real time, never has
//!   a ticket waiting twice, calls in take order, and explains every refusal;
//! * lost replies (a fault-injecting proxy): gaps, never a ticket twice;
//! * bad input named, nothing written; a corrupt document refused;
//! * the service: tokens, statuses, and the boards' live feed.
//!
//! Seeds are printed; `DISPENSER_QUEUE_SEED=<seed>` replays one, `DISPENSER_QUEUE_ROUNDS`
//! runs more rounds of the model.

use std::collections::{HashSet, VecDeque};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use dispenser::mongodb::bson::{Document, doc};
use dispenser::queue::{QueueSpec, Ticket};
use dispenser::{Dispenser, Error, sequence::Strategy};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::common::{self, DB, Fixture};
use crate::serve::{ADMIN, BOARD, KIOSK, Service, send};

const EXIT_INVALID: i32 = 2;
const EXIT_NO_SUCH: i32 = 3;
const EXIT_CONFLICT: i32 = 6;
const EXIT_CORRUPT: i32 = 7;
const EXIT_FULL: i32 = 9;
const EXIT_NOBODY: i32 = 10;

/// The binary on the test server, with `collection`.
pub(crate) fn cli(collection: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
    c.env("MONGODB_URI", common::uri())
        .env_remove("DISPENSER_LOG")
        .args(["--db", DB, "--collection", collection]);
    c
}

pub(crate) fn run(c: &mut Command) -> (Option<i32>, String, String) {
    let out: Output = c.output().expect("run dispenser");
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

pub(crate) fn ok(collection: &str, args: &[&str]) -> String {
    let (code, out, err) = run(cli(collection).args(args));
    assert_eq!(code, Some(0), "{args:?}: {err}");
    out
}

/// Runs a command that must fail with `code` and print nothing on stdout; returns stderr.
pub(crate) fn fails(collection: &str, args: &[&str], code: i32) -> String {
    let (got, out, err) = run(cli(collection).args(args));
    assert_eq!(got, Some(code), "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?} printed {out}");
    err
}

/// The fields `keys` of the object `v` (those it lacks as `null`).
pub(crate) fn pick(v: &Value, keys: &[&str]) -> Value {
    Value::Object(
        keys.iter()
            .map(|k| ((*k).to_owned(), v.get(*k).cloned().unwrap_or(Value::Null)))
            .collect(),
    )
}

/// A ticket as the CLI prints it with `--json`.
fn parse_ticket(line: &str) -> Seen {
    let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {line}"));
    Seen {
        number: v["ticket"].as_i64().unwrap(),
        serial: n("serial"),
        taken: n("taken"),
        served: n("served"),
    }
}

/// 6 `dispenser queue take --count 5` processes at once on a queue of 10 tickets: each family
/// of 5 is all or nothing and consecutive, so two families get tickets 1 … 9, 0 and four are
/// refused (exit 9) with nothing taken.
#[test]
fn thirty_takes_from_six_processes_on_ten_tickets_give_two_families_and_four_refusals() {
    common::ready();
    let coll = common::unique("queue_accept");
    ok(
        &coll,
        &["queue", "create", "lobby", "--min", "0", "--max", "9"],
    );
    let started = Instant::now();
    let children: Vec<_> = (0..6)
        .map(|_| {
            cli(&coll)
                .args(["queue", "take", "lobby", "--count", "5", "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut tickets = Vec::new();
    let mut refusals = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        );
        let mine: Vec<Seen> = stdout.lines().map(parse_ticket).collect();
        if mine.is_empty() {
            assert_eq!(out.status.code(), Some(EXIT_FULL), "{stderr}");
            assert!(stderr.contains("queue \"lobby\" is full"), "{stderr}");
            refusals += 1;
        } else {
            assert_eq!(out.status.code(), Some(0), "{stderr}");
            assert_eq!(mine.len(), 5, "a family is all or nothing: {stdout}");
            let first = mine[0].serial;
            let serials: Vec<u64> = mine.iter().map(|t| t.serial).collect();
            assert_eq!(
                serials,
                (first..first + 5).collect::<Vec<_>>(),
                "consecutive: {stdout}"
            );
        }
        tickets.extend(mine);
    }
    let elapsed = started.elapsed();
    let mut numbers: Vec<i64> = tickets.iter().map(|t| t.number).collect();
    numbers.sort_unstable();
    let mut serials: Vec<u64> = tickets.iter().map(|t| t.serial).collect();
    serials.sort_unstable();
    assert_eq!(numbers, (0..=9).collect::<Vec<_>>(), "10 distinct tickets");
    assert_eq!(serials, (1..=10).collect::<Vec<_>>());
    assert_eq!(refusals, 4);

    // Calls serve them in the order taken: 1 … 9, then 0.
    tickets.sort_by_key(|t| t.serial);
    let taken_order: Vec<i64> = tickets.iter().map(|t| t.number).collect();
    let called: Vec<i64> = (0..10)
        .map(|_| {
            ok(&coll, &["queue", "call", "lobby"])
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(called, taken_order);
    assert_eq!(called, [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]);
    let err = fails(&coll, &["queue", "call", "lobby"], EXIT_NOBODY);
    assert!(err.contains("nobody waits in queue \"lobby\""), "{err}");
    let status: Value =
        serde_json::from_str(&ok(&coll, &["queue", "peek", "lobby", "--json"])).unwrap();
    assert_eq!(
        (&status["taken"], &status["served"], &status["waiting"]),
        (&json!(10), &json!(10), &json!(0))
    );
    eprintln!(
        "queue acceptance: 6 processes × 5 concurrent takes on tickets 0..=9 in {elapsed:?}: {} tickets {numbers:?}, {refusals} refusals; called in order {called:?}",
        tickets.len()
    );
}

/// What one answer of a take or a call said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    number: i64,
    serial: u64,
    taken: u64,
    served: u64,
}

impl From<Ticket> for Seen {
    fn from(t: Ticket) -> Seen {
        Seen {
            number: t.number,
            serial: t.serial,
            taken: t.taken,
            served: t.served,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Took(Seen),
    Called(Seen),
    /// A take refused: the queue was full.
    Full,
    /// A call refused: nobody waited.
    Nobody,
}

/// One operation of a history: who, when (from its invocation to its answer), what.
#[derive(Clone, Debug)]
struct Obs {
    who: String,
    start: Instant,
    end: Instant,
    outcome: Outcome,
}

impl Obs {
    fn seen(&self) -> Option<Seen> {
        match self.outcome {
            Outcome::Took(s) | Outcome::Called(s) => Some(s),
            _ => None,
        }
    }
}

/// Checks a history of a queue of tickets `min+1 …, min` with `capacity` tickets, whose
/// document ended at `final_counters`, against the model:
///
/// 1. The acknowledged operations, ordered by `taken + served` after each (every write moves
///    one counter by one), are exactly positions 1 … final taken + served: none lost, none
///    twice.
/// 2. Replayed in that order on a list of waiting tickets, every answer is what the model
///    says: the counters, the serial, the ticket `min + serial mod capacity`; a take never
///    adds a ticket already waiting or the ticket shown as now serving (the last called),
///    never more than `capacity` are held (waiting, and shown); a call serves the oldest.
/// 3. The order respects real time: an operation that answered before another began comes
///    first (linearizability).
/// 4. Every refusal is explained: some state with as many held as the range holds (full),
///    or none waiting (nobody), could have been current during the refused call.
fn check(
    min: i64,
    capacity: u64,
    obs: &[Obs],
    final_counters: (u64, u64),
) -> Result<String, String> {
    let ticket = |serial: u64| min + (serial % capacity) as i64;
    let mut done: Vec<(&Obs, Seen)> = obs
        .iter()
        .filter_map(|o| o.seen().map(|s| (o, s)))
        .collect();
    done.sort_by_key(|(_, s)| s.taken + s.served);
    let n = final_counters.0 + final_counters.1;
    if done.len() as u64 != n {
        return Err(format!(
            "{} acknowledged operations, but the document counts {n} writes",
            done.len()
        ));
    }
    let mut waiting: VecDeque<i64> = VecDeque::new();
    let mut shown: Option<i64> = None;
    let mut waiting_after = vec![0_u64]; // state i: after the i-th operation
    let mut held_after = vec![0_u64];
    let (mut taken, mut served) = (0_u64, 0_u64);
    for (i, (o, s)) in done.iter().enumerate() {
        if s.taken + s.served != i as u64 + 1 {
            return Err(format!(
                "position {} is missing or taken twice: {o:?}",
                i + 1
            ));
        }
        match o.outcome {
            Outcome::Took(_) => {
                taken += 1;
                if s.serial != taken || s.number != ticket(taken) {
                    return Err(format!("take {taken} answered {s:?} ({})", o.who));
                }
                if waiting.contains(&s.number) {
                    return Err(format!(
                        "ticket {} handed out while someone waits with it: {waiting:?} ({})",
                        s.number, o.who
                    ));
                }
                if shown == Some(s.number) {
                    return Err(format!(
                        "ticket {} handed out while the board shows it ({})",
                        s.number, o.who
                    ));
                }
                waiting.push_back(s.number);
                let held = waiting.len() as u64 + u64::from(shown.is_some());
                if held > capacity {
                    return Err(format!("{held} held, capacity {capacity}"));
                }
            }
            _ => {
                served += 1;
                if s.serial != served || waiting.pop_front() != Some(s.number) {
                    return Err(format!(
                        "call {served} answered {s:?}, not the oldest waiting ticket ({})",
                        o.who
                    ));
                }
                shown = Some(s.number);
            }
        }
        if (s.taken, s.served) != (taken, served) {
            return Err(format!(
                "{o:?} answered counters {s:?}, the model has {taken}/{served}"
            ));
        }
        waiting_after.push(waiting.len() as u64);
        held_after.push(waiting.len() as u64 + u64::from(shown.is_some()));
    }
    if (taken, served) != final_counters {
        return Err(format!(
            "model {taken}/{served}, document {final_counters:?}"
        ));
    }
    // Real time: for each operation, every one that answered before it began comes first.
    for (a, sa) in &done {
        for (b, sb) in &done {
            if a.end < b.start && sa.taken + sa.served > sb.taken + sb.served {
                return Err(format!(
                    "{b:?} began after {a:?} answered, yet is ordered before it"
                ));
            }
        }
    }
    // Refusals: state i exists from the i-th operation's write (at most its answer) to the
    // next one's (at least its invocation).
    let mut refusals = 0;
    for r in obs.iter().filter(|o| o.seen().is_none()) {
        refusals += 1;
        let (after, want) = if r.outcome == Outcome::Full {
            (&held_after, capacity)
        } else {
            (&waiting_after, 0)
        };
        let explained = (0..=done.len()).any(|i| {
            after[i] == want
                && (i == 0 || done[i - 1].0.start <= r.end)
                && (i == done.len() || done[i].0.end >= r.start)
        });
        if !explained {
            return Err(format!(
                "{r:?}: no state with {want} waiting was current while it ran"
            ));
        }
    }
    Ok(format!(
        "{} takes, {} calls, {refusals} refusals, {} round(s) of tickets",
        taken,
        served,
        taken / capacity
    ))
}

/// The checker itself catches what it must: a ticket waiting twice, a call out of order, a
/// lost write, an order against real time, an unexplained refusal.
#[test]
fn the_model_check_catches_duplicates_disorder_and_unexplained_refusals() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let op = |start: u64, end: u64, outcome: Outcome| Obs {
        who: "t".into(),
        start: at(start),
        end: at(end),
        outcome,
    };
    let took = |number, serial, taken, served| {
        Outcome::Took(Seen {
            number,
            serial,
            taken,
            served,
        })
    };
    let called = |number, serial, taken, served| {
        Outcome::Called(Seen {
            number,
            serial,
            taken,
            served,
        })
    };
    // Tickets 1, 0 (min 0, capacity 2); full; call 1; full again (1 is shown, 0 waits);
    // call 0; take 1 again (0 is shown); call 1; nobody.
    let good = vec![
        op(0, 1, took(1, 1, 1, 0)),
        op(2, 3, took(0, 2, 2, 0)),
        op(4, 5, Outcome::Full),
        op(6, 7, called(1, 1, 2, 1)),
        op(8, 9, Outcome::Full),
        op(10, 11, called(0, 2, 2, 2)),
        op(12, 13, took(1, 3, 3, 2)),
        op(14, 15, called(1, 3, 3, 3)),
        op(16, 17, Outcome::Nobody),
    ];
    assert!(
        check(0, 2, &good, (3, 3)).is_ok(),
        "{:?}",
        check(0, 2, &good, (3, 3))
    );
    // A ticket handed out while its holder waits (capacity ignored by the server).
    let mut dup = good[..2].to_vec();
    dup.push(op(4, 5, took(1, 3, 3, 0)));
    let e = check(0, 2, &dup, (3, 0)).unwrap_err();
    assert!(e.contains("waits with it"), "{e}");
    // The ticket on the board handed out again while it is shown.
    let mut shown = good[..4].to_vec();
    shown.push(op(8, 9, took(1, 3, 3, 1)));
    let e = check(0, 2, &shown, (3, 1)).unwrap_err();
    assert!(e.contains("board shows it"), "{e}");
    // A call that serves the newer ticket first.
    let mut disorder = good[..2].to_vec();
    disorder.push(op(4, 5, called(0, 1, 2, 1)));
    assert!(
        check(0, 2, &disorder, (2, 1))
            .unwrap_err()
            .contains("oldest")
    );
    // A write the document counts but no one acknowledged is no gap in this history.
    assert!(
        check(0, 2, &good, (4, 3))
            .unwrap_err()
            .contains("counts 7 writes")
    );
    // Ordered against real time: the second take answered before the first began.
    let mut late = good.clone();
    late[0] = op(5, 6, took(1, 1, 1, 0));
    late[1] = op(0, 1, took(0, 2, 2, 0));
    assert!(
        check(0, 2, &late, (3, 3))
            .unwrap_err()
            .contains("began after")
    );
    // "Full" while one ticket waits (and only then).
    let mut unexplained = good[..1].to_vec();
    unexplained.push(op(2, 3, Outcome::Full));
    unexplained.push(op(4, 5, took(0, 2, 2, 0)));
    assert!(
        check(0, 2, &unexplained, (2, 0))
            .unwrap_err()
            .contains("no state with 2")
    );
}

/// splitmix64: small, seedable.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// One round of the model test: a fresh queue, 4 library tasks (each with its own client, two
/// set to `Strategy::Cas` and two to the default, which queues ignore) and 2 CLI processes at a
/// time, taking and calling at random.
async fn model_round(seed: u64) -> Result<String, String> {
    let mut rng = Rng(seed);
    let capacity = 2 + rng.below(5); // 2 … 6
    let min = rng.below(9) as i64 - 3;
    let max = min + capacity as i64 - 1;
    let take_share = 45 + rng.below(20); // percent
    let f = Fixture::new("queue_model").await;
    let admin = f.dispenser(f.options());
    admin
        .create_queue("q", QueueSpec::default().with_min(min).with_max(max))
        .await
        .map_err(|e| e.to_string())?;
    let mut actors = Vec::new();
    for a in 0..4_u64 {
        let strategy = if a < 2 {
            Strategy::Cas
        } else {
            Strategy::ConditionalIncrement
        };
        let d = Dispenser::new(&common::client().await, f.options().with_strategy(strategy))
            .map_err(|e| e.to_string())?;
        let tseed = rng.next_u64();
        actors.push(tokio::spawn(async move {
            let mut r = Rng(tseed);
            let q = d.open_queue("q").await.map_err(|e| e.to_string())?;
            let mut log = Vec::new();
            for _ in 0..30 {
                tokio::time::sleep(Duration::from_micros(r.below(2000))).await;
                let take = r.below(100) < take_share;
                let start = Instant::now();
                let result = if take { q.take().await } else { q.call().await };
                let end = Instant::now();
                let outcome = match (take, result) {
                    (true, Ok(t)) => Outcome::Took(t.into()),
                    (false, Ok(t)) => Outcome::Called(t.into()),
                    (
                        true,
                        Err(Error::QueueFull {
                            waiting,
                            shown,
                            capacity: c,
                            ..
                        }),
                    ) => {
                        // Full: the tickets waiting and the one shown fill the range.
                        if (waiting + u64::from(shown.is_some()), c) != (capacity, capacity) {
                            return Err(format!("full with {waiting} of {c} ({shown:?} shown)"));
                        }
                        Outcome::Full
                    }
                    (false, Err(Error::NobodyWaiting { .. })) => Outcome::Nobody,
                    (_, Err(e)) => return Err(format!("{strategy:?} task: {e}")),
                };
                log.push(Obs {
                    who: format!("task {a} ({strategy:?})"),
                    start,
                    end,
                    outcome,
                });
            }
            Ok::<_, String>(log)
        }));
    }
    for p in 0..2 {
        let (coll, tseed) = (f.collection.clone(), rng.next_u64());
        actors.push(tokio::spawn(async move {
            let mut r = Rng(tseed);
            let mut log = Vec::new();
            for _ in 0..6 {
                let take = r.below(100) < take_share;
                let op = if take { "take" } else { "call" };
                let start = Instant::now();
                let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
                    .env("MONGODB_URI", common::uri())
                    .env_remove("DISPENSER_LOG")
                    .args([
                        "--db",
                        DB,
                        "--collection",
                        &coll,
                        "queue",
                        op,
                        "q",
                        "--json",
                    ])
                    .output()
                    .await
                    .map_err(|e| e.to_string())?;
                let end = Instant::now();
                let stdout = String::from_utf8_lossy(&out.stdout);
                let outcome = match (take, out.status.code()) {
                    (true, Some(0)) => Outcome::Took(parse_ticket(stdout.trim())),
                    (false, Some(0)) => Outcome::Called(parse_ticket(stdout.trim())),
                    (true, Some(EXIT_FULL)) => Outcome::Full,
                    (false, Some(EXIT_NOBODY)) => Outcome::Nobody,
                    (_, code) => {
                        return Err(format!(
                            "queue {op}: exit {code:?}: {}",
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                };
                log.push(Obs {
                    who: format!("cli {p}"),
                    start,
                    end,
                    outcome,
                });
            }
            Ok(log)
        }));
    }
    let mut obs = Vec::new();
    for a in join_all(actors).await {
        obs.extend(a.map_err(|e| e.to_string())??);
    }
    let s = admin
        .open_queue("q")
        .await
        .map_err(|e| e.to_string())?
        .peek()
        .await
        .map_err(|e| e.to_string())?;
    let summary = check(min, capacity, &obs, (s.taken, s.served))?;
    Ok(format!(
        "tickets {}…{max}, {min} (capacity {capacity}): {summary}",
        min + 1
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seeded_model_of_concurrent_takes_and_calls_from_tasks_and_processes() {
    common::ready();
    let seed = common::seed("DISPENSER_QUEUE_SEED");
    let rounds: u64 = std::env::var("DISPENSER_QUEUE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    eprintln!("queue model: seed {seed} (replay: DISPENSER_QUEUE_SEED={seed}), {rounds} rounds");
    let mut rng = Rng(seed);
    for round in 0..rounds {
        let round_seed = rng.next_u64();
        match model_round(round_seed).await {
            Ok(summary) => eprintln!("queue model round {round}: {summary}"),
            Err(e) => panic!("queue model, seed {seed}, round {round}: {e}"),
        }
    }
}

/// A take or call whose reply is lost (the proxy forwards the write and swallows its
/// answer) may have written: its ticket is a gap — taken with nobody holding it, called in
/// its turn — and never goes to anyone else. Every answer that did come back is consistent:
/// distinct serials, at most `capacity` waiting, and a ticket shown again only once the
/// previous holder of that number was called.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lost_replies_leave_gaps_never_a_ticket_twice() {
    use crate::proxy::{Faults, Proxy};
    common::ready();
    let seed = common::seed("DISPENSER_QUEUE_SEED");
    eprintln!("queue faults: seed {seed} (replay: DISPENSER_QUEUE_SEED={seed})");
    let f = Fixture::new("queue_faults").await;
    let direct = f.dispenser(f.options());
    let (min, capacity) = (0_i64, 5_u64);
    direct
        .create_queue("q", QueueSpec::default().with_min(min).with_max(4))
        .await
        .unwrap();
    let proxy = Proxy::to_test_server(
        Faults {
            drop_reply: 0.12,
            stall_share: 0.5,
            reset: 0.05,
            ..Faults::default()
        },
        seed,
    )
    .await;
    let mut tasks = Vec::new();
    for a in 0..4_u64 {
        let strategy = if a % 2 == 0 {
            Strategy::Cas
        } else {
            Strategy::ConditionalIncrement
        };
        let options = f
            .options()
            .with_strategy(strategy)
            .with_operation_timeout(Duration::from_millis(1500));
        let d = Dispenser::connect(&proxy.uri(""), options).await.unwrap();
        let mut r = Rng(seed ^ (a + 1));
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let (mut failed_takes, mut failed_calls) = (0_u64, 0_u64);
            let mut q = None;
            for _ in 0..25 {
                if q.is_none() {
                    q = d.open_queue("q").await.ok();
                }
                let Some(queue) = &q else { continue };
                let take = r.below(100) < 55;
                let result = if take {
                    queue.take().await
                } else {
                    queue.call().await
                };
                match result {
                    Ok(t) => seen.push((take, Seen::from(t))),
                    Err(Error::QueueFull { .. } | Error::NobodyWaiting { .. }) => {}
                    Err(e) if e.is_database() || e.is_timeout() => {
                        // Regression (issue 31, found 6): a queue's timeout said "numbers it
                        // reserved are a gap"; it names the queue and speaks of tickets.
                        let m = e.to_string();
                        assert!(m.contains("queue \"q\""), "{m}");
                        assert!(!m.contains("numbers it reserved"), "{m}");
                        if take {
                            failed_takes += 1;
                        } else {
                            failed_calls += 1;
                        }
                    }
                    Err(e) => panic!("task {a} ({strategy:?}): {e}"),
                }
            }
            (seen, failed_takes, failed_calls)
        }));
    }
    let (mut takes, mut calls) = (Vec::new(), Vec::new());
    let (mut failed_takes, mut failed_calls) = (0, 0);
    for t in join_all(tasks).await {
        let (seen, ft, fc) = t.unwrap();
        for (take, s) in seen {
            if take { takes.push(s) } else { calls.push(s) }
        }
        failed_takes += ft;
        failed_calls += fc;
    }
    let counts = proxy.counts();
    let end = direct.open_queue("q").await.unwrap().peek().await.unwrap();
    let ticket = |serial: u64| min + (serial % capacity) as i64;
    for (what, list) in [("take", &takes), ("call", &calls)] {
        let serials: HashSet<u64> = list.iter().map(|s| s.serial).collect();
        assert_eq!(serials.len(), list.len(), "a {what} serial answered twice");
        for s in list.iter() {
            assert_eq!(s.number, ticket(s.serial), "{what} {s:?}");
            assert!(s.taken - s.served <= capacity, "{what} {s:?}");
        }
    }
    // A number handed out again only once its previous holder was called.
    for t in &takes {
        assert_eq!(t.serial, t.taken, "{t:?}");
        assert!(t.served + capacity >= t.serial, "{t:?}");
        for u in &takes {
            if u.number == t.number && u.serial > t.serial {
                assert!(u.served >= t.serial, "{u:?} while {t:?} still waits");
            }
        }
    }
    for c in &calls {
        assert_eq!(c.serial, c.served, "{c:?}");
    }
    // The gaps: writes the document counts that nobody heard of, at most one per failure.
    let take_gaps = end.taken - takes.len() as u64;
    let call_gaps = end.served - calls.len() as u64;
    assert!(take_gaps <= failed_takes, "{take_gaps} > {failed_takes}");
    assert!(call_gaps <= failed_calls, "{call_gaps} > {failed_calls}");
    assert!(end.waiting <= capacity);
    assert!(counts.dropped() > 0, "no reply was lost: {counts}");
    eprintln!(
        "queue faults: {} takes and {} calls answered, {failed_takes}/{failed_calls} failed; {take_gaps} taken and {call_gaps} called tickets are gaps; {counts}",
        takes.len(),
        calls.len()
    );
}

/// Bad names and ranges are named, exit 2, and write nothing; existing names and ranges are
/// reported with what is stored.
#[tokio::test]
async fn bad_input_is_named_and_nothing_is_written() {
    let f = Fixture::new("queue_bad").await;
    let d = f.dispenser(f.options());
    let long = "q".repeat(201);
    for (name, spec, needle) in [
        (
            "",
            QueueSpec::default(),
            "invalid queue name \"\": must not be empty",
        ),
        ("$x", QueueSpec::default(), "must not start with '$'"),
        ("a\nb", QueueSpec::default(), "control character"),
        (long.as_str(), QueueSpec::default(), "201 bytes long"),
        (
            "r",
            QueueSpec::default().with_min(5).with_max(5),
            "invalid range of queue \"r\": min (5) must be below max (5)",
        ),
        (
            "r",
            QueueSpec::default().with_min(9).with_max(1),
            "min (9) must be below max (1)",
        ),
        (
            "r",
            QueueSpec::default().with_min(-1).with_max(i64::MAX),
            "holds 9223372036854775809 tickets; at most 2^63-1",
        ),
    ] {
        for result in [
            d.create_queue(name, spec.clone()).await,
            d.ensure_queue(name, spec).await,
        ] {
            let e = result.unwrap_err();
            assert!(e.kind() == dispenser::error::ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
        }
    }
    let queues = f
        .client
        .database(DB)
        .collection::<Document>(&format!("{}_queues", f.collection));
    assert_eq!(
        queues.count_documents(doc! {}).await.unwrap(),
        0,
        "nothing written"
    );

    let coll = f.collection.as_str();
    for (args, needle) in [
        (
            &["queue", "create", "x", "--min", "5", "--max", "5"][..],
            "min (5) must be below max (5)",
        ),
        (
            &[
                "queue",
                "create",
                "x",
                "--min",
                "-9223372036854775808",
                "--max",
                "0",
            ][..],
            "holds 9223372036854775809 tickets",
        ),
        (
            &["queue", "create", "$x"][..],
            "invalid queue name \"$x\": must not start with '$'",
        ),
        (
            &["queue", "take", "x", "--count", "0"][..],
            "0 is not allowed: must be a whole number between 1 and 10000",
        ),
        (
            &["queue", "create", "x", "--max", "ten"][..],
            "invalid value 'ten' for '--max <MAX>'",
        ),
    ] {
        let err = fails(coll, args, EXIT_INVALID);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(
        queues.count_documents(doc! {}).await.unwrap(),
        0,
        "nothing written"
    );

    // A name taken: create refuses it; ensure with another range names what differs.
    d.create_queue("lobby", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    let e = d
        .create_queue("lobby", QueueSpec::default().with_max(9))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::AlreadyExists { kind: dispenser::error::Kind::Queue, name } if name == "lobby"),
        "{e}"
    );
    assert_eq!(e.to_string(), "queue \"lobby\" already exists");
    let e = d
        .ensure_queue("lobby", QueueSpec::default().with_min(1))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::SpecConflict {
                kind: dispenser::error::Kind::Queue,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.kind(), dispenser::error::ErrorKind::Conflict);
    assert_eq!(
        e.to_string(),
        "queue \"lobby\" exists with another spec: min 0 (asked 1), max 9 (asked 99); nothing was written"
    );
    // Regression (issue 37, 11): the message names what differs besides the range.
    let e = d
        .ensure_queue(
            "lobby",
            QueueSpec::default()
                .with_max(9)
                .with_format(dispenser::Format::parse("B-{n}").unwrap())
                .with_daily(true)
                .with_time_zone(&dispenser::jiff::tz::TimeZone::get("Europe/Paris").unwrap()),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "queue \"lobby\" exists with another spec: format none (asked \"B-{n}\"), daily false (asked true), time zone \"UTC\" (asked \"Europe/Paris\"); nothing was written"
    );
    assert!(
        d.ensure_queue("lobby", QueueSpec::default().with_max(9))
            .await
            .is_ok()
    );
    let err = fails(coll, &["queue", "create", "lobby"], EXIT_CONFLICT);
    assert_eq!(err.trim(), "dispenser: queue \"lobby\" already exists");
    ok(
        coll,
        &["queue", "create", "lobby", "--max", "9", "--if-not-exists"],
    );
    let err = fails(coll, &["queue", "take", "nope"], EXIT_NO_SUCH);
    assert_eq!(err.trim(), "dispenser: no such queue \"nope\"");
    assert!(matches!(
        d.open_queue("nope").await,
        Err(Error::NotFound {
            kind: dispenser::error::Kind::Queue,
            ..
        })
    ));
    assert_eq!(queues.count_documents(doc! {}).await.unwrap(), 1);
}

/// A document no history of takes and calls can produce is refused, naming the field.
#[tokio::test]
async fn a_corrupt_queue_document_is_refused() {
    let f = Fixture::new("queue_corrupt").await;
    let d = f.dispenser(f.options());
    d.create_queue("q", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    let queues = f
        .client
        .database(DB)
        .collection::<Document>(&format!("{}_queues", f.collection));
    // Served past taken.
    queues
        .update_one(
            doc! { "_id": "q" },
            doc! { "$set": { "served": 3_i64, "waiting": -3_i64 } },
        )
        .await
        .unwrap();
    let e = d.open_queue("q").await.unwrap_err();
    assert!(
        matches!(&e, Error::CorruptDocument { field, .. } if field == "served"),
        "{e}"
    );
    let err = fails(&f.collection, &["queue", "peek", "q"], EXIT_CORRUPT);
    assert!(
        err.contains("field \"served\" (3) is not between 0 and taken (0)"),
        "{err}"
    );
    // The message names a queue, not a sequence.
    assert!(err.contains("corrupt document for queue \"q\""), "{err}");
    // Listed in its place.
    let listed = d.list_queues().await.unwrap();
    assert!(matches!(
        listed.as_slice(),
        [Err(Error::CorruptDocument { .. })]
    ));
    // Deleted only with force (who holds its tickets cannot be read); then it is gone, and
    // a second delete finds nothing.
    let e = d.delete_queue("q").await.unwrap_err();
    assert!(
        matches!(&e, Error::CorruptDocument { problem, .. } if problem.contains("only with force")),
        "{e}"
    );
    assert_eq!(queues.count_documents(doc! {}).await.unwrap(), 1);
    d.delete_queue("q").force(true).await.unwrap();
    assert_eq!(queues.count_documents(doc! {}).await.unwrap(), 0);
    let e = d.delete_queue("q").force(true).await.unwrap_err();
    assert!(
        matches!(&e, Error::NotFound { name, .. } if name == "q"),
        "{e}"
    );
}

/// Regression: a take, and a call, wrote to a document whose counters disagree (`waiting` is
/// not `taken - served`) before the decoder refused it (`taken` 12 → 14 over three refused
/// takes). The write's filter now pins what the decoder checks: nothing is written.
#[tokio::test]
async fn a_corrupt_queue_document_is_never_written() {
    let f = Fixture::new("queue_corrupt_write").await;
    let d = f.dispenser(f.options());
    let q = d
        .create_queue("q", QueueSpec::default().with_max(99))
        .await
        .unwrap();
    let queues = f
        .client
        .database(DB)
        .collection::<Document>(&format!("{}_queues", f.collection));
    queues
        .update_one(
            doc! { "_id": "q" },
            doc! { "$set": { "taken": 12_i64, "served": 5_i64, "waiting": 3_i64 } },
        )
        .await
        .unwrap();
    for _ in 0..3 {
        let e = q.take().await.unwrap_err();
        assert!(matches!(e, Error::CorruptDocument { .. }), "{e}");
        let e = q.call().await.unwrap_err();
        assert!(matches!(e, Error::CorruptDocument { .. }), "{e}");
    }
    let stored = queues.find_one(doc! { "_id": "q" }).await.unwrap().unwrap();
    assert_eq!(
        (
            stored.get_i64("taken").unwrap(),
            stored.get_i64("served").unwrap(),
            stored.get_i64("waiting").unwrap()
        ),
        (12, 5, 3),
        "a refused operation wrote to the corrupt document"
    );
}

/// Regression: with tickets 1, 2, 0 taken and 1 called (shown as now serving), a take
/// handed out 1 again while the board showed it. And `take --count 4` with room for 3 took
/// three tickets and exited 9.
#[test]
fn the_ticket_shown_is_never_handed_out_and_families_are_all_or_nothing() {
    common::ready();
    let coll = common::unique("queue_shown");
    ok(&coll, &["queue", "create", "wrap", "--max", "2"]);
    assert_eq!(
        ok(&coll, &["queue", "take", "wrap", "--count", "3"]),
        "1\n2\n0\n"
    );
    assert_eq!(ok(&coll, &["queue", "call", "wrap"]).trim(), "1");
    let err = fails(&coll, &["queue", "take", "wrap"], EXIT_FULL);
    assert!(
        err.contains("2 ticket(s) wait, ticket 1 is shown by a desk, and its range holds 3"),
        "{err}"
    );
    assert_eq!(ok(&coll, &["queue", "call", "wrap"]).trim(), "2");
    // 0 waits, 2 is shown: room for one, and it is 1.
    let err = fails(&coll, &["queue", "take", "wrap", "--count", "2"], EXIT_FULL);
    assert!(err.contains("2 tickets asked at once"), "{err}");
    let status: Value =
        serde_json::from_str(&ok(&coll, &["queue", "peek", "wrap", "--json"])).unwrap();
    assert_eq!(
        status["taken"],
        json!(3),
        "a refused family took nothing: {status}"
    );
    assert_eq!(ok(&coll, &["queue", "take", "wrap"]).trim(), "1");
    // A fresh queue takes its whole range: ten tickets for 1 … 9, 0.
    ok(&coll, &["queue", "create", "ten", "--max", "9"]);
    let out = ok(&coll, &["queue", "take", "ten", "--count", "10"]);
    assert_eq!(out.lines().count(), 10, "{out}");
    // 0 and 1 wait, 2 is shown: full.
    fails(&coll, &["queue", "take", "wrap"], EXIT_FULL);
}

/// `queue list` shows every queue, `queue delete` removes one (exit 3 when there is none),
/// and the library's `delete_queue` refuses a bad name, writing nothing.
#[test]
fn queues_are_listed_and_deleted() {
    common::ready();
    let coll = common::unique("queue_list");
    let empty = cli(&coll).args(["queue", "list"]).output().unwrap();
    assert!(empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stderr).contains("no queues in"));
    ok(&coll, &["queue", "create", "lobby", "--max", "9"]);
    ok(&coll, &["queue", "create", "desk", "--max", "5"]);
    ok(&coll, &["queue", "take", "desk"]);
    let listed = ok(&coll, &["queue", "list"]);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert!(
        lines[0].starts_with("desk: now serving nobody yet, 1 waiting of 6"),
        "{listed}"
    );
    assert!(lines[1].starts_with("lobby: "), "{listed}");
    let json: Value = serde_json::from_str(&ok(&coll, &["queue", "list", "--json"])).unwrap();
    assert_eq!(json[0]["name"], "desk", "{json}");
    assert_eq!(json[0]["waiting"], 1, "{json}");
    assert_eq!(
        ok(&coll, &["queue", "delete", "lobby"]).trim(),
        "deleted queue lobby"
    );
    let err = fails(&coll, &["queue", "delete", "lobby"], 3);
    assert!(err.contains("no such queue \"lobby\""), "{err}");
    let err = fails(&coll, &["queue", "peek", "lobby"], 3);
    assert!(err.contains("no such queue"), "{err}");
    assert_eq!(ok(&coll, &["queue", "list"]).lines().count(), 1);
}

/// The text of `queue create`, `take`, `call` and `status`.
#[test]
fn text_output_of_the_queue_commands() {
    common::ready();
    let coll = common::unique("queue_text");
    let out = ok(
        &coll,
        &["queue", "create", "lobby", "--min", "0", "--max", "2"],
    );
    assert!(
        out.starts_with("lobby: now serving nobody yet, 0 waiting of 3, next ticket 1; tickets 1…2, then 0; taken 0 served 0 rounds 0 updated_at "),
        "{out}"
    );
    assert_eq!(ok(&coll, &["queue", "take", "lobby"]), "1\n");
    assert_eq!(
        ok(&coll, &["queue", "take", "lobby", "--count", "2"]),
        "2\n0\n"
    );
    let err = fails(&coll, &["queue", "take", "lobby"], EXIT_FULL);
    assert_eq!(
        err.trim(),
        "dispenser: queue \"lobby\" is full: 3 ticket(s) wait and its range holds 3; call the next one before taking more"
    );
    let out = ok(&coll, &["queue", "peek", "lobby"]);
    assert!(
        out.contains("now serving nobody yet, 3 waiting of 3, next ticket none (full)"),
        "{out}"
    );
    let called: Value =
        serde_json::from_str(&ok(&coll, &["queue", "call", "lobby", "--json"])).unwrap();
    assert_eq!(
        pick(
            &called,
            &[
                "ticket", "label", "serial", "taken", "served", "waiting", "desk"
            ]
        ),
        json!({"ticket": 1, "label": "1", "serial": 1, "taken": 3, "served": 1, "waiting": 2, "desk": null})
    );
    let out = ok(&coll, &["queue", "peek", "lobby"]);
    // 1 is shown, 2 and 0 wait: the next ticket would be 1 again, so none (the status said
    // "next ticket 1" before desks were held).
    assert!(out.contains("now serving 1, 2 waiting of 3, next ticket none (full); tickets 1…2, then 0; taken 3 served 1 rounds 1"), "{out}");
    assert!(out.contains("\n  desk (unnamed): 1\n"), "{out}");
    assert!(out.contains("\n  called 1 at desk (unnamed) "), "{out}");
}

/// `--help` of every `queue` subcommand (snapshots next to the other help texts).
#[test]
fn help_of_every_queue_subcommand() {
    for sub in [
        "create", "take", "call", "recall", "finish", "cancel", "alter", "peek",
    ] {
        let (code, out, err) = run(Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", "mongodb://u:hunter2@example.invalid")
            .args(["queue", sub, "--help"]));
        assert_eq!(code, Some(0), "{sub}: {err}");
        assert!(!out.contains("hunter2"));
        insta::with_settings!({ snapshot_path => "snapshots", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(format!("help_queue_{sub}"), out);
        });
    }
}

/// Reads server-sent events from `resp` until one whose data satisfies `want`, or `wait`
/// passes: the data, or `None`.
pub(crate) async fn next_event(
    resp: &mut reqwest::Response,
    buffer: &mut String,
    wait: Duration,
    want: impl Fn(&Value) -> bool,
) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:").map(str::trim_start))
                .collect();
            if data.is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&data.join("\n")).unwrap();
            if want(&v) {
                return Some(v);
            }
        }
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Ok(Ok(Some(bytes))) => buffer.push_str(&String::from_utf8_lossy(&bytes)),
            // Closed, failed or timed out.
            _ => return None,
        }
    }
}

/// The service: create, take, call and status with their statuses and token rules, the
/// overview, and the boards' live feed — a call from the CLI shows within a second, the
/// stream outlives the idle timeout (regression: it was cut), and the service still stops
/// at once with a stream open.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queues_over_http_and_the_boards_live_feed() {
    let svc = Service::start_args("queue_http", &common::uri(), &["--idle-timeout", "1"]);
    let http = reqwest::Client::new();
    let post = |path: &str, token: &str| http.post(svc.url(path)).bearer_auth(token);
    let create = |body: Value| {
        http.post(svc.url("/v1/queues"))
            .bearer_auth(ADMIN)
            .json(&body)
    };

    let (status, body) = send(create(json!({ "name": "lobby", "max": 2 }))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (&body["created"], &body["capacity"], &body["next_ticket"]),
        (&json!(true), &json!(3), &json!(1))
    );
    let (status, body) = send(create(
        json!({ "name": "lobby", "max": 2, "if_not_exists": true }),
    ))
    .await;
    assert_eq!((status, &body["created"]), (200, &json!(false)), "{body}");
    for (request, code, kind) in [
        (json!({ "name": "lobby", "max": 2 }), 409, "already_exists"),
        (
            json!({ "name": "lobby", "min": 1, "max": 2, "if_not_exists": true }),
            409,
            "spec_conflict",
        ),
        (
            json!({ "name": "r", "min": 5, "max": 5 }),
            422,
            "invalid_input",
        ),
        (json!({ "name": "$r" }), 400, "invalid_input"),
        (json!({ "name": "r", "max": 2.5 }), 400, "malformed_json"),
    ] {
        let (status, body) = send(create(request.clone())).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (code, Some(kind)),
            "{request}: {body}"
        );
    }
    // Tokens: a kiosk takes, a board looks, neither does the other's job.
    let (status, body) = send(post("/v1/queues/lobby/take", KIOSK)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        pick(
            &body,
            &[
                "ticket", "label", "serial", "taken", "served", "waiting", "position", "replayed"
            ]
        ),
        json!({ "ticket": 1, "label": "1", "serial": 1, "taken": 1, "served": 0, "waiting": 1, "position": 0, "replayed": false })
    );
    assert_eq!(
        body["estimated_wait_seconds"],
        Value::Null,
        "too early to tell: {body}"
    );
    for (path, token, method) in [
        ("/v1/queues/lobby/call", KIOSK, "post"),
        ("/v1/queues/lobby", KIOSK, "get"),
        ("/v1/queues/lobby/take", BOARD, "post"),
        ("/v1/overview", BOARD, "get"),
    ] {
        let req = if method == "post" {
            http.post(svc.url(path))
        } else {
            http.get(svc.url(path))
        };
        let (status, body) = send(req.bearer_auth(token)).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    let (status, body) = send(http.post(svc.url("/v1/queues/lobby/take"))).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = send(post("/v1/queues/nope/take", ADMIN)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("no_such_queue")),
        "{body}"
    );
    for _ in 0..2 {
        assert_eq!(send(post("/v1/queues/lobby/take", ADMIN)).await.0, 200);
    }
    let (status, body) = send(post("/v1/queues/lobby/take", KIOSK)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("queue_full")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 ticket(s) wait")
    );

    // The board's feed: the state at once, then each change.
    let mut feed = http
        .get(svc.url("/ui/queues/lobby/events"))
        .bearer_auth(BOARD)
        .send()
        .await
        .unwrap();
    assert_eq!(feed.status(), 200);
    assert_eq!(
        feed.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut buffer = String::new();
    let first = next_event(&mut feed, &mut buffer, Duration::from_secs(5), |_| true).await;
    assert_eq!(
        first.as_ref().map(|v| &v["waiting"]),
        Some(&json!(3)),
        "{first:?}"
    );
    // Longer than the service's --idle-timeout (1 s): the stream must still be open.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let coll = svc.collection.clone();
    let called = tokio::task::spawn_blocking(move || ok(&coll, &["queue", "call", "lobby"]))
        .await
        .unwrap();
    let after_call = Instant::now();
    assert_eq!(called.trim(), "1");
    let shown = next_event(&mut feed, &mut buffer, Duration::from_secs(5), |v| {
        v["now_serving"] == json!(1)
    })
    .await;
    let latency = after_call.elapsed();
    assert!(
        shown.is_some(),
        "the board never showed the CLI's call (stream closed?)"
    );
    assert!(
        latency < Duration::from_secs(1),
        "shown {latency:?} after the call"
    );
    // A call through the service wakes the feed at once.
    let (status, _) = send(post("/v1/queues/lobby/call", ADMIN)).await;
    assert_eq!(status, 200);
    let shown = next_event(&mut feed, &mut buffer, Duration::from_secs(5), |v| {
        v["now_serving"] == json!(2)
    })
    .await;
    assert!(shown.is_some());
    let (status, body) = send(
        http.get(svc.url("/ui/queues/nope/events"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("no_such_queue")),
        "{body}"
    );

    // The overview: a sequence with the numbers the service holds, a gap-free sequence with
    // its voids, the queue.
    let coll = svc.collection.as_str();
    ok(coll, &["create", "orders"]);
    let (status, _) = send(post("/v1/sequences/orders/next", ADMIN)).await;
    assert_eq!(status, 200);
    // The business collection is the test's own (the database is shared).
    let business = format!("{coll}_invoices");
    ok(
        coll,
        &[
            "gapless", "create", "invoices", "--into", &business, "--field", "number",
        ],
    );
    ok(coll, &["gapless", "issue", "invoices"]);
    ok(
        coll,
        &[
            "gapless",
            "void",
            "invoices",
            "2",
            "--reason",
            "printer jam",
        ],
    );
    let (status, o) = send(http.get(svc.url("/v1/overview")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 200, "{o}");
    let orders = o["sequences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "orders")
        .unwrap();
    assert_eq!(
        orders["held"],
        json!(99),
        "a block of 100, one handed out: {orders}"
    );
    assert!(orders["usage"]["fraction_used"].is_number());
    assert_eq!(o["gapless"][0]["name"], "invoices");
    assert_eq!(o["gapless"][0]["voided"][0]["reason"], "printer jam");
    assert_eq!(o["queues"][0]["name"], "lobby");
    assert_eq!(o["queues"][0]["now_serving"], json!(2));

    // Stopping with a stream open: the stream ends and the service stops at once.
    let stopping = Instant::now();
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "{:?}",
        stopping.elapsed()
    );
    assert!(
        next_event(&mut feed, &mut buffer, Duration::from_secs(2), |_| true)
            .await
            .is_none()
    );
}
