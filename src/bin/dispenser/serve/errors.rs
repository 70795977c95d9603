//! Errors as answered: [`ApiError`] (the JSON body), how a library error maps to a status
//! and kind, and every error answer scrubbed of secrets.
//!
//! 400 is for what the OpenAPI document itself rules out (checked by the service: names,
//! `count`, the shape of a body); 422 for values the document allows but the library refuses
//! (a spec whose fields do not fit together, a format, a count past one cycle, a name of at
//! most 200 characters but more than 200 bytes).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dispenser::Error;
use serde_json::json;

pub(super) use super::json::json_body;
use super::state::AppState;

/// A JSON error reply: `{"error": {"kind", "message"}}`. The `observe` middleware scrubs
/// its message of secrets (the URI's password, the tokens) before it is sent.
#[derive(Clone, Debug)]
pub(super) struct ApiError {
    pub(super) status: StatusCode,
    pub(super) kind: &'static str,
    pub(super) message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
        }
    }

    pub(super) fn invalid_input(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": { "kind": self.kind, "message": self.message } }));
        let mut resp = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        // For the middleware, which renders it again with the message scrubbed.
        resp.extensions_mut().insert(self);
        resp
    }
}

/// The status and kind an error is answered with.
pub(super) fn classify(e: &Error) -> (StatusCode, &'static str) {
    match e {
        // A name the document rules out is 400; one it allows (the library's byte limit) 422.
        Error::InvalidName { name, .. }
            if super::names::check_name(name, false)
                .is_err_and(|e| e.status == StatusCode::BAD_REQUEST) =>
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

/// Every error answer leaves here as the JSON error body, its message scrubbed of the URI's
/// password and the tokens. Errors that axum answers itself (a path or query that does not
/// decode, a wrong method) come as plain text: they get the same body, keeping their headers
/// (such as `Allow`).
pub(super) async fn as_json_error(st: &AppState, resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let mut error = match parts.extensions.remove::<ApiError>() {
        Some(e) => e,
        None => {
            let text = match axum::body::to_bytes(body, 64 * 1024).await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(_) => String::new(),
            };
            let (kind, message) = match status {
                StatusCode::METHOD_NOT_ALLOWED => ("method_not_allowed", None),
                StatusCode::NOT_FOUND => ("not_found", None),
                StatusCode::PAYLOAD_TOO_LARGE => (
                    "payload_too_large",
                    Some(format!(
                        "the request body is larger than {} bytes",
                        super::MAX_BODY
                    )),
                ),
                s if s.is_client_error() => ("bad_request", None),
                _ => ("internal", None),
            };
            let message = if let Some(m) = message {
                m
            } else if text.is_empty() {
                status.canonical_reason().unwrap_or("error").to_owned()
            } else {
                text
            };
            ApiError::new(status, kind, message)
        }
    };
    error.message = st.scrub(&error.message);
    let mut fresh = error.into_response();
    fresh.extensions_mut().remove::<ApiError>();
    for (k, v) in &parts.headers {
        if k != header::CONTENT_TYPE
            && k != header::CONTENT_LENGTH
            && !fresh.headers().contains_key(k)
        {
            fresh.headers_mut().insert(k.clone(), v.clone());
        }
    }
    fresh
}

pub(super) async fn fallback() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

impl AppState {
    /// `text` without the URI's password or any token.
    pub(super) fn scrub(&self, text: &str) -> String {
        let mut out = dispenser::scrub(text, &self.uri);
        for rule in &self.tokens {
            if out.contains(&rule.secret) {
                out = out.replace(&rule.secret, "***");
            }
        }
        out
    }
}

/// The answer to a request cut at `--request-timeout`: 408 `request_timeout` when the client
/// had not sent its body yet, else 503 `timeout`.
pub(super) fn timed_out(reading_body: bool, timeout: std::time::Duration) -> Response {
    let secs = timeout.as_secs_f64();
    let mut resp = if reading_body {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request body did not arrive within the service's --request-timeout ({secs} s)"
            ),
        )
        .into_response()
    } else {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!(
                "the request took longer than the service's --request-timeout ({secs} s); a draw cut short is a gap, never a duplicate; try again"
            ),
        )
        .into_response()
    };
    if reading_body {
        // What is left of the body is not read: the connection cannot carry another request.
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}
