//! What a queue shows: a [`Ticket`] from a take or a call, and the [`QueueStatus`].

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document};

use super::document::{Stored, decode_stored, field};
use super::spec::{Counters, QueueSpec};
use crate::error::{Error, Result};

fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A ticket taken ([`Queue::take`](super::Queue::take)) or called
/// ([`Queue::call`](super::Queue::call)), with the queue's counters right after that write.
///
/// # Example
///
/// ```no_run
/// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
/// let t = q.take().await?;
/// println!("your ticket: {} ({} ahead of you)", t.number, t.waiting - 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ticket {
    /// The ticket shown to people: `min+1 … max`, then `min`, round again.
    pub number: i64,
    /// Which ticket of the queue's history this is, from 1: the `serial`-th taken (a call
    /// serves tickets in this order).
    pub serial: u64,
    /// Tickets taken since the queue was created, after this write.
    pub taken: u64,
    /// Tickets called since the queue was created, after this write.
    pub served: u64,
    /// Tickets waiting after this write (`taken - served`): after a take, this ticket and the
    /// ones before it.
    pub waiting: u64,
}

impl Ticket {
    pub(crate) fn new(spec: &QueueSpec, c: Counters, serial: i64) -> Ticket {
        let serial = unsigned(serial);
        Ticket {
            number: spec.ticket(serial),
            serial,
            taken: unsigned(c.taken),
            served: unsigned(c.served),
            waiting: unsigned(c.waiting()),
        }
    }

    /// The ticket as JSON, as `queue take --json`, `queue call --json` and the service answer
    /// it: `{"ticket", "serial", "taken", "served", "waiting"}`.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// println!("{}", q.call().await?.to_json());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "ticket": self.number,
            "serial": self.serial,
            "taken": self.taken,
            "served": self.served,
            "waiting": self.waiting,
        })
    }
}

/// The state of a queue (see [`Queue::status`](super::Queue::status)).
///
/// # Example
///
/// ```no_run
/// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
/// let s = q.status().await?;
/// match s.now_serving {
///     Some(n) => println!("now serving {n}, {} waiting", s.waiting),
///     None => println!("nobody called yet, {} waiting", s.waiting),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStatus {
    /// The queue's name.
    pub name: String,
    /// The lowest ticket.
    pub min: i64,
    /// The highest ticket.
    pub max: i64,
    /// How many distinct tickets the range holds: the most that may wait at once.
    pub capacity: u64,
    /// Tickets taken since the queue was created.
    pub taken: u64,
    /// Tickets called since the queue was created.
    pub served: u64,
    /// Tickets waiting: `taken - served`.
    pub waiting: u64,
    /// The ticket called last, `None` before the first call.
    pub now_serving: Option<i64>,
    /// The ticket the next take gets, `None` while the queue is full.
    pub next_ticket: Option<i64>,
    /// How many times the tickets went all the way round (`taken / capacity`).
    pub rounds: u64,
    /// Goes up by one on every write.
    pub version: i64,
    /// Set once when the queue was created.
    pub incarnation: ObjectId,
    /// When the queue was created.
    pub created_at: DateTime,
    /// When it was last written.
    pub updated_at: DateTime,
}

impl QueueStatus {
    pub(crate) fn new(
        name: String,
        s: &Stored,
        created_at: DateTime,
        updated_at: DateTime,
    ) -> QueueStatus {
        let (taken, served) = (unsigned(s.counters.taken), unsigned(s.counters.served));
        let waiting = taken - served;
        let capacity = s.spec.capacity();
        QueueStatus {
            name,
            min: s.spec.min,
            max: s.spec.max,
            capacity,
            taken,
            served,
            waiting,
            now_serving: (served > 0).then(|| s.spec.ticket(served)),
            next_ticket: (waiting < capacity).then(|| s.spec.ticket(taken.saturating_add(1))),
            rounds: taken / capacity.max(1),
            version: s.version,
            incarnation: s.incarnation,
            created_at,
            updated_at,
        }
    }

    /// Whether a take would be refused now ([`Error::QueueFull`](crate::Error::QueueFull)).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// if q.status().await?.is_full() {
    ///     println!("please wait a moment");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_full(&self) -> bool {
        self.waiting >= self.capacity
    }

    /// The tickets waiting, oldest (the next called) first.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let next_three: Vec<i64> = q.status().await?.waiting_tickets().take(3).collect();
    /// # Ok(()) }
    /// ```
    pub fn waiting_tickets(&self) -> impl Iterator<Item = i64> + '_ {
        let spec = QueueSpec::default().with_min(self.min).with_max(self.max);
        (self.served + 1..=self.taken).map(move |k| spec.ticket(k))
    }

    /// The status as JSON, as `queue status --json` and the service show it: `{name, min, max,
    /// capacity, taken, served, waiting, now_serving, next_ticket, full, rounds, version,
    /// incarnation, created_at, updated_at}` (`now_serving` and `next_ticket` may be `null`;
    /// dates in RFC 3339).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// println!("{}", q.status().await?.to_json());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name,
            "min": self.min,
            "max": self.max,
            "capacity": self.capacity,
            "taken": self.taken,
            "served": self.served,
            "waiting": self.waiting,
            "now_serving": self.now_serving,
            "next_ticket": self.next_ticket,
            "full": self.is_full(),
            "rounds": self.rounds,
            "version": self.version,
            "incarnation": self.incarnation.to_hex(),
            "created_at": self.created_at.try_to_rfc3339_string().ok(),
            "updated_at": self.updated_at.try_to_rfc3339_string().ok(),
        })
    }
}

fn get_date(name: &str, d: &Document, key: &str) -> Result<DateTime> {
    match d.get(key) {
        Some(Bson::DateTime(t)) => Ok(*t),
        Some(_) => Err(Error::corrupt_of("queue", name, key, "is not a date")),
        None => Err(Error::corrupt_of("queue", name, key, "is missing")),
    }
}

/// Decodes a whole queue document (with `_id` and the dates).
pub(crate) fn decode_status(d: &Document) -> Result<QueueStatus> {
    let name = match d.get(field::ID) {
        Some(Bson::String(s)) => s.clone(),
        Some(other) => {
            return Err(Error::corrupt_of(
                "queue",
                &other.to_string(),
                field::ID,
                "is not a string",
            ));
        }
        None => return Err(Error::corrupt_of("queue", "?", field::ID, "is missing")),
    };
    let stored = decode_stored(&name, d)?;
    Ok(QueueStatus::new(
        name.clone(),
        &stored,
        get_date(&name, d, field::CREATED_AT)?,
        get_date(&name, d, field::UPDATED_AT)?,
    ))
}
