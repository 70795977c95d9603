//! The one error type of the crate.
//!
//! Every failure a caller may want to branch on is its own variant, so code can `match` on
//! [`Error`] instead of parsing messages. Messages name the sequence and the value at fault,
//! and never contain credentials (URIs are redacted before they reach an error).

use std::time::Duration;

pub mod redact;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every [`Error::code`], in the order of the guide's tables: what a surface that maps
/// errors (to HTTP statuses, to exit codes) maps, each with a row of its own. A code is
/// never renamed; a new one is added here.
pub const CODES: &[&str] = &[
    "invalid_input",
    "no_such_sequence",
    "no_such_queue",
    "already_exists",
    "spec_conflict",
    "would_go_backwards",
    "would_remap",
    "queue_in_use",
    "lease_held",
    "exhausted",
    "queue_full",
    "nobody_waiting",
    "ticket_not_waiting",
    "no_ticket_shown",
    "contention",
    "database",
    "timeout",
    "closed",
    "corrupt_document",
    "business_write",
];

/// Everything that can go wrong while creating, reading or drawing from a sequence.
///
/// The enum is `#[non_exhaustive]`: match the variants you care about and keep a `_` arm,
/// or branch on one of the handful of [`ErrorKind`]s ([`Error::kind`]). Each variant has a
/// stable [`code`](Error::code) (what every surface answers as `code`, beside the
/// [`ErrorKind`] as `kind`; every code is in [`CODES`]). The surfaces map codes, never variants: the service's HTTP statuses and the
/// command line's exit codes are theirs (`dispenser-server`, `dispenser-cli`), each with a
/// test that every code of [`CODES`] has its own row.
///
/// # Example
///
/// ```
/// use dispenser::{Error, Spec, error::ErrorKind};
///
/// let err = Spec::default().with_step(0).validate("orders").unwrap_err();
/// assert!(matches!(err, Error::InvalidSpec { .. }));
/// assert_eq!(err.kind(), ErrorKind::InvalidInput);
/// assert_eq!(err.code(), "invalid_input");
/// assert_eq!(err.to_string(), "invalid spec for sequence \"orders\": step must not be 0");
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// What was named does not exist (it was never created, or it was deleted): a sequence,
    /// a striped sequence, a scope, a gap-free sequence or a queue, as `kind` says.
    #[error("no such {kind} {name:?}")]
    NotFound {
        /// The kind of what was named.
        kind: Kind,
        /// Its name.
        name: String,
    },

    /// `create` was asked for a name its kind already has. Nothing was written; `ensure`
    /// opens it when its settings are the ones asked for.
    #[error("{kind} {name:?} already exists")]
    AlreadyExists {
        /// The kind of what was created.
        kind: Kind,
        /// Its name.
        name: String,
    },

    /// A non-cyclic sequence has no numbers left for this request. Nothing was written.
    #[error(
        "sequence {name:?} is exhausted: {requested} number(s) requested, {remaining} left after {value} (bounds {min}..={max}, step {step})"
    )]
    Exhausted {
        /// The sequence's name.
        name: String,
        /// The last number issued (the stored `value`).
        value: i64,
        /// How many numbers the call asked for.
        requested: u64,
        /// How many numbers are left before the bound.
        remaining: u64,
        /// The lower bound.
        min: i64,
        /// The upper bound.
        max: i64,
        /// The step.
        step: i64,
    },

    /// The spec (start, step, min, max, cycle) is not valid. Nothing was written.
    #[error("invalid spec for sequence {name:?}: {reason}")]
    InvalidSpec {
        /// The sequence's name.
        name: String,
        /// What is wrong, naming the field and its value.
        reason: String,
    },

    /// The name is not acceptable for its kind (the same rules for every kind: 1–200 bytes,
    /// no control character, not starting with `$`; `~` and `@` per the guide's table of
    /// names). Nothing was written.
    #[error("invalid {kind} name {name:?}: {reason}")]
    InvalidName {
        /// The kind of what was named.
        kind: Kind,
        /// The offending name (lossily shown).
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// An argument or option is out of range (a count of 0, a bad collection name, a
    /// backoff with a factor below 1, …). Nothing was written.
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// Which argument or option.
        what: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A [`Gapless::void`](crate::gapless::Gapless::void) or
    /// [`Gapless::release`](crate::gapless::Gapless::release) of a number other than the one
    /// that may be voided or released now (the sequence's next number). Nothing was written.
    /// Its message names the next number, which the service does not tell a caller that may
    /// not read the sequence.
    #[error("invalid gap-free number: {reason}")]
    NotTheNextNumber {
        /// The gap-free sequence's name.
        name: String,
        /// The number asked for.
        number: i64,
        /// The sequence's next number: the one that may be voided or released.
        next: i64,
        /// Why, in words (used or voided already, not handed out yet, not held).
        reason: String,
    },

    /// `ensure` found one of that name (of the same kind) with a setting other than asked
    /// that no `alter` changes (a sequence's start, a striped sequence's layout, a gap-free
    /// sequence's collection and field, a queue's lowest ticket, format or day settings: the
    /// guide's [vocabulary](crate::guide::glossary#create-ensure-open) lists them per kind).
    /// Settings an `alter` changes are not a conflict: they are kept and told
    /// ([`Altered`]). Nothing was written.
    #[error("{kind} {name:?} exists with another spec: {differs}; nothing was written")]
    SpecConflict {
        /// The kind of what was ensured.
        kind: Kind,
        /// Its name.
        name: String,
        /// Each setting that differs, with its stored and asked values:
        /// `max 99 (asked 19), format "A-{n}" (asked none)`.
        differs: String,
    },

    /// A reset would move a live sequence backwards and `force` was not given. Nothing was written.
    #[error(
        "refusing to move sequence {name:?} backwards: next number would be {requested}, but {current} was already issued (use force to allow it)"
    )]
    WouldGoBackwards {
        /// The sequence's name.
        name: String,
        /// The last number issued.
        current: i64,
        /// The requested next number.
        requested: i64,
    },

    /// The compare-and-set lost too many races: the retry budget ran out.
    #[error(
        "contention on sequence {name:?}: gave up after {attempts} attempt(s) in {elapsed:?} (the retry budget ran out)"
    )]
    Contention {
        /// The sequence's name.
        name: String,
        /// How many writes were tried.
        attempts: u32,
        /// How long the call took.
        elapsed: Duration,
    },

    /// The stored document is not one this library (or any valid history) could have written.
    #[error("corrupt document for {what} {name:?}: field {field:?} {problem}")]
    CorruptDocument {
        /// What the document is of: `sequence`, `queue`, `gap-free sequence`, ….
        what: String,
        /// The name of the sequence (queue, …) it belongs to.
        name: String,
        /// The field at fault.
        field: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A database operation did not finish within [`Options::operation_timeout`]. What that
    /// leaves behind depends on the operation, and `context` says it: a read lost nothing;
    /// a write's outcome is unknown — numbers a draw may have reserved are a gap, never
    /// issued, and a gap-free sequence leaves no gap (its number is used only once a
    /// document carries it). `written` says which ([`Error::written`]).
    ///
    /// [`Options::operation_timeout`]: crate::Options::operation_timeout
    #[error("timed out after {after:?} while {context}")]
    Timeout {
        /// What the library was doing, and what a timeout there leaves behind.
        context: String,
        /// The configured timeout.
        after: Duration,
        /// [`Written::Unknown`] when the operation was a write that may have been applied,
        /// else [`Written::Nothing`].
        written: Written,
    },

    /// The block client was closed (see [`BlockSequence::close`]); it issues nothing more.
    ///
    /// [`BlockSequence::close`]: crate::block::BlockSequence::close
    #[error("the block client of sequence {name:?} is closed; it issues no more numbers")]
    Closed {
        /// The sequence's name.
        name: String,
    },

    /// The business write of a gap-free number failed, returned an error or panicked (see
    /// [`Gapless::issue`](crate::gapless::Gapless::issue)). With `written`
    /// [`Written::Nothing`] the number was released: the next caller gets it, so the failure
    /// leaves no gap. With [`Written::Unknown`] the write failed in a way that may have
    /// applied it (its reply was lost, its connection cut, it timed out): if it was applied
    /// the number is used (the next caller moves past it), else the next caller gets it —
    /// look for the document before writing it again.
    #[error("{}", business_write_message(.name, *.number, .reason, *.written))]
    BusinessWrite {
        /// The gap-free sequence's name.
        name: String,
        /// The number the write carried.
        number: i64,
        /// What went wrong (the closure's error, or its panic message).
        reason: String,
        /// The closure's error, if it returned one (`None` when it panicked).
        #[source]
        source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
        /// [`Written::Unknown`] when the write may have been applied, [`Written::Nothing`]
        /// when it certainly was not (the number was released).
        written: Written,
    },

    /// [`Queue::take`](crate::queue::Queue::take) found the queue full: as many tickets wait
    /// as its range holds, so the next ticket would be one that someone waiting still holds.
    /// Nothing was written; take again once a ticket was called.
    #[error(
        "queue {name:?} is full: {}{}; call the next one before taking more",
        full_reason(*.requested, *.waiting, *.shown, *.capacity),
        restart_reason(*.before_restart, *.oldest_before_restart)
    )]
    QueueFull {
        /// The queue's name.
        name: String,
        /// How many tickets wait.
        waiting: u64,
        /// The oldest ticket a desk shows (a ticket shown is not handed out again while it is
        /// shown); `None` when no desk shows one.
        shown: Option<i64>,
        /// How many tickets were asked for at once (a family).
        requested: u64,
        /// How many distinct tickets the queue's range holds.
        capacity: u64,
        /// How many of the tickets waiting were taken before the daily queue's last restart (0
        /// when none): they keep their numbers, so the new day's tickets stop before the
        /// oldest of them — fewer fit than the range holds.
        before_restart: u64,
        /// The oldest of those tickets (`None` when `before_restart` is 0): the number the new
        /// day's tickets stop before.
        oldest_before_restart: Option<i64>,
    },

    /// [`Queue::call`](crate::queue::Queue::call) found nobody waiting: every ticket taken
    /// was called. Nothing was written.
    #[error(
        "nobody waits in queue {name:?}: all {called} ticket(s) taken were called; take a ticket first"
    )]
    NobodyWaiting {
        /// The queue's name.
        name: String,
        /// How many tickets were taken (and called) so far.
        called: u64,
    },

    /// The ticket an act names is not in the state the act needs: a ticket given to
    /// [`Queue::cancel`](crate::queue::Queue::cancel) or to a call of a given ticket
    /// ([`Call::serial`](crate::queue::Call::serial)) does not wait (called, cancelled, never
    /// taken, of a queue deleted and created again since), or a desk a recall or finish names
    /// with its ticket ([`AtDesk::serial`](crate::queue::AtDesk::serial)) shows another one.
    /// Nothing was written.
    #[error("ticket {ticket} (serial {serial}) of queue {name:?} {reason}; nothing was changed")]
    TicketNotWaiting {
        /// The queue's name.
        name: String,
        /// The number the ticket named shows.
        ticket: i64,
        /// The ticket named: its serial (see [`Ticket::serial`](crate::queue::Ticket::serial)).
        serial: u64,
        /// Why it cannot be acted on, as the message says it: `is not waiting: it was
        /// cancelled`, `is not shown by desk "3": it shows ticket 7 (serial 14) now`, ….
        reason: String,
    },

    /// [`Queue::recall`](crate::queue::Queue::recall) or
    /// [`Queue::finish`](crate::queue::Queue::finish) found the desk showing no ticket (it
    /// never called one, finished it, or the day started again). Nothing was written.
    #[error("desk {} of queue {name:?} shows no ticket; call one first", desk.as_deref().map_or_else(|| "(unnamed)".to_owned(), |d| format!("{d:?}")))]
    NoTicketShown {
        /// The queue's name.
        name: String,
        /// The desk, `None` for the desk without a name.
        desk: Option<String>,
    },

    /// [`Queue::alter`](crate::queue::Queue::alter) would give a ticket someone holds
    /// (waiting, or shown by a desk) another number. Nothing was written; change the range once
    /// nobody holds such a ticket.
    #[error("cannot change the range of queue {name:?} to max {max}: {reason}")]
    QueueAlterRefused {
        /// The queue's name.
        name: String,
        /// The highest ticket asked for.
        max: i64,
        /// Which held ticket would be remapped.
        reason: String,
    },

    /// [`Dispenser::delete_queue`](crate::Dispenser::delete_queue) found tickets held —
    /// waiting, or shown by a desk — and was not forced: a queue created again under the name
    /// starts from its first ticket, and would hand out those numbers again while their holders
    /// still wait. Nothing was deleted; delete it once nobody waits (call or cancel the
    /// tickets, finish the desks' tickets), or with force.
    #[error(
        "queue {name:?} is in use: {}; created again, it would hand out their numbers again while they wait. Delete it once nobody waits and no desk shows a ticket, or delete it with force",
        in_use(*.waiting, *.shown)
    )]
    QueueInUse {
        /// The queue's name.
        name: String,
        /// How many tickets wait.
        waiting: u64,
        /// How many desks show a ticket.
        shown: u64,
    },

    /// A number of a gap-free sequence is held by a caller whose lease has not run out by the
    /// server's clock, so its business write could still land: a
    /// [`Gapless::release`](crate::gapless::Gapless::release) without force, or a
    /// [`Gapless::void`](crate::gapless::Gapless::void), or a
    /// [`Dispenser::delete_gapless`](crate::Dispenser::delete_gapless) without force, is
    /// refused. Nothing was written; try again once the lease ran out, or force the release or
    /// the delete when its holder is known dead.
    #[error(
        "{number} of gap-free sequence {name:?} is held by a caller until {} (server time), so its write could still land; wait until then, or, if you know the holder is dead, force the release or the delete (a write that lands afterwards fails on the unique index)",
        .until.try_to_rfc3339_string().unwrap_or_default()
    )]
    LeaseHeld {
        /// The gap-free sequence's name.
        name: String,
        /// The number held.
        number: i64,
        /// When the lease runs out, by the server's clock.
        until: bson::DateTime,
    },

    /// The driver reported an error (unreachable server, network failure, write-concern
    /// failure, …). When this happens on the write that would have reserved numbers, those
    /// numbers are a gap: they are never issued by anyone.
    ///
    /// The message shows the driver's error as one line (see [`describe_driver_error`]); the
    /// driver's error itself is the [`source`](std::error::Error::source).
    #[error("database error while {context}: {}", describe_driver_error(.source))]
    Database {
        /// What the library was doing (for a write whose outcome is unknown, also what that
        /// leaves behind).
        context: String,
        /// The driver's error.
        #[source]
        source: mongodb::error::Error,
        /// [`Written::Unknown`] when the operation was a write the failure may have let
        /// through (a connection cut or a reply lost after it was sent, a write concern not
        /// met), else [`Written::Nothing`] (a read; the server was not reached; it refused
        /// the write).
        written: Written,
    },
}

/// The handful of kinds of [`Error`] a caller branches on ([`Error::kind`]).
///
/// `#[non_exhaustive]`: keep a `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller's input was refused (a name, a spec, an argument): nothing was written; fix
    /// the input. [`Error::InvalidName`], [`Error::InvalidSpec`], [`Error::InvalidArgument`].
    InvalidInput,
    /// What was named does not exist. [`Error::NotFound`].
    NotFound,
    /// One of that kind and name exists already. [`Error::AlreadyExists`].
    AlreadyExists,
    /// The stored state refuses the change: another spec, a value going backwards, a ticket
    /// held that would be remapped, a queue deleted while tickets are held, a gap-free number
    /// whose lease runs. Nothing was written. [`Error::SpecConflict`],
    /// [`Error::WouldGoBackwards`], [`Error::QueueAlterRefused`], [`Error::QueueInUse`],
    /// [`Error::LeaseHeld`].
    Conflict,
    /// A non-cyclic sequence has fewer numbers left than asked. [`Error::Exhausted`].
    Exhausted,
    /// A queue's line refuses the operation (full, nobody waits, the ticket does not wait, the
    /// desk shows no ticket). Nothing was written. [`Error::QueueFull`],
    /// [`Error::NobodyWaiting`], [`Error::TicketNotWaiting`], [`Error::NoTicketShown`].
    QueueRefused,
    /// Every try of the retry budget lost a race: nothing was drawn; try again.
    /// [`Error::Contention`].
    Contention,
    /// The database failed or did not answer in time, or the handle was closed.
    /// [`Error::Database`], [`Error::Timeout`], [`Error::Closed`].
    Unavailable,
    /// A stored document cannot be read (see `dispenser check`). [`Error::CorruptDocument`].
    Corrupt,
    /// The caller's own business write of a gap-free number failed. [`Error::BusinessWrite`].
    BusinessWrite,
}

impl ErrorKind {
    /// The kind's one name on every surface, in snake_case: `invalid_input`, `not_found`,
    /// `already_exists`, `conflict`, `exhausted`, `queue_refused`, `contention`,
    /// `unavailable`, `corrupt`, `business_write` — the service's error answers say it as
    /// `kind` (beside the [`code`](Error::code)), and so do the Python and Node.js errors.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::error::ErrorKind;
    /// assert_eq!(ErrorKind::NotFound.as_str(), "not_found");
    /// assert_eq!(ErrorKind::QueueRefused.to_string(), "queue_refused");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Exhausted => "exhausted",
            ErrorKind::QueueRefused => "queue_refused",
            ErrorKind::Contention => "contention",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::BusinessWrite => "business_write",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why fewer tickets fit after a daily restart, in words (empty when that is not why).
fn restart_reason(before_restart: u64, oldest: Option<i64>) -> String {
    match oldest {
        Some(t) if before_restart > 0 => format!(
            "; {before_restart} of them were taken before the daily restart and keep their numbers, so today's tickets stop before {t}, the oldest of them"
        ),
        _ => String::new(),
    }
}

/// What holds a queue a delete refuses, in words.
fn in_use(waiting: u64, shown: u64) -> String {
    match (waiting, shown) {
        (w, 0) => format!("{w} ticket(s) wait"),
        (0, d) => format!("{d} desk(s) show a ticket"),
        (w, d) => format!("{w} ticket(s) wait and {d} desk(s) show a ticket"),
    }
}

/// What a name names: the kinds of things a dispenser keeps, each with its own names (a
/// sequence and a queue may share a name; see the guide's table of names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A sequence: plain, a stripe or a template (and, where no more precise kind is said, a
    /// striped sequence or a scope, which are sequences too).
    Sequence,
    /// A striped sequence as a whole (its stripes `name~i` are sequences).
    Striped,
    /// A scope of a template (`t@k`).
    Scope,
    /// A gap-free sequence.
    Gapless,
    /// A ticket queue.
    Queue,
}

impl Kind {
    /// The kind in words: `sequence`, `striped sequence`, `scope`, `gap-free sequence`,
    /// `queue`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Sequence => "sequence",
            Kind::Striped => "striped sequence",
            Kind::Scope => "scope",
            Kind::Gapless => "gap-free sequence",
            Kind::Queue => "queue",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A setting an `ensure` found different from what it asked, of the kind an `alter` changes
/// (a sequence's bounds, step, cycle and format, a queue's highest ticket, a gap-free
/// sequence's longest lease): the stored value is kept and the asked one not applied —
/// an operator changed it since the code was written, and the code's start-up must not undo
/// it, nor fail. What the handle's `altered()` lists, the command line's stderr and the
/// service's `altered` field say.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Altered {
    /// The setting (`max`, `step`, `format`, `max lease`, …).
    pub setting: String,
    /// Its stored value, as shown (`200`, `"A-{n:03}"`, `none`).
    pub stored: String,
    /// The value asked for, as shown.
    pub asked: String,
}

impl std::fmt::Display for Altered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} (asked {})", self.setting, self.stored, self.asked)
    }
}

/// The settings an `ensure` found different: those no `alter` changes, each as `field stored
/// (asked asked)` (what [`Error::SpecConflict`] names), and those an `alter` changes
/// ([`Altered`]: kept, told).
#[derive(Debug, Default)]
pub(crate) struct Differs {
    fixed: Vec<String>,
    altered: Vec<Altered>,
}

impl Differs {
    /// Notes `field`, which no `alter` changes, when its stored and asked values differ.
    pub(crate) fn field<T: PartialEq + std::fmt::Display>(
        &mut self,
        field: &str,
        stored: T,
        asked: T,
    ) -> &mut Self {
        if stored != asked {
            self.fixed.push(format!("{field} {stored} (asked {asked})"));
        }
        self
    }

    /// Notes `field`, which an `alter` changes, when its stored and asked values differ.
    pub(crate) fn alterable<T: PartialEq + std::fmt::Display>(
        &mut self,
        field: &str,
        stored: T,
        asked: T,
    ) -> &mut Self {
        if stored != asked {
            self.altered.push(Altered {
                setting: field.to_owned(),
                stored: stored.to_string(),
                asked: asked.to_string(),
            });
        }
        self
    }

    /// [`Error::SpecConflict`] naming every difference when a setting no `alter` changes
    /// differs; else the settings an `alter` changed (kept as stored).
    pub(crate) fn check(&self, kind: Kind, name: &str) -> Result<Vec<Altered>> {
        if !self.fixed.is_empty() {
            let mut all = self.fixed.clone();
            all.extend(self.altered.iter().map(ToString::to_string));
            return Err(Error::SpecConflict {
                kind,
                name: name.to_owned(),
                differs: all.join(", "),
            });
        }
        Ok(self.altered.clone())
    }
}

/// An optional setting as a conflict shows it: `none`, or the value quoted.
pub(crate) fn shown_or_none(value: Option<&str>) -> String {
    value.map_or_else(|| "none".to_owned(), |v| format!("{v:?}"))
}

/// What a failed call leaves written ([`Error::written`]): the three outcomes of a call that
/// writes, which the command line's exit codes and the service's `outcome` field say too (the
/// guide's [guarantees](crate::guide::guarantees#when-the-outcome-is-unknown)).
///
/// `#[non_exhaustive]`: keep a `_` arm.
///
/// # Example
///
/// ```no_run
/// # async fn f(seq: dispenser::Sequence) -> dispenser::Result<()> {
/// use dispenser::error::Written;
/// match seq.next().await {
///     Ok(n) => println!("{n}"),
///     // A draw whose reply was lost: its numbers, if it reserved any, are a gap.
///     Err(e) if e.written() == Written::Unknown => eprintln!("{e}; drawing again is safe"),
///     Err(e) => return Err(e),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Written {
    /// Nothing was written: the call was refused, a read failed, the server could not be
    /// reached, or it refused the write. Making the call again is safe.
    Nothing,
    /// The write was made; what failed came after it: reading back the answer (an admin
    /// operation's state after its change), or, on the command line, printing it.
    Done,
    /// A write was sent and its reply never came (lost, its connection cut, a timeout): it
    /// may or may not have been applied. Find out before making it again where that matters
    /// (a gap-free business write, a queue take without a request id).
    Unknown,
}

impl Written {
    /// The outcome as the service's error answers name it: `nothing_written`, `written`,
    /// `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Written::Nothing => "nothing_written",
            Written::Done => "written",
            Written::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// [`Error::BusinessWrite`]'s message: a definite failure (the number released), or one whose
/// write may have been applied.
fn business_write_message(name: &str, number: i64, reason: &str, written: Written) -> String {
    match written {
        Written::Unknown => format!(
            "the outcome of the business write numbered {number} of gap-free sequence {name:?} is unknown ({reason}): it may have been applied; if it was, {number} is used and the next caller moves past it, else {number} goes to the next caller; look for the document numbered {number} (`dispenser audit` lists the numbers used) before writing it again"
        ),
        _ => format!(
            "the business write numbered {number} of gap-free sequence {name:?} failed: {reason}; the number was released and goes to the next caller"
        ),
    }
}

/// Whether a write that failed with `e` may still have been applied: the driver sent it, or
/// may have, and no answer says it was refused (a connection cut or reset, a reply that did
/// not decode, a write concern not met). Not when the server was never reached (server
/// selection, DNS, authentication, a paused pool) or answered that it refused the write.
pub(crate) fn may_have_landed(e: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    !matches!(
        e.kind.as_ref(),
        ErrorKind::InvalidArgument { .. }
            | ErrorKind::Authentication { .. }
            | ErrorKind::BsonSerialization(_)
            | ErrorKind::Command(_)
            | ErrorKind::DnsResolve { .. }
            | ErrorKind::ConnectionPoolCleared { .. }
            | ErrorKind::ServerSelection { .. }
            | ErrorKind::SessionsNotSupported
            | ErrorKind::InvalidTlsConfig { .. }
            | ErrorKind::Write(WriteFailure::WriteError(_))
            | ErrorKind::IncompatibleServer { .. }
            | ErrorKind::Shutdown
    )
}

/// Why a take was refused, in words: what was asked, what waits, what is shown.
fn full_reason(requested: u64, waiting: u64, shown: Option<i64>, capacity: u64) -> String {
    let asked = if requested > 1 {
        format!("{requested} tickets asked at once, ")
    } else {
        String::new()
    };
    match shown {
        Some(t) => format!(
            "{asked}{waiting} ticket(s) wait, ticket {t} is shown by a desk, and its range holds {capacity}"
        ),
        None => format!("{asked}{waiting} ticket(s) wait and its range holds {capacity}"),
    }
}

impl Error {
    /// True for [`Error::Exhausted`].
    pub fn is_exhausted(&self) -> bool {
        matches!(self, Error::Exhausted { .. })
    }

    /// True for [`Error::Database`] only: the driver reported an error (the server could not
    /// be reached, or refused the operation). A timeout is [`is_timeout`](Error::is_timeout).
    pub fn is_database(&self) -> bool {
        matches!(self, Error::Database { .. })
    }

    /// True for [`Error::Timeout`]: the operation did not finish within
    /// [`Options::operation_timeout`](crate::Options::operation_timeout).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// What the failed call leaves written: [`Written::Unknown`] for a write whose reply
    /// never came ([`Error::Database`] or [`Error::Timeout`] of a write, an
    /// [`Error::BusinessWrite`] that may have been applied); [`Written::Done`] when the call's
    /// write was made and reading its answer back failed; else [`Written::Nothing`] — every
    /// refusal, every failed read, every failure before a write was sent.
    ///
    /// Writes the library makes only to keep its own books (a gap-free lease, a handle's
    /// usage count, the history's record before an admin operation) are not the call's
    /// write: when only one of them may have been applied, nothing was written.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::{Error, error::Written};
    /// let refused = Error::NotFound { kind: dispenser::error::Kind::Sequence, name: "orders".into() };
    /// assert_eq!(refused.written(), Written::Nothing);
    /// ```
    pub fn written(&self) -> Written {
        match self {
            Error::Database { written, .. }
            | Error::Timeout { written, .. }
            | Error::BusinessWrite { written, .. } => *written,
            _ => Written::Nothing,
        }
    }

    /// True where the same call may succeed if made again: [`Error::Database`],
    /// [`Error::Timeout`], [`Error::Contention`]. (A write whose reply was lost may have
    /// landed: a queue take retried with the same request id learns its tickets.)
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Database { .. } | Error::Timeout { .. } | Error::Contention { .. }
        )
    }

    /// Which of the handful of [`ErrorKind`]s this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidName { .. }
            | Error::InvalidSpec { .. }
            | Error::InvalidArgument { .. }
            | Error::NotTheNextNumber { .. } => ErrorKind::InvalidInput,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Error::SpecConflict { .. }
            | Error::WouldGoBackwards { .. }
            | Error::QueueAlterRefused { .. }
            | Error::QueueInUse { .. }
            | Error::LeaseHeld { .. } => ErrorKind::Conflict,
            Error::Exhausted { .. } => ErrorKind::Exhausted,
            Error::QueueFull { .. }
            | Error::NobodyWaiting { .. }
            | Error::TicketNotWaiting { .. }
            | Error::NoTicketShown { .. } => ErrorKind::QueueRefused,
            Error::Contention { .. } => ErrorKind::Contention,
            Error::Database { .. } | Error::Timeout { .. } | Error::Closed { .. } => {
                ErrorKind::Unavailable
            }
            Error::CorruptDocument { .. } => ErrorKind::Corrupt,
            Error::BusinessWrite { .. } => ErrorKind::BusinessWrite,
        }
    }

    /// A stable, machine-readable name of the error (what every surface answers as `code`):
    /// `invalid_input`, `no_such_sequence`, `no_such_queue`, `already_exists`,
    /// `spec_conflict`, `would_go_backwards`, `would_remap`, `queue_in_use`, `lease_held`,
    /// `exhausted`, `queue_full`, `nobody_waiting`, `ticket_not_waiting`, `no_ticket_shown`,
    /// `contention`, `database`, `timeout`, `closed`, `corrupt_document`, `business_write`. A
    /// code is never renamed.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidName { .. }
            | Error::InvalidSpec { .. }
            | Error::InvalidArgument { .. }
            | Error::NotTheNextNumber { .. } => "invalid_input",
            Error::NotFound {
                kind: Kind::Queue, ..
            } => "no_such_queue",
            Error::NotFound { .. } => "no_such_sequence",
            Error::AlreadyExists { .. } => "already_exists",
            Error::SpecConflict { .. } => "spec_conflict",
            Error::WouldGoBackwards { .. } => "would_go_backwards",
            Error::QueueAlterRefused { .. } => "would_remap",
            Error::QueueInUse { .. } => "queue_in_use",
            Error::LeaseHeld { .. } => "lease_held",
            Error::Exhausted { .. } => "exhausted",
            Error::QueueFull { .. } => "queue_full",
            Error::NobodyWaiting { .. } => "nobody_waiting",
            Error::TicketNotWaiting { .. } => "ticket_not_waiting",
            Error::NoTicketShown { .. } => "no_ticket_shown",
            Error::Contention { .. } => "contention",
            Error::Database { .. } => "database",
            Error::Timeout { .. } => "timeout",
            Error::Closed { .. } => "closed",
            Error::CorruptDocument { .. } => "corrupt_document",
            Error::BusinessWrite { .. } => "business_write",
        }
    }

    /// This error, with an [`Error::InvalidName`] naming `kind` (the name checks are shared
    /// by every kind; each says which it checked).
    pub(crate) fn for_kind(self, kind: Kind) -> Self {
        match self {
            Error::InvalidName { name, reason, .. } => Error::InvalidName { kind, name, reason },
            other => other,
        }
    }

    /// This error, met after a write was made (reading its answer back): for
    /// [`Error::Database`] and [`Error::Timeout`], [`Written::Done`] and a context that says
    /// `done` is written and only the answer is missing; any other error as it is. For a
    /// caller that writes, then reads what to answer: the library's own admin operations do
    /// it for the state they return.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::Spec;
    /// d.create("orders", Spec::default()).await?;
    /// let state = d
    ///     .peek("orders")
    ///     .await
    ///     .map_err(|e| e.after_write("sequence \"orders\" created"))?;
    /// # Ok(()) }
    /// ```
    pub fn after_write(self, done: &str) -> Self {
        let read = format!(" ({})", Aftermath::Read.says());
        let context = |c: String| {
            format!(
                "{}, after {done} (that is written; only its answer is missing)",
                c.strip_suffix(read.as_str()).unwrap_or(&c)
            )
        };
        match self {
            Error::Database {
                context: c, source, ..
            } => Error::Database {
                context: context(c),
                source,
                written: Written::Done,
            },
            Error::Timeout {
                context: c, after, ..
            } => Error::Timeout {
                context: context(c),
                after,
                written: Written::Done,
            },
            other => other,
        }
    }

    /// [`Error::Database`] of a read (or of a write the library makes only for its own books):
    /// nothing was written.
    pub(crate) fn database(context: impl Into<String>, source: mongodb::error::Error) -> Self {
        Error::Database {
            context: context.into(),
            source,
            written: Written::Nothing,
        }
    }

    /// [`Error::Database`] of the operation `context`, whose driver error `source` leaves
    /// what `left` says when the operation is a write that may have been applied (then the
    /// context says it too), else nothing written.
    pub(crate) fn database_as(
        context: impl Into<String>,
        source: mongodb::error::Error,
        left: Aftermath,
    ) -> Self {
        if left.written() == Written::Unknown && may_have_landed(&source) {
            Error::Database {
                context: format!("{} ({})", context.into(), left.says()),
                source,
                written: Written::Unknown,
            }
        } else {
            Error::database(context, source)
        }
    }

    pub(crate) fn invalid_argument(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// [`Error::Timeout`] of the operation `context` after `after`, saying what the timeout
    /// left behind.
    pub(crate) fn timeout(context: impl Into<String>, after: Duration, left: Aftermath) -> Self {
        Error::Timeout {
            context: format!("{} ({})", context.into(), left.says()),
            after,
            written: left.written(),
        }
    }

    pub(crate) fn corrupt(name: &str, field: &str, problem: impl Into<String>) -> Self {
        Error::corrupt_of("sequence", name, field, problem)
    }

    /// [`Error::CorruptDocument`] for the document of a `what` (a queue, …).
    pub(crate) fn corrupt_of(
        what: &str,
        name: &str,
        field: &str,
        problem: impl Into<String>,
    ) -> Self {
        Error::CorruptDocument {
            what: what.to_owned(),
            name: name.to_owned(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }
}

/// What an operation that timed out leaves behind, as [`Error::Timeout`] says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Aftermath {
    /// A read: nothing was written, nothing is lost.
    Read,
    /// A write that may reserve numbers (a draw): its numbers are a gap, never issued.
    Draw,
    /// A write of a gap-free sequence: its outcome is unknown, but no number is lost.
    GapFree,
    /// A write of a queue: its outcome is unknown.
    Queue,
    /// The history's record written before an admin operation: the operation was not made.
    Intent,
    /// A gap-free lease (taken, confirmed, released): no number was used or voided by it.
    Lease,
    /// An admin write (create, delete, a format): it may or may not have been made.
    Admin,
    /// Setting up before the call's write (a unique index found or created): nothing the
    /// call is for was written.
    Setup,
    /// Waiting in line for a shared write that never carried the call: nothing was written.
    Lined,
}

impl Aftermath {
    /// Whether an operation of this kind that failed without an answer may have written
    /// what the call is for.
    pub(crate) fn written(self) -> Written {
        match self {
            Aftermath::Read
            | Aftermath::Intent
            | Aftermath::Lease
            | Aftermath::Setup
            | Aftermath::Lined => Written::Nothing,
            Aftermath::Draw | Aftermath::GapFree | Aftermath::Queue | Aftermath::Admin => {
                Written::Unknown
            }
        }
    }

    fn says(self) -> &'static str {
        match self {
            Aftermath::Read => "a read: nothing was written and nothing is lost; try again",
            Aftermath::Draw => {
                "the outcome is unknown; any numbers it reserved are a gap, never issued"
            }
            Aftermath::Queue => {
                "the outcome is unknown: a ticket it may have taken waits with nobody holding it and is called in its turn, never handed to anyone else; a take with a request id can be retried with the same id to learn its tickets"
            }
            Aftermath::GapFree => {
                "the outcome is unknown, but a gap-free sequence leaves no gap: a number is used only once a document carries it, and the next caller finds it used or takes it"
            }
            Aftermath::Intent => {
                "the record of the history written before the change: the change was not made (the history may show the operation pending); try again"
            }
            Aftermath::Lease => {
                "a lease of a gap-free sequence: no number was used or voided; a lease it may have taken runs out by itself and its number goes to the next caller"
            }
            Aftermath::Admin => {
                "the outcome is unknown: the change may or may not have been made; `peek` and the history show which"
            }
            Aftermath::Setup => "setting up: nothing was written yet; try again",
            Aftermath::Lined => {
                "it waited in line behind other callers' write and was never sent: nothing was written; try again"
            }
        }
    }
}

/// A driver error as one readable line: what failed and the essential cause ("connection
/// refused", "no server reachable at HOST", "authentication failed: …", "invalid argument:
/// …"), without the driver's debug fields (`Kind:`, `labels:`, `source:`, `server response:`)
/// or its topology dump. It never adds credentials: the driver's errors about a running
/// client quote hosts, not the URI (URI errors go through [`scrub`](crate::error::redact::scrub)).
///
/// # Example
///
/// ```
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused (os error 111)");
/// let e = dispenser::mongodb::error::Error::from(io);
/// assert_eq!(dispenser::error::redact::describe_driver_error(&e), "connection refused");
/// ```
pub fn describe_driver_error(e: &mongodb::error::Error) -> String {
    use mongodb::error::{ErrorKind, WriteFailure};
    let text = match e.kind.as_ref() {
        ErrorKind::InvalidArgument { message, .. } => format!("invalid argument: {message}"),
        ErrorKind::Authentication { message, .. } => {
            let m = tidy(message);
            if m.to_lowercase().contains("authentication failed") {
                format!("authentication failed ({m})")
            } else {
                format!("authentication failed: {m}")
            }
        }
        ErrorKind::Command(c) => format!(
            "the server refused the command: {} ({} {})",
            tidy(&c.message),
            c.code_name,
            c.code
        ),
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            format!("write failed: {} (code {})", tidy(&w.message), w.code)
        }
        // An unordered insert of many (the request ids a queue moves out): its first
        // refusal, and how many more there were.
        ErrorKind::InsertMany(m) => match (m.write_errors.as_deref(), &m.write_concern_error) {
            (Some([w, rest @ ..]), _) => format!(
                "write failed: {} (code {}){}",
                tidy(&w.message),
                w.code,
                if rest.is_empty() {
                    String::new()
                } else {
                    format!(", and {} more documents refused", rest.len())
                }
            ),
            (_, Some(w)) => format!(
                "write concern failed: {} ({} {})",
                tidy(&w.message),
                w.code_name,
                w.code
            ),
            _ => tidy(&e.kind.to_string()),
        },
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => format!(
            "write concern failed: {} ({} {})",
            tidy(&w.message),
            w.code_name,
            w.code
        ),
        ErrorKind::DnsResolve { message, .. } => {
            format!("DNS resolution failed: {}", tidy(message))
        }
        ErrorKind::Io(io) => tidy(&io.to_string()),
        ErrorKind::InvalidResponse { message, .. } => {
            format!("the server sent an invalid reply: {}", tidy(message))
        }
        ErrorKind::ServerSelection { message, .. } => describe_selection(message),
        ErrorKind::Shutdown => "the driver client was shut down".to_owned(),
        other => tidy(&other.to_string()),
    };
    one_line(&text)
}

/// A server selection error, whose message embeds the driver's topology dump: which servers
/// were tried and why each failed.
fn describe_selection(message: &str) -> String {
    let (head, topology) = message.split_once("Topology:").unwrap_or((message, ""));
    let mut servers = Vec::new();
    for part in topology.split("{ Address: ").skip(1) {
        let address = part.split(", ").next().unwrap_or_default().trim();
        let why = match part.split_once(", Error: ") {
            Some((_, error)) => tidy(error.trim_end_matches([' ', '}', ']'])),
            None => {
                let kind = part
                    .split_once("Type: ")
                    .and_then(|(_, t)| t.split([',', ' ']).next())
                    .unwrap_or("Unknown");
                if kind == "Unknown" {
                    "no answer yet".to_owned()
                } else {
                    format!("a {kind} server")
                }
            }
        };
        servers.push(format!("{address}: {why}"));
    }
    let shown = if servers.is_empty() {
        "no server known".to_owned()
    } else {
        servers.join("; ")
    };
    if head.contains("No available servers") {
        format!("server selection timed out: no server reachable ({shown})")
    } else if head.contains("None of the available servers suitable") {
        format!("server selection timed out: no suitable server ({shown})")
    } else {
        format!("server selection failed: {} ({shown})", tidy(head))
    }
}

/// A piece of driver text without its debug noise: "Kind: " prefixes, everything from
/// ", labels:" on (labels, source and server response), "I/O error: " and "(os error N)".
fn tidy(text: &str) -> String {
    let mut t = text.replace("Kind: ", "");
    if let Some(i) = t.find(", labels:") {
        t.truncate(i);
    }
    let t = t.trim().trim_end_matches('.');
    let t = t.strip_prefix("I/O error: ").unwrap_or(t);
    let t = match t.find(" (os error ") {
        Some(i) if t.ends_with(')') => &t[..i],
        _ => t,
    };
    // "Connection refused" reads better lower-cased mid-sentence; "DNS …" stays.
    let mut chars = t.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => {
            first.to_lowercase().chain(t.chars().skip(1)).collect()
        }
        _ => t.to_owned(),
    }
}

/// `text` on one line: line breaks and runs of white space become one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_of_a_number_not_the_next_is_its_own_variant_of_invalid_input() {
        let refused = Error::NotTheNextNumber {
            name: "inv".into(),
            number: 5,
            next: 3,
            reason: "5 is not handed out yet".into(),
        };
        assert_eq!(
            refused.to_string(),
            "invalid gap-free number: 5 is not handed out yet"
        );
        assert_eq!(
            (refused.code(), refused.kind()),
            ("invalid_input", ErrorKind::InvalidInput)
        );
    }

    /// One error of every variant. The `match` has no `_` arm, so a new variant does not
    /// compile until it is listed here, and then the tests below ask for its code, exit code
    /// and status in the guide's tables.
    fn every_variant() -> Vec<Error> {
        let n = || "n".to_owned();
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        let all = vec![
            Error::NotFound {
                kind: Kind::Sequence,
                name: n(),
            },
            Error::NotFound {
                kind: Kind::Gapless,
                name: n(),
            },
            Error::AlreadyExists {
                kind: Kind::Gapless,
                name: n(),
            },
            Error::Exhausted {
                name: n(),
                value: 9,
                requested: 1,
                remaining: 0,
                min: 0,
                max: 9,
                step: 1,
            },
            Error::InvalidSpec {
                name: n(),
                reason: n(),
            },
            Error::InvalidName {
                kind: Kind::Queue,
                name: n(),
                reason: n(),
            },
            Error::InvalidArgument {
                what: n(),
                reason: n(),
            },
            Error::SpecConflict {
                kind: Kind::Queue,
                name: n(),
                differs: n(),
            },
            Error::NotTheNextNumber {
                name: n(),
                number: 3,
                next: 1,
                reason: n(),
            },
            Error::WouldGoBackwards {
                name: n(),
                current: 2,
                requested: 1,
            },
            Error::Contention {
                name: n(),
                attempts: 1,
                elapsed: Duration::ZERO,
            },
            Error::corrupt("n", "value", "is missing"),
            Error::timeout(n(), Duration::ZERO, Aftermath::Read),
            Error::timeout(n(), Duration::ZERO, Aftermath::Draw),
            Error::Closed { name: n() },
            Error::BusinessWrite {
                name: n(),
                number: 1,
                reason: n(),
                source: None,
                written: Written::Nothing,
            },
            Error::BusinessWrite {
                name: n(),
                number: 1,
                reason: n(),
                source: None,
                written: Written::Unknown,
            },
            Error::QueueFull {
                name: n(),
                waiting: 1,
                shown: None,
                requested: 1,
                capacity: 1,
                before_restart: 0,
                oldest_before_restart: None,
            },
            Error::NobodyWaiting {
                name: n(),
                called: 0,
            },
            Error::TicketNotWaiting {
                name: n(),
                ticket: 1,
                serial: 1,
                reason: n(),
            },
            Error::NoTicketShown {
                name: n(),
                desk: None,
            },
            Error::QueueAlterRefused {
                name: n(),
                max: 1,
                reason: n(),
            },
            Error::QueueInUse {
                name: n(),
                waiting: 2,
                shown: 1,
            },
            Error::LeaseHeld {
                name: n(),
                number: 1,
                until: bson::DateTime::from_millis(0),
            },
            Error::NotFound {
                kind: Kind::Queue,
                name: n(),
            },
            Error::AlreadyExists {
                kind: Kind::Queue,
                name: n(),
            },
            Error::database("reading", mongodb::error::Error::from(io())),
            Error::database_as(
                "writing",
                mongodb::error::Error::from(io()),
                Aftermath::Draw,
            ),
            Error::timeout("reading", Duration::ZERO, Aftermath::Read).after_write("a reset"),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for e in &all {
            let variant = match e {
                Error::NotFound { .. } => 0,
                Error::AlreadyExists { .. } => 1,
                Error::Exhausted { .. } => 2,
                Error::InvalidSpec { .. } => 3,
                Error::InvalidName { .. } => 4,
                Error::InvalidArgument { .. } => 5,
                Error::SpecConflict { .. } => 6,
                Error::WouldGoBackwards { .. } => 7,
                Error::Contention { .. } => 8,
                Error::CorruptDocument { .. } => 9,
                Error::Timeout { .. } => 10,
                Error::Closed { .. } => 11,
                Error::BusinessWrite { .. } => 12,
                Error::QueueFull { .. } => 13,
                Error::NobodyWaiting { .. } => 14,
                Error::TicketNotWaiting { .. } => 15,
                Error::NoTicketShown { .. } => 16,
                Error::QueueAlterRefused { .. } => 17,
                Error::Database { .. } => 20,
                Error::QueueInUse { .. } => 21,
                Error::LeaseHeld { .. } => 22,
                Error::NotTheNextNumber { .. } => 23,
            };
            seen.insert(variant);
        }
        assert_eq!(seen.len(), 22, "every variant once");
        all
    }

    /// Every error's code is one of [`CODES`], each code is some error's, and each is a row
    /// of the service chapter's table (the surfaces' own tests check their mappings).
    #[test]
    fn every_error_has_a_listed_and_documented_code() {
        let service = include_str!("guide/service.md");
        let mut seen = std::collections::HashSet::new();
        for e in every_variant() {
            let code = e.code();
            assert!(CODES.contains(&code), "{e:?}: {code} is not in CODES");
            seen.insert(code);
        }
        // `no_such_queue` is a `NotFound` of a queue; the other variants cover the rest.
        let queue = Error::NotFound {
            kind: Kind::Queue,
            name: "q".into(),
        };
        seen.insert(queue.code());
        assert_eq!(seen.len(), CODES.len(), "every code is some error's");
        for code in CODES {
            assert!(
                service
                    .lines()
                    .any(|l| l.starts_with("| ") && l.contains(&format!("`{code}`"))),
                "`{code}` is not in the service chapter's table"
            );
        }
    }

    #[test]
    fn only_a_driver_error_is_a_database_error() {
        for e in every_variant() {
            assert_eq!(
                e.is_database(),
                matches!(e, Error::Database { .. }),
                "{e:?}"
            );
            assert_eq!(e.is_timeout(), matches!(e, Error::Timeout { .. }), "{e:?}");
        }
    }

    const REFUSED: &str = "Server selection timeout: No available servers. Topology: { Type: \
        Unknown, Servers: [ { Address: 127.0.0.1:9, Type: Unknown, Error: Kind: I/O error: \
        Connection refused (os error 111), labels: {\"SystemOverloadedError\", \
        \"RetryableError\"}, source: None, server response: None } ] }";

    #[test]
    fn server_selection_errors_name_each_server_and_its_cause() {
        assert_eq!(
            describe_selection(REFUSED),
            "server selection timed out: no server reachable (127.0.0.1:9: connection refused)"
        );
        let two = "Server selection timeout: No available servers. Topology: { Type: \
            ReplicaSetNoPrimary, Servers: [ { Address: a:1, Type: Unknown }, { Address: b:2, \
            Type: Unknown, Error: Kind: The server returned an invalid reply to a database \
            operation: bad length, labels: {}, source: None, server response: None } ] }";
        assert_eq!(
            describe_selection(two),
            "server selection timed out: no server reachable (a:1: no answer yet; b:2: the \
             server returned an invalid reply to a database operation: bad length)"
        );
        let unsuitable = "Server selection timeout: None of the available servers suitable \
            for criteria ReadPreference(Primary). Topology: { Type: ReplicaSetNoPrimary, \
            Servers: [ { Address: a:1, Type: RsSecondary, Average RTT: 1ms } ] }";
        assert_eq!(
            describe_selection(unsuitable),
            "server selection timed out: no suitable server (a:1: a RsSecondary server)"
        );
    }

    /// A write's driver error is of unknown outcome when the write may have gone through
    /// (a connection cut, a write concern not met), nothing written when the server was not
    /// reached or refused it; a read's never unknown; a read-back after a write is written.
    #[test]
    fn a_lost_reply_of_a_write_is_unknown_and_a_refusal_or_a_read_is_nothing() {
        let io = |k| mongodb::error::Error::from(std::io::Error::new(k, "x"));
        let reset = || io(std::io::ErrorKind::ConnectionReset);
        let w = |e, left| Error::database_as("writing", e, left).written();
        assert_eq!(w(reset(), Aftermath::Draw), Written::Unknown);
        assert_eq!(w(reset(), Aftermath::Queue), Written::Unknown);
        assert_eq!(w(reset(), Aftermath::Read), Written::Nothing);
        assert_eq!(w(reset(), Aftermath::Lease), Written::Nothing);
        let custom = mongodb::error::Error::custom("x");
        assert!(
            may_have_landed(&custom),
            "an error of unknown kind may have landed"
        );
        let unknown = Error::database_as("writing sequence \"s\"", reset(), Aftermath::Draw);
        assert!(
            unknown.to_string().contains("the outcome is unknown"),
            "{unknown}"
        );
        assert_eq!(
            Error::timeout("x", Duration::ZERO, Aftermath::Admin).written(),
            Written::Unknown
        );
        assert_eq!(
            Error::timeout("x", Duration::ZERO, Aftermath::Intent).written(),
            Written::Nothing
        );
        let back = Error::timeout("reading sequence \"s\"", Duration::ZERO, Aftermath::Read)
            .after_write("sequence \"s\" reset");
        assert_eq!(back.written(), Written::Done);
        let said = back.to_string();
        assert!(
            said.contains("after sequence \"s\" reset") && !said.contains("nothing was written"),
            "{said}"
        );
        // Refusals stay refusals.
        let gone = Error::NotFound {
            kind: crate::error::Kind::Sequence,
            name: "s".into(),
        }
        .after_write("x");
        assert_eq!(gone.written(), Written::Nothing);
        assert_eq!(
            [Written::Nothing, Written::Done, Written::Unknown].map(Written::as_str),
            ["nothing_written", "written", "unknown"]
        );
    }

    #[test]
    fn a_timeout_says_what_it_left_behind_by_operation() {
        let after = Duration::from_secs(1);
        let read = Error::timeout("reading sequence \"s\"", after, Aftermath::Read).to_string();
        assert!(
            read.contains("nothing is lost") && !read.contains("gap"),
            "{read}"
        );
        let draw = Error::timeout("incrementing sequence \"s\"", after, Aftermath::Draw);
        assert!(draw.to_string().contains("are a gap"), "{draw}");
        let free = Error::timeout("taking a lease", after, Aftermath::GapFree).to_string();
        assert!(
            free.contains("leaves no gap") && !free.contains("are a gap"),
            "{free}"
        );
        assert!(
            free.starts_with("timed out after 1s while taking a lease ("),
            "{free}"
        );
    }

    #[test]
    fn driver_errors_are_one_line_without_debug_fields() {
        let io = std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "Connection reset by peer (os error 104)",
        );
        let e = mongodb::error::Error::from(io);
        assert!(e.to_string().contains("labels:"), "the driver's own form");
        assert_eq!(describe_driver_error(&e), "connection reset by peer");
        let db = Error::database("reading sequence \"s\"", e);
        assert_eq!(
            db.to_string(),
            "database error while reading sequence \"s\": connection reset by peer"
        );
        assert!(std::error::Error::source(&db).is_some());
        assert_eq!(tidy("Kind: DNS failed, labels: {}"), "DNS failed");
        assert_eq!(one_line("a\n  b\tc"), "a b c");
    }
}
