//! Queues at every edge (issue 37): the dimensions that cut across every queue feature —
//! **time** (days going by, zones with daylight-saving changes, clients whose clocks are
//! hours or days apart), **range** (capacities from 2 to the edge of 64 bits, ranges at
//! either end of `i64`) and **identity** (request ids that collide across callers) — drawn
//! together, once, by one seeded model:
//!
//! * every write produces a document every reader accepts (an operation never fails with
//!   `CorruptDocument`, and a reader with the shared clock decodes the queue after every few
//!   operations);
//! * no ticket is held twice: replaying the acknowledged writes in version order on a plain
//!   model (the tickets waiting, the ticket each desk shows, desks cleared when a daily
//!   queue's day changes), no take hands out a number someone holds;
//! * a request id belongs to its caller: a retry answers exactly its own first take, and the
//!   same id from another caller is another take;
//! * every operation returns within a bound (no work grows with the range or the history).
//!
//! Beside it, one regression test per reproduction of the issue, through the surface the
//! issue found it on (library, command line, HTTP).
//!
//! `DISPENSER_QUEUE_SEED=<seed>` replays the model; `DISPENSER_EDGES_ROUNDS` runs more
//! rounds. Sensitivity: `scripts/mutants.sh newday caller` puts back the day's invariant of
//! old and ids shared across callers; the model fails on each.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use dispenser::mongodb::bson::{Document, doc};
use dispenser::queue::{QueueAlter, QueueSpec, Ticket};
use dispenser::{Dispenser, Error};
use futures::future::join_all;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Value, json};

use crate::common::{self, DB, Fixture};
use crate::queue::{Rng, fails, ok};
use crate::serve::{ADMIN, Service, send};

/// The longest one queue operation may take in the model (a loaded 2-core debug build takes
/// milliseconds; the defect this guards against took hours).
const BOUND: Duration = Duration::from_secs(20);

/// Zones with daylight-saving changes (half-hour ones among them) and two without.
const ZONES: [&str; 6] = [
    "Europe/Paris",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kolkata",
    "UTC",
];

/// An instant a little before the next daylight-saving change of `tz` after tomorrow (or
/// tomorrow, for a zone without one): later than the server's clock at the queue's creation,
/// so the simulated days are new days for the queue.
fn near_a_change(tz: &TimeZone) -> Timestamp {
    let tomorrow = Timestamp::now() + jiff::SignedDuration::from_hours(24);
    tz.following(tomorrow)
        .next()
        .map_or(tomorrow, |t| {
            t.timestamp() - jiff::SignedDuration::from_hours(30)
        })
        .max(tomorrow)
}

/// What one acknowledged write did.
#[derive(Clone, Debug)]
enum Did {
    Took { numbers: Vec<i64> },
    Called { desk: String, number: i64 },
    Recalled,
    Released { desk: String },
    Cancelled { number: i64 },
    Altered,
}

#[derive(Clone, Debug)]
struct Write {
    version: i64,
    /// The writer's time (its clock: the shared one plus its skew).
    at_ms: i64,
    who: String,
    did: Did,
}

/// The local date of `ms` in `tz`.
fn day_of(tz: &TimeZone, ms: i64) -> jiff::civil::Date {
    Timestamp::from_millisecond(ms)
        .expect("a time")
        .to_zoned(tz.clone())
        .date()
}

/// Replays `writes` in version order on a plain model. `Err` names the first write that
/// hands out a held ticket, calls or cancels one that does not wait, or a missing version.
fn check_writes(
    writes: &mut [Write],
    tz: &TimeZone,
    daily: bool,
    created_ms: i64,
    last_version: i64,
) -> Result<(), String> {
    writes.sort_by_key(|w| w.version);
    let versions: Vec<i64> = writes.iter().map(|w| w.version).collect();
    let expected: Vec<i64> = (1..=last_version).collect();
    if versions != expected {
        return Err(format!(
            "the acknowledged writes are versions {versions:?}, the queue is at {last_version}"
        ));
    }
    let mut day = day_of(tz, created_ms);
    let mut waiting: HashSet<i64> = HashSet::new();
    let mut shown: HashMap<String, i64> = HashMap::new();
    for w in writes.iter() {
        let today = day_of(tz, w.at_ms);
        if today > day {
            day = today;
            if daily {
                shown.clear();
            }
        }
        let held = |n: &i64, waiting: &HashSet<i64>, shown: &HashMap<String, i64>| {
            waiting.contains(n) || shown.values().any(|s| s == n)
        };
        match &w.did {
            Did::Took { numbers } => {
                for n in numbers {
                    if held(n, &waiting, &shown) {
                        return Err(format!(
                            "version {} ({}) handed out {n}, which someone held (waiting {waiting:?}, shown {shown:?})",
                            w.version, w.who
                        ));
                    }
                    waiting.insert(*n);
                }
            }
            Did::Called { desk, number } => {
                if !waiting.remove(number) {
                    return Err(format!(
                        "version {} ({}) called {number}, which did not wait",
                        w.version, w.who
                    ));
                }
                shown.insert(desk.clone(), *number);
            }
            Did::Cancelled { number } => {
                if !waiting.remove(number) {
                    return Err(format!(
                        "version {} ({}) cancelled {number}, which did not wait",
                        w.version, w.who
                    ));
                }
            }
            Did::Released { desk } => {
                shown.remove(desk);
            }
            Did::Recalled | Did::Altered => {}
        }
    }
    Ok(())
}

/// One operation within [`BOUND`], or why not.
async fn bounded<T>(
    what: &str,
    op: impl std::future::Future<Output = dispenser::Result<T>>,
) -> Result<dispenser::Result<T>, String> {
    let started = Instant::now();
    match tokio::time::timeout(BOUND, op).await {
        Ok(Err(e @ Error::CorruptDocument { .. })) => Err(format!(
            "{what}: a write produced (or read) a refused document: {e}"
        )),
        Ok(r) => Ok(r),
        Err(_) => Err(format!(
            "{what} did not return within {BOUND:?} ({:?})",
            started.elapsed()
        )),
    }
}

/// The spec of a round: capacities from 2 to 2^63 − 1, at either end of `i64` or near 0.
fn draw_spec(rng: &mut Rng) -> (QueueSpec, &'static str, Timestamp) {
    let capacity: i64 = match rng.below(6) {
        0 => 2,
        1 | 2 => 3 + rng.below(10) as i64,
        3 => 1 << 40,
        4 => i64::MAX - rng.below(3) as i64,
        _ => 10_000_000_000_000,
    };
    let min = match rng.below(4) {
        0 => 0,
        1 => -(rng.below(5) as i64),
        2 => i64::MIN,
        _ => i64::MAX - (capacity - 1),
    };
    let max = min + (capacity - 1);
    let zone = ZONES[rng.below(ZONES.len() as u64) as usize];
    let tz = TimeZone::get(zone).expect("a zone");
    let start = near_a_change(&tz) + jiff::SignedDuration::from_mins(rng.below(180) as i64);
    let spec = QueueSpec::default()
        .with_min(min)
        .with_max(max)
        .with_daily(rng.below(10) < 7)
        .with_time_zone(&tz);
    (spec, zone, start)
}

/// A clock that reads the shared simulated time plus `skew_ms`.
fn clock(now: &Arc<AtomicI64>, skew_ms: i64) -> dispenser::scope::Clock {
    let now = now.clone();
    Arc::new(move || {
        Timestamp::from_millisecond(now.load(Ordering::SeqCst) + skew_ms).expect("a time")
    })
}

/// Counts a kiosk down when it ends, however it ends (an error included), so the desks and
/// the clock stop too.
struct Running(Arc<AtomicI64>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What every actor hands back.
#[derive(Default)]
struct Seen {
    writes: Vec<Write>,
    refusals: usize,
    replays: usize,
}

fn took(t: &[Ticket]) -> Vec<i64> {
    t.iter().map(|x| x.number).collect()
}

async fn edges_round(seed: u64) -> Result<String, String> {
    let mut rng = Rng(seed);
    let (spec, zone, start) = draw_spec(&mut rng);
    let tz = TimeZone::get(zone).map_err(|e| e.to_string())?;
    let daily = spec.daily;
    let (min, capacity) = (spec.min, spec.capacity());
    let f = Fixture::new("queue_edges_model").await;
    let admin = f.dispenser(f.options());
    let now = Arc::new(AtomicI64::new(start.as_millisecond()));
    let created = admin
        .create_queue("q", spec.clone())
        .await
        .map_err(|e| e.to_string())?
        .with_clock(clock(&now, 0));
    let created_ms = created
        .peek()
        .await
        .map_err(|e| e.to_string())?
        .created_at
        .timestamp_millis();
    // Creation read the server's clock (today); the simulated days start tomorrow or later.
    let running = Arc::new(AtomicI64::new(3));
    let mut actors = Vec::new();
    // Three kiosks, each a caller with its own clock skew (hours or days apart) and ids that
    // collide with the other kiosks' ("req-1", "req-2", … for each).
    let skews = [0_i64, 3, -5, 24, 48, -24, 7];
    for k in 0..3_u64 {
        let skew_ms = skews[rng.below(skews.len() as u64) as usize] * 3_600_000;
        let q = created.with_clock(clock(&now, skew_ms));
        let kseed = rng.next_u64();
        let running = running.clone();
        actors.push(tokio::spawn(async move {
            let _running = Running(running);
            let mut r = Rng(kseed);
            let mut seen = Seen::default();
            let who = format!("kiosk {k} ({:+} h)", skew_ms / 3_600_000);
            let caller = format!("kiosk-{k}");
            for i in 1..=28 {
                let count = 1 + r.below(3);
                let take = || {
                    q.take()
                        .count(count)
                        .request_id(format!("req-{i}"))
                        .caller(&caller)
                        .into_future()
                };
                let first = bounded(&who, take()).await?;
                let first = match first {
                    Ok(t) => t,
                    Err(Error::QueueFull { .. } | Error::Contention { .. }) => {
                        seen.refusals += 1;
                        continue;
                    }
                    Err(e) => return Err(format!("{who}: take: {e}")),
                };
                if first.iter().any(|t| t.replayed) {
                    return Err(format!(
                        "{who}: a new id req-{i} was answered as a replay: {:?} (another caller's take?)",
                        took(&first)
                    ));
                }
                seen.writes.push(Write {
                    version: first[0].version,
                    at_ms: first[0].at.timestamp_millis(),
                    who: who.clone(),
                    did: Did::Took {
                        numbers: took(&first),
                    },
                });
                // A retry (a lost reply, a double tap): its own take, nothing more.
                if r.below(3) == 0 {
                    match bounded(&who, take()).await? {
                        Ok(again)
                            if took(&again) == took(&first)
                                && again.iter().all(|t| t.replayed)
                                && again[0].version == first[0].version =>
                        {
                            seen.replays += 1
                        }
                        Ok(again) => {
                            return Err(format!(
                                "{who}: the retry of req-{i} answered {:?} (v{}), its take was {:?} (v{})",
                                took(&again),
                                again[0].version,
                                took(&first),
                                first[0].version
                            ));
                        }
                        Err(e) => return Err(format!("{who}: the retry of req-{i}: {e}")),
                    }
                }
                tokio::time::sleep(Duration::from_micros(r.below(3000))).await;
            }
            Ok::<_, String>(seen)
        }));
    }
    // Two desks: calls, cancels, recalls, releases, each with its clock.
    for t in 0..2_u64 {
        let skew_ms = skews[rng.below(skews.len() as u64) as usize] * 3_600_000;
        let q = created.with_clock(clock(&now, skew_ms));
        let tseed = rng.next_u64();
        let running = running.clone();
        actors.push(tokio::spawn(async move {
            let mut r = Rng(tseed);
            let mut seen = Seen::default();
            let who = format!("desk {t} ({:+} h)", skew_ms / 3_600_000);
            let desk = format!("{}", t + 1);
            while running.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(Duration::from_micros(1000 + r.below(4000))).await;
                let roll = r.below(10);
                let did = if roll < 6 {
                    bounded(&who, q.call().desk(&desk).into_future())
                        .await?
                        .map(|t| {
                            (
                                t.version,
                                t.at,
                                Did::Called {
                                    desk: desk.clone(),
                                    number: t.number,
                                },
                            )
                        })
                } else if roll < 7 {
                    bounded(&who, q.recall().desk(&desk).into_future())
                        .await?
                        .map(|t| (t.version, t.at, Did::Recalled))
                } else if roll < 8 {
                    bounded(&who, q.finish().desk(&desk).into_future())
                        .await?
                        .map(|t| (t.version, t.at, Did::Released { desk: desk.clone() }))
                } else {
                    let waiting = bounded(&who, q.peek())
                        .await?
                        .map(|s| s.waiting_list)
                        .unwrap_or_default();
                    let Some(w) = waiting.get(r.below(3) as usize) else {
                        continue;
                    };
                    bounded(&who, q.cancel().serial(w.serial).into_future())
                        .await?
                        .map(|t| (t.version, t.at, Did::Cancelled { number: t.number }))
                };
                match did {
                    Ok((version, at, did)) => seen.writes.push(Write {
                        version,
                        at_ms: at.timestamp_millis(),
                        who: who.clone(),
                        did,
                    }),
                    Err(
                        Error::NobodyWaiting { .. }
                        | Error::NoTicketShown { .. }
                        | Error::TicketNotWaiting { .. }
                        | Error::Contention { .. },
                    ) => seen.refusals += 1,
                    Err(e) => return Err(format!("{who}: {e}")),
                }
            }
            Ok(seen)
        }));
    }
    // An operator changing the range (the same `min`; refused when it would remap a held
    // ticket), and the time going by: 10 minutes to 7 hours a tick, days in a round.
    {
        let q = created.with_clock(clock(&now, 0));
        let oseed = rng.next_u64();
        let running = running.clone();
        let now = now.clone();
        actors.push(tokio::spawn(async move {
            let mut r = Rng(oseed);
            let mut seen = Seen::default();
            let mut reads = 0;
            while running.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(Duration::from_millis(2 + r.below(6))).await;
                now.fetch_add((10 + r.below(410) as i64) * 60_000, Ordering::SeqCst);
                // A reader with the shared clock decodes the queue every tick.
                bounded("reader", q.peek())
                    .await?
                    .map_err(|e| format!("reader: {e}"))?;
                reads += 1;
                if r.below(8) == 0 {
                    let cap = capacity as i128;
                    let new_cap = match r.below(4) {
                        0 => cap + 1,
                        1 => cap - 1,
                        2 => cap * 2,
                        _ => cap + r.below(5) as i128,
                    };
                    let new_max = i128::from(min) + new_cap - 1;
                    let Ok(new_max) = i64::try_from(new_max) else {
                        continue;
                    };
                    match bounded("operator", q.alter(QueueAlter::default().with_max(new_max)))
                        .await?
                    {
                        Ok(s) => seen.writes.push(Write {
                            version: s.version,
                            at_ms: s.updated_at.timestamp_millis(),
                            who: "operator".into(),
                            did: Did::Altered,
                        }),
                        Err(Error::QueueAlterRefused { .. } | Error::InvalidArgument { .. }) => {
                            seen.refusals += 1
                        }
                        Err(e) => return Err(format!("operator: max {new_max}: {e}")),
                    }
                }
            }
            seen.replays = reads;
            Ok(seen)
        }));
    }
    let mut writes = Vec::new();
    let (mut refusals, mut replays) = (0, 0);
    for a in join_all(actors).await {
        let seen = a.map_err(|e| e.to_string())??;
        writes.extend(seen.writes);
        refusals += seen.refusals;
        replays += seen.replays;
    }
    let last = created
        .peek()
        .await
        .map_err(|e| format!("the final read: {e}"))?;
    check_writes(&mut writes, &tz, daily, created_ms, last.version)?;
    let days = (now.load(Ordering::SeqCst) - start.as_millisecond()) / 86_400_000;
    Ok(format!(
        "{}..={} ({zone}, {}daily): {} writes over about {days} days, {refusals} refusals, {replays} replays and reads",
        spec.min,
        spec.max,
        if daily { "" } else { "not " },
        writes.len()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seeded_model_of_queues_across_days_zones_clocks_ranges_and_colliding_request_ids() {
    common::ready();
    let seed = common::seed("DISPENSER_QUEUE_SEED");
    let rounds: u64 = std::env::var("DISPENSER_EDGES_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    eprintln!(
        "queue edges model: seed {seed} (replay: DISPENSER_QUEUE_SEED={seed}), {rounds} rounds"
    );
    let mut rng = Rng(seed);
    for round in 0..rounds {
        match edges_round(rng.next_u64()).await {
            Ok(summary) => eprintln!("queue edges model round {round}: {summary}"),
            Err(e) => panic!("queue edges model, seed {seed}, round {round}: {e}"),
        }
    }
}

/// The checker catches a ticket handed out while held, a call of a ticket that does not
/// wait, a missing version — and clears the desks when a daily queue's day changes.
#[test]
fn the_edges_check_catches_what_it_must() {
    let tz = TimeZone::UTC;
    let w = |version: i64, at_ms: i64, did: Did| Write {
        version,
        at_ms,
        who: "t".into(),
        did,
    };
    let took = |n: &[i64]| Did::Took {
        numbers: n.to_vec(),
    };
    let called = |n: i64| Did::Called {
        desk: "1".into(),
        number: n,
    };
    let day = 86_400_000;
    // Fine: take 1 2, call 1 (shown), take 3.
    let mut ok = vec![
        w(1, 0, took(&[1, 2])),
        w(2, 0, called(1)),
        w(3, 0, took(&[3])),
    ];
    assert!(check_writes(&mut ok, &tz, true, 0, 3).is_ok());
    // 1 is shown by a desk: handing it out again is caught …
    let mut shown = vec![w(1, 0, took(&[1])), w(2, 0, called(1)), w(3, 0, took(&[1]))];
    assert!(check_writes(&mut shown, &tz, true, 0, 3).is_err());
    // … unless a daily queue's day changed (the desks were cleared).
    let mut next_day = vec![
        w(1, 0, took(&[1])),
        w(2, 0, called(1)),
        w(3, day, took(&[1])),
    ];
    assert!(check_writes(&mut next_day, &tz, true, 0, 3).is_ok());
    assert!(check_writes(&mut next_day, &tz, false, 0, 3).is_err());
    // A waiting ticket handed out twice, a call of nothing, a missing version.
    let mut twice = vec![w(1, 0, took(&[1, 2])), w(2, 0, took(&[2]))];
    assert!(check_writes(&mut twice, &tz, true, 0, 2).is_err());
    let mut nothing = vec![w(1, 0, called(4))];
    assert!(check_writes(&mut nothing, &tz, true, 0, 1).is_err());
    let mut missing = vec![w(1, 0, took(&[1])), w(3, 0, took(&[2]))];
    assert!(check_writes(&mut missing, &tz, true, 0, 3).is_err());
}

/// Regression (issue 37, 1): yesterday's waiting tickets crossing the wrap (8 9 0 1 2), then
/// a new day: the first call used to write a state every later read refused ("the tickets
/// held span 13"), after which only `delete` worked. Now the queue goes on.
#[tokio::test]
async fn a_new_day_after_waiting_tickets_crossed_the_wrap_goes_on() {
    let f = Fixture::new("queue_edges_newday").await;
    let d = f.dispenser(f.options());
    // Days after the creation's (the server's today), as a queue's clock may move.
    let day1 = Timestamp::now() + jiff::SignedDuration::from_hours(24);
    let day2 = day1 + jiff::SignedDuration::from_hours(24);
    let at = |t: Timestamp| -> dispenser::scope::Clock { Arc::new(move || t) };
    let spec = QueueSpec::default()
        .with_max(9)
        .with_daily(true)
        .with_time_zone(&dispenser::jiff::tz::TimeZone::get("Europe/Paris").unwrap());
    let q = d
        .create_queue("post", spec)
        .await
        .unwrap()
        .with_clock(at(day1));
    q.take().count(9).await.unwrap();
    for _ in 0..7 {
        q.call().await.unwrap();
    }
    let family: Vec<i64> = q
        .take()
        .count(3)
        .await
        .unwrap()
        .iter()
        .map(|t| t.number)
        .collect();
    assert_eq!(family, [0, 1, 2]);
    let tomorrow = q.with_clock(at(day2));
    assert_eq!(tomorrow.call().await.unwrap().number, 8);
    assert_eq!(tomorrow.call().await.unwrap().number, 9, "the second call");
    let s = tomorrow.peek().await.unwrap();
    assert_eq!(s.waiting, 3);
    // Any reader, any command: the document decodes.
    d.open_queue("post").await.unwrap().peek().await.unwrap();
    assert_eq!(
        ok(&f.collection, &["queue", "peek", "post", "--json"])
            .parse::<Value>()
            .unwrap()["waiting"],
        3
    );
    for want in [0, 1, 2] {
        assert_eq!(tomorrow.call().await.unwrap().number, want);
    }
    assert_eq!(
        tomorrow.take().await.unwrap().number,
        1,
        "the new day starts at 1"
    );
}

/// Regression (issue 37, 2): `alter` of a daily queue of 10^13 tickets after a new day used
/// to walk every serial between the oldest held ticket and the last taken (hours; over HTTP
/// no answer, and two such requests starved the service). It answers at once, over HTTP too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_of_a_wide_range_after_a_new_day_answers_at_once() {
    let svc = Service::start("queue_edges_alter");
    let d = Dispenser::new(
        &common::client().await,
        dispenser::Options::default()
            .with_database(DB)
            .with_collection(svc.collection.as_str()),
    )
    .unwrap();
    let big = 10_000_000_000_000_i64;
    let http = reqwest::Client::new();
    let (status, body) = send(
        http.post(svc.url("/v1/queues"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "big", "max": big, "daily": true })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // Five taken and one called today; tomorrow's first take voids the serials up to the
    // wrap (10^13 of them) with yesterday's four still waiting.
    let today = Timestamp::now();
    let q = d.open_queue("big").await.unwrap();
    let q = q.with_clock(Arc::new(move || today));
    q.take().count(5).await.unwrap();
    q.call().await.unwrap();
    let tomorrow = today + jiff::SignedDuration::from_hours(30);
    assert_eq!(
        q.with_clock(Arc::new(move || tomorrow))
            .take()
            .await
            .unwrap()
            .number,
        1
    );
    let started = Instant::now();
    let alter = |max: i64| {
        http.post(svc.url("/v1/queues/big/alter"))
            .bearer_auth(ADMIN)
            .timeout(Duration::from_secs(30))
            .json(&json!({ "max": max }))
    };
    let (status, body) = send(alter(big)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(alter(2 * big)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("would_remap")),
        "{body}"
    );
    let (status, body) = send(http.get(svc.url("/healthz"))).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // The command line too.
    let out = ok(
        &svc.collection,
        &["queue", "alter", "big", "--max", &big.to_string()],
    );
    assert!(out.contains("big"), "{out}");
}

/// Regression (issue 37, 3): two kiosks (two tokens) that send the same `Idempotency-Key`
/// got the same ticket, the second marked replayed. A key belongs to its token.
#[tokio::test]
async fn two_kiosks_with_the_same_key_get_two_tickets() {
    let ka = "kiosk-a-token-for-edges";
    let kb = "kiosk-b-token-for-edges";
    let tokens = json!({ "tokens": [
        { "name": "admin", "token": ADMIN, "sequences": ["*"], "operations": ["create", "peek", "take", "call"] },
        { "name": "ka", "token": ka, "sequences": ["k*"], "operations": ["take"] },
        { "name": "kb", "token": kb, "sequences": ["k*"], "operations": ["take"] },
    ]});
    let svc = Service::start_tokens("queue_edges_keys", &common::uri(), &tokens, &[]);
    let http = reqwest::Client::new();
    let (status, body) = send(
        http.post(svc.url("/v1/queues"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "k", "max": 99 })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let take = |token: &str| {
        http.post(svc.url("/v1/queues/k/take"))
            .bearer_auth(token)
            .header("Idempotency-Key", "k-1")
    };
    let (_, a) = send(take(ka)).await;
    let (_, b) = send(take(kb)).await;
    assert_eq!(
        (&a["ticket"], &a["replayed"]),
        (&json!(1), &json!(false)),
        "{a}"
    );
    assert_eq!(
        (&b["ticket"], &b["replayed"]),
        (&json!(2), &json!(false)),
        "{b}"
    );
    // Each token's retry answers its own take.
    let (_, a2) = send(take(ka)).await;
    let (_, b2) = send(take(kb)).await;
    assert_eq!(
        (&a2["ticket"], &a2["replayed"]),
        (&json!(1), &json!(true)),
        "{a2}"
    );
    assert_eq!(
        (&b2["ticket"], &b2["replayed"]),
        (&json!(2), &json!(true)),
        "{b2}"
    );
}

/// Regression (issue 37, 4): a client whose clock was two days ahead erased every stored
/// request id, so `kiosk-1/0001` asked again made a new take (3, not replayed). The queue
/// now keeps ids by count and by the server's clock, whatever a client's clock says.
#[test]
fn a_client_with_its_clock_days_ahead_erases_no_request_id() {
    let f = common::unique("queue_edges_skew");
    ok(&f, &["queue", "create", "k", "--max", "99"]);
    let first = ok(
        &f,
        &[
            "queue",
            "take",
            "k",
            "--request-id",
            "kiosk-1/0001",
            "--json",
        ],
    );
    let first: Value = first.parse().unwrap();
    assert_eq!(first["ticket"], 1, "{first}");
    let mut skewed = crate::queue::cli(&f);
    skewed.args(["queue", "take", "k", "--request-id", "other/1", "--json"]);
    let (code, out, err) = crate::queue::run(crate::gapless::skewed(&mut skewed, "+2d"));
    assert_eq!(code, Some(0), "{out}{err}");
    let again = ok(
        &f,
        &[
            "queue",
            "take",
            "k",
            "--request-id",
            "kiosk-1/0001",
            "--json",
        ],
    );
    let again: Value = again.parse().unwrap();
    assert_eq!(
        (&again["ticket"], &again["replayed"]),
        (&json!(1), &json!(true)),
        "{again}"
    );
}

/// Regression (issue 37, 5 and 6): a page's `next` cursor named the last document read,
/// visible or not (`{"queues":[],"next":"hidden7"}`), and `if_not_exists` showed a
/// `create`-only token a queue's whole state. Cursors now only name what the token may see,
/// on every listing, and `if_not_exists` tells such a token only that the queue exists.
#[tokio::test]
async fn cursors_and_if_not_exists_name_only_what_the_token_may_see() {
    let lister = "lister-token-for-edges-tests";
    let maker = "maker-token-for-edges-tests";
    let tokens = json!({ "tokens": [
        { "name": "admin", "token": ADMIN, "sequences": ["*"], "operations": ["create", "peek", "list", "take"] },
        { "name": "lister", "token": lister, "sequences": ["qa"], "operations": ["list", "peek"] },
        { "name": "maker", "token": maker, "sequences": ["qa", "new-*"], "operations": ["create"] },
    ]});
    let svc = Service::start_tokens("queue_edges_cursor", &common::uri(), &tokens, &[]);
    let http = reqwest::Client::new();
    for i in 0..12 {
        for (path, name) in [
            ("/v1/queues", format!("hidden{i:02}")),
            ("/v1/sequences", format!("hidden{i:02}")),
        ] {
            let (status, body) = send(
                http.post(svc.url(path))
                    .bearer_auth(ADMIN)
                    .json(&json!({ "name": name })),
            )
            .await;
            assert_eq!(status, 201, "{body}");
        }
    }
    for path in ["/v1/queues", "/v1/sequences"] {
        let (status, body) = send(
            http.post(svc.url(path))
                .bearer_auth(ADMIN)
                .json(&json!({ "name": "qa", "max": 77_777 })),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    for (path, key) in [
        ("/v1/queues", "queues"),
        ("/v1/sequences", "sequences"),
        ("/v1/overview", "sequences"),
    ] {
        let mut after: Option<String> = None;
        let mut seen = Vec::new();
        for _ in 0..20 {
            let mut req = http
                .get(svc.url(path))
                .bearer_auth(lister)
                .query(&[("limit", "1")]);
            if let Some(a) = &after {
                req = req.query(&[("after", a)]);
            }
            let (status, body) = send(req).await;
            assert_eq!(status, 200, "{path}: {body}");
            assert!(!body.to_string().contains("hidden"), "{path}: {body}");
            seen.extend(
                body[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["name"].as_str().unwrap().to_owned()),
            );
            match body["next"].as_str() {
                Some(n) => after = Some(n.to_owned()),
                None => break,
            }
        }
        assert_eq!(seen, ["qa"], "{path}");
    }
    // `if_not_exists` on an existing queue, from a token that may create but not read.
    let (status, body) = send(
        http.post(svc.url("/v1/queues"))
            .bearer_auth(maker)
            .json(&json!({ "name": "qa", "max": 77_777, "if_not_exists": true })),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("already_exists")),
        "{body}"
    );
    for secret in ["77777", "waiting", "desks", "recent_calls"] {
        assert!(!body.to_string().contains(secret), "{secret}: {body}");
    }
    let (status, body) = send(
        http.post(svc.url("/v1/queues"))
            .bearer_auth(maker)
            .json(&json!({ "name": "new-1", "if_not_exists": true })),
    )
    .await;
    assert_eq!(status, 201, "a new queue is still made: {body}");
}

/// Regression (issue 37, 8): a queue that stored 1 000 request ids was 158 KB, rewritten by
/// every take. Its document now holds at most 64 ids (the older ones in their own
/// collection, still answered) whatever the history.
#[tokio::test]
async fn a_queue_document_stays_small_whatever_its_history_and_old_ids_still_answer() {
    let f = Fixture::new("queue_edges_growth").await;
    let d = f.dispenser(f.options());
    let q = d
        .create_queue("busy", QueueSpec::default().with_max(99_999))
        .await
        .unwrap();
    let mut first = Vec::new();
    for i in 0..1000 {
        let t = q
            .take()
            .count(1)
            .request_id(format!("kiosk-{}/{i:04}", i % 7))
            .caller(format!("kiosk-{}", i % 7))
            .await
            .unwrap();
        first.push(t[0].number);
        if i % 5 < 3 {
            q.call().await.unwrap();
        }
    }
    let raw = f
        .client
        .database(DB)
        .collection::<Document>(&format!("{}_queues", f.collection))
        .find_one(doc! { "_id": "busy" })
        .await
        .unwrap()
        .unwrap();
    let size = dispenser::mongodb::bson::to_vec(&raw).unwrap().len();
    assert!(size < 16 * 1024, "the document is {size} bytes");
    // The ids that left the ring are in their own collection (at most 64 stay in the ring).
    let requests = f
        .client
        .database(DB)
        .collection::<Document>(&format!("{}_queue_requests", f.collection));
    let moved = requests
        .count_documents(doc! { "queue": "busy" })
        .await
        .unwrap();
    assert!((1000 - 64..1000).contains(&moved), "{moved} ids moved out");
    // The oldest ids left the document and still answer their takes.
    for i in [0_usize, 1, 500, 999] {
        let again = q
            .take()
            .count(1)
            .request_id(format!("kiosk-{}/{i:04}", i % 7))
            .caller(format!("kiosk-{}", i % 7))
            .await
            .unwrap();
        assert!(again[0].replayed, "id {i}");
        assert_eq!(again[0].number, first[i], "id {i}");
    }
    // Another caller with the same id is another take.
    let other = q
        .take()
        .count(1)
        .request_id("kiosk-0/0000")
        .caller("kiosk-9")
        .await
        .unwrap();
    assert!(!other[0].replayed);
    // Deleting the queue (forced: its tickets wait) leaves no request id behind.
    d.delete_queue("busy").force(true).await.unwrap();
    let left = requests
        .count_documents(doc! { "queue": "busy" })
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// A take whose request ids must leave the ring, when the server refuses to store them (a
/// validator, missing rights: a write error the test proxy answers), fails with that error,
/// nothing taken — and the ring keeps them: each id still answers its take. (Found by
/// cargo-mutants: a refused spill taken for one another writer already made let the take
/// drop the ids, and an id retried after it took a second ticket.)
#[tokio::test]
async fn a_take_whose_request_ids_cannot_be_moved_out_fails_and_keeps_them() {
    use crate::proxy::{Faults, Proxy};
    let f = Fixture::new("queue_edges_spill_refused").await;
    let direct = f.dispenser(f.options());
    let q = direct
        .create_queue("q", QueueSpec::default().with_max(999))
        .await
        .unwrap();
    let ring = 64;
    let mut first = Vec::new();
    for i in 0..ring {
        let t = q.take().request_id(format!("id-{i:02}")).await.unwrap();
        first.push(t.number);
    }
    let proxy = Proxy::to_test_server(Faults::default(), 3).await;
    let d = Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap();
    let behind = d.open_queue("q").await.unwrap();
    proxy.answer_next(
        "insert",
        &format!("{}_queue_requests", f.collection),
        doc! {
            "ok": 1.0,
            "n": 0,
            "writeErrors": [{ "index": 0, "code": 13, "errmsg": "refused by the test" }],
        },
    );
    let before = q.peek().await.unwrap();
    let e = behind.take().request_id("id-64").await.unwrap_err();
    let text = e.to_string();
    assert!(e.is_database(), "{text}");
    assert!(
        text.contains("refused by the test (code 13)") && text.contains("nothing was taken"),
        "{text}"
    );
    assert!(!text.contains("InsertManyError"), "{text}");
    assert_eq!(e.written(), dispenser::error::Written::Nothing, "{e}");
    let after = q.peek().await.unwrap();
    assert_eq!(
        (after.taken, after.version),
        (before.taken, before.version),
        "nothing taken"
    );
    // Every id still answers its take, the oldest first (the first to leave the ring).
    for (i, number) in first.iter().enumerate() {
        let again = q.take().request_id(format!("id-{i:02}")).await.unwrap();
        assert!(again.replayed, "id {i}");
        assert_eq!(again.number, *number, "id {i}");
    }
    // The take again, now that the server stores them: one ticket, and the ids moved out
    // still answer from where they went.
    let t = behind.take().request_id("id-64").await.unwrap();
    assert!(!t.replayed && t.number == first[ring - 1] + 1, "{t:?}");
    for (i, number) in first.iter().enumerate() {
        let again = behind
            .take()
            .request_id(format!("id-{i:02}"))
            .await
            .unwrap();
        assert!(
            again.replayed && again.number == *number,
            "id {i}: {again:?}"
        );
    }
}

/// Regression (issue 37, 10): a queue label format with terminal escapes or a newline was
/// accepted (and printed raw). It is refused, naming the character, and nothing is written.
#[test]
fn a_format_with_control_characters_is_refused() {
    let f = common::unique("queue_edges_format");
    for format in ["A\u{1b}[31mRED\u{1b}[0m-{n}", "A-{n}\nB"] {
        let err = fails(&f, &["queue", "create", "p", "--format", format], 2);
        assert!(err.contains("control character"), "{err}");
    }
    let listed = ok(&f, &["queue", "list", "--json"]);
    assert!(!listed.contains("\"p\""), "{listed}");
}

/// The pages read integers past 2^53 exactly (issue 37, 9): `Dispenser.parseJson` of
/// `common.js`, run in Node, keeps their digits; smaller numbers stay numbers and strings
/// that look like numbers stay strings.
#[test]
fn the_pages_parse_wide_integers_exactly() {
    let common_js = include_str!("../../src/server/src/ui/common.js");
    let script = format!(
        "{common_js}\nconst v = Dispenser.parseJson('{{\"ticket\": 9007199254740993, \"n\": [-9223372036854775808, 42, 1.5e3], \"label\": \"x:9007199254740993,\", \"esc\": \"a\\\\\"9007199254740993\"}}');\nprocess.stdout.write(JSON.stringify(v));"
    );
    let out = std::process::Command::new("node")
        .arg("-e")
        .arg(&script)
        .output()
        .expect("node (installed with the test tools)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ticket"], "9007199254740993");
    assert_eq!(v["n"], json!(["-9223372036854775808", 42, 1500]));
    assert_eq!(v["label"], "x:9007199254740993,");
    assert_eq!(v["esc"], "a\"9007199254740993");
}

/// Creates and ensures of one queue racing each other make it once: of 16 creates one makes
/// it and the other 15 are told it exists (never a database error: the insert's duplicate
/// key, when the name was free at their look, is "exists"); 16 ensures all open the one
/// queue, whose tickets they then take without sharing one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_creates_and_ensures_of_a_queue_make_it_once() {
    let f = Fixture::new("queue_create_race").await;
    let d = f.dispenser(f.options());
    let creates = (0..16).map(|_| {
        let d = d.clone();
        tokio::spawn(async move { d.create_queue("lobby", QueueSpec::default()).await })
    });
    let mut made = 0;
    for r in join_all(creates).await {
        match r.expect("task") {
            Ok(_) => made += 1,
            Err(Error::AlreadyExists { name, .. }) => assert_eq!(name, "lobby"),
            Err(e) => panic!("a racing create failed with {e:?}, not AlreadyExists"),
        }
    }
    assert_eq!(made, 1, "creates that made the queue");
    let ensures = (0..16).map(|_| {
        let d = d.clone();
        tokio::spawn(async move { d.ensure_queue("hall", QueueSpec::default()).await })
    });
    let queues: Vec<_> = join_all(ensures)
        .await
        .into_iter()
        .map(|r| r.expect("task").expect("a racing ensure opens the queue"))
        .collect();
    let mut tickets = Vec::new();
    for q in &queues {
        tickets.push(q.take().await.expect("take").number);
    }
    tickets.sort_unstable();
    assert_eq!(tickets, (1..=16).collect::<Vec<_>>());
}

/// A take whose handle remembered the queue from before another handle's take moved the
/// oldest request ids out of the document finds them moved already: its own move meets their
/// ids (duplicate keys), which is no error — its write then loses the race and goes on from
/// the fresh state. Every id still answers its first ticket.
#[tokio::test]
async fn a_take_that_moves_request_ids_another_take_moved_first_goes_on() {
    let f = Fixture::new("queue_spill_twice").await;
    let (d1, d2) = (f.dispenser(f.options()), f.dispenser(f.options()));
    let b = d1
        .create_queue("spill", QueueSpec::default().with_max(100_000))
        .await
        .unwrap();
    // 64 ids: the document's ring is full; b remembers that state.
    for i in 0..64 {
        b.take().request_id(format!("b-{i}")).await.unwrap();
    }
    // Another handle's take moves the oldest ids out.
    let a = d2.open_queue("spill").await.unwrap();
    assert_eq!(a.take().request_id("a-0").await.unwrap().number, 65);
    // b, from its remembered state, moves the same ids again: no error, another ticket.
    let t = b
        .take()
        .request_id("b-64")
        .await
        .expect("a take whose ids were moved first by another goes on");
    assert_eq!(t.number, 66);
    // The moved ids answer their first tickets, from both handles.
    for (q, id, first) in [
        (&b, "b-0", 1),
        (&a, "b-1", 2),
        (&b, "b-63", 64),
        (&a, "a-0", 65),
    ] {
        assert_eq!(q.take().request_id(id).await.unwrap().number, first, "{id}");
    }
}
