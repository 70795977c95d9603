//! Gap-free sequences through the service: status (with the lease and the voided numbers)
//! and void. Issuing stays with the application: the business write that uses a number is
//! its own (see `dispenser::gapless`).

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::errors::ApiError;
use super::json::json_body;
use super::schemas::ErrorBody;
use super::state::Shared;
use super::tokens::Op;

/// `GET /v1/gapless/{name}`: the next number, the lease (the one pending number, if any) and
/// the voided numbers with their reasons.
#[utoipa::path(get, path = "/v1/gapless/{name}", operation_id = "gapless_status", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")),
    responses((status = 200, description = "`{name, collection, field, void_field, next, lease: {number, holder, expires, waiters}|null, lease_expired, server_time, voided: [{number, reason, at}]}` (the lease by the server's clock)", body = Value), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn status(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Peek, Some(&name))?;
    let g = st.dispenser.find_gapless(&name).await?;
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
/// the business collection); answers the status.
#[utoipa::path(post, path = "/v1/gapless/{name}/void", operation_id = "gapless_void", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")), request_body = VoidBody,
    responses((status = 200, description = "The status after the void", body = Value), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn void(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    st.authorize(req.headers(), Op::Void, Some(&name))?;
    let b: VoidBody = json_body(req).await?;
    let g = st.dispenser.find_gapless(&name).await?;
    g.void(b.number, &b.reason).await?;
    Ok(Json(g.status().await?.to_json()))
}
