//! Queues a branch can run (issue 31): desks, recalls, cancels, out-of-order calls, request
//! ids, labels, waits, `alter --max`, daily restarts — from the library, the CLI and HTTP:
//!
//! * a seeded model test: kiosks taking families with request ids through a proxy that loses
//!   replies (and dropping answers on purpose), desks calling (in order or a given ticket),
//!   recalling and cancelling, an operator changing the range; the history, ordered by the
//!   version each answer carries, must have no missing or extra write, replay exactly on a
//!   plain model (no ticket handed out that waits or that a desk shows, calls in take order
//!   except explicit ones), respect real time, and never take twice for one request id;
//! * a regression test for each reproduction of the issue;
//! * the estimate given at take time against the real wait (printed, not asserted).
//!
//! `DISPENSER_QUEUE_SEED=<seed>` replays the model; `DISPENSER_QUEUE_ROUNDS` runs more rounds.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dispenser::queue::{QueueAlter, QueueSpec, Ticket};
use dispenser::{Dispenser, Error, Format};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::common::{self, Fixture};
use crate::queue::{Rng, fails, ok, pick};
use crate::serve::{ADMIN, KIOSK, Service, send};

const EXIT_INVALID: i32 = 2;
const EXIT_NOBODY: i32 = 10;
const EXIT_NOT_WAITING: i32 = 11;
const EXIT_FULL: i32 = 9;
const EXIT_CONFLICT: i32 = 6;

/// What one acknowledged write did.
#[derive(Clone, Debug)]
enum Did {
    /// Took these (serial, number) pairs; `key` is the request id.
    Took {
        key: String,
        tickets: Vec<(u64, i64)>,
    },
    Called {
        desk: String,
        serial: u64,
        number: i64,
        given: Option<i64>,
    },
    Recalled {
        desk: String,
        serial: u64,
    },
    Released {
        desk: String,
        serial: u64,
    },
    Cancelled {
        serial: u64,
        number: i64,
    },
    Altered {
        max: i64,
    },
}

#[derive(Clone, Debug)]
struct Write {
    who: String,
    version: i64,
    start: Instant,
    end: Instant,
    did: Did,
}

fn ticket_of(min: i64, max: i64, serial: u64) -> i64 {
    let cap = (max - min + 1) as u64;
    min + (serial % cap) as i64
}

/// Replays the acknowledged writes in version order on a plain model.
fn check_history(
    min: i64,
    max0: i64,
    writes: &[Write],
    final_version: i64,
    unresolved: usize,
) -> Result<String, String> {
    let mut by_version: Vec<&Write> = Vec::new();
    let mut seen_keys: HashMap<&str, i64> = HashMap::new();
    for w in writes {
        if let Did::Took { key, .. } = &w.did {
            // A request id answered twice (a replay) is one write.
            match seen_keys.get(key.as_str()) {
                Some(v) if *v == w.version => continue,
                Some(v) => {
                    return Err(format!(
                        "request id {key} took twice: versions {v} and {}",
                        w.version
                    ));
                }
                None => {
                    seen_keys.insert(key, w.version);
                }
            }
        }
        by_version.push(w);
    }
    by_version.sort_by_key(|w| w.version);
    for pair in by_version.windows(2) {
        if pair[0].version == pair[1].version {
            return Err(format!(
                "two writes answered version {}: {:?} and {:?}",
                pair[0].version, pair[0], pair[1]
            ));
        }
    }
    let missing = final_version as usize - by_version.len();
    if by_version.len() as i64 > final_version || missing > unresolved {
        return Err(format!(
            "{} acknowledged writes, the document is at version {final_version}, {unresolved} takes unresolved: a write nobody asked for (a take twice?)",
            by_version.len()
        ));
    }
    let mut max = max0;
    let mut waiting: VecDeque<(u64, i64)> = VecDeque::new();
    let mut desks: HashMap<String, (u64, i64)> = HashMap::new();
    let mut next_serial = 1_u64;
    let (mut takes, mut calls, mut given, mut recalls, mut cancels, mut alters) =
        (0, 0, 0, 0, 0, 0);
    let mut releases = 0;
    for w in &by_version {
        match &w.did {
            Did::Took { tickets, .. } => {
                takes += 1;
                for &(serial, number) in tickets {
                    if serial != next_serial {
                        return Err(format!(
                            "take answered serial {serial}, expected {next_serial}: {w:?}"
                        ));
                    }
                    next_serial += 1;
                    if number != ticket_of(min, max, serial) {
                        return Err(format!("serial {serial} shows {number}: {w:?}"));
                    }
                    if waiting.iter().any(|&(_, n)| n == number) {
                        return Err(format!(
                            "ticket {number} handed out while someone waits with it ({})",
                            w.who
                        ));
                    }
                    if let Some((d, _)) = desks.iter().find(|(_, (_, n))| *n == number) {
                        return Err(format!(
                            "ticket {number} handed out while desk {d:?} shows it ({}, version {})",
                            w.who, w.version
                        ));
                    }
                    waiting.push_back((serial, number));
                }
            }
            Did::Called {
                desk,
                serial,
                number,
                given: g,
            } => {
                calls += 1;
                let i = match g {
                    None => {
                        if waiting.front().map(|t| t.0) != Some(*serial) {
                            return Err(format!(
                                "call of {serial} at version {}, but the oldest waiting is {:?}",
                                w.version,
                                waiting.front()
                            ));
                        }
                        0
                    }
                    Some(t) => {
                        given += 1;
                        if *t != *serial as i64 {
                            return Err(format!("asked for serial {t}, called serial {serial}"));
                        }
                        waiting
                            .iter()
                            .position(|&(s, _)| s == *serial)
                            .ok_or_else(|| format!("{w:?}: ticket {t} was not waiting"))?
                    }
                };
                let called = waiting.remove(i).unwrap_or_default();
                if called.1 != *number {
                    return Err(format!("{w:?}: serial {serial} showed {}", called.1));
                }
                desks.insert(desk.clone(), called);
            }
            Did::Recalled { desk, serial } => {
                recalls += 1;
                if desks.get(desk).map(|t| t.0) != Some(*serial) {
                    return Err(format!(
                        "recall of {serial} at desk {desk}, which shows {:?}",
                        desks.get(desk)
                    ));
                }
            }
            Did::Released { desk, serial } => {
                releases += 1;
                if desks.remove(desk).map(|t| t.0) != Some(*serial) {
                    return Err(format!(
                        "desk {desk} released {serial}, which it did not show"
                    ));
                }
            }
            Did::Cancelled { serial, number } => {
                cancels += 1;
                let i = waiting
                    .iter()
                    .position(|&(s, _)| s == *serial)
                    .ok_or_else(|| format!("cancelled {number}, which was not waiting"))?;
                waiting.remove(i);
            }
            Did::Altered { max: m } => {
                alters += 1;
                for &(serial, number) in waiting.iter().chain(desks.values()) {
                    if ticket_of(min, *m, serial) != number {
                        return Err(format!(
                            "max {m} remapped held ticket {number} (serial {serial})"
                        ));
                    }
                }
                max = *m;
            }
        }
    }
    // Real time: a write that answered before another began has the lower version.
    for a in &by_version {
        for b in &by_version {
            if a.end < b.start && a.version > b.version {
                return Err(format!("{b:?} began after {a:?} answered, yet comes first"));
            }
        }
    }
    Ok(format!(
        "{takes} takes ({} tickets), {calls} calls ({given} of a given ticket), {recalls} recalls, {releases} desks released, {cancels} cancels, {alters} alters, {} waiting at the end",
        next_serial - 1,
        waiting.len()
    ))
}

fn pairs(tickets: &[Ticket]) -> Vec<(u64, i64)> {
    tickets.iter().map(|t| (t.serial, t.number)).collect()
}

/// A take with a request id, retried with the same id through lost replies (and, when
/// `drop_first`, with its first answer thrown away on purpose). `Ok(None)`: refused (full).
async fn take_until_answered(
    q: &dispenser::queue::Queue,
    count: u64,
    request_id: &str,
    drop_first: bool,
) -> Result<Option<(Vec<Ticket>, usize)>, String> {
    let mut first_ok: Option<Vec<Ticket>> = None;
    for attempt in 0..40 {
        match q.take().count(count).request_id(request_id).await {
            Ok(t) if drop_first && attempt == 0 => first_ok = Some(t),
            Ok(t) => {
                if let Some(f) = &first_ok {
                    // The answer thrown away and the one kept are the same take.
                    if pairs(f) != pairs(&t) || !t.iter().all(|x| x.replayed) {
                        return Err(format!("a retried take answered {t:?} after {f:?}"));
                    }
                    if f[0].version != t[0].version {
                        return Err(format!(
                            "replay of version {} says {}",
                            f[0].version, t[0].version
                        ));
                    }
                }
                return Ok(Some((t, attempt)));
            }
            Err(Error::QueueFull { .. }) => {
                if first_ok.is_some() {
                    return Err("a take answered, then its retry was refused as full".into());
                }
                return Ok(None);
            }
            Err(e) if e.is_transient() => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(format!("take: {e}")),
        }
    }
    Err("a take stayed unanswered through 40 attempts".into())
}

/// Counts a kiosk down when it ends, however it ends.
struct Done(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A desk's act as another process (`dispenser queue call|cancel … --json`): the ticket's
/// `(serial, number, version)`, or `None` when refused (nobody waits, not waiting).
async fn act_by_process(
    collection: &str,
    args: &[&str],
) -> Result<Option<(u64, i64, i64)>, String> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .env_remove("DISPENSER_LOG")
        .args(["--db", common::DB, "--collection", collection, "queue"])
        .args(args)
        .arg("--json")
        .output()
        .await
        .map_err(|e| e.to_string())?;
    match out.status.code() {
        Some(0) => {
            let v: Value = serde_json::from_slice(&out.stdout)
                .map_err(|e| format!("queue {args:?}: {e}: {out:?}"))?;
            match (
                v["serial"].as_u64(),
                v["ticket"].as_i64(),
                v["version"].as_i64(),
            ) {
                (Some(s), Some(n), Some(version)) => Ok(Some((s, n, version))),
                _ => Err(format!("queue {args:?} printed {v}")),
            }
        }
        Some(EXIT_NOBODY | EXIT_NOT_WAITING) => Ok(None),
        _ => Err(format!("queue {args:?}: {out:?}")),
    }
}

/// What the whole of one round found.
struct Round {
    writes: Vec<Write>,
    unresolved: usize,
    refusals: usize,
    retried: usize,
}

async fn model_round(seed: u64) -> Result<String, String> {
    use crate::proxy::{Faults, Proxy};
    let mut rng = Rng(seed);
    // Half the rounds on a queue of 2 or 3 numbers, where a number comes round to another
    // ticket while acts that name the earlier one are in flight.
    let capacity = if rng.below(2) == 0 {
        2 + rng.below(2) as i64
    } else {
        4 + rng.below(8) as i64
    }; // 2, 3 | 4 … 11
    let min = rng.below(5) as i64 - 2;
    let max = min + capacity - 1;
    let f = Fixture::new("queue_desks_model").await;
    let admin = f.dispenser(f.options());
    let mut spec = QueueSpec::default().with_min(min).with_max(max);
    if rng.below(2) == 0 {
        spec = spec.with_format(Format::parse("T-{n:02}").map_err(|e| e.to_string())?);
    }
    admin
        .create_queue("q", spec)
        .await
        .map_err(|e| e.to_string())?;
    let proxy = Arc::new(
        Proxy::to_test_server(
            Faults {
                drop_reply: 0.15,
                stall_share: 0.3,
                reset: 0.03,
                ..Faults::default()
            },
            rng.next_u64(),
        )
        .await,
    );
    let mut actors = Vec::new();
    // The desks and the operator work while the kiosks take.
    let kiosks = Arc::new(std::sync::atomic::AtomicUsize::new(2));
    // Two kiosks through the proxy: families of 1 or 2, each with its request id.
    for k in 0..2_u64 {
        let options = f
            .options()
            .with_operation_timeout(Duration::from_millis(700));
        let d = Dispenser::connect(&proxy.uri(""), options)
            .await
            .map_err(|e| e.to_string())?;
        let kseed = rng.next_u64();
        let running = kiosks.clone();
        actors.push(tokio::spawn(async move {
            let _done = Done(running);
            let mut r = Rng(kseed);
            let mut round = Round {
                writes: Vec::new(),
                unresolved: 0,
                refusals: 0,
                retried: 0,
            };
            let mut q = None;
            for _ in 0..60 {
                if q.is_some() {
                    break;
                }
                q = d.open_queue("q").await.ok();
            }
            let q = q.ok_or("the kiosk never opened the queue")?;
            for i in 0..30 {
                tokio::time::sleep(Duration::from_micros(r.below(2000))).await;
                let key = format!("kiosk{k}-{i}");
                let count = 1 + r.below(2);
                let start = Instant::now();
                match take_until_answered(&q, count, &key, r.below(5) == 0).await {
                    Ok(Some((t, attempts))) => {
                        round.retried += usize::from(attempts > 0);
                        round.writes.push(Write {
                            who: format!("kiosk {k}"),
                            version: t[0].version,
                            start,
                            end: Instant::now(),
                            did: Did::Took {
                                key,
                                tickets: pairs(&t),
                            },
                        });
                    }
                    Ok(None) => round.refusals += 1,
                    Err(e) if e.contains("unanswered") => round.unresolved += 1,
                    Err(e) => return Err(format!("kiosk {k}: {e}")),
                }
            }
            Ok::<_, String>(round)
        }));
    }
    // Two desk tasks, direct: calls (in order, or a given ticket), recalls, cancels.
    for t in 0..2_u64 {
        let d = Dispenser::new(&common::client().await, f.options()).map_err(|e| e.to_string())?;
        let tseed = rng.next_u64();
        let collection = f.collection.clone();
        let running = kiosks.clone();
        actors.push(tokio::spawn(async move {
            let mut r = Rng(tseed);
            let q = d.open_queue("q").await.map_err(|e| e.to_string())?;
            let mut round = Round {
                writes: Vec::new(),
                unresolved: 0,
                refusals: 0,
                retried: 0,
            };
            for _ in 0..400 {
                if running.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_micros(2000 + r.below(15_000))).await;
                let desk = format!("{}", 1 + t * 2 + r.below(2 - t)); // desks 1, 2 | 3
                // A ticket that may wait (from a status: it may have been called or cancelled
                // since, and its number taken again), or a serial near the newest: acts name
                // a ticket by its serial, and must land on that ticket or on none.
                let pick_ticket = |r: &mut Rng, q: &dispenser::queue::Queue| {
                    let q = q.clone();
                    let roll = r.below(4);
                    let near = r.below(2 * capacity as u64 + 2);
                    async move {
                        match q.peek().await {
                            Ok(s) if roll > 0 && !s.waiting_list.is_empty() => {
                                s.waiting_list[(roll as usize) % s.waiting_list.len()].serial as i64
                            }
                            Ok(s) => (s.taken + 1).saturating_sub(near).max(1) as i64,
                            _ => 1,
                        }
                    }
                };
                let start = Instant::now();
                let roll = r.below(100);
                // Desk task 1 makes its acts that name a ticket as another process: the
                // command line, `--serial S --json`.
                let by_process = t == 1;
                let (result, given) = if roll < 55 {
                    (q.call().desk(&desk).await.map(|t| (t, 0)).map_err(Ok), None)
                } else if roll < 70 {
                    let serial = pick_ticket(&mut r, &q).await;
                    if by_process {
                        let args = [
                            "call",
                            "q",
                            "--desk",
                            &desk,
                            "--serial",
                            &serial.to_string(),
                        ];
                        let acted = act_by_process(&collection, &args).await?;
                        (Err(Err(acted.map(|a| (a, 0)))), Some(serial))
                    } else {
                        let call = q.call().desk(&desk).serial(serial as u64);
                        (call.await.map(|t| (t, 0)).map_err(Ok), Some(serial))
                    }
                } else if roll < 78 {
                    (
                        q.recall().desk(&desk).await.map(|t| (t, 1)).map_err(Ok),
                        None,
                    )
                } else if roll < 84 {
                    (
                        q.finish().desk(&desk).await.map(|t| (t, 3)).map_err(Ok),
                        None,
                    )
                } else {
                    let serial = pick_ticket(&mut r, &q).await;
                    if by_process {
                        let args = ["cancel", "q", "--serial", &serial.to_string()];
                        let acted = act_by_process(&collection, &args).await?;
                        (Err(Err(acted.map(|a| (a, 2)))), Some(serial))
                    } else {
                        let cancel = q.cancel().serial(serial as u64);
                        (cancel.await.map(|t| (t, 2)).map_err(Ok), Some(serial))
                    }
                };
                let end = Instant::now();
                // (serial, number, version) and what was done, or None: refused.
                let acted: Option<((u64, i64, i64), u8)> = match result {
                    Ok((t, kind)) => Some(((t.serial, t.number, t.version), kind)),
                    Err(Err(by_process)) => by_process,
                    Err(Ok(
                        Error::NobodyWaiting { .. }
                        | Error::TicketNotWaiting { .. }
                        | Error::NoTicketShown { .. },
                    )) => None,
                    Err(Ok(e)) => return Err(format!("desk task {t}: {e}")),
                };
                let Some(((serial, number, version), kind)) = acted else {
                    round.refusals += 1;
                    continue;
                };
                let did = match kind {
                    0 => Did::Called {
                        desk: desk.clone(),
                        serial,
                        number,
                        given,
                    },
                    1 => Did::Recalled {
                        desk: desk.clone(),
                        serial,
                    },
                    3 => Did::Released {
                        desk: desk.clone(),
                        serial,
                    },
                    _ => {
                        if Some(serial as i64) != given {
                            return Err(format!("cancelled serial {serial} when asked {given:?}"));
                        }
                        Did::Cancelled { serial, number }
                    }
                };
                round.writes.push(Write {
                    who: format!("desk task {t}"),
                    version,
                    start,
                    end,
                    did,
                });
            }
            Ok::<_, String>(round)
        }));
    }
    // An operator changing the range now and then (refused when it would remap a held ticket).
    {
        let d = Dispenser::new(&common::client().await, f.options()).map_err(|e| e.to_string())?;
        let oseed = rng.next_u64();
        let running = kiosks.clone();
        actors.push(tokio::spawn(async move {
            let mut r = Rng(oseed);
            let q = d.open_queue("q").await.map_err(|e| e.to_string())?;
            let mut round = Round {
                writes: Vec::new(),
                unresolved: 0,
                refusals: 0,
                retried: 0,
            };
            for _ in 0..6 {
                if running.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50 + r.below(300))).await;
                let new_max = min + 1 + r.below(12) as i64; // capacity 2 … 13
                let start = Instant::now();
                match q.alter(QueueAlter::default().with_max(new_max)).await {
                    Ok(s) => round.writes.push(Write {
                        who: "operator".into(),
                        version: s.version,
                        start,
                        end: Instant::now(),
                        did: Did::Altered { max: new_max },
                    }),
                    Err(Error::QueueAlterRefused { .. }) => round.refusals += 1,
                    Err(e) => return Err(format!("operator: {e}")),
                }
            }
            Ok::<_, String>(round)
        }));
    }
    let mut writes = Vec::new();
    let (mut unresolved, mut refusals, mut retried) = (0, 0, 0);
    for a in join_all(actors).await {
        let round = a.map_err(|e| e.to_string())??;
        writes.extend(round.writes);
        unresolved += round.unresolved;
        refusals += round.refusals;
        retried += round.retried;
    }
    let s = admin
        .open_queue("q")
        .await
        .map_err(|e| e.to_string())?
        .peek()
        .await
        .map_err(|e| e.to_string())?;
    let summary = check_history(min, max, &writes, s.version, unresolved)?;
    Ok(format!(
        "tickets {min}..={max}: {summary}; {refusals} refusals, {retried} takes retried through lost replies, {unresolved} unresolved; proxy {}",
        proxy.counts()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seeded_model_of_desks_recalls_cancels_given_calls_alters_and_retried_takes() {
    common::ready();
    let seed = common::seed("DISPENSER_QUEUE_SEED");
    let rounds: u64 = std::env::var("DISPENSER_QUEUE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    eprintln!(
        "queue desks model: seed {seed} (replay: DISPENSER_QUEUE_SEED={seed}), {rounds} rounds"
    );
    let mut rng = Rng(seed);
    for round in 0..rounds {
        let round_seed = rng.next_u64();
        match model_round(round_seed).await {
            Ok(summary) => eprintln!("queue desks model round {round}: {summary}"),
            Err(e) => panic!("queue desks model, seed {seed}, round {round}: {e}"),
        }
    }
}

/// The checker catches a ticket handed out while a desk shows it, a call out of order, a
/// request id that took twice, and a write nobody asked for.
#[test]
fn the_desks_model_check_catches_what_it_must() {
    let t0 = Instant::now();
    let w = |version: i64, did: Did| Write {
        who: "t".into(),
        version,
        start: t0,
        end: t0,
        did,
    };
    let took = |key: &str, serial: u64, number: i64| Did::Took {
        key: key.into(),
        tickets: vec![(serial, number)],
    };
    let call = |desk: &str, serial: u64, number: i64| Did::Called {
        desk: desk.into(),
        serial,
        number,
        given: None,
    };
    // Tickets 1, 2, 0 (capacity 3): A calls 1, B calls 2, B calls 0.
    let good = vec![
        w(1, took("a", 1, 1)),
        w(2, took("b", 2, 2)),
        w(3, took("c", 3, 0)),
        w(4, call("A", 1, 1)),
        w(5, call("B", 2, 2)),
        w(6, call("B", 3, 0)),
    ];
    assert!(
        check_history(0, 2, &good, 6, 0).is_ok(),
        "{:?}",
        check_history(0, 2, &good, 6, 0)
    );
    // Then 1 handed out again while desk A still shows it (only the last call held).
    let mut bad = good.clone();
    bad.push(w(7, took("d", 4, 1)));
    let e = check_history(0, 2, &bad, 7, 0).unwrap_err();
    assert!(e.contains("while desk \"A\" shows it"), "{e}");
    // B calls 0 before 2.
    let mut disorder = good[..4].to_vec();
    disorder.push(w(5, call("B", 3, 0)));
    assert!(
        check_history(0, 2, &disorder, 5, 0)
            .unwrap_err()
            .contains("oldest waiting")
    );
    // One request id, two writes.
    let mut twice = good[..1].to_vec();
    twice.push(w(2, took("a", 2, 2)));
    assert!(
        check_history(0, 2, &twice, 2, 0)
            .unwrap_err()
            .contains("took twice")
    );
    // A write the document counts that no one acknowledged.
    assert!(
        check_history(0, 2, &good, 7, 0)
            .unwrap_err()
            .contains("nobody asked for")
    );
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

/// Regression (issue 31, found 1): with tickets 1, 2, 0 taken, desk A calls 1 and desk B
/// calls 2 then 0; a take handed out 1 again while desk A still showed it (only the last
/// call was held). Now every desk's ticket is held until the desk calls again or is
/// released; recall announces it again (exit 10 when the desk shows none); a fresh queue
/// still takes its whole range.
#[test]
fn a_ticket_shown_by_any_desk_is_never_handed_out_again() {
    common::ready();
    let coll = common::unique("queue_desks");
    ok(&coll, &["queue", "create", "wrap", "--max", "2"]);
    assert_eq!(
        ok(&coll, &["queue", "take", "wrap", "--count", "3"]),
        "1\n2\n0\n"
    );
    assert_eq!(ok(&coll, &["queue", "call", "wrap", "--desk", "A"]), "1\n");
    assert_eq!(ok(&coll, &["queue", "call", "wrap", "--desk", "B"]), "2\n");
    assert_eq!(ok(&coll, &["queue", "call", "wrap", "--desk", "B"]), "0\n");
    let err = fails(&coll, &["queue", "take", "wrap"], EXIT_FULL);
    assert!(err.contains("ticket 1 is shown by a desk"), "{err}");
    let s = json_of(&ok(&coll, &["queue", "peek", "wrap", "--json"]));
    let desks: Vec<Value> = s["desks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| pick(d, &["desk", "ticket", "label"]))
        .collect();
    assert_eq!(
        desks,
        [
            json!({"desk": "A", "ticket": 1, "label": "1"}),
            json!({"desk": "B", "ticket": 0, "label": "0"})
        ]
    );
    assert_eq!(
        (&s["next_ticket"], &s["full"]),
        (&Value::Null, &json!(true))
    );
    // Recall: announced again, nobody served.
    let before = s["version"].as_i64().unwrap();
    assert_eq!(
        ok(&coll, &["queue", "recall", "wrap", "--desk", "A"]),
        "1\n"
    );
    let s = json_of(&ok(&coll, &["queue", "peek", "wrap", "--json"]));
    assert_eq!(
        pick(&s["recent_calls"][0], &["ticket", "desk", "recall"]),
        json!({"ticket": 1, "desk": "A", "recall": true})
    );
    assert_eq!(
        pick(&s["recent_calls"][1], &["ticket", "desk", "recall"]),
        json!({"ticket": 0, "desk": "B", "recall": false})
    );
    assert_eq!(
        (s["served"].as_u64(), s["version"].as_i64()),
        (Some(3), Some(before + 1))
    );
    let err = fails(
        &coll,
        &["queue", "recall", "wrap", "--desk", "C"],
        EXIT_NOBODY,
    );
    assert!(
        err.contains("desk \"C\" of queue \"wrap\" shows no ticket"),
        "{err}"
    );
    let err = fails(
        &coll,
        &["queue", "call", "wrap", "--desk", "no/slash"],
        EXIT_INVALID,
    );
    assert!(err.contains("not a desk label"), "{err}");
    // Desk A closes: 1 may be handed out again.
    assert!(ok(&coll, &["queue", "finish", "wrap", "--desk", "A"]).contains("finished ticket 1"));
    assert_eq!(ok(&coll, &["queue", "take", "wrap"]), "1\n");
    // A fresh queue takes its whole range: ten tickets for 1 … 9, 0.
    ok(&coll, &["queue", "create", "ten", "--max", "9"]);
    assert_eq!(
        ok(&coll, &["queue", "take", "ten", "--count", "10"]),
        "1\n2\n3\n4\n5\n6\n7\n8\n9\n0\n"
    );
}

/// Regression (issue 59): a cancel or a call named a ticket by the number it shows, which comes
/// round. On the command line a number is looked up once and the act then names that ticket's
/// serial (stderr and the answer say which); `--serial` and `--request-id` name a ticket by its
/// identity, and a recall or finish `--serial` lands only while the desk shows that ticket. A
/// queue of tickets 1, 2, 0: the fourth ticket shows 1 again.
#[test]
fn the_command_line_acts_on_the_ticket_it_names_by_serial_or_request_id() {
    common::ready();
    let coll = common::unique("queue_identity");
    ok(&coll, &["queue", "create", "q", "--min", "0", "--max", "2"]);
    ok(&coll, &["queue", "take", "q", "--request-id", "paper-p"]);
    ok(&coll, &["queue", "take", "q"]);
    ok(&coll, &["queue", "call", "q", "--desk", "1"]);
    ok(&coll, &["queue", "call", "q", "--desk", "1"]);
    ok(&coll, &["queue", "take", "q"]);
    let r = json_of(&ok(&coll, &["queue", "take", "q", "--json"]));
    assert_eq!(
        pick(&r, &["ticket", "serial"]),
        json!({"ticket": 1, "serial": 4})
    );
    // P gives up late: refused, R still waits.
    let err = fails(
        &coll,
        &["queue", "cancel", "q", "--request-id", "paper-p"],
        EXIT_NOT_WAITING,
    );
    assert!(
        err.contains("ticket 1 (serial 1)") && err.contains("it was called to desk \"1\""),
        "{err}"
    );
    let err = fails(
        &coll,
        &["queue", "cancel", "q", "--serial", "2"],
        EXIT_NOT_WAITING,
    );
    assert!(err.contains("it is called to desk \"1\""), "{err}");
    // A recall or finish of serial 1 does not land on serial 2, which desk 1 shows now.
    for act in ["recall", "finish"] {
        let err = fails(
            &coll,
            &["queue", act, "q", "--desk", "1", "--serial", "1"],
            EXIT_NOT_WAITING,
        );
        assert!(
            err.contains("it shows ticket 2 (serial 2) now"),
            "{act}: {err}"
        );
    }
    // The number 1 is R's now: looked up once, the answer names serial 4.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .args([
            "--db",
            common::DB,
            "--collection",
            &coll,
            "queue",
            "cancel",
            "q",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "cancelled ticket 1 (serial 4) of queue q"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ticket 1 of queue q is serial 4"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A give-up whose take never came takes and cancels in one write; the take then answers
    // that ticket, and a second give-up says it was given up already.
    ok(
        &coll,
        &["queue", "finish", "q", "--desk", "1", "--serial", "2"],
    );
    let gone = json_of(&ok(
        &coll,
        &["queue", "cancel", "q", "--request-id", "late", "--json"],
    ));
    assert_eq!(
        pick(&gone, &["serial", "replayed"]),
        json!({"serial": 5, "replayed": false})
    );
    let late = json_of(&ok(
        &coll,
        &["queue", "take", "q", "--request-id", "late", "--json"],
    ));
    assert_eq!(
        pick(&late, &["serial", "replayed"]),
        json!({"serial": 5, "replayed": true})
    );
    let err = fails(
        &coll,
        &["queue", "cancel", "q", "--request-id", "late"],
        EXIT_NOT_WAITING,
    );
    assert!(err.contains("given up already"), "{err}");
    // One way to name it at a time.
    let err = fails(&coll, &["queue", "cancel", "q", "1", "--serial", "3"], 2);
    assert!(err.contains("cannot be used with"), "{err}");
    let err = fails(&coll, &["queue", "cancel", "q"], 2);
    assert!(err.contains("required"), "{err}");
}

/// Cancel and no-show, a given ticket called out of order (once), labels from a format: calls
/// pass over cancelled tickets; a ticket not waiting is a clear error (exit 11) and nothing
/// is written; the numbers stay in --json.
#[test]
fn cancels_and_given_calls_with_labels() {
    common::ready();
    let coll = common::unique("queue_cancel");
    ok(
        &coll,
        &[
            "queue", "create", "q", "--max", "999", "--format", "A-{n:03}",
        ],
    );
    assert_eq!(
        ok(&coll, &["queue", "take", "q", "--count", "5"]),
        "A-001\nA-002\nA-003\nA-004\nA-005\n"
    );
    let t = json_of(&ok(&coll, &["queue", "take", "q", "--json"]));
    assert_eq!(
        pick(&t, &["ticket", "label", "serial", "position"]),
        json!({"ticket": 6, "label": "A-006", "serial": 6, "position": 5})
    );
    // A number read off a ticket is looked up once, then cancelled by its serial, which the
    // answer names (issue 59).
    assert_eq!(
        ok(&coll, &["queue", "cancel", "q", "2"]).trim(),
        "cancelled ticket A-002 (serial 2) of queue q"
    );
    let version = |coll: &str| {
        json_of(&ok(coll, &["queue", "peek", "q", "--json"]))["version"]
            .as_i64()
            .unwrap()
    };
    let v = version(&coll);
    let err = fails(&coll, &["queue", "cancel", "q", "2"], EXIT_NOT_WAITING);
    assert_eq!(
        err.trim(),
        "dispenser: ticket 2 (serial 2) of queue \"q\" is not waiting: it was cancelled; nothing was changed"
    );
    let called = json_of(&ok(
        &coll,
        &[
            "queue", "call", "q", "--desk", "1", "--ticket", "4", "--json",
        ],
    ));
    assert_eq!(
        pick(&called, &["ticket", "label", "desk", "waiting"]),
        json!({"ticket": 4, "label": "A-004", "desk": "1", "waiting": 4})
    );
    let err = fails(
        &coll,
        &["queue", "call", "q", "--ticket", "4"],
        EXIT_NOT_WAITING,
    );
    assert!(err.contains("it is called to desk \"1\""), "{err}");
    let err = fails(&coll, &["queue", "cancel", "q", "7"], EXIT_NOT_WAITING);
    assert!(
        err.contains("no ticket with this number was taken"),
        "{err}"
    );
    let err = fails(&coll, &["queue", "cancel", "q", "1000"], EXIT_NOT_WAITING);
    assert!(err.contains("no ticket shows 1000"), "{err}");
    assert_eq!(version(&coll), v + 1, "refusals wrote nothing");
    // The line: 1, 3, 5, 6 (2 cancelled, 4 called).
    let s = json_of(&ok(&coll, &["queue", "peek", "q", "--json"]));
    let line: Vec<&str> = s["waiting_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["label"].as_str().unwrap())
        .collect();
    assert_eq!(line, ["A-001", "A-003", "A-005", "A-006"]);
    for want in ["A-001", "A-003", "A-005", "A-006"] {
        assert_eq!(
            ok(&coll, &["queue", "call", "q", "--desk", "2"]).trim(),
            want
        );
    }
    fails(&coll, &["queue", "call", "q"], EXIT_NOBODY);
    let s = json_of(&ok(&coll, &["queue", "peek", "q", "--json"]));
    assert_eq!(
        pick(
            &s,
            &[
                "taken",
                "served",
                "waiting",
                "cancelled",
                "now_serving",
                "now_serving_label",
                "label_format"
            ]
        ),
        json!({"taken": 6, "served": 5, "waiting": 0, "cancelled": 1, "now_serving": 6,
               "now_serving_label": "A-006", "label_format": "A-{n:03}"})
    );
    let text = ok(&coll, &["queue", "peek", "q"]);
    assert!(
        text.starts_with("q: now serving A-006, 0 waiting of 1000, next ticket A-007"),
        "{text}"
    );
    assert!(
        text.contains("  desk 1: A-004\n  desk 2: A-006\n"),
        "{text}"
    );
}

/// Regression (issue 31, found 2): a take whose reply was lost could not be retried without
/// taking again. With a request id, the same take again answers the same tickets
/// (`replayed`) and takes nothing more; another count with the same id is refused.
#[test]
fn a_take_with_a_request_id_is_answered_again_and_never_taken_twice() {
    common::ready();
    let coll = common::unique("queue_request_id");
    ok(&coll, &["queue", "create", "q", "--max", "9"]);
    let take = |coll: &str| {
        ok(
            coll,
            &[
                "queue",
                "take",
                "q",
                "--count",
                "2",
                "--request-id",
                "kiosk-7/0001",
                "--json",
            ],
        )
    };
    let first: Vec<Value> = take(&coll).lines().map(json_of).collect();
    let again: Vec<Value> = take(&coll).lines().map(json_of).collect();
    let keys = ["ticket", "serial", "version"];
    assert_eq!(
        first.iter().map(|t| pick(t, &keys)).collect::<Vec<_>>(),
        again.iter().map(|t| pick(t, &keys)).collect::<Vec<_>>()
    );
    assert_eq!(
        (&first[0]["replayed"], &again[0]["replayed"]),
        (&json!(false), &json!(true))
    );
    let s = json_of(&ok(&coll, &["queue", "peek", "q", "--json"]));
    assert_eq!((&s["taken"], &s["version"]), (&json!(2), &json!(1)));
    let err = fails(
        &coll,
        &["queue", "take", "q", "--request-id", "kiosk-7/0001"],
        EXIT_INVALID,
    );
    assert!(
        err.contains("was used for a take of 2 ticket(s), not 1"),
        "{err}"
    );
    let err = fails(
        &coll,
        &["queue", "take", "q", "--request-id", "é"],
        EXIT_INVALID,
    );
    assert!(err.contains("printable ASCII"), "{err}");
    assert_eq!(
        ok(
            &coll,
            &["queue", "take", "q", "--request-id", "kiosk-7/0002"]
        ),
        "3\n"
    );
}

/// Regression (issue 31, found 4): there was no supported way to change a queue's range, and
/// a hand-edited `max` remapped held tickets. `queue alter --max` refuses a range under which
/// a waiting or shown ticket would show another number, and writes nothing then.
#[test]
fn alter_max_never_remaps_a_held_ticket() {
    common::ready();
    let coll = common::unique("queue_alter");
    ok(&coll, &["queue", "create", "q", "--max", "9"]);
    assert_eq!(
        ok(&coll, &["queue", "take", "q", "--count", "3"]),
        "1\n2\n3\n"
    );
    assert_eq!(ok(&coll, &["queue", "call", "q", "--desk", "1"]), "1\n");
    let err = fails(&coll, &["queue", "alter", "q", "--max", "2"], EXIT_CONFLICT);
    assert!(
        err.contains("ticket 3 is held (waiting or shown) and would show 0 under max 2"),
        "{err}"
    );
    let err = fails(&coll, &["queue", "alter", "q", "--max", "1"], EXIT_CONFLICT);
    assert!(
        err.contains("span 3 tickets and max 1 holds only 2"),
        "{err}"
    );
    let s = json_of(&ok(&coll, &["queue", "peek", "q", "--json"]));
    assert_eq!((&s["max"], &s["version"]), (&json!(9), &json!(2)));
    assert!(
        ok(&coll, &["queue", "alter", "q", "--max", "3"])
            .starts_with("q: now serving 1, 2 waiting of 4")
    );
    // 1 shown, 2 and 3 wait, range 1 … 3, 0: the next is 0, then full.
    assert_eq!(ok(&coll, &["queue", "take", "q"]), "0\n");
    fails(&coll, &["queue", "take", "q"], EXIT_FULL);
    // 0 (serial 4) waits: under max 99 it would show 4.
    let err = fails(
        &coll,
        &["queue", "alter", "q", "--max", "99"],
        EXIT_CONFLICT,
    );
    assert!(
        err.contains("ticket 0 is held (waiting or shown) and would show 4 under max 99"),
        "{err}"
    );
    // Once the line is through (and the desk released), any range.
    for _ in 0..3 {
        ok(&coll, &["queue", "call", "q", "--desk", "1"]);
    }
    ok(&coll, &["queue", "finish", "q", "--desk", "1"]);
    assert!(ok(&coll, &["queue", "alter", "q", "--max", "99"]).contains("of 100"));
    fails(&coll, &["queue", "alter", "nope", "--max", "5"], 3);
}

/// A daily queue starts again at its first ticket each local day, and never hands out a
/// number still held by someone waiting from the day before (the clock is the handle's).
#[tokio::test]
async fn a_daily_queue_starts_again_each_local_day() {
    let f = Fixture::new("queue_daily").await;
    let d = f.dispenser(f.options());
    let spec = QueueSpec::default()
        .with_max(4)
        .with_daily(true)
        .with_time_zone(&dispenser::jiff::tz::TimeZone::get("Europe/Paris").unwrap());
    let q = d.create_queue("q", spec).await.unwrap();
    let at = |t: &'static str| -> dispenser::scope::Clock {
        Arc::new(move || t.parse().expect("a timestamp"))
    };
    // 22:30 UTC on the 24th is 23:30 in Paris; 23:30 UTC is 00:30 on the 25th there.
    let evening = q.with_clock(at("2030-11-24T22:30:00Z"));
    let numbers: Vec<i64> = evening
        .take()
        .count(3)
        .await
        .unwrap()
        .iter()
        .map(|t| t.number)
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(evening.call().await.unwrap().number, 1);
    let s = evening.peek().await.unwrap();
    assert_eq!((s.day.as_str(), s.taken_today), ("2030-11-24", 3));
    let night = q.with_clock(at("2030-11-24T23:30:00Z"));
    assert_eq!(
        night.take().await.unwrap().number,
        1,
        "a new day starts at 1"
    );
    let s = night.peek().await.unwrap();
    assert_eq!(
        (s.day.as_str(), s.taken_today, s.waiting),
        ("2030-11-25", 1, 3)
    );
    assert!(s.desks.is_empty(), "the boards start the day blank");
    // 2 and 3 still wait from yesterday: today's 2 is refused, and the message says why fewer
    // fit than the range holds (regression, issue 49, item 10).
    let e = night.take().await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::QueueFull {
                waiting: 3,
                capacity: 5,
                before_restart: 2,
                oldest_before_restart: Some(2),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("2 of them were taken before the daily restart and keep their numbers, so today's tickets stop before 2"),
        "{e}"
    );
    // Yesterday's first.
    let order: Vec<i64> = [
        night.call().await.unwrap().number,
        night.call().await.unwrap().number,
        night.call().await.unwrap().number,
    ]
    .into();
    assert_eq!(order, [2, 3, 1]);
    assert_eq!(night.take().await.unwrap().number, 2);
    let mut bad = QueueSpec::default();
    bad.time_zone = "Mars/Olympus".to_owned(); // as a stored document or a client could name it
    let e = d.create_queue("bad", bad).await.unwrap_err();
    assert!(e.to_string().contains("not a known IANA time zone"), "{e}");
}

/// The estimate a ticket is given at take time against its real wait, in a simulated branch
/// day (the clock is the handle's): arrivals every 40 s on average, two desks serving for 30
/// to 120 s. Prints the numbers; checks only that estimates come once calls were seen.
#[tokio::test]
async fn estimated_waits_against_real_waits() {
    let f = Fixture::new("queue_estimate").await;
    let d = f.dispenser(f.options());
    let q = d
        .create_queue("q", QueueSpec::default().with_max(999))
        .await
        .unwrap();
    let t0: i64 = 1_795_000_000_000;
    let clock = |ms: i64| -> dispenser::scope::Clock {
        Arc::new(move || jiff::Timestamp::from_millisecond(ms).expect("a time"))
    };
    let mut rng = Rng(common::seed("DISPENSER_QUEUE_SEED"));
    // Events: arrivals, and each desk's next free moment.
    let mut next_arrival = t0;
    let mut desk_free = [t0, t0];
    let mut taken_at: HashMap<u64, (i64, Option<u64>)> = HashMap::new();
    let mut pairs_seen: Vec<(u64, u64)> = Vec::new();
    let mut arrivals = 0;
    while arrivals < 150 || !taken_at.is_empty() {
        let desk = if desk_free[0] <= desk_free[1] { 0 } else { 1 };
        if arrivals < 150 && next_arrival <= desk_free[desk] {
            let h = q.with_clock(clock(next_arrival));
            let t = h.take().await.unwrap();
            taken_at.insert(
                t.serial,
                (next_arrival, t.estimated_wait.map(|d| d.as_secs())),
            );
            arrivals += 1;
            next_arrival += 5_000 + rng.below(70_000) as i64;
        } else {
            let now = desk_free[desk];
            let h = q.with_clock(clock(now));
            match h.call().desk(format!("{}", desk + 1)).await {
                Ok(t) => {
                    let (at, est) = taken_at.remove(&t.serial).unwrap();
                    if let Some(est) = est {
                        pairs_seen.push((est, ((now - at) / 1000) as u64));
                    }
                    desk_free[desk] = now + 30_000 + rng.below(90_000) as i64;
                }
                Err(Error::NobodyWaiting { .. }) => desk_free[desk] = next_arrival,
                Err(e) => panic!("{e}"),
            }
        }
    }
    assert!(
        pairs_seen.len() > 100,
        "estimates came once calls were seen: {}",
        pairs_seen.len()
    );
    let n = pairs_seen.len() as f64;
    let mae = pairs_seen
        .iter()
        .map(|(e, r)| (*e as f64 - *r as f64).abs())
        .sum::<f64>()
        / n;
    let mean_real = pairs_seen.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let mean_est = pairs_seen.iter().map(|p| p.0 as f64).sum::<f64>() / n;
    let within = |pct: f64| {
        pairs_seen
            .iter()
            .filter(|(e, r)| (*e as f64 - *r as f64).abs() <= pct * (*r as f64).max(60.0))
            .count() as f64
            / n
    };
    let s = q.peek().await.unwrap();
    eprintln!(
        "queue estimate: {} tickets with an estimate; mean estimate {mean_est:.0} s, mean real wait {mean_real:.0} s, mean absolute error {mae:.0} s; within 25 %: {:.0} %, within 50 %: {:.0} %; status average wait {:?}, p90 {:?}",
        pairs_seen.len(),
        within(0.25) * 100.0,
        within(0.5) * 100.0,
        s.average_wait,
        s.p90_wait,
    );
}

/// Queues over HTTP: format, families, Idempotency-Key, desks, recall, finish, cancel,
/// alter, the paged list and delete; rights as the contract says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_branch_operations_over_http() {
    let svc = Service::start_args("queue_http_desks", &common::uri(), &[]);
    let http = reqwest::Client::new();
    let post = |path: &str, token: &str, body: Value| {
        http.post(svc.url(path)).bearer_auth(token).json(&body)
    };
    let (status, body) = send(post(
        "/v1/queues",
        ADMIN,
        json!({ "name": "lobby", "max": 99, "format": "A-{n:03}", "tz": "Europe/Paris" }),
    ))
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        pick(
            &body,
            &[
                "label_format",
                "tz",
                "daily",
                "next_ticket_label",
                "recent_calls",
                "desks",
                "estimated_wait_seconds"
            ]
        ),
        json!({"label_format": "A-{n:03}", "tz": "Europe/Paris", "daily": false, "next_ticket_label": "A-001",
               "recent_calls": [], "desks": [], "estimated_wait_seconds": null})
    );
    // A take with a key, twice: the same ticket, replayed the second time.
    let keyed = || {
        http.post(svc.url("/v1/queues/lobby/take"))
            .bearer_auth(KIOSK)
            .header("Idempotency-Key", "kiosk-1/42")
    };
    let (s1, t1) = send(keyed()).await;
    let (s2, t2) = send(keyed()).await;
    assert_eq!((s1, s2), (200, 200), "{t1} {t2}");
    assert_eq!(
        pick(&t1, &["ticket", "label", "replayed"]),
        json!({"ticket": 1, "label": "A-001", "replayed": false})
    );
    assert_eq!(
        pick(&t2, &["ticket", "label", "replayed"]),
        json!({"ticket": 1, "label": "A-001", "replayed": true})
    );
    let (status, body) = send(
        http.post(svc.url("/v1/queues/lobby/take"))
            .bearer_auth(KIOSK)
            .header("Idempotency-Key", ""),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_input")),
        "{body}"
    );
    // A family.
    let (status, fam) = send(post("/v1/queues/lobby/take", KIOSK, json!({ "count": 3 }))).await;
    assert_eq!(status, 200, "{fam}");
    assert_eq!(
        fam["tickets"],
        json!([{"ticket": 2, "label": "A-002", "serial": 2, "position": 1},
               {"ticket": 3, "label": "A-003", "serial": 3, "position": 2},
               {"ticket": 4, "label": "A-004", "serial": 4, "position": 3}])
    );
    let (status, body) = send(post("/v1/queues/lobby/take", KIOSK, json!({ "count": 0 }))).await;
    assert_eq!(status, 400, "{body}");
    // Desks.
    let (status, c) = send(post("/v1/queues/lobby/call", ADMIN, json!({ "desk": "3" }))).await;
    assert_eq!(status, 200, "{c}");
    assert_eq!(
        pick(&c, &["ticket", "label", "desk", "waiting"]),
        json!({"ticket": 1, "label": "A-001", "desk": "3", "waiting": 3})
    );
    let (_, c) = send(post(
        "/v1/queues/lobby/call",
        ADMIN,
        json!({ "desk": "4", "ticket": 3 }),
    ))
    .await;
    assert_eq!(
        pick(&c, &["ticket", "desk"]),
        json!({"ticket": 3, "desk": "4"})
    );
    let (status, body) = send(post("/v1/queues/lobby/call", ADMIN, json!({ "ticket": 3 }))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("ticket_not_waiting")),
        "{body}"
    );
    let (status, body) = send(post("/v1/queues/lobby/call", ADMIN, json!({ "desk": "" }))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_input")),
        "{body}"
    );
    let (status, r) = send(post(
        "/v1/queues/lobby/recall",
        ADMIN,
        json!({ "desk": "3" }),
    ))
    .await;
    assert_eq!(
        (status, pick(&r, &["ticket", "label", "desk"])),
        (200, json!({"ticket": 1, "label": "A-001", "desk": "3"}))
    );
    assert!(r["at"].is_string(), "{r}");
    let (status, body) = send(post(
        "/v1/queues/lobby/recall",
        ADMIN,
        json!({ "desk": "9" }),
    ))
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("no_ticket_shown")),
        "{body}"
    );
    let (status, body) = send(post(
        "/v1/queues/lobby/cancel",
        ADMIN,
        json!({ "ticket": 2 }),
    ))
    .await;
    assert_eq!(
        (status, &body["cancelled"], &body["ticket"]),
        (200, &json!(true), &json!(2)),
        "{body}"
    );
    let (status, body) = send(post(
        "/v1/queues/lobby/cancel",
        ADMIN,
        json!({ "ticket": 2 }),
    ))
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("ticket_not_waiting")),
        "{body}"
    );
    // A kiosk may take, not call, recall or cancel.
    for path in ["call", "recall", "cancel", "finish", "alter"] {
        let (status, body) =
            send(post(&format!("/v1/queues/lobby/{path}"), KIOSK, json!({}))).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    let (_, s) = send(http.get(svc.url("/v1/queues/lobby")).bearer_auth(ADMIN)).await;
    assert_eq!(
        s["recent_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| pick(c, &["ticket", "desk", "recall"]))
            .collect::<Vec<_>>(),
        [
            json!({"ticket": 1, "desk": "3", "recall": true}),
            json!({"ticket": 3, "desk": "4", "recall": false}),
            json!({"ticket": 1, "desk": "3", "recall": false})
        ]
    );
    assert_eq!(
        pick(&s, &["waiting", "cancelled", "taken_today", "served_today"]),
        json!({"waiting": 1, "cancelled": 1, "taken_today": 4, "served_today": 2})
    );
    assert_eq!(
        s["waiting_list"],
        json!([{"ticket": 4, "label": "A-004", "serial": 4}])
    );
    assert_eq!(s["hourly"][0]["taken"], json!(4), "{s}");
    // Alter: refused when it would remap a held ticket (4 waits: under max 2 it shows 1).
    let (status, body) = send(post("/v1/queues/lobby/alter", ADMIN, json!({ "max": 2 }))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("would_remap")),
        "{body}"
    );
    let (status, body) = send(post("/v1/queues/lobby/alter", ADMIN, json!({ "max": 199 }))).await;
    assert_eq!((status, &body["capacity"]), (200, &json!(200)), "{body}");
    // Desk 4 finishes: 3 is no longer shown. The old word is gone.
    let (status, _) = send(post(
        "/v1/queues/lobby/release",
        ADMIN,
        json!({ "desk": "4" }),
    ))
    .await;
    assert_eq!(status, 404);
    let (status, body) = send(post(
        "/v1/queues/lobby/finish",
        ADMIN,
        json!({ "desk": "4" }),
    ))
    .await;
    assert_eq!((status, &body["ticket"]), (200, &json!(3)), "{body}");
    // The list, in pages; delete.
    for name in ["lobby2", "lobby3"] {
        let (status, _) = send(post("/v1/queues", ADMIN, json!({ "name": name }))).await;
        assert_eq!(status, 201);
    }
    let (status, page) = send(http.get(svc.url("/v1/queues?limit=2")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        (page["queues"][1]["name"].as_str(), page["next"].as_str()),
        (Some("lobby2"), Some("lobby2"))
    );
    let (_, page) = send(
        http.get(svc.url("/v1/queues?limit=2&after=lobby2"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(
        (page["queues"][0]["name"].as_str(), &page["next"]),
        (Some("lobby3"), &Value::Null),
        "{page}"
    );
    let (status, _) = send(http.delete(svc.url("/v1/queues/lobby3")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 204);
    let (status, body) = send(http.delete(svc.url("/v1/queues/lobby3")).bearer_auth(ADMIN)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("no_such_queue")),
        "{body}"
    );
    let (status, _) = send(http.delete(svc.url("/v1/queues/lobby2")).bearer_auth(KIOSK)).await;
    assert_eq!(status, 403);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// Regression (issue 49, item 10): the desk labels `" "` and `"  a  "` were taken as given, and
/// the board showed a blank desk. On every surface that takes a desk label a blank one is
/// refused, nothing written (the library's `InvalidArgument`, exit 2, HTTP 400 — and the
/// OpenAPI document's pattern rules it out), and the spaces at either end are dropped: `"  a  "`
/// is desk `"a"`, which the status shows and a recall or finish by `"a"` finds.
#[tokio::test]
async fn a_blank_desk_label_is_refused_and_spaces_around_one_are_dropped() {
    let f = Fixture::new("queue_desk_blank").await;
    let d = f.dispenser(f.options());
    let q = d
        .create_queue("q", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    q.take().count(4).await.unwrap();
    let version = q.peek().await.unwrap().version;
    for blank in [" ", "    "] {
        let e = q.call().desk(blank).await.unwrap_err();
        assert!(
            e.kind() == dispenser::error::ErrorKind::InvalidInput
                && e.to_string().contains("is blank"),
            "{e}"
        );
        let e = q.recall().desk(blank).await.unwrap_err();
        assert!(e.kind() == dispenser::error::ErrorKind::InvalidInput, "{e}");
    }
    assert_eq!(q.peek().await.unwrap().version, version, "nothing written");
    let t = q.call().desk("  a  ").await.unwrap();
    assert_eq!((t.number, t.desk.as_deref()), (1, Some("a")));
    let desks = q.peek().await.unwrap().desks;
    assert_eq!(desks.len(), 1);
    assert_eq!(desks[0].desk.as_deref(), Some("a"));
    assert_eq!(q.recall().desk("a").await.unwrap().number, 1);

    // The command line.
    let coll = f.collection.as_str();
    let err = fails(coll, &["queue", "call", "q", "--desk", "   "], EXIT_INVALID);
    assert!(err.contains("is blank"), "{err}");
    assert_eq!(ok(coll, &["queue", "call", "q", "--desk", " b "]), "2\n");
    assert_eq!(
        ok(coll, &["queue", "finish", "q", "--desk", "b "]),
        "desk b of queue q finished ticket 2\n"
    );
    fails(coll, &["queue", "recall", "q", "--desk", " "], EXIT_INVALID);

    // The service, and its OpenAPI document.
    let svc = Service::start("queue_desk_blank_http");
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| http.post(svc.url(path)).bearer_auth(ADMIN).json(&body);
    let (status, body) = send(post("/v1/queues", json!({ "name": "lobby" }))).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(post("/v1/queues/lobby/take", json!({ "count": 2 }))).await;
    assert_eq!(status, 200, "{body}");
    for path in [
        "/v1/queues/lobby/call",
        "/v1/queues/lobby/recall",
        "/v1/queues/lobby/finish",
    ] {
        let (status, body) = send(post(path, json!({ "desk": "  " }))).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("invalid_input")),
            "{path}: {body}"
        );
    }
    let (status, body) = send(post("/v1/queues/lobby/call", json!({ "desk": " c  " }))).await;
    assert_eq!((status, &body["desk"]), (200, &json!("c")), "{body}");
    let (status, body) = send(post("/v1/queues/lobby/recall", json!({ "desk": "c" }))).await;
    assert_eq!((status, &body["ticket"]), (200, &json!(1)), "{body}");
    let (_, doc) = send(http.get(svc.url("/openapi.json"))).await;
    let pattern = doc["components"]["schemas"]["CallBody"]["properties"]["desk"]["pattern"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        doc["components"]["schemas"]["RecallBody"]["properties"]["desk"]["pattern"],
        json!(pattern)
    );
    // Read as Schemathesis reads it (Python's regular expressions).
    let check = std::process::Command::new(crate::clients::tool("venv/bin/python"))
        .args([
            "-c",
            "import re, sys; p = sys.argv[1]; \
             print([bool(re.search(p, s)) for s in [' ', '    ', '  a  ', 'Desk 3', 'a/b', 'a\\n']])",
            &pattern,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&check.stdout).trim(),
        "[False, False, True, True, False, False]",
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}
