//! What the service keeps of queues: a handle per queue used so far, and the pages watching
//! them (one status feed per watched queue, fed by a poller in `ui/events.rs`, and how many
//! streams are open under their caps: the boards' per token, per queue and in all, the
//! phones' ticket streams per address, per queue and in all).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use dispenser::queue::{Queue, QueueState};
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
    /// No queue used yet; event streams under `limits`.
    pub(super) fn new(limits: StreamLimits) -> Self {
        Queues {
            handles: Mutex::default(),
            events: Events::new(limits),
        }
    }

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

/// One watched queue: the latest status (as sent), a way to wake its poller, and what tells
/// a status read before this service's last write from one read after it.
struct Watch {
    tx: watch::Sender<Option<Arc<Snapshot>>>,
    wake: Arc<Notify>,
    fresh: Arc<Fresh>,
}

/// The writes this service made to a watched queue, counted: a status read before the last
/// of them is stale for a reader that must see them (a phone that has just taken its ticket).
#[derive(Default)]
pub(super) struct Fresh {
    /// Bumped by every write of this service to the queue ([`Events::nudge`]).
    pub(super) written: std::sync::atomic::AtomicU64,
    /// One fresh read at a time: readers who find the feed stale wait for it, and share it.
    pub(super) refresh: tokio::sync::Mutex<Option<Arc<Snapshot>>>,
}

/// A queue's status as the poller read it: the JSON a board is sent, and the status itself,
/// from which each followed ticket's view is made (`None` when the read failed: the JSON then
/// says why).
#[derive(Clone)]
pub(super) struct Snapshot {
    /// [`Fresh::written`] when the read began: it saw every write of this service up to it.
    pub(super) written: u64,
    pub(super) text: String,
    pub(super) status: Option<QueueState>,
    /// The status's `now_serving_label` (what a followed ticket's view shows beside it).
    pub(super) serving: serde_json::Value,
    /// Why the read failed, when it did (no such queue, the database away).
    pub(super) error: Option<Error>,
}

/// The watched queues, the streams open and the service's stop signal for the streams.
pub(super) struct Events {
    watches: Mutex<HashMap<String, Watch>>,
    streams: Arc<Mutex<Streams>>,
    stop: watch::Sender<bool>,
}

impl Default for Events {
    fn default() -> Self {
        Events::new(StreamLimits::default())
    }
}

/// How many event streams may be open at once.
#[derive(Clone, Copy, Debug)]
pub(super) struct StreamLimits {
    /// With one token.
    pub(super) per_token: usize,
    /// On one queue.
    pub(super) per_queue: usize,
    /// In all (half of the connection cap: the other half is never taken by streams).
    pub(super) total: usize,
    /// Ticket streams (the phones') from one address.
    pub(super) tickets_per_address: usize,
    /// Ticket streams on one queue.
    pub(super) tickets_per_queue: usize,
    /// Ticket streams in all: a quarter of the connection cap, beside the boards' half.
    pub(super) tickets_total: usize,
}

/// The default of `--max-streams-per-token`.
pub(super) const STREAMS_PER_TOKEN: usize = 16;
/// The default of `--max-streams-per-queue`.
pub(super) const STREAMS_PER_QUEUE: usize = 64;
/// The default of `--max-ticket-streams-per-address`.
pub(super) const TICKET_STREAMS_PER_ADDRESS: usize = 250;
/// The default of `--max-ticket-streams-per-queue`.
pub(super) const TICKET_STREAMS_PER_QUEUE: usize = 2000;

impl StreamLimits {
    /// The limits under a connection cap of `max_connections`: the boards' streams in all at
    /// most half of it, the phones' at most a quarter (at least one each); the phones' per
    /// address and per queue at their defaults.
    pub(super) fn new(per_token: usize, per_queue: usize, max_connections: usize) -> Self {
        StreamLimits {
            per_token,
            per_queue,
            total: (max_connections / 2).max(1),
            tickets_per_address: TICKET_STREAMS_PER_ADDRESS,
            tickets_per_queue: TICKET_STREAMS_PER_QUEUE,
            tickets_total: (max_connections / 4).max(1),
        }
    }

    /// With the ticket streams' caps per address and per queue.
    pub(super) fn with_tickets(mut self, per_address: usize, per_queue: usize) -> Self {
        self.tickets_per_address = per_address;
        self.tickets_per_queue = per_queue;
        self
    }
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits::new(STREAMS_PER_TOKEN, STREAMS_PER_QUEUE, 10_000)
    }
}

/// The streams open: the boards' by token name, by queue, in all; the phones' ticket streams
/// by address, by queue, in all.
struct Streams {
    limits: StreamLimits,
    by_token: HashMap<String, usize>,
    by_queue: HashMap<String, usize>,
    total: usize,
    tickets_by_address: HashMap<IpAddr, usize>,
    tickets_by_queue: HashMap<String, usize>,
    tickets_total: usize,
}

/// Why a stream was refused: the cap it would pass, and that cap.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    Token(usize),
    Address(usize),
    Queue(usize),
    Total(usize),
}

/// Whose place a stream holds.
enum Holder {
    Board { token: String, queue: String },
    Ticket { address: IpAddr, queue: String },
}

/// One open stream's place under the caps, given back when dropped.
pub(super) struct StreamPlace {
    streams: Arc<Mutex<Streams>>,
    holder: Holder,
}

/// One less of `key` in `map` (forgotten at none).
fn release<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

impl Drop for StreamPlace {
    fn drop(&mut self) {
        let mut guard = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let s = &mut *guard;
        match &self.holder {
            Holder::Board { token, queue } => {
                release(&mut s.by_token, token);
                release(&mut s.by_queue, queue);
                s.total -= 1;
            }
            Holder::Ticket { address, queue } => {
                release(&mut s.tickets_by_address, address);
                release(&mut s.tickets_by_queue, queue);
                s.tickets_total -= 1;
            }
        }
    }
}

impl Events {
    pub(super) fn new(limits: StreamLimits) -> Self {
        Events {
            watches: Mutex::default(),
            streams: Arc::new(Mutex::new(Streams {
                limits,
                by_token: HashMap::new(),
                by_queue: HashMap::new(),
                total: 0,
                tickets_by_address: HashMap::new(),
                tickets_by_queue: HashMap::new(),
                tickets_total: 0,
            })),
            stop: watch::channel(false).0,
        }
    }

    /// A place for one more stream of `token` (its name) on `queue`, unless it would pass a
    /// cap.
    pub(super) fn admit(&self, token: &str, queue: &str) -> Result<StreamPlace, Refused> {
        let mut s = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let limits = s.limits;
        let of_token = s.by_token.get(token).copied().unwrap_or(0);
        let of_queue = s.by_queue.get(queue).copied().unwrap_or(0);
        if of_token >= limits.per_token {
            return Err(Refused::Token(limits.per_token));
        }
        if of_queue >= limits.per_queue {
            return Err(Refused::Queue(limits.per_queue));
        }
        if s.total >= limits.total {
            return Err(Refused::Total(limits.total));
        }
        *s.by_token.entry(token.to_owned()).or_default() += 1;
        *s.by_queue.entry(queue.to_owned()).or_default() += 1;
        s.total += 1;
        Ok(StreamPlace {
            streams: Arc::clone(&self.streams),
            holder: Holder::Board {
                token: token.to_owned(),
                queue: queue.to_owned(),
            },
        })
    }

    /// A place for one more ticket stream from `address` (its block: see `links::block`) on
    /// `queue`, unless it would pass a cap (the boards' caps are apart: phones never take a
    /// board's place).
    pub(super) fn admit_ticket(
        &self,
        address: IpAddr,
        queue: &str,
    ) -> Result<StreamPlace, Refused> {
        // Counted by address block, as the links' takes and reads are (an IPv6 host by its
        // /64: one host cannot fill a queue's places with addresses of its own).
        let address = super::links::block(address);
        let mut s = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let limits = s.limits;
        if s.tickets_by_address.get(&address).copied().unwrap_or(0) >= limits.tickets_per_address {
            return Err(Refused::Address(limits.tickets_per_address));
        }
        if s.tickets_by_queue.get(queue).copied().unwrap_or(0) >= limits.tickets_per_queue {
            return Err(Refused::Queue(limits.tickets_per_queue));
        }
        if s.tickets_total >= limits.tickets_total {
            return Err(Refused::Total(limits.tickets_total));
        }
        *s.tickets_by_address.entry(address).or_default() += 1;
        *s.tickets_by_queue.entry(queue.to_owned()).or_default() += 1;
        s.tickets_total += 1;
        Ok(StreamPlace {
            streams: Arc::clone(&self.streams),
            holder: Holder::Ticket {
                address,
                queue: queue.to_owned(),
            },
        })
    }

    fn watches(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watch>> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a write of this service to `name` and wakes its poller, if a page or a reader
    /// follows it (after a take, a call, a give-up, …).
    pub(super) fn nudge(&self, name: &str) {
        if let Some(w) = self.watches().get(name) {
            w.fresh
                .written
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
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
        start: impl FnOnce(watch::Sender<Option<Arc<Snapshot>>>, Arc<Notify>, Arc<Fresh>),
    ) -> (watch::Receiver<Option<Arc<Snapshot>>>, Arc<Fresh>) {
        let mut watches = self.watches();
        if let Some(w) = watches.get(name) {
            return (w.tx.subscribe(), Arc::clone(&w.fresh));
        }
        let (tx, rx) = watch::channel(None);
        let wake = Arc::new(Notify::new());
        let fresh = Arc::new(Fresh::default());
        watches.insert(
            name.to_owned(),
            Watch {
                tx: tx.clone(),
                wake: Arc::clone(&wake),
                fresh: Arc::clone(&fresh),
            },
        );
        start(tx, wake, Arc::clone(&fresh));
        (rx, fresh)
    }

    /// Forgets `name` when no board reads its feed `tx` any more; then its poller stops.
    /// Under the lock: a board subscribing now either finds this poller or starts a new one.
    pub(super) fn forget_if_unwatched(
        &self,
        name: &str,
        tx: &watch::Sender<Option<Arc<Snapshot>>>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_capped_per_token_per_queue_and_in_all() {
        let events = Events::new(StreamLimits::new(2, 3, 8));
        let a1 = events.admit("a", "lobby").unwrap();
        let _a2 = events.admit("a", "lobby").unwrap();
        assert_eq!(events.admit("a", "hall").err(), Some(Refused::Token(2)));
        let _b1 = events.admit("b", "lobby").unwrap();
        assert_eq!(events.admit("b", "lobby").err(), Some(Refused::Queue(3)));
        let _b2 = events.admit("b", "hall").unwrap();
        // Four in all: half of 8 connections.
        assert_eq!(events.admit("c", "hall").err(), Some(Refused::Total(4)));
        drop(a1);
        let _c1 = events.admit("c", "hall").unwrap();
        assert_eq!(events.admit("a", "lobby").err(), Some(Refused::Total(4)));
    }

    /// The phones' ticket streams have caps of their own: a crowd of them never takes a
    /// board's place, nor the boards theirs.
    #[test]
    fn ticket_streams_are_capped_per_address_per_queue_and_in_all_apart_from_the_boards() {
        let events = Events::new(StreamLimits::new(2, 2, 12).with_tickets(2, 2));
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = (
            "192.0.2.1".parse().unwrap(),
            "192.0.2.2".parse().unwrap(),
            "192.0.2.3".parse().unwrap(),
        );
        let a1 = events.admit_ticket(a, "lobby").unwrap();
        let _a2 = events.admit_ticket(a, "hall").unwrap();
        assert_eq!(events.admit_ticket(a, "x").err(), Some(Refused::Address(2)));
        let _b1 = events.admit_ticket(b, "lobby").unwrap();
        assert_eq!(
            events.admit_ticket(c, "lobby").err(),
            Some(Refused::Queue(2))
        );
        // Three in all: a quarter of 12 connections.
        assert_eq!(events.admit_ticket(c, "x").err(), Some(Refused::Total(3)));
        // The boards still have every place of theirs.
        let _board1 = events.admit("board", "lobby").unwrap();
        let _board2 = events.admit("board", "lobby").unwrap();
        drop(a1);
        let _c1 = events.admit_ticket(c, "lobby").unwrap();
    }

    /// Regression (issue 59, 3): each IPv6 address of one /64 counted apart, so one host
    /// could fill a queue's places. They count as one block; another /64 is another.
    #[test]
    fn ticket_streams_count_an_ipv6_host_by_its_64() {
        let events = Events::new(StreamLimits::new(2, 2, 1000).with_tickets(2, 100));
        let v6 = |s: &str| -> IpAddr { s.parse().unwrap() };
        let _h1 = events.admit_ticket(v6("2001:db8:1:2::1"), "six").unwrap();
        let _h2 = events
            .admit_ticket(v6("2001:db8:1:2:ffff::7"), "six")
            .unwrap();
        assert_eq!(
            events.admit_ticket(v6("2001:db8:1:2:abcd::9"), "six").err(),
            Some(Refused::Address(2))
        );
        let _other = events.admit_ticket(v6("2001:db8:1:3::1"), "six").unwrap();
    }
}
