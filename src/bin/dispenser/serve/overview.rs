//! `GET /v1/overview`: everything the operators' page (`/ui`) shows, in one answer — every
//! sequence with its usage and forecast and the numbers the service's block clients hold,
//! the gap-free sequences with their leases and voids, the queues. Only the names the token
//! may use; a document that cannot be read is `{name, error}` in its place.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use dispenser::Error;
use dispenser::mongodb::bson::{Document, doc};
use futures::TryStreamExt;
use serde_json::{Value, json};

use super::classify::classify;
use super::errors::ApiError;
use super::schemas::Overview;
use super::state::{AppState, Shared};
use super::tokens::{Op, TokenRule};

/// The most gap-free sequences one answer shows (each costs two reads).
pub(super) const GAPLESS_SHOWN: usize = 50;

/// `{name, error: {kind, message}}`: an entry that cannot be read, in its place.
fn unreadable(st: &AppState, name: &str, e: &Error) -> Value {
    let (_, kind) = classify(e);
    json!({ "name": name, "error": { "kind": kind, "message": st.scrub(&e.to_string()) } })
}

/// The name a corrupt document's error carries.
fn corrupt_name(e: &Error) -> &str {
    match e {
        Error::CorruptDocument { name, .. } => name,
        _ => "?",
    }
}

async fn sequences(st: &AppState, rule: &TokenRule) -> Result<Vec<Value>, Error> {
    let held: HashMap<String, u64> = st.pool.held_by_sequence().into_iter().collect();
    let mut out = Vec::new();
    for item in st.dispenser.list().await? {
        match item {
            Ok(s) if rule.allows_name(&s.name) => {
                let mut v = s.to_json();
                v["held"] = json!(held.get(&s.name).copied().unwrap_or(0));
                out.push(v);
            }
            Ok(_) => {}
            Err(e) if rule.allows_name(corrupt_name(&e)) => {
                out.push(unreadable(st, corrupt_name(&e), &e));
            }
            Err(_) => {}
        }
    }
    Ok(out)
}

async fn queues(st: &AppState, rule: &TokenRule) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for item in st.dispenser.list_queues().await? {
        match item {
            Ok(q) if rule.allows_name(&q.name) => out.push(q.to_json()),
            Ok(_) => {}
            Err(e) if rule.allows_name(corrupt_name(&e)) => {
                out.push(unreadable(st, corrupt_name(&e), &e));
            }
            Err(_) => {}
        }
    }
    Ok(out)
}

/// The gap-free sequences the token may use (the first [`GAPLESS_SHOWN`] by name), and
/// whether there are more. Their state documents live in `<collection>_gapless`.
async fn gapless(st: &AppState, rule: &TokenRule) -> Result<(Vec<Value>, bool), Error> {
    let o = st.dispenser.options();
    let state = st
        .dispenser
        .client()
        .database(&o.database)
        .collection::<Document>(&format!("{}_gapless", o.collection));
    let context = || format!("listing the gap-free sequences of {}", o.database);
    let ids: Vec<Document> = tokio::time::timeout(o.operation_timeout, async {
        state
            .find(doc! {})
            .projection(doc! { "_id": 1 })
            .sort(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await
    })
    .await
    .map_err(|_| Error::Timeout {
        context: context(),
        after: o.operation_timeout,
    })?
    .map_err(|e| Error::Database {
        context: context(),
        source: e,
    })?;
    let names: Vec<&str> = ids
        .iter()
        .filter_map(|d| d.get_str("_id").ok())
        .filter(|n| rule.allows_name(n))
        .collect();
    let mut out = Vec::new();
    for name in names.iter().take(GAPLESS_SHOWN) {
        let status = match st.dispenser.find_gapless(name).await {
            Ok(g) => g.status().await,
            Err(e) => Err(e),
        };
        match status {
            Ok(s) => out.push(s.to_json()),
            Err(e @ Error::NoSuchSequence { .. }) => {
                // Deleted since the listing: not shown.
                tracing::debug!("overview: {e}");
            }
            Err(e @ (Error::Database { .. } | Error::Timeout { .. })) => return Err(e),
            Err(e) => out.push(unreadable(st, name, &e)),
        }
    }
    Ok((out, names.len() > GAPLESS_SHOWN))
}

/// `GET /v1/overview`.
#[utoipa::path(get, path = "/v1/overview", operation_id = "overview", tag = "admin",
    responses((status = 200, description = "What the operators' page shows: `{sequences: [state + held], gapless: [status], gapless_truncated, queues: [status]}`, only the names the token may use (a document that cannot be read as `{name, error}` in its place)", body = Overview)))]
pub(super) async fn overview(
    State(st): State<Shared>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let rule = st.authorize(&headers, Op::List, None)?;
    let sequences = sequences(&st, rule).await?;
    let (gapless, truncated) = gapless(&st, rule).await?;
    let queues = queues(&st, rule).await?;
    Ok(Json(json!({
        "sequences": sequences,
        "gapless": gapless,
        "gapless_truncated": truncated,
        "queues": queues,
    })))
}
