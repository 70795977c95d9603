//! The state document of a gap-free sequence and the writes that change it, as plain
//! filters and updates (no database here).
//!
//! One document per sequence, `_id` the sequence's name:
//!
//! ```text
//! { _id, collection, field, void_field, void_extra,   -- what it numbers, fixed at creation
//!   max_lease_ms: Int64,                              -- the longest lease (absent: 5 min)
//!   next,                                             -- every number below is used or voided
//!   lease: { holder: ObjectId | null,                 -- the caller holding `next`, if any
//!            at: Date, ms: Int64,                     -- taken at (server clock), for how long
//!            want: true?, want_at: Date? },           -- another caller waits (since)
//!   created_at }
//! ```
//!
//! A lease is **timed by the server's clock**: `at` is set with `$currentDate` by the write
//! that takes it, and whether it ran out is decided in the filter with `$$NOW`, so a caller
//! whose clock is wrong neither holds a lease longer nor takes one early. A lease lasts the
//! shorter of its own `ms` and the sequence's `max_lease_ms` **as stored when it is judged**:
//! lowering the longest lease shortens the leases already taken.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, doc};

use super::options::{DEFAULT_MAX_LEASE, GaplessOptions};
use crate::error::{Error, Result};

/// The lease's length in milliseconds, as stored.
pub(super) fn lease_ms(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
}

/// A new sequence's document.
pub(super) fn fresh(name: &str, o: &GaplessOptions) -> Document {
    doc! {
        "_id": name,
        "collection": &o.collection,
        "field": &o.field,
        "void_field": &o.void_field,
        "void_extra": o.void_extra.clone(),
        "max_lease_ms": lease_ms(o.max_lease),
        "next": o.start,
        "start": o.start,
        "lease": { "holder": Bson::Null, "at": DateTime::from_millis(0), "ms": 0_i64 },
        "created_at": DateTime::now(),
    }
}

/// The length a lease counts for, as an expression: the shorter of its own and the
/// sequence's longest lease (the default for a document written before it was stored).
fn counted_ms() -> Bson {
    let max = doc! { "$ifNull": ["$max_lease_ms", lease_ms(DEFAULT_MAX_LEASE)] };
    Bson::Document(doc! { "$min": ["$lease.ms", max] })
}

/// Matches a lease that ran out by the server's clock (`at + min(ms, max_lease_ms) <= $$NOW`).
fn ran_out() -> Document {
    doc! { "$expr": { "$lte": [ { "$add": ["$lease.at", counted_ms()] }, "$$NOW" ] } }
}

/// Sets the longest lease.
pub(super) fn max_lease_update(max_lease: Duration) -> Document {
    doc! { "$set": { "max_lease_ms": lease_ms(max_lease) } }
}

/// How long a caller's word that it waits (`lease.want`) keeps polite takers off a free
/// lease, in milliseconds of the server's clock: long enough for the waiter's next poll,
/// short enough that a waiter that gave up does not slow anyone down for long.
pub(super) const WANT_MS: i64 = 100;

/// Taking the lease on `next`: free, or run out. A `polite` taker (one that has not waited
/// yet) also leaves a free lease alone while another caller has said, within the last
/// [`WANT_MS`], that it waits — so a handle issuing in a tight loop lets waiting callers in.
pub(super) fn take_filter(name: &str, polite: bool) -> Document {
    let free = doc! { "$or": [ { "lease.holder": Bson::Null }, ran_out() ] };
    if !polite {
        let mut f = doc! { "_id": name };
        f.extend(free);
        return f;
    }
    let no_fresh_want = doc! { "$or": [
        { "lease.want": { "$exists": false } },
        { "$expr": { "$lte": [ { "$add": ["$lease.want_at", WANT_MS] }, "$$NOW" ] } },
    ] };
    doc! { "_id": name, "$and": [free, no_fresh_want] }
}

/// The update that takes the lease for `me`, for `ms` milliseconds from now (server clock).
pub(super) fn take_update(me: ObjectId, ms: i64) -> Document {
    doc! {
        "$set": { "lease.holder": me, "lease.ms": ms },
        "$currentDate": { "lease.at": true },
        "$unset": { "lease.want": "", "lease.want_at": "" },
    }
}

/// Confirms `number` (used by `holder`, which still holds its lease) and takes the lease on
/// `number + 1` for `me`, in one write — unless a caller waits.
pub(super) fn chain_filter(name: &str, holder: ObjectId, number: i64) -> Document {
    doc! {
        "_id": name,
        "next": number,
        "lease.holder": holder,
        "lease.want": { "$exists": false },
    }
}

/// The update of [`chain_filter`]: `next` to `to`, the lease to `me`.
pub(super) fn chain_update(to: i64, me: ObjectId, ms: i64) -> Document {
    doc! {
        "$set": { "next": to, "lease.holder": me, "lease.ms": ms },
        "$currentDate": { "lease.at": true },
    }
}

/// Ending a lease: while `holder` holds `number` (`holder: None` — while no one does), set
/// `next` to `to` (`number` to release it, `number + 1` and beyond once used) and free the
/// lease. A waiter's `want` stays.
pub(super) fn settle_filter(name: &str, holder: Option<ObjectId>, number: i64) -> Document {
    doc! {
        "_id": name,
        "next": number,
        "lease.holder": holder.map_or(Bson::Null, Bson::ObjectId),
    }
}

/// The update of [`settle_filter`].
pub(super) fn settle_update(to: i64) -> Document {
    doc! { "$set": { "next": to, "lease.holder": Bson::Null } }
}

/// A waiter says so on `holder`'s lease.
pub(super) fn want_filter(name: &str, holder: ObjectId) -> Document {
    doc! { "_id": name, "lease.holder": holder }
}

/// The update of [`want_filter`].
pub(super) fn want_update() -> Document {
    doc! { "$set": { "lease.want": true }, "$currentDate": { "lease.want_at": true } }
}

/// The state with the server's time, in one read.
pub(super) fn read_pipeline(name: &str) -> Vec<Document> {
    vec![
        doc! { "$match": { "_id": name } },
        doc! { "$addFields": { "server_time": "$$NOW" } },
    ]
}

/// The current lease of a gap-free sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// The number held (always the sequence's `next`).
    pub number: i64,
    /// The holder (one per number a [`Gapless::issue`](super::Gapless::issue) call takes).
    pub holder: ObjectId,
    /// When it runs out, by the server's clock.
    pub expires: DateTime,
    /// Whether another caller waits for it.
    pub waiters: bool,
}

/// A number voided on purpose, with its reason (read from its void document in the
/// business collection).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Voided {
    /// The number.
    pub number: i64,
    /// Why.
    pub reason: String,
    /// When it was voided (the server's clock).
    pub at: DateTime,
}

/// The state of a gap-free sequence (see [`Gapless::peek`](super::Gapless::peek)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GaplessState {
    /// The sequence's name.
    pub name: String,
    /// The business collection.
    pub collection: String,
    /// The number field of its documents.
    pub field: String,
    /// The field that marks a void document (see [`GaplessOptions::void_field`]).
    pub void_field: String,
    /// The lowest number not yet used or voided: the next one handed out.
    pub next: i64,
    /// The sequence's longest lease: no lease counts for longer (see
    /// [`GaplessOptions::max_lease`]).
    pub max_lease: Duration,
    /// Whether the business collection has the plain unique index on the number field that
    /// keeps two documents from carrying one number. `false` when someone dropped it: every
    /// gap-free operation that writes creates it again before it relies on it (and refuses
    /// when it cannot).
    pub unique_index: bool,
    /// The holder of `next`, if any (also when its lease ran out but no one took over yet).
    pub lease: Option<Lease>,
    /// Voided numbers, in number order (the first [`AUDIT_LIST_LIMIT`](super::AUDIT_LIST_LIMIT);
    /// [`audit`](super::audit) counts them all).
    pub voided: Vec<Voided>,
    /// The server's clock when the state was read.
    pub server_time: DateTime,
}

impl GaplessState {
    /// The status as JSON, as the CLI (`gapless peek --json`) and the service print it:
    /// `{name, collection, field, void_field, next, max_lease_seconds, unique_index, lease:
    /// {number, holder, expires, waiters}|null, lease_expired, server_time, voided: [{number,
    /// reason, at}]}` (times in RFC 3339; `max_lease_seconds` a JSON number of seconds with a
    /// fraction, `300.0`, as every surface gives a gap-free lease).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// println!("{}", g.peek().await?.to_json());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        let time = |t: &DateTime| t.try_to_rfc3339_string().unwrap_or_default();
        serde_json::json!({
            "name": self.name, "collection": self.collection, "field": self.field,
            "void_field": self.void_field,
            "next": self.next,
            "max_lease_seconds": self.max_lease.as_secs_f64(),
            "unique_index": self.unique_index,
            "lease": self.lease.as_ref().map(|l| serde_json::json!({
                "number": l.number, "holder": l.holder.to_hex(), "expires": time(&l.expires),
                "waiters": l.waiters,
            })),
            "lease_expired": self.lease_expired(),
            "server_time": time(&self.server_time),
            "voided": self.voided.iter().map(|v| serde_json::json!({
                "number": v.number, "reason": v.reason, "at": time(&v.at),
            })).collect::<Vec<_>>(),
        })
    }

    /// Whether the lease (if any) had run out when the state was read, by the server's
    /// clock (this machine's clock plays no part).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// let s = g.peek().await?;
    /// if s.lease_expired() {
    ///     println!("the holder of {} stopped; the next caller takes over", s.next);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lease_expired(&self) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|l| l.expires <= self.server_time)
    }

    /// How long until the lease runs out by the server's clock (zero when there is none
    /// or it ran out).
    pub(super) fn lease_left(&self) -> Duration {
        self.lease.as_ref().map_or(Duration::ZERO, |l| {
            let ms = l.expires.timestamp_millis() - self.server_time.timestamp_millis();
            Duration::from_millis(u64::try_from(ms).unwrap_or(0))
        })
    }
}

/// The stored settings of a sequence.
pub(super) struct Stored {
    /// The first number, recorded at creation (`None` in documents of earlier versions).
    pub(super) start: Option<i64>,
    pub(super) collection: String,
    pub(super) field: String,
    pub(super) void_field: String,
    pub(super) void_extra: Document,
    pub(super) max_lease: Duration,
}

/// Reads the settings of a state document.
pub(super) fn stored(name: &str, d: &Document) -> Result<Stored> {
    let text = |f: &str| {
        d.get_str(f)
            .map(str::to_owned)
            .map_err(|_| Error::corrupt(name, f, "must be a string"))
    };
    Ok(Stored {
        start: match d.get("start") {
            None => None,
            Some(Bson::Int64(n)) => Some(*n),
            Some(_) => return Err(Error::corrupt(name, "start", "must be a 64-bit integer")),
        },
        collection: text("collection")?,
        field: text("field")?,
        void_field: text("void_field")?,
        void_extra: match d.get("void_extra") {
            Some(Bson::Document(x)) => x.clone(),
            _ => return Err(Error::corrupt(name, "void_extra", "must be a document")),
        },
        max_lease: match d.get("max_lease_ms") {
            None => DEFAULT_MAX_LEASE,
            Some(Bson::Int64(ms)) if *ms > 0 => Duration::from_millis(ms.unsigned_abs()),
            Some(_) => {
                return Err(Error::corrupt(
                    name,
                    "max_lease_ms",
                    "must be a positive 64-bit integer",
                ));
            }
        },
    })
}

/// Decodes a state document read with [`read_pipeline`] (voids are read apart).
pub(super) fn decode(name: &str, d: &Document) -> Result<GaplessState> {
    let corrupt = |f: &str, p: &str| Error::corrupt(name, f, p);
    let s = stored(name, d)?;
    let next = d
        .get_i64("next")
        .map_err(|_| corrupt("next", "must be a 64-bit integer"))?;
    let server_time = *d.get_datetime("server_time").map_err(|_| {
        corrupt(
            "server_time",
            "must be the server's time (read it with $$NOW)",
        )
    })?;
    let l = d
        .get_document("lease")
        .map_err(|_| corrupt("lease", "must be a document"))?;
    let lease = match l.get("holder") {
        None | Some(Bson::Null) => None,
        Some(Bson::ObjectId(holder)) => {
            let at = l
                .get_datetime("at")
                .map_err(|_| corrupt("lease.at", "must be a date"))?;
            let ms = l
                .get_i64("ms")
                .map_err(|_| corrupt("lease.ms", "must be a 64-bit integer"))?;
            let ms = ms.min(lease_ms(s.max_lease));
            Some(Lease {
                number: next,
                holder: *holder,
                expires: DateTime::from_millis(at.timestamp_millis().saturating_add(ms)),
                waiters: l.get_bool("want").unwrap_or(false),
            })
        }
        Some(_) => return Err(corrupt("lease.holder", "must be an ObjectId or null")),
    };
    Ok(GaplessState {
        name: name.to_owned(),
        collection: s.collection,
        field: s.field,
        void_field: s.void_field,
        next,
        max_lease: s.max_lease,
        unique_index: true,
        lease,
        voided: Vec::new(),
        server_time,
    })
}

/// A gap-free sequence's next number, longest lease and lease, as the history keeps them
/// (what an admin operation changes).
pub(super) fn gapless_state(s: &GaplessState) -> Document {
    let lease = s.lease.as_ref().map_or(Bson::Null, |l| {
        Bson::Document(doc! {
            "number": l.number,
            "holder": l.holder.to_hex(),
            "expires": l.expires.try_to_rfc3339_string().unwrap_or_default(),
        })
    });
    doc! {
        "next": s.next,
        "max_lease_seconds": s.max_lease.as_secs_f64(),
        "collection": &s.collection,
        "field": &s.field,
        "lease": lease,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(d: &Document) -> GaplessState {
        let mut d = d.clone();
        d.insert("server_time", DateTime::from_millis(10_000));
        decode("inv", &d).unwrap()
    }

    #[test]
    fn a_fresh_document_decodes_with_no_lease() {
        let d = fresh(
            "inv",
            &GaplessOptions::new("invoices", "meta.number").with_start(7),
        );
        let s = read(&d);
        assert_eq!(
            (s.next, s.lease.clone(), s.field.as_str()),
            (7, None, "meta.number")
        );
        assert_eq!(s.void_field, "voided");
        assert!(!s.lease_expired());
    }

    #[test]
    fn a_lease_runs_out_by_the_server_clock_read_with_it() {
        let me = ObjectId::new();
        let mut d = fresh("inv", &GaplessOptions::new("invoices", "number"));
        d.insert(
            "lease",
            doc! { "holder": me, "at": DateTime::from_millis(9_000), "ms": 1_500_i64, "want": true },
        );
        let s = read(&d);
        let l = s.lease.clone().unwrap();
        assert_eq!(
            (l.holder, l.expires.timestamp_millis(), l.waiters),
            (me, 10_500, true)
        );
        assert!(!s.lease_expired());
        assert_eq!(s.lease_left(), Duration::from_millis(500));
        d.insert(
            "lease",
            doc! { "holder": me, "at": DateTime::from_millis(8_000), "ms": 2_000_i64 },
        );
        let s = read(&d);
        assert!(s.lease_expired());
        assert_eq!(s.lease_left(), Duration::ZERO);
    }

    #[test]
    fn a_lease_counts_for_at_most_the_longest_lease_stored() {
        let me = ObjectId::new();
        let mut d = fresh(
            "inv",
            &GaplessOptions::new("invoices", "number").with_max_lease(Duration::from_secs(2)),
        );
        assert_eq!(d.get_i64("max_lease_ms"), Ok(2_000));
        d.insert(
            "lease",
            doc! { "holder": me, "at": DateTime::from_millis(9_000), "ms": 86_400_000_i64 },
        );
        let s = read(&d);
        assert_eq!(s.max_lease, Duration::from_secs(2));
        assert_eq!(s.lease.unwrap().expires.timestamp_millis(), 11_000);
        // A document from before the longest lease was stored: the default.
        d.remove("max_lease_ms");
        assert_eq!(read(&d).max_lease, DEFAULT_MAX_LEASE);
        d.insert("max_lease_ms", 0_i64);
        let mut bad = d.clone();
        bad.insert("server_time", DateTime::now());
        assert!(
            decode("inv", &bad)
                .unwrap_err()
                .to_string()
                .contains("max_lease_ms")
        );
        assert!(ran_out().to_string().contains("$max_lease_ms"));
    }

    #[test]
    fn corrupt_state_names_the_field() {
        let mut d = fresh("inv", &GaplessOptions::new("invoices", "number"));
        d.insert("lease", doc! { "holder": 5 });
        let e = decode("inv", &{
            let mut d = d.clone();
            d.insert("server_time", DateTime::now());
            d
        })
        .unwrap_err();
        assert!(e.to_string().contains("lease.holder"), "{e}");
        d.insert("next", "x");
        assert!(decode("inv", &d).unwrap_err().to_string().contains("next"));
    }

    #[test]
    fn a_polite_take_leaves_a_waited_for_lease_alone() {
        assert!(take_filter("inv", true).to_string().contains("lease.want"));
        assert!(!take_filter("inv", false).to_string().contains("lease.want"));
        assert!(chain_filter("inv", ObjectId::new(), 4).contains_key("lease.want"));
    }
}
