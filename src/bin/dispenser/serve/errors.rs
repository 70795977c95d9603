//! Errors as answered: [`ApiError`] (the JSON body), how a library error maps to a status
//! and kind, and every error answer scrubbed of secrets.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dispenser::Error;
use serde::de::DeserializeOwned;
use serde_json::json;

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
        Error::InvalidName { .. } | Error::InvalidSpec { .. } | Error::InvalidArgument { .. } => {
            (StatusCode::BAD_REQUEST, "invalid_input")
        }
        Error::NoSuchSequence { .. } => (StatusCode::NOT_FOUND, "no_such_sequence"),
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

pub(super) fn bad_json(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected Content-Type: application/json",
        ),
        other => ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", other.body_text()),
    }
}

/// The JSON body of `req`, read only now (after the token was checked).
pub(super) async fn json_body<T: DeserializeOwned>(req: Request) -> Result<T, ApiError> {
    let Json(body) = Json::<T>::from_request(req, &()).await.map_err(bad_json)?;
    Ok(body)
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
                // Only the request timeout answers 503 without an error of ours.
                StatusCode::SERVICE_UNAVAILABLE => (
                    "timeout",
                    Some(
                        "the request took longer than the service's --request-timeout; a draw cut short is a gap, never a duplicate; try again"
                            .to_owned(),
                    ),
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
