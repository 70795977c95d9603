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
/// At most this many request ids are remembered …
pub(crate) const KEPT_KEYS: usize = 1000;
/// … and each for at least this long (milliseconds): 24 hours.
pub(crate) const KEY_RETENTION_MS: i64 = 24 * 3600 * 1000;
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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Cancelled => "cancelled",
            Kind::Called => "called",
            Kind::Void => "void",
        }
    }

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

/// A request id and the take it made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub key: String,
    pub first: i64,
    pub count: i64,
    pub at: i64,
    /// The version the take wrote.
    pub version: i64,
    /// The highest ticket then (a later `set_max` may remap tickets no longer held; a replay
    /// answers the numbers the take handed out).
    pub max: i64,
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
    /// Oldest first.
    pub keys: Vec<Key>,
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
    },
    Nobody,
    NotWaiting {
        ticket: i64,
        why: &'static str,
    },
    NothingToRecall {
        desk: String,
    },
    Overflow,
    /// Bad input for this state (too many desks, a request id reused for another count…).
    Invalid {
        what: &'static str,
        reason: String,
    },
}

/// What an operation does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Take {
        count: u64,
        key: Option<String>,
    },
    Call {
        desk: String,
        ticket: Option<i64>,
    },
    Recall {
        desk: String,
    },
    /// The desk is done with its ticket (closes, or serves no one next): it shows none.
    Release {
        desk: String,
    },
    Cancel {
        ticket: i64,
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
    Released {
        serial: i64,
    },
    Cancelled {
        serial: i64,
    },
    Altered,
}

/// What to do after computing an operation.
#[derive(Debug)]
pub(crate) enum Step {
    /// Write this state (version + 1), then answer.
    Write(Box<State>, Done),
    /// Nothing to write: answer from the state read (a replayed request id).
    Answer(Done),
}

fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
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
            keys: Vec::new(),
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

    /// The oldest serial held (waiting or shown by a desk), if any.
    pub(crate) fn oldest_held(&self) -> Option<i64> {
        let waiting = (self.served < self.taken).then_some(self.served + 1);
        waiting
            .into_iter()
            .chain(self.desks.iter().map(|d| d.serial))
            .min()
    }

    /// The waiting serial showing `ticket`, or why there is none.
    fn waiting_serial(&self, ticket: i64) -> Result<i64, Refusal> {
        let not = |why| Refusal::NotWaiting { ticket, why };
        if ticket < self.spec.min || ticket > self.spec.max {
            return Err(not("it is outside the queue's range"));
        }
        let cap = i128::from(self.spec.capacity());
        let offset = (i128::from(ticket) - i128::from(self.spec.min)).rem_euclid(cap);
        // The newest serial up to `taken` showing `ticket`.
        let taken = i128::from(self.taken);
        let serial = taken - (taken - offset).rem_euclid(cap);
        let serial = i64::try_from(serial).unwrap_or(0);
        if serial <= self.served || serial < 1 {
            return Err(not("it is not held by anyone waiting"));
        }
        match self
            .out_of_line
            .iter()
            .find(|s| s.from <= serial && serial <= s.to)
        {
            Some(s) if s.kind == Kind::Cancelled => Err(not("it was cancelled")),
            Some(s) if s.kind == Kind::Called => Err(not("it was called already")),
            Some(_) => Err(not("it is not held by anyone waiting")),
            None => Ok(serial),
        }
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
                r.kind == kind && r.from == serial + 1
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
    /// numbers (the span rule). The desks' boards are cleared.
    fn restart(&mut self) {
        self.desks.clear();
        let cap = i64::try_from(self.spec.capacity()).unwrap_or(i64::MAX);
        let rem = self.taken.rem_euclid(cap);
        if rem == 0 {
            return;
        }
        let Some(next) = self.taken.checked_add(cap - rem) else {
            return;
        };
        let (from, to) = (self.taken + 1, next);
        self.taken = next;
        self.voided += to - from + 1;
        if self.served == from - 1 {
            // Nobody waits: the cursor moves past the void serials at once.
            self.served = to;
        } else {
            match self.out_of_line.last_mut() {
                Some(l) if l.kind == Kind::Void && l.to + 1 == from => l.to = to,
                _ => self.out_of_line.push(Span {
                    from,
                    to,
                    kind: Kind::Void,
                }),
            }
        }
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
        while self.hourly.len() > 25 {
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

    fn find_key(&self, key: &str, now: i64) -> Option<&Key> {
        self.keys
            .iter()
            .find(|k| k.key == key && k.at + KEY_RETENTION_MS > now)
    }

    /// What `op` does from this state at `now` (ms since the epoch).
    pub(crate) fn apply(&self, op: &Op, now: i64) -> Result<Step, Refusal> {
        // A replayed request id answers from the state as it is, and writes nothing.
        if let Op::Take {
            count,
            key: Some(key),
        } = op
            && let Some(k) = self.find_key(key, now)
        {
            if unsigned(k.count) != *count {
                return Err(Refusal::Invalid {
                    what: "request id",
                    reason: format!(
                        "{key:?} was used for a take of {} ticket(s), not {count}; use a new request id for another take",
                        k.count
                    ),
                });
            }
            return Ok(Step::Answer(Done::Took {
                first: k.first,
                count: k.count,
                replayed: true,
                version: k.version,
                max: k.max,
            }));
        }
        let mut s = self.clone();
        s.roll(now);
        let done = match op {
            Op::Take { count, key } => {
                let n = i64::try_from(*count).map_err(|_| Refusal::Overflow)?;
                let last = s.taken.checked_add(n).ok_or(Refusal::Overflow)?;
                let lower = s.oldest_held().unwrap_or(s.taken + 1);
                let span = i128::from(last) - i128::from(lower) + 1;
                if span > i128::from(s.spec.capacity()) {
                    return Err(Refusal::Full { requested: *count });
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
                if let Some(key) = key {
                    s.keys.retain(|k| k.at + KEY_RETENTION_MS > now);
                    s.keys.push(Key {
                        key: key.clone(),
                        first,
                        count: n,
                        at: now,
                        version: self.version + 1,
                        max: s.spec.max,
                    });
                    if s.keys.len() > KEPT_KEYS {
                        let extra = s.keys.len() - KEPT_KEYS;
                        s.keys.drain(..extra);
                    }
                }
                s.taken_today += n;
                s.note_hour(now, n, 0);
                Done::Took {
                    first,
                    count: n,
                    replayed: false,
                    version: self.version + 1,
                    max: s.spec.max,
                }
            }
            Op::Call { desk, ticket } => {
                let serial = match ticket {
                    None if s.served < s.taken => s.served + 1,
                    None => return Err(Refusal::Nobody),
                    Some(t) => s.waiting_serial(*t)?,
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
            Op::Recall { desk } => {
                let Some(d) = s.desks.iter_mut().find(|d| &d.desk == desk) else {
                    return Err(Refusal::NothingToRecall { desk: desk.clone() });
                };
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
            Op::Release { desk } => {
                let Some(i) = s.desks.iter().position(|d| &d.desk == desk) else {
                    return Err(Refusal::NothingToRecall { desk: desk.clone() });
                };
                let serial = s.desks.remove(i).serial;
                s.note_hour(now, 0, 0);
                Done::Released { serial }
            }
            Op::Cancel { ticket } => {
                let serial = s.waiting_serial(*ticket)?;
                s.mark_done(serial, Kind::Cancelled)?;
                s.cancelled += 1;
                let served = s.served;
                s.takes.retain(|t| t.first + t.count - 1 > served);
                s.note_hour(now, 0, 0);
                Done::Cancelled { serial }
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
        Ok(Step::Write(Box::new(s), done))
    }

    /// Refuses a new range under which a held ticket would show another number (or two held
    /// tickets the same one).
    fn check_remap(&self, new: &QueueSpec) -> Result<(), Refusal> {
        let Some(oldest) = self.oldest_held() else {
            return Ok(());
        };
        let span = i128::from(self.taken) - i128::from(oldest) + 1;
        if span > i128::from(new.capacity()) {
            return Err(Refusal::Invalid {
                what: "max",
                reason: format!(
                    "the tickets held (waiting or shown) span {span} tickets and max {} holds only {}; call or cancel them first",
                    new.max,
                    new.capacity()
                ),
            });
        }
        let held = (oldest..=self.taken)
            .filter(|&s| self.is_waiting(s))
            .chain(self.desks.iter().map(|d| d.serial));
        for serial in held {
            let (before, after) = (
                self.spec.ticket(unsigned(serial)),
                new.ticket(unsigned(serial)),
            );
            if before != after {
                return Err(Refusal::Invalid {
                    what: "max",
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
            Refusal::Full { requested } => Error::QueueFull {
                name: name.to_owned(),
                waiting: unsigned(s.waiting()),
                shown: s
                    .desks
                    .iter()
                    .min_by_key(|d| d.serial)
                    .map(|d| s.spec.ticket(unsigned(d.serial))),
                requested,
                capacity: s.spec.capacity(),
            },
            Refusal::Nobody => Error::NobodyWaiting {
                name: name.to_owned(),
                called: unsigned(s.called()),
            },
            Refusal::NotWaiting { ticket, why } => Error::TicketNotWaiting {
                name: name.to_owned(),
                ticket,
                reason: why.to_owned(),
            },
            Refusal::NothingToRecall { desk } => Error::NothingToRecall {
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
            Refusal::Invalid { what, reason } => {
                Error::invalid_argument(format!("{what} for queue {name:?}"), reason)
            }
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
            Step::Write(s, d) => Ok((*s, d)),
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

    fn call(s: &mut State, desk: &str, ticket: Option<i64>) -> Result<i64, Refusal> {
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
                    match run(&s, Op::Cancel { ticket: t }, 0) {
                        Ok((next, _)) => {
                            s = next;
                            let i = waiting.iter().position(|&w| w == t).expect("was waiting");
                            waiting.remove(i);
                        }
                        Err(Refusal::NotWaiting { .. }) => assert!(!waiting.contains(&t)),
                        Err(e) => panic!("{e:?}"),
                    }
                }
                _ => match run(&s, Op::Recall { desk: desk.clone() }, 0) {
                    Ok((next, Done::Recalled { serial, .. })) => {
                        assert_eq!(shown.get(&desk), Some(&s.spec.ticket(serial as u64)));
                        s = next;
                    }
                    Err(Refusal::NothingToRecall { .. }) => assert!(!shown.contains_key(&desk)),
                    other => panic!("{other:?}"),
                },
            }
            assert_eq!(s.waiting() as usize, waiting.len());
            let listed: Vec<i64> = (s.served + 1..=s.taken)
                .filter(|&k| s.is_waiting(k))
                .map(|k| s.spec.ticket(k as u64))
                .collect();
            assert_eq!(listed, waiting);
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
        run(&s, Op::Cancel { ticket: 2 }, 0)
            .map(|(n, _)| s = n)
            .unwrap();
        assert_eq!(call(&mut s, "A", Some(4)).unwrap(), 4);
        assert!(matches!(
            call(&mut s, "A", Some(4)),
            Err(Refusal::NotWaiting {
                why: "it was called already",
                ..
            })
        ));
        assert!(matches!(
            run(&s, Op::Cancel { ticket: 2 }, 0),
            Err(Refusal::NotWaiting {
                why: "it was cancelled",
                ..
            })
        ));
        assert!(matches!(
            run(&s, Op::Cancel { ticket: 7 }, 0),
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

    #[test]
    fn a_request_id_answers_the_same_tickets_and_takes_nothing_more() {
        let s = fresh(9);
        let op = Op::Take {
            count: 2,
            key: Some("k1".into()),
        };
        let Ok(Step::Write(
            s,
            Done::Took {
                first: 1,
                count: 2,
                replayed: false,
                ..
            },
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
            key: Some("k1".into()),
        };
        assert!(matches!(s.apply(&other, 20), Err(Refusal::Invalid { .. })));
        // After the retention window, the id is a new take.
        assert!(matches!(
            s.apply(&op, 10 + KEY_RETENTION_MS),
            Ok(Step::Write(_, Done::Took { first: 3, .. }))
        ));
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
        // max 2 holds 3 tickets, but 3 would show 0.
        assert!(matches!(
            run(&s, Op::SetMax { max: 2 }, 0),
            Err(Refusal::Invalid { .. })
        ));
        take(&mut s, 7).unwrap(); // up to serial 10 = ticket 0
        call(&mut s, "A", None).unwrap();
        // Serial 10 shows 0 under max 9, 10 under max 10.
        assert!(matches!(
            run(&s, Op::SetMax { max: 10 }, 0),
            Err(Refusal::Invalid { .. })
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
        // 4 still waits from yesterday: refused.
        assert!(matches!(take_at(&mut s, day2), Err(Refusal::Full { .. })));
        assert_eq!(s.waiting(), 5);
        assert_eq!(s.taken_tickets(), 8);
        // Calls serve yesterday's first.
        assert_eq!(call(&mut s, "A", None).unwrap(), 4);
        assert_eq!(call(&mut s, "A", None).unwrap(), 5);
        assert_eq!(call(&mut s, "A", None).unwrap(), 1);
        assert_eq!(s.called(), 6);
    }
}
