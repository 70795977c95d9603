//! Errors as answered: [`ApiError`] (the JSON body), the answer to an unknown endpoint and
//! to a request cut at `--request-timeout`. How a library error maps to a status and kind is
//! in `classify.rs`; every error answer is scrubbed of secrets on its way out (`observe.rs`).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use serde::Serialize;
use utoipa::ToSchema;

/// A JSON error reply: `{"error": {"kind", "message", "outcome"}}`. The `observe` middleware
/// scrubs its message of secrets (the URI's password, the tokens) before it is sent.
#[derive(Clone, Debug)]
pub(super) struct ApiError {
    pub(super) status: StatusCode,
    pub(super) kind: &'static str,
    pub(super) message: String,
    /// What the request left written: `nothing_written`, or `unknown` when a write it sent
    /// lost its answer (`dispenser::error::Written`).
    pub(super) outcome: &'static str,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            outcome: dispenser::error::Written::Nothing.as_str(),
        }
    }

    pub(super) fn invalid_input(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(ErrorBody {
            error: ErrorDetail {
                kind: self.kind.to_owned(),
                message: self.message.clone(),
                outcome: Some(self.outcome.to_owned()),
            },
        });
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

pub(super) async fn fallback() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

/// The answer to a request cut at `--request-timeout`: 408 `request_timeout` when the client
/// had not sent its body yet (nothing written), else 503 `timeout` (its outcome unknown: it
/// may have been cut during a write).
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
        let mut cut = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!(
                "the request took longer than the service's --request-timeout ({secs} s); its outcome is unknown (a draw cut short is a gap, never a duplicate); try again"
            ),
        );
        cut.outcome = dispenser::error::Written::Unknown.as_str();
        cut.into_response()
    };
    if reading_body {
        // What is left of the body is not read: the connection cannot carry another request.
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Every error answer: `{"error": {"kind", "message", "outcome"}}`.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub(super) struct ErrorBody {
    pub(super) error: ErrorDetail,
}

/// What went wrong: a stable `kind` (`invalid_input`, `no_such_sequence`, `exhausted`, …)
/// and a readable message.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub(super) struct ErrorDetail {
    pub(super) kind: String,
    pub(super) message: String,
    /// What the request left written: `nothing_written`, or `unknown` when a write it sent
    /// lost its answer (look before making it again where that matters). Every error answer
    /// has it; a document shown in a listing does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) outcome: Option<String>,
}
