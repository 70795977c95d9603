//! The options of a sequence's operations as awaited builders: [`Sequence::reset`] and
//! [`Sequence::alter`] (and their striped twins on
//! [`StripedSequence`](crate::stripe::StripedSequence)) return a value on which the options
//! are set, then `.await`ed — setters named after the option, in the way of the `mongodb`
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
use crate::dispenser::Sequence;
use crate::document::SequenceState;
use crate::error::Result;
use crate::spec::Reset;
use crate::stripe::StripedSequence;

/// The future an action's `.await` runs.
pub(crate) type Action<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

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
