//! Gap-free sequences through the service: status (with the lease and the voided numbers),
//! void, release (ending a stopped holder's lease at once) and the longest lease. Issuing
//! stays with the application: the business write that uses a number is its own (see
//! `dispenser::gapless`).
//!
//! Every endpoint checks the name as the sequence endpoints do (`names.rs`), and an answer
//! tells only what the token may read: a token that may void or release but not `peek` the
//! sequence is never told the next number (nor the status) — a refused number is "not the
//! one that may be voided", and a void answers what it voided.

use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use dispenser::Error;
use dispenser::gapless::{Gapless, Released};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::errors::ApiError;
use super::json::json_body;
use super::names::check_name_of;
use super::schemas::ErrorBody;
use super::state::Shared;
use super::tokens::Op;

/// What the messages call a name.
const NOUN: &str = "gap-free sequence";

/// The longest lease, in milliseconds, that an admin may set (a day).
pub(super) const MAX_LEASE_MS: u64 = 86_400_000;

/// The gap-free endpoints (merged into the service's router).
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1/gapless/{name}", get(status))
        .route("/v1/gapless/{name}/void", post(void))
        .route("/v1/gapless/{name}/release", post(release))
        .route("/v1/gapless/{name}/max-lease", post(max_lease))
}

/// Whether the request's token may read (`peek`) the sequence `name`.
fn may_peek(st: &Shared, headers: &HeaderMap, name: &str) -> bool {
    st.authorize(headers, Op::Peek, Some(name)).is_ok()
}

/// The error of a void or release of `number`, as told to a token: one that may not `peek`
/// the sequence is not told which number is the next one.
fn refusal(e: Error, name: &str, number: i64, what: &str, may_peek: bool) -> ApiError {
    match e {
        e if !may_peek && e.is_not_the_next_number() => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!(
                "invalid gap-free number: {number} is not the number of {NOUN} {name:?} that may be {what} now; a token that may `peek` it sees which (GET /v1/gapless/{{name}})"
            ),
        ),
        e => e.into(),
    }
}

/// `GET /v1/gapless/{name}`: the next number, the lease (the one pending number, if any),
/// the longest lease, whether the unique index is there, and the voided numbers with their
/// reasons.
#[utoipa::path(get, path = "/v1/gapless/{name}", operation_id = "gapless_status", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")),
    responses((status = 200, description = "`{name, collection, field, void_field, next, max_lease_ms, unique_index, lease: {number, holder, expires, waiters}|null, lease_expired, server_time, voided: [{number, reason, at}]}` (the lease by the server's clock)", body = Value), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn status(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Peek, Some(&name))?;
    check_name_of(NOUN, &name, false)?;
    let g = st.dispenser.open_gapless(&name).await?;
    Ok(Json(g.status().await?.to_json()))
}

/// The body of a void: the number (must be the next one) and why.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct VoidBody {
    /// The number to void: the next one of the sequence.
    #[serde(deserialize_with = "super::json::whole")]
    pub(super) number: i64,
    /// Why (1–1000 bytes; kept with the number).
    pub(super) reason: String,
}

/// `POST /v1/gapless/{name}/void`: voids the next number with a reason (a void document in
/// the business collection); answers the status, or — to a token that may not `peek` the
/// sequence — `{name, voided}`.
#[utoipa::path(post, path = "/v1/gapless/{name}/void", operation_id = "gapless_void", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")), request_body = VoidBody,
    responses((status = 200, description = "The status after the void (as `GET /v1/gapless/{name}` answers it) when the token may also `peek` the sequence, else `{name, voided}` (the number voided)", body = Value), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn void(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    let acting = st.acting(&st.authorize(req.headers(), Op::Void, Some(&name))?)?;
    check_name_of(NOUN, &name, false)?;
    let peek = may_peek(&st, req.headers(), &name);
    let b: VoidBody = json_body(req).await?;
    let g = acting.open_gapless(&name).await?;
    g.void(b.number, &b.reason)
        .await
        .map_err(|e| refusal(e, &name, b.number, "voided", peek))?;
    if peek {
        let voided = format!("number {} voided", b.number);
        let status = g.status().await.map_err(|e| e.after_write(&voided))?;
        Ok(Json(status.to_json()))
    } else {
        Ok(Json(json!({ "name": name, "voided": b.number })))
    }
}

/// The body of a release: the held number, why (kept if it is voided), and whether to end a
/// lease that has not run out.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReleaseBody {
    /// The held number: the next one of the sequence.
    #[serde(deserialize_with = "super::json::whole")]
    pub(super) number: i64,
    /// Why (1–1000 bytes; kept with the number if it is voided). Defaults to "released: its
    /// holder stopped".
    #[serde(default)]
    pub(super) reason: Option<String>,
    /// End a lease that has not run out by the server's clock: the caller knows its holder
    /// is dead (if it is not, its write fails on the unique index and it moves on).
    #[serde(default)]
    pub(super) force: bool,
}

/// `POST /v1/gapless/{name}/release` (token operation `void`): ends the lease of a holder
/// that stopped, at once — voids its number if it did not write it, moves past what it
/// wrote if it did.
#[utoipa::path(post, path = "/v1/gapless/{name}/release", operation_id = "gapless_release", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")), request_body = ReleaseBody,
    responses((status = 200, description = "`{name, number, outcome: \"voided\"|\"used\"}`; when the token may also `peek` the sequence, `last` (the last number the holder wrote, for `used`) and `status` (as `GET /v1/gapless/{name}` answers it)", body = Value), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn release(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    let acting = st.acting(&st.authorize(req.headers(), Op::Void, Some(&name))?)?;
    check_name_of(NOUN, &name, false)?;
    let peek = may_peek(&st, req.headers(), &name);
    let b: ReleaseBody = json_body(req).await?;
    let g = acting.open_gapless(&name).await?;
    let reason = b
        .reason
        .as_deref()
        .unwrap_or("released: its holder stopped");
    let released = g
        .release(b.number, reason)
        .with_force(b.force)
        .await
        .map_err(|e| refusal(e, &name, b.number, "released", peek))?;
    let mut answer = json!({ "name": name, "number": b.number });
    match released {
        Released::Voided(_) => answer["outcome"] = json!("voided"),
        Released::Used { last, .. } => {
            answer["outcome"] = json!("used");
            if peek {
                answer["last"] = json!(last);
            }
        }
        _ => answer["outcome"] = json!("other"),
    }
    if peek {
        answer["status"] = status_of(&g, b.number).await?;
    }
    Ok(Json(answer))
}

/// The status after the lease on `number` was released.
async fn status_of(g: &Gapless, number: i64) -> Result<Value, ApiError> {
    let released = format!("the lease on number {number} released");
    Ok(g.status()
        .await
        .map_err(|e| e.after_write(&released))?
        .to_json())
}

/// The body of a change of the longest lease.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct MaxLeaseBody {
    /// The longest lease, in milliseconds (1 to 86 400 000): no holder's lease counts for
    /// longer, the leases already taken included.
    #[serde(deserialize_with = "super::json::whole")]
    pub(super) max_lease_ms: i64,
}

/// `POST /v1/gapless/{name}/max-lease` (token operation `alter`): sets the sequence's
/// longest lease.
#[utoipa::path(post, path = "/v1/gapless/{name}/max-lease", operation_id = "gapless_max_lease", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")), request_body = MaxLeaseBody,
    responses((status = 200, description = "`{name, max_lease_ms}`", body = Value), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn max_lease(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    let acting = st.acting(&st.authorize(req.headers(), Op::Alter, Some(&name))?)?;
    check_name_of(NOUN, &name, false)?;
    let b: MaxLeaseBody = json_body(req).await?;
    let ms = u64::try_from(b.max_lease_ms)
        .ok()
        .filter(|ms| (1..=MAX_LEASE_MS).contains(ms))
        .ok_or_else(|| {
            ApiError::invalid_input(format!(
                "invalid max_lease_ms: {} must be from 1 to {MAX_LEASE_MS} (a day)",
                b.max_lease_ms
            ))
        })?;
    let g = acting.open_gapless(&name).await?;
    g.set_max_lease(Duration::from_millis(ms)).await?;
    Ok(Json(json!({ "name": name, "max_lease_ms": ms })))
}
