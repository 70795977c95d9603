//! The middleware every answer passes: error answers become the JSON error body with their
//! message scrubbed of secrets, and each request is counted and timed for `/metrics`.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::errors::ApiError;
use super::json::MAX_BODY;
use super::state::{AppState, Shared};

/// Counts and times the request; see [`as_json_error`] for what its error answers become.
pub(super) async fn observe(State(st): State<Shared>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let resp = as_json_error(&st, next.run(req).await).await;
    st.metrics
        .observe(resp.status().as_u16(), started.elapsed().as_secs_f64());
    resp
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
