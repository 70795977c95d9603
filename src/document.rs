//! The on-disk contract: one MongoDB document per sequence.
//!
//! ```text
//! { _id: <name: string>, value: Int64, step: Int64, min: Int64, max: Int64, cycle: bool,
//!   version: Int64, cycles: Int64, created_at: Date, updated_at: Date, format?: string }
//! ```
//!
//! Other languages read and write these documents, so decoding is strict: a missing field, a
//! field of the wrong BSON type, or a value no valid history can produce is
//! [`Error::CorruptDocument`], never a guess. Integers are accepted as Int64 or Int32 (Int32 is
//! widened; the next write stores Int64). Doubles, strings and everything else are rejected:
//! a double cannot hold every 64-bit integer, and a counter that silently rounds can repeat.

use bson::{Bson, DateTime, Document, doc};

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
}

/// The projection that reads a [`Stored`]: only what the strategies need.
pub(crate) fn stored_projection() -> Document {
    doc! {
        field::VALUE: 1, field::STEP: 1, field::MIN: 1, field::MAX: 1,
        field::CYCLE: 1, field::VERSION: 1, field::CYCLES: 1, field::ID: 0,
    }
}

/// The projection that reads a whole [`SequenceState`].
pub(crate) fn state_projection() -> Document {
    doc! {
        field::ID: 1, field::VALUE: 1, field::STEP: 1, field::MIN: 1, field::MAX: 1,
        field::CYCLE: 1, field::VERSION: 1, field::CYCLES: 1,
        field::CREATED_AT: 1, field::UPDATED_AT: 1, field::FORMAT: 1,
    }
}

/// The document of a new sequence: `value = start - step`, so the first number is `start`.
pub(crate) fn new_document(name: &str, spec: &Spec, now: DateTime) -> Document {
    // `Spec::validate` guarantees `start - step` fits.
    let value = spec.start.saturating_sub(spec.step);
    doc! {
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
    }
}

fn bson_type_name(b: &Bson) -> &'static str {
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

/// The optional `format` field: absent or a string that parses as a [`Format`].
fn get_format(name: &str, doc: &Document) -> Result<Option<Format>> {
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
                "({value}) is outside what bounds {min}..={max} with step {step} allow (at most one step before the first number)"
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
    // The next number, clamped into the bounds; only informative.
    let start = value.saturating_add(step).clamp(min, max);
    Ok(Stored {
        spec: spec.with_start(start),
        value,
        version,
        cycles,
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
}

impl SequenceState {
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
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Document {
        new_document("s", &Spec::default().with_max(99), DateTime::from_millis(0))
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

    #[test]
    fn impossible_values_are_corrupt() {
        for (key, bad, needle) in [
            (field::STEP, 0_i64, "is 0"),
            (field::MIN, 99, "not below max"),
            (field::VALUE, 100, "outside"),
            (field::VALUE, -2, "outside"),
            (field::VERSION, -1, "negative"),
            (field::CYCLES, -1, "negative"),
        ] {
            let mut d = good();
            d.insert(key, bad);
            let err = decode_state(&d).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
        // One step before the first number is the state of a fresh sequence: fine.
        let mut d = good();
        d.insert(field::VALUE, -1_i64);
        assert!(decode_state(&d).is_ok());
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
