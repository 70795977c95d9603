//! What the service keeps of queues: a handle per queue used so far, and the boards watching
//! them (one status feed per watched queue, fed by a poller in `ui/events.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dispenser::queue::Queue;
use dispenser::{Dispenser, Error};
use tokio::sync::{Notify, watch};

/// What the service keeps of queues: a handle per queue used so far (its range, so a take
/// is one write) and the boards watching them.
#[derive(Default)]
pub(super) struct Queues {
    handles: Mutex<HashMap<String, Queue>>,
    pub(super) events: Events,
}

impl Queues {
    /// The handle of `name`, opened (one read) on first use. A cached handle stays correct
    /// when the queue is deleted or created again with another range: its writes then find
    /// the document changed and decide from a fresh read (no such queue, or the new range).
    pub(super) async fn handle(&self, d: &Dispenser, name: &str) -> Result<Queue, Error> {
        let cached = self
            .handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        if let Some(q) = cached {
            return Ok(q);
        }
        let q = d.open_queue(name).await?;
        self.handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), q.clone());
        Ok(q)
    }
}

/// One watched queue: the latest status (as sent) and a way to wake its poller.
struct Watch {
    tx: watch::Sender<Option<String>>,
    wake: Arc<Notify>,
}

/// The watched queues, and the service's stop signal for the streams.
pub(super) struct Events {
    watches: Mutex<HashMap<String, Watch>>,
    stop: watch::Sender<bool>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            watches: Mutex::default(),
            stop: watch::channel(false).0,
        }
    }
}

impl Events {
    fn watches(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watch>> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the poller of `name`, if a board watches it (after a take or a call).
    pub(super) fn nudge(&self, name: &str) {
        if let Some(w) = self.watches().get(name) {
            w.wake.notify_one();
        }
    }

    /// Ends every stream (the service is stopping).
    pub(super) fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// The status feed of `name`. When no board watches it yet, `start` is handed the
    /// feed's sender and wake-up, to start its poller (under the lock: a board subscribing
    /// meanwhile finds that poller).
    pub(super) fn subscribe(
        &self,
        name: &str,
        start: impl FnOnce(watch::Sender<Option<String>>, Arc<Notify>),
    ) -> watch::Receiver<Option<String>> {
        let mut watches = self.watches();
        if let Some(w) = watches.get(name) {
            return w.tx.subscribe();
        }
        let (tx, rx) = watch::channel(None);
        let wake = Arc::new(Notify::new());
        watches.insert(
            name.to_owned(),
            Watch {
                tx: tx.clone(),
                wake: Arc::clone(&wake),
            },
        );
        start(tx, wake);
        rx
    }

    /// Forgets `name` when no board reads its feed `tx` any more; then its poller stops.
    /// Under the lock: a board subscribing now either finds this poller or starts a new one.
    pub(super) fn forget_if_unwatched(
        &self,
        name: &str,
        tx: &watch::Sender<Option<String>>,
    ) -> bool {
        let mut watches = self.watches();
        if tx.receiver_count() == 0 {
            watches.remove(name);
            return true;
        }
        false
    }

    /// Ends when the service stops.
    pub(super) fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }
}
