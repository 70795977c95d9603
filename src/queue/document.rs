//! The on-disk contract: one MongoDB document per queue, in the collection
//! `<collection>_queues` beside the sequences (for the default `dispensers`:
//! `dispensers_queues`).
//!
//! ```text
//! { _id: <name: string>, min: Int64, max: Int64, taken: Int64, served: Int64,
//!   waiting: Int64, version: Int64, incarnation: ObjectId, created_at: Date,
//!   updated_at: Date }
//! ```
//!
//! `taken` and `served` count the tickets taken and called since creation; they only grow.
//! `waiting` is always `taken - served`: it is stored as well so that a take can be one
//! conditional update whose filter says "fewer than capacity wait" (`waiting < max - min + 1`)
//! without comparing two fields. Every write moves `version` by one; `incarnation` is set at
//! insert and never changes, so a compare-and-set computed on one incarnation never matches a
//! queue deleted and created again under the same name.
//!
//! Decoding is strict, as for sequences: a missing field, a wrong BSON type, or counters no
//! history of takes and calls can produce (`served > taken`, `waiting ≠ taken - served`, more
//! waiting than the range holds) is [`Error::CorruptDocument`]. Int32 is widened.

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, doc};

use super::spec::{Counters, QueueSpec};
use crate::document::get_i64;
use crate::error::{Error, Result};

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
}

/// What the writes need of a stored queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    pub spec: QueueSpec,
    pub counters: Counters,
    pub version: i64,
    pub incarnation: ObjectId,
}

/// The projection that reads a [`Stored`] (and, with the dates, a [`QueueStatus`]).
pub(crate) fn projection() -> Document {
    doc! {
        field::ID: 1, field::MIN: 1, field::MAX: 1, field::TAKEN: 1, field::SERVED: 1,
        field::WAITING: 1, field::VERSION: 1, field::INCARNATION: 1,
        field::CREATED_AT: 1, field::UPDATED_AT: 1,
    }
}

/// The document of a new, empty queue.
pub(crate) fn new_document(
    name: &str,
    spec: &QueueSpec,
    incarnation: ObjectId,
    now: DateTime,
) -> Document {
    doc! {
        field::ID: name,
        field::MIN: spec.min,
        field::MAX: spec.max,
        field::TAKEN: 0_i64,
        field::SERVED: 0_i64,
        field::WAITING: 0_i64,
        field::VERSION: 0_i64,
        field::INCARNATION: incarnation,
        field::CREATED_AT: now,
        field::UPDATED_AT: now,
    }
}

/// Decodes and checks what the writes need.
pub(crate) fn decode_stored(name: &str, d: &Document) -> Result<Stored> {
    let min = get_i64(name, d, field::MIN)?;
    let max = get_i64(name, d, field::MAX)?;
    let spec = QueueSpec::default().with_min(min).with_max(max);
    if spec.validate(name).is_err() {
        return Err(Error::corrupt_of(
            "queue",
            name,
            field::MIN,
            format!(
                "({min}) and max ({max}) are not a ticket range (min must be below max, at most 2^63-1 tickets)"
            ),
        ));
    }
    let taken = get_i64(name, d, field::TAKEN)?;
    let served = get_i64(name, d, field::SERVED)?;
    let waiting = get_i64(name, d, field::WAITING)?;
    let version = get_i64(name, d, field::VERSION)?;
    if served < 0 || served > taken {
        return Err(Error::corrupt_of(
            "queue",
            name,
            field::SERVED,
            format!("({served}) is not between 0 and taken ({taken})"),
        ));
    }
    let counters = Counters { taken, served };
    if waiting != counters.waiting() {
        return Err(Error::corrupt_of(
            "queue",
            name,
            field::WAITING,
            format!("({waiting}) is not taken - served ({taken} - {served})"),
        ));
    }
    if u64::try_from(waiting).unwrap_or(u64::MAX) > spec.capacity() {
        return Err(Error::corrupt_of(
            "queue",
            name,
            field::WAITING,
            format!(
                "({waiting}) is more than the range {min}..={max} holds ({})",
                spec.capacity()
            ),
        ));
    }
    if version < 0 {
        return Err(Error::corrupt_of(
            "queue",
            name,
            field::VERSION,
            format!("({version}) is negative"),
        ));
    }
    let incarnation = match d.get(field::INCARNATION) {
        Some(Bson::ObjectId(t)) => *t,
        Some(_) => {
            return Err(Error::corrupt_of(
                "queue",
                name,
                field::INCARNATION,
                "is not an objectId",
            ));
        }
        None => {
            return Err(Error::corrupt_of(
                "queue",
                name,
                field::INCARNATION,
                "is missing",
            ));
        }
    };
    Ok(Stored {
        spec,
        counters,
        version,
        incarnation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::status::decode_status;

    fn good() -> Document {
        let mut d = new_document(
            "q",
            &QueueSpec::default().with_max(9),
            ObjectId::new(),
            DateTime::from_millis(0),
        );
        d.insert(field::TAKEN, 25_i64);
        d.insert(field::SERVED, 18_i64);
        d.insert(field::WAITING, 7_i64);
        d
    }

    #[test]
    fn a_document_decodes() {
        let s = decode_status(&good()).unwrap();
        assert_eq!((s.taken, s.served, s.waiting, s.capacity), (25, 18, 7, 10));
        assert_eq!(s.now_serving, Some(8));
        assert_eq!(s.next_ticket, Some(6));
        let mut d = good();
        d.insert(field::TAKEN, Bson::Int32(25));
        assert!(decode_status(&d).is_ok(), "Int32 is widened");
    }

    #[test]
    fn impossible_documents_are_corrupt_and_name_the_field() {
        for (key, bad, needle) in [
            (field::SERVED, Bson::Int64(26), "not between 0 and taken"),
            (field::SERVED, Bson::Int64(-1), "not between 0 and taken"),
            (field::WAITING, Bson::Int64(6), "is not taken - served"),
            (field::MIN, Bson::Int64(9), "not a ticket range"),
            (field::VERSION, Bson::Int64(-1), "negative"),
            (
                field::TAKEN,
                Bson::Double(25.0),
                "expected a 64-bit integer",
            ),
            (field::INCARNATION, Bson::String("x".into()), "objectId"),
            (field::UPDATED_AT, Bson::Null, "not a date"),
        ] {
            let mut d = good();
            d.insert(key, bad);
            let e = decode_status(&d).unwrap_err();
            assert!(
                matches!(&e, Error::CorruptDocument { field, .. } if field == key),
                "{key}: {e}"
            );
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
        }
        // More waiting than the range holds.
        let mut d = good();
        d.insert(field::TAKEN, 40_i64);
        d.insert(field::SERVED, 29_i64);
        d.insert(field::WAITING, 11_i64);
        assert!(
            decode_status(&d)
                .unwrap_err()
                .to_string()
                .contains("more than the range")
        );
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
