//! How a command ends: [`Outcome`] when it did not fail, and the exit code of each kind of
//! failure (documented in the guide's command-line chapter, `src/guide/cli.md`).

use dispenser::Error;
use dispenser::error::Written;

/// Anything else (unexpected), and `audit`/`doctor`'s "found something".
pub const OTHER: u8 = 1;
/// `bench` found a duplicate. (The exit codes of errors are [`code`]'s.)
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

/// Unknown outcome: a write was sent and its answer never came.
pub const UNKNOWN: u8 = 13;

/// Each error code of the library (`dispenser::error::CODES`) and its exit code when nothing
/// was written: the table of the guide's command-line chapter.
const CODES: &[(&str, u8)] = &[
    ("invalid_input", 2),
    ("no_such_sequence", 3),
    ("no_such_queue", 3),
    ("exhausted", 4),
    ("database", 5),
    ("timeout", 5),
    ("closed", 5),
    ("already_exists", 6),
    ("spec_conflict", 6),
    ("would_go_backwards", 6),
    ("contention", 6),
    ("would_remap", 6),
    ("queue_in_use", 6),
    ("lease_held", 6),
    ("corrupt_document", 7),
    ("queue_full", 9),
    ("nobody_waiting", 10),
    ("no_ticket_shown", 10),
    ("ticket_not_waiting", 11),
    ("business_write", 12),
];

/// The exit code of a failure: 13 when its write's outcome is unknown, 14 when it was
/// written and its answer could not be read back, else its code's (1 for a code the table
/// does not know, which its unit test rules out).
pub fn code(e: &Error) -> u8 {
    match e.written() {
        Written::Unknown => return UNKNOWN,
        Written::Done => return UNPRINTED,
        _ => {}
    }
    of_code(e.code()).unwrap_or(OTHER)
}

/// The exit code of error code `code` when nothing was written.
fn of_code(code: &str) -> Option<u8> {
    CODES.iter().find(|(c, _)| *c == code).map(|(_, x)| *x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_of_the_library_has_its_own_exit_code() {
        for code in dispenser::error::CODES {
            assert!(of_code(code).is_some(), "no exit code for {code:?}");
        }
        for (code, _) in CODES {
            assert!(dispenser::error::CODES.contains(code), "{code:?}");
        }
    }

    /// Every exit code is a row of the guide's table.
    #[test]
    fn the_exit_codes_are_the_guides() {
        let guide = include_str!("../../guide/cli.md");
        for x in CODES
            .iter()
            .map(|(_, x)| *x)
            .chain([OTHER, DUPLICATE, UNKNOWN, UNPRINTED])
        {
            assert!(
                guide.lines().any(|l| l.starts_with(&format!("| {x} |"))),
                "exit code {x} is not in the guide's table"
            );
        }
    }

    #[test]
    fn an_unknown_outcome_or_an_unread_answer_has_its_own_code() {
        let unknown = Error::Timeout {
            context: "x".into(),
            after: std::time::Duration::ZERO,
            written: Written::Unknown,
        };
        assert_eq!(code(&unknown), 13);
        let refused = Error::InvalidArgument {
            what: "x".into(),
            reason: "y".into(),
        };
        assert_eq!(code(&refused), 2);
    }
}
