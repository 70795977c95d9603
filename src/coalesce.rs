//! Coalesced draws: concurrent calls on one [`Sequence`](crate::Sequence) (and its clones)
//! share writes.
//!
//! While a draw is in flight, new callers queue; when it returns, the queue is drawn in
//! **one** write of the queued total and the numbers go out in arrival order. Nothing is
//! reserved before a caller asks, so every number is still fixed by a write that happened
//! during its caller's call: a plain sequence stays linearizable, a crash loses nothing but
//! the write in flight, and across processes the order is the order of the writes. This is
//! flat combining (Hendler et al., SPAA 2010) with the database write as the combined
//! operation.
//!
//! * The first caller that finds nothing in flight draws for itself, inline: an uncontended
//!   call costs one uncontended mutex more than a direct draw.
//! * Queued callers are served by a task that drains the queue batch after batch until it is
//!   empty. After answering a batch it lets the callers it woke queue again before it takes
//!   the next one, so that callers drawing in a loop ride every write together — also a
//!   binding's, which come back one at a time (each Python thread once it has the GIL again,
//!   each Node.js caller once the JavaScript thread has run it): it waits while they keep
//!   coming, until as many more wait as it served, at most half a round trip (see `Gather`). A
//!   caller whose future is dropped while queued is left out of the next batch (it reserves
//!   nothing); one dropped after its batch was sent leaves its numbers a gap.
//! * A non-cyclic batch that does not fit before the bound is cut: the callers that fit (in
//!   arrival order) get their numbers in one write, the others [`Error::Exhausted`].
//! * A cyclic batch stops at the wrap like any run: the callers it covers are served, a
//!   caller it cuts gets the part before the wrap (as a direct `next_n` would), and the rest
//!   wait for the next write.
//! * A failed write fails exactly the callers of its batch.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::arith::Run;
use crate::error::{Error, Result};
use crate::stats::{add, bump};
use crate::strategy::Drawer;

/// A caller waiting for its numbers.
struct Waiter {
    n: u64,
    tx: oneshot::Sender<Result<Run>>,
    /// Who it is: a caller whose time runs out while it waits in line takes itself out by it.
    id: Arc<()>,
}

#[derive(Default)]
struct Queue {
    /// A draw is in flight (inline by a caller or by the draining task).
    busy: bool,
    waiting: VecDeque<Waiter>,
}

/// The queue of one sequence handle and its clones.
#[derive(Default)]
pub(crate) struct Combiner {
    queue: Mutex<Queue>,
}

impl Combiner {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Draws `n` numbers for one caller, sharing the write with concurrent callers.
pub(crate) async fn draw(drawer: &Arc<Drawer>, combiner: &Arc<Combiner>, n: u64) -> Result<Run> {
    if n == 0 {
        return drawer.draw(0).await; // the drawer's own error for 0
    }
    // A caller's time counts from its call, in line or not: it never waits a whole operation
    // timeout for the write in flight and then another for its own.
    let timeout = drawer.store.timeout();
    let deadline = tokio::time::Instant::now() + timeout;
    let id = Arc::new(());
    let rx = {
        let mut q = combiner.lock();
        if q.busy {
            let (tx, rx) = oneshot::channel();
            q.waiting.push_back(Waiter {
                n,
                tx,
                id: id.clone(),
            });
            Some(rx)
        } else {
            q.busy = true;
            None
        }
    };
    match rx {
        Some(rx) => match tokio::time::timeout_at(deadline, rx).await {
            Ok(answer) => answer.unwrap_or_else(|_| {
                // The draining task ended without answering: only if the runtime shut down.
                Err(Error::Closed {
                    name: drawer.name.clone(),
                })
            }),
            Err(_) => {
                // Out of line if its write was not sent yet (nothing written); else that
                // write's outcome is unknown.
                let mut q = combiner.lock();
                let before = q.waiting.len();
                q.waiting.retain(|w| !Arc::ptr_eq(&w.id, &id));
                let left = if q.waiting.len() < before {
                    crate::error::Aftermath::Lined
                } else {
                    crate::error::Aftermath::Draw
                };
                Err(Error::timeout(
                    format!("drawing from sequence {:?}", drawer.name),
                    timeout,
                    left,
                ))
            }
        },
        None => {
            // Nobody in flight: draw inline. The guard hands the queue on even if this
            // future is dropped mid-draw.
            let _handoff = Handoff(drawer.clone(), combiner.clone());
            bump(&drawer.stats.batches);
            add(&drawer.stats.batched_calls, 1);
            drawer.stats.max_batch.fetch_max(1, Relaxed);
            drawer.draw(n).await
        }
    }
}

/// When the inline drawer finishes (or is dropped): serve whoever queued meanwhile.
struct Handoff(Arc<Drawer>, Arc<Combiner>);

impl Drop for Handoff {
    fn drop(&mut self) {
        let mut q = self.1.lock();
        if q.waiting.is_empty() {
            q.busy = false;
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                drop(q);
                // `busy` stays set: the task owns the queue until it is empty.
                rt.spawn(drain(self.0.clone(), self.1.clone()));
            }
            Err(_) => {
                // No runtime to serve them on (only when one is shutting down).
                q.busy = false;
                let name = self.0.name.clone();
                for w in q.waiting.drain(..) {
                    let _ = w.tx.send(Err(Error::Closed { name: name.clone() }));
                }
            }
        }
    }
}

/// Serves the queue, one write per batch, until it is empty.
async fn drain(drawer: Arc<Drawer>, combiner: Arc<Combiner>) {
    loop {
        let mut batch: VecDeque<Waiter> = {
            let mut q = combiner.lock();
            // Callers that gave up while queued reserve nothing.
            q.waiting.retain(|w| !w.tx.is_closed());
            if q.waiting.is_empty() {
                q.busy = false;
                return;
            }
            std::mem::take(&mut q.waiting)
        };
        let served = batch.len();
        let sent = Instant::now();
        let leftover = serve_batch(&drawer, &mut batch).await;
        let round_trip = sent.elapsed();
        if !leftover.is_empty() {
            // Cut by a cyclic wrap: first in line for the next write.
            let mut q = combiner.lock();
            for w in leftover.into_iter().rev() {
                q.waiting.push_front(w);
            }
        }
        linger(&combiner, served, round_trip).await;
    }
}

/// The gather window lasts at most this share of the round trip of the write just answered:
/// `round_trip / WINDOW_DIVISOR` (see [`Gather`]).
const WINDOW_DIVISOR: u32 = 2;

/// The leader stops gathering when no caller came for this share of the round trip:
/// `round_trip / QUIET_DIVISOR` (see [`Gather`]).
const QUIET_DIVISOR: u32 = 16;

/// After a batch was answered: lets the callers it woke run and queue again before the next
/// batch is taken, so that it carries them too (see [`Gather`] for when it stops).
///
/// Without it, when the round trip is long and every caller was in the batch, the queue is
/// found empty, the first caller back draws alone and the others queue behind it: batches
/// of 1 and N−1 alternate, half the throughput (measured at a 2 ms round trip with 32 tasks:
/// a mean batch of 16, 1.7× a raw `$inc`'s numbers per second; with it 32 and 3.1–3.3×).
async fn linger(combiner: &Combiner, served: usize, round_trip: Duration) {
    linger_while(
        || combiner.lock().waiting.len(),
        served,
        round_trip,
        usize::MAX,
    )
    .await;
}

/// [`linger`] for any queue of callers: `waiting` says how many wait now; a batch takes at
/// most `max_batch` of them. (Queues coalesce their operations the same way:
/// `queue::combine`.)
///
/// It yields to the runtime between looks, so the callers it woke run on its threads too;
/// it never sleeps on the runtime's timer, whose resolution (1 ms) is coarser than the
/// window.
pub(crate) async fn linger_while(
    waiting: impl Fn() -> usize,
    served: usize,
    round_trip: Duration,
    max_batch: usize,
) {
    let mut gather = Gather::new(served, waiting(), round_trip, Instant::now()).at_most(max_batch);
    loop {
        tokio::task::yield_now().await;
        if gather.done(waiting(), Instant::now()) {
            return;
        }
    }
}

/// When the leader takes the next batch after answering one: the gather window.
///
/// The callers a write answered come back at their own pace: a task of this crate within
/// microseconds, a Python thread only once it has the GIL again (the threads take it one
/// after another), a Node.js caller once the JavaScript thread has settled its Promise and
/// run its code (one caller after another). A binding's callers are back over a good part of
/// a round trip. The leader takes the next batch as soon as
///
/// * as many callers wait as it served, besides those already waiting when it answered (the
///   served are back; a caller that stopped drawing is replaced by one that arrived
///   meanwhile), or
/// * callers came back, and no caller came for a sixteenth of the write's round trip
///   ([`QUIET_DIVISOR`]: the callers still away are not coming soon), or
/// * half a round trip has passed since it answered ([`WINDOW_DIVISOR`]).
///
/// Until a caller comes the quiet time does not run: a binding's first caller takes a while
/// to come back (measured with 32 asyncio tasks at a 2 ms round trip: the first 0.4–0.6 ms
/// after the answer, the 32nd 0.2 ms after it), and a leader that left before would take
/// only those already waiting, or nobody — then the first caller back, finding nothing in
/// flight, drew alone and the rest queued behind its write: a whole round trip more for
/// them (17 numbers per write, p50 5 ms). A caller that comes while the leader waits
/// queues, and waits at most the quiet time after the last arrival.
///
/// So a caller in line waits at most half a round trip more than if the write were sent
/// at once, and only while others keep arriving; in exchange the next write carries the
/// callers still coming back, who would otherwise wait a whole round trip for the write
/// after it. A caller alone never waits here: it draws inline (nothing in flight).
///
/// The callers already waiting when the batch was answered (they came while it was in
/// flight) count on top of the served: counted among them, they would let the next batch
/// leave with only themselves the moment the served batch was answered, and the served
/// callers, back a moment later, would wait for the write after — two halves riding
/// alternate writes for good, each caller waiting two round trips (measured with 32 asyncio
/// tasks at a 2 ms round trip: 17 numbers per write, p50 5 ms).
#[derive(Debug)]
struct Gather {
    /// How many must wait to take the next batch at once: the served and those that
    /// already waited (at most a batch's size).
    target: usize,
    /// When the batch was answered.
    answered: Instant,
    window: Duration,
    quiet: Duration,
    /// How many waited when the last caller arrived (at first: those already waiting), and
    /// when that was.
    seen: usize,
    last: Instant,
    /// A caller came since the answer (the quiet time runs).
    arrived: bool,
}

impl Gather {
    fn new(served: usize, already: usize, round_trip: Duration, answered: Instant) -> Self {
        Gather {
            target: served.saturating_add(already),
            answered,
            window: round_trip / WINDOW_DIVISOR,
            quiet: round_trip / QUIET_DIVISOR,
            seen: already,
            last: answered,
            arrived: false,
        }
    }

    /// Takes the next batch once `max_batch` wait, if that comes before the target (a
    /// batch takes no more).
    fn at_most(mut self, max_batch: usize) -> Self {
        self.target = self.target.min(max_batch);
        self
    }

    /// Whether to take the next batch now, when `waiting` callers wait at `now`.
    fn done(&mut self, waiting: usize, now: Instant) -> bool {
        if waiting >= self.target {
            return true;
        }
        if waiting > self.seen {
            self.seen = waiting;
            self.last = now;
            self.arrived = true;
        }
        now.saturating_duration_since(self.answered) >= self.window
            || (self.arrived && now.saturating_duration_since(self.last) >= self.quiet)
    }
}

/// Draws for a batch in one write (two when a non-cyclic batch must be cut at the bound)
/// and answers its callers. Returns the callers a cyclic wrap left unserved.
async fn serve_batch(drawer: &Drawer, batch: &mut VecDeque<Waiter>) -> VecDeque<Waiter> {
    let total: u64 = batch.iter().map(|w| w.n).fold(0, u64::saturating_add);
    bump(&drawer.stats.batches);
    add(&drawer.stats.batched_calls, batch.len() as u64);
    drawer
        .stats
        .max_batch
        .fetch_max(batch.len() as u64, Relaxed);
    if batch.len() > 1 {
        add(&drawer.stats.coalesced_calls, batch.len() as u64);
    }
    let run = match drawer.draw(total).await {
        Ok(run) => run,
        Err(Error::Exhausted {
            name,
            value,
            remaining,
            min,
            max,
            step,
            ..
        }) => {
            // Decided from a fresh read. As if each caller had drawn alone, in arrival
            // order: those that still fit get their numbers (in one write), the others
            // `Exhausted` (and nothing is written for them).
            let mut left = remaining;
            let mut fits = VecDeque::new();
            for w in batch.drain(..) {
                if w.n <= left {
                    left -= w.n;
                    fits.push_back(w);
                } else {
                    let e = Error::Exhausted {
                        name: name.clone(),
                        value,
                        requested: w.n,
                        remaining: left,
                        min,
                        max,
                        step,
                    };
                    let _ = w.tx.send(Err(e));
                }
            }
            let sum = remaining - left;
            if fits.is_empty() {
                return VecDeque::new();
            }
            return match drawer.draw(sum).await {
                Ok(run) => hand_out(run, &mut fits),
                Err(e) => {
                    fail(&mut fits, &e);
                    VecDeque::new()
                }
            };
        }
        Err(e) => {
            fail(batch, &e);
            return VecDeque::new();
        }
    };
    hand_out(run, batch)
}

fn fail(batch: &mut VecDeque<Waiter>, e: &Error) {
    for w in batch.drain(..) {
        let _ = w.tx.send(Err(e.clone()));
    }
}

/// Splits `run` among the callers in arrival order. Returns those it did not reach.
fn hand_out(run: Run, batch: &mut VecDeque<Waiter>) -> VecDeque<Waiter> {
    let mut offset = 0u64;
    while let Some(w) = batch.front() {
        let left = run.count() - offset;
        if left == 0 {
            break;
        }
        let take = w.n.min(left);
        let part = Run::new(run.nth_number(offset), take, run.step());
        offset += take;
        if let Some(w) = batch.pop_front() {
            // A caller that gave up meanwhile leaves its numbers a gap.
            let _ = w.tx.send(Ok(part));
        }
    }
    std::mem::take(batch)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};

    use super::*;

    fn queued(asks: &[u64]) -> (VecDeque<Waiter>, Vec<oneshot::Receiver<Result<Run>>>) {
        asks.iter()
            .map(|&n| {
                let (tx, rx) = oneshot::channel();
                (
                    Waiter {
                        n,
                        tx,
                        id: Arc::default(),
                    },
                    rx,
                )
            })
            .unzip()
    }

    fn numbers(rx: &mut oneshot::Receiver<Result<Run>>) -> Option<Vec<i64>> {
        rx.try_recv()
            .ok()
            .map(|r| r.expect("a run").into_iter().collect())
    }

    /// A batch's run is split among its callers in arrival order, each getting the numbers it
    /// asked for, next to each other and never shared; the caller the run ends in gets the
    /// part before the end (a cyclic wrap); the callers after it are handed back, in order,
    /// for the next write.
    #[test]
    fn a_run_is_handed_out_in_arrival_order_and_the_callers_it_does_not_reach_wait() {
        let (mut batch, mut rx) = queued(&[2, 3, 1]);
        let left = hand_out(Run::new(10, 6, 3), &mut batch);
        assert!(left.is_empty() && batch.is_empty());
        let got: Vec<_> = rx.iter_mut().map(numbers).collect();
        assert_eq!(
            got,
            [Some(vec![10, 13]), Some(vec![16, 19, 22]), Some(vec![25])]
        );
        // Cut by the end of the run: the second caller gets 2 of its 3, the rest wait.
        let (mut batch, mut rx) = queued(&[2, 3, 1, 4]);
        let left = hand_out(Run::new(-5, 4, -1), &mut batch);
        assert_eq!(left.iter().map(|w| w.n).collect::<Vec<_>>(), [1, 4]);
        let got: Vec<_> = rx.iter_mut().map(numbers).collect();
        assert_eq!(got, [Some(vec![-5, -6]), Some(vec![-7, -8]), None, None]);
    }

    /// A failed write fails exactly the callers of its batch, each with the write's error.
    #[test]
    fn a_failed_write_fails_every_caller_of_its_batch_with_its_error() {
        let (mut batch, mut rx) = queued(&[1, 2]);
        let e = Error::Closed {
            name: "orders".to_owned(),
        };
        fail(&mut batch, &e);
        assert!(batch.is_empty());
        for rx in &mut rx {
            let got = rx.try_recv().expect("answered");
            assert!(
                matches!(&got, Err(Error::Closed { name }) if name == "orders"),
                "{got:?}"
            );
        }
    }

    const MS: Duration = Duration::from_millis(1);

    /// A gather after a write of 16 ms: a window of 8 ms, quiet after 1 ms.
    fn gather(served: usize) -> (Gather, Instant) {
        let t0 = Instant::now();
        (Gather::new(served, 0, 16 * MS, t0), t0)
    }

    /// As soon as as many callers wait as were served, the next batch is taken — also at
    /// once, and also when more wait; one fewer is not enough.
    #[test]
    fn the_next_batch_is_taken_once_as_many_callers_wait_as_were_served() {
        let (mut g, t0) = gather(4);
        assert!(!g.done(3, t0));
        assert!(g.done(4, t0));
        let (mut g, t0) = gather(4);
        assert!(g.done(9, t0 + MS / 10));
    }

    /// Callers that already waited when the batch was answered (they came while it was in
    /// flight) do not stand for the served coming back: with 16 served and 16 waiting, the
    /// leader waits for 16 more — not leaving with the 16 that waited, which would split
    /// the callers into two halves riding alternate writes. A batch's size bounds the wait.
    #[test]
    fn callers_waiting_before_the_answer_do_not_count_as_the_served_back() {
        let t0 = Instant::now();
        let mut g = Gather::new(16, 16, 16 * MS, t0);
        assert!(!g.done(16, t0), "left with only those that waited");
        // Those that waited start no quiet time: the served come back late.
        assert!(!g.done(16, t0 + 3 * MS), "left with only those that waited");
        assert!(!g.done(31, t0 + 3 * MS + MS / 10));
        assert!(g.done(32, t0 + 3 * MS + MS / 5));
        let mut g = Gather::new(16, 16, 16 * MS, t0).at_most(20);
        assert!(!g.done(19, t0));
        assert!(g.done(20, t0), "a batch takes no more than 20");
    }

    /// While callers keep coming back (each within the quiet time of the last), the leader
    /// waits for them, up to half the round trip and no longer.
    #[test]
    fn while_callers_keep_coming_back_it_waits_up_to_half_a_round_trip() {
        let (mut g, t0) = gather(32);
        // One more every 0.5 ms: still waiting at 7.5 ms with 15 of 32 back.
        for i in 1..=15_u32 {
            assert!(!g.done(i as usize, t0 + i * MS / 2), "left at {i} × 0.5 ms");
        }
        assert!(
            g.done(16, t0 + 8 * MS),
            "still there at half the round trip"
        );
    }

    /// When callers wait and no caller came for a sixteenth of the round trip, the ones
    /// still away are not coming soon: the next batch is taken with those there. With
    /// nobody back at all, the window ends the wait (the queue is found empty and the drain
    /// ends).
    #[test]
    fn no_new_caller_for_a_sixteenth_of_a_round_trip_ends_the_wait() {
        let (mut g, t0) = gather(32);
        assert!(!g.done(3, t0 + MS / 5));
        assert!(
            !g.done(3, t0 + MS / 5 + MS * 9 / 10),
            "0.9 ms since the last"
        );
        assert!(g.done(3, t0 + MS / 5 + MS), "1 ms since the last");
        // Nobody came yet: the quiet time does not run; the window ends the wait.
        let (mut g, t0) = gather(32);
        assert!(!g.done(0, t0 + MS / 2));
        assert!(!g.done(0, t0 + MS), "left with nobody before the window");
        assert!(!g.done(0, t0 + 7 * MS));
        assert!(g.done(0, t0 + 8 * MS));
        // The first one back, late: the quiet time runs from its arrival.
        let (mut g, t0) = gather(32);
        assert!(!g.done(0, t0 + 3 * MS));
        assert!(!g.done(1, t0 + 3 * MS + MS / 10));
        assert!(!g.done(1, t0 + 4 * MS));
        assert!(g.done(1, t0 + 4 * MS + MS / 10), "1 ms since it came");
        // A caller's arrival is noticed when it is seen: time since the previous one counts
        // from there.
        let (mut g, t0) = gather(32);
        assert!(!g.done(1, t0 + MS / 2));
        assert!(!g.done(2, t0 + MS * 3 / 2 - MS / 10));
        assert!(!g.done(2, t0 + MS * 5 / 2 - MS / 5));
        assert!(g.done(2, t0 + MS * 5 / 2));
    }

    /// A write answered with no measurable round trip (an error at once) waits for nobody.
    #[test]
    fn after_a_round_trip_of_zero_the_next_batch_is_taken_at_once() {
        let t0 = Instant::now();
        let mut g = Gather::new(8, 0, Duration::ZERO, t0);
        assert!(g.done(0, t0));
    }

    /// `linger_while` looks at the line between its yields and returns as soon as as many
    /// callers wait as were served: on a one-thread runtime, a sibling task queues one caller
    /// per yield, so it returns with exactly that many in line (the round trip is long: no
    /// clock decides here).
    #[tokio::test(flavor = "current_thread")]
    async fn lingering_ends_when_as_many_callers_wait_as_were_served() {
        let back = Arc::new(AtomicU32::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let sibling = tokio::spawn({
            let (back, done) = (back.clone(), done.clone());
            async move {
                while !done.load(SeqCst) {
                    back.fetch_add(1, SeqCst);
                    tokio::task::yield_now().await;
                }
            }
        });
        let hour = Duration::from_secs(3600);
        linger_while(|| back.load(SeqCst) as usize, 5, hour, usize::MAX).await;
        let seen = back.load(SeqCst);
        done.store(true, SeqCst);
        sibling.await.unwrap();
        assert_eq!(
            seen, 5,
            "returned with {seen} callers back, not the 5 served"
        );
    }
}
