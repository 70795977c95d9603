//! The queues' shared status feeds: one poller per watched queue reads its status every
//! [`POLL`] (and at once when a write of this service wakes it), however many pages and
//! requests follow it — the boards' and the phones' streams (`ui/events.rs`, `ui/follow.rs`)
//! and the ticket views and ticket links (`ticket.rs`, through [`latest`]) — and stops when
//! nobody follows it any more. So what the public ticket link can ask for costs the database a
//! bounded number of reads per queue per second, whatever the crowd.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{Notify, watch};

use super::classify::classify;
use super::queue_state::Snapshot;
use super::state::{AppState, Shared};

/// How often a watched queue's document is read.
pub(super) const POLL: Duration = Duration::from_millis(250);

/// The status of `name`: its JSON as an event's data, or `{"error": {kind, message}}`.
async fn read(st: &AppState, name: &str) -> Snapshot {
    let status = match st.queues.handle(&st.dispenser, name).await {
        Ok(q) => q.peek().await,
        Err(e) => Err(e),
    };
    match status {
        Ok(s) => {
            let mut json = s.to_json();
            Snapshot {
                text: json.to_string(),
                serving: json["now_serving_label"].take(),
                status: Some(s),
                error: None,
            }
        }
        Err(e) => Snapshot {
            text: error_json(st, &e),
            status: None,
            serving: serde_json::Value::Null,
            error: Some(e),
        },
    }
}

/// An error as an event's data: `{"error": {kind, message}}`, scrubbed.
pub(super) fn error_json(st: &AppState, e: &dispenser::Error) -> String {
    let (_, kind) = classify(e);
    json!({ "error": { "kind": kind, "message": st.scrub(&e.to_string()) } }).to_string()
}

/// Reads the status of `name` every [`POLL`] (or when woken) and publishes it when it
/// changed, until no page watches it or the service stops.
async fn poll(
    st: Shared,
    name: String,
    tx: watch::Sender<Option<Arc<Snapshot>>>,
    wake: Arc<Notify>,
) {
    let mut stop = st.queues.events.stopped();
    loop {
        let read = read(&st, &name).await;
        tx.send_if_modified(|shown| {
            let changed = shown.as_ref().map(|s| s.text.as_str()) != Some(read.text.as_str());
            if changed {
                *shown = Some(Arc::new(read));
            }
            changed
        });
        if st.queues.events.forget_if_unwatched(&name, &tx) {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = wake.notified() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// The latest status of `name` from its shared feed — what the boards and the phones'
/// streams follow — read at most every [`POLL`] (and after a write of this service) however
/// many ask: a crowd of phones reading their tickets costs the database what one board
/// costs. With `newer`, a snapshot that fails it is waited past for up to two polls (a
/// ticket just taken through this service, which the feed has not read yet).
pub(super) async fn latest(
    st: &Shared,
    name: &str,
    newer: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    let mut rx = watch(st, name);
    let first = match rx.wait_for(Option::is_some).await {
        Ok(s) => s.clone(),
        Err(_) => None,
    };
    let first = match first {
        Some(s) => s,
        // The poller ended before a read (the service stopping): read once here.
        None => return Arc::new(read(st, name).await),
    };
    if newer(&first) {
        return first;
    }
    let waited = tokio::time::timeout(
        2 * POLL,
        rx.wait_for(|s| s.as_ref().is_some_and(|s| newer(s))),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .and_then(|s| s.clone());
    waited.unwrap_or(first)
}

/// The status feed of `name`, its poller started when no page watches it yet.
pub(super) fn watch(st: &Shared, name: &str) -> watch::Receiver<Option<Arc<Snapshot>>> {
    st.queues.events.subscribe(name, |tx, wake| {
        tokio::spawn(poll(Arc::clone(st), name.to_owned(), tx, wake));
    })
}
