//! The ticket page's API (the page is `ui/ticket.html`): a person takes a ticket on their own
//! phone through a ticket link (a take with a link's token comes here from `queues::take`),
//! follows it (`GET /v1/queues/{name}/tickets/{serial}`, and live `GET
//! /ui/queues/{name}/tickets/{serial}/events` in `ui/follow.rs`), gives it up (`POST
//! /v1/queues/{name}/give-up`), and the board and the kiosk show the link as a QR code (`GET
//! /v1/queues/{name}/ticket-link`).
//!
//! A link's token is public: it is printed on a poster, shown on a screen. So it may do only
//! this, on its one queue: take one ticket at a time, each with a request id `PHONE.TAKE`
//! that names the phone, within the link's limits per phone and per address (429
//! `too_many_takes` with `Retry-After` past them; `links.rs`); follow tickets (what a board
//! shows anyway); and give up the ticket of a take it made — proven by that take's request
//! id, which only the phone knows.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dispenser::queue::{Queue, QueueState, Ticket, TicketState};
use serde_json::{Value, json};

use super::answers::{FollowedTicket, TakeAnswer, TicketAnswer, TicketLink, of_library};
use super::errors::ApiError;
use super::json::idempotency_key;
use super::links::{Answered, Limited, Who, phone_of};
use super::names::check_name_of;
use super::qr;
use super::state::{AppState, Shared};
use super::tokens::{Link, Op, TokenRule};

const QUEUE: &str = "queue";

/// Whether `rule` may follow the tickets of queue `name`: `peek` on it, or a ticket link of
/// it (403 otherwise).
pub(super) fn may_follow(rule: &TokenRule, name: &str) -> Result<(), ApiError> {
    let op = if rule.link.is_some() {
        Op::Take
    } else {
        Op::Peek
    };
    AppState::permit_on(rule, op, Some(name), QUEUE)
}

/// The pattern of a ticket's serial in a path (1 to 19 digits, no leading zero).
pub(super) const SERIAL_PATTERN: &str = "^[1-9][0-9]{0,18}(?![\\s\\S])";

/// A ticket's serial in a path: a whole number from 1, as [`SERIAL_PATTERN`] (400 otherwise).
pub(super) fn serial_of(text: &str) -> Result<u64, ApiError> {
    Some(text)
        .filter(|t| (1..=19).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_digit()))
        .filter(|t| !t.starts_with('0'))
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| {
            ApiError::invalid_input(format!(
                "ticket serial {text:?} must be a whole number from 1, at most 19 digits (the `serial` a take answered)"
            ))
        })
}

/// The view of ticket `serial` in `status`, as answered and streamed: the library's view,
/// with the queue's name, how many wait in all and what it serves now (`serving`: the
/// status's `now_serving_label`).
pub(super) fn view_json(status: &QueueState, serving: &Value, serial: u64) -> (Value, TicketState) {
    let view = status.ticket(serial);
    let mut body = view.to_json();
    body["queue"] = json!(status.name);
    body["queue_waiting"] = json!(status.waiting);
    body["now_serving_label"] = serving.clone();
    (body, view.state)
}

/// `GET /v1/queues/{name}/tickets/{serial}`: where one ticket stands.
#[utoipa::path(get, path = "/v1/queues/{name}/tickets/{serial}", operation_id = "ticket", tag = "queues",
    params(("name" = String, Path, description = "The queue name"),
        ("serial" = String, Path, description = "The ticket's `serial`, as its take answered it: a whole number from 1")),
    responses((status = 200, description = "Where the ticket stands: `waiting` (with `position` and `estimated_wait_seconds`), `called` (a desk shows it: `desk`, `called_at`), `passed` (called, and its desk moved on), `cancelled`, `done` (long past), `not_taken`; with the queue's `incarnation` (a serial names a ticket of one incarnation only)", body = FollowedTicket)))]
pub(super) async fn view(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path((name, serial)): Path<(String, String)>,
) -> Result<Json<FollowedTicket>, ApiError> {
    let rule = st.authenticate(&headers)?;
    may_follow(&rule, &name)?;
    check_name_of(QUEUE, &name, false)?;
    let serial = serial_of(&serial)?;
    let q = st.queues.handle(&st.dispenser, &name).await?;
    let status = q.peek().await?;
    let serving = status.to_json()["now_serving_label"].take();
    Ok(Json(of_library(view_json(&status, &serving, serial).0)?))
}

/// How a window reads: "hour", "2 hours", "10 minutes", "90 seconds".
fn window_text(w: Duration) -> String {
    let s = w.as_secs();
    let (n, unit) = if s.is_multiple_of(3600) {
        (s / 3600, "hour")
    } else if s.is_multiple_of(60) {
        (s / 60, "minute")
    } else {
        (s, "second")
    };
    if n == 1 {
        unit.to_owned()
    } else {
        format!("{n} {unit}s")
    }
}

/// The 429 of a take past a link's limit, with `Retry-After` (whole seconds, at least 1).
fn too_many(rule: &TokenRule, l: &Limited) -> Response {
    let wait = l.retry_after.as_secs_f64().ceil().max(1.0) as u64;
    let per = window_text(l.window);
    let who = match &l.who {
        Who::Phone(_) => "one phone".to_owned(),
        Who::Address(IpAddr::V6(a)) => format!("one address block ({a}/64)"),
        Who::Address(a) => format!("one address ({a})"),
    };
    let message = format!(
        "ticket link {:?} lets {who} take {} ticket(s) per {per}, and all were taken: try again in {wait} s (a ticket already taken stays yours: its page still follows it)",
        rule.name, l.allowed
    );
    let mut resp =
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_takes", message).into_response();
    if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// The request id of a take through a link, and the phone it names (400 when missing or not
/// `PHONE.TAKE`).
fn link_key(rule: &TokenRule, key: Option<String>) -> Result<(String, String), ApiError> {
    let rules = format!(
        "`PHONE.TAKE`: the phone's id ({} to {} letters, digits, '-' or '_', the same for every take of the phone), a dot, and the take's own id; the ticket page makes it",
        super::links::PHONE_ID.start(),
        super::links::PHONE_ID.end()
    );
    let key = key.ok_or_else(|| {
        ApiError::invalid_input(format!(
            "a take through the ticket link {:?} needs an Idempotency-Key {rules}",
            rule.name
        ))
    })?;
    let phone = phone_of(&key)
        .ok_or_else(|| {
            ApiError::invalid_input(format!(
                "Idempotency-Key {key:?} of a take through the ticket link {:?} is not {rules}",
                rule.name
            ))
        })?
        .to_owned();
    Ok((key, phone))
}

/// The take of request id `key` through link `rule` (`phone`, from `client`): counted
/// against the link's limits unless this service answered that id already, given back when
/// it took nothing new (a replay, or an error that wrote nothing: a refusal, a lost race),
/// kept counted when its outcome is unknown (a lost reply: it may have taken a ticket; its
/// retry with the same id is then a replay, given back).
async fn counted_take(
    st: &AppState,
    q: &Queue,
    rule: &TokenRule,
    link: &Link,
    key: &str,
    phone: &str,
    client: Option<IpAddr>,
) -> Result<Result<Ticket, ApiError>, Response> {
    let now = Instant::now();
    let counted = if st.links.answered(&rule.name, key).is_some() {
        None
    } else {
        match st.links.count(&rule.name, link, phone, client, now) {
            Ok(c) => Some(c),
            Err(l) => return Err(too_many(rule, &l)),
        }
    };
    let outcome = q.take().request_id(key).caller(rule.name.clone()).await;
    st.queues.events.nudge(q.name());
    // A refusal or a lost race wrote nothing; a lost reply may have taken a ticket.
    let fresh = match &outcome {
        Ok(t) => !t.replayed,
        Err(e) => e.written() != dispenser::Written::Nothing,
    };
    if let Some(c) = counted
        && !fresh
    {
        st.links.refund(c, link, Instant::now());
    }
    if let Ok(t) = &outcome {
        st.links.remember(
            &rule.name,
            key,
            Answered { serial: t.serial },
            Instant::now(),
        );
    }
    Ok(outcome.map_err(ApiError::from))
}

/// A take through ticket link `rule` (from `queues::take`): one ticket, a request id
/// `PHONE.TAKE`, within the link's limits.
pub(super) async fn link_take(
    st: &AppState,
    rule: &TokenRule,
    link: &Link,
    name: &str,
    key: Option<String>,
    count: i64,
    client: Option<IpAddr>,
) -> Result<Response, ApiError> {
    if count != 1 {
        return Err(ApiError::invalid_input(format!(
            "a take through the ticket link {:?} is one ticket ({count} asked): one person, one ticket",
            rule.name
        )));
    }
    let (key, phone) = link_key(rule, key)?;
    let q = st.queues.handle(&st.dispenser, name).await?;
    match counted_take(st, &q, rule, link, &key, &phone, client).await {
        Ok(outcome) => Ok(Json(TakeAnswer::of(&[outcome?])?).into_response()),
        Err(refused) => Ok(refused),
    }
}

/// `POST /v1/queues/{name}/give-up`: gives up the ticket of a take, named by that take's
/// request id (`Idempotency-Key`), while it waits: the library's cancel by request id, one
/// write that checks that very ticket still waits (a number that came round to another
/// person's ticket is never cancelled in its place).
#[utoipa::path(post, path = "/v1/queues/{name}/give-up", operation_id = "give_up", tag = "queues",
    params(("name" = String, Path, description = "The queue name"),
        ("Idempotency-Key" = String, Header, description = "The request id of the take whose ticket is given up (a ticket link's: `PHONE.TAKE`). When no take of this token used it (within 24 hours), a ticket is taken with it and given up in the same write, so that the take, if it is still on its way, takes nothing")),
    responses((status = 200, description = "The ticket given up (cancelled), `cancelled: true`; 409 `ticket_not_waiting` when that ticket no longer waits (called, given up already), naming what became of it", body = TicketAnswer)))]
pub(super) async fn give_up(
    State(st): State<Shared>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let rule = st.authorize_on(req.headers(), Op::Take, Some(&name), QUEUE)?;
    check_name_of(QUEUE, &name, false)?;
    let key = idempotency_key(req.headers())?;
    let client = req
        .extensions()
        .get::<super::guard::ClientAddr>()
        .map(|c| c.0);
    let (key, counted) = match &rule.link {
        Some(link) => {
            let (key, phone) = link_key(&rule, key)?;
            // Counted as a take (a give-up whose take never came takes a ticket), unless this
            // service answered that id already.
            let counted = if st.links.answered(&rule.name, &key).is_some() {
                None
            } else {
                match st
                    .links
                    .count(&rule.name, link, &phone, client, Instant::now())
                {
                    Ok(c) => Some((c, link)),
                    Err(l) => return Ok(too_many(&rule, &l)),
                }
            };
            (key, counted)
        }
        None => {
            let key = key.ok_or_else(|| {
                ApiError::invalid_input(
                    "give-up needs the Idempotency-Key of the take whose ticket is given up",
                )
            })?;
            (key, None)
        }
    };
    let q = st
        .queues
        .handle(&st.dispenser, &name)
        .await?
        .with_caller(&rule.name)?;
    let outcome = q.cancel().request_id(key.clone()).await;
    st.queues.events.nudge(&name);
    // A give-up took a ticket only when no take had used the id (`replayed` false); a refusal
    // wrote nothing; a lost reply may have taken one.
    let took = match &outcome {
        Ok(t) => !t.replayed,
        Err(e) => e.written() != dispenser::Written::Nothing,
    };
    if let Some((c, link)) = counted
        && !took
    {
        st.links.refund(c, link, Instant::now());
    }
    if let Ok(t) = &outcome {
        st.links.remember(
            &rule.name,
            &key,
            Answered { serial: t.serial },
            Instant::now(),
        );
    }
    Ok(Json(TicketAnswer::cancelled(&outcome?)?).into_response())
}

/// `name` as one segment of a URL path (everything but the unreserved characters escaped).
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The service's address as a phone reaches it: `--public-url`, else the scheme and the
/// `Host` the request came with (when it reads as a host and port), else the address it
/// listens on.
fn origin(st: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &st.origin.public {
        return url.clone();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            (1..=255).contains(&h.len())
                && h.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                })
        })
        .map_or_else(|| st.origin.local.clone(), str::to_owned);
    format!("{}://{host}", st.origin.scheme)
}

/// `GET /v1/queues/{name}/ticket-link`: the queue's ticket link, and its QR code.
#[utoipa::path(get, path = "/v1/queues/{name}/ticket-link", operation_id = "ticket_link", tag = "queues",
    params(("name" = String, Path, description = "The queue name")),
    responses((status = 200, description = "The link of the queue's ticket page with the token of its ticket link (the first in the tokens file for this queue), and the link as a QR code in SVG, for a board or a kiosk to show; `url`, `qr_svg` and `token_name` are `null` when no ticket link is for this queue; 404 `no_such_queue` when the queue does not exist", body = TicketLink)))]
pub(super) async fn ticket_link(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<TicketLink>, ApiError> {
    let rule = st.authenticate(&headers)?;
    if AppState::permit_on(&rule, Op::Peek, Some(&name), QUEUE).is_err() {
        AppState::permit_on(&rule, Op::Take, Some(&name), QUEUE)?;
    }
    check_name_of(QUEUE, &name, false)?;
    // A name without a queue is 404, as for a peek: a board must not print a QR code for a
    // queue deleted (or never created), whose page would only say it does not exist.
    st.queues.handle(&st.dispenser, &name).await?.peek().await?;
    let tokens = st.tokens.current();
    let Some(link) = tokens
        .iter()
        .find(|r| r.link.as_ref().is_some_and(|l| l.queue == name))
    else {
        // No ticket link is for this queue (a page that asks shows none).
        return Ok(Json(TicketLink {
            queue: name,
            token_name: None,
            url: None,
            qr_svg: None,
        }));
    };
    let url = format!(
        "{}/ui/queues/{}/ticket#token={}",
        origin(&st, &headers),
        escaped(&name),
        escaped(&link.secret)
    );
    let svg = qr::svg(&url).ok_or_else(|| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!(
                "the ticket link of queue {name:?} is too long for a QR code ({} bytes); give the service a shorter --public-url or the link a shorter token",
                url.len()
            ),
        )
    })?;
    Ok(Json(TicketLink {
        queue: name,
        token_name: Some(link.name.clone()),
        url: Some(url),
        qr_svg: Some(svg),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_read_in_their_largest_whole_unit() {
        assert_eq!(window_text(Duration::from_secs(3600)), "hour");
        assert_eq!(window_text(Duration::from_secs(7200)), "2 hours");
        assert_eq!(window_text(Duration::from_secs(600)), "10 minutes");
        assert_eq!(window_text(Duration::from_secs(90)), "90 seconds");
    }

    #[test]
    fn names_and_tokens_are_escaped_as_one_segment() {
        assert_eq!(escaped("lobby"), "lobby");
        assert_eq!(escaped("a b/é#&"), "a%20b%2F%C3%A9%23%26");
    }

    #[test]
    fn serials_are_whole_numbers_from_one() {
        assert_eq!(serial_of("42").unwrap(), 42);
        assert_eq!(
            serial_of("9999999999999999999").unwrap(),
            9_999_999_999_999_999_999
        );
        for bad in [
            "0",
            "-1",
            "1.5",
            "",
            "x",
            "01",
            "+1",
            "10000000000000000000",
        ] {
            let e = serial_of(bad).err().unwrap();
            assert!(e.message.contains(&format!("{bad:?}")), "{}", e.message);
        }
    }
}
