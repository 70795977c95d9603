//! The history of admin operations (`dispenser::history`): `GET /v1/sequences/{name}/history`
//! and `GET /v1/queues/{name}/history`, for a token with `peek` on the name. The service
//! records its own admin operations as the token's name (`AppState::acting`).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use dispenser::history::{HistoryEntry, HistoryQuery, MAX_HISTORY_PAGE};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::errors::ApiError;
use super::names::check_name_of;
use super::state::Shared;
use super::tokens::Op;

/// The page size when none is asked for.
pub(super) const DEFAULT_PAGE: u64 = 100;

/// The history endpoints.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1/sequences/{name}/history", get(sequence))
        .route("/v1/queues/{name}/history", get(queue))
}

/// One entry of a history.
#[derive(ToSchema)]
#[allow(dead_code)] // only described: the handlers answer `serde_json::Value`
pub(super) struct HistoryItem {
    /// The record's id.
    id: String,
    /// `sequence` or `queue`.
    kind: String,
    /// The sequence (or one of its stripes) or queue changed.
    name: String,
    /// `create`, `alter`, `set-format`, `advance-to`, `reset`, `delete`, `delete-scopes`,
    /// `void`, `release`, `max-lease`; for a queue `create`, `alter`, `cancel`, `delete`.
    op: String,
    /// The parameters, as given.
    #[schema(value_type = Object)]
    params: Value,
    /// Who acted: the token's name through the service, `--caller` through the command line.
    who: Option<String>,
    /// When it started, by the server's clock (RFC 3339).
    at: String,
    /// `server`, or `client` when the server did not say its time.
    clock: String,
    /// The state read just before (`null` before a create).
    #[schema(value_type = Option<Object>)]
    before: Option<Value>,
    /// The state read just after (`null` after a delete or a refusal).
    #[schema(value_type = Option<Object>)]
    after: Option<Value>,
    /// `done`, `refused` (nothing changed), `failed` (the change may or may not have been
    /// made) or `pending` (no outcome recorded: running, or its process stopped).
    outcome: String,
    /// Why, for `refused` and `failed`.
    error: Option<String>,
    /// When it ended, by the server's clock (`null` while pending).
    ended_at: Option<String>,
    /// The `after` of the page that continues after this entry.
    cursor: String,
}

/// A page of a history.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(super) struct HistoryPage {
    name: String,
    /// Oldest first.
    history: Vec<HistoryItem>,
    /// The cursor of the next page (`after`); `null` after the last.
    next: Option<String>,
}

/// `limit`, `after` and `since` of a history's query: each at most once, nothing else.
fn history_query(
    query: &[(String, String)],
    mut q: HistoryQuery,
) -> Result<HistoryQuery, ApiError> {
    let mut seen = Vec::new();
    for (k, v) in query {
        if seen.contains(&k.as_str()) {
            return Err(ApiError::invalid_input(format!(
                "{k} is given more than once: give it once"
            )));
        }
        match k.as_str() {
            "limit" => {
                let n = super::json::exact_integer(v)
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|n| (1..=MAX_HISTORY_PAGE).contains(n))
                    .ok_or_else(|| {
                        ApiError::invalid_input(format!(
                            "limit {v:?} must be a whole number from 1 to {MAX_HISTORY_PAGE}"
                        ))
                    })?;
                q = q.with_limit(n);
            }
            // A cursor or time of the right shape that the library refuses is 422 (the
            // library's own invalid-argument answer).
            "after" => q = q.with_after(v.clone()),
            "since" => {
                let t: jiff::Timestamp = v.parse().map_err(|e| {
                    ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "invalid_input",
                        format!(
                            "since {v:?} is not an RFC 3339 time such as 2026-11-26T08:00:00Z: {e}"
                        ),
                    )
                })?;
                q = q.with_since(t);
            }
            other => {
                return Err(ApiError::invalid_input(format!(
                    "unknown query parameter {other:?} (known: limit, after, since)"
                )));
            }
        }
        seen.push(k.as_str());
    }
    Ok(q)
}

/// One page of the history of `name` as `query` (from the request) says.
async fn page(
    st: &Shared,
    name: &str,
    query: &[(String, String)],
    base: HistoryQuery,
) -> Result<Json<Value>, ApiError> {
    let q = history_query(query, base.with_limit(DEFAULT_PAGE as usize))?;
    let entries = st.dispenser.history(name, &q).await?;
    let next = (entries.len() == q.limit)
        .then(|| entries.last().map(HistoryEntry::cursor))
        .flatten();
    let history: Vec<Value> = entries.iter().map(HistoryEntry::to_json).collect();
    Ok(Json(
        json!({ "name": name, "history": history, "next": next }),
    ))
}

/// `GET /v1/sequences/{name}/history`: the admin operations of a sequence (its stripes
/// included) or gap-free sequence, oldest first.
#[utoipa::path(get, path = "/v1/sequences/{name}/history", operation_id = "history", tag = "admin",
    params(("name" = String, Path, description = "The sequence name"),
        ("since" = Option<String>, Query, description = "Only operations from this time on (RFC 3339, the server's clock)"),
        ("after" = Option<String>, Query, description = "The cursor: the operations after this one (the `next` of the previous page)"),
        ("limit" = Option<u64>, Query, description = "How many operations at most (1 to 1000; default 100)")),
    responses((status = 200, description = "`{name, history: […], next}`: who did what when, the parameters, the state before and after, and how it ended; empty for a name without history", body = HistoryPage)))]
pub(super) async fn sequence(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Peek, Some(&name))?;
    check_name_of("sequence", &name, false)?;
    page(&st, &name, &query, HistoryQuery::sequence()).await
}

/// `GET /v1/queues/{name}/history`: the admin operations of a queue, oldest first.
#[utoipa::path(get, path = "/v1/queues/{name}/history", operation_id = "queue_history", tag = "queues",
    params(("name" = String, Path, description = "The queue name"),
        ("since" = Option<String>, Query, description = "Only operations from this time on (RFC 3339, the server's clock)"),
        ("after" = Option<String>, Query, description = "The cursor: the operations after this one (the `next` of the previous page)"),
        ("limit" = Option<u64>, Query, description = "How many operations at most (1 to 1000; default 100)")),
    responses((status = 200, description = "`{name, history: […], next}`: who created, altered or deleted the queue or cancelled a ticket, when, the parameters, the state before and after, and how it ended", body = HistoryPage)))]
pub(super) async fn queue(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    st.authorize_on(&headers, Op::Peek, Some(&name), "queue")?;
    check_name_of("queue", &name, false)?;
    page(&st, &name, &query, HistoryQuery::queue()).await
}
