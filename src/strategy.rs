//! Where numbers are retried: the two strategies that turn a request for `n` numbers into
//! writes on the sequence document.
//!
//! * The **conditional increment** is one `findAndModify` whose filter admits only values from
//!   which `n` numbers fit before the bound ([`arith::increment_window`]); it never retries. When
//!   it does not match (a wrap, the bound, a changed document) the compare-and-set decides.
//!   While the handle writes alone (its pinned writes win, see [`Adaptive`]) it first tries a
//!   pinned write from the state its last write left — an `update` that needs no document
//!   back, cheaper for the server than the `findAndModify` — and takes the increment only when
//!   that loses.
//! * The **compare-and-set** is the loop of the source documents: take a state (the remembered
//!   one when optimistic, a fresh read when pessimistic), compute the draw, write it filtered
//!   on `version`; the first writer wins and every loser backs off and tries again. A draw's
//!   retry is the conditional increment when its numbers fit before the bound (so a loser
//!   cannot lose again to a writer that keeps writing from its remembered state: fairness);
//!   otherwise, and for admin writes, it re-reads and compares-and-sets.
//!
//! Exhaustion is only ever reported from a fresh read, never from the remembered state.

use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;

use crate::arith::{self, Run};
use crate::document::Stamp;
use crate::document::Stored;
use crate::error::{Error, Result};
use crate::options::{CasMode, Strategy};
use crate::retry::{Backoff, RetryBudget};
use crate::stats::{Counters, add, bump};
use crate::store::{ShapeChange, Store};
use crate::usage;

/// In adaptive mode, how often a pessimistic caller tries optimism again: every 16 calls at
/// first, twice as seldom after each probe that lost, up to every 256 calls (a probe that
/// loses costs a round trip), and every 16 again after a win.
const PROBE_EVERY: u32 = 16;
const PROBE_EVERY_MAX: u32 = 256;
/// Weight of the newest outcome in the loss-rate average.
const LOSS_WEIGHT: f64 = 0.2;
/// Compare-and-set: optimistic costs 1 round trip when it wins and 3 when it loses (1 + 2p
/// on average); pessimistic costs 2. Above this loss rate pessimism is cheaper.
const LOSS_THRESHOLD: f64 = 0.5;
/// Conditional increment: the pinned write first costs one (cheaper) round trip when it wins
/// and two when it loses; the increment alone costs one. Above this loss rate the increment
/// alone is cheaper.
const INCREMENT_LOSS_THRESHOLD: f64 = 0.1;

/// The adaptive choice between a write from the remembered state (optimistic) and one that
/// does not need it (a fresh read for the compare-and-set; the conditional increment).
#[derive(Debug)]
pub(crate) struct Adaptive {
    mode: CasMode,
    threshold: f64,
    loss_rate: f64,
    calls_since_probe: u32,
    probe_every: u32,
    /// The latest choice was a probe.
    probing: bool,
}

impl Adaptive {
    pub(crate) fn new(mode: CasMode, strategy: Strategy) -> Self {
        Adaptive {
            mode,
            threshold: match strategy {
                Strategy::Cas => LOSS_THRESHOLD,
                _ => INCREMENT_LOSS_THRESHOLD,
            },
            loss_rate: 0.0,
            calls_since_probe: 0,
            probe_every: PROBE_EVERY,
            probing: false,
        }
    }

    /// Whether this call starts optimistically.
    fn choose_optimistic(&mut self) -> bool {
        match self.mode {
            CasMode::Optimistic => true,
            CasMode::Pessimistic => false,
            _ => {
                if self.loss_rate <= self.threshold {
                    return true;
                }
                self.calls_since_probe += 1;
                if self.calls_since_probe >= self.probe_every {
                    self.calls_since_probe = 0;
                    self.probing = true;
                    true
                } else {
                    false
                }
            }
        }
    }

    /// Records whether an optimistic write won.
    fn record_optimistic(&mut self, won: bool) {
        let lost = if won { 0.0 } else { 1.0 };
        self.loss_rate = (1.0 - LOSS_WEIGHT) * self.loss_rate + LOSS_WEIGHT * lost;
        if won {
            self.probe_every = PROBE_EVERY;
        } else if self.probing {
            self.probe_every = (self.probe_every * 2).min(PROBE_EVERY_MAX);
        }
        self.probing = false;
    }
}

/// Everything a strategy needs about one sequence handle.
pub(crate) struct Drawer {
    pub name: String,
    pub store: Store,
    pub strategy: Strategy,
    pub backoff: Backoff,
    /// The state after this handle's last write or read: the optimistic guess.
    pub remembered: Mutex<Stored>,
    pub adaptive: Mutex<Adaptive>,
    pub stats: Counters,
    /// Whether `Sequence` calls go through the combiner.
    pub coalesce: bool,
    /// Whether a draw that lost a compare-and-set race retries with the conditional increment.
    pub increment_retry: bool,
    /// Numbers issued by this handle that the document's counters do not show yet.
    pub usage: Mutex<usage::Pending>,
}

/// A handle going away adds its pending count in a write of its own, on the runtime it was
/// dropped in (if any; without one the count is lost: it is statistics, not numbers). The
/// write is left running and kept in [`LEFT_RUNNING`], so that a program can wait for it
/// before its runtime shuts down ([`Dispenser::flush`](crate::Dispenser::flush)).
impl Drop for Drawer {
    fn drop(&mut self) {
        let Some((incarnation, n)) = self.take_pending() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, name) = (self.store.clone(), std::mem::take(&mut self.name));
        let task = runtime.spawn(async move {
            if let Err(e) = store.add_usage(&name, incarnation, n).await {
                tracing::debug!(sequence = %name, n, error = %e, "could not add a closed handle's issued count");
            }
        });
        let mut left = LEFT_RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        left.retain(|t| !t.is_finished());
        left.push(task);
    }
}

/// The usage writes of dropped handles still running, in this process. A runtime that shuts
/// down while one of them waits for the driver makes the driver panic
/// (`JoinError::Cancelled` in its join handle): [`wait_left_running`] lets them finish first.
static LEFT_RUNNING: Mutex<Vec<tokio::task::JoinHandle<()>>> = Mutex::new(Vec::new());

/// Waits for the usage writes dropped handles left running (see [`LEFT_RUNNING`]), at most
/// `timeout`; those still running then are aborted, and waited for until they are gone (an
/// aborted task never runs again, so the runtime's shutdown cannot wake it inside the driver).
pub(crate) async fn wait_left_running(timeout: std::time::Duration) {
    let mut tasks = std::mem::take(&mut *LEFT_RUNNING.lock().unwrap_or_else(|p| p.into_inner()));
    if tasks.is_empty() {
        return;
    }
    let all = futures::future::join_all(tasks.iter_mut());
    if tokio::time::timeout(timeout, all).await.is_ok() {
        return;
    }
    for task in tasks.iter().filter(|t| !t.is_finished()) {
        task.abort();
    }
    for task in tasks.iter_mut().filter(|t| !t.is_finished()) {
        let _ = task.await;
    }
}

impl Drawer {
    fn remembered(&self) -> Stored {
        *self.remembered.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers a state: a fresh read always replaces the guess; a state after our own write
    /// only when it is newer (another task of this handle may have written after us) in the
    /// same incarnation, or gives a document written before incarnations its first one.
    fn remember(&self, s: Stored, fresh_read: bool) {
        let mut r = self.remembered.lock().unwrap_or_else(|p| p.into_inner());
        let newer = if r.incarnation == s.incarnation {
            s.version > r.version
        } else {
            r.incarnation.is_none()
        };
        if fresh_read || newer {
            *r = s;
        }
    }

    fn exhausted(&self, stored: &Stored, requested: u64, remaining: u64) -> Error {
        Error::Exhausted {
            name: self.name.clone(),
            value: stored.value,
            requested,
            remaining,
            min: stored.spec.min,
            max: stored.spec.max,
            step: stored.spec.step,
        }
    }

    async fn read(&self) -> Result<Stored> {
        bump(&self.stats.round_trips);
        let stored = self
            .store
            .load(&self.name)
            .await?
            .ok_or_else(|| Error::NotFound {
                kind: crate::error::Kind::Sequence,
                name: self.name.clone(),
            })?;
        self.remember(stored, true);
        Ok(stored)
    }

    /// The shape of the sequence as last seen by this handle.
    pub(crate) fn spec(&self) -> crate::spec::Spec {
        self.remembered().spec
    }

    /// Draws up to `n` numbers (exactly `n` unless a cyclic run stops at its bound).
    pub(crate) async fn draw(&self, n: u64) -> Result<Run> {
        let (run, _) = self.draw_versioned(n, None).await?;
        add(&self.stats.issued, run.count());
        Ok(run)
    }

    /// Like [`Drawer::draw`], but also returns the document's version and incarnation as
    /// written by the write that reserved the run (the block allocator needs them to give a
    /// tail back), and does not count the run as issued (a block is reserved, not yet handed
    /// out). With `share`, the run holds at most [`arith::block_limit`] numbers of the state
    /// it is written on (a block bounded by what is left).
    pub(crate) async fn draw_versioned(&self, n: u64, share: Option<f64>) -> Result<(Run, Stamp)> {
        if n == 0 {
            return Err(Error::invalid_argument(
                "count",
                format!(
                    "0 numbers requested from sequence {:?}; ask for at least 1",
                    self.name
                ),
            ));
        }
        match self.strategy {
            Strategy::Cas => self.compare_and_set(n, self.increment_retry, share).await,
            _ => {
                if self.choose_optimistic()
                    && let Some(drawn) = self.pinned_draw(n, share).await?
                {
                    return Ok(drawn);
                }
                match self.increment(n, share).await? {
                    Some(drawn) => Ok(drawn),
                    None => {
                        bump(&self.stats.fallbacks);
                        tracing::debug!(
                            sequence = %self.name,
                            n,
                            "the conditional increment did not match (bound, wrap or changed document): the compare-and-set decides"
                        );
                        // The increment just did not match: no increment retry.
                        self.compare_and_set(n, false, share).await
                    }
                }
            }
        }
    }

    fn choose_optimistic(&self) -> bool {
        self.adaptive
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .choose_optimistic()
    }

    fn usage(&self) -> std::sync::MutexGuard<'_, usage::Pending> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before a write that issues `n` numbers: the count it carries (see [`usage::Pending`]).
    fn carry_usage(&self, n: u64) -> Option<i64> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.usage().carry(n, std::time::Instant::now())
    }

    /// The write prepared by [`Drawer::carry_usage`] did not happen.
    fn usage_unsent(&self, n: u64, carried: Option<i64>) {
        self.usage()
            .unsent(i64::try_from(n).unwrap_or(i64::MAX), carried);
    }

    /// The pending count and the incarnation to add it to, taken out of the handle; `None`
    /// when nothing is pending (or the document's incarnation is unknown).
    fn take_pending(&self) -> Option<(bson::oid::ObjectId, i64)> {
        let n = self.usage().take();
        let incarnation = self.remembered().incarnation?;
        (n != 0).then_some((incarnation, n))
    }

    /// Writes this handle's pending count now (a block client closing, a striped handle
    /// closing): one write, only when something is pending.
    pub(crate) async fn flush_usage(&self) -> Result<()> {
        let Some((incarnation, n)) = self.take_pending() else {
            return Ok(());
        };
        bump(&self.stats.round_trips);
        bump(&self.stats.writes);
        self.store.add_usage(&self.name, incarnation, n).await
    }

    /// One compare-and-set of a draw from the remembered state, without retries: the run and
    /// the stamp written, or `None` when the state is not usable (it would wrap past a bound
    /// it cannot judge) or the write lost.
    async fn pinned_draw(&self, n: u64, share: Option<f64>) -> Result<Option<(Run, Stamp)>> {
        let known = self.remembered();
        let n = limited(&known, n, share);
        let Ok(d) = arith::draw(&known.spec, known.value, n) else {
            return Ok(None);
        };
        let won = self
            .attempt(&known, true, d.new_value, d.wrapped, None, d.run.count())
            .await?;
        Ok(won.map(|stamp| (d.run, stamp)))
    }

    /// The one-round-trip path: the run and the version written. `None` when the filter did
    /// not match. With `share`, the filter also requires that the run stays within the block
    /// limit of the state it matches.
    async fn increment(&self, n: u64, share: Option<f64>) -> Result<Option<(Run, Stamp)>> {
        let known = self.remembered();
        let spec = known.spec;
        let (n, left) = match share {
            None => (n, n),
            Some(share) => match arith::limited_increment(&spec, n, share) {
                Some(limited) => limited,
                None => return Ok(None),
            },
        };
        let Some(window) = arith::increment_window(&spec, left) else {
            return Ok(None);
        };
        let Ok(delta) = i64::try_from(i128::from(n) * i128::from(spec.step)) else {
            return Ok(None);
        };
        bump(&self.stats.round_trips);
        bump(&self.stats.writes);
        let carried = self.carry_usage(n);
        let Some((value, stamp)) = self
            .store
            .increment(&self.name, &spec, window, delta, carried)
            .await?
        else {
            self.usage_unsent(n, carried);
            return Ok(None);
        };
        // `value` is the last number of our run; the run starts n - 1 steps before it.
        let first = i128::from(value) - (i128::from(n) - 1) * i128::from(spec.step);
        let first = i64::try_from(first).map_err(|_| {
            Error::corrupt(
                &self.name,
                "value",
                format!("({value}) came back out of range"),
            )
        })?;
        self.remember(
            Stored {
                value,
                version: stamp.version,
                incarnation: stamp.incarnation,
                ..known
            },
            false,
        );
        Ok(Some((Run::new(first, n, spec.step), stamp)))
    }

    /// First writer wins, with backoff between lost races; a lost race is retried with the
    /// conditional increment (once) when `increment_retry`. Returns the run and the version
    /// written.
    async fn compare_and_set(
        &self,
        n: u64,
        increment_retry: bool,
        share: Option<f64>,
    ) -> Result<(Run, Stamp)> {
        let optimistic_first = self.choose_optimistic();
        let retry = increment_retry.then_some(Retry {
            n,
            share,
            then: std::convert::identity,
        });
        let (run, stamp) = self
            .update(optimistic_first, retry, |stored, from_memory| {
                match arith::draw(&stored.spec, stored.value, limited(stored, n, share)) {
                    Ok(d) => Ok(Decision::Write {
                        value: d.new_value,
                        wrapped: d.wrapped,
                        shape: None,
                        issued: d.run.count(),
                        then: d.run,
                    }),
                    // The remembered state may be stale: only a fresh read may say "exhausted".
                    Err(_) if from_memory => Ok(Decision::Reread),
                    Err(short) => Err(self.exhausted(stored, n, short.remaining)),
                }
            })
            .await?;
        // A draw always writes.
        let stamp =
            stamp.ok_or_else(|| Error::corrupt(&self.name, "value", "draw wrote nothing"))?;
        Ok((run, stamp))
    }

    /// One compare-and-set write of `value` filtered on the state `stored`, with its
    /// counters: the stamp written when it won (and the new state remembered), `None` when
    /// another writer came first. `issued`: the numbers the write issues (0 for an admin
    /// write, which always sets `updated_at`).
    async fn attempt(
        &self,
        stored: &Stored,
        from_memory: bool,
        value: i64,
        wrapped: bool,
        shape: Option<&ShapeChange>,
        issued: u64,
    ) -> Result<Option<Stamp>> {
        bump(&self.stats.round_trips);
        bump(&self.stats.writes);
        let (counter, mode) = if from_memory {
            (&self.stats.optimistic_writes, 1)
        } else {
            (&self.stats.pessimistic_writes, 2)
        };
        bump(counter);
        self.stats.last_mode.store(mode, Relaxed);
        let carried = if issued == 0 {
            Some(0)
        } else {
            self.carry_usage(issued)
        };
        let won = self
            .store
            .compare_and_set(&self.name, stored, value, wrapped, shape, carried)
            .await?;
        if from_memory {
            self.adaptive
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .record_optimistic(won.is_some());
        }
        match won {
            Some(stamp) => {
                self.remember(
                    Stored {
                        value,
                        version: stamp.version,
                        cycles: stored.cycles + i64::from(wrapped),
                        incarnation: stamp.incarnation,
                        spec: shape.map_or(stored.spec, |c| c.spec),
                        ..*stored
                    },
                    false,
                );
            }
            None => {
                if issued != 0 {
                    self.usage_unsent(issued, carried);
                }
                bump(&self.stats.conflicts);
            }
        }
        Ok(won)
    }

    /// The compare-and-set loop — the only one in the crate; draws and admin writes
    /// (`reset`, `advance_to`) both run it. Takes a state (the remembered one first when
    /// `optimistic_first`, else a fresh read), asks `decide` what to do with it, and writes
    /// the new value filtered on that exact state; a lost race backs off and tries again
    /// within the retry budget: the first retry with the conditional increment of `retry` (a
    /// draw) when it matches, else by re-reading. Returns `decide`'s value (or `retry`'s) and the stamp
    /// written (`None` when `decide` chose not to write).
    pub(crate) async fn update<T>(
        &self,
        optimistic_first: bool,
        mut retry: Option<Retry<T>>,
        mut decide: impl FnMut(&Stored, bool) -> Result<Decision<T>>,
    ) -> Result<(T, Option<Stamp>)> {
        let mut budget = RetryBudget::new(&self.backoff);
        let mut guess = optimistic_first.then(|| self.remembered());
        loop {
            let from_memory = guess.is_some();
            let stored = match guess.take() {
                Some(s) => s,
                None => self.read().await?,
            };
            let (value, wrapped, shape, issued, then) = match decide(&stored, from_memory)? {
                Decision::Write {
                    value,
                    wrapped,
                    shape,
                    issued,
                    then,
                } => (value, wrapped, shape, issued, then),
                Decision::Done(then) => return Ok((then, None)),
                Decision::Reread => continue,
            };
            budget.attempted();
            let won = self
                .attempt(&stored, from_memory, value, wrapped, shape.as_ref(), issued)
                .await?;
            if let Some(stamp) = won {
                return Ok((then, Some(stamp)));
            }
            // Lost: back off, then try again.
            let delay = budget.after_conflict(&self.name)?;
            tracing::debug!(sequence = %self.name, version = stored.version, ?delay, optimistic = from_memory, "lost the compare-and-set race; backing off");
            bump(&self.stats.retries);
            tokio::time::sleep(delay).await;
            // Once per call: when the increment does not match (a wrap, the bound, a
            // changed shape) it would not match on the next retry either.
            if let Some(r) = retry.take() {
                budget.attempted();
                if let Some((run, stamp)) = self.increment(r.n, r.share).await? {
                    return Ok(((r.then)(run), Some(stamp)));
                }
            }
        }
    }
}

/// How a draw's lost race is retried: the conditional increment of `n` numbers, whose run
/// `then` turns into the loop's result.
pub(crate) struct Retry<T> {
    pub n: u64,
    /// The block limit's share, if any (see [`Drawer::draw_versioned`]).
    pub share: Option<f64>,
    pub then: fn(Run) -> T,
}

/// `n`, or fewer under a block limit of `share` at `stored`.
fn limited(stored: &Stored, n: u64, share: Option<f64>) -> u64 {
    share.map_or(n, |share| {
        n.min(arith::block_limit(&stored.spec, stored.value, share))
    })
}

/// What the compare-and-set loop does with a state (see [`Drawer::update`]).
pub(crate) enum Decision<T> {
    /// Store `value` (`wrapped`: the write wraps a cyclic sequence; `shape`: the write also
    /// changes the shape) and return `then`.
    Write {
        value: i64,
        wrapped: bool,
        shape: Option<ShapeChange>,
        /// Numbers this write issues (counted per day for the usage forecast).
        issued: u64,
        then: T,
    },
    /// Write nothing and return this.
    Done(T),
    /// The state came from memory and cannot be judged: read afresh.
    Reread,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_turns_pessimistic_under_losses_and_probes_back() {
        let mut a = Adaptive::new(CasMode::Adaptive, Strategy::Cas);
        assert!(a.choose_optimistic());
        for _ in 0..10 {
            a.record_optimistic(false);
        }
        let optimistic = (0..PROBE_EVERY).filter(|_| a.choose_optimistic()).count();
        assert_eq!(optimistic, 1, "one probe per {PROBE_EVERY} calls");
        for _ in 0..10 {
            a.record_optimistic(true);
        }
        assert!(a.choose_optimistic());
    }

    #[test]
    fn probes_that_keep_losing_come_less_often_until_one_wins() {
        let mut a = Adaptive::new(CasMode::Adaptive, Strategy::ConditionalIncrement);
        for _ in 0..10 {
            a.record_optimistic(false);
        }
        // Each lost probe doubles the interval: 16, 32, 64, 128, 256, 256.
        let mut gaps = Vec::new();
        for _ in 0..6 {
            let gap = (1..=1000).find(|_| a.choose_optimistic()).unwrap();
            a.record_optimistic(false);
            gaps.push(gap);
        }
        assert_eq!(gaps, [16, 32, 64, 128, 256, 256]);
        // A probe that wins brings the interval back (and lowers the loss rate).
        let gap = (1..=1000).find(|_| a.choose_optimistic()).unwrap();
        assert_eq!(gap, 256);
        a.record_optimistic(true);
        let gap = (1..=1000).find(|_| a.choose_optimistic()).unwrap();
        assert_eq!(gap, 16);
    }

    #[test]
    fn fixed_modes_stay_fixed() {
        let mut o = Adaptive::new(CasMode::Optimistic, Strategy::Cas);
        let mut p = Adaptive::new(CasMode::Pessimistic, Strategy::ConditionalIncrement);
        for _ in 0..20 {
            o.record_optimistic(false);
            assert!(o.choose_optimistic());
            assert!(!p.choose_optimistic());
        }
    }
}
