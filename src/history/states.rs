//! The states of queues and gap-free sequences as the history keeps them (a sequence's is
//! in `record.rs`): what an admin operation changes, not the live counters.

use bson::{Bson, Document, doc};

use crate::gapless::GaplessStatus;
use crate::queue::QueueStatus;

/// A queue's range, format, day settings and counters.
pub(crate) fn queue_state(s: &QueueStatus) -> Document {
    doc! {
        "min": s.min,
        "max": s.max,
        "format": s.label_format.clone().map_or(Bson::Null, Bson::String),
        "time_zone": &s.time_zone,
        "daily": s.daily,
        "taken": i64::try_from(s.taken).unwrap_or(i64::MAX),
        "served": i64::try_from(s.served).unwrap_or(i64::MAX),
        "waiting": i64::try_from(s.waiting).unwrap_or(i64::MAX),
        "cancelled": i64::try_from(s.cancelled).unwrap_or(i64::MAX),
        "next_ticket": s.next_ticket.map_or(Bson::Null, Bson::Int64),
        "version": s.version,
    }
}

/// A gap-free sequence's next number, longest lease and lease.
pub(crate) fn gapless_state(s: &GaplessStatus) -> Document {
    let lease = s.lease.as_ref().map_or(Bson::Null, |l| {
        Bson::Document(doc! {
            "number": l.number,
            "holder": l.holder.to_hex(),
            "expires": l.expires.try_to_rfc3339_string().unwrap_or_default(),
        })
    });
    doc! {
        "next": s.next,
        "max_lease_ms": i64::try_from(s.max_lease.as_millis()).unwrap_or(i64::MAX),
        "collection": &s.collection,
        "field": &s.field,
        "lease": lease,
    }
}
