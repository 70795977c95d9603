//! The queues' shared status feeds: one poller per watched queue reads its status every
//! [`POLL`] (and at once when a write of this service wakes it), however many pages and
//! requests follow it — the boards' and the phones' streams (`ui/events.rs`, `ui/follow.rs`)
//! and the ticket views and ticket links (`ticket.rs`, through [`latest`]) — and stops when
//! nobody follows it any more. So what the public ticket link can ask for costs the database a
//! bounded number of reads per queue per second, whatever the crowd.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{Notify, watch};

use super::classify::classify;
use super::queue_state::{Fresh, Snapshot};
use super::state::{AppState, Shared};

/// How often a watched queue's document is read.
pub(super) const POLL: Duration = Duration::from_millis(250);

/// The status of `name` (`written`: the count of this service's writes before the read
/// began): its JSON as an event's data, or `{"error": {kind, message}}`.
async fn read(st: &AppState, name: &str, written: u64) -> Snapshot {
    let status = match st.queues.handle(&st.dispenser, name).await {
        Ok(q) => q.peek().await,
        Err(e) => Err(e),
    };
    match status {
        Ok(s) => {
            let mut json = s.to_json();
            Snapshot {
                written,
                text: json.to_string(),
                serving: json["now_serving_label"].take(),
                status: Some(s),
                error: None,
            }
        }
        Err(e) => Snapshot {
            written,
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
    fresh: Arc<Fresh>,
) {
    let mut stop = st.queues.events.stopped();
    loop {
        let written = fresh.written.load(SeqCst);
        let read = read(&st, &name, written).await;
        tx.send_if_modified(|shown| {
            let changed = shown.as_ref().map(|s| s.text.as_str()) != Some(read.text.as_str());
            if changed {
                *shown = Some(Arc::new(read));
            } else if let Some(s) = shown.as_mut() {
                // The same status, read later: kept as it is for the pages (nothing to send),
                // but known to have seen the writes up to this read.
                if s.written < written {
                    let mut later = (**s).clone();
                    later.written = written;
                    *s = Arc::new(later);
                }
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
/// streams follow — read at most every [`POLL`] however many ask, so a crowd of phones
/// reading their tickets costs the database what one board costs. A status read before a
/// write this service made since (a phone's take, a desk's call) is not answered: the readers
/// who find it so share one fresh read, so each sees what this service wrote before it asked,
/// and the fresh reads are at most one per write.
pub(super) async fn latest(st: &Shared, name: &str) -> Arc<Snapshot> {
    let (mut rx, fresh) = subscribe(st, name);
    let written = fresh.written.load(SeqCst);
    let shown = match rx.wait_for(Option::is_some).await {
        Ok(s) => s.clone(),
        Err(_) => None,
    };
    if let Some(s) = shown.filter(|s| s.written >= written) {
        return s;
    }
    let mut refreshed = fresh.refresh.lock().await;
    // Another reader's fresh read, or the poller's, may have seen the writes meanwhile.
    let later = [rx.borrow().clone(), refreshed.clone()]
        .into_iter()
        .flatten()
        .filter(|s| s.written >= written)
        .max_by_key(|s| s.written);
    if let Some(s) = later {
        return s;
    }
    let now = fresh.written.load(SeqCst);
    let s = Arc::new(read(st, name, now).await);
    *refreshed = Some(Arc::clone(&s));
    s
}

/// The status feed of `name`, its poller started when no page watches it yet.
pub(super) fn watch(st: &Shared, name: &str) -> watch::Receiver<Option<Arc<Snapshot>>> {
    subscribe(st, name).0
}

/// [`watch`], with what tells a status read before this service's last write.
fn subscribe(st: &Shared, name: &str) -> (watch::Receiver<Option<Arc<Snapshot>>>, Arc<Fresh>) {
    st.queues.events.subscribe(name, |tx, wake, fresh| {
        tokio::spawn(poll(Arc::clone(st), name.to_owned(), tx, wake, fresh));
    })
}
