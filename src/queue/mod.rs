//! Queues: take a ticket, call the next one — and never two people waiting with the same
//! number.
//!
//! A cyclic sequence (tickets 1 … 99, 0, 1 …) is half of a ticket machine: it does not know
//! who is still waiting, so the 101st person to wait gets a number someone waiting holds. A
//! [`Queue`] also knows what was called. [`Queue::take`] hands out the next ticket only while
//! it is held by no one — not waiting, not shown by a desk — (else [`Error::QueueFull`]);
//! [`Queue::call`] calls the oldest waiting ticket (else [`Error::NobodyWaiting`]), or with
//! [`Call::serial`] a given ticket out of order, from a named desk ([`Call::desk`]); [`Queue::recall`]
//! announces a desk's ticket again; [`Queue::cancel`] takes a waiting ticket out of the line;
//! [`Queue::peek`] says what each desk shows, the last calls, how many wait and for how
//! long. [`Take::request_id`] makes a take safe to retry after a lost reply; [`Queue::alter`]
//! and [`Queue::delete`] are its admin operations. Each action is a builder that is
//! `.await`ed: `lobby.take().count(3).request_id(id).await`.
//!
//! How it holds, with single-document writes only:
//!
//! - **One document per queue** (in `<collection>_queues`): the range, the serial of the last
//!   ticket taken, the cursor of the line, the tickets done out of line, each desk's ticket,
//!   the last calls, the recent request ids, and a version. The ticket shown is derived: the
//!   `k`-th ticket taken shows `min + k mod capacity` (see [`QueueSpec::ticket`]). A take is
//!   allowed only while the tickets held (waiting, or shown by a desk) and the new ones span
//!   at most `capacity` serials: no number twice.
//! - **Every operation is one compare-and-set** of that document: read, compute the next
//!   state, replace the document filtered on its version, incarnation and counters; first
//!   writer wins, losers back off ([`Options::backoff`](crate::Options::backoff)'s delays)
//!   and try again until the operation timeout, however many races they lose
//!   ([`Options::strategy`](crate::Options::strategy) does not apply to queues). A refusal
//!   (full, nobody waiting, not waiting) is only ever reported from a fresh read or beside an
//!   acknowledged write. So the operations are linearizable: each takes effect at its write,
//!   in the document's version order.
//! - **A ticket is acted on by its identity, never by its number**: numbers come round (the
//!   101st ticket of a 1 … 99, 0 queue shows 1 again), serials do not. A cancel, a call of a
//!   given ticket, and a recall or finish that names the desk's ticket name it by its
//!   [`Ticket::serial`] (with [`Ticket::incarnation`], for a queue that may be deleted and
//!   created again), or a cancel by the request id of the take that got it; the
//!   compare-and-set that acts checks that this very ticket still waits (or is still the
//!   desk's), and otherwise refuses ([`Error::TicketNotWaiting`], saying what became of it).
//!   A number read off a board is looked up once ([`Queue::waiting_ticket`]) and then acted
//!   on by serial.
//! - **Concurrent operations on one handle share one write** (its clones included): while
//!   one write is in flight the others line up, and the line is then applied in arrival
//!   order, each operation to the state the ones before it left, and written in one
//!   compare-and-set; each caller gets its own answer (its ticket, the counters and version
//!   as of its operation), a take that does not fit is refused while the others are served,
//!   and a write whose outcome is unknown fails every caller of its line.
//! - **A ticket is handed out only once its write was acknowledged** with the dispenser's
//!   write concern (majority and journaled by default). A take whose reply is lost (a
//!   network error, a timeout) may still have taken its ticket: without a request id that
//!   ticket then waits with no one holding it — a gap, called in its turn with nobody coming —
//!   and is never handed to anyone else; with one, the same take again answers it. Failed
//!   writes are never retried as fresh ones.
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
//! let called = lobby.call().desk("3").await?; // at desk 3
//! println!("now serving {} at desk 3", called.label);
//! # Ok(()) }
//! ```

mod action;
mod combine;
mod document;
mod follow;
mod history;
mod spec;
mod state;
mod status;
mod store;

use std::sync::{Arc, Mutex};

pub use action::{
    AtDesk, Call, Cancel, DeleteQueue, ListQueueCounters, ListQueues, Take, TakeMany,
};
pub use follow::{TicketState, TicketView};
pub use spec::{QueueAlter, QueueSpec};
pub use status::{
    CallEntry, DeskEntry, HourEntry, QueueCounters, QueueState, Ticket, WAITING_LISTED,
    WaitingEntry,
};

use crate::dispenser::Dispenser;
use crate::error::{Differs, Error, Kind, Result, shown_or_none};
use crate::retry::Backoff;
use crate::scope::Clock;
use state::{Done, Named, Op, RequestId, State, Target};
use store::QueueStore;

/// Checks a queue name: the rules of a stored sequence name ([`validate_name`]: 1–200 bytes,
/// no control character, not starting with `$`).
///
/// [`validate_name`]: crate::sequence::validate_name
fn check_name(name: &str) -> Result<()> {
    crate::spec::validate_name(name).map_err(|e| e.for_kind(crate::error::Kind::Queue))
}

fn no_such(name: &str) -> Error {
    Error::NotFound {
        kind: crate::Kind::Queue,
        name: name.to_owned(),
    }
}

/// The longest desk label.
pub const MAX_DESK_CHARS: usize = 16;
/// The longest request id, in bytes.
pub const MAX_REQUEST_ID: usize = 64;

/// Checks a desk label and returns it as the board shows it: 1 to 16 characters, letters,
/// digits, space, `-`, `_` or `.`, not only spaces (a blank label would show as no desk at
/// all); the spaces at either end are dropped (`"  a  "` is desk `"a"`).
fn check_desk(queue: &str, desk: &str) -> Result<String> {
    let n = desk.chars().count();
    let ok = (1..=MAX_DESK_CHARS).contains(&n)
        && desk
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '-' | '_' | '.'));
    let shown = desk.trim_matches(' ');
    if ok && !shown.is_empty() {
        return Ok(shown.to_owned());
    }
    let reason = if ok {
        format!(
            "{desk:?} is blank: a desk label needs a letter, a digit, '-', '_' or '.' to show on the board"
        )
    } else {
        format!(
            "{desk:?} is not a desk label: 1 to {MAX_DESK_CHARS} letters, digits, spaces, '-', '_' or '.'"
        )
    };
    Err(Error::invalid_argument(
        format!("desk of queue {queue:?}"),
        reason,
    ))
}

/// Checks a request id: 1 to 64 printable ASCII characters.
fn check_request_id(queue: &str, id: &str) -> Result<()> {
    if (1..=MAX_REQUEST_ID).contains(&id.len()) && id.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        Ok(())
    } else {
        Err(Error::invalid_argument(
            format!("request id of a take of queue {queue:?}"),
            format!("{id:?} is not 1 to {MAX_REQUEST_ID} printable ASCII characters"),
        ))
    }
}

/// What differs between the stored spec of a queue and the one asked for: every setting
/// `create_queue` writes (range, format, daily, time zone); the highest ticket is what an
/// `alter` changes (kept, told), the others nothing changes (a conflict).
fn differences(stored: &QueueSpec, asked: &QueueSpec) -> Differs {
    let format = |f: &Option<crate::Format>| shown_or_none(f.as_ref().map(crate::Format::as_str));
    let mut d = Differs::default();
    d.field("min", stored.min, asked.min)
        .alterable("max", stored.max, asked.max)
        .field("format", format(&stored.format), format(&asked.format))
        .field("daily", stored.daily, asked.daily)
        .field(
            "time zone",
            format!("{:?}", stored.time_zone),
            format!("{:?}", asked.time_zone),
        );
    d
}

/// [`Error::AlreadyExists`] for the queue `name`.
fn exists(name: &str) -> Error {
    Error::AlreadyExists {
        kind: crate::Kind::Queue,
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
    /// [`Error::InvalidName`] for a bad name, [`Error::InvalidArgument`] for a bad range
    /// (nothing written),
    /// [`Error::AlreadyExists`] when the name is taken, [`Error::Database`],
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
    /// use dispenser::{Format, queue::QueueSpec};
    /// let spec = QueueSpec::default().with_max(999).with_format(Format::parse("A-{n:03}")?);
    /// let lobby = d.create_queue("lobby", spec).await?;
    /// assert_eq!(lobby.take().await?.label, "A-001");
    /// # Ok(()) }
    /// ```
    pub async fn create_queue(&self, name: &str, spec: QueueSpec) -> Result<Queue> {
        check_name(name)?;
        spec.validate(name)?;
        let queues = self.queues();
        let fresh = State::new(spec, bson::oid::ObjectId::new(), queues.now().await?);
        if history::insert(self, &queues, name, &fresh).await? {
            return Ok(self.queue_handle(name, queues, fresh));
        }
        Err(exists(name))
    }

    /// Creates the queue if it does not exist, or opens it if it exists with the same spec
    /// (min, max, format, time zone, daily: everything a create writes). Safe when many
    /// processes race: one insert wins, the others read what it wrote.
    ///
    /// # Errors
    ///
    /// [`Error::SpecConflict`] (kind [`ErrorKind::Conflict`](crate::ErrorKind::Conflict),
    /// nothing written) when it exists with another spec, naming each setting that differs
    /// with its stored and asked values, plus those of
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
        let fresh = State::new(
            spec.clone(),
            bson::oid::ObjectId::new(),
            queues.now().await?,
        );
        if history::insert(self, &queues, name, &fresh).await? {
            return Ok(self.queue_handle(name, queues, fresh));
        }
        let stored = queues.load(name).await?.ok_or_else(|| no_such(name))?;
        let altered = differences(&stored.spec, &spec).check(Kind::Queue, name)?;
        let mut q = self.queue_handle(name, queues, stored);
        q.altered = altered.into();
        Ok(q)
    }

    /// Opens an existing queue (one read).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::InvalidName`],
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

    /// Lists the queues: every one by name, or a page of them — see [`ListQueues`] for its
    /// options (`.matching(patterns)`, `.after(cursor)`, `.limit(n)`, `.named(names)`, and
    /// `.counters()` for their counters only). A document that does not decode is an
    /// [`Error::CorruptDocument`] in its place, so one bad document does not hide the rest.
    ///
    /// # Errors
    ///
    /// See [`ListQueues`].
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
    /// let branch = d.list_queues().matching(["paris-*"]).limit(50).await?;
    /// # Ok(()) }
    /// ```
    pub fn list_queues(&self) -> ListQueues<'_> {
        ListQueues::new(self)
    }

    /// Deletes the queue `name`, unless tickets are held in it — waiting, or shown by a desk
    /// — ([`Error::QueueInUse`], nothing deleted): a queue created again under the name starts
    /// from its first ticket, so a ticket held from the old queue would be handed out again.
    /// [`DeleteQueue::force`] deletes it all the same (the history records the force). Returns
    /// a [`DeleteQueue`] to `.await`. Handles opened before then fail with
    /// [`Error::NotFound`].
    ///
    /// The delete is pinned to the state it checked: a take landing between the check and the
    /// delete makes it check again (and refuse), and a take that comes after it fails with
    /// [`Error::NotFound`] — never a ticket of a deleted queue.
    ///
    /// # Errors
    ///
    /// [`Error::QueueInUse`] (nothing deleted), [`Error::InvalidName`],
    /// [`Error::NotFound`], [`Error::CorruptDocument`] (a document that does not decode
    /// is deleted only with force), [`Error::Contention`], [`Error::Database`],
    /// [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the queue deleted or not (see
    /// [`Dispenser::open_queue`]) and its history entry `pending` (see
    /// [`history`](crate::history)).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// match d.delete_queue("lobby").await {
    ///     Err(dispenser::Error::QueueInUse { waiting, .. }) => {
    ///         println!("{waiting} people still wait; call them first")
    ///     }
    ///     other => other?,
    /// }
    /// d.delete_queue("old-lobby").force(true).await?; // closed for good: nobody comes back
    /// assert!(d.open_queue("old-lobby").await.is_err());
    /// # Ok(()) }
    /// ```
    pub fn delete_queue<'a>(&'a self, name: &'a str) -> DeleteQueue<'a> {
        DeleteQueue::new(self, name)
    }

    /// The delete [`DeleteQueue`] runs.
    async fn delete_queue_now(&self, name: &str, force: bool) -> Result<()> {
        check_name(name)?;
        if history::delete(self, &self.queues(), name, force).await? {
            Ok(())
        } else {
            Err(no_such(name))
        }
    }

    fn queue_handle(&self, name: &str, store: QueueStore, stored: State) -> Queue {
        Queue {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                store,
                backoff: self.options().backoff,
                clock: TimeSource::Server,
                caller: self.caller().map(str::to_owned),
                remembered: Mutex::new(stored),
                history: self.recorder(),
                dispenser: self.clone(),
                combiner: combine::Combiner::default(),
            }),
            altered: Arc::default(),
        }
    }
}

/// A handle on one queue: takes, calls, recalls and cancels tickets. Cheap to clone; any
/// number of tasks may use one handle (or many handles, in many processes) at once.
///
/// Every ticket returned was fixed by a write the server acknowledged with the dispenser's
/// write concern; no ticket is handed out while someone waits with it or a desk shows it, and
/// calls serve tickets in the order they were taken, except calls of a given ticket.
#[derive(Clone)]
pub struct Queue {
    inner: Arc<Inner>,
    /// What the `ensure_queue` that opened it found changed by an `alter` (see
    /// [`Queue::altered`]).
    altered: Arc<[crate::error::Altered]>,
}

/// Where a queue handle reads the time.
#[derive(Clone)]
enum TimeSource {
    /// The server's clock (the default): every client of the queue agrees on the day and on
    /// how old a request id is, whatever their machines' clocks say.
    Server,
    /// A clock the caller gave ([`Queue::with_clock`]), for tests and simulations.
    Given(Clock),
}

struct Inner {
    name: String,
    store: QueueStore,
    backoff: Backoff,
    clock: TimeSource,
    /// Who takes: the scope of request ids ([`Options::caller`](crate::Options::caller)).
    caller: Option<String>,
    /// The state after this handle's last write or read: the guess of the compare-and-set.
    remembered: Mutex<State>,
    /// Where its admin operations are recorded (create, alter, cancel, delete).
    history: crate::history::record::Recorder,
    /// The dispenser it was opened from (for [`Queue::delete`]).
    dispenser: Dispenser,
    /// The line of this handle's operations, served in shared writes (see `combine`).
    combiner: combine::Combiner,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

fn what(op: &Op) -> &'static str {
    match op {
        Op::Take { count: 1, .. } => "taking a ticket of",
        Op::Take { .. } => "taking tickets of",
        Op::Call { ticket: None, .. } => "calling the next ticket of",
        Op::Call { .. } => "calling a given ticket of",
        Op::Recall { .. } => "recalling a ticket of",
        Op::Finish { .. } => "finishing the ticket of a desk of",
        Op::Cancel {
            target: Target::Take(_),
        } => "giving up the ticket of a take of",
        Op::Cancel { .. } => "cancelling a ticket of",
        Op::SetMax { .. } => "changing the range of",
    }
}

impl Inner {
    fn remembered(&self) -> State {
        self.remembered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Remembers a state: a fresh read always; a state after our own write only when it is
    /// newer (another task of this handle may have written after us).
    fn remember(&self, s: &State, fresh_read: bool) {
        let mut r = self.remembered.lock().unwrap_or_else(|p| p.into_inner());
        if fresh_read || r.incarnation != s.incarnation || s.version > r.version {
            *r = s.clone();
        }
    }

    async fn read(&self) -> Result<State> {
        let stored = self
            .store
            .load(&self.name)
            .await?
            .ok_or_else(|| no_such(&self.name))?;
        self.remember(&stored, true);
        Ok(stored)
    }

    /// The time now, by the handle's clock (the server's, unless a test gave another).
    async fn now(&self) -> Result<i64> {
        match &self.clock {
            TimeSource::Server => self.store.now().await,
            TimeSource::Given(c) => Ok(c().as_millisecond()),
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

    /// The history of the queue: who created, altered, cancelled in it or deleted it, oldest
    /// first — see [`History`](crate::history::History) for the options.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let changes = lobby.history().limit(20).await?;
    /// # Ok(()) }
    /// ```
    pub fn history(&self) -> crate::history::History {
        self.inner
            .history
            .history(crate::history::Subject::Queue, &self.inner.name)
    }

    /// The settings the [`Dispenser::ensure_queue`] that opened this handle found changed since
    /// by an `alter` (its highest ticket): each with its stored value, which is kept, and the
    /// value asked, which is not applied. Empty for a handle from `create_queue` or
    /// `open_queue`, or when everything matched.
    pub fn altered(&self) -> &[crate::error::Altered] {
        &self.altered
    }

    /// The queue's spec, as last seen by this handle.
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

    /// The same queue read with another clock (for tests and simulations: the local day, the
    /// hours, the times of calls and the estimates follow it). Defaults to the system clock.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) {
    /// use std::sync::Arc;
    /// let tomorrow = lobby.with_clock(Arc::new(|| "2026-11-22T08:00:00Z".parse().expect("a timestamp")));
    /// # }
    /// ```
    #[must_use]
    pub fn with_clock(&self, clock: Clock) -> Queue {
        let i = &self.inner;
        Queue {
            inner: Arc::new(Inner {
                name: i.name.clone(),
                store: i.store.clone(),
                backoff: i.backoff,
                clock: TimeSource::Given(clock),
                caller: i.caller.clone(),
                remembered: Mutex::new(i.remembered()),
                history: i.history.clone(),
                dispenser: i.dispenser.clone(),
                combiner: combine::Combiner::default(),
            }),
            altered: self.altered.clone(),
        }
    }

    /// Takes the next ticket, if it is held by no one (not waiting, not shown by a desk);
    /// with [`Take::count`], a family of consecutive tickets, all or nothing; with
    /// [`Take::request_id`], safely retried: the same id again (within 24 hours, among the
    /// queue's last request ids) answers the same tickets, [`Ticket::replayed`] set, and
    /// takes nothing more. Returns a [`Take`] to `.await`.
    ///
    /// # Errors
    ///
    /// [`Error::QueueFull`] (nothing written; take again after a call),
    /// [`Error::InvalidArgument`] when the count is 0, the request id is not 1–64 printable
    /// ASCII characters, or it was used for a take of another count,
    /// [`Error::NotFound`] (deleted meanwhile), [`Error::Contention`] (the
    /// compare-and-set kept losing to other handles for the whole operation timeout: nothing
    /// taken), [`Error::CorruptDocument`],
    /// [`Error::Database`] or [`Error::Timeout`] (the tickets the write may have taken are
    /// then a gap: they wait with no one holding them, and are never handed to anyone else;
    /// take with a request id to be able to ask again).
    ///
    /// # Cancel safety
    ///
    /// Dropped before its write is sent, it takes nothing. Dropped after, the tickets it may
    /// have taken are a gap, as for a failed write; with a request id, take again with the
    /// same id to learn them.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// match lobby.take().await {
    ///     Ok(t) => println!("your ticket: {}", t.label),
    ///     Err(dispenser::Error::QueueFull { waiting, .. }) => {
    ///         println!("{waiting} people wait already; please come back later")
    ///     }
    ///     Err(e) => return Err(e),
    /// }
    /// let family = lobby.take().count(3).await?;
    /// assert_eq!(family[1].serial, family[0].serial + 1); // consecutive
    /// let first = match lobby.take().request_id("kiosk-1/000042").await {
    ///     Ok(t) => t,
    ///     Err(e) if e.is_transient() => lobby.take().request_id("kiosk-1/000042").await?, // the reply was lost
    ///     Err(e) => return Err(e),
    /// };
    /// let again = lobby.take().request_id("kiosk-1/000042").await?;
    /// assert_eq!((again.number, again.replayed), (first.number, true));
    /// # Ok(()) }
    /// ```
    pub fn take(&self) -> Take<'_> {
        Take::new(self)
    }

    /// The take [`Take`] and [`TakeMany`] run.
    async fn take_now(
        &self,
        count: u64,
        request_id: Option<String>,
        caller: Option<String>,
    ) -> Result<Vec<Ticket>> {
        let name = &self.inner.name;
        if count == 0 {
            return Err(Error::invalid_argument(
                "ticket count",
                format!("0 tickets asked of queue {name:?}; take at least 1"),
            ));
        }
        if let Some(id) = &request_id {
            check_request_id(name, id)?;
        }
        if let Some(c) = &caller {
            crate::options::check_caller(c)?;
        }
        let key = request_id.map(|id| RequestId {
            caller: caller
                .or_else(|| self.inner.caller.clone())
                .unwrap_or_default(),
            id,
        });
        let op = Op::Take { count, key };
        let (s, done, now) = combine::act(&self.inner, op).await?;
        match done {
            Done::Took {
                first,
                count,
                replayed,
                version,
                max,
            } => {
                // The numbers as handed out, under the range of then.
                let then = s.spec.clone().with_max(max);
                Ok((first..first + count)
                    .map(|serial| {
                        let mut t = Ticket::new(&s, serial, None, now);
                        t.number = then.ticket(u64::try_from(serial).unwrap_or(0));
                        t.label = then.label(t.number);
                        t.replayed = replayed;
                        t.version = version;
                        t
                    })
                    .collect())
            }
            _ => Err(no_such(name)),
        }
    }

    /// Calls the oldest waiting ticket (the one taken longest ago), from the desk without a
    /// name; with [`Call::desk`], from that desk (which then shows the ticket, held, until it
    /// calls again or finishes); with [`Call::serial`], that waiting ticket out of order
    /// (once: it no longer waits), checked in the same write to be that ticket and to wait. Cancelled tickets are passed over. Returns a [`Call`] to
    /// `.await`.
    ///
    /// # Errors
    ///
    /// [`Error::NobodyWaiting`] (nothing written), [`Error::TicketNotWaiting`] when the given
    /// ticket does not wait (nothing written), [`Error::InvalidArgument`] for a bad desk
    /// label (or a hundredth-and-first desk), plus those of [`Queue::take`] other than
    /// [`Error::QueueFull`]. A call whose write failed may still have called its ticket: that
    /// ticket is then served without being announced.
    ///
    /// # Cancel safety
    ///
    /// Dropped before its write is sent, it calls nothing. Dropped after, the ticket may
    /// have been called (and shown by the desk) without anyone announcing it;
    /// [`Queue::peek`] shows what each desk shows.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let next = lobby.call().await?;
    /// println!("now serving {}, {} still waiting", next.number, next.waiting);
    /// let t = lobby.waiting_ticket(17).await?;
    /// let t = lobby.call().desk("2").serial(t.serial).await?;
    /// assert_eq!((t.number, t.desk.as_deref()), (17, Some("2")));
    /// # Ok(()) }
    /// ```
    pub fn call(&self) -> Call<'_> {
        Call::new(self)
    }

    /// The call [`Call`] runs.
    async fn call_now(&self, desk: Option<String>, ticket: Option<Named>) -> Result<Ticket> {
        let name = &self.inner.name;
        let desk = desk.map(|d| check_desk(name, &d)).transpose()?;
        let op = Op::Call {
            desk: desk.clone().unwrap_or_default(),
            ticket,
        };
        let (s, done, now) = combine::act(&self.inner, op).await?;
        match done {
            Done::Called { serial } => Ok(Ticket::new(&s, serial, desk, now)),
            _ => Err(no_such(name)),
        }
    }

    /// Announces again the ticket a desk shows (the desk without a name, or
    /// [`AtDesk::desk`]): a new entry in [`QueueState::recent_calls`] with `recall` set.
    /// Nobody is served. Returns an [`AtDesk`] to `.await`.
    ///
    /// # Errors
    ///
    /// [`Error::NoTicketShown`] when the desk shows no ticket (nothing written),
    /// [`Error::InvalidArgument`] for a bad desk label, and those of [`Queue::call`].
    ///
    /// # Cancel safety
    ///
    /// Dropped before its write is sent, nothing changes; dropped after, the recall may be in
    /// [`QueueState::recent_calls`] without anyone announcing it. Nobody is served either way:
    /// call it again.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let again = lobby.recall().desk("3").await?;
    /// println!("ticket {} to desk 3, please", again.label);
    /// # Ok(()) }
    /// ```
    pub fn recall(&self) -> AtDesk<'_> {
        AtDesk::recall(self)
    }

    /// A desk (the desk without a name, or [`AtDesk::desk`]) is done with the ticket it
    /// shows — it closes, or serves nobody next — and shows none: that ticket is no longer
    /// held, and its number may be handed out again in its turn. Returns an [`AtDesk`] to
    /// `.await`, for the ticket the desk showed.
    ///
    /// A desk's ticket is held until it calls another one or finishes, so a desk that stops
    /// calling keeps the queue from handing out that number: finish it.
    ///
    /// # Errors
    ///
    /// [`Error::NoTicketShown`] when the desk shows no ticket (nothing written),
    /// [`Error::InvalidArgument`] for a bad desk label, and those of [`Queue::call`].
    ///
    /// # Cancel safety
    ///
    /// Dropped before its write is sent, nothing changes; dropped after, the desk may or may
    /// not still show its ticket ([`Queue::peek`] tells). No ticket is taken or called either
    /// way.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// lobby.finish().desk("3").await?; // desk 3 closes for lunch
    /// # Ok(()) }
    /// ```
    pub fn finish(&self) -> AtDesk<'_> {
        AtDesk::finish(self)
    }

    /// The recall or finish [`AtDesk`] runs.
    async fn at_desk(
        &self,
        desk: Option<String>,
        finish: bool,
        ticket: Option<Named>,
    ) -> Result<Ticket> {
        let name = &self.inner.name;
        let desk = desk.map(|d| check_desk(name, &d)).transpose()?;
        let at = desk.clone().unwrap_or_default();
        let op = if finish {
            Op::Finish { desk: at, ticket }
        } else {
            Op::Recall { desk: at, ticket }
        };
        let (s, done, now) = combine::act(&self.inner, op).await?;
        match done {
            Done::Recalled { serial, at } => Ok(Ticket::new(&s, serial, desk, at)),
            Done::Finished { serial } => Ok(Ticket::new(&s, serial, desk, now)),
            _ => Err(no_such(name)),
        }
    }

    /// Cancels a waiting ticket (a no-show, or its holder left): calls pass over it. It stays
    /// out of the line; its number comes round again like any other. The ticket is named by
    /// its identity — [`Cancel::serial`] (with [`Cancel::incarnation`] when known), or
    /// [`Cancel::request_id`], the request id of the take that got it (what a person giving
    /// up their own ticket holds) — and the write that cancels it checks that it is still
    /// that ticket and still waits: a number that came round to someone else is never
    /// cancelled in its place. Returns a [`Cancel`] to `.await`.
    ///
    /// # Errors
    ///
    /// [`Error::TicketNotWaiting`] when the ticket named does not wait (called, cancelled,
    /// given up already, never taken, of a queue deleted and created again since): nothing
    /// written. [`Error::InvalidArgument`] when neither or both of a serial and a request id
    /// are given, or the take of the request id got more than one ticket. Those of
    /// [`Queue::call`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the ticket cancelled or not (see
    /// [`Queue::peek`]) and its history entry `pending` (see [`history`](crate::history)); no
    /// ticket is called.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let mine = lobby.take().request_id("phone-7f3a.1").await?;
    /// let gone = lobby.cancel().serial(mine.serial).incarnation(mine.incarnation).await?;
    /// assert_eq!((gone.serial, gone.position), (mine.serial, None));
    /// // Or by the take's request id, as a phone giving up its ticket does:
    /// // lobby.cancel().request_id("phone-7f3a.1").await?;
    /// # Ok(()) }
    /// ```
    pub fn cancel(&self) -> Cancel<'_> {
        Cancel::new(self)
    }

    /// The cancel [`Cancel`] runs.
    async fn cancel_now(
        &self,
        ticket: Option<Named>,
        request_id: Option<String>,
        caller: Option<String>,
    ) -> Result<Ticket> {
        let name = &self.inner.name;
        let (target, params) = match (ticket, request_id) {
            (Some(t), None) => (Target::Ticket(t), bson::doc! { "serial": t.serial }),
            (None, Some(id)) => {
                check_request_id(name, &id)?;
                if let Some(c) = &caller {
                    crate::options::check_caller(c)?;
                }
                let key = RequestId {
                    caller: caller
                        .or_else(|| self.inner.caller.clone())
                        .unwrap_or_default(),
                    id,
                };
                let params = bson::doc! { "request_id": &key.id };
                (Target::Take(key), params)
            }
            (t, _) => {
                return Err(Error::invalid_argument(
                    format!("cancel of a ticket of queue {name:?}"),
                    if t.is_some() {
                        "give the ticket's serial or the request id of its take, not both"
                    } else {
                        "name the ticket: its serial, or the request id of the take that got it"
                    },
                ));
            }
        };
        let (s, done, now) = self
            .recorded(
                "cancel",
                params,
                combine::act(&self.inner, Op::Cancel { target }),
            )
            .await?;
        match done {
            Done::Cancelled { serial, took } => {
                let mut t = Ticket::new(&s, serial, None, now);
                t.replayed = !took;
                Ok(t)
            }
            _ => Err(no_such(name)),
        }
    }

    /// The ticket that waits with `number` (the newest such, if the number came round while
    /// an older one still waits), read once: for a person who reads a number off a board or
    /// a paper ticket. Act on what it returns by its [`Ticket::serial`] — the act then checks
    /// that it is still that ticket — never by the number again.
    ///
    /// # Errors
    ///
    /// [`Error::TicketNotWaiting`] when no waiting ticket shows `number` (nothing written),
    /// [`Error::NotFound`], [`Error::CorruptDocument`], [`Error::Database`],
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
    /// let t = lobby.waiting_ticket(17).await?; // "17" read off a paper ticket
    /// lobby.call().desk("2").serial(t.serial).incarnation(t.incarnation).await?;
    /// # Ok(()) }
    /// ```
    pub async fn waiting_ticket(&self, number: i64) -> Result<Ticket> {
        let s = self.inner.read().await?;
        let now = self.inner.now().await?;
        match s.waiting_serial_of(number) {
            Ok(serial) => Ok(Ticket::new(&s, serial, None, now)),
            Err(refusal) => Err(refusal.into_error(&self.inner.name, &s)),
        }
    }

    /// Changes the queue's range as `change` says (today: its highest ticket), refused when
    /// a ticket held (waiting, or shown by a desk) would show another number under the new
    /// range. Returns the new status.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `change` changes nothing or gives a range
    /// [`QueueSpec::validate`] refuses, [`Error::QueueAlterRefused`] for one that would remap
    /// a held ticket (nothing written); those of [`Queue::call`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the new range set or not (see [`Queue::peek`])
    /// and its history entry `pending` (see [`history`](crate::history)); no ticket is taken or
    /// called.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// use dispenser::queue::QueueAlter;
    /// let s = lobby.alter(QueueAlter::default().with_max(199)).await?;
    /// assert_eq!(s.capacity, 200);
    /// # Ok(()) }
    /// ```
    pub async fn alter(&self, change: QueueAlter) -> Result<QueueState> {
        let Some(max) = change.max else {
            return Err(Error::invalid_argument(
                "alter",
                format!(
                    "nothing to change for queue {:?}: give a max",
                    self.inner.name
                ),
            ));
        };
        let (s, _, now) = self
            .recorded(
                "alter",
                bson::doc! { "max": max },
                combine::act(&self.inner, Op::SetMax { max }),
            )
            .await?;
        Ok(QueueState::new(self.inner.name.clone(), &s, now))
    }

    /// Deletes the queue, as [`Dispenser::delete_queue`] does by name: refused while tickets
    /// are held unless [`DeleteQueue::force`]. Returns a [`DeleteQueue`] to `.await`. Handles
    /// opened before then fail with [`Error::NotFound`].
    ///
    /// # Errors
    ///
    /// Those of [`Dispenser::delete_queue`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the queue deleted or not (see
    /// [`Dispenser::open_queue`]) and its history entry `pending` (see
    /// [`history`](crate::history)).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let lobby = d.open_queue("lobby").await?;
    /// while lobby.peek().await?.waiting > 0 {
    ///     lobby.call().await?;
    /// }
    /// lobby.finish().await?; // the desk without a name showed the last one
    /// lobby.delete().await?;
    /// assert!(d.open_queue("lobby").await.is_err());
    /// # Ok(()) }
    /// ```
    pub fn delete(&self) -> DeleteQueue<'_> {
        DeleteQueue::new(&self.inner.dispenser, &self.inner.name)
    }

    /// Reads the queue's state: what each desk shows, the last calls, how many wait and for
    /// how long, what comes next.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::CorruptDocument`], [`Error::Database`],
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
    /// let s = lobby.peek().await?;
    /// println!("{} waiting, next ticket {:?}", s.waiting, s.next_ticket);
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self) -> Result<QueueState> {
        let s = self.inner.read().await?;
        let now = self.inner.now().await?;
        Ok(QueueState::new(self.inner.name.clone(), &s, now))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::error::{Aftermath, Error};

    /// Regression (issue 31, found 6): a queue write that timed out said "any numbers it
    /// reserved are a gap". It names the queue and says what happens to a ticket.
    #[test]
    fn a_queue_timeout_names_the_queue_and_speaks_of_tickets() {
        let e = Error::timeout(
            "taking a ticket of queue \"lobby\"",
            Duration::from_secs(10),
            Aftermath::Queue,
        );
        let m = e.to_string();
        assert!(m.contains("queue \"lobby\""), "{m}");
        assert!(m.contains("ticket"), "{m}");
        assert!(!m.contains("numbers"), "{m}");
    }

    #[test]
    fn desk_labels_and_request_ids_are_checked() {
        for ok in ["1", "Desk 12", "a-b_c.d", "0123456789abcdef"] {
            assert!(super::check_desk("q", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "0123456789abcdefg",
            "a/b",
            "é",
            "a\n",
            " ",
            "                ",
        ] {
            let e = super::check_desk("q", bad).unwrap_err();
            assert!(e.to_string().contains("queue \"q\""), "{e}");
        }
        // Regression (issue 49, item 10): " " and "  a  " showed blank on the board. A blank
        // label is refused; spaces at either end are dropped.
        let e = super::check_desk("q", "   ").unwrap_err();
        assert!(e.to_string().contains("\"   \" is blank"), "{e}");
        assert_eq!(super::check_desk("q", "  a  ").unwrap(), "a");
        assert_eq!(super::check_desk("q", " Desk 12 ").unwrap(), "Desk 12");
        assert!(super::check_request_id("q", "kiosk-1/000042 x").is_ok());
        for bad in ["", "é", "a\tb", &"x".repeat(65)] {
            assert!(super::check_request_id("q", bad).is_err(), "{bad:?}");
        }
    }
}
