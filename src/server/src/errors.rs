//! Errors as answered: [`ApiError`] (the JSON body), the answer to an unknown endpoint and
//! to a request cut at `--request-timeout`. How a library error maps to a status and kind is
//! in `classify.rs`; every error answer is scrubbed of secrets on its way out (`observe.rs`).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use serde::Serialize;
use utoipa::ToSchema;

/// A JSON error reply: `{"error": {"code", "kind", "message", "written"}}`. The `observe`
/// middleware scrubs its message of secrets (the URI's password, the tokens) before it is sent.
#[derive(Clone, Debug)]
pub(super) struct ApiError {
    pub(super) status: StatusCode,
    /// The stable code: a library error's `Error::code`, or the service's own
    /// (`unauthorized`, `too_many_takes`, …).
    pub(super) code: &'static str,
    /// The kind, as every surface names it: a library error's `ErrorKind::as_str`, else the
    /// kind of the status ([`kind_of_status`]).
    pub(super) kind: &'static str,
    pub(super) message: String,
    /// What the request left written: `nothing_written`, or `unknown` when a write it sent
    /// lost its answer (`dispenser::error::Written`).
    pub(super) written: &'static str,
}

/// The kind of an error the service makes itself (not the library's), from its status: the
/// library's kind that says the same (`invalid_input` for a request it refuses, `not_found`,
/// `conflict`, `unavailable` for another 5xx), or one of the service's own four:
/// `unauthorized` (401), `forbidden` (403), `too_many_requests` (429), `internal` (500: a bug
/// of the service).
pub(super) fn kind_of_status(status: StatusCode) -> &'static str {
    use dispenser::error::ErrorKind;
    match status.as_u16() {
        401 => "unauthorized",
        403 => "forbidden",
        429 => "too_many_requests",
        500 => "internal",
        404 => ErrorKind::NotFound.as_str(),
        409 => ErrorKind::Conflict.as_str(),
        s if s >= 500 => ErrorKind::Unavailable.as_str(),
        _ => ErrorKind::InvalidInput.as_str(),
    }
}

impl ApiError {
    /// An error of the service's own, with its status and code (its kind the status's).
    pub(super) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            kind: kind_of_status(status),
            message: message.into(),
            written: dispenser::error::Written::Nothing.as_str(),
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
                code: self.code.to_owned(),
                kind: self.kind.to_owned(),
                message: self.message.clone(),
                written: Some(self.written.to_owned()),
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
        cut.written = dispenser::error::Written::Unknown.as_str();
        cut.into_response()
    };
    if reading_body {
        // What is left of the body is not read: the connection cannot carry another request.
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Every error answer: `{"error": {"code", "kind", "message", "written"}}`.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub(super) struct ErrorBody {
    pub(super) error: ErrorDetail,
}

/// What went wrong: a stable `code` (`invalid_input`, `no_such_sequence`, `exhausted`, …), the
/// `kind` every surface names the same (`invalid_input`, `not_found`, `conflict`, … — the
/// library's `ErrorKind` in snake_case — or the service's own `unauthorized`, `forbidden`,
/// `too_many_requests`, `internal`) and a readable message.
#[derive(Serialize, ToSchema, Clone, Debug)]
pub(super) struct ErrorDetail {
    /// The stable code: branch on it.
    pub(super) code: String,
    /// The kind of error, as the library, Python and Node.js name it.
    pub(super) kind: String,
    pub(super) message: String,
    /// What the request left written: `nothing_written`, `written` (the write was made; its
    /// answer could not be read back) or `unknown` when a write it sent lost its answer (look
    /// before making it again where that matters). Every error answer has it; a document
    /// shown in a listing does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) written: Option<String>,
}
