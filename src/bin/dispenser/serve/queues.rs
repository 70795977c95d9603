//! Ticket queues over HTTP: create (`POST /v1/queues`), take (`POST
//! /v1/queues/{name}/take`), call (`POST /v1/queues/{name}/call`) and status (`GET
//! /v1/queues/{name}`). Each take and call is one write of the queue's document by the
//! library (no block client, no cache: the queue document is the state), so the service adds
//! nothing to what `dispenser::queue` guarantees. A take or call answered here also wakes the
//! boards watching that queue at once (see `ui/events.rs`).

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use dispenser::Error;
use dispenser::queue::{QueueSpec, QueueStatus};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::errors::ApiError;
use super::json::{json_body, whole_or_null};
use super::names::check_name_of;
use super::schemas::{QueueCreated, QueueState, TicketAnswer};
use super::state::{AppState, Shared};
use super::tokens::Op;

/// The noun of queue names in messages.
const QUEUE: &str = "queue";

/// The body of `POST /v1/queues`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct QueueCreateBody {
    /// The new queue's name.
    pub(super) name: String,
    /// The lowest ticket (default 0).
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) min: Option<i64>,
    /// The highest ticket (default 99).
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) max: Option<i64>,
    /// An existing queue with the same range is no error (nothing is written).
    #[serde(default)]
    pub(super) if_not_exists: bool,
}

fn created_reply(s: &QueueStatus, created: bool) -> (StatusCode, Json<Value>) {
    let mut body = s.to_json();
    if let Some(o) = body.as_object_mut() {
        o.insert("created".into(), Value::Bool(created));
    }
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, Json(body))
}

/// `POST /v1/queues`: creates a queue (tickets `min+1 … max`, then `min`).
#[utoipa::path(post, path = "/v1/queues", operation_id = "queue_create", tag = "queues", request_body = QueueCreateBody,
    responses((status = 201, description = "Created: the status, `created: true`", body = QueueCreated), (status = 200, description = "`if_not_exists` found it with the same range: its status, `created: false`", body = QueueCreated)))]
pub(super) async fn create(
    State(st): State<Shared>,
    req: Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let rule = st.authenticate(req.headers())?;
    AppState::permit_on(rule, Op::Create, None, QUEUE)?;
    let b: QueueCreateBody = json_body(req).await?;
    AppState::permit_on(rule, Op::Create, Some(&b.name), QUEUE)?;
    check_name_of(QUEUE, &b.name, false)?;
    let d = QueueSpec::default();
    let spec = d
        .with_min(b.min.unwrap_or(d.min))
        .with_max(b.max.unwrap_or(d.max));
    let (queue, created) = if b.if_not_exists {
        // Whether this request made it: the version of a queue just made is 0, but so is
        // that of one another client made and nobody used yet; ask for the insert first.
        match st.dispenser.create_queue(&b.name, spec).await {
            Ok(q) => (q, true),
            Err(Error::QueueExists { .. }) => {
                (st.dispenser.ensure_queue(&b.name, spec).await?, false)
            }
            Err(e) => return Err(e.into()),
        }
    } else {
        (st.dispenser.create_queue(&b.name, spec).await?, true)
    };
    Ok(created_reply(&queue.status().await?, created))
}

/// `GET /v1/queues/{name}`: what is being served, how many wait, the next ticket.
#[utoipa::path(get, path = "/v1/queues/{name}", operation_id = "queue_status", tag = "queues", params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The queue's status", body = QueueState)))]
pub(super) async fn status(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    st.authorize_on(&headers, Op::Peek, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let q = st.queues.handle(&st.dispenser, &name).await?;
    Ok(Json(q.status().await?.to_json()))
}

/// `POST /v1/queues/{name}/take`: takes the next ticket (409 `queue_full` when as many wait
/// as the range holds; nothing is taken).
#[utoipa::path(post, path = "/v1/queues/{name}/take", operation_id = "take", tag = "queues", params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The ticket taken, with the counters after it", body = TicketAnswer)))]
pub(super) async fn take(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    st.authorize_on(&headers, Op::Take, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let q = st.queues.handle(&st.dispenser, &name).await?;
    let outcome = q.take().await;
    st.queues.events.nudge(&name);
    Ok(Json(outcome?.to_json()))
}

/// `POST /v1/queues/{name}/call`: calls the oldest waiting ticket (409 `nobody_waiting`
/// when none waits; nothing is called).
#[utoipa::path(post, path = "/v1/queues/{name}/call", operation_id = "call", tag = "queues", params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The ticket called, with the counters after it", body = TicketAnswer)))]
pub(super) async fn call(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    st.authorize_on(&headers, Op::Call, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let q = st.queues.handle(&st.dispenser, &name).await?;
    let outcome = q.call().await;
    st.queues.events.nudge(&name);
    Ok(Json(outcome?.to_json()))
}
