//! The on-disk contract: one MongoDB document per queue, in the collection
//! `<collection>_queues` beside the sequences (for the default `dispensers`:
//! `dispensers_queues`).
//!
//! ```text
//! { _id: <name: string>, min: Int64, max: Int64, taken: Int64, served: Int64,
//!   waiting: Int64, version: Int64, incarnation: ObjectId, created_at: Date,
//!   updated_at: Date,
//!   // since issue 31 (absent in older documents: empty, no format, UTC, not daily)
//!   format: string | null, tz: string, daily: bool, cancelled: Int64, voided: Int64,
//!   out_of_line: BinData,  // packed (`pack_spans`) since issue 37; before, an array of
//!                          // {from: Int64, to: Int64, kind: "cancelled" | "called" | "void"}
//!   desks: [{desk: string, serial: Int64, at: Date}],
//!   calls: [{serial: Int64, desk: string, at: Date, recall: bool, wait_ms: Int64 | null}],
//!   takes: BinData,   // packed (`pack_takes`) since issue 37; before, an array of
//!                     // {first: Int64, count: Int64, at: Date}
//!   keys: BinData,    // the ring of request ids, packed (`pack_keys`), at most 64, since
//!                     // issue 37; before, an array of {key: string, first: Int64,
//!                     // count: Int64, at: Date, version: Int64, max: Int64}
//!   recent_cancels: BinData,  // the serials of the last 64 tickets cancelled, oldest first,
//!                             // packed (`pack_serials`), since issue 59 (absent: none)
//!   spilled: Int64,                                // since issue 37 (absent: 0)
//!   spill_filter: {since: Date, current: BinData, previous: BinData} | absent,
//!                     // which ids may have moved out: two Bloom filters of 8 192 bits
//!                     // (1 024 bytes each, bit `i` is bit `i % 8` of byte `i / 8`)
//!   hourly: [{hour: Date, taken: Int64, served: Int64, waiting: Int64}],
//!   day: string, taken_today: Int64, served_today: Int64 }
//! ```
//!
//! The request ids that leave the ring are in the collection `<collection>_queue_requests`
//! (see `store`), one document each, kept 24 hours.
//!
//! `taken` is the last serial handed out and `served` the cursor of the line (see `state`);
//! both only grow. `waiting` is the count of tickets waiting, stored for readers. Every write
//! replaces the document with the state an operation computed, filtered on `_id`, `version`,
//! `incarnation` and the counters as read: one compare-and-set. `incarnation` is set at insert
//! and never changes, so a write computed on one incarnation never matches a queue deleted and
//! created again under the same name. A desk's label is empty for calls made without one.
//!
//! Decoding is strict: a missing field, a wrong BSON type, `waiting` not what the counters
//! say, or a state no history of operations can produce ([`State::check`]: `served > taken`,
//! spans out of order, held tickets spanning more than the range holds, …) is
//! [`Error::CorruptDocument`] naming the queue and the field. Int32 is widened. Every state
//! is checked by the same rules before it is written, so no write produces a document this
//! decoder refuses.

use bson::{Bson, DateTime, Document, doc};

use super::spec::QueueSpec;
use super::state::{Call, Desk, FILTER_BITS, Hour, Key, Kind, Span, SpillFilter, State, TakeAt};
use crate::document::bson_type_name;
use crate::error::{Error, Result};
use crate::format::Format;

/// Field names of the queue document.
pub(crate) mod field {
    pub const ID: &str = "_id";
    pub const MIN: &str = "min";
    pub const MAX: &str = "max";
    pub const TAKEN: &str = "taken";
    pub const SERVED: &str = "served";
    pub const WAITING: &str = "waiting";
    pub const VERSION: &str = "version";
    pub const INCARNATION: &str = "incarnation";
    pub const CREATED_AT: &str = "created_at";
    pub const UPDATED_AT: &str = "updated_at";
    pub const FORMAT: &str = "format";
    pub const TZ: &str = "tz";
    pub const DAILY: &str = "daily";
    pub const CANCELLED: &str = "cancelled";
    pub const VOIDED: &str = "voided";
    pub const OUT_OF_LINE: &str = "out_of_line";
    pub const DESKS: &str = "desks";
    pub const CALLS: &str = "calls";
    pub const TAKES: &str = "takes";
    pub const RECENT_CANCELS: &str = "recent_cancels";
    pub const KEYS: &str = "keys";
    pub const SPILLED: &str = "spilled";
    pub const SPILL_FILTER: &str = "spill_filter";
    pub const HOURLY: &str = "hourly";
    pub const DAY: &str = "day";
    pub const TAKEN_TODAY: &str = "taken_today";
    pub const SERVED_TODAY: &str = "served_today";
}

fn date(ms: i64) -> Bson {
    Bson::DateTime(DateTime::from_millis(ms))
}

/// The document of a state (what every write stores, whole).
pub(crate) fn encode(name: &str, s: &State) -> Document {
    let spans = packed(pack_spans(&s.out_of_line));
    let bytes = |words: &[u64]| packed(words.iter().flat_map(|w| w.to_le_bytes()).collect());
    let filter = s.spill_filter.as_ref().map_or(Bson::Null, |f| {
        Bson::Document(doc! {
            "since": date(f.since), "current": bytes(&f.current), "previous": bytes(&f.previous),
        })
    });
    let desks: Vec<Bson> = s
        .desks
        .iter()
        .map(|d| Bson::Document(doc! { "desk": &d.desk, "serial": d.serial, "at": date(d.at) }))
        .collect();
    let calls: Vec<Bson> = s
        .calls
        .iter()
        .map(|c| {
            Bson::Document(doc! {
                "serial": c.serial, "desk": &c.desk, "at": date(c.at), "recall": c.recall,
                "wait_ms": c.wait_ms.map_or(Bson::Null, Bson::Int64),
            })
        })
        .collect();
    let takes = packed(pack_takes(&s.takes));
    let keys = packed(pack_keys(&s.keys));
    let recent_cancels = packed(pack_serials(&s.recent_cancels));
    let hourly: Vec<Bson> = s
        .hourly
        .iter()
        .map(|h| {
            Bson::Document(doc! {
                "hour": date(h.hour), "taken": h.taken, "served": h.served, "waiting": h.waiting,
            })
        })
        .collect();
    let mut d = doc! {
        field::ID: name,
        field::MIN: s.spec.min,
        field::MAX: s.spec.max,
        field::TAKEN: s.taken,
        field::SERVED: s.served,
        field::WAITING: s.waiting(),
        field::VERSION: s.version,
        field::INCARNATION: s.incarnation,
        field::CREATED_AT: date(s.created_at),
        field::UPDATED_AT: date(s.updated_at),
        field::FORMAT: s.spec.format.as_ref().map_or(Bson::Null, |f| Bson::String(f.as_str().to_owned())),
        field::TZ: &s.spec.time_zone,
        field::DAILY: s.spec.daily,
        field::CANCELLED: s.cancelled,
        field::VOIDED: s.voided,
        field::OUT_OF_LINE: spans,
        field::DESKS: desks,
        field::CALLS: calls,
        field::TAKES: takes,
        field::KEYS: keys,
        field::SPILLED: s.spilled,
        field::HOURLY: hourly,
        field::DAY: &s.day,
        field::TAKEN_TODAY: s.taken_today,
        field::SERVED_TODAY: s.served_today,
    };
    d.insert(field::SPILL_FILTER, filter);
    d.insert(field::RECENT_CANCELS, recent_cancels);
    d
}

/// Reads one document's fields, naming the queue in every error.
pub(super) struct Reader<'a> {
    pub(super) name: &'a str,
}

impl Reader<'_> {
    pub(super) fn corrupt(&self, field: &str, problem: impl Into<String>) -> Error {
        Error::corrupt_of("queue", self.name, field, problem)
    }

    pub(super) fn int(&self, d: &Document, key: &str, at: &str) -> Result<i64> {
        match d.get(key) {
            Some(Bson::Int64(v)) => Ok(*v),
            Some(Bson::Int32(v)) => Ok(i64::from(*v)),
            Some(other) => Err(self.corrupt(
                at,
                format!(
                    "has BSON type {} ({other}); expected a 64-bit integer (Int64, or Int32)",
                    bson_type_name(other)
                ),
            )),
            None => Err(self.corrupt(at, "is missing")),
        }
    }

    pub(super) fn opt_int(&self, d: &Document, key: &str, at: &str) -> Result<Option<i64>> {
        match d.get(key) {
            None | Some(Bson::Null) => Ok(None),
            Some(_) => self.int(d, key, at).map(Some),
        }
    }

    pub(super) fn date(&self, d: &Document, key: &str, at: &str) -> Result<i64> {
        match d.get(key) {
            Some(Bson::DateTime(t)) => Ok(t.timestamp_millis()),
            Some(_) => Err(self.corrupt(at, "is not a date")),
            None => Err(self.corrupt(at, "is missing")),
        }
    }

    pub(super) fn string(&self, d: &Document, key: &str, at: &str) -> Result<String> {
        match d.get(key) {
            Some(Bson::String(s)) => Ok(s.clone()),
            Some(_) => Err(self.corrupt(at, "is not a string")),
            None => Err(self.corrupt(at, "is missing")),
        }
    }

    pub(super) fn boolean(&self, d: &Document, key: &str, at: &str) -> Result<bool> {
        match d.get(key) {
            Some(Bson::Boolean(b)) => Ok(*b),
            Some(_) => Err(self.corrupt(at, "is not a bool")),
            None => Err(self.corrupt(at, "is missing")),
        }
    }

    /// The entries of an array of documents; an absent array (an older document) is empty.
    pub(super) fn list<T>(
        &self,
        d: &Document,
        key: &str,
        each: impl Fn(&Document, &str) -> Result<T>,
    ) -> Result<Vec<T>> {
        match d.get(key) {
            None => Ok(Vec::new()),
            Some(Bson::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let at = format!("{key}.{i}");
                    match item {
                        Bson::Document(e) => each(e, &at),
                        _ => Err(self.corrupt(&at, "is not a document")),
                    }
                })
                .collect(),
            Some(_) => Err(self.corrupt(key, "is not an array")),
        }
    }
}

/// The fields `status::decode_counters` reads: the counters, the range and format (for the
/// calls' labels) and the last calls — never the lists that grow with the history.
pub(crate) fn counters_projection() -> Document {
    doc! {
        field::MIN: 1, field::MAX: 1, field::FORMAT: 1, field::TAKEN: 1, field::WAITING: 1,
        field::CANCELLED: 1, field::VOIDED: 1, field::CALLS: 1,
    }
}

pub(super) fn read_call(r: &Reader<'_>, e: &Document, at: &str) -> Result<Call> {
    Ok(Call {
        serial: r.int(e, "serial", at)?,
        desk: r.string(e, "desk", at)?,
        at: r.date(e, "at", at)?,
        recall: r.boolean(e, "recall", at)?,
        wait_ms: r.opt_int(e, "wait_ms", at)?,
    })
}

/// The spec fields: range, format, time zone and daily (absent in older documents).
pub(super) fn read_spec(r: &Reader<'_>, d: &Document) -> Result<QueueSpec> {
    let name = r.name;
    let min = r.int(d, field::MIN, field::MIN)?;
    let max = r.int(d, field::MAX, field::MAX)?;
    let mut spec = QueueSpec::default().with_min(min).with_max(max);
    match d.get(field::FORMAT) {
        None | Some(Bson::Null) => {}
        Some(Bson::String(f)) => {
            spec.format =
                Some(Format::parse(f).map_err(|e| {
                    r.corrupt(field::FORMAT, format!("({f:?}) is not a format: {e}"))
                })?);
        }
        Some(_) => return Err(r.corrupt(field::FORMAT, "is not a string")),
    }
    if d.contains_key(field::TZ) {
        spec.time_zone = r.string(d, field::TZ, field::TZ)?;
    }
    if d.contains_key(field::DAILY) {
        spec.daily = r.boolean(d, field::DAILY, field::DAILY)?;
    }
    if let Err(e) = spec.validate(name) {
        let (at, why) = match &e {
            Error::InvalidArgument { what, .. } if what.starts_with("format") => {
                (field::FORMAT, e.to_string())
            }
            Error::InvalidArgument { what, .. } if what.starts_with("time zone") => {
                (field::TZ, e.to_string())
            }
            _ => (
                field::MIN,
                format!(
                    "({min}) and max ({max}) are not a ticket range (min must be below max, at most 2^63-1 tickets)"
                ),
            ),
        };
        return Err(r.corrupt(at, why));
    }
    Ok(spec)
}

/// Decodes and checks a queue document.
pub(crate) fn decode(name: &str, d: &Document) -> Result<State> {
    let r = Reader { name };
    let spec = read_spec(&r, d)?;
    let taken = r.int(d, field::TAKEN, field::TAKEN)?;
    let served = r.int(d, field::SERVED, field::SERVED)?;
    let waiting = r.int(d, field::WAITING, field::WAITING)?;
    let version = r.int(d, field::VERSION, field::VERSION)?;
    if served < 0 || served > taken {
        return Err(r.corrupt(
            field::SERVED,
            format!("({served}) is not between 0 and taken ({taken})"),
        ));
    }
    if version < 0 {
        return Err(r.corrupt(field::VERSION, format!("({version}) is negative")));
    }
    let incarnation = match d.get(field::INCARNATION) {
        Some(Bson::ObjectId(t)) => *t,
        Some(_) => return Err(r.corrupt(field::INCARNATION, "is not an objectId")),
        None => return Err(r.corrupt(field::INCARNATION, "is missing")),
    };
    let created_at = r.date(d, field::CREATED_AT, field::CREATED_AT)?;
    let updated_at = r.date(d, field::UPDATED_AT, field::UPDATED_AT)?;
    let zero = |key: &str| -> Result<i64> {
        if d.contains_key(key) {
            r.int(d, key, key)
        } else {
            Ok(0)
        }
    };
    let cancelled = zero(field::CANCELLED)?;
    let voided = zero(field::VOIDED)?;
    let spilled = zero(field::SPILLED)?;
    let spill_filter = match d.get(field::SPILL_FILTER) {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(f)) => {
            let words = |key: &str| -> Result<Vec<u64>> {
                match f.get(key) {
                    Some(Bson::Binary(b)) if b.bytes.len() == FILTER_BITS / 8 => Ok(b
                        .bytes
                        .chunks_exact(8)
                        .map(|c| {
                            let mut w = [0_u8; 8];
                            w.copy_from_slice(c);
                            u64::from_le_bytes(w)
                        })
                        .collect()),
                    _ => Err(r.corrupt(
                        field::SPILL_FILTER,
                        format!("has no {key} of {} bytes", FILTER_BITS / 8),
                    )),
                }
            };
            Some(SpillFilter {
                since: r.date(f, "since", field::SPILL_FILTER)?,
                current: words("current")?,
                previous: words("previous")?,
            })
        }
        Some(_) => return Err(r.corrupt(field::SPILL_FILTER, "is not a document")),
    };
    let taken_today = zero(field::TAKEN_TODAY)?;
    let served_today = zero(field::SERVED_TODAY)?;
    let day = if d.contains_key(field::DAY) {
        r.string(d, field::DAY, field::DAY)?
    } else {
        String::new()
    };
    let out_of_line = match d.get(field::OUT_OF_LINE) {
        Some(Bson::Binary(b)) => unpack_spans(&b.bytes).ok_or_else(|| {
            r.corrupt(
                field::OUT_OF_LINE,
                "is not a packed list of spans of tickets",
            )
        })?,
        // Written before issue 37: one document per span.
        _ => r.list(d, field::OUT_OF_LINE, |e, at| {
            let kind = r.string(e, "kind", at)?;
            Ok(Span {
                from: r.int(e, "from", at)?,
                to: r.int(e, "to", at)?,
                kind: Kind::parse(&kind).ok_or_else(|| {
                    r.corrupt(
                        at,
                        format!("has kind {kind:?}; expected cancelled, called or void"),
                    )
                })?,
            })
        })?,
    };
    let legacy = !d.contains_key(field::DESKS);
    let mut desks = r.list(d, field::DESKS, |e, at| {
        Ok(Desk {
            desk: r.string(e, "desk", at)?,
            serial: r.int(e, "serial", at)?,
            at: r.date(e, "at", at)?,
        })
    })?;
    if legacy && served > 0 {
        // A document written before desks: the last ticket called is shown.
        desks.push(Desk {
            desk: String::new(),
            serial: served,
            at: updated_at,
        });
    }
    let calls = r.list(d, field::CALLS, |e, at| read_call(&r, e, at))?;
    let takes = match d.get(field::TAKES) {
        Some(Bson::Binary(b)) => unpack_takes(&b.bytes)
            .ok_or_else(|| r.corrupt(field::TAKES, "is not a packed list of takes"))?,
        // Written before issue 37: one document per take.
        _ => r.list(d, field::TAKES, |e, at| {
            Ok(TakeAt {
                first: r.int(e, "first", at)?,
                count: r.int(e, "count", at)?,
                at: r.date(e, "at", at)?,
            })
        })?,
    };
    let recent_cancels = match d.get(field::RECENT_CANCELS) {
        None => Vec::new(),
        Some(Bson::Binary(b)) => unpack_serials(&b.bytes)
            .ok_or_else(|| r.corrupt(field::RECENT_CANCELS, "is not a packed list of serials"))?,
        Some(other) => {
            return Err(r.corrupt(
                field::RECENT_CANCELS,
                format!("is a {}, not binary data", bson_type_name(other)),
            ));
        }
    };
    let keys = match d.get(field::KEYS) {
        Some(Bson::Binary(b)) => unpack_keys(&b.bytes)
            .ok_or_else(|| r.corrupt(field::KEYS, "is not a packed list of request ids"))?,
        // Written before issue 37: one document per request id.
        _ => r.list(d, field::KEYS, |e, at| {
            Ok(Key {
                caller: if e.contains_key("caller") {
                    r.string(e, "caller", at)?
                } else {
                    String::new()
                },
                key: r.string(e, "key", at)?,
                first: r.int(e, "first", at)?,
                count: r.int(e, "count", at)?,
                at: r.date(e, "at", at)?,
                version: r.int(e, "version", at)?,
                max: r.int(e, "max", at)?,
            })
        })?,
    };
    let hourly = r.list(d, field::HOURLY, |e, at| {
        Ok(Hour {
            hour: r.date(e, "hour", at)?,
            taken: r.int(e, "taken", at)?,
            served: r.int(e, "served", at)?,
            waiting: r.int(e, "waiting", at)?,
        })
    })?;
    let s = State {
        spec,
        taken,
        served,
        out_of_line,
        cancelled,
        voided,
        desks,
        calls,
        takes,
        recent_cancels,
        keys,
        spilled,
        spill_filter,
        hourly,
        day,
        taken_today,
        served_today,
        version,
        incarnation,
        created_at,
        updated_at,
    };
    check(&r, &s, waiting)?;
    Ok(s)
}

/// Every rule of [`State::check`], then the stored `waiting` against the counters.
fn check(r: &Reader<'_>, s: &State, waiting: i64) -> Result<()> {
    // The rules first: they bound the spans, so the counters below cannot overflow.
    s.check().map_err(|v| r.corrupt(&v.field, v.problem))?;
    if waiting != s.waiting() {
        return Err(r.corrupt(
            field::WAITING,
            format!(
                "({waiting}) is not the tickets waiting by the counters (taken {} - served {} - {} out of line = {})",
                s.taken,
                s.served,
                s.taken - s.served - s.waiting(),
                s.waiting()
            ),
        ));
    }
    Ok(())
}

/// Bytes as a BSON binary (generic subtype).
fn packed(bytes: Vec<u8>) -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes,
    })
}

/// LEB128: 7 bits a byte, low first.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A signed number as an unsigned one, small for small magnitudes (zigzag).
fn put_signed(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Reads packed numbers; `None` at the end of the bytes or on a malformed number.
struct Unpack<'a> {
    bytes: &'a [u8],
}

impl Unpack<'_> {
    fn varint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.bytes.split_first()?;
            self.bytes = rest;
            v |= u64::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn signed(&mut self) -> Option<i64> {
        let u = self.varint()?;
        Some(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    fn text(&mut self) -> Option<String> {
        let len = usize::try_from(self.varint()?).ok()?;
        if len > self.bytes.len() {
            return None;
        }
        let (text, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        String::from_utf8(text.to_vec()).ok()
    }
}

/// The takes' times, packed: for each, the distance of `first` from where the previous take
/// ended, `count`, and the time since the previous take (ms) — a few bytes each, one BSON
/// value for the whole list (a document per take made a long queue's every write heavy).
pub(crate) fn pack_takes(takes: &[TakeAt]) -> Vec<u8> {
    let mut out = Vec::with_capacity(takes.len() * 5);
    let (mut next, mut at) = (0_i64, 0_i64);
    for t in takes {
        put_signed(&mut out, t.first.wrapping_sub(next));
        put_signed(&mut out, t.count);
        put_signed(&mut out, t.at.wrapping_sub(at));
        next = t.first.wrapping_add(t.count);
        at = t.at;
    }
    out
}

/// The list [`pack_takes`] packed; `None` when the bytes are not one.
pub(crate) fn unpack_takes(bytes: &[u8]) -> Option<Vec<TakeAt>> {
    let mut u = Unpack { bytes };
    let (mut next, mut at) = (0_i64, 0_i64);
    let mut out = Vec::new();
    while !u.bytes.is_empty() {
        let first = next.wrapping_add(u.signed()?);
        let count = u.signed()?;
        at = at.wrapping_add(u.signed()?);
        out.push(TakeAt { first, count, at });
        next = first.wrapping_add(count);
    }
    Some(out)
}

/// The spans of tickets done out of line, packed: for each, the distance of `from` from the
/// previous span's `to` (from 0 for the first), `to - from`, and the kind (0 cancelled, 1
/// called, 2 void).
pub(crate) fn pack_spans(spans: &[Span]) -> Vec<u8> {
    let mut out = Vec::with_capacity(spans.len() * 4);
    let mut after = 0_i64;
    for x in spans {
        put_signed(&mut out, x.from.wrapping_sub(after));
        put_signed(&mut out, x.to.wrapping_sub(x.from));
        out.push(match x.kind {
            Kind::Cancelled => 0,
            Kind::Called => 1,
            Kind::Void => 2,
        });
        after = x.to;
    }
    out
}

/// The list [`pack_spans`] packed; `None` when the bytes are not one.
pub(crate) fn unpack_spans(bytes: &[u8]) -> Option<Vec<Span>> {
    let mut u = Unpack { bytes };
    let mut out = Vec::new();
    let mut after = 0_i64;
    while !u.bytes.is_empty() {
        let from = after.wrapping_add(u.signed()?);
        let to = from.wrapping_add(u.signed()?);
        let (&kind, rest) = u.bytes.split_first()?;
        u.bytes = rest;
        let kind = match kind {
            0 => Kind::Cancelled,
            1 => Kind::Called,
            2 => Kind::Void,
            _ => return None,
        };
        out.push(Span { from, to, kind });
        after = to;
    }
    Some(out)
}

/// Serials, packed: each as its distance from the one before (from 0 for the first).
pub(crate) fn pack_serials(serials: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(serials.len() * 2);
    let mut before = 0_i64;
    for &v in serials {
        put_signed(&mut out, v.wrapping_sub(before));
        before = v;
    }
    out
}

/// The list [`pack_serials`] packed; `None` when the bytes are not one.
pub(crate) fn unpack_serials(bytes: &[u8]) -> Option<Vec<i64>> {
    let mut u = Unpack { bytes };
    let mut out = Vec::new();
    let mut before = 0_i64;
    while !u.bytes.is_empty() {
        before = before.wrapping_add(u.signed()?);
        out.push(before);
    }
    Some(out)
}

/// The ring of request ids, packed: for each, the caller and the id (length first), `first`,
/// `count`, the time, the version and the highest ticket of then.
pub(crate) fn pack_keys(keys: &[Key]) -> Vec<u8> {
    let mut out = Vec::with_capacity(keys.len() * 48);
    for k in keys {
        for text in [&k.caller, &k.key] {
            put_varint(&mut out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
        for v in [k.first, k.count, k.at, k.version, k.max] {
            put_signed(&mut out, v);
        }
    }
    out
}

/// The ring [`pack_keys`] packed; `None` when the bytes are not one.
pub(crate) fn unpack_keys(bytes: &[u8]) -> Option<Vec<Key>> {
    let mut u = Unpack { bytes };
    let mut out = Vec::new();
    while !u.bytes.is_empty() {
        out.push(Key {
            caller: u.text()?,
            key: u.text()?,
            first: u.signed()?,
            count: u.signed()?,
            at: u.signed()?,
            version: u.signed()?,
            max: u.signed()?,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::status::decode_status;

    fn good() -> Document {
        let s = State::new(
            QueueSpec::default().with_max(9),
            bson::oid::ObjectId::new(),
            0,
        );
        let mut d = encode("q", &s);
        d.insert(field::TAKEN, 25_i64);
        d.insert(field::SERVED, 18_i64);
        d.insert(field::WAITING, 7_i64);
        d.insert(
            field::DESKS,
            vec![Bson::Document(
                doc! { "desk": "1", "serial": 18_i64, "at": DateTime::from_millis(0) },
            )],
        );
        d
    }

    #[test]
    fn a_document_decodes_and_round_trips() {
        let s = decode_status(&good()).unwrap();
        assert_eq!((s.taken, s.served, s.waiting, s.capacity), (25, 18, 7, 10));
        assert_eq!(s.now_serving, Some(8));
        assert_eq!(s.next_ticket, Some(6));
        let mut d = good();
        d.insert(field::TAKEN, Bson::Int32(25));
        assert!(decode_status(&d).is_ok(), "Int32 is widened");
        let state = decode("q", &good()).unwrap();
        assert_eq!(decode("q", &encode("q", &state)).unwrap(), state);
        // A document written before desks: the last called is shown.
        let mut old = good();
        for key in [
            field::DESKS,
            field::CALLS,
            field::FORMAT,
            field::TZ,
            field::DAY,
        ] {
            old.remove(key);
        }
        let s = decode("q", &old).unwrap();
        assert_eq!(s.desks.len(), 1);
        assert_eq!(s.desks[0].serial, 18);
    }

    /// A document written before issue 37 keeps its spans of tickets done out of line as
    /// an array of `{from, to, kind}`: each kind reads back (and writes packed, the same
    /// spans); an unknown kind is a corrupt document naming it (found by cargo-mutants: a
    /// kind's arm deleted went unnoticed).
    #[test]
    fn spans_written_before_packing_read_back_with_every_kind() {
        let mut old = good();
        let spans = [(20, "cancelled"), (21, "called"), (23, "void")];
        old.insert(
            field::OUT_OF_LINE,
            spans
                .iter()
                .map(|&(n, kind)| {
                    Bson::Document(doc! { "from": n as i64, "to": n as i64, "kind": kind })
                })
                .collect::<Vec<_>>(),
        );
        old.insert(field::WAITING, 4_i64);
        let s = decode("q", &old).unwrap();
        let kinds: Vec<_> = s.out_of_line.iter().map(|x| (x.from, x.kind)).collect();
        assert_eq!(
            kinds,
            [(20, Kind::Cancelled), (21, Kind::Called), (23, Kind::Void)]
        );
        assert_eq!(decode("q", &encode("q", &s)).unwrap(), s);
        let mut bad = old.clone();
        bad.insert(
            field::OUT_OF_LINE,
            vec![Bson::Document(
                doc! { "from": 20_i64, "to": 20_i64, "kind": "lost" },
            )],
        );
        let e = decode("q", &bad).unwrap_err().to_string();
        assert!(e.contains("\"lost\""), "{e}");
    }

    #[test]
    fn takes_and_request_ids_pack_and_unpack_exactly() {
        let takes = vec![
            TakeAt {
                first: 1,
                count: 3,
                at: 1_700_000_000_000,
            },
            TakeAt {
                first: 4,
                count: 1,
                at: 1_700_000_000_017,
            },
            TakeAt {
                first: 90,
                count: 2,
                at: 1_699_999_999_000,
            },
            TakeAt {
                first: i64::MAX - 1,
                count: 2,
                at: i64::MIN,
            },
        ];
        assert_eq!(unpack_takes(&pack_takes(&takes)), Some(takes.clone()));
        // Consecutive takes a second apart: a handful of bytes each.
        let many: Vec<TakeAt> = (0..1000)
            .map(|i| TakeAt {
                first: 1 + i,
                count: 1,
                at: 1_700_000_000_000 + i * 1000,
            })
            .collect();
        assert!(
            pack_takes(&many).len() < 6 * 1000,
            "{}",
            pack_takes(&many).len()
        );
        let keys = vec![Key {
            caller: "kiosk-7".into(),
            key: "0001/é".into(),
            first: 5,
            count: 2,
            at: -3,
            version: 42,
            max: i64::MAX,
        }];
        assert_eq!(unpack_keys(&pack_keys(&keys)), Some(keys.clone()));
        // Truncated or overlong bytes are no list.
        let bytes = pack_keys(&keys);
        assert_eq!(unpack_keys(&bytes[..bytes.len() - 1]), None);
        assert_eq!(unpack_takes(&[0x80; 11]), None);
        assert_eq!(unpack_takes(&[]), Some(vec![]));
        let spans = vec![
            Span {
                from: 3,
                to: 3,
                kind: Kind::Cancelled,
            },
            Span {
                from: 5,
                to: 9,
                kind: Kind::Called,
            },
            Span {
                from: 10,
                to: i64::MAX,
                kind: Kind::Void,
            },
        ];
        assert_eq!(unpack_spans(&pack_spans(&spans)), Some(spans));
        assert_eq!(unpack_spans(&[0, 0, 7]), None, "an unknown kind");
        // A document with packed lists round-trips; one with garbage is corrupt.
        let mut s = decode("q", &good()).unwrap();
        s.takes = takes[..2].to_vec();
        s.keys = vec![Key {
            key: "0001".into(),
            ..keys[0].clone()
        }];
        s.taken = 25;
        let mut filter = SpillFilter::new(1_700_000_000_000, false);
        filter.note(&s.keys, 1_700_000_000_000);
        s.spill_filter = Some(filter);
        s.spilled = 1;
        s.recent_cancels = vec![25, 3, 7];
        let d = encode("q", &s);
        assert_eq!(decode("q", &d).unwrap(), s);
        // Recent cancels (issue 59): packed, read back; absent in older documents; a serial
        // never taken, or bytes that are no list, are corrupt.
        assert_eq!(
            unpack_serials(&pack_serials(&[1, i64::MAX, 2])),
            Some(vec![1, i64::MAX, 2])
        );
        let mut older = d.clone();
        older.remove(field::RECENT_CANCELS);
        assert!(decode("q", &older).unwrap().recent_cancels.is_empty());
        for (bytes, needle) in [
            (pack_serials(&[26]), "records serial 26 as cancelled"),
            (vec![0x80], "packed list of serials"),
        ] {
            let mut bad = d.clone();
            bad.insert(field::RECENT_CANCELS, packed(bytes));
            let e = decode("q", &bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        let mut short = d.clone();
        short.insert(
            field::SPILL_FILTER,
            doc! { "since": DateTime::from_millis(0), "current": packed(vec![0; 8]), "previous": packed(vec![0; 8]) },
        );
        assert!(
            decode("q", &short)
                .unwrap_err()
                .to_string()
                .contains("spill_filter")
        );
        let mut bad = d.clone();
        bad.insert(field::TAKES, packed(vec![0xff]));
        assert!(
            decode("q", &bad)
                .unwrap_err()
                .to_string()
                .contains("packed list of takes")
        );
    }

    #[test]
    fn impossible_documents_are_corrupt_and_name_the_queue_and_the_field() {
        for (key, bad, needle) in [
            (field::SERVED, Bson::Int64(26), "not between 0 and taken"),
            (field::SERVED, Bson::Int64(-1), "not between 0 and taken"),
            (field::WAITING, Bson::Int64(6), "is not the tickets waiting"),
            (field::MIN, Bson::Int64(9), "not a ticket range"),
            (field::VERSION, Bson::Int64(-1), "negative"),
            (
                field::TAKEN,
                Bson::Double(25.0),
                "expected a 64-bit integer",
            ),
            (field::INCARNATION, Bson::String("x".into()), "objectId"),
            (field::UPDATED_AT, Bson::Null, "not a date"),
            (field::FORMAT, Bson::String("A-{x}".into()), "not a format"),
            (field::TZ, Bson::String("Mars/Base".into()), "time zone"),
            (field::CALLS, Bson::Int64(1), "not an array"),
        ] {
            let mut d = good();
            d.insert(key, bad);
            let e = decode_status(&d).unwrap_err();
            assert!(
                matches!(&e, Error::CorruptDocument { field, what, .. } if field == key && what == "queue"),
                "{key}: {e}"
            );
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
            assert!(
                e.to_string().contains("corrupt document for queue \"q\""),
                "{e}"
            );
        }
        // More held than the range holds.
        let mut d = good();
        d.insert(field::TAKEN, 40_i64);
        d.insert(field::SERVED, 29_i64);
        d.insert(field::WAITING, 11_i64);
        d.insert(field::DESKS, Bson::Array(vec![]));
        assert!(
            decode_status(&d)
                .unwrap_err()
                .to_string()
                .contains("more than the range")
        );
        // A desk showing a waiting ticket.
        let mut d = good();
        d.insert(
            field::DESKS,
            vec![Bson::Document(
                doc! { "desk": "1", "serial": 20_i64, "at": DateTime::from_millis(0) },
            )],
        );
        assert!(
            decode_status(&d)
                .unwrap_err()
                .to_string()
                .contains("not called")
        );
        // Spans out of order.
        let mut d = good();
        d.insert(
            field::OUT_OF_LINE,
            vec![Bson::Document(
                doc! { "from": 19_i64, "to": 19_i64, "kind": "cancelled" },
            )],
        );
        d.insert(field::WAITING, 6_i64);
        assert!(decode_status(&d).unwrap_err().to_string().contains("span"));
        for key in [field::TAKEN, field::INCARNATION, field::CREATED_AT] {
            let mut d = good();
            d.remove(key);
            assert!(
                decode_status(&d)
                    .unwrap_err()
                    .to_string()
                    .contains("is missing")
            );
        }
    }
}
