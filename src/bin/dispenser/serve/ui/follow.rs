//! A phone's live feed of its own ticket: `GET /ui/queues/{name}/tickets/{serial}/events`,
//! server-sent events (`event: ticket`, `data:` the ticket's view, as `GET
//! /v1/queues/{name}/tickets/{serial}` answers it but without `version` and `queue_waiting`,
//! which every take behind the ticket changes) — one at once, then one each time the view
//! changes (its place, its estimate, what is served now, the call). So a crowd following one
//! queue is sent nothing while people take tickets behind it.
//!
//! It reads the same status feed as the boards (`events.rs`: one poller per watched queue,
//! however many boards and phones follow it), so a thousand phones cost the database nothing
//! more than one board; each stream makes its ticket's view from the status it is sent. A
//! status that does not show the ticket yet (read before its take: `not_taken`) is not sent.
//! With `?incarnation=HEX` (the queue's, from the ticket's first view), a status of another
//! incarnation — the queue deleted and created again — is sent as it is, and ends the stream.
//! A stream also ends once its ticket is past (passed, cancelled, done: nothing more will
//! change), and where a board's ends (the service stopping, its token revoked,
//! [`MAX_STREAM`]).
//!
//! It needs a token that may follow the queue's tickets (`peek` on it, or its ticket link).
//! Ticket streams have caps of their own, apart from the boards' (a crowd of phones never
//! takes a board's place): `--max-ticket-streams-per-address` (429 past it),
//! `--max-ticket-streams-per-queue` and a quarter of `--max-connections` (503 past them), all
//! answered `too_many_streams` with a `Retry-After`.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr};

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use dispenser::queue::TicketState;

use super::events::{KEEP_ALIVE, refused};
use crate::serve::conn::MAX_STREAM;
use crate::serve::errors::ApiError;
use crate::serve::feed::watch;
use crate::serve::guard::ClientAddr;
use crate::serve::names::check_name_of;
use crate::serve::queue_state::Refused;
use crate::serve::state::Shared;
use crate::serve::ticket::{may_follow, serial_of, view_json};

/// The answer to a ticket stream past a cap.
fn too_many(refused_by: Refused, address: IpAddr, queue: &str) -> Response {
    let (status, message) = match refused_by {
        Refused::Address(n) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "address {address} already has {n} ticket stream(s) open, the most the service's --max-ticket-streams-per-address allows; the ticket page looks every few seconds instead"
            ),
        ),
        Refused::Token(n) | Refused::Queue(n) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "queue {queue:?} already has {n} ticket stream(s) open, the most the service's --max-ticket-streams-per-queue allows; try again later"
            ),
        ),
        Refused::Total(n) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the service already has {n} ticket stream(s) open, the most it allows (a quarter of its --max-connections); try again later"
            ),
        ),
    };
    refused(status, message)
}

/// Whether nothing more will change for a ticket in this state (`not_taken` is not sent:
/// the status was read before the ticket's take).
fn past(state: TicketState) -> bool {
    !matches!(
        state,
        TicketState::Waiting | TicketState::Called | TicketState::NotTaken
    )
}

/// A ticket's view as its stream sends it: without the queue's `version` and `queue_waiting`,
/// which change with every take (a phone is sent only what changes for its ticket).
fn streamed(mut view: serde_json::Value) -> String {
    if let Some(fields) = view.as_object_mut() {
        fields.remove("version");
        fields.remove("queue_waiting");
    }
    view.to_string()
}

/// The stream's `?incarnation=HEX` (24 hexadecimal digits), if given (400 when malformed or
/// for any other parameter).
fn incarnation_of(query: &[(String, String)]) -> Result<Option<String>, ApiError> {
    let mut found = None;
    for (k, v) in query {
        match k.as_str() {
            "incarnation"
                if found.is_none() && v.len() == 24 && v.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                found = Some(v.to_ascii_lowercase());
            }
            _ => {
                return Err(ApiError::invalid_input(format!(
                    "{k}={v:?}: a ticket stream takes only `incarnation`, once: the queue's incarnation, 24 hexadecimal digits"
                )));
            }
        }
    }
    Ok(found)
}

/// `GET /ui/queues/{name}/tickets/{serial}/events`.
pub(crate) async fn ticket_events(
    State(st): State<Shared>,
    headers: HeaderMap,
    client: Option<Extension<ClientAddr>>,
    Path((name, serial)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let token = st.authenticate(&headers)?;
    may_follow(&token, &name)?;
    check_name_of("queue", &name, false)?;
    let serial = serial_of(&serial)?;
    let incarnation = incarnation_of(&query)?;
    // A queue that does not exist is 404 before any stream starts.
    st.queues.handle(&st.dispenser, &name).await?;
    let address = client.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |Extension(c)| c.0);
    let place = match st.queues.events.admit_ticket(address, &name) {
        Ok(place) => place,
        Err(r) => return Ok(too_many(r, address, &name)),
    };
    let mut rx = watch(&st, &name);
    // The current view is the first event.
    rx.mark_changed();
    let stop = st.queues.events.stopped();
    let revoked = token.revoked();
    let deadline = tokio::time::Instant::now() + MAX_STREAM;
    // What was sent last (not sent again), and whether the ticket is past (the stream ends).
    let state = (rx, (stop, revoked), place, (String::new(), false));
    let stream = futures::stream::unfold(
        state,
        move |(mut rx, (mut stop, mut revoked), place, (mut sent, over))| {
            let incarnation = incarnation.clone();
            async move {
                if over {
                    return None;
                }
                loop {
                    let changed = tokio::select! {
                        changed = rx.changed() => changed.is_ok(),
                        _ = stop.wait_for(|s| *s) => false,
                        _ = revoked.wait_for(|r| *r) => false,
                        () = tokio::time::sleep_until(deadline) => false,
                    };
                    if !changed {
                        return None;
                    }
                    let shown = rx.borrow_and_update().clone();
                    let Some(snapshot) = shown else { continue };
                    let (text, over) = match &snapshot.status {
                        Some(status)
                            if incarnation
                                .as_ref()
                                .is_some_and(|i| *i != status.incarnation.to_hex()) =>
                        {
                            // Another incarnation: the page learns its ticket is gone.
                            let (view, _) = view_json(status, &snapshot.serving, serial);
                            (streamed(view), true)
                        }
                        Some(status) => {
                            let (view, state) = view_json(status, &snapshot.serving, serial);
                            if state == TicketState::NotTaken {
                                continue;
                            }
                            (streamed(view), past(state))
                        }
                        // `{"error": …}`, as the board is sent.
                        None => (snapshot.text.clone(), false),
                    };
                    if text == sent {
                        continue;
                    }
                    let event = Event::default().event("ticket").data(&text);
                    sent = text;
                    return Some((
                        Ok::<_, Infallible>(event),
                        (rx, (stop, revoked), place, (sent, over)),
                    ));
                }
            }
        },
    );
    let mut resp = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}
