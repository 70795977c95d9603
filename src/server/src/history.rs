//! The history of admin operations (`dispenser::history`): `GET /v1/sequences/{name}/history`,
//! `GET /v1/gapless/{name}/history` and `GET /v1/queues/{name}/history`, for a token with
//! `history` on the name — and on every subject the answer holds: the library reads exact
//! subjects only (a sequence with its stripes, a stripe, a scope, a gap-free sequence, a
//! queue), and each entry is checked against the token's globs again before it is sent. The
//! service records its own admin operations as the token's name (`AppState::acting`).

use super::answers::{HistoryItem, HistoryPage, of_library};
use super::errors::ApiError;
use super::names::check_name_of;
use super::state::{AppState, Shared};
use super::tokens::{Op, TokenRule};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use dispenser::error::Kind;
use dispenser::history::{History, HistoryEntry, MAX_HISTORY_PAGE};

/// The page size when none is asked for.
pub(super) const DEFAULT_PAGE: u64 = 100;

/// The history endpoints.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1/sequences/{name}/history", get(sequence))
        .route("/v1/gapless/{name}/history", get(gapless))
        .route("/v1/queues/{name}/history", get(queue))
}

/// `limit`, `after` and `since` of a history's query: each at most once, nothing else. Also
/// the limit set.
fn history_query(query: &[(String, String)], mut q: History) -> Result<(History, usize), ApiError> {
    let mut limit = DEFAULT_PAGE as usize;
    q = q.limit(limit);
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
                limit = n;
                q = q.limit(n);
            }
            // A cursor or time of the right shape that the library refuses is 422 (the
            // library's own invalid-argument answer).
            "after" => q = q.after(v.clone()),
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
                q = q.since(t);
            }
            other => {
                return Err(ApiError::invalid_input(format!(
                    "unknown query parameter {other:?} (known: limit, after, since)"
                )));
            }
        }
        seen.push(k.as_str());
    }
    Ok((q, limit))
}

/// One page of the history of `name` as `query` (from the request) says, for the token
/// `rule`: every entry's subject must be one it has `history` on (the name asked for, or for
/// a stripe its striped sequence), else nothing is answered.
async fn page(
    st: &Shared,
    rule: &TokenRule,
    (name, noun): (&str, &str),
    query: &[(String, String)],
    kind: Kind,
) -> Result<Json<HistoryPage>, ApiError> {
    let (q, limit) = history_query(query, st.dispenser.history(kind, name))?;
    let entries = q.await?;
    for e in &entries {
        let allowed = AppState::permit_on(rule, Op::History, Some(&e.name), noun).is_ok()
            || e.striped_sequence()
                .is_some_and(|s| AppState::permit_on(rule, Op::History, Some(s), noun).is_ok());
        if !allowed {
            // Never reached while the library reads exact subjects: say nothing of the entry.
            tracing::error!(
                "the history of {name:?} held an entry of another subject; nothing was answered"
            );
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "token {:?} may not read all of the history of {noun} {name:?}",
                    rule.name
                ),
            ));
        }
    }
    let next = (entries.len() == limit)
        .then(|| entries.last().map(HistoryEntry::cursor))
        .flatten();
    let history = entries
        .iter()
        .map(|e| of_library::<HistoryItem>(e.to_json()))
        .collect::<Result<_, _>>()?;
    Ok(Json(HistoryPage {
        name: name.to_owned(),
        history,
        next,
    }))
}

/// The query of a history read (the same for every kind).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // only described: the handlers read the query as pairs (`history_query`)
pub(super) struct HistoryParams {
    /// Only operations from this time on (RFC 3339, the server's clock)
    since: Option<String>,
    /// The cursor: the operations after this one (the `next` of the previous page)
    after: Option<String>,
    /// How many operations at most (1 to 1000; default 100)
    limit: Option<u64>,
}

/// A history read of the `noun` `name` for the request's token, which must have `history`
/// on it.
async fn read(
    st: &Shared,
    headers: &HeaderMap,
    (name, noun): (&str, &str),
    query: &[(String, String)],
    kind: Kind,
) -> Result<Json<HistoryPage>, ApiError> {
    let rule = st.authorize_on(headers, Op::History, Some(name), noun)?;
    check_name_of(noun, name, false)?;
    page(st, &rule, (name, noun), query, kind).await
}

/// `GET /v1/sequences/{name}/history`: the admin operations of a sequence (a striped one
/// with its stripes), a stripe (`ids~3`) or a scope (`t@k`), oldest first.
#[utoipa::path(get, path = "/v1/sequences/{name}/history", operation_id = "history", tag = "admin",
    params(("name" = String, Path, description = "The sequence name"), HistoryParams),
    responses((status = 200, description = "`{name, history: […], next}`: who did what when, the parameters, the state before and after, and how it ended; empty for a name without history", body = HistoryPage)))]
pub(super) async fn sequence(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<HistoryPage>, ApiError> {
    read(&st, &headers, (&name, "sequence"), &query, Kind::Sequence).await
}

/// `GET /v1/gapless/{name}/history`: the admin operations of a gap-free sequence, oldest
/// first.
#[utoipa::path(get, path = "/v1/gapless/{name}/history", operation_id = "gapless_history", tag = "gapless",
    params(("name" = String, Path, description = "The gap-free sequence"), HistoryParams),
    responses((status = 200, description = "`{name, history: […], next}`: who created it, voided or released a number or changed its longest lease, when, the parameters, the state before and after, and how it ended", body = HistoryPage)))]
pub(super) async fn gapless(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<HistoryPage>, ApiError> {
    read(
        &st,
        &headers,
        (&name, "gap-free sequence"),
        &query,
        Kind::Gapless,
    )
    .await
}

/// `GET /v1/queues/{name}/history`: the admin operations of a queue, oldest first.
#[utoipa::path(get, path = "/v1/queues/{name}/history", operation_id = "queue_history", tag = "queues",
    params(("name" = String, Path, description = "The queue name"), HistoryParams),
    responses((status = 200, description = "`{name, history: […], next}`: who created, altered or deleted the queue or cancelled a ticket, when, the parameters, the state before and after, and how it ended", body = HistoryPage)))]
pub(super) async fn queue(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<HistoryPage>, ApiError> {
    read(&st, &headers, (&name, "queue"), &query, Kind::Queue).await
}
