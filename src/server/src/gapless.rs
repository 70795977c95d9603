//! Gap-free sequences through the service: create, list, status (with the lease and the
//! voided numbers), void, release (ending a stopped holder's lease at once), the longest lease
//! and delete. Issuing stays with the application: the business write that uses a number is
//! its own (see `dispenser::gapless`).
//!
//! Every endpoint checks the name as the sequence endpoints do (`names.rs`), and an answer
//! tells only what the token may read: a token that may void or release but not `peek` the
//! sequence is never told the next number (nor the status) — a refused number is "not the
//! one that may be voided", and a void answers what it voided.

use std::time::Duration;

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use dispenser::Error;
use dispenser::gapless::{Gapless, GaplessAlter, GaplessOptions, GaplessState};
use serde::Deserialize;
use utoipa::ToSchema;

use super::answers::{
    Gapless as GaplessAnswer, GaplessCreated, GaplessEntry, GaplessList, MaxLeaseAnswer,
    ReleaseAnswer, VoidAnswer,
};
use super::errors::ApiError;
use super::handlers::{DEFAULT_PAGE, MAX_PAGE, page_of, page_query};
use super::json::{json_body, optional_json_body, whole_or_null};
use super::make::{Making, create_or_ensure};
use super::names::check_name_of;
use super::state::Shared;
use super::tokens::Op;

/// What the messages call a name.
const NOUN: &str = "gap-free sequence";

/// The business collections the service creates gap-free sequences on: 1 to 100 letters,
/// digits, `_`, `-` and `.` (the library takes more; the service keeps to names every server
/// takes, and refuses `system.` names with the library).
pub(super) const COLLECTION_PATTERN: &str = "^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$";

/// A number or void field: dot-separated runs of letters, digits and `_`, at most 200.
pub(super) const FIELD_PATTERN: &str = "^[A-Za-z0-9_]{1,64}(\\.[A-Za-z0-9_]{1,64}){0,3}$";

/// Whether `collection` and `fields` are names the service creates sequences on, else the
/// 422 naming which is not.
fn check_business(collection: &str, fields: &[(&str, &str)]) -> Result<(), ApiError> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let ok_collection = (1..=100).contains(&collection.len())
        && !collection.starts_with('.')
        && collection
            .chars()
            .all(|c| word(c) || matches!(c, '-' | '.'));
    if !ok_collection {
        return Err(ApiError::invalid_input(format!(
            "collection {collection:?} must be 1 to 100 letters, digits, '_', '-' or '.', not starting with '.'"
        )));
    }
    for (what, f) in fields {
        let parts: Vec<&str> = f.split('.').collect();
        let ok = parts.len() <= 4
            && parts
                .iter()
                .all(|p| (1..=64).contains(&p.len()) && p.chars().all(word));
        if !ok {
            return Err(ApiError::invalid_input(format!(
                "{what} {f:?} must be up to 4 dot-separated runs of 1 to 64 letters, digits or '_' (such as `number` or `meta.number`)"
            )));
        }
    }
    Ok(())
}

/// The body's `void_extra` as the document every void document starts from: JSON values (an
/// object of at most 100 fields: else 400, as the document says; none named with a leading `$`
/// or a dot: else 422), naming the field at fault.
fn void_extra(
    extra: serde_json::Map<String, serde_json::Value>,
) -> Result<dispenser::mongodb::bson::Document, ApiError> {
    if extra.len() > 100 {
        return Err(ApiError::invalid_input(format!(
            "void_extra has {} fields; at most 100",
            extra.len()
        )));
    }
    // A name the document allows (it says only "an object") but MongoDB would refuse in the
    // void document, later: 422, as the library's refusals are.
    if let Some(k) = extra
        .keys()
        .find(|k| k.is_empty() || k.starts_with('$') || k.contains('.'))
    {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!(
                "void_extra field {k:?} must be a plain field name (not empty, no leading '$', no '.')"
            ),
        ));
    }
    match dispenser::mongodb::bson::Bson::try_from(serde_json::Value::Object(extra)) {
        Ok(dispenser::mongodb::bson::Bson::Document(d)) => Ok(d),
        _ => Err(ApiError::invalid_input(
            "void_extra must be a JSON object of JSON values",
        )),
    }
}

/// The longest lease, in seconds, that an admin may set (a day); the shortest is 1 ms.
pub(super) const MAX_LEASE_SECONDS: f64 = 86_400.0;

/// `seconds` (the field `what`) as a longest lease: 0.001 (1 ms) to a day, else the 400 naming
/// the field.
fn max_lease(what: &str, seconds: f64) -> Result<Duration, ApiError> {
    if !(0.001..=MAX_LEASE_SECONDS).contains(&seconds) {
        return Err(ApiError::invalid_input(format!(
            "invalid {what}: {seconds} must be from 0.001 (1 ms) to {MAX_LEASE_SECONDS} seconds (a day)"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The gap-free endpoints (merged into the service's router).
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1/gapless", post(create).get(list))
        .route("/v1/gapless/{name}", get(peek).delete(delete))
        .route("/v1/gapless/{name}/void", post(void))
        .route("/v1/gapless/{name}/release", post(release))
        .route("/v1/gapless/{name}/alter", post(alter))
}

/// Whether the request's token may read (`peek`) the sequence `name`.
fn may_peek(st: &Shared, headers: &HeaderMap, name: &str) -> bool {
    st.authorize(headers, Op::Peek, Some(name)).is_ok()
}

/// The error of a void or release of `number`, as told to a token: one that may not `peek`
/// the sequence is not told which number is the next one.
fn refusal(e: Error, name: &str, number: i64, what: &str, may_peek: bool) -> ApiError {
    match e {
        Error::NotTheNextNumber { .. } if !may_peek => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!(
                "invalid gap-free number: {number} is not the number of {NOUN} {name:?} that may be {what} now; a token that may `peek` it sees which (GET /v1/gapless/{{name}})"
            ),
        ),
        e => e.into(),
    }
}

/// The body of `POST /v1/gapless`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GaplessCreateBody {
    /// The new gap-free sequence's name.
    pub(super) name: String,
    /// The business collection whose documents carry the numbers (in the service's
    /// database).
    pub(super) collection: String,
    /// The number field (a dotted path for a nested one).
    pub(super) field: String,
    /// The first number (default 1).
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) start: Option<i64>,
    /// The longest lease, in seconds (a fraction allowed: 0.001 to 86 400; default 300).
    #[serde(default)]
    pub(super) max_lease_seconds: Option<f64>,
    /// The field of a void document that holds why it was voided (default `voided`).
    #[serde(default)]
    pub(super) void_field: Option<String>,
    /// More fields written into every void document (`{"status": "VOID", "total": 0}`),
    /// fixed at creation (default none): a validator of the business collection that wants
    /// them then accepts a void.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub(super) void_extra: Option<serde_json::Map<String, serde_json::Value>>,
    /// An existing sequence with the same collection and field is no error (nothing is
    /// written).
    #[serde(default)]
    pub(super) if_not_exists: bool,
}

/// `POST /v1/gapless`: creates a gap-free sequence (and the unique index on the business
/// collection's number field).
#[utoipa::path(post, path = "/v1/gapless", operation_id = "gapless_create", tag = "gapless", request_body = GaplessCreateBody,
    responses((status = 201, description = "Created: the status (as `GET /v1/gapless/{name}` answers it), `created: true`", body = GaplessCreated), (status = 200, description = "`if_not_exists` found it with the same collection, field, start and void field (else 409 `spec_conflict`), and the token may `peek` on it: its status, `created: false`, and in `altered` its longest lease when an alter changed it since, kept as stored (without `peek`: 409 `already_exists`)", body = GaplessCreated)))]
pub(super) async fn create(
    State(st): State<Shared>,
    req: Request,
) -> Result<(StatusCode, Json<GaplessCreated>), ApiError> {
    let rule = st.authenticate(req.headers())?;
    super::state::AppState::permit_on(&rule, Op::Create, None, NOUN)?;
    let b: GaplessCreateBody = json_body(req).await?;
    super::state::AppState::permit_on(&rule, Op::Create, Some(&b.name), NOUN)?;
    check_name_of(NOUN, &b.name, false)?;
    let void_field = b.void_field.clone().unwrap_or_else(|| "voided".to_owned());
    check_business(
        &b.collection,
        &[("field", &b.field), ("void_field", &void_field)],
    )?;
    let mut options = GaplessOptions::new(&b.collection, &b.field);
    if let Some(start) = b.start {
        options = options.with_start(start);
    }
    if let Some(seconds) = b.max_lease_seconds {
        options = options.with_max_lease(max_lease("max_lease_seconds", seconds)?);
    }
    if let Some(v) = &b.void_field {
        options = options.with_void_field(v);
    }
    if let Some(extra) = b.void_extra.clone() {
        options = options.with_void_extra(void_extra(extra)?);
    }
    let may_read = super::state::AppState::permit_on(&rule, Op::Peek, Some(&b.name), NOUN).is_ok();
    let acting = st.acting(&rule)?;
    let making = Making {
        noun: NOUN,
        name: &b.name,
        path: "/v1/gapless",
        if_not_exists: b.if_not_exists,
        may_read,
    };
    let (g, status) = create_or_ensure(
        making,
        acting.create_gapless(&b.name, options.clone()),
        || acting.ensure_gapless(&b.name, options),
    )
    .await?;
    let state = g.peek().await.map_err(|e| match status {
        StatusCode::CREATED => e.after_write(&format!("{NOUN} {:?} created", b.name)),
        _ => e,
    })?;
    Ok((
        status,
        Json(GaplessCreated::of(&state, status, g.altered())?),
    ))
}

/// `GET /v1/gapless`: one page of the gap-free sequences, by name, each with its status.
#[utoipa::path(get, path = "/v1/gapless", operation_id = "gapless_list", tag = "gapless",
    params(("limit" = Option<u64>, Query, description = "How many gap-free sequences at most (1 to 10 000; default 1000)"),
        ("after" = Option<String>, Query, description = "The cursor: list the names after this one (the `next` of the previous page)")),
    responses((status = 200, description = "`{\"gapless\": […], \"next\"}`: one page of the gap-free sequences the token may use, by name, each as `GET /v1/gapless/{name}` answers it (one that cannot be read as `{name, error}` in its place); `next` is the cursor of the next page, `null` after the last", body = GaplessList)))]
pub(super) async fn list(
    State(st): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<GaplessList>, ApiError> {
    let rule = st.authorize_on(&headers, Op::List, None, NOUN)?;
    let (limit, after) = page_query(&query, DEFAULT_PAGE, MAX_PAGE)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let d = &st.dispenser;
    let (gapless, next) = page_of(
        &st,
        &rule,
        limit,
        after,
        |a, patterns| async move {
            let mut list = d.list_gapless().matching(patterns).limit(limit);
            if let Some(a) = a {
                list = list.after(a);
            }
            list.await
        },
        |s: &GaplessState| &s.name,
        |s| Ok(GaplessEntry::Gapless(GaplessAnswer::of(s)?)),
        GaplessEntry::Unreadable,
    )
    .await?;
    Ok(Json(GaplessList { gapless, next }))
}

/// The body of `DELETE /v1/gapless/{name}` (optional).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct GaplessDeleteBody {
    /// Delete it even while a holder's lease runs: you know the holder is dead (if it is not,
    /// its write still meets the unique index). The history records it.
    #[serde(default)]
    pub(super) force: bool,
}

/// `DELETE /v1/gapless/{name}`: deletes a gap-free sequence's state (the business collection
/// and its documents stay); 409 `lease_held` while a holder's lease runs, unless `force`.
#[utoipa::path(delete, path = "/v1/gapless/{name}", operation_id = "gapless_delete", tag = "gapless", request_body(content = Option<GaplessDeleteBody>, description = "Optional: `{\"force\": true}`"),
    params(("name" = String, Path, description = "The gap-free sequence")),
    responses((status = 204, description = "Deleted")))]
pub(super) async fn delete(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let acting = st.acting(&st.authorize_on(req.headers(), Op::Delete, Some(&name), NOUN)?)?;
    check_name_of(NOUN, &name, false)?;
    let b: GaplessDeleteBody = optional_json_body(req).await?;
    acting.delete_gapless(&name).force(b.force).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/gapless/{name}`: the next number, the lease (the one pending number, if any),
/// the longest lease, whether the unique index is there, and the voided numbers with their
/// reasons.
#[utoipa::path(get, path = "/v1/gapless/{name}", operation_id = "gapless_peek", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")),
    responses((status = 200, description = "`{name, collection, field, void_field, next, max_lease_seconds, unique_index, lease: {number, holder, expires, waiters}|null, lease_expired, server_time, voided: [{number, reason, at}]}` (the lease by the server's clock)", body = GaplessAnswer)))]
pub(super) async fn peek(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<GaplessAnswer>, ApiError> {
    st.authorize(&headers, Op::Peek, Some(&name))?;
    check_name_of(NOUN, &name, false)?;
    let g = st.dispenser.open_gapless(&name).await?;
    Ok(Json(GaplessAnswer::of(&g.peek().await?)?))
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
    responses((status = 200, description = "The status after the void (as `GET /v1/gapless/{name}` answers it) when the token may also `peek` the sequence, else `{name, voided}` (the number voided)", body = VoidAnswer)))]
pub(super) async fn void(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<VoidAnswer>, ApiError> {
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
        let status = g.peek().await.map_err(|e| e.after_write(&voided))?;
        Ok(Json(VoidAnswer::State(GaplessAnswer::of(&status)?)))
    } else {
        Ok(Json(VoidAnswer::Voided {
            name,
            voided: b.number,
        }))
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

/// `POST /v1/gapless/{name}/release` (token operation `release`): ends the lease of a holder
/// that stopped, at once — voids its number if it did not write it, moves past what it
/// wrote if it did.
#[utoipa::path(post, path = "/v1/gapless/{name}/release", operation_id = "gapless_release", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")), request_body = ReleaseBody,
    responses((status = 200, description = "What every surface answers a release with — `{outcome: \"voided\", number}` or `{outcome: \"used\", first, last}` — with `name`; when the token may also `peek` the sequence, `status` (as `GET /v1/gapless/{name}` answers it); without `peek`, a `used` answer has no `last`", body = ReleaseAnswer)))]
pub(super) async fn release(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<ReleaseAnswer>, ApiError> {
    let acting = st.acting(&st.authorize(req.headers(), Op::Release, Some(&name))?)?;
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
        .force(b.force)
        .await
        .map_err(|e| refusal(e, &name, b.number, "released", peek))?;
    let status = match peek {
        true => Some(status_of(&g, b.number).await?),
        false => None,
    };
    Ok(Json(ReleaseAnswer::of(name, released, status)))
}

/// The status after the lease on `number` was released.
async fn status_of(g: &Gapless, number: i64) -> Result<GaplessAnswer, ApiError> {
    let released = format!("the lease on number {number} released");
    GaplessAnswer::of(&g.peek().await.map_err(|e| e.after_write(&released))?)
}

/// The body of an alter of a gap-free sequence.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GaplessAlterBody {
    /// The longest lease, in seconds (a fraction allowed: 0.001 to 86 400): no holder's
    /// lease counts for longer, the leases already taken included.
    pub(super) max_lease_seconds: f64,
}

/// `POST /v1/gapless/{name}/alter` (token operation `alter`): changes the sequence's
/// settings (its longest lease).
#[utoipa::path(post, path = "/v1/gapless/{name}/alter", operation_id = "gapless_alter", tag = "gapless", params(("name" = String, Path, description = "The gap-free sequence")), request_body = GaplessAlterBody,
    responses((status = 200, description = "`{name, max_lease_seconds}`", body = MaxLeaseAnswer)))]
pub(super) async fn alter(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<MaxLeaseAnswer>, ApiError> {
    let acting = st.acting(&st.authorize(req.headers(), Op::Alter, Some(&name))?)?;
    check_name_of(NOUN, &name, false)?;
    let b: GaplessAlterBody = json_body(req).await?;
    let lease = max_lease("max_lease_seconds", b.max_lease_seconds)?;
    let g = acting.open_gapless(&name).await?;
    let s = g
        .alter(GaplessAlter::default().with_max_lease(lease))
        .await?;
    Ok(Json(MaxLeaseAnswer {
        name,
        max_lease_seconds: s.max_lease.as_secs_f64(),
    }))
}
