//! How a command ends: [`Outcome`] when it did not fail, and the exit code of each kind of
//! failure (documented in the guide's command-line chapter, `src/guide/cli.md`).

use dispenser::Error;

/// Anything else (unexpected), and `audit`/`doctor`'s "found something".
pub const OTHER: u8 = 1;
/// `bench` found a duplicate. (The exit codes of errors are `Error::exit_code`.)
pub const DUPLICATE: u8 = 8;
/// The answer could not be printed (standard output failed): a command that writes had made
/// its write — stderr names it — and one that only reads wrote nothing.
pub const UNPRINTED: u8 = 14;

/// How a command ended when it did not fail.
pub enum Outcome {
    Done,
    /// The benchmark found a duplicate.
    Duplicate,
    /// `check`, `doctor`, `audit`: the exit code their answer carries.
    Exit(u8),
}

/// The exit code of a failure: the library's one exhaustive mapping (13 when a write's
/// outcome is unknown).
pub fn code(e: &Error) -> u8 {
    e.exit_code()
}
