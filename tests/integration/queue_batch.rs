//! Coalesced queue operations (issue 52): concurrent takes and calls on one queue handle share
//! one compare-and-set.
//!
//! * one batch, forced through a proxy that holds the first write: families consecutive, a
//!   take that does not fit refused while the others are served, an id repeated inside the
//!   batch answered with the one take it made, a call served in turn — all in one write;
//! * a batch whose write's reply is lost fails each of its callers (never retried as fresh),
//!   and their request ids then answer the tickets that write took; a batch whose server
//!   hangs fails each caller within the operation timeout;
//! * a crowd on one handle and a second handle racing it: no caller gives up;
//! * a seeded model: several handles (each its own client, one of them through a proxy that
//!   loses replies and hangs, in some rounds), each shared by many tasks taking families and
//!   single tickets with request ids repeated inside and across batches, and calling from
//!   desks, on a queue small enough to fill. The history, ordered by the version each answer
//!   carries, replays exactly on a plain model (no ticket held twice, families consecutive,
//!   calls in take order), respects real time, answers every retried id with its own
//!   tickets, explains every refusal, and every operation ends within its bound.
//!
//! `DISPENSER_QUEUE_SEED=<seed>` replays the model; `DISPENSER_QUEUE_ROUNDS` runs more rounds.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::IntoFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dispenser::queue::{QueueSpec, Ticket};
use dispenser::{Dispenser, Error};
use futures::future::join_all;

use crate::common::{self, Fixture};
use crate::proxy::{Fault, Faults, Proxy};
use crate::queue::Rng;

/// The queue collection of a fixture.
fn queues_of(f: &Fixture) -> String {
    format!("{}_queues", f.collection)
}

fn serials(t: &[Ticket]) -> Vec<u64> {
    t.iter().map(|t| t.serial).collect()
}

/// One batch, forced: the first take's write is held at the proxy while six more operations
/// line up on the same handle; they are then written together, in one compare-and-set, and
/// each answered as if alone, in arrival order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_serves_families_refuses_what_does_not_fit_and_answers_a_repeated_id_once() {
    let f = Fixture::new("queue_batch_one").await;
    let direct = f.dispenser(f.options());
    // Tickets 1 … 8: capacity 8.
    direct
        .create_queue("q", QueueSpec::default().with_min(1).with_max(8))
        .await
        .unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 1).await;
    let d = Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap();
    let q = d.open_queue("q").await.unwrap();
    let gate = proxy.hold_next("update", &queues_of(&f));
    let first = tokio::spawn({
        let q = q.clone();
        async move { q.take().await }
    });
    gate.arrived().await;
    // The line, in this order (each polled once: it is then waiting in the line).
    let mut family = Box::pin(q.take().count(3).request_id("fam").into_future());
    let mut too_big = Box::pin(q.take().count(5).into_future());
    let mut single = Box::pin(q.take().into_future());
    let mut again = Box::pin(q.take().count(3).request_id("fam").into_future());
    let mut call = Box::pin(q.call().desk("2").into_future());
    let mut last = Box::pin(q.take().count(2).into_future());
    assert!(futures::poll!(&mut family).is_pending());
    assert!(futures::poll!(&mut too_big).is_pending());
    assert!(futures::poll!(&mut single).is_pending());
    assert!(futures::poll!(&mut again).is_pending());
    assert!(futures::poll!(&mut call).is_pending());
    assert!(futures::poll!(&mut last).is_pending());
    proxy.script(None);
    gate.open();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.serial, 1);
    // Ticket 1 waits; the family takes 2, 3, 4; 5 more would span 1 … 9 (full); the single
    // one takes 5; the id again answers 2, 3, 4; the call serves ticket 1 (desk 2 shows it);
    // the family of 2 takes 6, 7 (held: 2 … 7, and nothing shown of 1 any more but desk 2's
    // ticket 1: 1 … 7 spans 7 ≤ 8).
    let family = family.await.unwrap();
    assert_eq!(serials(&family), [2, 3, 4]);
    assert!(!family[0].replayed);
    match too_big.await {
        Err(Error::QueueFull {
            requested: 5,
            waiting,
            ..
        }) => assert_eq!(waiting, 4, "refused as of the family's take"),
        other => panic!("a family of 5 in a queue of 8 holding 1 … 4: {other:?}"),
    }
    let single = single.await.unwrap();
    assert_eq!(single.serial, 5);
    let again = again.await.unwrap();
    assert_eq!(serials(&again), [2, 3, 4]);
    assert!(again.iter().all(|t| t.replayed));
    assert_eq!(again[0].version, family[0].version);
    let call = call.await.unwrap();
    assert_eq!((call.serial, call.desk.as_deref()), (1, Some("2")));
    let last = last.await.unwrap();
    assert_eq!(serials(&last), [6, 7]);
    // Each answer carries the counters and the version as of its own operation: one
    // version per write done (the take, the family, the single, the call, the pair).
    assert_eq!((family[0].taken, family[0].served), (4, 0));
    assert_eq!((single.taken, call.served, last[0].taken), (5, 1, 7));
    let v = first.version;
    assert_eq!(
        [
            family[0].version,
            single.version,
            call.version,
            last[0].version
        ],
        [v + 1, v + 2, v + 3, v + 4]
    );
    // All six in one write: the proxy saw the first take's update (released by the gate)
    // and one more.
    let writes: Vec<_> = proxy
        .seen()
        .into_iter()
        .filter(|s| s.command == "update")
        .collect();
    assert_eq!(writes.len(), 2, "{writes:?}");
    let s = direct.open_queue("q").await.unwrap().peek().await.unwrap();
    assert_eq!((s.taken, s.served, s.waiting), (7, 1, 6));
}

/// A batch whose write's reply is lost fails every caller of the batch with the write's
/// error (the write may have happened: it is never retried as a fresh one); the same request
/// ids then answer the tickets that write took. A server that hangs on a batch's write fails
/// each of its callers within the operation timeout, and takes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_reply_fails_each_caller_of_its_batch_and_their_ids_answer_after() {
    let f = Fixture::new("queue_batch_lost").await;
    let direct = f.dispenser(f.options());
    direct
        .create_queue("q", QueueSpec::default().with_max(99))
        .await
        .unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 2).await;
    let timeout = Duration::from_millis(1500);
    let d = Dispenser::connect(&proxy.uri(""), f.options().with_operation_timeout(timeout))
        .await
        .unwrap();
    let q = d.open_queue("q").await.unwrap();
    for fault in [Fault::DropReply, Fault::NeverAnswer] {
        let before = direct.open_queue("q").await.unwrap().peek().await.unwrap();
        let gate = proxy.hold_next("update", &queues_of(&f));
        let lead = tokio::spawn({
            let q = q.clone();
            async move { q.take().await }
        });
        gate.arrived().await;
        let ids: Vec<String> = (0..4).map(|i| format!("{fault:?}-{i}")).collect();
        let mut line: Vec<_> = ids
            .iter()
            .map(|id| Box::pin(q.take().request_id(id.clone()).into_future()))
            .collect();
        for f in &mut line {
            assert!(futures::poll!(f).is_pending());
        }
        // The requests counted from here: the held take's write (released by the gate), then
        // the batch's.
        proxy.script(Some((1, fault)));
        gate.open();
        lead.await.unwrap().unwrap();
        let started = Instant::now();
        for (id, f) in ids.iter().zip(line) {
            match f.await {
                Err(e) if e.is_timeout() || e.is_database() => {
                    let m = e.to_string();
                    assert!(m.contains("queue \"q\""), "{m}");
                }
                other => panic!("{fault:?}: take {id} answered {other:?}"),
            }
        }
        assert!(
            started.elapsed() < timeout * 3,
            "{fault:?}: the batch's callers waited {:?}",
            started.elapsed()
        );
        let seen = proxy.seen();
        assert_eq!(
            seen.get(1).map(|s| (s.command.as_str(), s.target.clone())),
            Some(("update", queues_of(&f))),
            "{fault:?}: the fault did not land on the batch's write: {seen:?}"
        );
        proxy.script(None);
        let after = direct.open_queue("q").await.unwrap().peek().await.unwrap();
        let written = after.taken - before.taken - 1;
        // The ids again, now that the server answers: the tickets their write took, or (it
        // never reached the server) new ones.
        let mut got = Vec::new();
        for id in &ids {
            got.push(q.take().request_id(id.clone()).await.unwrap());
        }
        match fault {
            Fault::DropReply => {
                assert_eq!(written, 4, "the lost write took the batch's 4 tickets");
                assert!(got.iter().all(|t| t.replayed), "{got:?}");
                let first = before.taken + 2;
                assert_eq!(
                    got.iter().map(|t| t.serial).collect::<Vec<_>>(),
                    (first..first + 4).collect::<Vec<_>>()
                );
            }
            _ => {
                assert_eq!(written, 0, "a write the server never got took nothing");
                assert!(got.iter().all(|t| !t.replayed), "{got:?}");
            }
        }
    }
}

/// 48 takers on one handle and 16 on a second handle (another client) of the same queue,
/// each taking and calling 10 times with a backoff whose attempt budget is 2: no caller gives
/// up (a queue's operations wait their turn within the operation timeout), and the handle
/// shared by 48 wrote far fewer times than it answered.
/// A caller whose time runs out while it waits in line (its batch not sent: the write in
/// flight is the one before it) leaves the line, says nothing was written, and is never
/// written after: the write in flight here re-read the queue after a lost race (held 600 ms at
/// the proxy), then its write hung, so the caller behind it is still in line at its deadline
/// (found by cargo-mutants on `queue/combine.rs`: a waiter left in line, or told `unknown`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_whose_time_runs_out_in_line_leaves_it_and_nothing_is_written_for_it() {
    let f = Fixture::new("queue_batch_line_timeout").await;
    let queues = queues_of(&f);
    let proxy = Proxy::to_test_server(Faults::default(), 63).await;
    let timeout = Duration::from_secs(1);
    let a = Dispenser::connect(&proxy.uri(""), f.options().with_operation_timeout(timeout))
        .await
        .unwrap();
    let qa = a.create_queue("q", QueueSpec::default()).await.unwrap();
    // Another handle takes: what `qa` remembers is stale, so its next write loses its race and
    // reads the queue again.
    let b = f.dispenser(f.options());
    let qb = b.open_queue("q").await.unwrap();
    qb.take().await.unwrap();
    let read = proxy.hold_next("find", &queues);
    let write = proxy.hold_after("update", &queues, 1);
    let first = tokio::spawn({
        let qa = qa.clone();
        async move { qa.take().await }
    });
    read.arrived().await;
    let lined = tokio::spawn({
        let qa = qa.clone();
        async move {
            let t0 = Instant::now();
            (qa.take().await, t0.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    read.open();
    let (lined, took) = lined.await.unwrap();
    let e = lined.expect_err("its deadline came while the write before it hung");
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert_eq!(
        e.written(),
        dispenser::error::Written::Nothing,
        "it never left the line: {e}"
    );
    assert!(took < timeout + timeout / 2, "{took:?}");
    let first = first.await.unwrap();
    assert!(first.is_err(), "its write hung: {first:?}");
    write.open();
    // Whatever the first take's write did, nothing more is written for the caller that left.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let taken = qb.peek().await.unwrap().taken;
    assert!(
        taken <= 2,
        "{taken} tickets taken: one by the other handle, at most one by the first take"
    );

    // And a caller whose batch was sent before its deadline came: its write's outcome is
    // unknown (every request hangs from now on; its batch leaves when the first one gives up).
    let qr = a.create_queue("r", QueueSpec::default()).await.unwrap();
    proxy.set_faults(Faults {
        drop_reply: 1.0,
        stall_share: 1.0,
        ..Faults::default()
    });
    let first = tokio::spawn({
        let qr = qr.clone();
        async move { qr.take().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = qr.take().await.expect_err("its write hung");
    proxy.set_faults(Faults::default());
    assert!(first.await.unwrap().is_err());
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    assert_eq!(
        e.written(),
        dispenser::error::Written::Unknown,
        "its batch was sent: {e}"
    );
}

/// Takes retried in one batch with request ids that left the queue document's ring (kept in
/// the request collection): each is answered with the tickets its first take got, once per id
/// even when the batch names it twice, and only the new ids take tickets (found by
/// cargo-mutants on `queue/combine.rs`: the batch's look-up of spilled ids survived).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_retried_ids_that_left_the_ring_with_their_first_tickets() {
    let f = Fixture::new("queue_batch_spilled").await;
    let proxy = Proxy::to_test_server(Faults::default(), 64).await;
    let d = Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap();
    let q = d
        .create_queue("q", QueueSpec::default().with_max(999))
        .await
        .unwrap();
    let mut first = HashMap::new();
    for i in 0..72 {
        let id = format!("id-{i}");
        let t = q.take().request_id(id.clone()).await.unwrap();
        first.insert(id, t.serial);
    }
    let before = q.peek().await.unwrap().taken;
    // One new id first, its write held at the proxy; behind it, one line: retries of ids long
    // out of the ring, one of them twice, a retry of a recent one, and new ids.
    let gate = proxy.hold_next("update", &queues_of(&f));
    let lead = tokio::spawn({
        let q = q.clone();
        async move { q.take().request_id("new-0".to_owned()).await }
    });
    gate.arrived().await;
    let ids = ["id-0", "id-1", "id-0", "id-3", "id-70", "new-1", "new-2"];
    let mut line: Vec<_> = ids
        .iter()
        .map(|id| Box::pin(q.take().request_id((*id).to_owned()).into_future()))
        .collect();
    for f in &mut line {
        assert!(futures::poll!(f).is_pending());
    }
    gate.open();
    let mut new = vec![lead.await.unwrap().unwrap().serial];
    for (id, f) in ids.iter().zip(line) {
        let t = f.await.unwrap_or_else(|e| panic!("{id}: {e}"));
        match first.get(*id) {
            Some(&serial) => {
                assert_eq!((t.serial, t.replayed), (serial, true), "{id}")
            }
            None => {
                assert!(!t.replayed, "{id}");
                new.push(t.serial);
            }
        }
    }
    new.sort_unstable();
    new.dedup();
    assert_eq!(new.len(), 3, "{new:?}");
    let s = q.peek().await.unwrap();
    assert_eq!(s.taken, before + 3, "only the new ids took tickets");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crowd_on_one_handle_and_a_rival_handle_never_give_up() {
    let f = Fixture::new("queue_batch_crowd").await;
    let options = f
        .options()
        .with_backoff(dispenser::sequence::Backoff::default().with_max_attempts(2));
    let direct = f.dispenser(options.clone());
    direct
        .create_queue("q", QueueSpec::default().with_max(9999))
        .await
        .unwrap();
    let crowd = direct.open_queue("q").await.unwrap();
    let rival = Dispenser::new(&common::client().await, options)
        .unwrap()
        .open_queue("q")
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for t in 0..64 {
        let q = if t < 48 { crowd.clone() } else { rival.clone() };
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                q.take().await?;
                q.call().await?;
            }
            Ok::<_, Error>(())
        }));
    }
    for t in join_all(tasks).await {
        t.unwrap().unwrap();
    }
    let s = crowd.peek().await.unwrap();
    assert_eq!((s.taken, s.served, s.waiting), (640, 640, 0));
}

// ---------------------------------------------------------------------------------------
// The seeded model.

/// What one operation answered.
#[derive(Clone, Debug)]
enum Outcome {
    /// A take: its request id (if any), the serials and numbers, the counters and version
    /// as of it, and whether it was a replay.
    Took {
        id: Option<String>,
        count: u64,
        serials: Vec<u64>,
        numbers: Vec<i64>,
        taken: u64,
        served: u64,
        version: i64,
        replayed: bool,
    },
    Called {
        desk: String,
        serial: u64,
        number: i64,
        taken: u64,
        served: u64,
        version: i64,
    },
    /// A desk released the ticket it showed.
    Released {
        desk: String,
        serial: u64,
        version: i64,
    },
    Full {
        count: u64,
    },
    Nobody,
    /// A database error or timeout: the write may or may not have happened.
    Unknown,
}

#[derive(Clone, Debug)]
struct Obs {
    who: String,
    start: Instant,
    end: Instant,
    outcome: Outcome,
}

impl Obs {
    /// The version of an acknowledged write (replays excepted).
    fn wrote(&self) -> Option<i64> {
        match &self.outcome {
            Outcome::Took {
                version,
                replayed: false,
                ..
            }
            | Outcome::Called { version, .. }
            | Outcome::Released { version, .. } => Some(*version),
            _ => None,
        }
    }
}

/// A model state: the tickets waiting (serial → number, oldest first), what each desk shows
/// (desk → serial), and the counters.
#[derive(Clone, Debug, Default)]
struct Model {
    waiting: VecDeque<(u64, i64)>,
    desks: BTreeMap<String, u64>,
    taken: u64,
    served: u64,
}

impl Model {
    /// The oldest serial held (waiting, or shown by a desk).
    fn oldest_held(&self) -> Option<u64> {
        self.waiting
            .front()
            .map(|(s, _)| *s)
            .into_iter()
            .chain(self.desks.values().copied())
            .min()
    }

    /// Whether a take of `n` fits: the held serials and the new ones span at most `capacity`.
    fn fits(&self, n: u64, capacity: u64) -> bool {
        let lower = self.oldest_held().unwrap_or(self.taken + 1);
        self.taken + n - lower < capacity
    }
}

/// Checks a history of a queue `min ..` of `capacity` tickets that started at version `v0`
/// and ended at `end` (taken, served, version); `timeout` is the operation timeout, `exact`
/// whether every write was acknowledged (no fault): see the module's docs.
fn check(
    min: i64,
    capacity: u64,
    v0: i64,
    end: (u64, u64, i64),
    timeout: Duration,
    obs: &[Obs],
    exact: bool,
) -> Result<String, String> {
    let ticket = |serial: u64| min + (serial % capacity) as i64;
    // Every call bounded: a caller waits at most for the batch before its own and its own,
    // each within the operation timeout.
    for o in obs {
        let took = o.end - o.start;
        if took > timeout * 2 + Duration::from_secs(2) {
            return Err(format!("{o:?} took {took:?}, past its bound"));
        }
    }
    // The writes, by version.
    let mut writes: BTreeMap<i64, &Obs> = BTreeMap::new();
    for o in obs {
        if let Some(v) = o.wrote()
            && let Some(other) = writes.insert(v, o)
        {
            return Err(format!("version {v} answered twice: {other:?} and {o:?}"));
        }
    }
    let unknown = obs
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Unknown))
        .count() as i64;
    let missing = (end.2 - v0) - writes.len() as i64;
    if missing < 0 || missing > unknown || (exact && missing != 0) {
        return Err(format!(
            "{} acknowledged writes and {unknown} unknown outcomes, the version moved by {}",
            writes.len(),
            end.2 - v0
        ));
    }
    // Replay in version order; a missing version is a write whose reply was lost, which the
    // counters of the next answer tell (a take: how many; a call: the oldest waiting, shown
    // by a desk we do not know — held until the end, conservatively).
    let mut m = Model::default();
    // The state after each version: (version, model).
    let mut states: Vec<(i64, Model)> = vec![(v0, m.clone())];
    let mut version = v0;
    let mut ids: HashMap<String, Vec<u64>> = HashMap::new();
    for (&v, o) in &writes {
        let (taken_after, served_after) = match &o.outcome {
            Outcome::Took { taken, served, .. } | Outcome::Called { taken, served, .. } => {
                (*taken, *served)
            }
            _ => (m.taken, m.served), // a release (only in rounds without faults)
        };
        // The lost writes before this one.
        if v > version + 1 {
            let (took, called) = match &o.outcome {
                Outcome::Took { count, .. } => (taken_after - count, served_after),
                _ => (taken_after, served_after - 1),
            };
            if took < m.taken || called < m.served {
                return Err(format!("counters went back before {o:?}"));
            }
            for s in m.taken + 1..=took {
                m.waiting.push_back((s, ticket(s)));
            }
            m.taken = took;
            for _ in m.served..called {
                let Some((s, _)) = m.waiting.pop_front() else {
                    return Err(format!("a lost call before {o:?} found nobody waiting"));
                };
                // The rounds with faults call from the desk without a name only.
                m.desks.insert(String::new(), s);
            }
            m.served = called;
        }
        version = v;
        match &o.outcome {
            Outcome::Took {
                id,
                count,
                serials,
                numbers,
                taken,
                served,
                ..
            } => {
                let want: Vec<u64> = (m.taken + 1..=m.taken + count).collect();
                if *serials != want {
                    return Err(format!(
                        "take at version {v} answered serials {serials:?}, the model {want:?} ({})",
                        o.who
                    ));
                }
                if *numbers != want.iter().map(|&s| ticket(s)).collect::<Vec<_>>() {
                    return Err(format!("take at version {v}: numbers {numbers:?}"));
                }
                if !m.fits(*count, capacity) {
                    return Err(format!(
                        "take at version {v} of {count} while {:?} wait and desks show {:?}: a ticket held twice ({})",
                        m.waiting, m.desks, o.who
                    ));
                }
                for (s, n) in want.iter().zip(numbers) {
                    m.waiting.push_back((*s, *n));
                }
                m.taken += count;
                if (*taken, *served) != (m.taken, m.served) {
                    return Err(format!(
                        "take at version {v} answered counters {taken}/{served}, the model {}/{}",
                        m.taken, m.served
                    ));
                }
                if let Some(id) = id
                    && ids.insert(id.clone(), serials.clone()).is_some()
                {
                    return Err(format!("request id {id:?} took twice (version {v})"));
                }
            }
            Outcome::Called {
                desk,
                serial,
                number,
                taken,
                served,
                ..
            } => {
                let Some((s, n)) = m.waiting.pop_front() else {
                    return Err(format!("call at version {v} while nobody waits"));
                };
                if (*serial, *number) != (s, n) {
                    return Err(format!(
                        "call at version {v} answered {serial}/{number}, the oldest waiting is {s}/{n}"
                    ));
                }
                m.desks.insert(desk.clone(), s);
                m.served += 1;
                if (*taken, *served) != (m.taken, m.served) {
                    return Err(format!(
                        "call at version {v} answered counters {taken}/{served}, the model {}/{}",
                        m.taken, m.served
                    ));
                }
            }
            Outcome::Released { desk, serial, .. } => {
                if m.desks.remove(desk) != Some(*serial) {
                    return Err(format!(
                        "desk {desk:?} released {serial} at version {v}; the model's desks: {:?}",
                        m.desks
                    ));
                }
            }
            _ => unreachable!(),
        }
        states.push((v, m.clone()));
    }
    if exact && (m.taken, m.served) != (end.0, end.1) {
        return Err(format!(
            "model {}/{}, document {}/{}",
            m.taken, m.served, end.0, end.1
        ));
    }
    // Every retried id answered with its own tickets: a replay answers what the id's take
    // took (when that take's answer was heard).
    for o in obs {
        if let Outcome::Took {
            id: Some(id),
            serials,
            replayed: true,
            ..
        } = &o.outcome
        {
            match ids.get(id) {
                Some(first) if first != serials => {
                    return Err(format!(
                        "request id {id:?} answered {serials:?}, its take took {first:?}"
                    ));
                }
                None if exact => {
                    return Err(format!("request id {id:?} replayed, but never took"));
                }
                _ => {}
            }
        }
    }
    // Real time: an operation that answered before another began is ordered first.
    let timed: Vec<(i64, &Obs)> = obs
        .iter()
        .filter_map(|o| match &o.outcome {
            Outcome::Took { version, .. } | Outcome::Called { version, .. } => Some((*version, o)),
            _ => None,
        })
        .collect();
    for (va, a) in &timed {
        // A replay reads: it is ordered by when it read, not by the version of the take it
        // answers, so it only ever comes first here.
        for (vb, b) in timed.iter().filter(|(_, b)| b.wrote().is_some()) {
            if a.end < b.start && va > vb {
                return Err(format!(
                    "{b:?} (version {vb}) began after {a:?} (version {va}) answered, yet is ordered before it"
                ));
            }
        }
    }
    // Refusals: some state current while the refused call ran refuses it. State i (after
    // the i-th write) is current from that write (at most its answer) until the next one (at
    // least its invocation).
    let by_version: Vec<(i64, &Obs)> = writes.iter().map(|(v, o)| (*v, *o)).collect();
    let mut refusals = 0;
    for r in obs
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Full { .. } | Outcome::Nobody))
    {
        refusals += 1;
        let explained = states.iter().enumerate().any(|(i, (_, s))| {
            let refuses = match r.outcome {
                Outcome::Full { count } => !s.fits(count, capacity),
                _ => s.waiting.is_empty(),
            };
            let from = i == 0 || by_version[i - 1].1.start <= r.end;
            let until = i == by_version.len() || by_version[i].1.end >= r.start;
            refuses && from && until
        });
        // With lost writes the states between are not all known: only the exact rounds
        // must explain every refusal.
        if !explained && (exact || missing == 0) {
            return Err(format!("{r:?}: no state current while it ran refuses it"));
        }
    }
    Ok(format!(
        "{} writes ({missing} lost), {} taken, {} called, {refusals} refusals, {} ids",
        writes.len(),
        m.taken,
        m.served,
        ids.len()
    ))
}

/// The request ids of a round: a small pool, so that the same id is taken at once by two
/// tasks of a batch and again later; an id always asks for the same count.
fn pick_id(r: &mut Rng, pool: u64) -> (String, u64) {
    let i = r.below(pool);
    (format!("id-{i}"), 1 + i % 3)
}

async fn model_round(seed: u64, faults: bool) -> Result<String, String> {
    let mut rng = Rng(seed);
    let capacity = 4 + rng.below(9); // 4 … 12
    let min = rng.below(5) as i64;
    let max = min + capacity as i64 - 1;
    let f = Fixture::new("queue_batch_model").await;
    let admin = f.dispenser(f.options());
    admin
        .create_queue("q", QueueSpec::default().with_min(min).with_max(max))
        .await
        .map_err(|e| e.to_string())?;
    let v0 = admin
        .open_queue("q")
        .await
        .map_err(|e| e.to_string())?
        .peek()
        .await
        .map_err(|e| e.to_string())?
        .version;
    let timeout = Duration::from_millis(if faults { 1500 } else { 5000 });
    let proxy = if faults {
        Some(
            Proxy::to_test_server(
                Faults {
                    drop_reply: 0.06,
                    stall_share: 0.5,
                    ..Faults::default()
                },
                seed,
            )
            .await,
        )
    } else {
        None
    };
    let pool = 4 + rng.below(12);
    // Two to five handles; in half the rounds each has one task (its lines are of one
    // operation, and what it remembers grows stale while the others write), else 2 to 12.
    let handles = 2 + rng.below(4);
    let crowded = rng.below(2) == 0;
    let mut actors = Vec::new();
    for h in 0..handles {
        let uri = match (&proxy, h) {
            (Some(p), 0) => p.uri(""),
            _ => common::uri(),
        };
        let d = Dispenser::connect(&uri, f.options().with_operation_timeout(timeout))
            .await
            .map_err(|e| e.to_string())?;
        // The proxied handle opens patiently: its opening read may lose its reply too
        // (a read: nothing written, try again).
        let mut opened = d.open_queue("q").await;
        for _ in 0..20 {
            match &opened {
                Err(e) if faults && (e.is_timeout() || e.is_database()) => {
                    opened = d.open_queue("q").await;
                }
                _ => break,
            }
        }
        let q = Arc::new(opened.map_err(|e| format!("handle {h} never opened the queue: {e}"))?);
        let tasks = if crowded { 2 + rng.below(11) } else { 1 };
        let take_share = 45 + rng.below(20);
        for t in 0..tasks {
            let (q, tseed) = (q.clone(), rng.next_u64());
            actors.push(tokio::spawn(async move {
                let mut r = Rng(tseed);
                let mut log = Vec::new();
                for _ in 0..if crowded { 12 } else { 30 } {
                    if r.below(2) == 0 {
                        tokio::time::sleep(Duration::from_micros(r.below(3000))).await;
                    }
                    let start = Instant::now();
                    let outcome = if r.below(100) < take_share {
                        let (id, count) = if r.below(3) == 0 {
                            (None, 1 + r.below(2))
                        } else {
                            let (id, n) = pick_id(&mut r, pool);
                            (Some(id), n)
                        };
                        let mut take = q.take();
                        if let Some(id) = &id {
                            take = take.request_id(id.clone());
                        }
                        match take.count(count).await {
                            Ok(t) => Outcome::Took {
                                id,
                                count,
                                serials: t.iter().map(|t| t.serial).collect(),
                                numbers: t.iter().map(|t| t.number).collect(),
                                taken: t[0].taken,
                                served: t[0].served,
                                version: t[0].version,
                                replayed: t[0].replayed,
                            },
                            Err(Error::QueueFull { requested, .. }) => {
                                Outcome::Full { count: requested }
                            }
                            Err(e) if faults && (e.is_timeout() || e.is_database()) => {
                                Outcome::Unknown
                            }
                            Err(e) => return Err(format!("handle {h} task {t}: {e}")),
                        }
                    } else {
                        // With faults, calls come from the desk without a name: a lost call's
                        // ticket is then known to be that desk's.
                        let desk = if faults {
                            String::new()
                        } else {
                            format!("{}", r.below(3))
                        };
                        let mut call = q.call();
                        if !desk.is_empty() {
                            call = call.desk(desk.clone());
                        }
                        match call.await {
                            Ok(t) => Outcome::Called {
                                desk,
                                serial: t.serial,
                                number: t.number,
                                taken: t.taken,
                                served: t.served,
                                version: t.version,
                            },
                            Err(Error::NobodyWaiting { .. }) if !faults => {
                                // Nobody waits: the desk closes (its ticket is no longer held,
                                // or it would keep the queue from handing its number out).
                                log.push(Obs {
                                    who: format!("handle {h} task {t}"),
                                    start,
                                    end: Instant::now(),
                                    outcome: Outcome::Nobody,
                                });
                                match q.finish().desk(desk.clone()).await {
                                    Ok(t) => Outcome::Released {
                                        desk,
                                        serial: t.serial,
                                        version: t.version,
                                    },
                                    // Another task of the desk released it first.
                                    Err(Error::NoTicketShown { .. }) => continue,
                                    Err(e) => return Err(format!("handle {h} task {t}: {e}")),
                                }
                            }
                            Err(Error::NobodyWaiting { .. }) => Outcome::Nobody,
                            Err(e) if faults && (e.is_timeout() || e.is_database()) => {
                                Outcome::Unknown
                            }
                            Err(e) => return Err(format!("handle {h} task {t}: {e}")),
                        }
                    };
                    log.push(Obs {
                        who: format!("handle {h} task {t}"),
                        start,
                        end: Instant::now(),
                        outcome,
                    });
                }
                Ok::<_, String>(log)
            }));
        }
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
    let summary = check(
        min,
        capacity,
        v0,
        (s.taken, s.served, s.version),
        timeout,
        &obs,
        !faults,
    )?;
    let lost = obs
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Unknown))
        .count();
    Ok(format!(
        "tickets {min}…{max} (capacity {capacity}), {handles} handles of {}, {} operations, {lost} unknown: {summary}",
        if crowded { "many tasks" } else { "one task" },
        obs.len()
    ))
}

/// The seeded model of coalesced batches (see the module's docs): rounds without faults,
/// whose histories must replay exactly, and rounds with one handle behind a proxy that loses
/// replies and hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seeded_model_of_coalesced_batches_with_repeated_ids_families_desks_and_lost_replies() {
    common::ready();
    let seed = common::seed("DISPENSER_QUEUE_SEED");
    let rounds: u64 = std::env::var("DISPENSER_QUEUE_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    eprintln!(
        "queue batch model: seed {seed} (replay: DISPENSER_QUEUE_SEED={seed}), {rounds} rounds"
    );
    let mut rng = Rng(seed);
    for round in 0..rounds {
        let round_seed = rng.next_u64();
        let faults = round % 2 == 1;
        match model_round(round_seed, faults).await {
            Ok(summary) => {
                eprintln!("queue batch model round {round} (faults {faults}): {summary}")
            }
            Err(e) => {
                panic!("queue batch model, seed {seed}, round {round} (faults {faults}): {e}")
            }
        }
    }
}
