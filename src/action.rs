//! The options of a sequence's operations as awaited builders: [`Dispenser::create`],
//! [`Dispenser::ensure`], [`Sequence::reset`] and [`Sequence::alter`] (and their striped
//! twins on [`StripedSequence`](crate::stripe::StripedSequence)) return a value on which the
//! options are set, then `.await`ed — setters named after the option, in the way of the `mongodb`
//! driver's actions:
//!
//! ```no_run
//! # async fn f(tickets: dispenser::Sequence) -> dispenser::Result<()> {
//! use dispenser::sequence::Alter;
//! tickets.reset(1).force(true).await?; // backwards on purpose: numbers issued come again
//! tickets.alter(Alter::default().with_max(999)).force(true).await?;
//! # Ok(()) }
//! ```
//!
//! Nothing is sent before the `.await`; a builder dropped unawaited does nothing.

use std::future::{Future, IntoFuture};
use std::pin::Pin;

use crate::alter::Alter;
use crate::dispenser::{Dispenser, Sequence};
use crate::document::SequenceState;
use crate::error::Result;
use crate::format::Format;
use crate::spec::{Reset, Spec};
use crate::stripe::StripedSequence;

/// The future an action's `.await` runs.
pub(crate) type Action<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// A creation of a sequence ([`Dispenser::create`]): `.await` it for the new sequence;
/// [`CreateSequence::format`] gives it a serial format in the same insert.
#[must_use = "a create does nothing until it is awaited"]
#[derive(Debug)]
pub struct CreateSequence<'a> {
    dispenser: &'a Dispenser,
    name: &'a str,
    spec: Spec,
    format: Option<Format>,
}

impl<'a> CreateSequence<'a> {
    /// The serial format of the sequence's numbers (`INV-{scope}-{n:06}`), written in the
    /// same insert as the sequence (`None`: none). Defaults to none.
    pub fn format(mut self, format: impl Into<Option<Format>>) -> Self {
        self.format = format.into();
        self
    }
}

impl<'a> IntoFuture for CreateSequence<'a> {
    type Output = Result<Sequence>;
    type IntoFuture = Action<'a, Sequence>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.dispenser.create_now(self.name, self.spec, self.format))
    }
}

/// An ensure of a sequence ([`Dispenser::ensure`]): `.await` it for the sequence, made or
/// opened; [`EnsureSequence::format`] as for a create (and compared with the stored one).
#[must_use = "an ensure does nothing until it is awaited"]
#[derive(Debug)]
pub struct EnsureSequence<'a> {
    dispenser: &'a Dispenser,
    name: &'a str,
    spec: Spec,
    format: Option<Format>,
}

impl<'a> EnsureSequence<'a> {
    /// The serial format, written with a new sequence and compared with an existing one's:
    /// a sequence stored with another format, or with one when none is given here, is an
    /// [`Error::SpecConflict`](crate::Error::SpecConflict) (`None`: none). Defaults to none.
    pub fn format(mut self, format: impl Into<Option<Format>>) -> Self {
        self.format = format.into();
        self
    }
}

impl<'a> IntoFuture for EnsureSequence<'a> {
    type Output = Result<Sequence>;
    type IntoFuture = Action<'a, Sequence>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.dispenser.ensure_now(self.name, self.spec, self.format))
    }
}

/// A reset of a sequence ([`Sequence::reset`]): refused if it would move the sequence
/// backwards, unless [`ResetSequence::force`]. `.await` it for the state afterwards.
#[must_use = "a reset does nothing until it is awaited"]
#[derive(Debug)]
pub struct ResetSequence<'a> {
    sequence: &'a Sequence,
    reset: Reset,
}

impl<'a> ResetSequence<'a> {
    pub(crate) fn new(sequence: &'a Sequence, next: i64) -> Self {
        ResetSequence {
            sequence,
            reset: Reset::to(next),
        }
    }

    /// With `true`, moves the sequence backwards too: numbers already issued come again.
    /// Defaults to false (refused with [`Error::WouldGoBackwards`](crate::Error::WouldGoBackwards)).
    pub fn force(mut self, force: bool) -> Self {
        self.reset.force = force;
        self
    }
}

impl<'a> IntoFuture for ResetSequence<'a> {
    type Output = Result<SequenceState>;
    type IntoFuture = Action<'a, SequenceState>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            self.sequence
                .dispenser()
                .reset(self.sequence.name(), self.reset)
                .await
        })
    }
}

/// A reset of every stripe ([`StripedSequence::reset`]), refused if it would move the
/// striped sequence backwards, unless [`ResetStriped::force`]. `.await` it for the stripes'
/// states.
#[must_use = "a reset does nothing until it is awaited"]
#[derive(Debug)]
pub struct ResetStriped<'a> {
    striped: &'a StripedSequence,
    reset: Reset,
}

impl<'a> ResetStriped<'a> {
    pub(crate) fn new(striped: &'a StripedSequence, next: i64) -> Self {
        ResetStriped {
            striped,
            reset: Reset::to(next),
        }
    }

    /// As [`ResetSequence::force`]. Defaults to false.
    pub fn force(mut self, force: bool) -> Self {
        self.reset.force = force;
        self
    }
}

impl<'a> IntoFuture for ResetStriped<'a> {
    type Output = Result<Vec<SequenceState>>;
    type IntoFuture = Action<'a, Vec<SequenceState>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.striped.reset_now(self.reset))
    }
}

/// A live change of a sequence's shape ([`Sequence::alter`]): what would repeat or strand
/// numbers is refused unless [`AlterSequence::force`]. `.await` it for the state afterwards.
#[must_use = "an alter does nothing until it is awaited"]
#[derive(Debug)]
pub struct AlterSequence<'a> {
    sequence: &'a Sequence,
    change: Alter,
}

impl<'a> AlterSequence<'a> {
    pub(crate) fn new(sequence: &'a Sequence, change: Alter) -> Self {
        AlterSequence { sequence, change }
    }

    /// With `true`, allows what repeats or strands numbers on purpose: a bound that leaves
    /// the last issued number outside it (a non-cyclic sequence is then exhausted at once —
    /// its value stays where it is, so a bound raised again later continues after it — and
    /// a cyclic one wraps on its next number, ending its cycle early), and turning `cycle`
    /// on for a non-cyclic sequence (after its wrap it issues again numbers it issued
    /// before). A step of the other sign is refused even with force. Defaults to false.
    pub fn force(mut self, force: bool) -> Self {
        self.change.force = force;
        self
    }
}

impl<'a> IntoFuture for AlterSequence<'a> {
    type Output = Result<SequenceState>;
    type IntoFuture = Action<'a, SequenceState>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.sequence.alter_now(self.change))
    }
}

/// A live change of every stripe ([`StripedSequence::alter`]); [`AlterStriped::force`] as
/// for a sequence. `.await` it for the stripes' states.
#[must_use = "an alter does nothing until it is awaited"]
#[derive(Debug)]
pub struct AlterStriped<'a> {
    striped: &'a StripedSequence,
    change: Alter,
}

impl<'a> AlterStriped<'a> {
    pub(crate) fn new(striped: &'a StripedSequence, change: Alter) -> Self {
        AlterStriped { striped, change }
    }

    /// As [`AlterSequence::force`]. Defaults to false.
    pub fn force(mut self, force: bool) -> Self {
        self.change.force = force;
        self
    }
}

impl<'a> IntoFuture for AlterStriped<'a> {
    type Output = Result<Vec<SequenceState>>;
    type IntoFuture = Action<'a, Vec<SequenceState>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.striped.alter_now(self.change))
    }
}

// The operations that return these builders live here, above the handles they act on (the
// handles' files do not name the builders: no import circle).
impl Dispenser {
    /// Creates a new sequence, with a serial format if [`CreateSequence::format`] is given
    /// (written in the same insert). Returns a [`CreateSequence`] to `.await`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) /
    /// [`Error::InvalidSpec`](crate::Error::InvalidSpec) (nothing written),
    /// [`Error::AlreadyExists`](crate::Error::AlreadyExists) when the name is taken,
    /// [`Error::Database`](crate::Error::Database).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the sequence created or not (see
    /// [`Dispenser::open`]) and its history entry `pending` (see [`history`](crate::history));
    /// it issues no number. [`Dispenser::ensure`] with the same spec and format then opens
    /// what was created.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::{Format, Spec};
    /// let tickets = d.create("tickets", Spec::default().with_max(99).with_cycle(true)).await?;
    /// assert_eq!(tickets.next().await?, 1);
    /// let invoices = d
    ///     .create("invoices", Spec::default())
    ///     .format(Format::parse("INV-{n:06}")?)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn create<'a>(&'a self, name: &'a str, spec: Spec) -> CreateSequence<'a> {
        CreateSequence {
            dispenser: self,
            name,
            spec,
            format: None,
        }
    }

    /// Creates the sequence if it does not exist, or opens it if everything a create would
    /// write is equal: the start, step, bounds, cycle and format
    /// ([`EnsureSequence::format`]; none given and one stored is a difference). Safe when
    /// many processes race: one insert wins, the others read what it wrote. Returns an
    /// [`EnsureSequence`] to `.await`.
    ///
    /// The start compared is the one recorded when the sequence was created (not where it
    /// stands now), so every process may call `ensure` with the same spec for ever; a
    /// sequence created by a version that did not record its start is compared without it.
    /// A format set later with [`Sequence::alter`] is compared as well: ensure with the
    /// format it has now.
    ///
    /// # Errors
    ///
    /// [`Error::SpecConflict`](crate::Error::SpecConflict) (kind
    /// [`ErrorKind::Conflict`](crate::error::ErrorKind::Conflict), nothing written) when the stored
    /// sequence has another start, step, min, max, cycle or format, or is a stripe of a
    /// striped sequence — its message names each setting that differs, stored and asked;
    /// plus those of [`Dispenser::create`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the sequence created or not and, if a creation
    /// had begun, its history entry `pending` (see [`history`](crate::history)); it issues no
    /// number. Call it again: it opens what was created.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let a = d.ensure("invoices", dispenser::Spec::default()).await?;
    /// let b = d.ensure("invoices", dispenser::Spec::default()).await?; // same sequence
    /// assert!(a.next().await? < b.next().await?);
    /// # Ok(()) }
    /// ```
    pub fn ensure<'a>(&'a self, name: &'a str, spec: Spec) -> EnsureSequence<'a> {
        EnsureSequence {
            dispenser: self,
            name,
            spec,
            format: None,
        }
    }
}

impl Sequence {
    /// Sets the number the sequence issues next to `next` (CAS-safe against concurrent
    /// writers). Moving a sequence backwards (so that numbers already issued would come again)
    /// needs [`ResetSequence::force`](crate::sequence::ResetSequence::force). A stripe of a striped sequence only accepts a `next` of its own residue
    /// class (use [`StripedSequence::reset`](crate::stripe::StripedSequence::reset) to move all
    /// stripes).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when `next` lies outside the bounds (or outside a stripe's
    /// class), [`Error::WouldGoBackwards`](crate::Error::WouldGoBackwards)
    /// without `force`, [`Error::Contention`](crate::Error::Contention), plus those of [`Sequence::peek`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the reset made or not (see [`Sequence::peek`])
    /// and its history entry `pending` (see [`history`](crate::history)); it issues no number.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(tickets: dispenser::Sequence) -> dispenser::Result<()> {
    /// let state = tickets.reset(1).force(true).await?; // the counter restarts at 1
    /// assert_eq!(state.next_number(), Some(1));
    /// # Ok(()) }
    /// ```
    pub fn reset(&self, next: i64) -> ResetSequence<'_> {
        ResetSequence::new(self, next)
    }

    /// Changes the shape of a live sequence — its step, bounds, cycle and format — while
    /// other processes draw from it (see [`Alter`]). Returns the state afterwards.
    ///
    /// After `alter` returns, every number reserved from then on follows the new shape: the
    /// change is one compare-and-set on the exact state it was computed from, and every
    /// other write carries the shape it assumed in its filter, so nothing computed from the
    /// old shape is written afterwards. Numbers already reserved in blocks are still handed
    /// out by their block clients.
    ///
    /// A sequence that has not reached a raised lower bound moves forward to it. A bound that
    /// leaves the last issued number outside, and turning `cycle` on for a non-cyclic
    /// sequence, are refused unless [`AlterSequence::force`](crate::sequence::AlterSequence::force); a step of the other sign is always
    /// refused (every number on the other side was issued: create a new sequence).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when nothing is to change; [`Error::InvalidSpec`](crate::Error::InvalidSpec) when the
    /// new shape is invalid (step 0, `min ≥ max`), flips the step's sign, would strand the
    /// last issued number or turn `cycle` on without `force`, or breaks a stripe's residue
    /// class (nothing is written);
    /// [`Error::Contention`](crate::Error::Contention), plus those of [`Sequence::peek`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the change applied or not (check with
    /// [`Sequence::peek`]); it never issues a number.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(tickets: dispenser::Sequence) -> dispenser::Result<()> {
    /// use dispenser::sequence::Alter;
    /// let state = tickets.alter(Alter::default().with_max(999)).await?;
    /// assert_eq!(state.max, 999);
    /// # Ok(()) }
    /// ```
    pub fn alter(&self, change: Alter) -> AlterSequence<'_> {
        AlterSequence::new(self, change)
    }
}

impl StripedSequence {
    /// Resets every stripe so that the striped sequence issues numbers from `next` on: each
    /// stripe's next number becomes the first of its own residue class at or beyond `next`,
    /// so the stripes stay disjoint. Moving backwards needs [`ResetStriped::force`](crate::sequence::ResetStriped::force), as with
    /// [`Sequence::reset`](crate::Sequence::reset). Returns the stripes' states.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when a stripe has no number of its class between `next`
    /// and its bound (nothing is written then), plus those of [`Sequence::reset`](crate::Sequence::reset); on an
    /// error after some stripes moved, calling it again completes the reset.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave some stripes reset and others not (see
    /// [`StripedSequence::peek`]) and the history entry of the stripe being reset `pending`
    /// (see [`history`](crate::history)); it issues no number. Call it again to complete the
    /// reset.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// ids.reset(5000).await?;
    /// # Ok(()) }
    /// ```
    pub fn reset(&self, next: i64) -> ResetStriped<'_> {
        ResetStriped::new(self, next)
    }

    /// Alters every stripe (see [`Sequence::alter`](crate::Sequence::alter)): its bounds (with [`AlterStriped::force`](crate::sequence::AlterStriped::force) as for a sequence). The change is
    /// planned for every stripe first, from its current state, so a change any stripe refuses
    /// writes nothing at all; then each stripe is altered, each one compare-and-set on its
    /// own document. (A draw that moves a stripe between the plan and its write can still
    /// make that stripe refuse — a bound that would strand its new last number — after
    /// earlier stripes changed; calling it again with `force`, or with the old bound, settles
    /// it. No number repeats either way.) Returns the stripes' states.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when nothing is to change or a format is given (a striped
    /// sequence's numbers are not in order: it has none); [`Error::InvalidSpec`](crate::Error::InvalidSpec) when any
    /// stripe refuses the change (a new step, cycle, a bound that strands a stripe's last
    /// number without `force`, `min ≥ max`), nothing written; plus those of
    /// [`StripedSequence::peek`] and [`Sequence::alter`](crate::Sequence::alter).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some stripes altered and others not (check with
    /// [`StripedSequence::peek`]); it never issues a number.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// use dispenser::sequence::Alter;
    /// let stripes = ids.alter(Alter::default().with_max(1_000_000_000)).await?;
    /// assert!(stripes.iter().all(|s| s.max == 1_000_000_000));
    /// # Ok(()) }
    /// ```
    pub fn alter(&self, change: Alter) -> AlterStriped<'_> {
        AlterStriped::new(self, change)
    }
}
