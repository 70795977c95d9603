//! How a command ends: [`Outcome`] when it did not fail, and the exit code of each kind of
//! failure (documented in the guide's command-line chapter, `src/guide/cli.md`).

use dispenser::Error;

pub const OTHER: u8 = 1;
pub const INVALID_INPUT: u8 = 2;
pub const NO_SUCH_SEQUENCE: u8 = 3;
pub const EXHAUSTED: u8 = 4;
pub const DATABASE: u8 = 5;
pub const CONFLICT: u8 = 6;
pub const CORRUPT: u8 = 7;
pub const DUPLICATE: u8 = 8;
pub const QUEUE_FULL: u8 = 9;
pub const NOBODY_WAITING: u8 = 10;
pub const TICKET_NOT_WAITING: u8 = 11;

/// How a command ended when it did not fail.
pub enum Outcome {
    Done,
    /// The benchmark found a duplicate.
    Duplicate,
    /// `check`, `doctor`, `audit`: the exit code their answer carries.
    Exit(u8),
}

/// The exit code of a failure.
pub fn code(e: &Error) -> u8 {
    match e {
        Error::InvalidName { .. } | Error::InvalidSpec { .. } | Error::InvalidArgument { .. } => {
            INVALID_INPUT
        }
        Error::NoSuchSequence { .. } | Error::NoSuchQueue { .. } => NO_SUCH_SEQUENCE,
        Error::Exhausted { .. } => EXHAUSTED,
        Error::Database { .. } | Error::Timeout { .. } => DATABASE,
        Error::AlreadyExists { .. }
        | Error::SpecConflict { .. }
        | Error::WouldGoBackwards { .. }
        | Error::Contention { .. }
        | Error::QueueExists { .. } => CONFLICT,
        Error::QueueFull { .. } => QUEUE_FULL,
        Error::NobodyWaiting { .. } | Error::NothingToRecall { .. } => NOBODY_WAITING,
        Error::TicketNotWaiting { .. } => TICKET_NOT_WAITING,
        Error::CorruptDocument { .. } => CORRUPT,
        _ => OTHER,
    }
}
