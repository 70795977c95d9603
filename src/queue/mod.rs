//! Queues: take a ticket, call the next one — and never two people waiting with the same
//! number.
//!
//! A cyclic sequence (tickets 1 … 99, 0, 1 …) is half of a ticket machine: it does not know
//! who is still waiting, so the 101st person to wait gets a number someone waiting holds. A
//! [`Queue`] also counts the tickets called. [`Queue::take`] hands out the next ticket only
//! while fewer tickets wait than the range holds (else [`Error::QueueFull`]);
//! [`Queue::call`] calls the oldest waiting ticket (else [`Error::NobodyWaiting`]);
//! [`Queue::status`] says what is being served and how many wait.
//!
//! How it holds, with single-document writes only:
//!
//! - **One document per queue** (in `<collection>_queues`) with two counters that only grow
//!   — tickets `taken` and `served` since creation — the range and a version. The ticket
//!   shown is derived: the `k`-th ticket taken shows `min + k mod capacity` (see
//!   [`QueueSpec::ticket`]). The tickets waiting are the `taken - served` last ones taken,
//!   consecutive, at most `capacity` of them: no number twice.
//! - **Every take and call is one atomic write** of that document: with the default
//!   [`Strategy::ConditionalIncrement`], one `findAndModify` whose filter admits only a state
//!   where the operation is allowed (`waiting < capacity` for a take, `waiting > 0` for a
//!   call); when it does not match, or with [`Strategy::Cas`], the compare-and-set of the
//!   rest of the crate: read, check, write filtered on the version and incarnation, first
//!   writer wins, losers back off ([`Options::backoff`](crate::Options::backoff)) and try
//!   again. A refusal (full, nobody waiting) is only ever reported from a fresh read. So the
//!   operations are linearizable: each takes effect at its write, in the document's version
//!   order, and calls serve tickets in the order they were taken.
//! - **A ticket is handed out only once its write was acknowledged** with the dispenser's
//!   write concern (majority and journaled by default). A take whose reply is lost (a
//!   network error, a timeout) may still have taken its ticket: that ticket then waits with
//!   no one holding it — a gap, called in its turn with nobody coming — and is never handed
//!   to anyone else. Failed writes are never retried as fresh ones.
//!
//! # Example
//!
//! ```no_run
//! use dispenser::{Dispenser, Options, queue::QueueSpec};
//!
//! # async fn f() -> dispenser::Result<()> {
//! let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
//! let lobby = d.ensure_queue("lobby", QueueSpec::default().with_max(9)).await?; // 1 … 9, 0
//! let mine = lobby.take().await?;
//! println!("your ticket: {}", mine.number);
//! let called = lobby.call().await?; // at the counter
//! println!("now serving {}", called.number);
//! # Ok(()) }
//! ```

mod document;
mod spec;
mod status;
mod store;

use std::sync::{Arc, Mutex};

pub use spec::QueueSpec;
pub use status::{QueueStatus, Ticket};

use crate::dispenser::Dispenser;
use crate::error::{Error, Result};
use crate::options::Strategy;
use crate::retry::{Backoff, RetryBudget};
use document::Stored;
use spec::Op;
use store::QueueStore;

/// Checks a queue name: the rules of a stored sequence name ([`validate_name`]: 1–200 bytes,
/// no control character, not starting with `$`).
///
/// [`validate_name`]: crate::sequence::validate_name
fn check_name(name: &str) -> Result<()> {
    crate::spec::validate_name(name).map_err(|e| match e {
        Error::InvalidName { name, reason } => {
            Error::invalid_argument("queue name", format!("{name:?} {reason}"))
        }
        other => other,
    })
}

fn no_such(name: &str) -> Error {
    Error::NoSuchQueue {
        name: name.to_owned(),
    }
}

impl Dispenser {
    fn queues(&self) -> QueueStore {
        QueueStore::new(self.store())
    }

    /// Creates the queue `name` with the ticket range `spec`, empty.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad name or range (nothing written),
    /// [`Error::QueueExists`] when the name is taken, [`Error::Database`],
    /// [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// One insert: dropped after it was sent, the queue may or may not exist.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::queue::QueueSpec;
    /// let lobby = d.create_queue("lobby", QueueSpec::default().with_max(9)).await?;
    /// assert_eq!(lobby.take().await?.number, 1);
    /// # Ok(()) }
    /// ```
    pub async fn create_queue(&self, name: &str, spec: QueueSpec) -> Result<Queue> {
        check_name(name)?;
        spec.validate(name)?;
        let queues = self.queues();
        match queues.insert(name, &spec).await? {
            Some(incarnation) => Ok(self.queue_handle(name, queues, created(spec, incarnation))),
            None => {
                let stored = queues.load(name).await?.map_or(spec, |s| s.spec);
                Err(Error::QueueExists {
                    name: name.to_owned(),
                    min: stored.min,
                    max: stored.max,
                })
            }
        }
    }

    /// Creates the queue if it does not exist, or opens it if it exists with the same range.
    /// Safe when many processes race: one insert wins, the others read what it wrote.
    ///
    /// # Errors
    ///
    /// [`Error::QueueExists`] when it exists with another range, plus those of
    /// [`Dispenser::create_queue`] and [`Error::CorruptDocument`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: call it again.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::queue::QueueSpec;
    /// let a = d.ensure_queue("lobby", QueueSpec::default()).await?;
    /// let b = d.ensure_queue("lobby", QueueSpec::default()).await?; // the same queue
    /// # Ok(()) }
    /// ```
    pub async fn ensure_queue(&self, name: &str, spec: QueueSpec) -> Result<Queue> {
        check_name(name)?;
        spec.validate(name)?;
        let queues = self.queues();
        if let Some(incarnation) = queues.insert(name, &spec).await? {
            return Ok(self.queue_handle(name, queues, created(spec, incarnation)));
        }
        let stored = queues.load(name).await?.ok_or_else(|| no_such(name))?;
        if stored.spec != spec {
            return Err(Error::QueueExists {
                name: name.to_owned(),
                min: stored.spec.min,
                max: stored.spec.max,
            });
        }
        Ok(self.queue_handle(name, queues, stored))
    }

    /// Opens an existing queue (one read).
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchQueue`], [`Error::InvalidArgument`] (a bad name),
    /// [`Error::CorruptDocument`], [`Error::Database`], [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let lobby = d.open_queue("lobby").await?;
    /// let called = lobby.call().await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_queue(&self, name: &str) -> Result<Queue> {
        check_name(name)?;
        let queues = self.queues();
        let stored = queues.load(name).await?.ok_or_else(|| no_such(name))?;
        Ok(self.queue_handle(name, queues, stored))
    }

    /// Every queue, by name. A document that does not decode is an
    /// [`Error::CorruptDocument`] in its place, so one bad document does not hide the rest.
    ///
    /// # Errors
    ///
    /// [`Error::Database`] or [`Error::Timeout`] when the collection cannot be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// for q in d.list_queues().await? {
    ///     let q = q?;
    ///     println!("{}: {} waiting", q.name, q.waiting);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_queues(&self) -> Result<Vec<Result<QueueStatus>>> {
        self.queues().list().await
    }

    /// Deletes the queue `name`. Handles opened before then fail with
    /// [`Error::NoSuchQueue`]. A queue created again under the name starts from its first
    /// ticket: a ticket held from the old queue may then be handed out again, so delete a
    /// queue only when nobody waits in it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::NoSuchQueue`], [`Error::Database`],
    /// [`Error::Timeout`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// d.delete_queue("lobby").await?;
    /// assert!(d.open_queue("lobby").await.is_err());
    /// # Ok(()) }
    /// ```
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        check_name(name)?;
        if self.queues().delete(name).await? {
            Ok(())
        } else {
            Err(no_such(name))
        }
    }

    fn queue_handle(&self, name: &str, store: QueueStore, stored: Stored) -> Queue {
        Queue {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                store,
                strategy: self.options().strategy,
                backoff: self.options().backoff,
                remembered: Mutex::new(stored),
            }),
        }
    }
}

/// The state of a queue just inserted.
fn created(spec: QueueSpec, incarnation: bson::oid::ObjectId) -> Stored {
    Stored {
        spec,
        counters: spec::Counters {
            taken: 0,
            served: 0,
        },
        version: 0,
        incarnation,
    }
}

/// A handle on one queue: takes and calls tickets. Cheap to clone; any number of tasks may
/// use one handle (or many handles, in many processes) at once.
///
/// Every ticket returned was fixed by a write the server acknowledged with the dispenser's
/// write concern; no two people waiting ever hold the same ticket, and calls serve tickets in
/// the order they were taken.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    store: QueueStore,
    strategy: Strategy,
    backoff: Backoff,
    /// The state after this handle's last write or read: the guess of the compare-and-set.
    remembered: Mutex<Stored>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.inner.name)
            .field("strategy", &self.inner.strategy)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn remembered(&self) -> Stored {
        *self.remembered.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers a state: a fresh read always; a state after our own write only when it is
    /// newer (another task of this handle may have written after us).
    fn remember(&self, s: Stored, fresh_read: bool) {
        let mut r = self.remembered.lock().unwrap_or_else(|p| p.into_inner());
        if fresh_read || r.incarnation != s.incarnation || s.version > r.version {
            *r = s;
        }
    }

    async fn read(&self) -> Result<Stored> {
        let stored = self
            .store
            .load(&self.name)
            .await?
            .ok_or_else(|| no_such(&self.name))?;
        self.remember(stored, true);
        Ok(stored)
    }

    /// The tickets `op` took (in the order they will be called) or called, from the state
    /// after it.
    fn tickets(after: &Stored, op: Op) -> Vec<Ticket> {
        let (last, n) = match op {
            Op::Take(n) => (after.counters.taken, i64::try_from(n).unwrap_or(1)),
            Op::Call => (after.counters.served, 1),
        };
        (last - n + 1..=last)
            .map(|serial| Ticket::new(&after.spec, after.counters, serial))
            .collect()
    }

    /// One take or call: the conditional increment first (unless the strategy is the
    /// compare-and-set), the compare-and-set when it does not match.
    async fn act(&self, op: Op) -> Result<Vec<Ticket>> {
        match self.strategy {
            Strategy::Cas => self.compare_and_set(op, true).await,
            _ => {
                let known = self.remembered();
                match self.store.increment(&self.name, &known.spec, op).await? {
                    Some(after) => {
                        self.remember(after, false);
                        Ok(Self::tickets(&after, op))
                    }
                    // Full, nobody waiting, another range or no such queue: a fresh read
                    // decides (and only a fresh read may refuse).
                    None => self.compare_and_set(op, false).await,
                }
            }
        }
    }

    /// First writer wins: from the remembered state first when `optimistic_first`, else
    /// from a fresh read; a lost race backs off and re-reads, within the retry budget.
    async fn compare_and_set(&self, op: Op, optimistic_first: bool) -> Result<Vec<Ticket>> {
        let mut budget = RetryBudget::new(&self.backoff);
        let mut guess = optimistic_first.then(|| self.remembered());
        loop {
            let from_memory = guess.is_some();
            let stored = match guess.take() {
                Some(s) => s,
                None => self.read().await?,
            };
            let counters = match spec::apply(&stored.spec, stored.counters, op) {
                Ok(c) => c,
                // The remembered state may be stale: only a fresh read may refuse.
                Err(_) if from_memory => continue,
                Err(refusal) => {
                    return Err(refusal.into_error(&self.name, &stored.spec, stored.counters));
                }
            };
            budget.attempted();
            if self.store.compare_and_set(&self.name, &stored, op).await? {
                let after = Stored {
                    counters,
                    version: stored.version + 1,
                    ..stored
                };
                self.remember(after, false);
                return Ok(Self::tickets(&after, op));
            }
            let delay = budget.after_conflict(&self.name)?;
            tracing::debug!(queue = %self.name, version = stored.version, ?delay, "lost the compare-and-set race; backing off");
            tokio::time::sleep(delay).await;
        }
    }
}

impl Queue {
    /// The queue's name.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// assert_eq!(d.open_queue("lobby").await?.name(), "lobby");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The ticket range, as last seen by this handle.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) {
    /// println!("at most {} wait", lobby.spec().capacity());
    /// # }
    /// ```
    pub fn spec(&self) -> QueueSpec {
        self.inner.remembered().spec
    }

    /// Takes the next ticket, if fewer tickets wait than the range holds.
    ///
    /// # Errors
    ///
    /// [`Error::QueueFull`] (nothing written; take again after a call),
    /// [`Error::NoSuchQueue`] (deleted meanwhile), [`Error::Contention`] (the
    /// compare-and-set's retry budget ran out), [`Error::CorruptDocument`],
    /// [`Error::Database`] or [`Error::Timeout`] (the ticket the write may have taken is
    /// then a gap: it waits with no one holding it, and is never handed to anyone else).
    ///
    /// # Cancel safety
    ///
    /// Dropped before its write is sent, it takes nothing. Dropped after, the ticket it may
    /// have taken is a gap, as for a failed write.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// match lobby.take().await {
    ///     Ok(t) => println!("your ticket: {}", t.number),
    ///     Err(dispenser::Error::QueueFull { waiting, .. }) => {
    ///         println!("{waiting} people wait already; please come back later")
    ///     }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn take(&self) -> Result<Ticket> {
        let mut tickets = self.take_n(1).await?;
        tickets.pop().ok_or_else(|| no_such(&self.inner.name))
    }

    /// Takes `n` tickets at once — a family — all or nothing: `n` consecutive tickets in one
    /// write, in the order they will be called, or [`Error::QueueFull`] and nothing taken when
    /// fewer than `n` fit.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `n` is 0; those of [`Queue::take`].
    ///
    /// # Cancel safety
    ///
    /// As [`Queue::take`]: dropped after its write was sent, the tickets it may have taken
    /// are a gap.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let family = lobby.take_n(3).await?;
    /// assert_eq!(family.len(), 3);
    /// assert_eq!(family[1].serial, family[0].serial + 1); // consecutive
    /// # Ok(()) }
    /// ```
    pub async fn take_n(&self, n: u64) -> Result<Vec<Ticket>> {
        if n == 0 {
            return Err(Error::invalid_argument(
                "ticket count",
                format!(
                    "0 tickets asked of queue {:?}; take at least 1",
                    self.inner.name
                ),
            ));
        }
        self.inner.act(Op::Take(n)).await
    }

    /// Calls the oldest waiting ticket (the one taken longest ago).
    ///
    /// # Errors
    ///
    /// [`Error::NobodyWaiting`] (nothing written), plus those of [`Queue::take`] other than
    /// [`Error::QueueFull`]. A call whose write failed may still have called its ticket:
    /// that ticket is then served without being announced.
    ///
    /// # Cancel safety
    ///
    /// Dropped before its write is sent, it calls nothing. Dropped after, the ticket may
    /// have been called without anyone announcing it.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let next = lobby.call().await?;
    /// println!("now serving {}, {} still waiting", next.number, next.waiting);
    /// # Ok(()) }
    /// ```
    pub async fn call(&self) -> Result<Ticket> {
        let mut tickets = self.inner.act(Op::Call).await?;
        tickets.pop().ok_or_else(|| no_such(&self.inner.name))
    }

    /// Reads the queue's state: what is being served, how many wait, what comes next.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchQueue`], [`Error::CorruptDocument`], [`Error::Database`],
    /// [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let s = lobby.status().await?;
    /// println!("{} waiting, next ticket {:?}", s.waiting, s.next_ticket);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<QueueStatus> {
        let i = &self.inner;
        i.store
            .load_status(&i.name)
            .await?
            .ok_or_else(|| no_such(&i.name))
    }
}
