//! Coalesced queue operations: concurrent takes, calls and the other actions on one
//! [`Queue`](super::Queue) handle (and its clones) share one compare-and-set of the queue
//! document.
//!
//! The shape is that of coalesced draws (`crate::coalesce`): while a write is in flight, new
//! callers line up; when it returns, the line is served in **one** write. The operations of a
//! batch are applied one after another, in arrival order, to the state read (each to the state
//! the ones before it left), and the last state is written with one compare-and-set pinned to
//! the state read. So:
//!
//! * **Real-time order.** Every answer is fixed by the write of its own batch, made during its
//!   caller's call, and one batch is in flight per handle: an operation that returned before
//!   another began holds the smaller serial (and the smaller version). Inside a batch every
//!   caller was waiting at once; they are served in arrival order.
//! * **Each caller its own answer**: the ticket its operation took or called, the counters and
//!   the version as of its operation (every operation moves the version by one, so a batch of
//!   `k` moves it by `k`). A family is applied as one take: its tickets are consecutive.
//! * **Request ids** are checked by each take against the state the operations before it left:
//!   two callers with one id in one batch make one take (the second answers it, `replayed`),
//!   and an id that left the ring is looked up in the request collection once per batch.
//! * **Refusals** (full, nobody waiting, not waiting, …) concern only their caller: a take that
//!   does not fit is refused, and the others of the batch are still served. A refusal or a
//!   replay is answered only after the batch's write was acknowledged, or from a fresh read
//!   when the batch writes nothing: never from the handle's memory alone.
//! * **A failed write** (unknown outcome) fails every caller of its batch with its error; it is
//!   never retried as a fresh one. A lost race (another handle or process wrote first) reads
//!   again and retries the whole batch, backing off, until the operation timeout (counted from
//!   the batch's oldest caller): under a crowd a caller waits its turn, it does not give up after
//!   a number of lost races.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::oneshot;

use super::state::{Done, Key, Named, Op, RequestId, State, Step, Target};
use super::{Inner, what};
use crate::error::{Error, Result};
use crate::retry::RetryBudget;

/// What an operation answers: the state after it, what it did, and the time it was done at.
pub(crate) type Answer = Result<(Arc<State>, Done, i64)>;

/// The most operations one write carries; the others wait for the next one, in order.
const MAX_BATCH: usize = 1024;

/// A caller waiting for its operation.
struct Waiter {
    op: Op,
    /// When the caller began (its timeout counts from there).
    since: Instant,
    tx: oneshot::Sender<Answer>,
    /// Who it is: a caller whose time runs out while it waits in line takes itself out by it.
    id: Arc<()>,
}

#[derive(Default)]
struct Line {
    /// A batch is in flight (inline by a caller or by the draining task).
    busy: bool,
    waiting: VecDeque<Waiter>,
}

/// The line of one queue handle and its clones.
#[derive(Default)]
pub(crate) struct Combiner {
    line: Mutex<Line>,
}

impl Combiner {
    fn lock(&self) -> MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs `op`, sharing the write with the concurrent operations of the same handle.
pub(crate) async fn act(inner: &Arc<Inner>, op: Op) -> Answer {
    let since = Instant::now();
    // A caller's time counts from its call, in line or not (as a draw's: `coalesce`).
    let timeout = inner.dispenser.options().operation_timeout;
    let deadline = tokio::time::Instant::from_std(since) + timeout;
    let id = Arc::new(());
    let what_op = what(&op);
    let rx = {
        let mut line = inner.combiner.lock();
        if line.busy {
            let (tx, rx) = oneshot::channel();
            line.waiting.push_back(Waiter {
                op,
                since,
                tx,
                id: id.clone(),
            });
            Ok(rx)
        } else {
            line.busy = true;
            Err(op)
        }
    };
    match rx {
        Ok(rx) => match tokio::time::timeout_at(deadline, rx).await {
            Ok(answer) => answer.unwrap_or_else(|_| {
                // The draining task ended without answering: only if the runtime shut down.
                Err(Error::Closed {
                    name: inner.name.clone(),
                })
            }),
            Err(_) => {
                // Out of line if its write was not sent yet (nothing written); else that
                // write's outcome is unknown.
                let mut line = inner.combiner.lock();
                let before = line.waiting.len();
                line.waiting.retain(|w| !Arc::ptr_eq(&w.id, &id));
                let left = if line.waiting.len() < before {
                    crate::error::Aftermath::Lined
                } else {
                    crate::error::Aftermath::Queue
                };
                Err(Error::timeout(
                    format!("{what_op} queue {:?}", inner.name),
                    timeout,
                    left,
                ))
            }
        },
        Err(op) => {
            // Nothing in flight: run it inline. The guard hands the line on even if this
            // future is dropped part way.
            let _handoff = Handoff(inner.clone());
            let mut answers = run(inner, std::slice::from_ref(&op), since).await;
            answers.pop().unwrap_or_else(|| {
                Err(Error::Closed {
                    name: inner.name.clone(),
                })
            })
        }
    }
}

/// When the inline caller finishes (or is dropped): serve whoever lined up meanwhile.
struct Handoff(Arc<Inner>);

impl Drop for Handoff {
    fn drop(&mut self) {
        let mut line = self.0.combiner.lock();
        if line.waiting.is_empty() {
            line.busy = false;
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                drop(line);
                // `busy` stays set: the task owns the line until it is empty.
                rt.spawn(drain(self.0.clone()));
            }
            Err(_) => {
                // No runtime to serve them on (only when one is shutting down).
                line.busy = false;
                let name = self.0.name.clone();
                for w in line.waiting.drain(..) {
                    let _ = w.tx.send(Err(Error::Closed { name: name.clone() }));
                }
            }
        }
    }
}

/// Serves the line, one write per batch, until it is empty.
async fn drain(inner: Arc<Inner>) {
    loop {
        let batch: Vec<Waiter> = {
            let mut line = inner.combiner.lock();
            // Callers that gave up while lined up change nothing.
            line.waiting.retain(|w| !w.tx.is_closed());
            if line.waiting.is_empty() {
                line.busy = false;
                return;
            }
            let n = line.waiting.len().min(MAX_BATCH);
            line.waiting.drain(..n).collect()
        };
        let since = batch
            .iter()
            .map(|w| w.since)
            .min()
            .unwrap_or_else(Instant::now);
        let (ops, txs): (Vec<Op>, Vec<_>) = batch.into_iter().map(|w| (w.op, w.tx)).unzip();
        let sent = Instant::now();
        let answers = run(&inner, &ops, since).await;
        let round_trip = sent.elapsed();
        for (tx, answer) in txs.into_iter().zip(answers) {
            // A caller that gave up meanwhile: what its operation did stands.
            let _ = tx.send(answer);
        }
        crate::coalesce::linger_while(
            || inner.combiner.lock().waiting.len(),
            ops.len(),
            round_trip,
            MAX_BATCH,
        )
        .await;
    }
}

/// One answer per operation of `ops`, in order: each its own, or every one the batch's error.
async fn run(inner: &Inner, ops: &[Op], since: Instant) -> Vec<Answer> {
    match batch(inner, ops, since).await {
        Ok(answers) => answers,
        Err(e) => ops.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// The request id an operation names a take by: a take's own, or a give-up's.
fn request_id(op: &Op) -> Option<&RequestId> {
    match op {
        Op::Take { key: Some(id), .. }
        | Op::Cancel {
            target: Target::Take(id),
        } => Some(id),
        _ => None,
    }
}

/// What a batch's write is doing, for its errors.
fn what_batch(ops: &[Op]) -> &'static str {
    let takes = ops.iter().all(|o| matches!(o, Op::Take { .. }));
    let calls = ops.iter().all(|o| matches!(o, Op::Call { .. }));
    let either = ops
        .iter()
        .all(|o| matches!(o, Op::Take { .. } | Op::Call { .. }));
    match ops {
        [op] => what(op),
        _ if takes => "taking tickets of",
        _ if calls => "calling tickets of",
        _ if either => "taking and calling tickets of",
        _ => "writing a line of operations of",
    }
}

/// The batch `ops`: computed from the remembered state first, written with one
/// compare-and-set; a lost race (or an answer the remembered state alone would give) reads
/// again. An error of the read or of the write (or the timeout spent on lost races) is the
/// whole batch's.
async fn batch(inner: &Inner, ops: &[Op], since: Instant) -> Result<Vec<Answer>> {
    let timeout = inner.dispenser.options().operation_timeout;
    let mut budget = RetryBudget::until(&inner.backoff, since, timeout);
    let mut guess = Some(inner.remembered());
    // For each operation, the number of spills at which the request collection was asked
    // about its id: that answer holds for a state as long as no more ids moved out (which
    // changes `spilled` and the version, so the compare-and-set fails and it is asked again).
    let mut asked: Vec<Option<i64>> = vec![None; ops.len()];
    'attempt: loop {
        let from_memory = guess.is_some();
        let base = Arc::new(match guess.take() {
            Some(s) => s,
            None => inner.read().await?,
        });
        let now = inner.now().await?;
        // Takes whose request id may have left the ring: asked once per id and batch.
        let mut found: Vec<(&RequestId, Key)> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let Some(id) = request_id(op) else {
                continue;
            };
            let earlier = ops[..i].iter().any(|o| request_id(o) == Some(id));
            if earlier
                || !base.may_have_spilled(id)
                || asked[i] == Some(base.spilled)
                || base.find_key(id, now).is_some()
            {
                continue;
            }
            match inner
                .store
                .find_request(&inner.name, base.incarnation, id, now)
                .await?
            {
                // Answered only from a fresh read (the queue may have been deleted and
                // created again since the remembered state).
                Some(_) if from_memory => continue 'attempt,
                Some(k) => found.push((id, k)),
                None => asked[i] = Some(base.spilled),
            }
        }
        let mut state = base.clone();
        let mut answers = Vec::with_capacity(ops.len());
        let mut spill = Vec::new();
        for op in ops {
            let spilled = request_id(op).and_then(|id| found.iter().find(|(f, _)| *f == id));
            let moved;
            let op = match (op, spilled) {
                (
                    Op::Take {
                        count,
                        key: Some(id),
                    },
                    Some((_, k)),
                ) => {
                    let answer = State::replay(k, id, *count)
                        .map(|done| (state.clone(), done, now))
                        .map_err(|r| r.into_error(&inner.name, &state));
                    answers.push(answer);
                    continue;
                }
                // A give-up of a take whose request id left the ring: its ticket, by serial.
                (
                    Op::Cancel {
                        target: Target::Take(id),
                    },
                    Some((_, k)),
                ) => match State::taken_by(k, id) {
                    Ok(serial) => {
                        moved = Op::Cancel {
                            target: Target::Ticket(Named {
                                serial,
                                incarnation: Some(base.incarnation),
                            }),
                        };
                        &moved
                    }
                    Err(r) => {
                        answers.push(Err(r.into_error(&inner.name, &state)));
                        continue;
                    }
                },
                _ => op,
            };
            match state.apply(op, now) {
                Ok(Step::Write(next, done, out)) => {
                    spill.extend(out);
                    state = Arc::from(next);
                    answers.push(Ok((state.clone(), done, now)));
                }
                Ok(Step::Answer(done)) => answers.push(Ok((state.clone(), done, now))),
                Err(refusal) => answers.push(Err(refusal.into_error(&inner.name, &state))),
            }
        }
        if Arc::ptr_eq(&state, &base) {
            // Nothing to write: only a fresh read may refuse or answer.
            if from_memory {
                continue;
            }
            return Ok(answers);
        }
        budget.attempted();
        if !spill.is_empty() {
            inner
                .store
                .spill(&inner.name, base.incarnation, &spill)
                .await?;
        }
        if inner
            .store
            .replace(&inner.name, &base, &state, what_batch(ops))
            .await?
        {
            inner.remember(&state, false);
            return Ok(answers);
        }
        if from_memory {
            // The remembered state was stale: read, no back-off yet.
            continue;
        }
        let delay = budget.after_conflict(&inner.name)?;
        tracing::debug!(queue = %inner.name, version = base.version, batch = ops.len(), ?delay, "lost the compare-and-set race; backing off");
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take() -> Op {
        Op::Take {
            count: 1,
            key: None,
        }
    }

    fn call() -> Op {
        Op::Call {
            desk: String::new(),
            ticket: None,
        }
    }

    fn set_max() -> Op {
        Op::SetMax { max: 9 }
    }

    /// A batch's errors say what it was doing: one operation as itself, then takes, calls,
    /// both, or any line (found by cargo-mutants: no test read a batch's words).
    #[test]
    fn a_batch_says_what_its_write_was_doing() {
        assert_eq!(what_batch(&[take()]), "taking a ticket of");
        assert_eq!(what_batch(&[call()]), "calling the next ticket of");
        assert_eq!(what_batch(&[take(), take()]), "taking tickets of");
        assert_eq!(what_batch(&[call(), call()]), "calling tickets of");
        assert_eq!(
            what_batch(&[take(), call()]),
            "taking and calling tickets of"
        );
        assert_eq!(
            what_batch(&[call(), take(), take()]),
            "taking and calling tickets of"
        );
        assert_eq!(
            what_batch(&[take(), set_max()]),
            "writing a line of operations of"
        );
        assert_eq!(
            what_batch(&[set_max(), set_max()]),
            "writing a line of operations of"
        );
    }
}
