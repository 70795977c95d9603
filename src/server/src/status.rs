//! The HTTP status of each of the library's error codes (`dispenser::Error::code`): the
//! table of the guide's service chapter. Every code the library has is mapped here
//! explicitly; a code this table does not know is a 500 and fails its unit test.

use axum::http::StatusCode;

/// Each error code and the status it is answered with.
const STATUSES: &[(&str, StatusCode)] = &[
    ("invalid_input", StatusCode::UNPROCESSABLE_ENTITY),
    ("no_such_sequence", StatusCode::NOT_FOUND),
    ("no_such_queue", StatusCode::NOT_FOUND),
    ("already_exists", StatusCode::CONFLICT),
    ("spec_conflict", StatusCode::CONFLICT),
    ("would_go_backwards", StatusCode::CONFLICT),
    ("would_remap", StatusCode::CONFLICT),
    ("queue_in_use", StatusCode::CONFLICT),
    ("lease_held", StatusCode::CONFLICT),
    ("exhausted", StatusCode::CONFLICT),
    ("queue_full", StatusCode::CONFLICT),
    ("nobody_waiting", StatusCode::CONFLICT),
    ("ticket_not_waiting", StatusCode::CONFLICT),
    ("no_ticket_shown", StatusCode::CONFLICT),
    ("contention", StatusCode::SERVICE_UNAVAILABLE),
    ("database", StatusCode::SERVICE_UNAVAILABLE),
    ("timeout", StatusCode::SERVICE_UNAVAILABLE),
    ("closed", StatusCode::SERVICE_UNAVAILABLE),
    ("corrupt_document", StatusCode::INTERNAL_SERVER_ERROR),
    ("business_write", StatusCode::INTERNAL_SERVER_ERROR),
];

/// The status of error code `code`: 422 invalid input (a name the OpenAPI document itself
/// rules out is 400, which `classify` decides), 404 not found, 409 a state that refuses, 503
/// try again, 500 a corrupt document or a failed business write; `None` for a code not in
/// the table (answered 500).
pub(crate) fn status_of(code: &str) -> Option<StatusCode> {
    STATUSES.iter().find(|(c, _)| *c == code).map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_of_the_library_has_its_own_status() {
        for code in dispenser::error::CODES {
            assert!(status_of(code).is_some(), "no status for {code:?}");
        }
        // Nothing in the table the library does not have.
        for (code, _) in STATUSES {
            assert!(dispenser::error::CODES.contains(code), "{code:?}");
        }
    }

    /// The table of the guide's service chapter.
    #[test]
    fn the_statuses_are_the_guides() {
        let guide = include_str!("../../guide/service.md");
        for (code, status) in STATUSES {
            let row = guide
                .lines()
                .find(|l| l.contains(&format!("`{code}`")) && l.contains(status.as_str()));
            assert!(row.is_some(), "{code} {status} is not in the guide's table");
        }
    }
}
