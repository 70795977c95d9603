//! What a queue shows: a [`Ticket`] from a take, a call, a recall or a cancel, and the
//! [`QueueState`].

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document};
use serde_json::{Value, json};

use super::document::{Reader, decode, field, read_call, read_spec};
use super::spec::QueueSpec;
use super::state::State;
use crate::error::{Error, Result};

fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn rfc3339(t: DateTime) -> Option<String> {
    t.try_to_rfc3339_string().ok()
}

fn desk_json(desk: &Option<String>) -> Value {
    desk.as_ref()
        .map_or(Value::Null, |d| Value::String(d.clone()))
}

fn seconds(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_secs()))
}

/// The desk label as stored (empty: no desk named) → as shown.
fn shown_desk(desk: &str) -> Option<String> {
    (!desk.is_empty()).then(|| desk.to_owned())
}

/// A ticket taken ([`Queue::take`](super::Queue::take)), called
/// ([`Queue::call`](super::Queue::call)), recalled or cancelled, with the queue's counters
/// right after that operation.
///
/// # Example
///
/// ```no_run
/// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
/// let t = q.take().await?;
/// println!("your ticket: {} ({:?} ahead of you)", t.label, t.position);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ticket {
    /// The ticket's number: `min+1 … max`, then `min`, round again.
    pub number: i64,
    /// The ticket as people see it: the queue's format applied (`A-007`), or the number.
    pub label: String,
    /// Which ticket of the queue's history this is, from 1: the `serial`-th taken (calls
    /// serve tickets in this order, except calls of a given ticket).
    pub serial: u64,
    /// Tickets taken since the queue was created, after this operation.
    pub taken: u64,
    /// Tickets called since the queue was created, after this operation.
    pub served: u64,
    /// Tickets waiting after this operation.
    pub waiting: u64,
    /// How many tickets wait before this one (0: the next called); `None` when it does not
    /// wait (called, cancelled).
    pub position: Option<u64>,
    /// The estimated wait until this ticket is called, from the recent pace of calls; `None`
    /// when it does not wait or too few calls were made to tell.
    pub estimated_wait: Option<Duration>,
    /// The desk that called (or recalled) it; `None` for a take or a cancel, or a call made
    /// without naming a desk.
    pub desk: Option<String>,
    /// True when a take's request id was seen before: these are the tickets that take made,
    /// and nothing more was taken.
    pub replayed: bool,
    /// When the operation was done (for a replayed take: when the queue was read).
    pub at: DateTime,
    /// The queue's version as of the operation that did it (for a replayed take: its first
    /// take's). Every operation moves it by one — a write that carries a line of `k`
    /// operations of one handle moves the document's by `k` — so it orders the operations.
    pub version: i64,
    /// The queue's incarnation: with [`serial`](Ticket::serial), the ticket's identity (a
    /// queue deleted and created again numbers its serials from 1 again). Give both to an act
    /// on this ticket ([`Cancel::serial`](super::Cancel::serial) and
    /// [`Cancel::incarnation`](super::Cancel::incarnation)).
    pub incarnation: ObjectId,
}

impl Ticket {
    pub(crate) fn new(s: &State, serial: i64, desk: Option<String>, at: i64) -> Ticket {
        let number = s.spec.ticket(unsigned(serial));
        let position = s.position(serial);
        Ticket {
            number,
            label: s.spec.label(number),
            serial: unsigned(serial),
            taken: unsigned(s.taken_tickets()),
            served: unsigned(s.called()),
            waiting: unsigned(s.waiting()),
            position,
            estimated_wait: position
                .and_then(|p| s.estimate_s(p, at))
                .map(Duration::from_secs),
            desk,
            replayed: false,
            at: DateTime::from_millis(at),
            version: s.version,
            incarnation: s.incarnation,
        }
    }

    /// The ticket as JSON, as `queue take --json`, `queue call --json` and the service answer
    /// it: `{"ticket", "label", "serial", "taken", "served", "waiting", "position",
    /// "estimated_wait_seconds", "desk", "replayed", "at", "version", "incarnation"}`
    /// (`position`, `estimated_wait_seconds` and `desk` may be `null`; `incarnation` in hex).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// println!("{}", q.call().await?.to_json());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> Value {
        json!({
            "ticket": self.number,
            "label": self.label,
            "serial": self.serial,
            "taken": self.taken,
            "served": self.served,
            "waiting": self.waiting,
            "position": self.position,
            "estimated_wait_seconds": seconds(self.estimated_wait),
            "desk": desk_json(&self.desk),
            "replayed": self.replayed,
            "at": rfc3339(self.at),
            "version": self.version,
            "incarnation": self.incarnation.to_hex(),
        })
    }
}

/// A call (or a recall) as a board lists it ([`QueueState::recent_calls`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallEntry {
    /// The ticket called.
    pub ticket: i64,
    /// As people see it.
    pub label: String,
    /// Its serial.
    pub serial: u64,
    /// The desk that called it, `None` when the call named none.
    pub desk: Option<String>,
    /// When.
    pub at: DateTime,
    /// True for a recall: the ticket announced again.
    pub recall: bool,
    /// From its take to this call, when known (`None` for a recall).
    pub wait: Option<Duration>,
}

/// A queue's counters and its last calls, read without the rest of its document (see
/// [`ListQueues::counters`](crate::queue::ListQueues::counters)):
/// what a metrics scrape needs, at a cost that does not grow with the queue's history.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueCounters {
    /// The queue's name.
    pub name: String,
    /// Tickets taken since the queue was created.
    pub taken: u64,
    /// Tickets called since the queue was created.
    pub served: u64,
    /// Tickets waiting.
    pub waiting: u64,
    /// Tickets cancelled since the queue was created.
    pub cancelled: u64,
    /// The last calls, newest first (as [`QueueState::recent_calls`]).
    pub recent_calls: Vec<CallEntry>,
}

/// A desk and the ticket it shows ([`QueueState::desks`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeskEntry {
    /// The desk, `None` for calls made without naming one.
    pub desk: Option<String>,
    /// The ticket it shows (held: never handed out again while shown).
    pub ticket: i64,
    /// As people see it.
    pub label: String,
    /// Its serial.
    pub serial: u64,
    /// When it was called or last recalled.
    pub at: DateTime,
}

/// A waiting ticket ([`QueueState::waiting_list`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitingEntry {
    /// The ticket.
    pub ticket: i64,
    /// As people see it.
    pub label: String,
    /// Its serial.
    pub serial: u64,
}

/// Activity of one local hour ([`QueueState::hourly`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HourEntry {
    /// The start of the hour.
    pub hour: DateTime,
    /// Tickets taken in it.
    pub taken: u64,
    /// Tickets called in it.
    pub served: u64,
    /// Waiting after its last write.
    pub waiting: u64,
}

/// At most this many waiting tickets are listed in a status.
pub const WAITING_LISTED: usize = 50;

/// The state of a queue (see [`Queue::peek`](super::Queue::peek)).
///
/// # Example
///
/// ```no_run
/// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
/// let s = q.peek().await?;
/// match s.now_serving {
///     Some(n) => println!("now serving {n}, {} waiting", s.waiting),
///     None => println!("nobody called yet, {} waiting", s.waiting),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueState {
    /// The queue's name.
    pub name: String,
    /// The lowest ticket.
    pub min: i64,
    /// The highest ticket.
    pub max: i64,
    /// How many distinct tickets the range holds: the most that may be held at once.
    pub capacity: u64,
    /// The label format, if any.
    pub label_format: Option<String>,
    /// The IANA time zone of the local day and hours.
    pub time_zone: String,
    /// Whether each local day starts again at the first ticket.
    pub daily: bool,
    /// The local date of the last write (`YYYY-MM-DD`): for a daily queue, the day whose
    /// tickets are being handed out.
    pub day: String,
    /// Tickets taken since the queue was created.
    pub taken: u64,
    /// Tickets called since the queue was created.
    pub served: u64,
    /// Tickets waiting.
    pub waiting: u64,
    /// Tickets cancelled since the queue was created.
    pub cancelled: u64,
    /// The ticket called last, `None` before the first call.
    pub now_serving: Option<i64>,
    /// The ticket the next take gets, `None` while the queue is full.
    pub next_ticket: Option<i64>,
    /// How many times the tickets went all the way round.
    pub rounds: u64,
    /// The last calls and recalls, newest first (at least 10 kept).
    pub recent_calls: Vec<CallEntry>,
    /// Each desk's current ticket.
    pub desks: Vec<DeskEntry>,
    /// The first waiting tickets (at most [`WAITING_LISTED`]), in call order.
    pub waiting_list: Vec<WaitingEntry>,
    /// The estimated wait of a ticket taken now; `None` while too few calls were made.
    pub estimated_wait: Option<Duration>,
    /// The average wait (take to call) over the recent calls; `None` when unknown.
    pub average_wait: Option<Duration>,
    /// The 90th percentile of the wait over the recent calls; `None` when unknown.
    pub p90_wait: Option<Duration>,
    /// Tickets taken today (local day of the queue's time zone).
    pub taken_today: u64,
    /// Tickets called today.
    pub served_today: u64,
    /// The last 24 local hours that saw activity, oldest first.
    pub hourly: Vec<HourEntry>,
    /// Goes up by one on every write.
    pub version: i64,
    /// Set once when the queue was created.
    pub incarnation: ObjectId,
    /// When the queue was created.
    pub created_at: DateTime,
    /// When it was last written.
    pub updated_at: DateTime,
    /// The state it was read from, for [`QueueState::ticket`].
    pub(super) line: super::follow::Line,
}

impl QueueState {
    /// Where the ticket of `serial` stands in this status: waiting (with its place and
    /// estimated wait, however far back in line), called by a desk, passed (called, and its
    /// desk moved on), cancelled, done long ago, or not taken. A serial is the one
    /// [`Ticket::serial`](super::Ticket::serial) a take answered; it names a ticket of the
    /// queue's [`incarnation`](QueueState::incarnation) only.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// use dispenser::queue::TicketState;
    /// let mine = q.take().await?;
    /// let view = q.peek().await?.ticket(mine.serial);
    /// match view.state {
    ///     TicketState::Waiting => println!("{:?} before you", view.position),
    ///     TicketState::Called => println!("your turn: desk {:?}", view.desk),
    ///     other => println!("{}", other.as_str()),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn ticket(&self, serial: u64) -> super::follow::TicketView {
        self.line.ticket(serial)
    }

    /// The status of `s` seen at `now` (ms since the epoch).
    pub(crate) fn new(name: String, s: &State, now: i64) -> QueueState {
        let spec: &QueueSpec = &s.spec;
        let capacity = spec.capacity();
        let ticket_of = |serial: i64| spec.ticket(unsigned(serial));
        let recent_calls = call_entries(spec, &s.calls);
        let desks = s
            .desks
            .iter()
            .map(|d| DeskEntry {
                desk: shown_desk(&d.desk),
                ticket: ticket_of(d.serial),
                label: spec.label(ticket_of(d.serial)),
                serial: unsigned(d.serial),
                at: DateTime::from_millis(d.at),
            })
            .collect::<Vec<_>>();
        let mut waiting_list = Vec::new();
        let mut serial = s.served + 1;
        let mut spans = s.out_of_line.iter().peekable();
        while serial <= s.taken && waiting_list.len() < WAITING_LISTED {
            if let Some(x) = spans.peek()
                && x.from <= serial
            {
                serial = x.to + 1;
                spans.next();
                continue;
            }
            waiting_list.push(WaitingEntry {
                ticket: ticket_of(serial),
                label: spec.label(ticket_of(serial)),
                serial: unsigned(serial),
            });
            serial += 1;
        }
        let mut waits: Vec<i64> = s.calls.iter().filter_map(|c| c.wait_ms).collect();
        waits.sort_unstable();
        let ms = |v: i64| Duration::from_millis(unsigned(v));
        let average_wait = (!waits.is_empty())
            .then(|| ms(waits.iter().sum::<i64>() / i64::try_from(waits.len()).unwrap_or(1)));
        let p90_wait = (!waits.is_empty()).then(|| {
            let i = (waits.len() * 9).div_ceil(10).saturating_sub(1);
            ms(waits[i.min(waits.len() - 1)])
        });
        let now_serving = s
            .calls
            .iter()
            .find(|c| !c.recall)
            .map(|c| c.serial)
            .or_else(|| s.desks.iter().map(|d| d.serial).max())
            .map(ticket_of);
        // What a take of one would get now (the next day's first ticket is not foreseen).
        let lower = s.oldest_held().unwrap_or(s.taken + 1);
        let fits = i128::from(s.taken) + 1 - i128::from(lower) < i128::from(capacity);
        let next_ticket = fits.then(|| ticket_of(s.taken.saturating_add(1)));
        let today = spec
            .zone()
            .map(|tz| super::state::local(&tz, now).1)
            .unwrap_or_default();
        let same_day = today == s.day;
        QueueState {
            name,
            min: spec.min,
            max: spec.max,
            capacity,
            label_format: spec.format.as_ref().map(|f| f.as_str().to_owned()),
            time_zone: spec.time_zone.clone(),
            daily: spec.daily,
            day: s.day.clone(),
            taken: unsigned(s.taken_tickets()),
            served: unsigned(s.called()),
            waiting: unsigned(s.waiting()),
            cancelled: unsigned(s.cancelled),
            now_serving,
            next_ticket,
            rounds: unsigned(s.taken) / capacity.max(1),
            recent_calls,
            desks,
            waiting_list,
            estimated_wait: s
                .estimate_s(unsigned(s.waiting()), now)
                .map(Duration::from_secs),
            average_wait,
            p90_wait,
            taken_today: if same_day { unsigned(s.taken_today) } else { 0 },
            served_today: if same_day {
                unsigned(s.served_today)
            } else {
                0
            },
            hourly: s
                .hourly
                .iter()
                .filter(|h| h.hour + 25 * 3_600_000 > now)
                .map(|h| HourEntry {
                    hour: DateTime::from_millis(h.hour),
                    taken: unsigned(h.taken),
                    served: unsigned(h.served),
                    waiting: unsigned(h.waiting),
                })
                .collect(),
            version: s.version,
            incarnation: s.incarnation,
            created_at: DateTime::from_millis(s.created_at),
            updated_at: DateTime::from_millis(s.updated_at),
            line: super::follow::Line::new(s, now),
        }
    }

    /// Whether a take would be refused now ([`Error::QueueFull`](crate::Error::QueueFull)).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// if q.peek().await?.is_full() {
    ///     println!("please wait a moment");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_full(&self) -> bool {
        self.next_ticket.is_none()
    }

    /// The first waiting tickets (at most [`WAITING_LISTED`]), the next called first.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// let next_three: Vec<i64> = q.peek().await?.waiting_tickets().take(3).collect();
    /// # Ok(()) }
    /// ```
    pub fn waiting_tickets(&self) -> impl Iterator<Item = i64> + '_ {
        self.waiting_list.iter().map(|w| w.ticket)
    }

    fn label(&self, ticket: Option<i64>) -> Value {
        let spec = QueueSpec {
            format: self
                .label_format
                .as_deref()
                .and_then(|f| crate::format::Format::parse(f).ok()),
            ..QueueSpec::default()
        };
        ticket.map_or(Value::Null, |t| Value::String(spec.label(t)))
    }

    /// The status as JSON, as `queue peek --json` and the service show it: `{name, min, max,
    /// capacity, label_format, tz, daily, day, taken, served, waiting, cancelled, now_serving,
    /// now_serving_label, next_ticket, next_ticket_label, full, rounds, recent_calls: [{ticket,
    /// label, serial, desk, at, recall, wait_seconds}], desks: [{desk, ticket, label, serial,
    /// at}], waiting_list: [{ticket, label, serial}], estimated_wait_seconds,
    /// average_wait_seconds, p90_wait_seconds, taken_today, served_today, hourly: [{hour,
    /// taken, served, waiting}], version, incarnation, created_at, updated_at}` (dates in RFC
    /// 3339; a desk named by no one is `null`).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(q: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// println!("{}", q.peek().await?.to_json());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> Value {
        let calls: Vec<Value> = self
            .recent_calls
            .iter()
            .map(|c| {
                json!({
                    "ticket": c.ticket, "label": c.label, "serial": c.serial,
                    "desk": desk_json(&c.desk), "at": rfc3339(c.at), "recall": c.recall,
                    "wait_seconds": seconds(c.wait),
                })
            })
            .collect();
        let desks: Vec<Value> = self
            .desks
            .iter()
            .map(|d| {
                json!({
                    "desk": desk_json(&d.desk), "ticket": d.ticket, "label": d.label,
                    "serial": d.serial, "at": rfc3339(d.at),
                })
            })
            .collect();
        let waiting_list: Vec<Value> = self
            .waiting_list
            .iter()
            .map(|w| json!({ "ticket": w.ticket, "label": w.label, "serial": w.serial }))
            .collect();
        let hourly: Vec<Value> = self
            .hourly
            .iter()
            .map(|h| {
                json!({
                    "hour": rfc3339(h.hour), "taken": h.taken, "served": h.served,
                    "waiting": h.waiting,
                })
            })
            .collect();
        json!({
            "name": self.name,
            "min": self.min,
            "max": self.max,
            "capacity": self.capacity,
            "label_format": self.label_format,
            "tz": self.time_zone,
            "daily": self.daily,
            "day": self.day,
            "taken": self.taken,
            "served": self.served,
            "waiting": self.waiting,
            "cancelled": self.cancelled,
            "now_serving": self.now_serving,
            "now_serving_label": self.label(self.now_serving),
            "next_ticket": self.next_ticket,
            "next_ticket_label": self.label(self.next_ticket),
            "full": self.is_full(),
            "rounds": self.rounds,
            "recent_calls": calls,
            "desks": desks,
            "waiting_list": waiting_list,
            "estimated_wait_seconds": seconds(self.estimated_wait),
            "average_wait_seconds": seconds(self.average_wait),
            "p90_wait_seconds": seconds(self.p90_wait),
            "taken_today": self.taken_today,
            "served_today": self.served_today,
            "hourly": hourly,
            "version": self.version,
            "incarnation": self.incarnation.to_hex(),
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
        })
    }
}

/// The calls of a state as the boards list them.
pub(crate) fn call_entries(spec: &QueueSpec, calls: &[super::state::Call]) -> Vec<CallEntry> {
    let ticket_of = |serial: i64| spec.ticket(unsigned(serial));
    calls
        .iter()
        .map(|c| CallEntry {
            ticket: ticket_of(c.serial),
            label: spec.label(ticket_of(c.serial)),
            serial: unsigned(c.serial),
            desk: shown_desk(&c.desk),
            at: DateTime::from_millis(c.at),
            recall: c.recall,
            wait: c.wait_ms.map(|ms| Duration::from_millis(unsigned(ms))),
        })
        .collect()
}

/// Decodes a whole queue document (with `_id`), seen now.
pub(crate) fn decode_status(d: &Document) -> Result<QueueState> {
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
    let state = decode(&name, d)?;
    Ok(QueueState::new(
        name,
        &state,
        jiff::Timestamp::now().as_millisecond(),
    ))
}

/// Decodes a document read through [`counters_projection`] (with `_id`).
pub(crate) fn decode_counters(d: &Document) -> Result<QueueCounters> {
    let name = match d.get(field::ID) {
        Some(Bson::String(s)) => s.clone(),
        _ => {
            return Err(Error::corrupt_of(
                "queue",
                "?",
                field::ID,
                "is not a string",
            ));
        }
    };
    let r = Reader { name: &name };
    let spec = read_spec(&r, d)?;
    let taken = r.int(d, field::TAKEN, field::TAKEN)?;
    let waiting = r.int(d, field::WAITING, field::WAITING)?;
    let zero = |key: &str| -> Result<i64> {
        if d.contains_key(key) {
            r.int(d, key, key)
        } else {
            Ok(0)
        }
    };
    let cancelled = zero(field::CANCELLED)?;
    let voided = zero(field::VOIDED)?;
    // Called = taken - waiting - cancelled - voided (every serial is one of the four).
    let called =
        i128::from(taken) - i128::from(waiting) - i128::from(cancelled) - i128::from(voided);
    if taken < 0 || waiting < 0 || cancelled < 0 || voided < 0 || called < 0 {
        return Err(r.corrupt(
            field::WAITING,
            format!(
                "({waiting}), cancelled ({cancelled}) and voided ({voided}) are more than taken ({taken})"
            ),
        ));
    }
    let calls = r.list(d, field::CALLS, |e, at| read_call(&r, e, at))?;
    let unsigned = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(QueueCounters {
        recent_calls: call_entries(&spec, &calls),
        name,
        taken: unsigned(taken - voided),
        served: u64::try_from(called).unwrap_or(0),
        waiting: unsigned(waiting),
        cancelled: unsigned(cancelled),
    })
}
