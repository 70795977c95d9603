//! [`Gapless::issue`]: take the next number under a lease, run the business write with it,
//! and leave its confirmation to the next lease write (or the flusher).
//!
//! A call holds the handle's baton from start to end, so calls through one handle (and its
//! clones) run one at a time, in call order, without asking the database who is next.
//!
//! - **Chained** (the handle's previous call left its number pending): one write confirms it
//!   and takes the lease on the next number, sent together with the business write — both
//!   are safe to overlap, because nobody else may hold the next number while the handle
//!   holds the previous one's lease (and if the lease was lost meanwhile, the unique index
//!   decides between the writers). Two round trips per number.
//! - **Fresh**: take the lease (free, or run out by the server's clock — then look the
//!   number up first), run the business write. Waiters poll with short jittered pauses, say
//!   on the lease that they wait (the holder's next chained write then steps aside), and move
//!   a live holder's number on when they find it used (a holder that returned and whose
//!   process stopped before confirming).

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use futures::FutureExt;
use tokio::sync::OwnedMutexGuard;

use super::lease::Found;
use super::{Baton, Gapless, Held, Inner, Issued, Owed};
use crate::error::{Aftermath, Error, Result, Written};
use crate::store::is_duplicate_key;

/// Whether the handle writes `n` at `now` under the lease it holds (`held`), with no state
/// write: `n` is fewer than [`RUN`] numbers into the run, and the lease younger than
/// [`RENEW`] or a quarter of it (`lease`), whichever is shorter. Else the write that
/// confirms the run renews the lease, so that a burst never outlives its lease and a caller
/// that waits is seen soon.
fn under_lease(held: &Held, n: i64, now: Instant, lease: Duration) -> bool {
    n - held.next < RUN && now.saturating_duration_since(held.since) < RENEW.min(lease / 4)
}

/// How many numbers `n` to `last` are: a run found used and moved past (counted in
/// [`Issued::skipped`]).
fn run_length(n: i64, last: i64) -> u32 {
    u32::try_from(last - n + 1).unwrap_or(u32::MAX)
}

/// How long a used number waits for the handle's next call to confirm it, before the
/// flusher does.
const LINGER: Duration = Duration::from_millis(1);

/// How many numbers a handle writes under one lease, its calls following each other,
/// before it confirms them (in the write that takes the next lease) — and so how many
/// numbers a caller elsewhere that waits may wait for, and how many used numbers a holder
/// that dies may leave for the next caller to find (in one look-up).
const RUN: i64 = 32;

/// How long a handle writes numbers under one lease before it renews the lease (in the
/// write that confirms them), at most — and so how long a caller elsewhere that waits may
/// wait for the holder to notice it.
const RENEW: Duration = Duration::from_millis(5);

/// How long a caller waits on the same live holder before it looks the held number up: a
/// holder that returned and whose process stopped before confirming leaves a live lease on
/// used numbers. Well above [`RENEW`], so a live holder that issues renews first.
const HELP_AFTER: Duration = Duration::from_millis(50);

/// What one run of the business write came to.
enum Wrote<T> {
    Ok(T),
    /// A duplicate key from the driver: maybe the number is used (or voided) already.
    Duplicate(Failure),
    /// Any other error, or a panic.
    Failed(Failure),
}

struct Failure {
    reason: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    /// Whether the write may have been applied all the same (see [`may_have_landed`]).
    written: Written,
}

/// Whether the business write's error `e` leaves its outcome unknown: a driver error that
/// may have let the write through (a connection cut or a reply lost after it was sent, a
/// write concern not met), a timeout the closure put on its write (tokio's `Elapsed`), or a
/// dispenser error of unknown outcome. Any other error, and a panic, is a definite failure.
fn may_have_landed(e: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    if let Some(driver) = e.downcast_ref::<mongodb::error::Error>() {
        return crate::error::may_have_landed(driver);
    }
    if let Some(ours) = e.downcast_ref::<Error>() {
        return ours.written() == Written::Unknown;
    }
    e.is::<tokio::time::error::Elapsed>()
}

/// Runs the business write once, catching its panic.
async fn run<F, Fut, T, E>(write: &mut F, n: i64) -> Wrote<T>
where
    F: FnMut(i64) -> Fut,
    Fut: Future<Output = std::result::Result<T, E>>,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match AssertUnwindSafe(write(n)).catch_unwind().await {
        Ok(Ok(v)) => Wrote::Ok(v),
        Ok(Err(e)) => {
            let boxed: Box<dyn std::error::Error + Send + Sync> = e.into();
            let driver = boxed.downcast_ref::<mongodb::error::Error>();
            let duplicate = driver.is_some_and(is_duplicate_key);
            let reason = match driver {
                Some(d) => crate::error::describe_driver_error(d),
                None => boxed.to_string(),
            };
            let written = if !duplicate && may_have_landed(boxed.as_ref()) {
                Written::Unknown
            } else {
                Written::Nothing
            };
            let f = Failure {
                reason,
                source: Some(Arc::from(boxed)),
                written,
            };
            if duplicate {
                Wrote::Duplicate(f)
            } else {
                Wrote::Failed(f)
            }
        }
        Err(panic) => Wrote::Failed(Failure {
            reason: panic_message(&panic),
            source: None,
            written: Written::Nothing,
        }),
    }
}

fn panic_message(p: &Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("it panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("it panicked: {s}")
    } else {
        "it panicked".to_owned()
    }
}

/// A short jittered pause between polls of a lease: 1 ms growing to about 17 ms.
fn jitter(attempt: u32) -> Duration {
    use std::hash::{BuildHasher, RandomState};
    let cap = 1_u64 << attempt.min(4); // 2 … 16 ms
    let r = RandomState::new().hash_one(attempt) % (cap * 1000);
    Duration::from_micros(1000 + r)
}

/// A call's turn: the baton, and the leases the call may hold right now — settled as
/// written here (through the flusher) if the call is dropped midway.
struct Turn {
    baton: OwnedMutexGuard<Baton>,
    inner: Arc<Inner>,
    inflight: Vec<Owed>,
}

impl Turn {
    /// Settles `owed` now, then forgets the call's in-flight leases (kept until then, so a
    /// call dropped meanwhile still settles them).
    async fn settle(&mut self, owed: Owed) {
        self.inflight.insert(0, owed);
        self.inner.pay(owed).await;
        self.inflight.clear();
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if !self.inflight.is_empty() {
            let owed = std::mem::take(&mut self.inflight);
            self.baton.owed.extend(owed);
            arm_flusher(&self.inner, &mut self.baton);
        }
    }
}

/// Makes sure a flusher runs: a background task that, once the handle's pending run has
/// stayed the same for `LINGER` (its calls paused), confirms it and settles the debts. One
/// per handle at a time.
fn arm_flusher(inner: &Arc<Inner>, baton: &mut Baton) {
    if baton.flusher.as_ref().is_some_and(|f| !f.is_finished()) {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        // No runtime to run it on: the next call (or the lease running out) settles it.
        return;
    };
    let (inner, mut seen) = (inner.clone(), baton.pending.map(Held::mark));
    baton.flusher = Some(rt.spawn(async move {
        loop {
            tokio::time::sleep(LINGER).await;
            let mut baton = inner.baton.clone().lock_owned().await;
            let now = baton.pending.map(Held::mark);
            if now != seen {
                // Calls still follow each other: they confirm as they go. Look again later.
                seen = now;
                continue;
            }
            if let Err(e) = inner.settle_all(&mut baton).await {
                tracing::warn!(sequence = %inner.name, "{e} (the next caller will find the numbers used and move past them)");
            }
            return;
        }
    }));
}

impl Gapless {
    /// Takes the next number, runs `write` with it — the business write that carries the
    /// number, typically an insert into the business collection — and returns the number
    /// once that write succeeded. The number is **used** exactly when `write` succeeds.
    ///
    /// - `write` returns an error or panics: the number is released (the next caller gets
    ///   it) and the call fails with [`Error::BusinessWrite`] carrying the error. An error
    ///   that may have let the write through — a driver error after the write was sent (a
    ///   connection cut, a lost reply, a write concern not met), or tokio's `Elapsed` from a
    ///   timeout the closure put on its write — is not a definite failure: the error's
    ///   [`written`](Error::written) is [`Written::Unknown`], and
    ///   its message says so (if the write landed, its number is used and the next caller
    ///   moves past it; else the next caller gets it).
    /// - `write` fails with a duplicate key on the number (a void, or a holder whose lease
    ///   ran out while it stalled, wrote that number first): the call moves past it and
    ///   calls `write` again with the next number. So `write` may run more than once — each
    ///   time after its previous run found its number carried by another document — and only
    ///   its successful run counts.
    /// - Another caller holds the lease: the call waits (in number order) for it to finish
    ///   or for its lease to run out by the server's clock, at most `wait`. Calls through
    ///   one handle and its clones are served in call order.
    ///
    /// Make `write` one write of one document, carrying the number in `field` (use
    /// [`set_field`](super::set_field) for a nested field): the unique index must see every
    /// use of a number. Bound it in time (the lease says how long a holder may take): the
    /// call waits for it. A write that succeeded but whose reply was lost is reported as a
    /// failure by the driver, of unknown outcome; its number then turns out used and is moved
    /// past by the next caller (no gap, no duplicate — but the caller that lost the reply may
    /// write again with another number, so make a retry of a failed `issue` look for its own
    /// document first when the outcome is unknown).
    ///
    /// The returned number is confirmed — the sequence moved past it — by this handle's next
    /// call or shortly after in the background; see [`Gapless::flush`].
    ///
    /// # Errors
    ///
    /// [`Error::BusinessWrite`] (nothing used and the number released, or of unknown
    /// outcome), [`Error::Contention`]
    /// (waited `wait` for other holders, or spent it moving past numbers found used),
    /// [`Error::Exhausted`] at `i64::MAX`, [`Error::NotFound`], [`Error::Database`],
    /// [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, though never at the cost of a gap or a duplicate: dropped midway,
    /// the lease it may hold is released in the background (or, without a runtime to do
    /// that, runs out); a business write that still lands meets the unique index when the
    /// number goes to the next caller, who then moves past it.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// use dispenser::mongodb::bson::doc;
    /// let coll = g.business(); // a reference: each write's future copies it, no clone
    /// let issued = g
    ///     .issue(|n| async move { coll.insert_one(doc! { "number": n, "customer": "ACME" }).await })
    ///     .await?;
    /// println!("invoice no. {}", issued.number);
    /// # Ok(()) }
    /// ```
    pub async fn issue<F, Fut, T, E>(&self, mut write: F) -> Result<Issued<T>>
    where
        F: FnMut(i64) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Instant::now();
        let inner = &self.inner;
        let wait = inner.options.wait;
        let contention = |attempts: u32| Error::Contention {
            name: inner.name.clone(),
            attempts,
            elapsed: started.elapsed(),
        };
        let baton = tokio::time::timeout(wait, inner.baton.clone().lock_owned())
            .await
            .map_err(|_| contention(0))?;
        let mut turn = Turn {
            baton,
            inner: inner.clone(),
            inflight: Vec::new(),
        };
        for owed in std::mem::take(&mut turn.baton.owed) {
            inner.pay(owed).await;
        }
        let mut skipped = 0_u32;
        let mut attempts = 0_u32;
        let mut index_checked = false;
        // A caller that has not waited leaves a lease alone while another caller waits.
        let mut polite = true;
        // The holder this call said it waits for, and the live holder it saw (since when).
        let mut flagged = None;
        let mut seen: Option<(ObjectId, Instant)> = None;
        loop {
            if let Some(p) = turn.baton.pending.take() {
                let n = match p.last.checked_add(1) {
                    Some(n) if n < i64::MAX => n,
                    _ => {
                        turn.baton.pending = Some(p);
                        return Err(inner.exhausted(p.last));
                    }
                };
                if under_lease(&p, n, Instant::now(), inner.options.lease) {
                    // Under the lease the handle holds: the business write is all.
                    turn.inflight = vec![p.confirm()];
                    inner.counters.round_trips.fetch_add(1, Relaxed);
                    inner.counters.writes.fetch_add(1, Relaxed);
                    let (failure, duplicate) = match run(&mut write, n).await {
                        Wrote::Ok(value) => {
                            turn.inflight.clear();
                            let held = Held { last: n, ..p };
                            return Ok(self.leave_pending(&mut turn, held, value, skipped));
                        }
                        Wrote::Duplicate(f) => (f, true),
                        Wrote::Failed(f) => (f, false),
                    };
                    // Not used: confirm the run and let go of the lease.
                    turn.settle(p.confirm()).await;
                    polite = true;
                    // A duplicate: someone took the lease over meanwhile and wrote the number?
                    if duplicate && self.taken_by_another(n).await?.is_ok() {
                        continue;
                    }
                    return Err(self.business_error(n, failure));
                }
                // Confirm the run and take the lease on the next number in one write, with
                // the business write alongside.
                let me = ObjectId::new();
                turn.inflight = vec![p.confirm(), Owed::Release(me)];
                inner.counters.round_trips.fetch_add(1, Relaxed);
                inner.counters.writes.fetch_add(1, Relaxed);
                let (took, wrote) =
                    futures::join!(inner.chain(p.holder, p.next, n, me), run(&mut write, n));
                turn.inflight.clear();
                match took {
                    Ok(true) => {
                        turn.inflight.push(Owed::Release(me));
                        match self
                            .after_write(&mut turn, wrote, n, me, &mut skipped)
                            .await?
                        {
                            Some(issued) => return Ok(issued),
                            None => continue,
                        }
                    }
                    Ok(false) => {
                        // A caller waits, or the lease was taken over. Confirm the run (and
                        // this number, if written) if the lease is still ours.
                        let used = matches!(wrote, Wrote::Ok(_));
                        let to = if used { n + 1 } else { n };
                        turn.settle(Owed::Settle {
                            holder: p.holder,
                            number: p.next,
                            to,
                        })
                        .await;
                        polite = true;
                        match wrote {
                            // Written without the lease: the unique index made it ours.
                            Wrote::Ok(value) => return Ok(self.issued(n, value, skipped)),
                            Wrote::Duplicate(f) => match self.taken_by_another(n).await? {
                                Ok(()) => continue,
                                Err(_) => return Err(self.business_error(n, f)),
                            },
                            Wrote::Failed(f) => return Err(self.business_error(n, f)),
                        }
                    }
                    Err(e) => {
                        // Whether the chained write happened is unknown: settle both ways.
                        let used = matches!(wrote, Wrote::Ok(_));
                        let to = if used { n + 1 } else { n };
                        turn.baton.owed.push(Owed::Settle {
                            holder: p.holder,
                            number: p.next,
                            to,
                        });
                        turn.baton.owed.push(if used {
                            Owed::Settle {
                                holder: me,
                                number: n,
                                to: n + 1,
                            }
                        } else {
                            Owed::Release(me)
                        });
                        arm_flusher(inner, &mut turn.baton);
                        return match wrote {
                            Wrote::Ok(value) => Ok(self.issued(n, value, skipped)),
                            Wrote::Duplicate(_) => Err(e),
                            Wrote::Failed(f) => Err(self.business_error(n, f)),
                        };
                    }
                }
            }
            // Fresh: take the lease.
            attempts += 1;
            let me = ObjectId::new();
            turn.inflight = vec![Owed::Release(me)];
            // The unique index decides between this call's write and any other write of
            // the number (a stalled holder's, a lost reply's): make sure it is still there,
            // once per call, alongside the first take.
            let (taken, index) = if index_checked {
                (inner.take(me, polite).await, Ok(()))
            } else {
                futures::join!(inner.take(me, polite), inner.check_index())
            };
            let taken = match index.and(taken) {
                Ok(t) => t,
                Err(e) => {
                    // The lease may be ours: release it in the background.
                    drop(turn);
                    return Err(e);
                }
            };
            index_checked = true;
            let Some(taken) = taken else {
                turn.inflight.clear();
                if started.elapsed() >= wait {
                    return Err(contention(attempts));
                }
                let s = inner.read_state().await?;
                inner.counters.waits.fetch_add(1, Relaxed);
                let Some(l) = s.lease.clone() else {
                    // Free, but another caller said it waits: its turn first (until it took
                    // the lease, or its word grew old).
                    tokio::time::sleep(jitter(attempts)).await;
                    continue;
                };
                polite = false;
                match seen {
                    Some((h, since)) if h == l.holder && !s.lease_expired() => {
                        // The same live holder for a while: it may have returned and stopped
                        // before confirming. If its numbers are used, move past them.
                        if since.elapsed() >= HELP_AFTER
                            && let Found::Committed(last) = inner.lookup(l.number, false).await?
                        {
                            let to = last.checked_add(1).ok_or_else(|| inner.exhausted(last))?;
                            if inner
                                .settle(
                                    Some(l.holder),
                                    l.number,
                                    to,
                                    "moving past used numbers",
                                    Aftermath::Lease,
                                )
                                .await?
                            {
                                inner.counters.retries.fetch_add(1, Relaxed);
                                skipped = skipped.saturating_add(run_length(l.number, last));
                                continue;
                            }
                        }
                    }
                    _ => seen = Some((l.holder, Instant::now())),
                }
                if !l.waiters && flagged != Some(l.holder) {
                    inner.flag_want(l.holder).await?;
                    flagged = Some(l.holder);
                }
                let left = s.lease_left().max(Duration::from_millis(1));
                tokio::time::sleep(left.min(jitter(attempts))).await;
                continue;
            };
            let n = taken.number;
            if n == i64::MAX {
                turn.settle(Owed::Release(me)).await;
                return Err(inner.exhausted(n));
            }
            if taken.took_over.is_some() {
                // Its holder stopped: did its writes land?
                if let Found::Committed(last) = inner.lookup(n, false).await? {
                    let to = last.checked_add(1).ok_or_else(|| inner.exhausted(last))?;
                    turn.settle(Owed::Settle {
                        holder: me,
                        number: n,
                        to,
                    })
                    .await;
                    inner.counters.retries.fetch_add(1, Relaxed);
                    skipped = skipped.saturating_add(run_length(n, last));
                    continue;
                }
            }
            inner.counters.round_trips.fetch_add(1, Relaxed);
            inner.counters.writes.fetch_add(1, Relaxed);
            let wrote = run(&mut write, n).await;
            match self
                .after_write(&mut turn, wrote, n, me, &mut skipped)
                .await?
            {
                Some(issued) => return Ok(issued),
                None => {
                    if started.elapsed() >= wait {
                        return Err(contention(attempts));
                    }
                }
            }
        }
    }

    /// After the business write of `n` under `me`'s lease (taken just now): the issued
    /// number (left pending), `None` to go on with the next number, or the error.
    async fn after_write<T>(
        &self,
        turn: &mut Turn,
        wrote: Wrote<T>,
        n: i64,
        me: ObjectId,
        skipped: &mut u32,
    ) -> Result<Option<Issued<T>>> {
        let inner = &self.inner;
        match wrote {
            Wrote::Ok(value) => {
                turn.inflight.clear();
                let held = Held {
                    holder: me,
                    next: n,
                    last: n,
                    since: Instant::now(),
                };
                Ok(Some(self.leave_pending(turn, held, value, *skipped)))
            }
            Wrote::Duplicate(f) => match inner.lookup(n, true).await? {
                Found::Committed(last) => {
                    let to = last.checked_add(1).ok_or_else(|| inner.exhausted(last))?;
                    turn.settle(Owed::Settle {
                        holder: me,
                        number: n,
                        to,
                    })
                    .await;
                    inner.counters.retries.fetch_add(1, Relaxed);
                    *skipped = skipped.saturating_add(run_length(n, last));
                    Ok(None)
                }
                Found::Uncommitted => {
                    // Written on the primary, not yet by a majority (a stalled holder's write
                    // in flight): neither ours nor safe to move past. Let go and look again.
                    turn.settle(Owed::Settle {
                        holder: me,
                        number: n,
                        to: n,
                    })
                    .await;
                    inner.counters.waits.fetch_add(1, Relaxed);
                    tokio::time::sleep(jitter(4)).await;
                    Ok(None)
                }
                Found::Nothing => {
                    // A duplicate on another unique index of the business collection.
                    turn.settle(Owed::Settle {
                        holder: me,
                        number: n,
                        to: n,
                    })
                    .await;
                    Err(self.business_error(n, f))
                }
            },
            Wrote::Failed(f) => {
                turn.settle(Owed::Settle {
                    holder: me,
                    number: n,
                    to: n,
                })
                .await;
                Err(self.business_error(n, f))
            }
        }
    }

    /// After a duplicate key on `n`, written without holding `n`'s lease: `Ok(Ok(()))` to go
    /// on (another document carries `n` — the next lease finds it and moves past it — or one
    /// not yet committed by a majority: after a pause), `Ok(Err(()))` when nothing carries it
    /// (the duplicate is on another unique index: the business write's own failure).
    async fn taken_by_another(&self, n: i64) -> Result<std::result::Result<(), ()>> {
        match self.inner.lookup(n, true).await? {
            Found::Committed(_) => {
                self.inner.counters.retries.fetch_add(1, Relaxed);
                Ok(Ok(()))
            }
            Found::Uncommitted => {
                self.inner.counters.waits.fetch_add(1, Relaxed);
                tokio::time::sleep(jitter(4)).await;
                Ok(Ok(()))
            }
            Found::Nothing => Ok(Err(())),
        }
    }

    /// Keeps `held` for the next call (or the flusher) to confirm, and returns the number.
    fn leave_pending<T>(&self, turn: &mut Turn, held: Held, value: T, skipped: u32) -> Issued<T> {
        turn.baton.pending = Some(held);
        arm_flusher(&self.inner, &mut turn.baton);
        self.issued(held.last, value, skipped)
    }

    fn issued<T>(&self, number: i64, value: T, skipped: u32) -> Issued<T> {
        self.inner.counters.issued.fetch_add(1, Relaxed);
        Issued {
            number,
            value,
            skipped,
        }
    }

    fn business_error(&self, number: i64, f: Failure) -> Error {
        Error::BusinessWrite {
            name: self.inner.name.clone(),
            number,
            reason: f.reason,
            source: f.source,
            written: f.written,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    fn driver_write_error(code: i32) -> mongodb::error::Error {
        use mongodb::error::{ErrorKind, WriteError, WriteFailure};
        let w: WriteError = bson::from_document(bson::doc! { "code": code }).unwrap();
        ErrorKind::Write(WriteFailure::WriteError(w)).into()
    }

    fn cut() -> mongodb::error::Error {
        std::io::Error::from(std::io::ErrorKind::ConnectionReset).into()
    }

    async fn wrote(e: BoxError) -> (bool, Written) {
        let mut e = Some(e);
        match run(
            &mut |_| std::future::ready(Err::<(), _>(e.take().unwrap())),
            7,
        )
        .await
        {
            Wrote::Ok(()) => unreachable!("the write failed"),
            Wrote::Duplicate(f) => (true, f.written),
            Wrote::Failed(f) => (false, f.written),
        }
    }

    /// A business write's failure says whether the write may have landed: a connection
    /// cut, a timeout the closure put on its write, or our own error of unknown outcome may
    /// have; a refusal (duplicate key, any other write error), a plain error or a panic did
    /// not. A duplicate key is told apart (the number may be used already) and is never
    /// "unknown" (found by cargo-mutants: the local server loses no reply, so no
    /// integration test met these).
    #[tokio::test]
    async fn a_failed_business_write_says_whether_it_may_have_landed() {
        let elapsed = tokio::time::timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .unwrap_err();
        let unknown = Error::Database {
            context: "writing".into(),
            source: cut(),
            written: Written::Unknown,
        };
        let refused = Error::InvalidArgument {
            what: "x".into(),
            reason: "y".into(),
        };
        let cases: Vec<(&str, BoxError, (bool, Written))> = vec![
            ("cut", cut().into(), (false, Written::Unknown)),
            (
                "duplicate",
                driver_write_error(11000).into(),
                (true, Written::Nothing),
            ),
            (
                "refused",
                driver_write_error(121).into(),
                (false, Written::Nothing),
            ),
            ("elapsed", elapsed.into(), (false, Written::Unknown)),
            ("ours unknown", unknown.into(), (false, Written::Unknown)),
            ("ours refused", refused.into(), (false, Written::Nothing)),
            ("plain", "no".into(), (false, Written::Nothing)),
        ];
        for (what, e, want) in cases {
            assert_eq!(wrote(e).await, want, "{what}");
        }
        let panicked = run(
            &mut |_| async { panic!("boom") as std::result::Result<(), BoxError> },
            7,
        )
        .await;
        assert!(
            matches!(&panicked, Wrote::Failed(f) if f.written == Written::Nothing && f.reason.contains("boom")),
            "a panic is a definite failure"
        );
    }

    /// A burst renews its lease after [`RUN`] numbers, or once the lease is [`RENEW`] old
    /// (a quarter of a lease shorter than 4 × `RENEW`), whichever comes first — not at every
    /// number, and not never (issue 53: mutants of this condition survived; a burst that never
    /// renewed could outlive its lease, one that renewed at every number doubled the writes).
    #[test]
    fn a_burst_renews_its_lease_after_its_run_or_a_quarter_of_its_lease() {
        let since = Instant::now();
        let held = Held {
            holder: ObjectId::new(),
            next: 1000,
            last: 1000,
            since,
        };
        let long = Duration::from_secs(10);
        let young = since + RENEW - Duration::from_micros(1);
        // Within the run, young: no state write.
        for n in [1001, 1015, 1000 + RUN - 1] {
            assert!(under_lease(&held, n, since, long), "{n}");
            assert!(under_lease(&held, n, young, long), "{n}");
        }
        // The run is full, or the lease is old: renew.
        assert!(!under_lease(&held, 1000 + RUN, since, long));
        assert!(!under_lease(&held, 1000 + RUN + 5, since, long));
        assert!(!under_lease(&held, 1001, since + RENEW, long));
        assert!(!under_lease(&held, 1001, since + long, long));
        // A lease shorter than 4 × RENEW is renewed after a quarter of it.
        let short = RENEW * 2;
        assert!(under_lease(
            &held,
            1001,
            since + short / 4 - Duration::from_micros(1),
            short
        ));
        assert!(!under_lease(&held, 1001, since + short / 4, short));
        // A clock read before the lease was taken is not a negative age.
        assert!(under_lease(
            &held,
            1001,
            since.checked_sub(Duration::from_millis(1)).unwrap_or(since),
            long
        ));
    }

    /// The pause between polls of a lease is 1 ms plus up to `2^min(attempt, 4)` ms, and
    /// spread: callers polling together do not wake together (found by cargo-mutants: a
    /// jitter of zero, or out of its bounds, went unnoticed by the unit tests).
    #[test]
    fn the_pause_between_polls_is_bounded_and_spread() {
        for attempt in 0..8_u32 {
            let cap = Duration::from_millis(1 << attempt.min(4));
            let mut seen = std::collections::HashSet::new();
            for _ in 0..64 {
                let d = jitter(attempt);
                assert!(d >= Duration::from_millis(1), "{attempt}: {d:?}");
                assert!(d < Duration::from_millis(1) + cap, "{attempt}: {d:?}");
                seen.insert(d);
            }
            assert!(
                seen.len() > 8,
                "{attempt}: only {} distinct pauses",
                seen.len()
            );
            // Spread over the whole bound, not a corner of it: some pause lies in its upper
            // half (64 draws all in the lower half: one chance in 2^64).
            assert!(
                seen.iter()
                    .any(|d| *d >= Duration::from_millis(1) + cap / 2),
                "{attempt}: no pause in the upper half of 1 ms + {cap:?}: {seen:?}"
            );
        }
    }

    /// A business write that panics is reported with its message, whatever its type.
    #[test]
    fn a_panic_is_reported_with_its_message() {
        let text: Box<dyn Any + Send> = Box::new("no paper");
        assert_eq!(panic_message(&text), "it panicked: no paper");
        let owned: Box<dyn Any + Send> = Box::new(String::from("printer on fire"));
        assert_eq!(panic_message(&owned), "it panicked: printer on fire");
        let other: Box<dyn Any + Send> = Box::new(42_u8);
        assert_eq!(panic_message(&other), "it panicked");
    }
}
