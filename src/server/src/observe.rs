//! The middleware every answer passes: error answers become the JSON error body with their
//! message scrubbed of secrets, and each request is counted and timed for `/metrics`.

use std::time::Instant;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::errors::ApiError;
use super::json::MAX_BODY;
use super::state::AppState;

/// Counts and times the answer of a request that started at `started`; see
/// [`as_json_error`] for what its error answers become. A server error (5xx) is logged as an
/// error unless tower-http's trace layer is on (it logs them then).
pub(super) async fn observe(
    st: &AppState,
    started: Instant,
    resp: Response,
) -> (Response, Instant) {
    let status = resp.status();
    let resp = if status.is_client_error() || status.is_server_error() {
        // Boxed: reading an error body makes a large future, which every request's future
        // would carry otherwise.
        Box::pin(as_json_error(st, resp)).await
    } else {
        resp
    };
    let status = resp.status();
    let done = Instant::now();
    st.metrics.observe(status.as_u16(), done - started);
    if status.is_server_error() && !traced() {
        tracing::error!(status = status.as_u16(), "answered a server error");
    }
    (resp, done)
}

/// Whether requests are traced by tower-http's trace layer (`DISPENSER_LOG=tower_http=debug`):
/// only then is it in the service's stack (see `mod.rs`), since a span per request costs
/// even when no one reads it.
pub(super) fn traced() -> bool {
    tracing::enabled!(target: "tower_http", tracing::Level::DEBUG)
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
            let (code, message) = match status {
                StatusCode::METHOD_NOT_ALLOWED => ("method_not_allowed", None),
                StatusCode::NOT_FOUND => ("not_found", None),
                StatusCode::PAYLOAD_TOO_LARGE => (
                    "payload_too_large",
                    Some(format!(
                        "the request body is larger than {} bytes",
                        MAX_BODY
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
            ApiError::new(status, code, message)
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
