//! The on-disk contract: one MongoDB document per sequence.
//!
//! ```text
//! { _id: <name: string>, value: Int64, step: Int64, min: Int64, max: Int64, cycle: bool,
//!   version: Int64, cycles: Int64, created_at: Date, updated_at: Date, format?: string,
//!   incarnation?: ObjectId, start?: Int64, stripe_index?: Int64, stripe_count?: Int64 }
//! ```
//!
//! `incarnation` is written once, when the document is inserted, and never changes: every
//! conditional write carries it in its filter, so a write computed from one incarnation of a
//! sequence can never match a document deleted and created again under the same name.
//! Documents written before it existed have none; they keep working (their filters say
//! "no incarnation" plus the shape and value) and receive one on their next compare-and-set.
//! `start` records the first number at creation (`ensure` compares it), `stripe_index` /
//! `stripe_count` which stripe of a striped sequence the document is.
//!
//! Other languages read and write these documents, so decoding is strict: a missing field, a
//! field of the wrong BSON type, or a value no valid history can produce is
//! [`Error::CorruptDocument`], never a guess. Integers are accepted as Int64 or Int32 (Int32 is
//! widened; the next write stores Int64). Doubles, strings and everything else are rejected:
//! a double cannot hold every 64-bit integer, and a counter that silently rounds can repeat.

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, doc};
use jiff::civil::Date;

use crate::arith;
use crate::error::{Error, Result};
use crate::format::Format;
use crate::spec::Spec;

/// Field names of the sequence document.
pub(crate) mod field {
    pub const ID: &str = "_id";
    pub const VALUE: &str = "value";
    pub const STEP: &str = "step";
    pub const MIN: &str = "min";
    pub const MAX: &str = "max";
    pub const CYCLE: &str = "cycle";
    pub const VERSION: &str = "version";
    pub const CYCLES: &str = "cycles";
    pub const CREATED_AT: &str = "created_at";
    pub const UPDATED_AT: &str = "updated_at";
    pub const FORMAT: &str = "format";
    pub const INCARNATION: &str = "incarnation";
    pub const START: &str = "start";
    pub const STRIPE_INDEX: &str = "stripe_index";
    pub const STRIPE_COUNT: &str = "stripe_count";
    /// The per-day counters of issued numbers (`{"2026-11-25": 1234, …}`).
    pub const ISSUED: &str = "issued";
}

/// Which stripe of a striped sequence a document is: stripe `index` of `count`.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let state = d.peek("ids~1").await?;
/// if let Some(stripe) = state.stripe {
///     println!("stripe {} of {}", stripe.index, stripe.count);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct StripeId {
    /// Which stripe, `0 ≤ index < count`.
    pub index: u32,
    /// How many stripes the striped sequence has.
    pub count: u32,
}

impl StripeId {
    pub(crate) fn new(index: u32, count: u32) -> Self {
        StripeId { index, count }
    }
}

/// What a document records about how it was created: its first number and, for a stripe,
/// which one it is. Absent in documents written by earlier versions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    pub start: Option<i64>,
    pub stripe: Option<StripeId>,
}

/// What the strategies need of a stored sequence: its shape and where it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    /// step, min, max and cycle as stored (`start` is meaningless after creation and is set
    /// to the next number).
    pub spec: Spec,
    /// The last number issued.
    pub value: i64,
    /// Goes up by one on every write.
    pub version: i64,
    /// How many times the sequence wrapped.
    pub cycles: i64,
    /// Set once at insert; `None` in documents written by earlier versions.
    pub incarnation: Option<ObjectId>,
    /// The recorded start and stripe.
    pub origin: Origin,
}

/// Where a document stood after a write: its version and its incarnation. A write that
/// must only apply to that exact state (a compare-and-set, a give-back) filters on both,
/// so it cannot match the document of another incarnation that reached the same version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub version: i64,
    pub incarnation: Option<ObjectId>,
}

impl Stored {
    /// The version and incarnation of this state.
    pub(crate) fn stamp(&self) -> Stamp {
        Stamp {
            version: self.version,
            incarnation: self.incarnation,
        }
    }
}

/// The per-day counters of a document, oldest first; entries that are not `date: integer`
/// are ignored (they carry no rate).
pub(crate) fn decode_issued(doc: &Document) -> Vec<(Date, i64)> {
    let Ok(days) = doc.get_document(field::ISSUED) else {
        return Vec::new();
    };
    let mut out: Vec<(Date, i64)> = days
        .iter()
        .filter_map(|(k, v)| {
            let n = match v {
                Bson::Int64(n) => *n,
                Bson::Int32(n) => i64::from(*n),
                _ => return None,
            };
            Some((k.parse::<Date>().ok()?, n))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The projection that reads a [`Stored`]: only what the strategies need.
pub(crate) fn stored_projection() -> Document {
    doc! {
        field::VALUE: 1, field::STEP: 1, field::MIN: 1, field::MAX: 1,
        field::CYCLE: 1, field::VERSION: 1, field::CYCLES: 1, field::INCARNATION: 1,
        field::START: 1, field::STRIPE_INDEX: 1, field::STRIPE_COUNT: 1, field::ID: 0,
    }
}

/// The projection that reads a whole [`SequenceState`].
pub(crate) fn state_projection() -> Document {
    doc! {
        field::ID: 1, field::VALUE: 1, field::STEP: 1, field::MIN: 1, field::MAX: 1,
        field::CYCLE: 1, field::VERSION: 1, field::CYCLES: 1,
        field::CREATED_AT: 1, field::UPDATED_AT: 1, field::FORMAT: 1,
        field::INCARNATION: 1, field::START: 1, field::STRIPE_INDEX: 1, field::STRIPE_COUNT: 1,
        field::ISSUED: 1,
    }
}

/// The document of a new sequence: `value = start - step`, so the first number is `start`.
pub(crate) fn new_document(
    name: &str,
    spec: &Spec,
    stripe: Option<StripeId>,
    incarnation: ObjectId,
    now: DateTime,
) -> Document {
    // `Spec::validate` guarantees `start - step` fits.
    let value = spec.start.saturating_sub(spec.step);
    let mut d = doc! {
        field::ID: name,
        field::VALUE: value,
        field::STEP: spec.step,
        field::MIN: spec.min,
        field::MAX: spec.max,
        field::CYCLE: spec.cycle,
        field::VERSION: 0_i64,
        field::CYCLES: 0_i64,
        field::CREATED_AT: now,
        field::UPDATED_AT: now,
        field::INCARNATION: incarnation,
        field::START: spec.start,
    };
    if let Some(st) = stripe {
        d.insert(field::STRIPE_INDEX, i64::from(st.index));
        d.insert(field::STRIPE_COUNT, i64::from(st.count));
    }
    d
}

pub(crate) fn bson_type_name(b: &Bson) -> &'static str {
    match b {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Array(_) => "array",
        Bson::Document(_) => "document",
        Bson::Boolean(_) => "bool",
        Bson::Null => "null",
        Bson::Int32(_) => "int",
        Bson::Int64(_) => "long",
        Bson::DateTime(_) => "date",
        Bson::Decimal128(_) => "decimal",
        Bson::ObjectId(_) => "objectId",
        _ => "another BSON type",
    }
}

fn get<'a>(name: &str, doc: &'a Document, key: &str) -> Result<&'a Bson> {
    doc.get(key)
        .ok_or_else(|| Error::corrupt(name, key, "is missing"))
}

pub(crate) fn get_i64(name: &str, doc: &Document, key: &str) -> Result<i64> {
    match get(name, doc, key)? {
        Bson::Int64(v) => Ok(*v),
        Bson::Int32(v) => Ok(i64::from(*v)),
        other => Err(Error::corrupt(
            name,
            key,
            format!(
                "has BSON type {} ({other}); expected a 64-bit integer (Int64, or Int32)",
                bson_type_name(other)
            ),
        )),
    }
}

fn get_bool(name: &str, doc: &Document, key: &str) -> Result<bool> {
    match get(name, doc, key)? {
        Bson::Boolean(v) => Ok(*v),
        other => Err(Error::corrupt(
            name,
            key,
            format!(
                "has BSON type {} ({other}); expected a bool",
                bson_type_name(other)
            ),
        )),
    }
}

fn get_date(name: &str, doc: &Document, key: &str) -> Result<DateTime> {
    match get(name, doc, key)? {
        Bson::DateTime(v) => Ok(*v),
        other => Err(Error::corrupt(
            name,
            key,
            format!(
                "has BSON type {} ({other}); expected a date",
                bson_type_name(other)
            ),
        )),
    }
}

fn get_opt_i64(name: &str, doc: &Document, key: &str) -> Result<Option<i64>> {
    match doc.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(_) => get_i64(name, doc, key).map(Some),
    }
}

fn get_incarnation(name: &str, doc: &Document) -> Result<Option<ObjectId>> {
    match doc.get(field::INCARNATION) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::ObjectId(t)) => Ok(Some(*t)),
        Some(other) => Err(Error::corrupt(
            name,
            field::INCARNATION,
            format!(
                "has BSON type {}; expected an objectId",
                bson_type_name(other)
            ),
        )),
    }
}

/// The optional `start`, `stripe_index` and `stripe_count` fields.
fn get_origin(name: &str, doc: &Document) -> Result<Origin> {
    let start = get_opt_i64(name, doc, field::START)?;
    let index = get_opt_i64(name, doc, field::STRIPE_INDEX)?;
    let count = get_opt_i64(name, doc, field::STRIPE_COUNT)?;
    let stripe = match (index, count) {
        (None, None) => None,
        (Some(i), Some(c)) => {
            let ok = |v: i64| u32::try_from(v).ok();
            match (ok(i), ok(c)) {
                (Some(index), Some(count)) if index < count => Some(StripeId { index, count }),
                _ => {
                    return Err(Error::corrupt(
                        name,
                        field::STRIPE_INDEX,
                        format!("({i}) is not a stripe of {c}"),
                    ));
                }
            }
        }
        (Some(_), None) => return Err(Error::corrupt(name, field::STRIPE_COUNT, "is missing")),
        (None, Some(_)) => return Err(Error::corrupt(name, field::STRIPE_INDEX, "is missing")),
    };
    // `start` is history: after an `alter` it may lie outside the bounds.
    Ok(Origin { start, stripe })
}

/// The optional `format` field: absent or a string that parses as a [`Format`].
pub(crate) fn get_format(name: &str, doc: &Document) -> Result<Option<Format>> {
    match doc.get(field::FORMAT) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(s)) => Format::parse(s)
            .map(Some)
            .map_err(|e| Error::corrupt(name, field::FORMAT, format!("does not parse: {e}"))),
        Some(other) => Err(Error::corrupt(
            name,
            field::FORMAT,
            format!("has BSON type {}; expected a string", bson_type_name(other)),
        )),
    }
}

/// Decodes and checks the fields the strategies need.
pub(crate) fn decode_stored(name: &str, doc: &Document) -> Result<Stored> {
    let step = get_i64(name, doc, field::STEP)?;
    let min = get_i64(name, doc, field::MIN)?;
    let max = get_i64(name, doc, field::MAX)?;
    let cycle = get_bool(name, doc, field::CYCLE)?;
    let value = get_i64(name, doc, field::VALUE)?;
    let version = get_i64(name, doc, field::VERSION)?;
    let cycles = get_i64(name, doc, field::CYCLES)?;
    if step == 0 {
        return Err(Error::corrupt(name, field::STEP, "is 0"));
    }
    if min >= max {
        return Err(Error::corrupt(
            name,
            field::MIN,
            format!("({min}) is not below max ({max})"),
        ));
    }
    let spec = Spec::default()
        .with_step(step)
        .with_min(min)
        .with_max(max)
        .with_cycle(cycle);
    if !arith::value_is_plausible(&spec, value) {
        return Err(Error::corrupt(
            name,
            field::VALUE,
            format!(
                "({value}) lies before what bounds {min}..={max} with step {step} allow (at most one step before the first number)"
            ),
        ));
    }
    if version < 0 {
        return Err(Error::corrupt(
            name,
            field::VERSION,
            format!("({version}) is negative"),
        ));
    }
    if cycles < 0 {
        return Err(Error::corrupt(
            name,
            field::CYCLES,
            format!("({cycles}) is negative"),
        ));
    }
    let origin = get_origin(name, doc)?;
    let incarnation = get_incarnation(name, doc)?;
    // The next number, clamped into the bounds; only informative.
    let start = value.saturating_add(step).clamp(min, max);
    Ok(Stored {
        spec: spec.with_start(start),
        value,
        version,
        cycles,
        incarnation,
        origin,
    })
}

/// The stored state of a sequence, as `peek` and `list` show it.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let state = d.peek("orders").await?;
/// println!("{} issued up to {}, {} left", state.name, state.value, state.remaining());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SequenceState {
    /// The sequence's name (`_id`).
    pub name: String,
    /// The last number issued (`start - step` when nothing was issued yet).
    pub value: i64,
    /// The step.
    pub step: i64,
    /// The lower bound.
    pub min: i64,
    /// The upper bound.
    pub max: i64,
    /// Whether the sequence wraps at its bound.
    pub cycle: bool,
    /// Goes up by one on every write.
    pub version: i64,
    /// How many times the sequence wrapped.
    pub cycles: i64,
    /// When the sequence was created.
    pub created_at: DateTime,
    /// When it was last written.
    pub updated_at: DateTime,
    /// The serial format shown for its numbers, if one was set (the optional `format` field).
    pub format: Option<Format>,
    /// The first number, as recorded at creation (`None` for documents written by earlier
    /// versions).
    pub start: Option<i64>,
    /// Which stripe of a striped sequence this document is, if it is one.
    pub stripe: Option<StripeId>,
    /// The document's incarnation: set once when it was inserted, so a sequence deleted and
    /// created again is a different incarnation (`None` for documents written by earlier
    /// versions that have not been written since).
    pub incarnation: Option<ObjectId>,
    /// Numbers issued per day (UTC), oldest first, over the last
    /// [`KEPT_DAYS`](crate::sequence::KEPT_DAYS) days: the observed rate (see
    /// [`SequenceState::usage`]). Empty for documents no counting client wrote.
    pub issued_by_day: Vec<(jiff::civil::Date, i64)>,
}

impl SequenceState {
    /// The state as the strategies read it (what a decision about a write is made from).
    pub(crate) fn stored(&self) -> Stored {
        Stored {
            spec: self.spec(),
            value: self.value,
            version: self.version,
            cycles: self.cycles,
            incarnation: self.incarnation,
            origin: Origin {
                start: self.start,
                stripe: self.stripe,
            },
        }
    }

    /// The shape (step, bounds, cycle) as a [`Spec`] whose start is the next number.
    pub(crate) fn spec(&self) -> Spec {
        Spec::default()
            .with_step(self.step)
            .with_min(self.min)
            .with_max(self.max)
            .with_cycle(self.cycle)
    }

    /// The number the next call would issue, or `None` when the sequence is exhausted.
    pub fn next_number(&self) -> Option<i64> {
        arith::draw(&self.spec(), self.value, 1)
            .ok()
            .map(|d| d.run.first())
    }

    /// How many numbers are left before the sequence wraps (with `cycle`) or is exhausted.
    pub fn remaining(&self) -> u64 {
        arith::remaining(&self.spec(), self.value)
    }

    /// The state as JSON, as `peek --json`, `list --json` and the HTTP service show it:
    /// the stored fields plus `next` and `remaining`, dates in RFC 3339.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// println!("{}", d.peek("orders").await?.to_json());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        let usage = self.usage(jiff::Timestamp::now());
        serde_json::json!({
            "name": self.name,
            "value": self.value,
            "next": self.next_number(),
            "remaining": self.remaining(),
            "step": self.step,
            "min": self.min,
            "max": self.max,
            "cycle": self.cycle,
            "cycles": self.cycles,
            "version": self.version,
            "created_at": self.created_at.try_to_rfc3339_string().ok(),
            "updated_at": self.updated_at.try_to_rfc3339_string().ok(),
            "format": self.format.as_ref().map(Format::as_str),
            "start": self.start,
            "stripe": self.stripe.map(|s| serde_json::json!({"index": s.index, "count": s.count})),
            "incarnation": self.incarnation.map(|t| t.to_hex()),
            "usage": {
                "fraction_used": usage.fraction_used,
                "remaining": usage.remaining,
                "rate_per_sec": usage.rate_per_sec,
                "exhausted_in_secs": usage.exhausted_in.map(|d| d.as_secs()),
                "wraps_per_day": usage.wraps_per_day,
                "history_secs": usage.history.map(|d| d.as_secs()),
                "issued_by_day": self
                    .issued_by_day
                    .iter()
                    .map(|(d, n)| (d.to_string(), serde_json::json!(n)))
                    .collect::<serde_json::Map<_, _>>(),
            },
        })
    }
}

/// Decodes a whole document (with `_id` and dates).
pub(crate) fn decode_state(doc: &Document) -> Result<SequenceState> {
    let name = match doc.get(field::ID) {
        Some(Bson::String(s)) => s.clone(),
        Some(other) => {
            return Err(Error::corrupt(
                &other.to_string(),
                field::ID,
                format!("has BSON type {}; expected a string", bson_type_name(other)),
            ));
        }
        None => return Err(Error::corrupt("?", field::ID, "is missing")),
    };
    let stored = decode_stored(&name, doc)?;
    Ok(SequenceState {
        value: stored.value,
        step: stored.spec.step,
        min: stored.spec.min,
        max: stored.spec.max,
        cycle: stored.spec.cycle,
        version: stored.version,
        cycles: stored.cycles,
        created_at: get_date(&name, doc, field::CREATED_AT)?,
        updated_at: get_date(&name, doc, field::UPDATED_AT)?,
        format: get_format(&name, doc)?,
        start: stored.origin.start,
        stripe: stored.origin.stripe,
        incarnation: stored.incarnation,
        issued_by_day: decode_issued(doc),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Document {
        new_document(
            "s",
            &Spec::default().with_max(99),
            None,
            ObjectId::new(),
            DateTime::from_millis(0),
        )
    }

    #[test]
    fn a_new_document_decodes() {
        let state = decode_state(&good()).unwrap();
        assert_eq!(
            (state.value, state.version, state.next_number()),
            (0, 0, Some(1))
        );
        assert_eq!(state.remaining(), 99);
    }

    #[test]
    fn every_missing_field_is_named() {
        for key in [
            field::VALUE,
            field::STEP,
            field::MIN,
            field::MAX,
            field::CYCLE,
            field::VERSION,
            field::CYCLES,
            field::CREATED_AT,
            field::UPDATED_AT,
        ] {
            let mut d = good();
            d.remove(key);
            let err = decode_state(&d).unwrap_err();
            assert!(
                matches!(&err, Error::CorruptDocument { field, .. } if field == key),
                "{err}"
            );
            assert!(err.to_string().contains("is missing"));
        }
    }

    #[test]
    fn wrong_types_are_rejected_and_int32_is_accepted() {
        for (key, bad) in [
            (field::VALUE, Bson::Double(3.0)),
            (field::VALUE, Bson::String("3".into())),
            (field::STEP, Bson::Null),
            (field::CYCLE, Bson::Int32(1)),
            (field::VERSION, Bson::Double(1.5)),
            (field::CREATED_AT, Bson::String("yesterday".into())),
        ] {
            let mut d = good();
            d.insert(key, bad);
            let err = decode_state(&d).unwrap_err();
            assert!(
                matches!(&err, Error::CorruptDocument { field, .. } if field == key),
                "{err}"
            );
        }
        let mut d = good();
        d.insert(field::VALUE, Bson::Int32(7));
        assert_eq!(decode_state(&d).unwrap().value, 7);
    }

    /// A stored format is read back (and one that does not parse is a corrupt document
    /// naming `format`); the JSON view shows the stored fields with `next` and `remaining`
    /// (found by cargo-mutants: a format read as none, and an empty JSON view, went unnoticed
    /// by the unit tests).
    #[test]
    fn a_stored_format_is_read_back_and_the_json_view_shows_the_state() {
        let mut d = good();
        d.insert(field::FORMAT, "INV-{n:06}");
        let state = decode_state(&d).unwrap();
        assert_eq!(
            state.format.as_ref().map(Format::as_str),
            Some("INV-{n:06}")
        );
        let json = state.to_json();
        assert_eq!(
            (
                &json["name"],
                &json["value"],
                &json["next"],
                &json["remaining"],
                &json["format"]
            ),
            (
                &serde_json::json!("s"),
                &serde_json::json!(0),
                &serde_json::json!(1),
                &serde_json::json!(99),
                &serde_json::json!("INV-{n:06}")
            )
        );
        d.insert(field::FORMAT, "INV-{n:06");
        let err = decode_state(&d).unwrap_err();
        assert!(
            matches!(&err, Error::CorruptDocument { field, .. } if field == field::FORMAT),
            "{err}"
        );
    }

    /// A stripe's index and count come together and the index is below the count; anything
    /// else is a corrupt document naming `stripe_index` (found by cargo-mutants: an index at
    /// or past the count was read as a stripe).
    #[test]
    fn stripe_fields_are_an_index_below_the_count_or_corrupt() {
        let mut d = good();
        d.insert(field::STRIPE_INDEX, 2_i64);
        d.insert(field::STRIPE_COUNT, 3_i64);
        let state = decode_state(&d).unwrap();
        assert_eq!(state.stripe, Some(StripeId { index: 2, count: 3 }));
        for (index, count) in [(3_i64, 3_i64), (4, 3), (-1, 3), (0, 0), (1, i64::MAX)] {
            let mut d = good();
            d.insert(field::STRIPE_INDEX, index);
            d.insert(field::STRIPE_COUNT, count);
            let err = decode_state(&d).unwrap_err();
            assert!(
                matches!(&err, Error::CorruptDocument { field, .. } if field == field::STRIPE_INDEX),
                "{index} of {count}: {err}"
            );
        }
        let mut d = good();
        d.insert(field::STRIPE_INDEX, 0_i64);
        assert!(decode_state(&d).is_err(), "an index without a count");
    }

    #[test]
    fn impossible_values_are_corrupt() {
        for (key, bad, needle) in [
            (field::STEP, 0_i64, "is 0"),
            (field::MIN, 99, "not below max"),
            (field::VALUE, -2, "lies before what bounds"),
            (field::VERSION, -1, "negative"),
            (field::CYCLES, -1, "negative"),
        ] {
            let mut d = good();
            d.insert(key, bad);
            let err = decode_state(&d).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
        // One step before the first number is the state of a fresh sequence: fine. Beyond the
        // far bound is where a forced alter leaves an exhausted sequence: fine too.
        for value in [-1_i64, 100] {
            let mut d = good();
            d.insert(field::VALUE, value);
            assert!(decode_state(&d).is_ok(), "{value}");
        }
    }

    /// A field of the wrong type is refused with its type named as mongosh names it, every
    /// type the match knows, so a user sees what is stored (a mutant dropping an arm printed
    /// "another BSON type" and no test noticed).
    #[test]
    fn a_wrong_type_is_named_as_mongosh_names_it() {
        let decimal: bson::Decimal128 = "3".parse().unwrap();
        for (bad, name) in [
            (Bson::Double(3.0), "double"),
            (Bson::String("3".into()), "string"),
            (Bson::Array(vec![Bson::Int64(3)]), "array"),
            (Bson::Document(Document::new()), "document"),
            (Bson::Boolean(true), "bool"),
            (Bson::Null, "null"),
            (Bson::Int32(3), "int"),
            (Bson::Int64(3), "long"),
            (Bson::DateTime(DateTime::from_millis(0)), "date"),
            (Bson::Decimal128(decimal), "decimal"),
            (Bson::ObjectId(ObjectId::new()), "objectId"),
            (
                Bson::Timestamp(bson::Timestamp {
                    time: 1,
                    increment: 1,
                }),
                "another BSON type",
            ),
        ] {
            assert_eq!(bson_type_name(&bad), name, "{bad:?}");
            // As a user meets it: `cycle` must be a bool (and an Int64 is no bool either).
            if !matches!(bad, Bson::Boolean(_)) {
                let mut d = good();
                d.insert(field::CYCLE, bad.clone());
                let err = decode_state(&d).unwrap_err().to_string();
                assert!(err.contains(&format!("has BSON type {name}")), "{err}");
            }
        }
    }

    #[test]
    fn non_string_ids_are_corrupt() {
        let mut d = good();
        d.insert(field::ID, 5_i32);
        assert!(matches!(
            decode_state(&d),
            Err(Error::CorruptDocument { .. })
        ));
    }
}
