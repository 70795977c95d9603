//! How a library error is answered: its status, code and kind.
//!
//! 400 is for what the OpenAPI document itself rules out (checked by the service: names,
//! `count`, the shape of a body); 422 for values the document allows but the library refuses
//! (a spec whose fields do not fit together, a format, a count past one cycle, a name of at
//! most 200 characters but more than 200 bytes).

use axum::http::StatusCode;
use dispenser::Error;

use super::errors::ApiError;
use super::names::check_name;
use super::status::status_of;

/// The status and code an error is answered with: the status of its code (`status.rs`, every
/// code of `dispenser::error::CODES`; an unknown one 500), except that a name the OpenAPI
/// document itself rules out is 400 (one it allows, refused by the library's byte limit, stays
/// 422).
pub(super) fn classify(e: &Error) -> (StatusCode, &'static str) {
    if let Error::InvalidName { name, .. } = e
        && check_name(name, false).is_err_and(|e| e.status == StatusCode::BAD_REQUEST)
    {
        return (StatusCode::BAD_REQUEST, "invalid_input");
    }
    let status = status_of(e.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, e.code())
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let (status, code) = classify(&e);
        let mut answer = ApiError::new(status, code, e.to_string());
        answer.kind = e.kind().as_str();
        answer.written = e.written().as_str();
        answer
    }
}
