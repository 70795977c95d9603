//! Where numbers are retried: the two strategies that turn a request for `n` numbers into
//! writes on the sequence document.
//!
//! * The **conditional increment** is one `findAndModify` whose filter admits only values from
//!   which `n` numbers fit before the bound ([`arith::increment_window`]); it never retries. When
//!   it does not match (a wrap, the bound, a changed document) the compare-and-set decides.
//! * The **compare-and-set** is the loop of the source documents: take a state (the remembered
//!   one when optimistic, a fresh read when pessimistic), compute the draw, write it filtered
//!   on `version`; the first writer wins and every loser re-reads, backs off and tries again.
//!
//! Exhaustion is only ever reported from a fresh read, never from the remembered state.

use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;

use crate::arith::{self, Run};
use crate::document::Stored;
use crate::error::{Error, Result};
use crate::options::{CasMode, Strategy};
use crate::retry::{Backoff, RetryBudget};
use crate::stats::{Counters, add, bump};
use crate::store::{ShapeChange, Stamp, Store};

/// In adaptive mode, how often a pessimistic caller tries optimism again.
const PROBE_EVERY: u32 = 16;
/// Weight of the newest outcome in the loss-rate average.
const LOSS_WEIGHT: f64 = 0.2;
/// Optimistic costs 1 round trip when it wins and 3 when it loses (1 + 2p on average);
/// pessimistic costs 2. Above this loss rate pessimism is cheaper.
const LOSS_THRESHOLD: f64 = 0.5;

/// The adaptive choice between optimistic and pessimistic writes.
#[derive(Debug)]
pub(crate) struct Adaptive {
    mode: CasMode,
    loss_rate: f64,
    calls_since_probe: u32,
}

impl Adaptive {
    pub(crate) fn new(mode: CasMode) -> Self {
        Adaptive {
            mode,
            loss_rate: 0.0,
            calls_since_probe: 0,
        }
    }

    /// Whether this call starts optimistically.
    fn choose_optimistic(&mut self) -> bool {
        match self.mode {
            CasMode::Optimistic => true,
            CasMode::Pessimistic => false,
            _ => {
                if self.loss_rate <= LOSS_THRESHOLD {
                    return true;
                }
                self.calls_since_probe += 1;
                if self.calls_since_probe >= PROBE_EVERY {
                    self.calls_since_probe = 0;
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
    /// The queue of coalesced callers.
    pub combiner: crate::coalesce::Combiner,
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
            .ok_or_else(|| Error::NoSuchSequence {
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
        let (run, _) = self.draw_versioned(n).await?;
        add(&self.stats.issued, run.count());
        Ok(run)
    }

    /// Like [`Drawer::draw`], but also returns the document's version and incarnation as
    /// written by the write that reserved the run (the block allocator needs them to give a
    /// tail back), and does not count the run as issued (a block is reserved, not yet handed
    /// out).
    pub(crate) async fn draw_versioned(&self, n: u64) -> Result<(Run, Stamp)> {
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
            Strategy::Cas => self.compare_and_set(n).await,
            _ => match self.increment(n).await? {
                Some(drawn) => Ok(drawn),
                None => {
                    bump(&self.stats.fallbacks);
                    tracing::debug!(
                        sequence = %self.name,
                        n,
                        "the conditional increment did not match (bound, wrap or changed document): the compare-and-set decides"
                    );
                    self.compare_and_set(n).await
                }
            },
        }
    }

    /// The one-round-trip path: the run and the version written. `None` when the filter did
    /// not match.
    async fn increment(&self, n: u64) -> Result<Option<(Run, Stamp)>> {
        let known = self.remembered();
        let spec = known.spec;
        let Some(window) = arith::increment_window(&spec, n) else {
            return Ok(None);
        };
        let Ok(delta) = i64::try_from(i128::from(n) * i128::from(spec.step)) else {
            return Ok(None);
        };
        bump(&self.stats.round_trips);
        bump(&self.stats.writes);
        let Some((value, stamp)) = self
            .store
            .increment(&self.name, &spec, window, delta, n)
            .await?
        else {
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

    /// First writer wins, with backoff between lost races. Returns the run and the version
    /// written.
    async fn compare_and_set(&self, n: u64) -> Result<(Run, Stamp)> {
        let optimistic_first = self
            .adaptive
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .choose_optimistic();
        let (run, stamp) = self
            .update(optimistic_first, |stored, from_memory| {
                match arith::draw(&stored.spec, stored.value, n) {
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

    /// The compare-and-set loop — the only one in the crate; draws and admin writes
    /// (`reset`, `advance_to`) both run it. Takes a state (the remembered one first when
    /// `optimistic_first`, else a fresh read), asks `decide` what to do with it, and writes
    /// the new value filtered on that exact state; a lost race re-reads, backs off and tries
    /// again within the retry budget. Returns `decide`'s value and the stamp written (`None`
    /// when `decide` chose not to write).
    pub(crate) async fn update<T>(
        &self,
        optimistic_first: bool,
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
            bump(&self.stats.round_trips);
            bump(&self.stats.writes);
            let (counter, mode) = if from_memory {
                (&self.stats.optimistic_writes, 1)
            } else {
                (&self.stats.pessimistic_writes, 2)
            };
            bump(counter);
            self.stats.last_mode.store(mode, Relaxed);
            let won = self
                .store
                .compare_and_set(&self.name, &stored, value, wrapped, shape.as_ref(), issued)
                .await?;
            if from_memory {
                self.adaptive
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .record_optimistic(won.is_some());
            }
            if let Some(stamp) = won {
                self.remember(
                    Stored {
                        value,
                        version: stamp.version,
                        cycles: stored.cycles + i64::from(wrapped),
                        incarnation: stamp.incarnation,
                        spec: shape.as_ref().map_or(stored.spec, |c| c.spec),
                        ..stored
                    },
                    false,
                );
                return Ok((then, Some(stamp)));
            }
            bump(&self.stats.conflicts);
            let delay = budget.after_conflict(&self.name)?;
            tracing::debug!(sequence = %self.name, version = stored.version, ?delay, optimistic = from_memory, "lost the compare-and-set race; backing off");
            bump(&self.stats.retries);
            tokio::time::sleep(delay).await;
        }
    }
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
        let mut a = Adaptive::new(CasMode::Adaptive);
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
    fn fixed_modes_stay_fixed() {
        let mut o = Adaptive::new(CasMode::Optimistic);
        let mut p = Adaptive::new(CasMode::Pessimistic);
        for _ in 0..20 {
            o.record_optimistic(false);
            assert!(o.choose_optimistic());
            assert!(!p.choose_optimistic());
        }
    }
}
