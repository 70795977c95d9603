//! How a library error is answered: its status and kind.
//!
//! 400 is for what the OpenAPI document itself rules out (checked by the service: names,
//! `count`, the shape of a body); 422 for values the document allows but the library refuses
//! (a spec whose fields do not fit together, a format, a count past one cycle, a name of at
//! most 200 characters but more than 200 bytes).

use axum::http::StatusCode;
use dispenser::Error;

use super::errors::ApiError;
use super::names::check_name;

/// The status and kind an error is answered with.
pub(super) fn classify(e: &Error) -> (StatusCode, &'static str) {
    match e {
        // A name the document rules out is 400; one it allows (the library's byte limit) 422.
        Error::InvalidName { name, .. }
            if check_name(name, false).is_err_and(|e| e.status == StatusCode::BAD_REQUEST) =>
        {
            (StatusCode::BAD_REQUEST, "invalid_input")
        }
        // The request is as the document describes it; the values do not fit together (or
        // not with the sequence's shape).
        Error::InvalidName { .. } | Error::InvalidSpec { .. } | Error::InvalidArgument { .. } => {
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input")
        }
        Error::NoSuchSequence { .. } => (StatusCode::NOT_FOUND, "no_such_sequence"),
        Error::NoSuchQueue { .. } => (StatusCode::NOT_FOUND, "no_such_queue"),
        Error::QueueFull { .. } => (StatusCode::CONFLICT, "queue_full"),
        Error::NobodyWaiting { .. } => (StatusCode::CONFLICT, "nobody_waiting"),
        Error::TicketNotWaiting { .. } => (StatusCode::CONFLICT, "ticket_not_waiting"),
        Error::NothingToRecall { .. } => (StatusCode::CONFLICT, "nothing_to_recall"),
        Error::QueueExists { .. } => (StatusCode::CONFLICT, "already_exists"),
        Error::Exhausted { .. } => (StatusCode::CONFLICT, "exhausted"),
        Error::AlreadyExists { .. } => (StatusCode::CONFLICT, "already_exists"),
        Error::SpecConflict { .. } => (StatusCode::CONFLICT, "spec_conflict"),
        Error::WouldGoBackwards { .. } => (StatusCode::CONFLICT, "would_go_backwards"),
        Error::Contention { .. } => (StatusCode::SERVICE_UNAVAILABLE, "contention"),
        // A block client closed under a request; the service's own admin operations wait for
        // draws, so only a client closed by shutdown gets here: try again.
        Error::Closed { .. } => (StatusCode::SERVICE_UNAVAILABLE, "closed"),
        Error::CorruptDocument { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "corrupt_document"),
        Error::Database { .. } | Error::Timeout { .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "database")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let (status, kind) = classify(&e);
        ApiError::new(status, kind, e.to_string())
    }
}
