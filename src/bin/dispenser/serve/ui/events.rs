//! The board's live feed: `GET /ui/queues/{name}/events`, server-sent events (`event:
//! status`, `data:` the queue's status JSON, as `GET /v1/queues/{name}` answers it) — one
//! event at once, then one per change.
//!
//! Calls made elsewhere (the CLI, another service, the library) reach no one here, so the
//! service watches the queue document: one poller per watched queue, however many boards
//! show it, reads the status every quarter of a second (`feed.rs`) and sends it when it changed; a take or call
//! answered by this service wakes the poller at once. The poller stops when its last board
//! goes. A stream ends on shutdown (so the service can stop) and after [`MAX_STREAM`] (the
//! page reconnects); a comment every [`KEEP_ALIVE`] keeps proxies from closing it. Its
//! connection (`conn.rs`) is closed when the stream could not end by itself at its limit, or
//! when its client reads nothing for 30 s, so a board that stops reading gives its place
//! back.
//!
//! A stream ends when a reload of the tokens file (SIGHUP) removes or changes its token.
//!
//! It needs a token with `peek` on the queue, sent as `Authorization: Bearer` like every
//! other call: the pages read the stream with `fetch` (which can send the header), not
//! `EventSource` (which cannot), so no token ever travels in a URL.
//!
//! A stream holds a connection for as long as it lasts, so streams are capped: per token
//! (`--max-streams-per-token`, 429 past it), per queue (`--max-streams-per-queue`) and in all
//! (half of `--max-connections`, so streams never take the other half; 503 past these two),
//! all answered `too_many_streams` with a `Retry-After`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use crate::serve::conn::MAX_STREAM;
use crate::serve::errors::ApiError;
use crate::serve::feed::watch;
use crate::serve::names::check_name_of;
use crate::serve::queue_state::Refused;
use crate::serve::state::Shared;
use crate::serve::tokens::Op;

/// How often an idle stream carries a comment.
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Seconds a client refused for too many streams is asked to wait.
const RETRY_AFTER: &str = "10";

/// The answer to a stream past a cap (see the module documentation).
fn too_many_streams(why: Refused, token: &str, queue: &str) -> Response {
    let (status, message) = match why {
        Refused::Token(n) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "token {token:?} already has {n} event stream(s) open, the most the service's --max-streams-per-token allows: close a board that uses it, or give each screen a token of its own"
            ),
        ),
        // Boards are not capped per address (only the phones' ticket streams are).
        Refused::Address(n) | Refused::Queue(n) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "queue {queue:?} already has {n} event stream(s) open, the most the service's --max-streams-per-queue allows; try again later"
            ),
        ),
        Refused::Total(n) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the service already has {n} event stream(s) open, the most it allows (half of its --max-connections); try again later"
            ),
        ),
    };
    refused(status, message)
}

/// A stream refused (`too_many_streams`), with `Retry-After`.
pub(super) fn refused(status: StatusCode, message: String) -> Response {
    let mut resp = ApiError::new(status, "too_many_streams", message).into_response();
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER));
    resp
}

/// `GET /ui/queues/{name}/events`.
pub(crate) async fn events(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let token = st.authorize_on(&headers, Op::Peek, Some(&name), "queue")?;
    check_name_of("queue", &name, false)?;
    // A queue that does not exist is 404 before any stream starts.
    st.queues.handle(&st.dispenser, &name).await?;
    let place = match st.queues.events.admit(&token.name, &name) {
        Ok(place) => place,
        Err(refused) => return Ok(too_many_streams(refused, &token.name, &name)),
    };
    let mut rx = watch(&st, &name);
    // The current status is the first event.
    rx.mark_changed();
    let stop = st.queues.events.stopped();
    // A reload of the tokens file that removes or changes the token ends its streams.
    let revoked = token.revoked();
    let deadline = tokio::time::Instant::now() + MAX_STREAM;
    // The stream's place under the caps goes with it, and comes back when it ends.
    let state = (rx, (stop, revoked), place);
    let stream = futures::stream::unfold(
        state,
        move |(mut rx, (mut stop, mut revoked), place)| async move {
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
                if let Some(snapshot) = shown {
                    let event = Event::default().event("status").data(&snapshot.text);
                    return Some((Ok::<_, Infallible>(event), (rx, (stop, revoked), place)));
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
