//! `GET /v1/overview`: everything the operators' page (`/ui`) shows, in one answer — one
//! page of the sequences (`limit`, `after`: its cost does not grow with the collection) with
//! their usage and forecast and the numbers the service's block clients hold,
//! the gap-free sequences with their leases and voids, the queues. Only the names the token
//! may use; a document that cannot be read is `{name, error}` in its place.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use dispenser::Error;

use super::answers::{
    Gapless, GaplessEntry, HeldSequence, Overview, OverviewSequence, QueueEntry, QueueState,
    Unreadable, of_library,
};
use super::errors::ApiError;
use super::handlers::{page_query, sequence_page};
use super::state::{AppState, Shared};
use super::tokens::{Op, TokenRule};

/// The most gap-free sequences one answer shows (each costs two reads).
pub(super) const GAPLESS_SHOWN: usize = 50;
/// The most queues one answer shows.
pub(super) const QUEUES_SHOWN: usize = 100;
/// The sequences of one page when no `limit` is given, and the most one may ask for.
pub(super) const DEFAULT_PAGE: u64 = 50;
pub(super) const MAX_PAGE: u64 = 500;

/// `{name, error: {kind, message}}`: an entry that cannot be read, in its place.
fn unreadable(st: &AppState, name: &str, e: &Error) -> Unreadable {
    Unreadable::new(name, e, |m| st.scrub(m))
}

/// The name a corrupt document's error carries.
fn corrupt_name(e: &Error) -> &str {
    match e {
        Error::CorruptDocument { name, .. } => name,
        _ => "?",
    }
}

/// The queues the token may use (the first [`QUEUES_SHOWN`] by name), and whether there are
/// more: one query for the names the token's patterns match, so no other queue document is
/// read, however many there are.
async fn queues(st: &AppState, rule: &TokenRule) -> Result<(Vec<QueueEntry>, bool), ApiError> {
    let mut out = Vec::new();
    let page = st
        .dispenser
        .list_queues()
        .matching(rule.patterns())
        .limit(QUEUES_SHOWN + 1)
        .await?;
    let more = page.len() > QUEUES_SHOWN;
    for item in page.into_iter().take(QUEUES_SHOWN) {
        match item {
            Ok(q) if rule.allows_name(&q.name) => out.push(QueueEntry::Queue(QueueState::of(&q)?)),
            Ok(_) => {}
            Err(e) if rule.allows_name(corrupt_name(&e)) => {
                out.push(QueueEntry::Unreadable(unreadable(st, corrupt_name(&e), &e)));
            }
            Err(_) => {}
        }
    }
    Ok((out, more))
}

/// The gap-free sequences the token may use (the first [`GAPLESS_SHOWN`] by name), and
/// whether there are more. Their state documents live in `<collection>_gapless`.
async fn gapless(st: &AppState, rule: &TokenRule) -> Result<(Vec<GaplessEntry>, bool), ApiError> {
    let listed = st
        .dispenser
        .list_gapless()
        .matching(rule.patterns())
        .limit(GAPLESS_SHOWN + 1)
        .await?;
    let mut shown = 0;
    let mut out = Vec::new();
    for item in listed {
        let name = match &item {
            Ok(s) => s.name.clone(),
            Err(e @ Error::CorruptDocument { .. }) => corrupt_name(e).to_owned(),
            Err(e) => {
                tracing::debug!("overview: {e}");
                continue;
            }
        };
        if !rule.allows_name(&name) {
            continue;
        }
        shown += 1;
        if shown > GAPLESS_SHOWN {
            break;
        }
        match item {
            Ok(s) => out.push(GaplessEntry::Gapless(Gapless::of(&s)?)),
            Err(e) => out.push(GaplessEntry::Unreadable(unreadable(st, &name, &e))),
        }
    }
    Ok((out, shown > GAPLESS_SHOWN))
}

/// `GET /v1/overview`.
#[utoipa::path(get, path = "/v1/overview", operation_id = "overview", tag = "admin",
    params(("limit" = Option<u64>, Query, description = "How many sequences at most (1 to 500; default 50)"),
        ("after" = Option<String>, Query, description = "The cursor: the sequences after this name (the `next` of the previous page)")),
    responses((status = 200, description = "What the operators' page shows: `{sequences: [state + held], next, gapless: [status], gapless_truncated, queues: [status], queues_truncated}` — one page of the sequences, only the names the token may use (a document that cannot be read as `{name, error}` in its place)", body = Overview)))]
pub(super) async fn overview(
    State(st): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Overview>, ApiError> {
    let rule = st.authorize(&headers, Op::List, None)?;
    let (limit, after) = page_query(&query, DEFAULT_PAGE, MAX_PAGE)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let held: HashMap<String, u64> = st.pool.held_by_sequence().into_iter().collect();
    let show = |s: &dispenser::sequence::SequenceState| {
        Ok(OverviewSequence::Sequence(HeldSequence {
            state: of_library(s.to_json())?,
            held: held.get(&s.name).copied().unwrap_or(0),
        }))
    };
    let (sequences, next) =
        sequence_page(&st, &rule, limit, after, show, OverviewSequence::Unreadable).await?;
    let (gapless, gapless_truncated) = gapless(&st, &rule).await?;
    let (queues, queues_truncated) = queues(&st, &rule).await?;
    Ok(Json(Overview {
        sequences,
        next,
        gapless,
        gapless_truncated,
        queues,
        queues_truncated,
    }))
}
