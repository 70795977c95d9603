//! Ticket queues over HTTP: create (`POST /v1/queues`), list (`GET /v1/queues`), take,
//! call, recall, cancel, alter (`POST /v1/queues/{name}/…`), status (`GET
//! /v1/queues/{name}`) and delete. Each operation is one write of the queue's document by the
//! library (no block client, no cache: the queue document is the state), so the service adds
//! nothing to what `dispenser::queue` guarantees. A take with an `Idempotency-Key` header is
//! the library's take with a request id: the same key again answers the same tickets. A write
//! answered here also wakes the boards watching that queue at once (see `ui/events.rs`).

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use dispenser::Format;
use dispenser::queue::{self, QueueSpec};
use serde::Deserialize;
use utoipa::ToSchema;

use super::answers::{QueueCreated, QueueEntry, QueueList, QueueState, TakeAnswer, TicketAnswer};
use super::errors::ApiError;
use super::guard::ClientAddr;
use super::handlers::{DEFAULT_PAGE, MAX_PAGE, page_of, page_query};
use super::json::{idempotency_key, json_body, optional_json_body, whole, whole_or_null};
use super::make::{Making, create_or_ensure};
use super::names::check_name_of;
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
    /// How tickets are shown (`label`), e.g. `A-{n:03}`; default none (the number).
    #[serde(default)]
    #[schema(max_length = 200)]
    pub(super) format: Option<String>,
    /// Start again at the first ticket each local day (in `tz`).
    #[serde(default)]
    pub(super) daily: bool,
    /// The IANA time zone of the local day and hours (default `UTC`).
    #[serde(default)]
    #[schema(max_length = 64)]
    pub(super) tz: Option<String>,
    /// An existing queue with the same range is no error (nothing is written).
    #[serde(default)]
    pub(super) if_not_exists: bool,
}

/// The most tickets one take may ask for.
const MAX_TAKE: i64 = 10_000;

/// The body of `POST /v1/queues/{name}/take` (optional).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct TakeBody {
    /// How many tickets, all or nothing, consecutive (1 to 10 000; default 1).
    #[serde(default, deserialize_with = "whole_or_null")]
    #[schema(minimum = 1, maximum = 10000)]
    pub(super) count: Option<i64>,
}

/// The body of `POST /v1/queues/{name}/call` (optional).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CallBody {
    /// The desk calling: 1 to 16 letters, digits, spaces, `-`, `_` or `.`, not only spaces
    /// (the spaces at either end are dropped).
    #[serde(default)]
    #[schema(max_length = 16)]
    pub(super) desk: Option<String>,
    /// Call the waiting ticket that shows this number out of order: looked up once, then
    /// called by its serial (the answer's `serial`). Not with `serial`.
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) ticket: Option<i64>,
    /// Call the waiting ticket of this serial out of order (a take's `serial`): refused with
    /// 409 `ticket_not_waiting` when that very ticket no longer waits, even if its number came
    /// round to a newer ticket.
    #[serde(default, deserialize_with = "whole_or_null")]
    #[schema(minimum = 1)]
    pub(super) serial: Option<i64>,
    /// With `serial`: the queue's `incarnation` the ticket was taken from (a queue deleted
    /// and created again refuses it).
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{24}$")]
    pub(super) incarnation: Option<String>,
}

/// The body of `POST /v1/queues/{name}/recall` (optional).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RecallBody {
    /// The desk whose ticket is announced again (default: the desk without a name): as
    /// `CallBody`'s.
    #[serde(default)]
    #[schema(max_length = 16)]
    pub(super) desk: Option<String>,
    /// Only while the desk shows the ticket of this serial (what the operator's screen
    /// showed): 409 `ticket_not_waiting` when it shows another.
    #[serde(default, deserialize_with = "whole_or_null")]
    #[schema(minimum = 1)]
    pub(super) serial: Option<i64>,
    /// With `serial`: the queue's `incarnation` the ticket was taken from.
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{24}$")]
    pub(super) incarnation: Option<String>,
}

/// The body of `POST /v1/queues/{name}/cancel`: the ticket, by one of `serial`, `request_id`
/// or `ticket`.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CancelBody {
    /// The waiting ticket that shows this number: looked up once, then cancelled by its
    /// serial (the answer's `serial`).
    #[serde(default, deserialize_with = "whole_or_null")]
    pub(super) ticket: Option<i64>,
    /// The ticket of this serial (a take's `serial`): refused with 409 `ticket_not_waiting`
    /// when that very ticket no longer waits, even if its number came round to a newer one.
    #[serde(default, deserialize_with = "whole_or_null")]
    #[schema(minimum = 1)]
    pub(super) serial: Option<i64>,
    /// With `serial`: the queue's `incarnation` the ticket was taken from.
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{24}$")]
    pub(super) incarnation: Option<String>,
    /// The ticket the take with this request id (`Idempotency-Key`, of this token) got; when
    /// no take used it, one is taken with it and cancelled in the same write (so the take,
    /// arriving later, takes nothing).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 64)]
    pub(super) request_id: Option<String>,
}

/// A ticket's identity in a body: its serial (from 1) and the queue's incarnation (24
/// hexadecimal digits), both of which the OpenAPI document constrains (400 otherwise).
fn identity(
    serial: Option<i64>,
    incarnation: Option<&str>,
) -> Result<(Option<u64>, Option<dispenser::mongodb::bson::oid::ObjectId>), ApiError> {
    let serial = serial
        .map(|s| {
            u64::try_from(s).ok().filter(|s| *s >= 1).ok_or_else(|| {
                ApiError::invalid_input(format!("serial {s} is not a serial: they run from 1"))
            })
        })
        .transpose()?;
    let incarnation = incarnation
        .map(|h| {
            dispenser::mongodb::bson::oid::ObjectId::parse_str(h).map_err(|_| {
                ApiError::invalid_input(format!(
                    "incarnation {h:?} is not 24 hexadecimal digits (a queue's `incarnation`)"
                ))
            })
        })
        .transpose()?;
    Ok((serial, incarnation))
}

/// The body of `POST /v1/queues/{name}/alter`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct QueueAlterBody {
    /// The new highest ticket.
    #[serde(deserialize_with = "whole")]
    pub(super) max: i64,
}

/// The pattern of a desk label in the OpenAPI document: letters, digits, spaces, `-`, `_`
/// and `.`, at least one of them not a space (with `maxLength` 16).
pub(super) const DESK_PATTERN: &str = r"^ *[A-Za-z0-9._-][A-Za-z0-9 ._-]*(?![\s\S])";

/// Checks a desk label as the document declares it (400 otherwise; the library drops the
/// spaces at either end).
fn check_desk(desk: Option<&str>) -> Result<(), ApiError> {
    match desk {
        Some(d)
            if d.is_empty()
                || d.chars().count() > 16
                || !d
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-')) =>
        {
            Err(ApiError::invalid_input(format!(
                "desk {d:?} must be 1 to 16 letters, digits, spaces, '-', '_' or '.'"
            )))
        }
        Some(d) if d.trim_matches(' ').is_empty() => Err(ApiError::invalid_input(format!(
            "desk {d:?} is blank: a desk label needs a letter, a digit, '-', '_' or '.' to show on the board"
        ))),
        _ => Ok(()),
    }
}

/// `POST /v1/queues`: creates a queue (tickets `min+1 … max`, then `min`).
#[utoipa::path(post, path = "/v1/queues", operation_id = "queue_create", tag = "queues", request_body = QueueCreateBody,
    responses((status = 201, description = "Created: the status, `created: true`", body = QueueCreated), (status = 200, description = "`if_not_exists` found it with the same lowest ticket, format and day settings (else 409 `spec_conflict`), and the token may `peek` on it: its status, `created: false`, and in `altered` its highest ticket when an alter changed it since, kept as stored (without `peek`: 409 `already_exists`, nothing more)", body = QueueCreated)))]
pub(super) async fn create(
    State(st): State<Shared>,
    req: Request,
) -> Result<(StatusCode, Json<QueueCreated>), ApiError> {
    let rule = st.authenticate(req.headers())?;
    AppState::permit_on(&rule, Op::Create, None, QUEUE)?;
    let b: QueueCreateBody = json_body(req).await?;
    AppState::permit_on(&rule, Op::Create, Some(&b.name), QUEUE)?;
    check_name_of(QUEUE, &b.name, false)?;
    let d = QueueSpec::default();
    let (min, max) = (b.min.unwrap_or(d.min), b.max.unwrap_or(d.max));
    let mut spec = d.with_min(min).with_max(max).with_daily(b.daily);
    // The zone by name, as given: `validate` names the queue if it is unknown.
    spec.time_zone = b.tz.clone().unwrap_or_else(|| "UTC".to_owned());
    if let Some(f) = &b.format {
        spec = spec.with_format(Format::parse(f)?);
    }
    let may_read = AppState::permit_on(&rule, Op::Peek, Some(&b.name), QUEUE).is_ok();
    let acting = st.acting(&rule)?;
    // Whether this request made it: the version of a queue just made is 0, but so is that of
    // one another client made and nobody used yet; the insert is asked for first.
    let making = Making {
        noun: QUEUE,
        name: &b.name,
        path: "/v1/queues",
        if_not_exists: b.if_not_exists,
        may_read,
    };
    let (queue, status) =
        create_or_ensure(making, acting.create_queue(&b.name, spec.clone()), || {
            acting.ensure_queue(&b.name, spec)
        })
        .await?;
    let state = queue.peek().await.map_err(|e| match status {
        StatusCode::CREATED => e.after_write(&format!("queue {:?} created", b.name)),
        _ => e,
    })?;
    Ok((
        status,
        Json(QueueCreated::of(&state, status, queue.altered())?),
    ))
}

/// `GET /v1/queues/{name}`: what is being served, how many wait, the next ticket.
#[utoipa::path(get, path = "/v1/queues/{name}", operation_id = "queue_peek", tag = "queues", params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The queue's status", body = QueueState)))]
pub(super) async fn peek(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<QueueState>, ApiError> {
    st.authorize_on(&headers, Op::Peek, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let q = st.queues.handle(&st.dispenser, &name).await?;
    Ok(Json(QueueState::of(&q.peek().await?)?))
}

/// `POST /v1/queues/{name}/take`: takes the next ticket, or a family of `count` (409
/// `queue_full` when they do not fit beside the tickets held; nothing is taken). A ticket
/// link's take is one ticket with a request id `PHONE.TAKE`, within its limits (`ticket.rs`).
#[utoipa::path(post, path = "/v1/queues/{name}/take", operation_id = "take", tag = "queues", request_body(content = Option<TakeBody>, description = "Optional: `{\"count\": N}`"),
    params(("name" = String, Path, description = "The queue name"),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 64 printable ASCII characters, scoped to the token that sends it: the same key again from the same token (within 24 hours by the server's clock) answers the same tickets, `replayed: true`, and takes nothing more. Required of a ticket link's token, as `PHONE.TAKE` (the phone's id, 8 to 32 letters, digits, `-` or `_`, a dot, the take's own id)")),
    responses((status = 200, description = "The ticket taken (the first of a family, and `tickets`), with its position, estimated wait and the counters after it", body = TakeAnswer)))]
pub(super) async fn take(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let rule = st.authorize_on(req.headers(), Op::Take, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let key = idempotency_key(req.headers())?;
    let client = req.extensions().get::<ClientAddr>().map(|c| c.0);
    // A key belongs to the token that sent it: two kiosks whose keys collide never share a
    // take.
    let caller = rule.name.clone();
    let b: TakeBody = optional_json_body(req).await?;
    let count = b.count.unwrap_or(1);
    if !(1..=MAX_TAKE).contains(&count) {
        return Err(ApiError::invalid_input(format!(
            "count {count} must be from 1 to {MAX_TAKE}"
        )));
    }
    if let Some(link) = &rule.link {
        return super::ticket::link_take(&st, &rule, link, &name, key, count, client).await;
    }
    let q = st.queues.handle(&st.dispenser, &name).await?;
    let mut take = q.take().count(u64::try_from(count).unwrap_or(1));
    if let Some(k) = key {
        take = take.request_id(k).caller(caller);
    }
    let outcome = take.await;
    st.queues.events.nudge(&name);
    Ok(Json(TakeAnswer::of(&outcome?)?).into_response())
}

/// `POST /v1/queues/{name}/call`: calls the oldest waiting ticket, or `ticket` out of order,
/// from `desk` (409 `nobody_waiting` when none waits, `ticket_not_waiting` when the ticket
/// does not wait; nothing is called).
#[utoipa::path(post, path = "/v1/queues/{name}/call", operation_id = "call", tag = "queues", request_body(content = Option<CallBody>, description = "Optional: `{\"desk\": \"3\", \"ticket\": 42}`"),
    params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The ticket called, with the desk and the counters after it", body = TicketAnswer)))]
pub(super) async fn call(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<TicketAnswer>, ApiError> {
    st.authorize_on(req.headers(), Op::Call, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let b: CallBody = optional_json_body(req).await?;
    check_desk(b.desk.as_deref())?;
    let (serial, incarnation) = identity(b.serial, b.incarnation.as_deref())?;
    let q = st.queues.handle(&st.dispenser, &name).await?;
    let mut call = q.call();
    if let Some(d) = b.desk {
        call = call.desk(d);
    }
    let found = match b.ticket {
        Some(number) => Some(q.waiting_ticket(number).await?),
        None => None,
    };
    if let Some(t) = &found {
        call = call.serial(t.serial).incarnation(t.incarnation);
    }
    if let Some(s) = serial {
        call = call.serial(s);
    }
    if let Some(i) = incarnation {
        call = call.incarnation(i);
    }
    let outcome = call.await;
    st.queues.events.nudge(&name);
    Ok(Json(TicketAnswer::of(&outcome?)?))
}

/// A recall or a finish: an act on what `desk` shows (only while it shows the ticket of
/// `serial` and `incarnation`, when given).
async fn at_desk(
    st: Shared,
    name: String,
    req: Request,
    act: impl for<'q> FnOnce(&'q dispenser::queue::Queue) -> dispenser::queue::AtDesk<'q>,
) -> Result<Json<TicketAnswer>, ApiError> {
    st.authorize_on(req.headers(), Op::Call, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let b: RecallBody = optional_json_body(req).await?;
    check_desk(b.desk.as_deref())?;
    let (serial, incarnation) = identity(b.serial, b.incarnation.as_deref())?;
    let q = st.queues.handle(&st.dispenser, &name).await?;
    let mut act = act(&q);
    if let Some(desk) = b.desk {
        act = act.desk(desk);
    }
    if let Some(s) = serial {
        act = act.serial(s);
    }
    if let Some(i) = incarnation {
        act = act.incarnation(i);
    }
    let outcome = act.await;
    st.queues.events.nudge(&name);
    Ok(Json(TicketAnswer::of(&outcome?)?))
}

/// `POST /v1/queues/{name}/recall`: announces again the ticket a desk shows (409
/// `no_ticket_shown` when it shows none). Nobody is served.
#[utoipa::path(post, path = "/v1/queues/{name}/recall", operation_id = "recall", tag = "queues", request_body(content = Option<RecallBody>, description = "Optional: `{\"desk\": \"3\"}`"),
    params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The ticket announced again", body = TicketAnswer)))]
pub(super) async fn recall(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<TicketAnswer>, ApiError> {
    at_desk(st, name, req, |q| q.recall()).await
}

/// `POST /v1/queues/{name}/finish`: the desk is done with its ticket and shows none (409
/// `no_ticket_shown` when it shows none).
#[utoipa::path(post, path = "/v1/queues/{name}/finish", operation_id = "finish", tag = "queues", request_body(content = Option<RecallBody>, description = "Optional: `{\"desk\": \"3\"}`"),
    params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The ticket the desk showed", body = TicketAnswer)))]
pub(super) async fn finish(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<TicketAnswer>, ApiError> {
    at_desk(st, name, req, |q| q.finish()).await
}

/// `POST /v1/queues/{name}/cancel`: cancels a waiting ticket (409 `ticket_not_waiting`).
#[utoipa::path(post, path = "/v1/queues/{name}/cancel", operation_id = "cancel", tag = "queues", request_body = CancelBody,
    params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The ticket cancelled, `cancelled: true`", body = TicketAnswer)))]
pub(super) async fn cancel(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<TicketAnswer>, ApiError> {
    let rule = st.authorize_on(req.headers(), Op::Call, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let b: CancelBody = json_body(req).await?;
    let (serial, incarnation) = identity(b.serial, b.incarnation.as_deref())?;
    let q = st
        .queues
        .handle(&st.dispenser, &name)
        .await?
        .with_caller(&rule.name)?;
    let mut cancel = q.cancel();
    if let Some(number) = b.ticket {
        let t = q.waiting_ticket(number).await?;
        cancel = cancel.serial(t.serial).incarnation(t.incarnation);
    }
    if let Some(s) = serial {
        cancel = cancel.serial(s);
    }
    if let Some(i) = incarnation {
        cancel = cancel.incarnation(i);
    }
    if let Some(id) = b.request_id {
        cancel = cancel.request_id(id);
    }
    let outcome = cancel.await;
    st.queues.events.nudge(&name);
    Ok(Json(TicketAnswer::cancelled(&outcome?)?))
}

/// `POST /v1/queues/{name}/alter`: changes the highest ticket (409 `would_remap` when a ticket
/// waiting or shown would be remapped; nothing written).
#[utoipa::path(post, path = "/v1/queues/{name}/alter", operation_id = "queue_alter", tag = "queues", request_body = QueueAlterBody,
    params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The queue's status after the change", body = QueueState)))]
pub(super) async fn alter(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<QueueState>, ApiError> {
    let rule = st.authorize_on(req.headers(), Op::Alter, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let b: QueueAlterBody = json_body(req).await?;
    let q = st.queues.handle(&st.dispenser, &name).await?;
    let change = dispenser::queue::QueueAlter::default().with_max(b.max);
    let outcome = q.with_caller(&rule.name)?.alter(change).await;
    st.queues.events.nudge(&name);
    Ok(Json(QueueState::of(&outcome?)?))
}

/// `GET /v1/queues`: one page of the queues, by name.
#[utoipa::path(get, path = "/v1/queues", operation_id = "queue_list", tag = "queues",
    params(("limit" = Option<u64>, Query, description = "How many queues at most (1 to 10 000; default 1000)"),
        ("after" = Option<String>, Query, description = "The cursor: list the names after this one (the `next` of the previous page)")),
    responses((status = 200, description = "`{\"queues\": […], \"next\"}`: one page of the queues the token may use, by name (a document that cannot be read as `{name, error}` in its place); `next` is the cursor of the next page, `null` after the last", body = QueueList)))]
pub(super) async fn list(
    State(st): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<QueueList>, ApiError> {
    let rule = st.authorize_on(&headers, Op::List, None, QUEUE)?;
    let (limit, after) = page_query(&query, DEFAULT_PAGE, MAX_PAGE)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let d = &st.dispenser;
    let (queues, next) = page_of(
        &st,
        &rule,
        limit,
        after,
        |a, patterns| async move {
            let mut list = d.list_queues().matching(patterns).limit(limit);
            if let Some(a) = a {
                list = list.after(a);
            }
            list.await
        },
        |q: &queue::QueueState| &q.name,
        |q| Ok(QueueEntry::Queue(QueueState::of(q)?)),
        QueueEntry::Unreadable,
    )
    .await?;
    Ok(Json(QueueList { queues, next }))
}

/// The body of `DELETE /v1/queues/{name}` (optional).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct QueueDeleteBody {
    /// Delete the queue even while tickets wait or a desk shows one (created again, it would
    /// hand out their numbers again): you know nobody waits any more. The history records it.
    #[serde(default)]
    pub(super) force: bool,
}

/// `DELETE /v1/queues/{name}`: deletes a queue in which no ticket is held (409 `queue_in_use`,
/// naming how many wait and how many desks show a ticket, nothing deleted), or any with
/// `force: true`.
#[utoipa::path(delete, path = "/v1/queues/{name}", operation_id = "queue_delete", tag = "queues", request_body(content = Option<QueueDeleteBody>, description = "Optional: `{\"force\": true}`"),
    params(("name" = String, Path, description = "The queue name")),
    responses((status = 204, description = "Deleted")))]
pub(super) async fn delete(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<StatusCode, ApiError> {
    let acting = st.acting(&st.authorize_on(req.headers(), Op::Delete, Some(&name), QUEUE)?)?;
    check_name_of(QUEUE, &name, false)?;
    let b: QueueDeleteBody = optional_json_body(req).await?;
    acting.delete_queue(&name).force(b.force).await?;
    st.queues.events.nudge(&name);
    Ok(StatusCode::NO_CONTENT)
}
