//! The one error type of the crate.
//!
//! Every failure a caller may want to branch on is its own variant, so code can `match` on
//! [`Error`] instead of parsing messages. Messages name the sequence and the value at fault,
//! and never contain credentials (URIs are redacted before they reach an error).

use std::time::Duration;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while creating, reading or drawing from a sequence.
///
/// The enum is `#[non_exhaustive]`: match the variants you care about and keep a `_` arm.
///
/// # Example
///
/// ```
/// use dispenser::{Error, Spec};
///
/// let err = Spec::default().with_step(0).validate("orders").unwrap_err();
/// assert!(matches!(err, Error::InvalidSpec { .. }));
/// assert_eq!(err.to_string(), "invalid spec for sequence \"orders\": step must not be 0");
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The sequence does not exist (it was never created, or it was deleted).
    #[error("no such sequence {name:?}")]
    NoSuchSequence {
        /// The sequence's name.
        name: String,
    },

    /// `create` was asked for a name that already exists.
    #[error("sequence {name:?} already exists")]
    AlreadyExists {
        /// The sequence's name.
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

    /// The sequence name is not acceptable. Nothing was written.
    #[error("invalid sequence name {name:?}: {reason}")]
    InvalidName {
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

    /// `ensure` found a sequence of that name with a different spec. Nothing was written.
    #[error(
        "sequence {name:?} exists with a different spec: stored {stored}, requested {requested}"
    )]
    SpecConflict {
        /// The sequence's name.
        name: String,
        /// The stored spec, rendered.
        stored: String,
        /// The requested spec, rendered.
        requested: String,
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
    #[error("corrupt document for sequence {name:?}: field {field:?} {problem}")]
    CorruptDocument {
        /// The sequence's name.
        name: String,
        /// The field at fault.
        field: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A database operation did not finish within [`Options::operation_timeout`]. Whether
    /// the write happened is unknown; numbers it may have reserved are a gap, never issued.
    ///
    /// [`Options::operation_timeout`]: crate::Options::operation_timeout
    #[error(
        "timed out after {after:?} while {context} (the outcome is unknown; any numbers it reserved are a gap)"
    )]
    Timeout {
        /// What the library was doing.
        context: String,
        /// The configured timeout.
        after: Duration,
    },

    /// The block client was closed (see [`BlockSequence::close`]); it issues nothing more.
    ///
    /// [`BlockSequence::close`]: crate::BlockSequence::close
    #[error("the block client of sequence {name:?} is closed; it issues no more numbers")]
    Closed {
        /// The sequence's name.
        name: String,
    },

    /// The driver reported an error (unreachable server, network failure, write-concern
    /// failure, …). When this happens on the write that would have reserved numbers, those
    /// numbers are a gap: they are never issued by anyone.
    #[error("database error while {context}: {source}")]
    Database {
        /// What the library was doing.
        context: String,
        /// The driver's error.
        #[source]
        source: mongodb::error::Error,
    },
}

impl Error {
    /// True for [`Error::Exhausted`].
    pub fn is_exhausted(&self) -> bool {
        matches!(self, Error::Exhausted { .. })
    }

    /// True for [`Error::Database`] and [`Error::Timeout`]: the server could not be reached,
    /// refused the operation, or did not answer in time.
    pub fn is_database(&self) -> bool {
        matches!(self, Error::Database { .. } | Error::Timeout { .. })
    }

    /// True for errors caused by the caller's input (names, specs, arguments): nothing was written.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidSpec { .. } | Error::InvalidName { .. } | Error::InvalidArgument { .. }
        )
    }

    pub(crate) fn database(context: impl Into<String>, source: mongodb::error::Error) -> Self {
        Error::Database {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn invalid_argument(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            what: what.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn corrupt(name: &str, field: &str, problem: impl Into<String>) -> Self {
        Error::CorruptDocument {
            name: name.to_owned(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }
}
