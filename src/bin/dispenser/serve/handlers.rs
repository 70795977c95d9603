//! The endpoints: draw (`next`), create, peek, list, advance, reset, delete, healthz.

use std::collections::{HashMap, HashSet};

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use dispenser::{Error, Format, NumberSource, SequenceState, Spec};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::auth::Op;
use super::errors::{ApiError, classify, json_body};
use super::openapi::{Drawn, ErrorBody, Sequence};
use super::state::{AppState, Shared};

/// Counts up to this many are answered as a list of numbers drawn from the block client;
/// larger counts as contiguous runs reserved directly (`{first, last, step, count}`).
pub(super) const LIST_LIMIT: u64 = 1000;

/// Runs of consecutive numbers (`step` apart) as `{first, last, step, count}`.
pub(super) fn as_runs(numbers: &[i64], step: i64) -> Vec<Value> {
    let mut runs: Vec<(i64, i64, u64)> = Vec::new();
    for &n in numbers {
        match runs.last_mut() {
            Some((_, last, count)) if i128::from(*last) + i128::from(step) == i128::from(n) => {
                *last = n;
                *count += 1;
            }
            _ => runs.push((n, n, 1)),
        }
    }
    runs.into_iter()
        .map(|(first, last, count)| {
            json!({ "first": first, "last": last, "step": step, "count": count })
        })
        .collect()
}

/// `count` numbers from any source, one call each, in the order drawn.
async fn draw_list(source: &impl NumberSource, count: u64) -> dispenser::Result<Vec<i64>> {
    let mut numbers = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for _ in 0..count {
        numbers.push(source.next().await?);
    }
    Ok(numbers)
}

#[utoipa::path(post, path = "/v1/sequences/{name}/next", operation_id = "next", tag = "draw",
    params(("name" = String, Path, description = "The sequence name"), ("count" = Option<u64>, Query, description = "How many numbers (default 1)")),
    responses((status = 200, description = "The numbers drawn", body = Drawn), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn next(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Next, Some(&name))?;
    if let Some(unknown) = query.keys().find(|k| k.as_str() != "count") {
        return Err(ApiError::invalid_input(format!(
            "unknown query parameter {unknown:?} (known: count)"
        )));
    }
    let count = match query.get("count") {
        None => 1,
        Some(c) => c
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=st.max_count).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_input(format!(
                    "count {c:?} must be a whole number from 1 to {}",
                    st.max_count
                ))
            })?,
    };
    dispenser::validate_name(&name)?;
    let slot = st.slot(&name);
    // Shared: an admin operation of the service waits for this draw, or this draw for it.
    let era = slot.era.read().await;
    let shape = st.shape(&era, &name).await?;
    let blocks = st.pool.get(&name).await?;
    if let Some(cycle) = shape.cycle {
        if count > cycle {
            return Err(ApiError::invalid_input(format!(
                "count {count} is more than one cycle of sequence {name:?} holds: ask for at most {cycle}"
            )));
        }
        let _serial = slot.serial.lock().await;
        let mut numbers = Vec::new();
        let mut seen = HashSet::new();
        for _ in 0..count {
            let n = NumberSource::next(&blocks).await?;
            if !seen.insert(n) {
                // Other clients of the sequence drew a whole cycle while this request drew.
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "contention",
                    format!(
                        "other clients drew a whole cycle of sequence {name:?} during this request, so {n} came round again; the numbers drawn are a gap; try again"
                    ),
                ));
            }
            numbers.push(n);
        }
        st.metrics.issued(&name, count);
        if count <= LIST_LIMIT {
            return Ok(Json(json!({ "numbers": numbers })));
        }
        let runs = as_runs(&numbers, shape.step);
        return Ok(Json(json!({ "count": count, "runs": runs })));
    }
    if count <= LIST_LIMIT {
        let numbers = draw_list(&blocks, count).await?;
        st.metrics.issued(&name, count);
        return Ok(Json(json!({ "numbers": numbers })));
    }
    let seq = era
        .direct
        .get_or_try_init(|| st.dispenser.open(&name))
        .await?;
    let mut runs = Vec::new();
    let mut left = count;
    while left > 0 {
        let run = NumberSource::next_n(seq, left).await?;
        st.metrics.issued(&name, run.count());
        runs.push(json!({
            "first": run.first(), "last": run.last(), "step": run.step(), "count": run.count(),
        }));
        left = left.saturating_sub(run.count());
    }
    Ok(Json(json!({ "count": count, "runs": runs })))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    pub(super) name: String,
    #[serde(default)]
    pub(super) start: Option<i64>,
    #[serde(default)]
    pub(super) step: Option<i64>,
    #[serde(default)]
    pub(super) min: Option<i64>,
    #[serde(default)]
    pub(super) max: Option<i64>,
    #[serde(default)]
    pub(super) cycle: bool,
    #[serde(default)]
    pub(super) if_not_exists: bool,
    #[serde(default)]
    pub(super) format: Option<String>,
}

/// The answer of `create`: the state, with `"created"` saying whether this request made it.
pub(super) fn created_reply(state: &SequenceState, created: bool) -> (StatusCode, Json<Value>) {
    let mut body = SequenceState::to_json(state);
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

/// `if_not_exists` found `state`: it must have the requested shape (the start and format only
/// apply at creation); nothing is written.
pub(super) fn existing(
    state: &SequenceState,
    spec: &Spec,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let stored = Spec::default()
        .with_start(spec.start)
        .with_step(state.step)
        .with_min(state.min)
        .with_max(state.max)
        .with_cycle(state.cycle);
    if (stored.step, stored.min, stored.max, stored.cycle)
        != (spec.step, spec.min, spec.max, spec.cycle)
    {
        return Err(Error::SpecConflict {
            name: state.name.clone(),
            stored: stored.to_string(),
            requested: spec.to_string(),
        }
        .into());
    }
    Ok(created_reply(state, false))
}

#[utoipa::path(post, path = "/v1/sequences", operation_id = "create", tag = "admin", request_body = CreateBody,
    responses((status = 201, description = "Created: the state, `created: true`", body = Sequence), (status = 200, description = "`if_not_exists` found it: the state, `created: false`", body = Sequence), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn create(
    State(st): State<Shared>,
    req: Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let rule = st.authenticate(req.headers())?;
    AppState::permit(rule, Op::Create, None)?;
    let b: CreateBody = json_body(req).await?;
    AppState::permit(rule, Op::Create, Some(&b.name))?;
    let d = Spec::default();
    let spec = d
        .with_start(b.start.unwrap_or(d.start))
        .with_step(b.step.unwrap_or(d.step))
        .with_min(b.min.unwrap_or(d.min))
        .with_max(b.max.unwrap_or(d.max))
        .with_cycle(b.cycle);
    dispenser::validate_name(&b.name)?;
    spec.validate(&b.name)?;
    let format = b.format.as_deref().map(Format::parse).transpose()?;
    if b.if_not_exists {
        match st.dispenser.peek(&b.name).await {
            Ok(state) => return existing(&state, &spec),
            Err(Error::NoSuchSequence { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let made = st
        .exclusive(&b.name, async {
            match st.dispenser.create(&b.name, spec).await {
                Ok(_) => {}
                Err(Error::AlreadyExists { .. }) if b.if_not_exists => return Ok(None),
                Err(e) => return Err(e),
            }
            if let Some(f) = &format {
                st.dispenser.set_format(&b.name, Some(f)).await?;
            }
            st.dispenser.peek(&b.name).await.map(Some)
        })
        .await?;
    match made {
        Some(state) => Ok(created_reply(&state, true)),
        // Another client created it between our look and our insert.
        None => existing(&st.dispenser.peek(&b.name).await?, &spec),
    }
}

#[utoipa::path(get, path = "/v1/sequences/{name}", operation_id = "peek", tag = "admin", params(("name" = String, Path, description = "The sequence name")),
    responses((status = 200, description = "The state (for a striped sequence `{name, stripes: [state, …]}`)", body = Sequence), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn peek(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Peek, Some(&name))?;
    match st.dispenser.peek(&name).await {
        Err(e @ Error::NoSuchSequence { .. }) => match st.dispenser.peek_striped(&name).await {
            Ok(states) => Ok(Json(striped_json(&name, &states))),
            Err(_) => Err(e.into()),
        },
        other => Ok(Json(SequenceState::to_json(&other?))),
    }
}

/// When `name` has no document of its own but is a striped sequence, the names of its
/// stripes (the admin endpoints then act on every stripe, each within its residue class);
/// otherwise `no_such`, the plain operation's error.
async fn stripes_or(st: &Shared, name: &str, no_such: Error) -> Result<Vec<String>, ApiError> {
    match st.dispenser.peek_striped(name).await {
        Ok(states) => Ok(states.into_iter().map(|s| s.name).collect()),
        Err(_) => Err(no_such.into()),
    }
}

fn striped_json(name: &str, states: &[SequenceState]) -> Value {
    json!({
        "name": name,
        "stripes": states.iter().map(SequenceState::to_json).collect::<Vec<_>>(),
    })
}

#[utoipa::path(get, path = "/v1/sequences", operation_id = "list", tag = "admin",
    responses((status = 200, description = "`{\"sequences\": […]}`", body = Value), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn list(
    State(st): State<Shared>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let rule = st.authorize(&headers, Op::List, None)?;
    let mut out = Vec::new();
    for item in st.dispenser.list().await? {
        match item {
            Ok(s) if rule.allows_name(&s.name) => out.push(SequenceState::to_json(&s)),
            Ok(_) => {}
            // In its place, as the library and the CLI report it.
            Err(e) => {
                let name = match &e {
                    Error::CorruptDocument { name, .. } => name.as_str(),
                    _ => "?",
                };
                if rule.allows_name(name) {
                    let (_, kind) = classify(&e);
                    out.push(json!({
                        "name": name,
                        "error": { "kind": kind, "message": st.scrub(&e.to_string()) },
                    }));
                }
            }
        }
    }
    Ok(Json(json!({ "sequences": out })))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AlterBody {
    #[serde(default)]
    step: Option<i64>,
    #[serde(default)]
    min: Option<i64>,
    #[serde(default)]
    max: Option<i64>,
    #[serde(default)]
    cycle: Option<bool>,
    /// Absent: keep; `null`: remove; a string: set.
    #[serde(default, deserialize_with = "some_or_null")]
    format: Option<Option<String>>,
    #[serde(default)]
    force: bool,
}

/// Tells an absent field (`None`) from `null` (`Some(None)`).
fn some_or_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// `POST /v1/sequences/{name}/alter`: under the sequence's exclusive lock (the service's
/// block client is retired first, so nothing reserved under the old shape is served after).
#[utoipa::path(post, path = "/v1/sequences/{name}/alter", operation_id = "alter", tag = "admin", params(("name" = String, Path, description = "The sequence name")), request_body = AlterBody,
    responses((status = 200, description = "The new state (for a striped sequence `{name, stripes: [state, …]}`)", body = Sequence), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn alter(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    st.authorize(req.headers(), Op::Alter, Some(&name))?;
    let b: AlterBody = json_body(req).await?;
    dispenser::validate_name(&name)?;
    let mut change = dispenser::Alter::default().with_force(b.force);
    change.step = b.step;
    change.min = b.min;
    change.max = b.max;
    change.cycle = b.cycle;
    change.format = match b.format {
        None => None,
        Some(None) => Some(None),
        Some(Some(f)) => Some(Some(Format::parse(&f)?)),
    };
    let state = st
        .exclusive(&name, st.dispenser.alter(&name, change))
        .await?;
    Ok(Json(SequenceState::to_json(&state)))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AdvanceBody {
    pub(super) to: i64,
}

#[utoipa::path(post, path = "/v1/sequences/{name}/advance", operation_id = "advance", tag = "admin", params(("name" = String, Path, description = "The sequence name")), request_body = AdvanceBody,
    responses((status = 200, description = "The new state (for a striped sequence `{name, stripes: [state, …]}`)", body = Sequence), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn advance(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    st.authorize(req.headers(), Op::Advance, Some(&name))?;
    let b: AdvanceBody = json_body(req).await?;
    dispenser::validate_name(&name)?;
    match st
        .exclusive(&name, st.dispenser.advance_to(&name, b.to))
        .await
    {
        Err(e @ Error::NoSuchSequence { .. }) => {
            let stripes = stripes_or(&st, &name, e).await?;
            let states = st
                .exclusive_all(&stripes, st.dispenser.advance_striped(&name, b.to))
                .await?;
            Ok(Json(striped_json(&name, &states)))
        }
        other => Ok(Json(SequenceState::to_json(&other?))),
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ResetBody {
    /// The next number to issue (`next`, or `value` as earlier versions called it).
    #[serde(alias = "next")]
    pub(super) value: i64,
    #[serde(default)]
    pub(super) force: bool,
}

#[utoipa::path(post, path = "/v1/sequences/{name}/reset", operation_id = "reset", tag = "admin", params(("name" = String, Path, description = "The sequence name")), request_body = ResetBody,
    responses((status = 200, description = "The new state (for a striped sequence `{name, stripes: [state, …]}`)", body = Sequence), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn reset(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    st.authorize(req.headers(), Op::Reset, Some(&name))?;
    let b: ResetBody = json_body(req).await?;
    dispenser::validate_name(&name)?;
    match st
        .exclusive(&name, st.dispenser.reset(&name, b.value, b.force))
        .await
    {
        Err(e @ Error::NoSuchSequence { .. }) => {
            let stripes = stripes_or(&st, &name, e).await?;
            let states = st
                .exclusive_all(
                    &stripes,
                    st.dispenser.reset_striped(&name, b.value, b.force),
                )
                .await?;
            Ok(Json(striped_json(&name, &states)))
        }
        other => Ok(Json(SequenceState::to_json(&other?))),
    }
}

#[utoipa::path(delete, path = "/v1/sequences/{name}", operation_id = "delete", tag = "admin", params(("name" = String, Path, description = "The sequence name")),
    responses((status = 204, description = "Deleted"), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn delete(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    st.authorize(&headers, Op::Delete, Some(&name))?;
    dispenser::validate_name(&name)?;
    match st.exclusive(&name, st.dispenser.delete(&name)).await {
        Err(e @ Error::NoSuchSequence { .. }) => {
            let stripes = stripes_or(&st, &name, e).await?;
            st.exclusive_all(&stripes, st.dispenser.delete_striped(&name))
                .await?;
        }
        other => other?,
    }
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "ops", security(()),
    responses((status = 200, description = "The database answers", body = Value), (status = "4XX", description = "An error (see `ErrorBody`)", body = ErrorBody), (status = "5XX", description = "An error (see `ErrorBody`)", body = ErrorBody)))]
pub(super) async fn healthz(State(st): State<Shared>) -> Result<Json<Value>, ApiError> {
    st.dispenser.ping().await?;
    Ok(Json(json!({ "status": "ok" })))
}
