//! The whole state of a queue and what each operation does to it, computed: no database
//! here. Every write of a queue replaces its document with the state an operation computed
//! from the state it read (a compare-and-set on `version` and `incarnation`), so this module
//! is where every rule lives.
//!
//! **Serials.** The `k`-th ticket taken has serial `k` and shows `spec.ticket(k)`. `taken` is
//! the last serial handed out. `served` is the cursor of the line: every serial up to it is
//! done (called, cancelled, or skipped at a daily restart). Serials after the cursor that are
//! done already (cancelled or called out of order) are listed in `out_of_line`, as sorted,
//! disjoint spans that never start right after the cursor (the cursor moves over them).
//! Waiting: the serials of `served+1 ..= taken` not in a span.
//!
//! **Held.** The tickets held are those waiting and those a desk shows as its current ticket.
//! The oldest held serial is the cursor's next one (if any waits) or a desk's. A take of `n`
//! is allowed only while the held serials and the `n` new ones span at most `capacity`
//! serials, so no two of them show the same number: no one is handed a ticket someone waits
//! with or a desk shows. A fresh queue holds nothing and takes its whole range.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::spec::QueueSpec;
use crate::error::{Error, Result};

/// At most this many calls are kept (newest first).
pub(crate) const KEPT_CALLS: usize = 20;
/// At most this many desks show a ticket at once.
pub(crate) const MAX_DESKS: usize = 100;
/// At most this many spans of tickets done out of line (cancelled or called out of order).
pub(crate) const MAX_SPANS: usize = 1000;
/// The most request ids a queue document keeps (its ring); the oldest [`SPILL`] then move
/// to the request collection (see `store`), so the document's size does not grow with the
/// history of request ids.
pub(crate) const RING: usize = 64;
/// How many of the ring's oldest request ids move out at once.
pub(crate) const SPILL: usize = 32;
/// How long a request id is remembered (milliseconds, by the server's clock): 24 hours.
pub(crate) const KEY_RETENTION_MS: i64 = 24 * 3600 * 1000;
/// At most this many hours of activity are kept.
pub(crate) const KEPT_HOURS: usize = 25;
/// At most this many takes' times are kept (for the waiting time of each call).
pub(crate) const KEPT_TAKES: usize = 1000;
/// Calls used to estimate the pace of the line; fewer than [`PACE_MIN`] and the estimate
/// is unknown.
pub(crate) const PACE_CALLS: usize = 10;
pub(crate) const PACE_MIN: usize = 3;

/// How a span of serials left the line early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Cancelled (a no-show, or the holder left).
    Cancelled,
    /// Called out of order by a desk.
    Called,
    /// Skipped when a daily queue started again at its first ticket: never handed out.
    Void,
}

impl Kind {
    pub(crate) fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "cancelled" => Kind::Cancelled,
            "called" => Kind::Called,
            "void" => Kind::Void,
            _ => return None,
        })
    }
}

/// Serials `from ..= to`, all done the same way, after the cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub from: i64,
    pub to: i64,
    pub kind: Kind,
}

/// A desk and the ticket it shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Desk {
    /// The desk's label; empty for calls made without one.
    pub desk: String,
    pub serial: i64,
    /// When it called (or recalled) that ticket, ms since the epoch.
    pub at: i64,
}

/// A call (or a recall) as the board lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub serial: i64,
    pub desk: String,
    pub at: i64,
    pub recall: bool,
    /// From the take to this call, when the take's time was still known (ms).
    pub wait_ms: Option<i64>,
}

/// When serials `first .. first + count` were taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TakeAt {
    pub first: i64,
    pub count: i64,
    pub at: i64,
}

/// A request id: the caller's name (empty for the unnamed caller) and the id the caller
/// chose. Two callers never share an id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RequestId {
    pub caller: String,
    pub id: String,
}

/// A request id and the take it made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    /// Whose request id it is.
    pub caller: String,
    pub key: String,
    pub first: i64,
    pub count: i64,
    pub at: i64,
    /// The version the take wrote.
    pub version: i64,
    /// The highest ticket then (a later alter may remap tickets no longer held; a replay
    /// answers the numbers the take handed out).
    pub max: i64,
}

/// Bits of a [`SpillFilter`] generation.
pub(crate) const FILTER_BITS: usize = 8192;

/// Which request ids may have moved to the request collection in the last 24 hours: a Bloom
/// filter (two bits per id, 8 192 bits) per generation, the current one since `since` and
/// the previous one; a generation older than 24 hours becomes the previous one when an id
/// moves. An id whose bits are not all set in either never moved (no false negative), so a
/// take with it need not read the request collection; a false positive only costs that read.
/// An id stays in the filter at least 24 hours after it moved, as long as its record lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SpillFilter {
    /// When the current generation started (ms, the server's clock).
    pub since: i64,
    pub current: Vec<u64>,
    pub previous: Vec<u64>,
}

/// The filter's two bit positions of a request id: FNV-1a (64 bits) of the caller, U+001F and
/// the id — a hash fixed by its definition, so every version and platform agrees.
fn filter_bits(caller: &str, id: &str) -> [usize; 2] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in caller.bytes().chain([0x1f]).chain(id.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let bits = FILTER_BITS as u64;
    [(h % bits) as usize, ((h >> 32) % bits) as usize]
}

impl SpillFilter {
    /// An empty filter from `now`; for a queue that moved ids out before it had a filter
    /// (`earlier`), the previous generation has every bit set, so any id may have moved
    /// until that generation is dropped, at least 24 hours later, when those ids expired.
    pub(crate) fn new(now: i64, earlier: bool) -> SpillFilter {
        SpillFilter {
            since: now,
            current: vec![0; FILTER_BITS / 64],
            previous: vec![if earlier { u64::MAX } else { 0 }; FILTER_BITS / 64],
        }
    }

    /// Records `keys` as moved out at `now`, after turning a generation older than 24 hours
    /// into the previous one.
    pub(crate) fn note(&mut self, keys: &[Key], now: i64) {
        if now.saturating_sub(self.since) >= KEY_RETENTION_MS {
            self.previous = std::mem::replace(&mut self.current, vec![0; FILTER_BITS / 64]);
            self.since = now;
        }
        for k in keys {
            for bit in filter_bits(&k.caller, &k.key) {
                self.current[bit / 64] |= 1 << (bit % 64);
            }
        }
    }

    /// Whether `id` may have moved out (false: it certainly did not).
    pub(crate) fn may_hold(&self, id: &RequestId) -> bool {
        let set = |words: &[u64], bit: usize| {
            words
                .get(bit / 64)
                .is_some_and(|w| w & (1 << (bit % 64)) != 0)
        };
        let bits = filter_bits(&id.caller, &id.id);
        [&self.current, &self.previous]
            .iter()
            .any(|words| bits.iter().all(|&b| set(words, b)))
    }
}

/// Activity in one local hour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hour {
    /// The hour's start, ms since the epoch.
    pub hour: i64,
    pub taken: i64,
    pub served: i64,
    /// Waiting after the last write of that hour.
    pub waiting: i64,
}

/// The whole state of a queue, as its document holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct State {
    pub spec: QueueSpec,
    pub taken: i64,
    pub served: i64,
    pub out_of_line: Vec<Span>,
    /// Tickets cancelled since creation.
    pub cancelled: i64,
    /// Serials skipped at daily restarts since creation (never handed out).
    pub voided: i64,
    pub desks: Vec<Desk>,
    /// Newest first.
    pub calls: Vec<Call>,
    /// Oldest first.
    pub takes: Vec<TakeAt>,
    /// The serials of the last [`RING`] tickets cancelled, oldest first: what tells "it was
    /// cancelled" from "it was called" once the line moved past a ticket.
    pub recent_cancels: Vec<i64>,
    /// The most recent takes made with a request id, oldest first: at most [`RING`] (a
    /// document written before the ring may hold more, moved out by its next write).
    pub keys: Vec<Key>,
    /// Request ids moved from the ring to the request collection, since creation.
    pub spilled: i64,
    /// Which ids may be in the request collection (none before the first move).
    pub spill_filter: Option<SpillFilter>,
    /// Oldest first.
    pub hourly: Vec<Hour>,
    /// The local date (`YYYY-MM-DD`, in the queue's time zone) of the last write.
    pub day: String,
    pub taken_today: i64,
    pub served_today: i64,
    pub version: i64,
    pub incarnation: bson::oid::ObjectId,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Why an operation cannot be done from a state (nothing is written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    Full {
        requested: u64,
        /// Tickets waiting, in the state the take was refused from (after a new day's
        /// restart, when there was one).
        waiting: i64,
        /// The oldest serial a desk shows there.
        shown: Option<i64>,
        /// The tickets still waiting from before the last daily restart: how many, and the
        /// oldest one's serial (whose number today's tickets stop before).
        before_restart: Option<(i64, i64)>,
    },
    Nobody,
    /// The ticket named (by its serial) is not in the state the act needs.
    NotWaiting {
        serial: i64,
        /// The number it shows (or the number asked for, for a look-up by number).
        ticket: i64,
        why: String,
    },
    NoTicketShown {
        desk: String,
    },
    Overflow,
    /// A new range would remap a held ticket.
    Remap {
        max: i64,
        reason: String,
    },
    /// Bad input for this state (too many desks, a request id reused for another count…).
    Invalid {
        what: &'static str,
        reason: String,
    },
    /// The state computed breaks a rule of [`State::check`]: a bug, refused before the write.
    Broken(Violation),
}

/// A rule of [`State::check`] a state breaks: the field and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    pub field: String,
    pub problem: String,
}

/// A ticket named by its identity: its serial, and the queue's incarnation when the caller
/// knows it (a serial names a ticket of one incarnation only: a queue deleted and created
/// again numbers its serials from 1 again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Named {
    pub serial: i64,
    pub incarnation: Option<bson::oid::ObjectId>,
}

/// The ticket a cancel names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// By its identity.
    Ticket(Named),
    /// The ticket the take with this request id got (a give-up). When no take used the id,
    /// the cancel takes a ticket with it and cancels that one in the same write, so that the
    /// take, arriving later, answers the cancelled ticket and takes nothing.
    Take(RequestId),
}

/// What an operation does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Take {
        count: u64,
        key: Option<RequestId>,
    },
    /// Calls the next ticket, or the ticket named (which must wait).
    Call {
        desk: String,
        ticket: Option<Named>,
    },
    /// Announces the desk's ticket again (which must be the ticket named, if one is).
    Recall {
        desk: String,
        ticket: Option<Named>,
    },
    /// The desk is done with its ticket (closes, or serves no one next): it shows none. The
    /// desk must show the ticket named, if one is.
    Finish {
        desk: String,
        ticket: Option<Named>,
    },
    Cancel {
        target: Target,
    },
    SetMax {
        max: i64,
    },
}

/// What an operation did: the serials it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Done {
    /// Took (or, `replayed`, had taken) serials `first .. first + count`.
    Took {
        first: i64,
        count: i64,
        replayed: bool,
        /// The version the take wrote.
        version: i64,
        /// The highest ticket when it was written.
        max: i64,
    },
    /// Called (or recalled) `serial`.
    Called {
        serial: i64,
    },
    Recalled {
        serial: i64,
        at: i64,
    },
    Finished {
        serial: i64,
    },
    /// Cancelled `serial`; `took`: a cancel by request id took it first (no take had used
    /// the id).
    Cancelled {
        serial: i64,
        took: bool,
    },
    Altered,
}

/// What to do after computing an operation.
#[derive(Debug)]
pub(crate) enum Step {
    /// Write this state (version + 1), then answer. The request ids in the `Vec` leave the
    /// ring in this write: they must be in the request collection before it is sent.
    Write(Box<State>, Done, Vec<Key>),
    /// Nothing to write: answer from the state read (a replayed request id).
    Answer(Done),
}

fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A desk as a message names it.
fn desk_name(desk: &str) -> String {
    if desk.is_empty() {
        "the desk without a name".to_owned()
    } else {
        format!("desk {desk:?}")
    }
}

/// Start of the local hour and the local date of `at_ms` in `tz`.
pub(crate) fn local(tz: &TimeZone, at_ms: i64) -> (i64, String) {
    let ts = Timestamp::from_millisecond(at_ms).unwrap_or(Timestamp::UNIX_EPOCH);
    let z = ts.to_zoned(tz.clone());
    let hour = z
        .with()
        .minute(0)
        .second(0)
        .subsec_nanosecond(0)
        .build()
        .map(|h| h.timestamp().as_millisecond())
        .unwrap_or(at_ms - at_ms.rem_euclid(3_600_000));
    (hour, z.date().to_string())
}

/// The first serial of `first ..= last` that shows another ticket under `new` than under
/// `old` (two ranges with the same `min`), in constant time: `min + k mod capacity` agrees
/// for every serial of the run exactly when it agrees for the first and neither range wraps
/// inside the run (after a wrap of one range only, the two numbers differ).
pub(crate) fn first_remapped(
    old: &QueueSpec,
    new: &QueueSpec,
    first: i64,
    last: i64,
) -> Option<i64> {
    let (c1, c2) = (i128::from(old.capacity()), i128::from(new.capacity()));
    if c1 == c2 && old.min == new.min {
        return None;
    }
    let (a, b) = (i128::from(first), i128::from(last));
    let (r1, r2) = (a.rem_euclid(c1), a.rem_euclid(c2));
    if i128::from(old.min) + r1 != i128::from(new.min) + r2 {
        return Some(first);
    }
    // Both keep counting up together until the first wrap of either.
    let wrap = a + (c1 - r1).min(c2 - r2);
    (wrap <= b).then(|| i64::try_from(wrap).unwrap_or(last))
}

impl State {
    /// The state of a queue just created at `now`.
    pub(crate) fn new(spec: QueueSpec, incarnation: bson::oid::ObjectId, now: i64) -> State {
        let day = spec.zone().map(|tz| local(&tz, now).1).unwrap_or_default();
        State {
            spec,
            taken: 0,
            served: 0,
            out_of_line: Vec::new(),
            cancelled: 0,
            voided: 0,
            desks: Vec::new(),
            calls: Vec::new(),
            takes: Vec::new(),
            recent_cancels: Vec::new(),
            keys: Vec::new(),
            spilled: 0,
            spill_filter: None,
            hourly: Vec::new(),
            day,
            taken_today: 0,
            served_today: 0,
            version: 0,
            incarnation,
            created_at: now,
            updated_at: now,
        }
    }

    fn out_of_line_count(&self) -> i64 {
        self.out_of_line.iter().map(|s| s.to - s.from + 1).sum()
    }

    /// Tickets waiting.
    pub(crate) fn waiting(&self) -> i64 {
        self.taken - self.served - self.out_of_line_count()
    }

    /// Tickets really taken (serials skipped at daily restarts are not).
    pub(crate) fn taken_tickets(&self) -> i64 {
        self.taken - self.voided
    }

    /// Tickets called (in order or not).
    pub(crate) fn called(&self) -> i64 {
        self.served + self.out_of_line_count() - self.cancelled - self.voided
    }

    /// Whether `serial` waits.
    pub(crate) fn is_waiting(&self, serial: i64) -> bool {
        serial > self.served
            && serial <= self.taken
            && !self
                .out_of_line
                .iter()
                .any(|s| s.from <= serial && serial <= s.to)
    }

    /// How many waiting tickets come before `serial` (which waits).
    pub(crate) fn position(&self, serial: i64) -> Option<u64> {
        if !self.is_waiting(serial) {
            return None;
        }
        let before: i64 = self
            .out_of_line
            .iter()
            .filter(|s| s.to < serial)
            .map(|s| s.to - s.from + 1)
            .sum();
        Some(unsigned(serial - self.served - 1 - before))
    }

    /// What holds the queue at `now` (after a new day's restart, which clears the desks):
    /// the tickets waiting and the desks showing a ticket. A queue deleted while either is
    /// not zero and created again would hand their numbers out again.
    pub(crate) fn held_at(&self, now: i64) -> (u64, u64) {
        let mut s = self.clone();
        s.roll(now);
        (
            unsigned(s.waiting()),
            u64::try_from(s.desks.len()).unwrap_or(u64::MAX),
        )
    }

    /// The tickets still waiting from before the last daily restart — those before the last
    /// span of void serials — as (how many, the oldest's serial); `None` when there are none.
    /// (A restart leaves a void span only when someone waited; the span goes once the line
    /// reaches it.)
    fn waiting_before_restart(&self) -> Option<(i64, i64)> {
        let void = self.out_of_line.iter().rfind(|x| x.kind == Kind::Void)?;
        let done: i64 = self
            .out_of_line
            .iter()
            .filter(|x| x.to < void.from)
            .map(|x| x.to - x.from + 1)
            .sum();
        let count = void.from - 1 - self.served - done;
        let mut oldest = self.served + 1;
        for x in &self.out_of_line {
            if x.from <= oldest && oldest <= x.to {
                oldest = x.to + 1;
            }
        }
        (count > 0).then_some((count, oldest))
    }

    /// The oldest serial held (waiting or shown by a desk), if any.
    pub(crate) fn oldest_held(&self) -> Option<i64> {
        let waiting = (self.served < self.taken).then_some(self.served + 1);
        waiting
            .into_iter()
            .chain(self.desks.iter().map(|d| d.serial))
            .min()
    }

    /// The newest waiting serial, if any: `taken`, unless spans of tickets done out of line
    /// (or a new day's void serials) end the line.
    fn newest_waiting(&self) -> Option<i64> {
        let mut newest = self.taken;
        for x in self.out_of_line.iter().rev() {
            if x.from <= newest && newest <= x.to {
                newest = x.from - 1;
            } else {
                break;
            }
        }
        (newest > self.served).then_some(newest)
    }

    /// The newest serial held (waiting or shown by a desk), if any.
    pub(crate) fn newest_held(&self) -> Option<i64> {
        self.newest_waiting()
            .into_iter()
            .chain(self.desks.iter().map(|d| d.serial))
            .max()
    }

    /// The serials held, as runs `(first, last)`: the waiting ones between the spans, then
    /// each desk's. At most [`MAX_SPANS`] + 1 + [`MAX_DESKS`] runs, whatever the range.
    fn held_runs(&self) -> Vec<(i64, i64)> {
        let mut runs = Vec::with_capacity(self.out_of_line.len() + 1 + self.desks.len());
        // In i128: serials may reach i64::MAX.
        let (taken, mut from) = (i128::from(self.taken), i128::from(self.served) + 1);
        let serial = |v: i128| i64::try_from(v).unwrap_or(i64::MAX);
        for x in &self.out_of_line {
            if i128::from(x.from) > from {
                runs.push((serial(from), serial((i128::from(x.from) - 1).min(taken))));
            }
            from = from.max(i128::from(x.to) + 1);
        }
        if from <= taken {
            runs.push((serial(from), self.taken));
        }
        runs.extend(self.desks.iter().map(|d| (d.serial, d.serial)));
        runs
    }

    /// What no history of operations can produce: the rules every state read is checked
    /// against, and every state computed is checked against before it is written — so no
    /// write produces a document a reader refuses. Work bounded by the lists' bounds, never
    /// by the range or the serials.
    pub(crate) fn check(&self) -> Result<(), Violation> {
        let bad = |field: &str, problem: String| {
            Err(Violation {
                field: field.to_owned(),
                problem,
            })
        };
        if self.served < 0 || self.served > self.taken {
            return bad(
                "served",
                format!(
                    "({}) is not between 0 and taken ({})",
                    self.served, self.taken
                ),
            );
        }
        if self.version < 0 {
            return bad("version", format!("({}) is negative", self.version));
        }
        // Sorted, disjoint, after the cursor (never right after it: that ticket would be
        // the next called, and `served` moves past it), and taken. `from` is the first serial
        // a span may start at. In i128: a document may hold any Int64, and serials may reach
        // i64::MAX.
        let mut from = i128::from(self.served) + 2;
        for (i, x) in self.out_of_line.iter().enumerate() {
            if i128::from(x.from) < from || x.to < x.from || x.to > self.taken {
                return bad(
                    &format!("out_of_line.{i}"),
                    format!(
                        "({}..={}) is not a span of tickets after served ({}) and up to taken ({}), in order",
                        x.from, x.to, self.served, self.taken
                    ),
                );
            }
            from = i128::from(x.to) + 1;
        }
        if self.cancelled < 0 || self.voided < 0 || self.called() < 0 {
            return bad(
                "cancelled",
                format!(
                    "({}) and voided ({}) are more than the tickets done ({})",
                    self.cancelled,
                    self.voided,
                    self.served + self.out_of_line_count()
                ),
            );
        }
        if self.desks.len() > MAX_DESKS {
            return bad(
                "desks",
                format!(
                    "has {} desks; at most {MAX_DESKS} show a ticket",
                    self.desks.len()
                ),
            );
        }
        for (i, desk) in self.desks.iter().enumerate() {
            let void = self
                .out_of_line
                .iter()
                .any(|x| x.kind == Kind::Void && x.from <= desk.serial && desk.serial <= x.to);
            if desk.serial < 1 || desk.serial > self.taken || self.is_waiting(desk.serial) || void {
                return bad(
                    &format!("desks.{i}"),
                    format!("shows serial {} which was not called", desk.serial),
                );
            }
            if self.desks[..i].iter().any(|d| d.desk == desk.desk) {
                return bad(
                    &format!("desks.{i}"),
                    format!("names desk {:?} a second time", desk.desk),
                );
            }
        }
        if let (Some(oldest), Some(newest)) = (self.oldest_held(), self.newest_held()) {
            // No two tickets held show the same number.
            let span = i128::from(newest) - i128::from(oldest) + 1;
            if span > i128::from(self.spec.capacity()) {
                return bad(
                    "waiting",
                    format!(
                        "({}) with the desks' tickets is more than the range {}..={} holds ({}): the tickets held span {span} serials, from {oldest} to {newest}",
                        self.waiting(),
                        self.spec.min,
                        self.spec.max,
                        self.spec.capacity()
                    ),
                );
            }
        }
        let printable =
            |t: &str, most: usize| t.len() <= most && t.bytes().all(|b| (0x20..=0x7e).contains(&b));
        for (i, k) in self.keys.iter().enumerate() {
            if !printable(&k.caller, 128) || k.key.is_empty() || !printable(&k.key, 64) {
                return bad(
                    &format!("keys.{i}"),
                    format!(
                        "holds the request id {:?} of caller {:?}, which no take can have",
                        k.key, k.caller
                    ),
                );
            }
            if k.count < 1
                || k.first < 1
                || i128::from(k.first) + i128::from(k.count) - 1 > i128::from(self.taken)
            {
                return bad(
                    &format!("keys.{i}"),
                    format!(
                        "records a take of serials {}..+{} which were not taken (taken {})",
                        k.first, k.count, self.taken
                    ),
                );
            }
        }
        for (i, t) in self.takes.iter().enumerate() {
            if t.count < 1
                || t.first < 1
                || i128::from(t.first) + i128::from(t.count) - 1 > i128::from(self.taken)
            {
                return bad(
                    &format!("takes.{i}"),
                    format!(
                        "records a take of serials {}..+{} which were not taken (taken {})",
                        t.first, t.count, self.taken
                    ),
                );
            }
        }
        if let Some((i, v)) = self
            .recent_cancels
            .iter()
            .enumerate()
            .find(|(_, v)| **v < 1 || **v > self.taken)
        {
            return bad(
                &format!("recent_cancels.{i}"),
                format!(
                    "records serial {v} as cancelled, which was not taken (taken {})",
                    self.taken
                ),
            );
        }
        for (what, len, most) in [
            ("recent_cancels", self.recent_cancels.len(), RING),
            ("calls", self.calls.len(), KEPT_CALLS),
            ("takes", self.takes.len(), KEPT_TAKES),
            ("hourly", self.hourly.len(), KEPT_HOURS),
            ("out_of_line", self.out_of_line.len(), MAX_SPANS),
        ] {
            if len > most {
                return bad(what, format!("has {len} entries; at most {most} are kept"));
            }
        }
        if self.spilled < 0 {
            return bad("spilled", format!("({}) is negative", self.spilled));
        }
        if let Some(f) = &self.spill_filter
            && (f.current.len() != FILTER_BITS / 64 || f.previous.len() != FILTER_BITS / 64)
        {
            return bad(
                "spill_filter",
                format!("does not hold two generations of {FILTER_BITS} bits"),
            );
        }
        Ok(())
    }

    /// Why `serial` (of this incarnation) is not waiting, or `None` when it waits.
    fn not_waiting(&self, serial: i64) -> Option<String> {
        if serial < 1 || serial > self.taken {
            return Some("no ticket with this serial was taken".to_owned());
        }
        if let Some(d) = self.desks.iter().find(|d| d.serial == serial) {
            return Some(format!("it is called to {}", desk_name(&d.desk)));
        }
        if let Some(x) = self
            .out_of_line
            .iter()
            .find(|x| x.from <= serial && serial <= x.to)
        {
            return Some(
                match x.kind {
                    Kind::Cancelled => "it was cancelled",
                    Kind::Called => "it was called already",
                    Kind::Void => "it was skipped when the day started again (never handed out)",
                }
                .to_owned(),
            );
        }
        if serial > self.served {
            return None;
        }
        if self.recent_cancels.contains(&serial) {
            return Some("it was cancelled".to_owned());
        }
        Some(
            match self.calls.iter().find(|c| c.serial == serial && !c.recall) {
                Some(c) if c.desk.is_empty() => "it was called".to_owned(),
                Some(c) => format!("it was called to desk {:?}", c.desk),
                None => "it was called or cancelled".to_owned(),
            },
        )
    }

    /// The waiting serial showing `number`, or why there is none. (At most one held serial
    /// shows a number: the held tickets span at most the range.)
    pub(crate) fn waiting_serial_of(&self, number: i64) -> Result<i64, Refusal> {
        let cap = i128::from(self.spec.capacity());
        let offset = (i128::from(number) - i128::from(self.spec.min)).rem_euclid(cap);
        // The newest serial up to `taken` showing `number`.
        let taken = i128::from(self.taken);
        let serial = i64::try_from(taken - (taken - offset).rem_euclid(cap)).unwrap_or(0);
        let why = if number < self.spec.min || number > self.spec.max {
            Some(format!(
                "no ticket shows {number}: the queue's tickets are {} to {}",
                self.spec.min, self.spec.max
            ))
        } else if serial < 1 {
            Some("no ticket with this number was taken".to_owned())
        } else {
            self.not_waiting(serial)
        };
        match why {
            None => Ok(serial),
            Some(why) => Err(Refusal::NotWaiting {
                serial: serial.max(0),
                ticket: number,
                why: format!("is not waiting: {why}"),
            }),
        }
    }

    /// The serial of ticket `t`, checked to be of this incarnation.
    fn of_this_queue(&self, t: &Named) -> Result<i64, Refusal> {
        match t.incarnation {
            Some(i) if i != self.incarnation => Err(Refusal::NotWaiting {
                serial: t.serial,
                ticket: self.spec.ticket(unsigned(t.serial)),
                why: "is of another incarnation: the queue was deleted and created again since it was taken (a serial names a ticket of one incarnation of a queue)".to_owned(),
            }),
            _ => Ok(t.serial),
        }
    }

    /// The serial of ticket `t`, which must wait, or why it does not.
    fn waiting_named(&self, t: &Named) -> Result<i64, Refusal> {
        let serial = self.of_this_queue(t)?;
        match self.not_waiting(serial) {
            None => Ok(serial),
            Some(why) => Err(Refusal::NotWaiting {
                serial,
                ticket: self.spec.ticket(unsigned(serial)),
                why: format!("is not waiting: {why}"),
            }),
        }
    }

    /// The index of `desk` among the desks, checked to show ticket `t` when one is named.
    fn desk_showing(&self, desk: &str, t: Option<&Named>) -> Result<usize, Refusal> {
        let Some(i) = self.desks.iter().position(|d| d.desk == desk) else {
            return Err(match t {
                Some(t) => Refusal::NotWaiting {
                    serial: t.serial,
                    ticket: self.spec.ticket(unsigned(t.serial)),
                    why: format!("is not shown by {}: it shows no ticket", desk_name(desk)),
                },
                None => Refusal::NoTicketShown {
                    desk: desk.to_owned(),
                },
            });
        };
        if let Some(t) = t {
            let serial = self.of_this_queue(t)?;
            let shown = self.desks[i].serial;
            if shown != serial {
                return Err(Refusal::NotWaiting {
                    serial,
                    ticket: self.spec.ticket(unsigned(serial)),
                    why: format!(
                        "is not shown by {}: it shows ticket {} (serial {shown}) now",
                        desk_name(desk),
                        self.spec.label(self.spec.ticket(unsigned(shown)))
                    ),
                });
            }
        }
        Ok(i)
    }

    /// Marks `serial` (which waits) done as `kind`: the cursor moves when it is the next one.
    fn mark_done(&mut self, serial: i64, kind: Kind) -> Result<(), Refusal> {
        if serial == self.served + 1 {
            self.served = serial;
        } else {
            let i = self.out_of_line.partition_point(|s| s.to < serial);
            // Merge with a neighbour of the same kind when adjacent.
            let left = i > 0 && {
                let l = self.out_of_line[i - 1];
                l.kind == kind && l.to + 1 == serial
            };
            let right = i < self.out_of_line.len() && {
                let r = self.out_of_line[i];
                r.kind == kind && serial.checked_add(1) == Some(r.from)
            };
            match (left, right) {
                (true, true) => {
                    self.out_of_line[i - 1].to = self.out_of_line[i].to;
                    self.out_of_line.remove(i);
                }
                (true, false) => self.out_of_line[i - 1].to = serial,
                (false, true) => self.out_of_line[i].from = serial,
                (false, false) => {
                    if self.out_of_line.len() >= MAX_SPANS {
                        return Err(Refusal::Invalid {
                            what: "ticket",
                            reason: format!(
                                "{MAX_SPANS} groups of tickets ahead in the line were cancelled or called out of order already; call the next ticket first"
                            ),
                        });
                    }
                    self.out_of_line.insert(
                        i,
                        Span {
                            from: serial,
                            to: serial,
                            kind,
                        },
                    );
                }
            }
        }
        self.absorb();
        Ok(())
    }

    /// Moves the cursor over spans right after it.
    fn absorb(&mut self) {
        while let Some(s) = self.out_of_line.first() {
            if s.from != self.served + 1 {
                break;
            }
            self.served = s.to;
            self.out_of_line.remove(0);
        }
    }

    /// The new day's bookkeeping, before any operation at `now`: today's counters start
    /// again, and a daily queue starts again at its first ticket (see [`State::restart`]).
    fn roll(&mut self, now: i64) {
        let Some(tz) = self.spec.zone() else { return };
        let (_, today) = local(&tz, now);
        if today == self.day {
            return;
        }
        // Dates `YYYY-MM-DD` sort by time; a clock gone back does not restart the day.
        if !self.day.is_empty() && today < self.day {
            return;
        }
        self.day = today;
        self.taken_today = 0;
        self.served_today = 0;
        if self.spec.daily {
            self.restart();
        }
    }

    /// A daily queue's new day: the next ticket taken is the first of the range again
    /// (`min + 1`). The serials skipped to get there are void, never handed out; tickets still
    /// waiting from yesterday stay held, so today's tickets stop before reaching any of their
    /// numbers (the span rule: a take needs the held tickets and its own to span at most the
    /// range). The desks' boards are cleared. When the spans of tickets done out of line are
    /// at their bound ([`MAX_SPANS`]), or the range is so wide that the serials skipped would
    /// leave less than a whole range of serials, the numbering goes on from where it is.
    fn restart(&mut self) {
        self.desks.clear();
        let cap = i128::from(self.spec.capacity());
        let rem = i128::from(self.taken).rem_euclid(cap);
        if rem == 0 {
            return;
        }
        // Only with room left for a whole range of tickets after the void ones: a range so
        // wide (more than about 2^62 tickets) that the jump would use up the 2^63 − 1 serials
        // goes on numbering instead of starting again.
        let next = i128::from(self.taken) + cap - rem;
        if next + cap > i128::from(i64::MAX) {
            return;
        }
        let Ok(next) = i64::try_from(next) else {
            return;
        };
        let (from, to) = (self.taken + 1, next);
        if self.served == from - 1 {
            // Nobody waits: the cursor moves past the void serials at once.
            self.served = to;
        } else {
            let full = self.out_of_line.len() >= MAX_SPANS;
            match self.out_of_line.last_mut() {
                Some(l) if l.kind == Kind::Void && l.to + 1 == from => l.to = to,
                _ if full => return,
                _ => self.out_of_line.push(Span {
                    from,
                    to,
                    kind: Kind::Void,
                }),
            }
        }
        self.taken = next;
        self.voided += to - from + 1;
        // Takes' times of the void serials do not exist; nothing else to do.
    }

    fn note_hour(&mut self, now: i64, took: i64, called: i64) {
        let tz = self.spec.zone().unwrap_or(TimeZone::UTC);
        let (hour, _) = local(&tz, now);
        let waiting = self.waiting();
        match self.hourly.last_mut() {
            Some(h) if h.hour == hour => {
                h.taken += took;
                h.served += called;
                h.waiting = waiting;
            }
            _ => self.hourly.push(Hour {
                hour,
                taken: took,
                served: called,
                waiting,
            }),
        }
        let oldest = now - 24 * 3_600_000;
        self.hourly.retain(|h| h.hour + 3_600_000 > oldest);
        while self.hourly.len() > KEPT_HOURS {
            self.hourly.remove(0);
        }
    }

    /// When `serial` was taken, if still known.
    fn taken_at(&self, serial: i64) -> Option<i64> {
        self.takes
            .iter()
            .find(|t| t.first <= serial && serial < t.first + t.count)
            .map(|t| t.at)
    }

    /// The take a request id made, if the ring still holds it and it is younger than
    /// [`KEY_RETENTION_MS`] at `now`.
    pub(crate) fn find_key(&self, id: &RequestId, now: i64) -> Option<&Key> {
        self.keys.iter().rev().find(|k| {
            k.key == id.id && k.caller == id.caller && k.at.saturating_add(KEY_RETENTION_MS) > now
        })
    }

    /// Whether the take that request id `id` made may be in the request collection: some
    /// ids moved out, and the filter does not rule `id` out (a queue that moved ids before
    /// the filter existed asks for every id).
    pub(crate) fn may_have_spilled(&self, id: &RequestId) -> bool {
        self.spilled > 0 && self.spill_filter.as_ref().is_none_or(|f| f.may_hold(id))
    }

    /// The answer to a take with request id `id` of `count` tickets that made `k` before.
    pub(crate) fn replay(k: &Key, id: &RequestId, count: u64) -> Result<Done, Refusal> {
        if unsigned(k.count) != count {
            return Err(Refusal::Invalid {
                what: "request id",
                reason: format!(
                    "{:?} was used for a take of {} ticket(s), not {count}; use a new request id for another take",
                    id.id, k.count
                ),
            });
        }
        Ok(Done::Took {
            first: k.first,
            count: k.count,
            replayed: true,
            version: k.version,
            max: k.max,
        })
    }

    /// The ticket the take `k` (made with request id `id`) got: one ticket, whose serial
    /// an act by request id names.
    pub(crate) fn taken_by(k: &Key, id: &RequestId) -> Result<i64, Refusal> {
        if k.count != 1 {
            return Err(Refusal::Invalid {
                what: "request id",
                reason: format!(
                    "the take with request id {:?} got {} tickets (serials {} to {}); name each by its serial",
                    id.id,
                    k.count,
                    k.first,
                    k.first + k.count - 1
                ),
            });
        }
        Ok(k.first)
    }

    /// Takes `count` tickets at `now` in this state (already rolled to `now`), with request
    /// id `key`, as the write of `version` does; the request ids leaving the ring go to
    /// `spill`.
    fn take(
        &mut self,
        count: u64,
        key: Option<&RequestId>,
        now: i64,
        version: i64,
        spill: &mut Vec<Key>,
    ) -> Result<Done, Refusal> {
        let s = self;
        let n = i64::try_from(count).map_err(|_| Refusal::Overflow)?;
        let last = s.taken.checked_add(n).ok_or(Refusal::Overflow)?;
        let lower = s.oldest_held().unwrap_or(s.taken + 1);
        let span = i128::from(last) - i128::from(lower) + 1;
        if span > i128::from(s.spec.capacity()) {
            return Err(Refusal::Full {
                requested: count,
                waiting: s.waiting(),
                shown: s.desks.iter().map(|d| d.serial).min(),
                before_restart: s.waiting_before_restart(),
            });
        }
        let first = s.taken + 1;
        s.taken = last;
        s.takes.push(TakeAt {
            first,
            count: n,
            at: now,
        });
        let served = s.served;
        s.takes.retain(|t| t.first + t.count - 1 > served);
        if s.takes.len() > KEPT_TAKES {
            let extra = s.takes.len() - KEPT_TAKES;
            s.takes.drain(..extra);
        }
        if let Some(id) = key {
            s.keys.push(Key {
                caller: id.caller.clone(),
                key: id.id.clone(),
                first,
                count: n,
                at: now,
                version,
                max: s.spec.max,
            });
            // The ring never forgets by time (whose clock would it be?): its oldest ids move
            // to the request collection, which keeps them 24 hours.
            if s.keys.len() > RING {
                let out = s.keys.len() - (RING - SPILL);
                let moved: Vec<Key> = s.keys.drain(..out).collect();
                let earlier = s.spilled > 0;
                s.spilled += i64::try_from(moved.len()).unwrap_or(i64::MAX);
                s.spill_filter
                    .get_or_insert_with(|| SpillFilter::new(now, earlier))
                    .note(&moved, now);
                spill.extend(moved);
            }
        }
        s.taken_today += n;
        s.note_hour(now, n, 0);
        Ok(Done::Took {
            first,
            count: n,
            replayed: false,
            version,
            max: s.spec.max,
        })
    }

    /// What `op` does from this state at `now` (ms since the epoch, by the server's clock).
    ///
    /// Every state it returns to write passes [`State::check`]; a computation that would
    /// break a rule is refused ([`Refusal::Broken`]) and nothing is written.
    pub(crate) fn apply(&self, op: &Op, now: i64) -> Result<Step, Refusal> {
        // A replayed request id answers from the state as it is, and writes nothing.
        if let Op::Take {
            count,
            key: Some(id),
        } = op
            && let Some(k) = self.find_key(id, now)
        {
            return State::replay(k, id, *count).map(Step::Answer);
        }
        let mut s = self.clone();
        s.roll(now);
        let mut spill = Vec::new();
        let version = self.version + 1;
        let done = match op {
            Op::Take { count, key } => s.take(*count, key.as_ref(), now, version, &mut spill)?,
            Op::Call { desk, ticket } => {
                let serial = match ticket {
                    None if s.served < s.taken => s.served + 1,
                    None => return Err(Refusal::Nobody),
                    Some(t) => s.waiting_named(t)?,
                };
                let existing = s.desks.iter().position(|d| &d.desk == desk);
                if existing.is_none() && s.desks.len() >= MAX_DESKS {
                    return Err(Refusal::Invalid {
                        what: "desk",
                        reason: format!(
                            "{MAX_DESKS} desks show a ticket already; call from one of them"
                        ),
                    });
                }
                s.mark_done(serial, Kind::Called)?;
                let shown = Desk {
                    desk: desk.clone(),
                    serial,
                    at: now,
                };
                match existing {
                    Some(i) => s.desks[i] = shown,
                    None => s.desks.push(shown),
                }
                let wait_ms = s.taken_at(serial).map(|at| (now - at).max(0));
                s.calls.insert(
                    0,
                    Call {
                        serial,
                        desk: desk.clone(),
                        at: now,
                        recall: false,
                        wait_ms,
                    },
                );
                s.calls.truncate(KEPT_CALLS);
                let served = s.served;
                s.takes.retain(|t| t.first + t.count - 1 > served);
                s.served_today += 1;
                s.note_hour(now, 0, 1);
                Done::Called { serial }
            }
            Op::Recall { desk, ticket } => {
                let i = s.desk_showing(desk, ticket.as_ref())?;
                let d = &mut s.desks[i];
                d.at = now;
                let serial = d.serial;
                s.calls.insert(
                    0,
                    Call {
                        serial,
                        desk: desk.clone(),
                        at: now,
                        recall: true,
                        wait_ms: None,
                    },
                );
                s.calls.truncate(KEPT_CALLS);
                s.note_hour(now, 0, 0);
                Done::Recalled { serial, at: now }
            }
            Op::Finish { desk, ticket } => {
                let i = s.desk_showing(desk, ticket.as_ref())?;
                let serial = s.desks.remove(i).serial;
                s.note_hour(now, 0, 0);
                Done::Finished { serial }
            }
            Op::Cancel { target } => {
                let (serial, took) = match target {
                    Target::Ticket(t) => (s.waiting_named(t)?, false),
                    Target::Take(id) => match s.find_key(id, now) {
                        Some(k) => (Self::taken_by(k, id)?, false),
                        None => match s.take(1, Some(id), now, version, &mut spill)? {
                            Done::Took { first, .. } => (first, true),
                            _ => return Err(Refusal::Overflow),
                        },
                    },
                };
                if let Some(why) = s.not_waiting(serial) {
                    let why = match (target, why.as_str()) {
                        (Target::Take(_), "it was cancelled") => {
                            "it was given up already".to_owned()
                        }
                        _ => why,
                    };
                    return Err(Refusal::NotWaiting {
                        serial,
                        ticket: self.spec.ticket(unsigned(serial)),
                        why: format!("is not waiting: {why}"),
                    });
                }
                s.mark_done(serial, Kind::Cancelled)?;
                s.cancelled += 1;
                s.recent_cancels.push(serial);
                if s.recent_cancels.len() > RING {
                    s.recent_cancels.remove(0);
                }
                let served = s.served;
                s.takes.retain(|t| t.first + t.count - 1 > served);
                s.note_hour(now, 0, 0);
                Done::Cancelled { serial, took }
            }
            Op::SetMax { max } => {
                let new = s.spec.clone().with_max(*max);
                new.validate("").map_err(|e| Refusal::Invalid {
                    what: "max",
                    reason: match e {
                        Error::InvalidArgument { reason, .. } => reason,
                        other => other.to_string(),
                    },
                })?;
                s.check_remap(&new)?;
                s.spec = new;
                Done::Altered
            }
        };
        s.version += 1;
        s.updated_at = now;
        s.check().map_err(Refusal::Broken)?;
        Ok(Step::Write(Box::new(s), done, spill))
    }

    /// Refuses a new range under which a held ticket would show another number (or two held
    /// tickets the same one). Decided from the runs of held serials (at most
    /// [`MAX_SPANS`] + 1 + [`MAX_DESKS`] of them), never serial by serial: the work does not
    /// grow with the range.
    fn check_remap(&self, new: &QueueSpec) -> Result<(), Refusal> {
        let (Some(oldest), Some(newest)) = (self.oldest_held(), self.newest_held()) else {
            return Ok(());
        };
        let span = i128::from(newest) - i128::from(oldest) + 1;
        if span > i128::from(new.capacity()) {
            return Err(Refusal::Remap {
                max: new.max,
                reason: format!(
                    "the tickets held (waiting or shown) span {span} tickets and max {} holds only {}; call or cancel them first",
                    new.max,
                    new.capacity()
                ),
            });
        }
        for (first, last) in self.held_runs() {
            if let Some(serial) = first_remapped(&self.spec, new, first, last) {
                let (before, after) = (
                    self.spec.ticket(unsigned(serial)),
                    new.ticket(unsigned(serial)),
                );
                return Err(Refusal::Remap {
                    max: new.max,
                    reason: format!(
                        "ticket {before} is held (waiting or shown) and would show {after} under max {}; change the range when nobody holds a ticket it would remap",
                        new.max
                    ),
                });
            }
        }
        Ok(())
    }

    /// The average time between the recent calls (ms), once [`PACE_MIN`] were made.
    pub(crate) fn pace_ms(&self) -> Option<i64> {
        let calls: Vec<i64> = self
            .calls
            .iter()
            .filter(|c| !c.recall)
            .take(PACE_CALLS)
            .map(|c| c.at)
            .collect();
        if calls.len() < PACE_MIN {
            return None;
        }
        let span = calls[0] - calls[calls.len() - 1];
        Some((span / i64::try_from(calls.len() - 1).unwrap_or(1)).max(0))
    }

    /// The estimated wait (seconds) of a ticket with `position` tickets before it, at `now`:
    /// `position + 1` calls at the recent pace, less the part of the current one already
    /// elapsed (at most one pace). `None` while too few calls were made.
    pub(crate) fn estimate_s(&self, position: u64, now: i64) -> Option<u64> {
        let pace = self.pace_ms()?;
        let last = self.calls.iter().find(|c| !c.recall)?.at;
        let elapsed = (now - last).clamp(0, pace);
        let calls = i64::try_from(position)
            .unwrap_or(i64::MAX)
            .saturating_add(1);
        let ms = calls.saturating_mul(pace).saturating_sub(elapsed).max(0);
        Some(unsigned((ms + 500) / 1000))
    }
}

impl Refusal {
    pub(crate) fn into_error(self, name: &str, s: &State) -> Error {
        match self {
            Refusal::Full {
                requested,
                waiting,
                shown,
                before_restart,
            } => Error::QueueFull {
                name: name.to_owned(),
                waiting: unsigned(waiting),
                shown: shown.map(|serial| s.spec.ticket(unsigned(serial))),
                requested,
                capacity: s.spec.capacity(),
                before_restart: before_restart.map_or(0, |(n, _)| unsigned(n)),
                oldest_before_restart: before_restart
                    .map(|(_, serial)| s.spec.ticket(unsigned(serial))),
            },
            Refusal::Nobody => Error::NobodyWaiting {
                name: name.to_owned(),
                called: unsigned(s.called()),
            },
            Refusal::NotWaiting {
                serial,
                ticket,
                why,
            } => Error::TicketNotWaiting {
                name: name.to_owned(),
                ticket,
                serial: unsigned(serial),
                reason: why,
            },
            Refusal::NoTicketShown { desk } => Error::NoTicketShown {
                name: name.to_owned(),
                desk: (!desk.is_empty()).then_some(desk),
            },
            Refusal::Overflow => Error::Exhausted {
                name: name.to_owned(),
                value: s.taken,
                requested: 1,
                remaining: 0,
                min: s.spec.min,
                max: s.spec.max,
                step: 1,
            },
            Refusal::Remap { max, reason } => Error::QueueAlterRefused {
                name: name.to_owned(),
                max,
                reason,
            },
            Refusal::Invalid { what, reason } => {
                Error::invalid_argument(format!("{what} for queue {name:?}"), reason)
            }
            Refusal::Broken(v) => Error::corrupt_of(
                "queue",
                name,
                &v.field,
                format!(
                    "{} in the state an operation computed; nothing was written (a bug: please report it with the queue's document)",
                    v.problem
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(max: i64) -> State {
        State::new(
            QueueSpec::default().with_max(max),
            bson::oid::ObjectId::new(),
            0,
        )
    }

    fn run(s: &State, op: Op, now: i64) -> Result<(State, Done), Refusal> {
        match s.apply(&op, now)? {
            Step::Write(s, d, _) => Ok((*s, d)),
            Step::Answer(d) => Ok((s.clone(), d)),
        }
    }

    fn take(s: &mut State, n: u64) -> Result<i64, Refusal> {
        let (next, d) = run(
            s,
            Op::Take {
                count: n,
                key: None,
            },
            0,
        )?;
        *s = next;
        match d {
            Done::Took { first, .. } => Ok(first),
            other => panic!("{other:?}"),
        }
    }

    /// The ticket that waits with `number`, named by its serial, as a surface where a person
    /// reads a number off a board resolves it (`Queue::waiting_ticket`).
    fn cancel_serial(serial: i64) -> Op {
        Op::Cancel {
            target: Target::Ticket(Named {
                serial,
                incarnation: None,
            }),
        }
    }

    fn by_number(s: &State, number: i64) -> Result<Named, Refusal> {
        s.waiting_serial_of(number).map(|serial| Named {
            serial,
            incarnation: None,
        })
    }

    /// Cancels the ticket that waits with `number` at `now`.
    fn cancel_number(s: &State, number: i64, now: i64) -> Result<(State, Done), Refusal> {
        let t = by_number(s, number)?;
        run(
            s,
            Op::Cancel {
                target: Target::Ticket(t),
            },
            now,
        )
    }

    fn call(s: &mut State, desk: &str, ticket: Option<i64>) -> Result<i64, Refusal> {
        let ticket = ticket.map(|n| by_number(s, n)).transpose()?;
        let (next, d) = run(
            s,
            Op::Call {
                desk: desk.into(),
                ticket,
            },
            0,
        )?;
        *s = next;
        match d {
            Done::Called { serial } => Ok(s.spec.ticket(serial as u64)),
            other => panic!("{other:?}"),
        }
    }

    /// Against a plain model (the list of waiting tickets and what each desk shows): takes,
    /// calls from three desks, out-of-order calls and cancels never hand out a ticket held,
    /// calls come in take order except out-of-order ones, refusals only when needed.
    #[test]
    fn the_state_agrees_with_a_list_of_waiting_tickets_and_desks() {
        let mut s = fresh(5); // 1..5, 0: capacity 6
        let mut waiting: Vec<i64> = Vec::new();
        let mut shown: std::collections::HashMap<String, i64> = Default::default();
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..20_000 {
            let desk = ["", "1", "2"][rnd(3) as usize].to_owned();
            match rnd(10) {
                0..=3 => {
                    let n = 1 + rnd(3);
                    match take(&mut s, n) {
                        Ok(first) => {
                            for serial in first..first + n as i64 {
                                let t = s.spec.ticket(serial as u64);
                                assert!(!waiting.contains(&t), "{t} handed out while waiting");
                                assert!(
                                    !shown.values().any(|&v| v == t),
                                    "{t} handed out while shown"
                                );
                                waiting.push(t);
                            }
                        }
                        Err(Refusal::Full { .. }) => {
                            // The rule is the span of the held serials, not their count (a
                            // cancelled ticket in the middle still counts): a queue holding
                            // nothing refuses only a family larger than its range.
                            let held = waiting.len() + shown.len();
                            assert!(held > 0 || n > 6, "{held} {n}");
                        }
                        Err(e) => panic!("{e:?}"),
                    }
                }
                4..=6 => match call(&mut s, &desk, None) {
                    Ok(t) => {
                        assert_eq!(waiting.first(), Some(&t), "calls in take order");
                        waiting.remove(0);
                        shown.insert(desk, t);
                    }
                    Err(Refusal::Nobody) => assert!(waiting.is_empty()),
                    Err(e) => panic!("{e:?}"),
                },
                7 => {
                    let t = rnd(6) as i64;
                    match call(&mut s, &desk, Some(t)) {
                        Ok(got) => {
                            assert_eq!(got, t);
                            let i = waiting.iter().position(|&w| w == t).expect("was waiting");
                            waiting.remove(i);
                            shown.insert(desk, t);
                        }
                        Err(Refusal::NotWaiting { .. }) => assert!(!waiting.contains(&t)),
                        Err(e) => panic!("{e:?}"),
                    }
                }
                8 => {
                    let t = rnd(6) as i64;
                    match cancel_number(&s, t, 0) {
                        Ok((next, _)) => {
                            s = next;
                            let i = waiting.iter().position(|&w| w == t).expect("was waiting");
                            waiting.remove(i);
                        }
                        Err(Refusal::NotWaiting { .. }) => assert!(!waiting.contains(&t)),
                        Err(e) => panic!("{e:?}"),
                    }
                }
                _ => match run(
                    &s,
                    Op::Recall {
                        desk: desk.clone(),
                        ticket: None,
                    },
                    0,
                ) {
                    Ok((next, Done::Recalled { serial, .. })) => {
                        assert_eq!(shown.get(&desk), Some(&s.spec.ticket(serial as u64)));
                        s = next;
                    }
                    Err(Refusal::NoTicketShown { .. }) => assert!(!shown.contains_key(&desk)),
                    other => panic!("{other:?}"),
                },
            }
            assert_eq!(s.check(), Ok(()));
            assert_eq!(s.waiting() as usize, waiting.len());
            let listed: Vec<i64> = (s.served + 1..=s.taken)
                .filter(|&k| s.is_waiting(k))
                .map(|k| s.spec.ticket(k as u64))
                .collect();
            assert_eq!(listed, waiting);
            // Each waiting ticket's place in line is how many wait before it; what is held
            // (waiting or shown by a desk), as runs, is exactly those serials and the desks'.
            let serials: Vec<i64> = (s.served + 1..=s.taken)
                .filter(|&k| s.is_waiting(k))
                .collect();
            for (i, &k) in serials.iter().enumerate() {
                assert_eq!(s.position(k), Some(i as u64), "{k} in {serials:?}");
            }
            assert_eq!(s.position(s.taken + 1), None);
            for d in &s.desks {
                assert_eq!(s.position(d.serial), None, "{d:?} is shown, not waiting");
            }
            let mut held = serials.clone();
            held.extend(s.desks.iter().map(|d| d.serial));
            held.sort_unstable();
            assert!(
                s.held_runs().iter().all(|&(a, b)| a <= b),
                "a run holds at least one serial: {:?}",
                s.held_runs()
            );
            let mut runs: Vec<i64> = s.held_runs().iter().flat_map(|&(a, b)| a..=b).collect();
            runs.sort_unstable();
            assert_eq!(runs, held, "{:?} {:?}", s.held_runs(), s.out_of_line);
            assert_eq!(
                (s.oldest_held(), s.newest_held()),
                (held.first().copied(), held.last().copied())
            );
        }
    }

    /// Tickets 1 to 12 taken: 1 called at desk a, 5 called out of line at desk b, 8
    /// cancelled, 11 and 12 taken with a request id.
    fn a_state_with_every_part() -> State {
        let mut base = fresh(99);
        take(&mut base, 10).unwrap();
        call(&mut base, "a", None).unwrap(); // 1, at desk a
        call(&mut base, "b", Some(5)).unwrap(); // 5, out of line
        cancel_number(&base, 8, 0)
            .map(|(next, _)| base = next)
            .unwrap();
        let (next, _) = run(
            &base,
            Op::Take {
                count: 2,
                key: Some(id("kiosk", "k1")),
            },
            0,
        )
        .unwrap();
        base = next;
        assert_eq!(base.check(), Ok(()), "{base:?}");
        assert_eq!(
            (base.served, base.taken, base.out_of_line.len()),
            (1, 12, 2)
        );
        base
    }

    /// Every rule `check` holds a document to refuses the state that breaks it alone, naming
    /// the field — so no write produces, and no read accepts, a document a later operation
    /// would misread. (Found by cargo-mutants: `served` beyond `taken`, and overlapping spans
    /// of tickets done out of line, were accepted unnoticed.)
    #[test]
    fn check_refuses_each_broken_rule_naming_its_field() {
        let base = a_state_with_every_part();
        type Break = fn(&mut State);
        let broken: [(&str, Break); 16] = [
            ("served", |s| s.served = s.taken + 1),
            ("served", |s| s.served = -1),
            ("version", |s| s.version = -1),
            ("out_of_line.0", |s| s.out_of_line[0].from = s.served + 1),
            ("out_of_line.0", |s| {
                s.out_of_line[0].to = s.out_of_line[0].from - 1
            }),
            ("out_of_line.1", |s| {
                s.out_of_line[1].from = s.out_of_line[0].to
            }),
            ("out_of_line.1", |s| s.out_of_line[1].to = s.taken + 1),
            ("cancelled", |s| s.cancelled = -1),
            ("desks.0", |s| s.desks[0].serial = s.taken),
            ("desks.1", |s| s.desks[1].desk = s.desks[0].desk.clone()),
            ("keys.0", |s| s.keys[0].count = 0),
            ("keys.0", |s| s.keys[0].first = s.taken),
            ("keys.0", |s| s.keys[0].key = String::new()),
            ("takes.0", |s| s.takes[0].first = 0),
            ("spilled", |s| s.spilled = -1),
            ("calls", |s| {
                let c = s.calls[0].clone();
                s.calls.resize(KEPT_CALLS + 1, c);
            }),
        ];
        for (field, breaks) in broken {
            let mut s = base.clone();
            breaks(&mut s);
            match s.check() {
                Err(v) => assert_eq!(v.field, field, "{v:?}"),
                Ok(()) => panic!("{field}: accepted {s:?}"),
            }
        }
    }

    /// Regression (issue 31, 1): a desk's ticket stays held while another desk calls on.
    #[test]
    fn a_ticket_shown_by_any_desk_is_never_taken_again() {
        let mut s = fresh(2); // 1, 2, 0
        for _ in 0..3 {
            take(&mut s, 1).unwrap();
        }
        assert!(matches!(take(&mut s, 1), Err(Refusal::Full { .. })));
        assert_eq!(call(&mut s, "A", None).unwrap(), 1);
        assert_eq!(call(&mut s, "B", None).unwrap(), 2);
        // 1 (desk A) and 2 (desk B) shown, 0 waits: full.
        assert!(matches!(take(&mut s, 1), Err(Refusal::Full { .. })));
        assert_eq!(call(&mut s, "B", None).unwrap(), 0);
        // A still shows 1: the next take (1 again) is refused.
        assert!(matches!(take(&mut s, 1), Err(Refusal::Full { .. })));
        assert_eq!(call(&mut s, "A", None), Err(Refusal::Nobody));
        // A fresh queue takes its whole range.
        let mut f = fresh(9);
        assert_eq!(take(&mut f, 10).unwrap(), 1);
        assert!(matches!(take(&mut fresh(9), 11), Err(Refusal::Full { .. })));
    }

    #[test]
    fn cancels_and_out_of_order_calls_are_passed_over_once() {
        let mut s = fresh(9);
        take(&mut s, 5).unwrap(); // 1..5
        cancel_number(&s, 2, 0).map(|(n, _)| s = n).unwrap();
        assert_eq!(call(&mut s, "A", Some(4)).unwrap(), 4);
        assert!(matches!(
            call(&mut s, "A", Some(4)),
            Err(Refusal::NotWaiting { why, .. }) if why == "is not waiting: it is called to desk \"A\""
        ));
        assert!(matches!(
            cancel_number(&s, 2, 0),
            Err(Refusal::NotWaiting { why, .. }) if why == "is not waiting: it was cancelled"
        ));
        assert!(matches!(
            cancel_number(&s, 7, 0),
            Err(Refusal::NotWaiting { .. })
        ));
        assert_eq!(s.waiting(), 3); // 1, 3, 5
        assert_eq!(call(&mut s, "A", None).unwrap(), 1);
        assert_eq!(call(&mut s, "A", None).unwrap(), 3);
        assert_eq!(call(&mut s, "A", None).unwrap(), 5);
        assert_eq!(
            (s.served, s.out_of_line.len(), s.called(), s.cancelled),
            (5, 0, 4, 1)
        );
    }

    fn id(caller: &str, id: &str) -> RequestId {
        RequestId {
            caller: caller.into(),
            id: id.into(),
        }
    }

    #[test]
    fn a_request_id_answers_the_same_tickets_and_takes_nothing_more() {
        let s = fresh(9);
        let op = Op::Take {
            count: 2,
            key: Some(id("kiosk-a", "k1")),
        };
        let Ok(Step::Write(
            s,
            Done::Took {
                first: 1,
                count: 2,
                replayed: false,
                ..
            },
            _,
        )) = s.apply(&op, 10)
        else {
            panic!()
        };
        assert!(matches!(
            s.apply(&op, 20),
            Ok(Step::Answer(Done::Took {
                first: 1,
                count: 2,
                replayed: true,
                version: 1,
                max: 9
            }))
        ));
        let other = Op::Take {
            count: 1,
            key: Some(id("kiosk-a", "k1")),
        };
        assert!(matches!(s.apply(&other, 20), Err(Refusal::Invalid { .. })));
        // Remembered for 24 hours of the server's clock (the documented promise, written
        // out: the constant itself mutated went unnoticed): a minute short of them the retry
        // answers the same tickets; after them the id is a new take.
        let day = 24 * 60 * 60 * 1000;
        assert!(matches!(
            s.apply(&op, 10 + day - 60_000),
            Ok(Step::Answer(Done::Took {
                first: 1,
                replayed: true,
                ..
            }))
        ));
        assert!(matches!(
            s.apply(&op, 10 + day),
            Ok(Step::Write(_, Done::Took { first: 3, .. }, _))
        ));
    }

    /// Regression (issue 37, 3): two kiosks whose request ids collide each get their own
    /// tickets; an id belongs to its caller.
    #[test]
    fn the_same_request_id_from_two_callers_is_two_takes() {
        let s = fresh(9);
        let a = Op::Take {
            count: 1,
            key: Some(id("ka", "k-1")),
        };
        let b = Op::Take {
            count: 1,
            key: Some(id("kb", "k-1")),
        };
        let (s, first) = run(&s, a.clone(), 0).unwrap();
        let (s, second) = run(&s, b.clone(), 0).unwrap();
        assert!(matches!(
            first,
            Done::Took {
                first: 1,
                replayed: false,
                ..
            }
        ));
        assert!(
            matches!(
                second,
                Done::Took {
                    first: 2,
                    replayed: false,
                    ..
                }
            ),
            "{second:?}"
        );
        // Each caller's retry answers its own take.
        assert!(matches!(
            run(&s, a, 0).unwrap().1,
            Done::Took {
                first: 1,
                replayed: true,
                ..
            }
        ));
        assert!(matches!(
            run(&s, b, 0).unwrap().1,
            Done::Took {
                first: 2,
                replayed: true,
                ..
            }
        ));
    }

    /// Regression (issue 37, 4): a take written with a clock two days ahead does not make
    /// the queue forget the other callers' request ids.
    #[test]
    fn a_clock_days_ahead_forgets_no_request_id() {
        let s = fresh(99);
        let mine = Op::Take {
            count: 1,
            key: Some(id("", "kiosk-1/0001")),
        };
        let (s, _) = run(&s, mine.clone(), 1_000).unwrap();
        let ahead = Op::Take {
            count: 1,
            key: Some(id("", "other/1")),
        };
        let (s, _) = run(&s, ahead, 1_000 + 2 * 86_400_000).unwrap();
        assert!(
            matches!(
                run(&s, mine, 2_000).unwrap().1,
                Done::Took {
                    first: 1,
                    replayed: true,
                    ..
                }
            ),
            "the first id is still answered"
        );
    }

    /// The filter of ids moved out has no false negative: every id moved out in the last 24
    /// hours (two generations) may be held, across rotations; ids never moved are mostly ruled
    /// out (few false positives at a thousand ids).
    #[test]
    fn the_spill_filter_never_forgets_an_id_within_a_day() {
        let key = |i: usize| Key {
            caller: format!("kiosk-{}", i % 7),
            key: format!("{i:06}"),
            first: 1,
            count: 1,
            at: 0,
            version: 1,
            max: 9,
        };
        let rid = |k: &Key| id(&k.caller, &k.key);
        let mut f = SpillFilter::new(0, false);
        let hour = 3_600_000;
        let mut moved: Vec<(i64, Key)> = Vec::new();
        for i in 0..3000 {
            let now = i as i64 * hour / 50; // 60 hours in all
            let k = key(i);
            f.note(std::slice::from_ref(&k), now);
            moved.push((now, k));
            for (at, k) in moved
                .iter()
                .rev()
                .take_while(|(at, _)| now - at < KEY_RETENTION_MS)
            {
                assert!(f.may_hold(&rid(k)), "{k:?} moved at {at}, now {now}");
            }
        }
        let mut young = SpillFilter::new(0, false);
        young.note(&(0..1000).map(key).collect::<Vec<_>>(), 0);
        let false_positives = (10_000..20_000)
            .filter(|&i| young.may_hold(&rid(&key(i))))
            .count();
        assert!(false_positives < 1000, "{false_positives} of 10 000");
        // A take that spills records the ids it moves.
        let mut s = fresh(999);
        for i in 0..=RING {
            let op = Op::Take {
                count: 1,
                key: Some(id("k", &format!("{i}"))),
            };
            s = run(&s, op, 0).unwrap().0;
        }
        assert!(s.may_have_spilled(&id("k", "0")));
        assert!(!s.keys.iter().any(|k| k.key == "0"));
        // A queue that moved ids out before it had a filter: every id may have moved until
        // the filter's first rotation, a day later.
        let mut legacy = s.clone();
        legacy.spill_filter = None;
        let spilled = legacy.spilled;
        for i in 0..=RING {
            let op = Op::Take {
                count: 1,
                key: Some(id("k2", &format!("{i}"))),
            };
            legacy = run(&legacy, op, 1).unwrap().0;
        }
        assert!(legacy.spilled > spilled && legacy.spill_filter.is_some());
        assert!(legacy.may_have_spilled(&id("someone", "moved-before-the-filter")));
    }

    /// The ring of request ids stays bounded: past [`RING`] ids the oldest [`SPILL`] leave it
    /// in the write (for the request collection), counted in `spilled`.
    #[test]
    fn the_ring_of_request_ids_is_bounded_and_spills_its_oldest() {
        let mut s = fresh(i64::MAX - 1);
        let mut spilled = Vec::new();
        for i in 0..(3 * RING) {
            let op = Op::Take {
                count: 1,
                key: Some(id("k", &format!("{i}"))),
            };
            let Ok(Step::Write(next, _, out)) = s.apply(&op, 0) else {
                panic!()
            };
            spilled.extend(out);
            s = *next;
            assert!(s.keys.len() <= RING);
        }
        assert_eq!(s.spilled as usize, spilled.len());
        assert_eq!(spilled.len() + s.keys.len(), 3 * RING);
        // Spilled oldest first, the ring holds the newest.
        assert_eq!(spilled[0].key, "0");
        assert_eq!(
            s.keys.last().map(|k| k.key.as_str()),
            Some(&*format!("{}", 3 * RING - 1))
        );
    }

    /// The ring holds exactly `RING` request ids; the take that adds one more moves the
    /// oldest out, leaving `RING - SPILL`, and counts them. A queue that moved ids out
    /// before it had a filter starts its filter with the previous generation full (any id
    /// may have moved), one that did not with it empty (issue 53: mutants of the ring's bound
    /// and of that choice survived).
    #[test]
    fn the_ring_spills_at_exactly_its_size_and_a_first_filter_knows_what_moved_before() {
        let take_with = |s: &mut State, i: usize| -> Vec<Key> {
            let op = Op::Take {
                count: 1,
                key: Some(id("k", &format!("{i}"))),
            };
            let Ok(Step::Write(next, _, out)) = s.apply(&op, 0) else {
                panic!("take {i}")
            };
            *s = *next;
            out
        };
        for moved_before in [0, 7] {
            let mut s = fresh(i64::MAX - 1);
            for i in 0..RING {
                assert!(take_with(&mut s, i).is_empty(), "{i}");
            }
            assert_eq!(s.keys.len(), RING);
            s.spilled = moved_before;
            let out = take_with(&mut s, RING);
            assert_eq!(out.len(), SPILL + 1);
            assert_eq!(out[0].key, "0");
            assert_eq!(s.keys.len(), RING - SPILL);
            assert_eq!(s.spilled, moved_before + SPILL as i64 + 1);
            let f = s.spill_filter.as_ref().expect("a filter");
            let full = if moved_before > 0 { u64::MAX } else { 0 };
            assert!(f.previous.iter().all(|w| *w == full), "{moved_before}");
        }
    }

    /// A take answers the version it wrote, and its replay (the same request id) answers
    /// the same version and tickets — what a caller compares to know its take is the one
    /// stored (issue 53: a take answering another version went unnoticed by the unit tests).
    #[test]
    fn a_take_and_its_replay_answer_the_version_the_take_wrote() {
        let mut s = fresh(99);
        take(&mut s, 3).unwrap();
        let op = Op::Take {
            count: 2,
            key: Some(id("kiosk", "r1")),
        };
        let Ok(Step::Write(next, took, _)) = s.apply(&op, 0) else {
            panic!("a take writes")
        };
        assert!(
            matches!(took, Done::Took { first: 4, count: 2, replayed: false, version, .. } if version == next.version && version == s.version + 1),
            "{took:?} after version {}",
            s.version
        );
        let Ok(Step::Answer(again)) = next.apply(&op, 0) else {
            panic!("a replay answers")
        };
        assert!(
            matches!(again, Done::Took { first: 4, count: 2, replayed: true, version, .. } if version == next.version),
            "{again:?}"
        );
    }

    /// A new range too small for the tickets held is refused for their span, naming it;
    /// one just large enough is refused only for the ticket it would remap (issue 53: the
    /// span computed one off went unnoticed: the ticket-by-ticket rule refused in its place).
    #[test]
    fn a_range_too_small_for_the_tickets_held_is_refused_for_their_span() {
        for (held, reason) in [
            (5, "span 5 tickets and max 3 holds only 4"),
            (
                4,
                "ticket 4 is held (waiting or shown) and would show 0 under max 3",
            ),
        ] {
            let mut s = fresh(9);
            take(&mut s, held).unwrap();
            match run(&s, Op::SetMax { max: 3 }, 0) {
                Err(Refusal::Remap { max: 3, reason: r }) => {
                    assert!(r.contains(reason), "{held} held: {r}");
                }
                other => panic!("{held} held: {other:?}"),
            }
        }
    }

    #[test]
    fn the_range_changes_only_when_no_held_ticket_is_remapped() {
        let mut s = fresh(9);
        // Nothing held: any range.
        assert!(run(&s, Op::SetMax { max: 4 }, 0).is_ok());
        take(&mut s, 3).unwrap(); // 1, 2, 3 (serials 1..3)
        // 1..3 keep their numbers under max 4 and 20.
        assert!(run(&s, Op::SetMax { max: 20 }, 0).is_ok());
        assert!(run(&s, Op::SetMax { max: 3 }, 0).is_ok());
        // A range validate refuses is bad input, not a remap.
        assert!(matches!(
            run(&s, Op::SetMax { max: 0 }, 0),
            Err(Refusal::Invalid { what: "max", .. })
        ));
        // max 2 holds 3 tickets, but 3 would show 0.
        assert!(matches!(
            run(&s, Op::SetMax { max: 2 }, 0),
            Err(Refusal::Remap { .. })
        ));
        take(&mut s, 7).unwrap(); // up to serial 10 = ticket 0
        call(&mut s, "A", None).unwrap();
        // Serial 10 shows 0 under max 9, 10 under max 10.
        assert!(matches!(
            run(&s, Op::SetMax { max: 10 }, 0),
            Err(Refusal::Remap { .. })
        ));
    }

    #[test]
    fn the_pace_of_calls_estimates_the_wait() {
        let mut s = fresh(99);
        take(&mut s, 10).unwrap();
        assert_eq!(s.estimate_s(0, 0), None);
        for i in 0..4 {
            let (n, _) = run(
                &s,
                Op::Call {
                    desk: "A".into(),
                    ticket: None,
                },
                i * 60_000,
            )
            .unwrap();
            s = n;
        }
        assert_eq!(s.pace_ms(), Some(60_000));
        // Right after the last call: the next ticket in one pace, the third in three.
        assert_eq!(s.estimate_s(0, 180_000), Some(60));
        assert_eq!(s.estimate_s(2, 180_000), Some(180));
        assert_eq!(s.estimate_s(2, 200_000), Some(160));
        assert_eq!(s.estimate_s(2, 900_000), Some(120));
    }

    #[test]
    fn a_daily_queue_starts_again_without_reaching_a_ticket_still_waiting() {
        let spec = QueueSpec::default().with_max(9).with_daily(true);
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 3_600_000;
        let mut s = State::new(spec, bson::oid::ObjectId::new(), day1);
        let take_at = |s: &mut State, now: i64| -> Result<i64, Refusal> {
            let (n, d) = run(
                s,
                Op::Take {
                    count: 1,
                    key: None,
                },
                now,
            )?;
            *s = n;
            match d {
                Done::Took { first, .. } => Ok(s.spec.ticket(first as u64)),
                _ => unreachable!(),
            }
        };
        for want in 1..=5 {
            assert_eq!(take_at(&mut s, day1).unwrap(), want);
        }
        // 1..3 called, 4 and 5 wait into the next day.
        for _ in 0..3 {
            call(&mut s, "A", None).unwrap();
        }
        let day2 = day1 + 86_400_000;
        assert_eq!(take_at(&mut s, day2).unwrap(), 1, "a new day starts at 1");
        assert_eq!(s.taken_today, 1);
        assert!(s.desks.is_empty(), "the boards start blank");
        assert_eq!(take_at(&mut s, day2).unwrap(), 2);
        assert_eq!(take_at(&mut s, day2).unwrap(), 3);
        // 4 still waits from yesterday: refused, and the refusal says why fewer fit than the
        // range holds (regression, issue 49, item 10: it said only "5 wait, the range holds
        // 10").
        match take_at(&mut s, day2) {
            Err(r @ Refusal::Full { .. }) => {
                assert!(
                    matches!(
                        r,
                        Refusal::Full {
                            before_restart: Some((2, _)),
                            ..
                        }
                    ),
                    "{r:?}"
                );
                let m = r.into_error("q", &s).to_string();
                assert!(
                    m.contains("5 ticket(s) wait and its range holds 10; 2 of them were taken before the daily restart and keep their numbers, so today's tickets stop before 4, the oldest of them"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.waiting(), 5);
        assert_eq!(s.taken_tickets(), 8);
        // Calls serve yesterday's first.
        assert_eq!(call(&mut s, "A", None).unwrap(), 4);
        assert_eq!(call(&mut s, "A", None).unwrap(), 5);
        assert_eq!(call(&mut s, "A", None).unwrap(), 1);
        assert_eq!(s.called(), 6);
    }

    fn take_at(s: &mut State, n: u64, now: i64) -> Result<Vec<i64>, Refusal> {
        let (next, d) = run(
            s,
            Op::Take {
                count: n,
                key: None,
            },
            now,
        )?;
        *s = next;
        match d {
            Done::Took { first, count, .. } => Ok((first..first + count)
                .map(|k| s.spec.ticket(k as u64))
                .collect()),
            other => panic!("{other:?}"),
        }
    }

    fn call_at(s: &mut State, now: i64) -> Result<i64, Refusal> {
        let (next, d) = run(
            s,
            Op::Call {
                desk: "1".into(),
                ticket: None,
            },
            now,
        )?;
        *s = next;
        match d {
            Done::Called { serial } => Ok(s.spec.ticket(serial as u64)),
            other => panic!("{other:?}"),
        }
    }

    /// Regression (issue 37, 1): yesterday's waiting tickets crossing the wrap (8 9 0 1 2 of
    /// 0..=9), then a new day: every state written passes the reader's rules, and the queue
    /// goes on — yesterday's tickets first, today's from 1 once they fit.
    #[test]
    fn a_new_day_after_waiting_tickets_crossed_the_wrap_writes_a_valid_state() {
        let spec = QueueSpec::default()
            .with_max(9)
            .with_daily(true)
            .with_time_zone(&jiff::tz::TimeZone::get("Europe/Paris").unwrap());
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 9 * 3_600_000;
        let mut s = State::new(spec, bson::oid::ObjectId::new(), day1);
        assert_eq!(take_at(&mut s, 9, day1).unwrap().len(), 9);
        for _ in 0..7 {
            call_at(&mut s, day1).unwrap();
        }
        assert_eq!(take_at(&mut s, 3, day1).unwrap(), vec![0, 1, 2]);
        let day2 = day1 + 86_400_000;
        assert_eq!(call_at(&mut s, day2).unwrap(), 8);
        assert_eq!(s.check(), Ok(()), "the new day's state");
        assert_eq!(call_at(&mut s, day2).unwrap(), 9);
        // 0 1 2 still wait: today's first ticket (1) is held, so takes are refused, and the
        // refusal speaks of the new day's state (no desk shows yesterday's ticket).
        match take_at(&mut s, 1, day2) {
            Err(Refusal::Full { shown, waiting, .. }) => {
                assert_eq!(waiting, 3);
                assert_eq!(shown.map(|x| s.spec.ticket(x as u64)), Some(9));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(call_at(&mut s, day2).unwrap(), 0);
        assert_eq!(call_at(&mut s, day2).unwrap(), 1);
        // Desk 1 shows 1: still held.
        assert!(matches!(
            take_at(&mut s, 1, day2),
            Err(Refusal::Full { .. })
        ));
        assert_eq!(call_at(&mut s, day2).unwrap(), 2);
        assert_eq!(
            take_at(&mut s, 1, day2).unwrap(),
            vec![1],
            "today starts at 1"
        );
        assert_eq!(call_at(&mut s, day2).unwrap(), 1);
        assert_eq!(s.check(), Ok(()));
    }

    /// Regression (issue 11, second part): the first refused take after a new day names
    /// no desk, since the new day cleared them.
    #[test]
    fn a_refusal_after_a_new_day_speaks_of_the_new_day() {
        let spec = QueueSpec::default().with_max(2).with_daily(true);
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 9 * 3_600_000;
        let mut s = State::new(spec, bson::oid::ObjectId::new(), day1);
        take_at(&mut s, 3, day1).unwrap(); // 1 2 0
        call_at(&mut s, day1).unwrap(); // desk 1 shows 1; 2 0 wait
        match take_at(&mut s, 1, day1) {
            Err(Refusal::Full { shown: Some(1), .. }) => {}
            other => panic!("{other:?}"),
        }
        // A new day clears the desks: a family of two does not fit beside 2 and 0.
        match take_at(&mut s, 2, day1 + 86_400_000) {
            Err(Refusal::Full {
                shown: None,
                waiting: 2,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    /// Regression (issue 37, 2): changing the range of a queue of 10^13 tickets after a new
    /// day decides from the runs of held tickets: it returns at once.
    #[test]
    fn alter_is_bounded_whatever_the_range() {
        let spec = QueueSpec::default()
            .with_max(10_000_000_000_000)
            .with_daily(true);
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 9 * 3_600_000;
        let mut s = State::new(spec, bson::oid::ObjectId::new(), day1);
        take_at(&mut s, 5, day1).unwrap();
        call_at(&mut s, day1).unwrap();
        let day2 = day1 + 86_400_000;
        // The new day voids the serials up to the wrap; ticket 1 (the desk cleared) is free.
        assert_eq!(take_at(&mut s, 1, day2).unwrap(), vec![1]);
        let started = std::time::Instant::now();
        let (next, _) = run(
            &s,
            Op::SetMax {
                max: 10_000_000_000_000,
            },
            day2,
        )
        .unwrap();
        assert!(matches!(
            run(
                &s,
                Op::SetMax {
                    max: 20_000_000_000_000
                },
                day2
            ),
            Err(Refusal::Remap { .. })
        ));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(next.check(), Ok(()));
    }

    /// `first_remapped` agrees with comparing every serial of every run, for small ranges.
    #[test]
    fn first_remapped_agrees_with_comparing_each_serial() {
        for min in [-3_i64, 0, 2] {
            for c1 in 2..9_i64 {
                for c2 in 2..9_i64 {
                    let old = QueueSpec::default().with_min(min).with_max(min + c1 - 1);
                    let new = QueueSpec::default().with_min(min).with_max(min + c2 - 1);
                    for a in 1..30_i64 {
                        for b in a..a + 12 {
                            let brute =
                                (a..=b).find(|&k| old.ticket(k as u64) != new.ticket(k as u64));
                            assert_eq!(
                                first_remapped(&old, &new, a, b),
                                brute,
                                "{min} {c1} {c2} {a} {b}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A daily queue driven over many days, with takes, calls and cancels at random: every
    /// state computed passes the reader's rules (the cross-cutting check the integration
    /// model makes with real documents, here exhaustively cheap).
    #[test]
    fn many_days_of_random_operations_keep_every_rule() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for cap in [1_i64, 2, 3, 7, 10] {
            let spec = QueueSpec::default()
                .with_max(cap - 1)
                .with_daily(true)
                .with_time_zone(&jiff::tz::TimeZone::get("America/New_York").unwrap());
            let mut now = 1_710_000_000_000; // around a daylight-saving change
            let mut s = State::new(spec, bson::oid::ObjectId::new(), now);
            for _ in 0..3000 {
                now += [60_000, 3_600_000, 7 * 3_600_000, 86_400_000][rnd(4) as usize];
                let op = match rnd(4) {
                    0 | 1 => Op::Take {
                        count: 1 + rnd(2),
                        key: None,
                    },
                    2 => Op::Call {
                        desk: ["1", "2"][rnd(2) as usize].into(),
                        ticket: None,
                    },
                    _ => Op::Cancel {
                        target: Target::Ticket(Named {
                            serial: rnd(s.taken as u64 + 2) as i64,
                            incarnation: None,
                        }),
                    },
                };
                match s.apply(&op, now) {
                    Ok(Step::Write(next, _, _)) => {
                        assert_eq!(next.check(), Ok(()), "after {op:?}");
                        s = *next;
                    }
                    Err(Refusal::Broken(v)) => panic!("{op:?} computed a broken state: {v:?}"),
                    _ => {}
                }
            }
        }
    }

    /// Issue 53 (a mutant that never merged adjacent void spans survived): a daily queue
    /// whose range an operator alters on days nobody takes, while a ticket from the first
    /// day still waits, voids serials at each new day right after the last day's void ones.
    /// Those spans merge into one, so the line's bookkeeping does not grow a span a day and,
    /// past [`MAX_SPANS`] such days, a new day still starts again at the first ticket
    /// (unmerged, the spans filled up and the restarts were skipped).
    #[test]
    fn restarts_with_nothing_taken_between_them_merge_their_void_serials() {
        let spec = QueueSpec::default().with_max(9).with_daily(true);
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 9 * 3_600_000;
        let mut s = State::new(spec, bson::oid::ObjectId::new(), day1);
        assert_eq!(take_at(&mut s, 1, day1).unwrap(), vec![1]); // waits, day after day
        let days = MAX_SPANS as i64 + 10;
        for d in 1..=days {
            // The day's one write: the range set to 9 and 10 on alternate days, so each new
            // day has serials to void up to the wrap, right after the last day's.
            let max = if d % 2 == 0 { 9 } else { 10 };
            let (next, _) = run(&s, Op::SetMax { max }, day1 + d * 86_400_000).unwrap();
            s = next;
            assert_eq!(s.out_of_line.len(), 1, "void spans after day {d}");
            assert_eq!(s.check(), Ok(()), "day {d}");
        }
        let last = day1 + (days + 1) * 86_400_000;
        // The first day's ticket 1 is called at last, and its desk is done with it: nothing
        // is held, and today's first ticket is 1 again.
        assert_eq!(call_at(&mut s, last).unwrap(), 1);
        assert_eq!(s.waiting(), 0);
        s = run(
            &s,
            Op::Finish {
                desk: "1".into(),
                ticket: None,
            },
            last,
        )
        .unwrap()
        .0;
        assert_eq!(
            take_at(&mut s, 1, last).unwrap(),
            vec![1],
            "a new day starts at 1"
        );
    }

    /// Each part of a compound rule of `check` alone, and each bound exactly: accepted at
    /// the bound, refused one past it (issue 53: mutants of `check` that let one part of a
    /// rule through, or moved a bound by one, survived the table above).
    #[test]
    fn check_holds_each_part_of_a_rule_alone_and_each_bound_exactly() {
        let base = a_state_with_every_part();
        let desks = |n: usize| -> Vec<Desk> {
            (0..n)
                .map(|i| Desk {
                    desk: format!("d{i}"),
                    serial: 1,
                    at: 0,
                })
                .collect()
        };
        type Change = Box<dyn Fn(&mut State)>;
        let accepted: Vec<(&str, Change)> = vec![
            (
                "the most desks",
                Box::new(move |s| s.desks = desks(MAX_DESKS)),
            ),
            (
                "a void span before a desk's ticket",
                Box::new(|s| {
                    s.out_of_line.insert(
                        0,
                        Span {
                            from: 3,
                            to: 3,
                            kind: Kind::Void,
                        },
                    );
                    s.voided = 1;
                }),
            ),
            (
                "the longest request id",
                Box::new(|s| s.keys[0].key = "k".repeat(64)),
            ),
            (
                "the longest caller",
                Box::new(|s| s.keys[0].caller = "c".repeat(128)),
            ),
            (
                "a take up to taken",
                Box::new(|s| {
                    s.takes[0].first = s.taken - 1;
                    s.takes[0].count = 2;
                }),
            ),
            (
                "a spill filter",
                Box::new(|s| s.spill_filter = Some(SpillFilter::new(0, true))),
            ),
        ];
        for (what, change) in accepted {
            let mut s = base.clone();
            change(&mut s);
            assert_eq!(s.check(), Ok(()), "{what}: {s:?}");
        }
        let refused: Vec<(&str, Change)> = vec![
            ("cancelled", Box::new(|s| s.voided = -1)),
            ("cancelled", Box::new(|s| s.cancelled = s.served + 10)),
            ("desks", Box::new(move |s| s.desks = desks(MAX_DESKS + 1))),
            ("desks.0", Box::new(|s| s.desks[0].serial = 0)),
            // Desk b shows 5, now void.
            ("desks.1", Box::new(|s| s.out_of_line[0].kind = Kind::Void)),
            ("keys.0", Box::new(|s| s.keys[0].key = "k".repeat(65))),
            ("keys.0", Box::new(|s| s.keys[0].caller = "c".repeat(129))),
            (
                "takes.0",
                Box::new(|s| {
                    s.takes[0].first = s.taken;
                    s.takes[0].count = 2;
                }),
            ),
            (
                "spill_filter",
                Box::new(|s| {
                    let mut f = SpillFilter::new(0, false);
                    f.previous.pop();
                    s.spill_filter = Some(f);
                }),
            ),
            (
                "spill_filter",
                Box::new(|s| {
                    let mut f = SpillFilter::new(0, false);
                    f.current.push(0);
                    s.spill_filter = Some(f);
                }),
            ),
        ];
        for (field, change) in refused {
            let mut s = base.clone();
            change(&mut s);
            match s.check() {
                Err(v) => assert_eq!(v.field, field, "{v:?}"),
                Ok(()) => panic!("{field}: accepted {s:?}"),
            }
        }
    }

    fn cancel(s: &mut State, ticket: i64) -> Result<(), Refusal> {
        *s = cancel_number(s, ticket, 0)?.0;
        Ok(())
    }

    /// Tickets done out of line next to each other are one group, in whatever order they are
    /// done — upwards, downwards, or the gap between two groups filled last — and tickets done
    /// differently (cancelled, called) are separate groups. So more than `MAX_SPANS` tickets
    /// cancelled side by side are not refused (issue 53: mutants that merged on one side only,
    /// or merged groups of different kinds, survived).
    #[test]
    fn tickets_done_side_by_side_are_one_group_in_any_order() {
        let n = MAX_SPANS as i64 + 200;
        let one = |from, to| Span {
            from,
            to,
            kind: Kind::Cancelled,
        };
        let mut up = fresh(9_999);
        take(&mut up, n as u64 + 2).unwrap();
        let mut down = up.clone();
        for t in 3..=n + 2 {
            cancel(&mut up, t).unwrap();
            cancel(&mut down, n + 5 - t).unwrap();
        }
        for s in [&up, &down] {
            assert_eq!(s.out_of_line, [one(3, n + 2)]);
            assert_eq!((s.cancelled, s.waiting()), (n, 2));
            assert_eq!(s.check(), Ok(()));
        }
        let mut s = fresh(99);
        take(&mut s, 10).unwrap();
        for t in [3, 7, 5, 4, 8] {
            cancel(&mut s, t).unwrap();
        }
        assert_eq!(s.out_of_line, [one(3, 5), one(7, 8)]);
        cancel(&mut s, 6).unwrap();
        assert_eq!(s.out_of_line, [one(3, 8)]);
        call(&mut s, "a", Some(9)).unwrap();
        assert_eq!(
            s.out_of_line,
            [
                one(3, 8),
                Span {
                    from: 9,
                    to: 9,
                    kind: Kind::Called
                }
            ]
        );
        // The cursor moves over them once the tickets before are done.
        cancel(&mut s, 1).unwrap();
        cancel(&mut s, 2).unwrap();
        assert_eq!((s.served, s.out_of_line.len(), s.waiting()), (9, 0, 1));
    }

    /// With the most groups of tickets done out of line, another group is refused, but the
    /// next ticket in line is still called or cancelled: it moves the cursor, it is no group
    /// (issue 53: with the cursor's test moved, it became a group, and was refused).
    #[test]
    fn the_next_ticket_is_called_and_cancelled_with_the_most_groups_out_of_line() {
        let mut s = fresh(9_999);
        let most = MAX_SPANS as i64;
        take(&mut s, 2 * most as u64 + 10).unwrap();
        for k in 0..most {
            cancel(&mut s, 4 + 2 * k).unwrap();
        }
        assert_eq!(s.out_of_line.len(), MAX_SPANS);
        assert!(matches!(
            cancel(&mut s, 2 * most + 6),
            Err(Refusal::Invalid { .. })
        ));
        assert_eq!(call(&mut s, "a", None).unwrap(), 1);
        cancel(&mut s, 2).unwrap();
        assert_eq!(s.served, 2);
        assert_eq!(call(&mut s, "a", None).unwrap(), 3);
        assert_eq!((s.served, s.out_of_line.len()), (4, MAX_SPANS - 1));
        assert_eq!(s.check(), Ok(()));
    }

    /// A clock gone back to an earlier day neither starts a daily queue again nor resets
    /// today's counts: the day stays the latest seen (issue 53: a test of the date order
    /// deleted went unnoticed).
    #[test]
    fn a_clock_gone_back_a_day_does_not_start_the_day_again() {
        let spec = QueueSpec::default().with_max(9).with_daily(true);
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 9 * 3_600_000;
        let day2 = day1 + 86_400_000;
        let mut s = State::new(spec, bson::oid::ObjectId::new(), day1);
        assert_eq!(take_at(&mut s, 2, day2).unwrap(), vec![1, 2]);
        let today = s.day.clone();
        assert_eq!(take_at(&mut s, 1, day1).unwrap(), vec![3]);
        assert_eq!(call_at(&mut s, day1).unwrap(), 1);
        assert_eq!(
            (s.day.as_str(), s.taken_today, s.served_today),
            (today.as_str(), 3, 1)
        );
        assert_eq!((s.taken, s.voided), (3, 0));
    }

    /// A new day's void serials join the last group done out of line only when that group is
    /// void and right before them; a cancelled ticket stays a cancelled group and the tickets
    /// still waiting stay waiting (issue 53: mutants that joined any last group survived).
    #[test]
    fn a_new_days_void_serials_join_only_a_void_group_right_before_them() {
        let spec = QueueSpec::default().with_max(9).with_daily(true);
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 9 * 3_600_000;
        let span = |from, to, kind| Span { from, to, kind };
        for cancelled in [3, 5] {
            let mut s = State::new(spec.clone(), bson::oid::ObjectId::new(), day1);
            take_at(&mut s, 5, day1).unwrap();
            s = cancel_number(&s, cancelled, day1).unwrap().0;
            assert_eq!(call_at(&mut s, day1 + 86_400_000).unwrap(), 1);
            assert_eq!(
                s.out_of_line,
                [
                    span(cancelled, cancelled, Kind::Cancelled),
                    span(6, 10, Kind::Void)
                ],
                "ticket {cancelled} cancelled"
            );
            assert_eq!((s.waiting(), s.cancelled, s.voided), (3, 1, 5));
            assert_eq!(s.check(), Ok(()));
        }
    }

    /// With the most groups done out of line and people waiting, a new day goes on numbering
    /// instead of starting again (a void group would be one too many): the state written
    /// passes the reader's rules (issue 53: the bound ignored wrote a state `check` refuses).
    #[test]
    fn a_new_day_with_the_most_groups_out_of_line_goes_on_numbering() {
        let spec = QueueSpec::default().with_max(9_999).with_daily(true);
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 9 * 3_600_000;
        let mut s = State::new(spec, bson::oid::ObjectId::new(), day1);
        let most = MAX_SPANS as i64;
        take_at(&mut s, 2 * most as u64 + 10, day1).unwrap();
        for k in 0..most {
            s = cancel_number(&s, 4 + 2 * k, day1).unwrap().0;
        }
        let taken = s.taken;
        assert_eq!(
            take_at(&mut s, 1, day1 + 86_400_000).unwrap(),
            vec![taken + 1]
        );
        assert_eq!((s.out_of_line.len(), s.voided), (MAX_SPANS, 0));
        assert_eq!(s.check(), Ok(()));
    }

    /// A new day starts again only when a whole range of serials is left after the void ones:
    /// at exactly `i64::MAX` it does, one range short of it, it goes on numbering (issue 53:
    /// mutants of that bound survived).
    #[test]
    fn a_new_day_starts_again_only_with_a_whole_range_of_serials_left() {
        let day1 = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 9 * 3_600_000;
        let day2 = day1 + 86_400_000;
        // 7 ranges of `cap` are i64::MAX serials: after 5 ranges and one serial, the day
        // voids up to 6 ranges, leaving exactly a whole range.
        let cap: i64 = i64::MAX / 7;
        assert_eq!(cap * 7, i64::MAX);
        let exact = QueueSpec::default().with_max(cap - 1).with_daily(true);
        let mut s = State::new(exact, bson::oid::ObjectId::new(), day1);
        s.taken = 5 * cap + 1;
        s.served = s.taken;
        assert_eq!(take_at(&mut s, 1, day2).unwrap(), vec![1], "starts again");
        assert_eq!(s.taken, 6 * cap + 1);
        // A range of 2^62: after one serial the day would void up to 2^62, leaving less than
        // a whole range.
        let wide = QueueSpec::default()
            .with_max((1_i64 << 62) - 1)
            .with_daily(true);
        let mut s = State::new(wide, bson::oid::ObjectId::new(), day1);
        take_at(&mut s, 1, day1).unwrap();
        call_at(&mut s, day1).unwrap();
        assert_eq!(
            take_at(&mut s, 1, day2).unwrap(),
            vec![2],
            "goes on numbering"
        );
        assert_eq!((s.taken, s.voided), (2, 0));
    }

    /// A queue remembers when each ticket still waiting was taken, so a call says how long it
    /// waited, whatever takes, calls and cancels came between; it forgets takes whose tickets
    /// are all done, and keeps at most `KEPT_TAKES`, dropping the oldest (issue 53: mutants
    /// that forgot a take still waiting, or never dropped one, survived).
    #[test]
    fn a_call_says_how_long_its_ticket_waited_and_old_takes_are_dropped() {
        let mut s = fresh(9_999);
        let at = |s: &mut State, op: Op, now: i64| *s = run(s, op, now).unwrap().0;
        let take1 = Op::Take {
            count: 1,
            key: None,
        };
        let next = || Op::Call {
            desk: "a".into(),
            ticket: None,
        };
        let first_take = |s: &State| s.takes.first().map(|t| t.first);
        for t in 1..=5 {
            at(&mut s, take1.clone(), t * 100);
        }
        at(&mut s, next(), 1_000);
        assert_eq!((s.calls[0].serial, s.calls[0].wait_ms), (1, Some(900)));
        assert_eq!(first_take(&s), Some(2), "a call forgets the take it served");
        at(&mut s, cancel_serial(2), 1_100);
        assert_eq!(
            first_take(&s),
            Some(3),
            "a cancel forgets the take it ended"
        );
        at(&mut s, next(), 2_000);
        assert_eq!((s.calls[0].serial, s.calls[0].wait_ms), (3, Some(1_700)));
        at(&mut s, take1.clone(), 2_500);
        assert_eq!(first_take(&s), Some(4), "a take forgets the takes served");
        at(&mut s, cancel_serial(4), 2_600);
        at(&mut s, next(), 3_000);
        assert_eq!((s.calls[0].serial, s.calls[0].wait_ms), (5, Some(2_500)));
        assert_eq!((s.taken_today, s.served_today), (6, 3));
        // One take more than are kept, nobody called: the oldest goes.
        let mut s = fresh(9_999);
        for i in 0..=KEPT_TAKES as i64 + 4 {
            at(&mut s, take1.clone(), i);
        }
        assert_eq!(s.takes.len(), KEPT_TAKES);
        assert_eq!(s.takes[0].first, 6);
        assert_eq!(s.check(), Ok(()));
    }

    fn give_up(s: &State, caller: &str, key: &str, now: i64) -> Result<(State, Done), Refusal> {
        run(
            s,
            Op::Cancel {
                target: Target::Take(id(caller, key)),
            },
            now,
        )
    }

    fn why(r: Result<(State, Done), Refusal>) -> String {
        match r {
            Err(Refusal::NotWaiting { why, .. }) => why,
            other => panic!("expected a refusal of the ticket named, got {other:?}"),
        }
    }

    /// Regression (issue 59, 1): a give-up read the queue, then cancelled by number, and the
    /// number had come round to another person's ticket: theirs was cancelled. An act names
    /// the ticket by its serial (or its take's request id), and the write checks that very
    /// ticket: tickets 1, 2, 0; P takes serial 1 (number 1), Q serial 2; P and Q are called;
    /// S takes serial 3 (0), R serial 4 (number 1 again).
    #[test]
    fn an_act_lands_on_the_ticket_it_names_never_on_one_whose_number_came_round() {
        let mut s = fresh(2);
        let take_as = |s: &mut State, key: &str| match run(
            s,
            Op::Take {
                count: 1,
                key: Some(id("link", key)),
            },
            0,
        ) {
            Ok((next, Done::Took { first, .. })) => {
                *s = next;
                first
            }
            other => panic!("{other:?}"),
        };
        let p = take_as(&mut s, "P.1");
        let q = take_as(&mut s, "Q.1");
        call(&mut s, "1", None).unwrap();
        call(&mut s, "1", None).unwrap();
        take_as(&mut s, "S.1");
        let r = take_as(&mut s, "R.1");
        assert_eq!((p, q, r), (1, 2, 4));
        assert_eq!(s.spec.ticket(1), s.spec.ticket(4), "the number came round");
        // P's give-up, by its take's request id: refused, R still waits.
        let w = why(give_up(&s, "link", "P.1", 0));
        assert_eq!(w, "is not waiting: it was called to desk \"1\"");
        // By serial, with or without the incarnation: refused too.
        for incarnation in [None, Some(s.incarnation)] {
            let t = Named {
                serial: p,
                incarnation,
            };
            let w = why(run(
                &s,
                Op::Cancel {
                    target: Target::Ticket(t),
                },
                0,
            ));
            assert!(w.starts_with("is not waiting: it was called"), "{w}");
            let w = why(run(
                &s,
                Op::Call {
                    desk: "2".into(),
                    ticket: Some(t),
                },
                0,
            ));
            assert!(w.starts_with("is not waiting"), "{w}");
        }
        assert!(s.is_waiting(r));
        // A number read off the board names the ticket that waits with it now: R's.
        assert_eq!(s.waiting_serial_of(s.spec.ticket(1)), Ok(4));
        // R's own give-up lands on R.
        let (after, done) = give_up(&s, "link", "R.1", 0).unwrap();
        assert_eq!(
            done,
            Done::Cancelled {
                serial: 4,
                took: false
            }
        );
        assert!(!after.is_waiting(4) && after.is_waiting(3));
    }

    /// Regression (issue 59, 6): a second give-up of a ticket cancelled at the head of the line
    /// said "it no longer waits"; it says it was given up already, and a cancel by serial says
    /// it was cancelled, wherever in the line it was.
    #[test]
    fn a_second_give_up_says_the_ticket_was_given_up_already() {
        let mut s = fresh(999);
        for key in ["a", "b", "c"] {
            s = run(
                &s,
                Op::Take {
                    count: 1,
                    key: Some(id("", key)),
                },
                0,
            )
            .unwrap()
            .0;
        }
        // "a" is at the head: the cursor moves over it and no span remembers it.
        s = give_up(&s, "", "a", 0).unwrap().0;
        s = give_up(&s, "", "c", 0).unwrap().0;
        assert_eq!(s.served, 1);
        for key in ["a", "c"] {
            assert_eq!(
                why(give_up(&s, "", key, 0)),
                "is not waiting: it was given up already",
                "{key}"
            );
        }
        let w = why(run(&s, cancel_serial(1), 0));
        assert_eq!(w, "is not waiting: it was cancelled");
        // The ring of recent cancels is bounded: the oldest is forgotten, and then the
        // message says what is still known.
        for _ in 0..RING {
            let (next, _) = run(
                &s,
                Op::Take {
                    count: 1,
                    key: None,
                },
                0,
            )
            .unwrap();
            s = next;
            let serial = s.taken;
            s = run(&s, cancel_serial(serial), 0).unwrap().0;
        }
        assert_eq!(s.recent_cancels.len(), RING);
        assert_eq!(s.check(), Ok(()));
        assert_eq!(
            why(run(&s, cancel_serial(1), 0)),
            "is not waiting: it was called or cancelled"
        );
    }

    /// A give-up whose request id no take used takes a ticket with it and cancels it in the
    /// same write: the take, arriving later, answers that cancelled ticket and takes nothing.
    /// A take of several tickets is not given up by its id.
    #[test]
    fn a_give_up_before_its_take_takes_and_cancels_in_one_write() {
        let s = fresh(9);
        let (s, done) = give_up(&s, "link", "late.1", 5).unwrap();
        assert_eq!(
            done,
            Done::Cancelled {
                serial: 1,
                took: true
            }
        );
        assert_eq!((s.taken, s.waiting(), s.cancelled, s.version), (1, 0, 1, 1));
        match s
            .apply(
                &Op::Take {
                    count: 1,
                    key: Some(id("link", "late.1")),
                },
                6,
            )
            .unwrap()
        {
            Step::Answer(Done::Took {
                first, replayed, ..
            }) => assert_eq!((first, replayed), (1, true)),
            other => panic!("{other:?}"),
        }
        let (s, _) = run(
            &s,
            Op::Take {
                count: 3,
                key: Some(id("kiosk", "family")),
            },
            7,
        )
        .unwrap();
        match give_up(&s, "kiosk", "family", 8) {
            Err(Refusal::Invalid { reason, .. }) => assert!(
                reason.contains("got 3 tickets (serials 2 to 4); name each by its serial"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
        // Another caller's id of the same text is another take.
        let (_, done) = give_up(&s, "other", "family", 8).unwrap();
        assert_eq!(
            done,
            Done::Cancelled {
                serial: 5,
                took: true
            }
        );
    }

    /// A recall or finish that names the desk's ticket lands only while the desk shows it;
    /// an act pinned to another incarnation of the queue is refused.
    #[test]
    fn recall_and_finish_of_a_named_ticket_and_acts_of_another_incarnation_are_refused() {
        let mut s = fresh(9);
        take(&mut s, 3).unwrap();
        call(&mut s, "3", None).unwrap(); // serial 1 at desk 3
        let named = |serial| {
            Some(Named {
                serial,
                incarnation: None,
            })
        };
        let recall = |s: &State, serial| {
            run(
                s,
                Op::Recall {
                    desk: "3".into(),
                    ticket: named(serial),
                },
                0,
            )
        };
        assert!(recall(&s, 1).is_ok());
        call(&mut s, "3", None).unwrap(); // desk 3 moved on to serial 2
        assert_eq!(
            why(recall(&s, 1)),
            "is not shown by desk \"3\": it shows ticket 2 (serial 2) now"
        );
        let finish = |s: &State, desk: &str, serial| {
            run(
                s,
                Op::Finish {
                    desk: desk.into(),
                    ticket: named(serial),
                },
                0,
            )
        };
        assert_eq!(
            why(finish(&s, "4", 2)),
            "is not shown by desk \"4\": it shows no ticket"
        );
        let (after, done) = finish(&s, "3", 2).unwrap();
        assert_eq!(done, Done::Finished { serial: 2 });
        assert!(after.desks.is_empty());
        let elsewhere = Named {
            serial: 3,
            incarnation: Some(bson::oid::ObjectId::new()),
        };
        let w = why(run(
            &s,
            Op::Cancel {
                target: Target::Ticket(elsewhere),
            },
            0,
        ));
        assert!(w.starts_with("is of another incarnation"), "{w}");
        // The same serial of this incarnation waits and is cancelled.
        let here = Named {
            serial: 3,
            incarnation: Some(s.incarnation),
        };
        assert!(
            run(
                &s,
                Op::Cancel {
                    target: Target::Ticket(here),
                },
                0
            )
            .is_ok()
        );
    }
}
