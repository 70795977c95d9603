//! Gap-free numbers for invoices: a number is *used* exactly when the business write that
//! carries it succeeds.
//!
//! Every other sequence in this crate (and PostgreSQL's, Oracle's, Leaf's) burns a number
//! when the write that was to carry it fails or its process dies. A gap-free sequence hands
//! the number and the business write together: [`Gapless::issue`] takes the next number
//! under a **lease**, runs the caller's write with it, and only then moves the sequence on.
//!
//! How the guarantees hold, with single-document atomic writes only (no transactions):
//!
//! - **Never twice**: the business collection has a unique index on the number field
//!   ([`Dispenser::open_gapless`] creates or verifies it). Two holders of one number (a lease
//!   that ran out while its holder was still alive) meet there: the second write fails with a
//!   duplicate key, its caller sees that the number is used and takes the next one.
//! - **No gaps**: the state document's `next` only moves past a number once a document
//!   carries it (or it was [voided](Gapless::void)). A write that fails, a closure that
//!   panics or returns an error, releases the lease at once; a holder that dies leaves it to
//!   run out, and the next caller first checks whether the dead holder's write landed.
//! - **In order**: one holder at a time per sequence — n + 1 is not handed out before n is
//!   used, released or its lease ran out — so business writes succeed in number order.
//! - **Clocks**: leases compare the callers' clocks; a clock that runs ahead only makes a
//!   lease run out early, which costs a retry at the unique index, never a duplicate.

mod audit;
mod index;
mod options;
mod path;

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, doc};
use futures::FutureExt;
use mongodb::Collection;
use mongodb::options::{CollectionOptions, ReadConcern, ReadPreference, SelectionCriteria};

use crate::dispenser::Dispenser;
use crate::error::{Error, Result};
use crate::spec::validate_name;
use crate::store::is_duplicate_key;
use index::ensure_unique_index;

pub use audit::{AUDIT_LIST_LIMIT, Audit, audit};
pub use options::GaplessOptions;
pub use path::set_field;

/// How many numbers one [`Gapless::issue`] may find used by others before it gives up.
const MAX_SKIPS: u32 = 1000;

/// A gap-free sequence (see the [module](self) docs). Cheap to clone; clones share nothing
/// but the database.
///
/// # Example
///
/// ```no_run
/// use dispenser::{Dispenser, Options, gapless::GaplessOptions};
/// use dispenser::mongodb::bson::{doc, Document};
///
/// # async fn f() -> dispenser::Result<()> {
/// let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
/// let invoices = d.open_gapless("invoices", GaplessOptions::new("invoices", "number")).await?;
/// let coll = invoices.business().clone();
/// let issued = invoices
///     .issue(|n| {
///         let coll = coll.clone();
///         async move { coll.insert_one(doc! { "number": n, "total": 120 }).await }
///     })
///     .await?;
/// println!("invoice {} written", issued.number);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Gapless {
    name: String,
    state: Collection<Document>,
    business: Collection<Document>,
    options: GaplessOptions,
    /// The dispenser's operation timeout, for each database operation.
    timeout: Duration,
}

/// What [`Gapless::issue`] returns: the number used and what the business write returned.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Issued<T> {
    /// The number the successful business write carries.
    pub number: i64,
    /// What the business write returned.
    pub value: T,
    /// Numbers this call found already used (by a holder that died or stalled after its
    /// write) and moved past.
    pub skipped: u32,
}

/// The current lease of a gap-free sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// The number held.
    pub number: i64,
    /// The holder (one per [`Gapless::issue`] call).
    pub holder: ObjectId,
    /// When it runs out (by the holder's clock).
    pub expires: DateTime,
}

/// A number voided on purpose, with its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Voided {
    /// The number.
    pub number: i64,
    /// Why.
    pub reason: String,
    /// When it was voided.
    pub at: DateTime,
}

/// The state of a gap-free sequence (see [`Gapless::status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GaplessStatus {
    /// The sequence's name.
    pub name: String,
    /// The business collection and its number field.
    pub collection: String,
    /// The number field.
    pub field: String,
    /// The lowest number not yet used or voided: the next one handed out.
    pub next: i64,
    /// The holder of `next`, if any (also when its lease ran out but no one took over yet).
    pub lease: Option<Lease>,
    /// Voided numbers, in the order they were voided.
    pub voided: Vec<Voided>,
}

impl GaplessStatus {
    /// The status as JSON, as the CLI (`gapless status --json`) and the service print it:
    /// `{name, collection, field, next, lease: {number, holder, expires}|null, lease_expired,
    /// voided: [{number, reason, at}]}` (times in RFC 3339).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// println!("{}", g.status().await?.to_json());
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        let time = |t: &DateTime| t.try_to_rfc3339_string().unwrap_or_default();
        serde_json::json!({
            "name": self.name, "collection": self.collection, "field": self.field,
            "next": self.next,
            "lease": self.lease.as_ref().map(|l| serde_json::json!({
                "number": l.number, "holder": l.holder.to_hex(), "expires": time(&l.expires),
            })),
            "lease_expired": self.lease_expired(),
            "voided": self.voided.iter().map(|v| serde_json::json!({
                "number": v.number, "reason": v.reason, "at": time(&v.at),
            })).collect::<Vec<_>>(),
        })
    }

    /// Whether the lease (if any) has run out by this machine's clock.
    pub fn lease_expired(&self) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|l| l.expires <= DateTime::now())
    }
}

fn corrupt(name: &str, field: &str, problem: &str) -> Error {
    Error::corrupt(name, field, problem)
}

fn decode(name: &str, d: &Document) -> Result<GaplessStatus> {
    let text = |f: &str| {
        d.get_str(f)
            .map(str::to_owned)
            .map_err(|_| corrupt(name, f, "must be a string"))
    };
    let next = d
        .get_i64("next")
        .map_err(|_| corrupt(name, "next", "must be a 64-bit integer"))?;
    let lease = match d.get("lease") {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(l)) => Some(Lease {
            number: l
                .get_i64("n")
                .map_err(|_| corrupt(name, "lease.n", "must be a 64-bit integer"))?,
            holder: l
                .get_object_id("holder")
                .map_err(|_| corrupt(name, "lease.holder", "must be an ObjectId"))?,
            expires: *l
                .get_datetime("expires")
                .map_err(|_| corrupt(name, "lease.expires", "must be a date"))?,
        }),
        Some(_) => return Err(corrupt(name, "lease", "must be a document or null")),
    };
    let mut voided = Vec::new();
    if let Ok(list) = d.get_array("voided") {
        for v in list {
            let v = v
                .as_document()
                .ok_or_else(|| corrupt(name, "voided", "must hold documents"))?;
            voided.push(Voided {
                number: v
                    .get_i64("n")
                    .map_err(|_| corrupt(name, "voided.n", "must be a 64-bit integer"))?,
                reason: v.get_str("reason").unwrap_or_default().to_owned(),
                at: v.get_datetime("at").copied().unwrap_or(DateTime::MIN),
            });
        }
    }
    Ok(GaplessStatus {
        name: name.to_owned(),
        collection: text("collection")?,
        field: text("field")?,
        next,
        lease,
        voided,
    })
}

/// The business error as a boxed error, its message on one line (a driver error as
/// [`describe_driver_error`](crate::describe_driver_error) says it), and whether it is a
/// duplicate key from the driver.
fn classify<E>(e: E) -> (Arc<dyn std::error::Error + Send + Sync>, String, bool)
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let boxed: Box<dyn std::error::Error + Send + Sync> = e.into();
    let driver = boxed.downcast_ref::<mongodb::error::Error>();
    let duplicate = driver.is_some_and(is_duplicate_key);
    let reason = match driver {
        Some(d) => crate::describe_driver_error(d),
        None => boxed.to_string(),
    };
    (Arc::from(boxed), reason, duplicate)
}

fn panic_message(p: &Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("it panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("it panicked: {s}")
    } else {
        "it panicked".to_owned()
    }
}

impl Dispenser {
    /// Opens (creating it on first use) the gap-free sequence `name`, whose numbers are
    /// carried by `options.field` of the documents of `options.collection` (in this
    /// dispenser's database). Its state lives in the collection `<collection>_gapless` next
    /// to the sequences (for the default `dispensers`: `dispensers_gapless`).
    ///
    /// It makes sure the business collection has a **unique index** on the field — the
    /// arbiter against duplicates: an existing unique index on exactly that field is used,
    /// otherwise one is created (`{field: 1}`, unique). When that fails (the collection
    /// already holds a number twice, or a non-unique index of the same name exists) the
    /// error says so and nothing else is written.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::InvalidArgument`] (options), [`Error::SpecConflict`]
    /// when `name` exists for another collection or field, [`Error::Database`] (among them
    /// the index that cannot be created), [`Error::CorruptDocument`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: every step is idempotent; open again.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::gapless::GaplessOptions;
    /// let invoices = d.open_gapless("invoices-2026", GaplessOptions::new("invoices", "number")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_gapless(&self, name: &str, options: GaplessOptions) -> Result<Gapless> {
        validate_name(name)?;
        options.validate()?;
        let state = self.gapless_collection(&format!("{}_gapless", self.options().collection));
        let business = self.gapless_collection(&options.collection);
        ensure_unique_index(&business, &options).await?;
        let fresh = doc! {
            "_id": name,
            "collection": &options.collection,
            "field": &options.field,
            "next": options.start,
            "lease": Bson::Null,
            "voided": [],
            "created_at": DateTime::now(),
        };
        let g = Gapless {
            name: name.to_owned(),
            state,
            business,
            options,
            timeout: self.store().timeout(),
        };
        match tokio::time::timeout(g.timeout, g.state.insert_one(fresh).into_future())
            .await
            .unwrap_or_else(|_| {
                Err(mongodb::error::Error::custom(format!(
                    "no answer within {:?}",
                    g.timeout
                )))
            }) {
            Ok(_) => {}
            Err(e) if is_duplicate_key(&e) => {
                let s = g.status().await?;
                if s.collection != g.options.collection || s.field != g.options.field {
                    return Err(Error::SpecConflict {
                        name: name.to_owned(),
                        stored: format!("numbers in {}.{}", s.collection, s.field),
                        requested: format!(
                            "numbers in {}.{}",
                            g.options.collection, g.options.field
                        ),
                    });
                }
            }
            Err(e) => {
                return Err(Error::database(
                    format!("creating gap-free sequence {name:?}"),
                    e,
                ));
            }
        }
        Ok(g)
    }

    /// Opens the existing gap-free sequence `name` with the collection and field it was
    /// created with (and the default lease and wait), without touching the business
    /// collection's indexes: for status, listing and voids.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::NoSuchSequence`], [`Error::CorruptDocument`],
    /// [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let s = d.find_gapless("invoices-2026").await?.status().await?;
    /// println!("next invoice: {}", s.next);
    /// # Ok(()) }
    /// ```
    pub async fn find_gapless(&self, name: &str) -> Result<Gapless> {
        validate_name(name)?;
        let mut g = Gapless {
            name: name.to_owned(),
            state: self.gapless_collection(&format!("{}_gapless", self.options().collection)),
            business: self.gapless_collection("unknown"),
            options: GaplessOptions::new("unknown", "unknown"),
            timeout: self.store().timeout(),
        };
        let s = g.status().await?;
        g.business = self.gapless_collection(&s.collection);
        g.options = GaplessOptions::new(s.collection, s.field);
        Ok(g)
    }

    /// A collection of this dispenser's database with its write concern (majority and
    /// journaled by default) and primary reads.
    fn gapless_collection(&self, name: &str) -> Collection<Document> {
        let o = self.options();
        self.store()
            .collection()
            .client()
            .database(&o.database)
            .collection_with_options(
                name,
                CollectionOptions::builder()
                    .write_concern(o.write_concern.clone())
                    .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
                    .build(),
            )
    }

    /// [`audit`] of a collection in this dispenser's database.
    ///
    /// # Errors
    ///
    /// As [`audit`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let a = d.audit("invoices", "number", Some(1)).await?;
    /// assert!(a.is_clean(), "{a:?}");
    /// # Ok(()) }
    /// ```
    pub async fn audit(&self, collection: &str, field: &str, from: Option<i64>) -> Result<Audit> {
        let db = self
            .store()
            .collection()
            .client()
            .database(&self.options().database);
        audit(&db, collection, field, from).await
    }
}

impl Gapless {
    /// The sequence's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The business collection, with the dispenser's write concern (majority and journaled
    /// by default) — a handle to write the business documents with.
    pub fn business(&self) -> &Collection<Document> {
        &self.business
    }

    /// The options it was opened with.
    pub fn options(&self) -> &GaplessOptions {
        &self.options
    }

    fn db_error(&self, what: &str, e: mongodb::error::Error) -> Error {
        Error::database(format!("{what} of gap-free sequence {:?}", self.name), e)
    }

    /// Runs one database operation under the operation timeout.
    async fn bounded<T>(
        &self,
        what: &str,
        op: impl IntoFuture<Output = mongodb::error::Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.timeout, op.into_future()).await {
            Ok(r) => r.map_err(|e| self.db_error(what, e)),
            Err(_) => Err(Error::Timeout {
                context: format!("{what} of gap-free sequence {:?}", self.name),
                after: self.timeout,
            }),
        }
    }

    /// The state: the next number, the lease, the voided numbers.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchSequence`] when it was deleted, [`Error::CorruptDocument`],
    /// [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// let s = g.status().await?;
    /// println!("next {} ({} voided)", s.next, s.voided.len());
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<GaplessStatus> {
        let d = self
            .bounded(
                "reading the state",
                self.state.find_one(doc! { "_id": &self.name }),
            )
            .await?
            .ok_or_else(|| Error::NoSuchSequence {
                name: self.name.clone(),
            })?;
        decode(&self.name, &d)
    }

    /// Whether a business document carries `n`, read with majority read concern: a write
    /// that a failover may still roll back does not count (moving past its number would
    /// leave the number with no document).
    async fn used(&self, n: i64) -> Result<bool> {
        self.bounded(
            "looking for a number in the business collection",
            self.business
                .find_one(doc! { &self.options.field: n })
                .read_concern(ReadConcern::majority())
                .projection(doc! { "_id": 1 }),
        )
        .await
        .map(|d| d.is_some())
    }

    /// Takes the next number under a lease for `me`, waiting for another holder's lease to
    /// end or run out.
    async fn take(&self, me: ObjectId, started: Instant) -> Result<i64> {
        let mut attempts = 0_u32;
        loop {
            attempts += 1;
            let s = self.status().await?;
            let now = DateTime::now();
            let filter = match &s.lease {
                None => doc! { "_id": &self.name, "next": s.next, "lease": Bson::Null },
                Some(l) if l.expires <= now => {
                    doc! { "_id": &self.name, "next": s.next, "lease.holder": l.holder }
                }
                Some(l) => {
                    if started.elapsed() >= self.options.wait {
                        return Err(Error::Contention {
                            name: self.name.clone(),
                            attempts,
                            elapsed: started.elapsed(),
                        });
                    }
                    // Poll: short, jittered, never past the lease's end.
                    let left = Duration::from_millis(
                        u64::try_from(l.expires.timestamp_millis() - now.timestamp_millis())
                            .unwrap_or(0),
                    );
                    tokio::time::sleep(left.min(jitter(attempts))).await;
                    continue;
                }
            };
            let expires =
                DateTime::from_millis(now.timestamp_millis().saturating_add(
                    i64::try_from(self.options.lease.as_millis()).unwrap_or(i64::MAX),
                ));
            let taken = self.bounded("taking a lease", self
                .state
                .update_one(
                    filter,
                    doc! { "$set": { "lease": { "n": s.next, "holder": me, "expires": expires } } },
                )).await?;
            if taken.matched_count == 1 {
                return Ok(s.next);
            }
            if started.elapsed() >= self.options.wait {
                return Err(Error::Contention {
                    name: self.name.clone(),
                    attempts,
                    elapsed: started.elapsed(),
                });
            }
            tokio::time::sleep(jitter(attempts)).await;
        }
    }

    /// Moves `next` past `n` if `me` still holds it (the write carrying `n` succeeded, or
    /// `n` was found used). `false` when someone else did it already.
    async fn advance_past(&self, n: i64, me: ObjectId) -> Result<bool> {
        self.move_past(
            doc! { "_id": &self.name, "next": n, "lease.holder": me },
            n,
            "confirming a number",
        )
        .await
    }

    /// Moves `next` from `n` to `n + 1` and clears the lease, where `filter` (which pins
    /// `next: n`) still matches. `false` when it no longer does.
    async fn move_past(&self, filter: Document, n: i64, what: &'static str) -> Result<bool> {
        let next = n.checked_add(1).ok_or_else(|| self.exhausted(n))?;
        self.bounded(
            what,
            self.state.update_one(
                filter,
                doc! { "$set": { "next": next, "lease": Bson::Null } },
            ),
        )
        .await
        .map(|r| r.matched_count == 1)
    }

    /// Gives the lease of `me` back without moving on: the next caller gets the number.
    async fn release(&self, me: ObjectId) {
        if let Err(e) = self
            .bounded(
                "releasing a lease",
                self.state.update_one(
                    doc! { "_id": &self.name, "lease.holder": me },
                    doc! { "$set": { "lease": Bson::Null } },
                ),
            )
            .await
        {
            // The lease runs out instead; the number still goes to the next caller.
            tracing::warn!(sequence = %self.name, "{e} (the lease will run out instead)");
        }
    }

    /// Takes the next number, runs `write` with it — the business write that carries the
    /// number, typically an insert into the business collection — and returns the number
    /// once that write succeeded. The number is **used** exactly when `write` succeeds.
    ///
    /// - `write` returns an error or panics: the number is released (the next caller gets
    ///   it) and the call fails with [`Error::BusinessWrite`] carrying the error.
    /// - `write` fails with a duplicate key on the number (another holder — one whose lease
    ///   ran out while it stalled — wrote that number first): the call moves past it and
    ///   calls `write` again with the next number. So `write` may run more than once, each
    ///   time with a different number, and only its successful run counts.
    /// - The holder of the previous number is still writing: the call waits (in number
    ///   order) for it to finish or for its lease to run out, at most `wait`.
    ///
    /// Make `write` one write of one document, carrying the number in `field`: the unique
    /// index must see every use of a number. A write that succeeded but whose reply was lost
    /// is reported as a failure by the driver; its number then turns out used and is moved
    /// past by the next caller (no gap, no duplicate — but the caller that lost the reply
    /// may write again with another number, so make a retry of a failed `issue` check for
    /// its own document first if that matters).
    ///
    /// # Errors
    ///
    /// [`Error::BusinessWrite`] (nothing used, the number released), [`Error::Contention`]
    /// (waited `wait` for other holders, or found too many numbers used),
    /// [`Error::Exhausted`] at `i64::MAX`, [`Error::NoSuchSequence`], [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, though never at the cost of a gap or a duplicate: dropped before
    /// `write` finished, the number stays leased until the lease runs out (callers wait that
    /// long), then goes to the next caller — or, if the dropped write had succeeded, is
    /// found used and moved past.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// use dispenser::mongodb::bson::doc;
    /// let coll = g.business().clone();
    /// let issued = g
    ///     .issue(|n| {
    ///         let coll = coll.clone();
    ///         async move { coll.insert_one(doc! { "number": n, "customer": "ACME" }).await }
    ///     })
    ///     .await?;
    /// println!("invoice no. {}", issued.number);
    /// # Ok(()) }
    /// ```
    pub async fn issue<F, Fut, T, E>(&self, mut write: F) -> Result<Issued<T>>
    where
        F: FnMut(i64) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Instant::now();
        let me = ObjectId::new();
        let mut skipped = 0_u32;
        loop {
            let n = self.take(me, started).await?;
            // A holder that died (or stalled) after its write: the number is used.
            if self.used(n).await? {
                self.advance_past(n, me).await?;
                skipped += 1;
                if skipped > MAX_SKIPS {
                    return Err(self.too_many_used(skipped, started));
                }
                continue;
            }
            match AssertUnwindSafe(write(n)).catch_unwind().await {
                Ok(Ok(value)) => {
                    // Used. If confirming fails, the next caller finds the number used.
                    match self.advance_past(n, me).await {
                        Ok(_) => {}
                        Err(e) => tracing::warn!(
                            sequence = %self.name,
                            n,
                            "confirming a used gap-free number failed (the next caller will move past it): {e}"
                        ),
                    }
                    return Ok(Issued {
                        number: n,
                        value,
                        skipped,
                    });
                }
                Ok(Err(e)) => {
                    let (source, reason, duplicate) = classify(e);
                    if duplicate && self.used(n).await? {
                        self.advance_past(n, me).await?;
                        skipped += 1;
                        if skipped > MAX_SKIPS {
                            return Err(self.too_many_used(skipped, started));
                        }
                        continue;
                    }
                    self.release(me).await;
                    return Err(Error::BusinessWrite {
                        name: self.name.clone(),
                        number: n,
                        reason,
                        source: Some(source),
                    });
                }
                Err(panic) => {
                    self.release(me).await;
                    return Err(Error::BusinessWrite {
                        name: self.name.clone(),
                        number: n,
                        reason: panic_message(&panic),
                        source: None,
                    });
                }
            }
        }
    }

    fn exhausted(&self, value: i64) -> Error {
        Error::Exhausted {
            name: self.name.clone(),
            value,
            requested: 1,
            remaining: 0,
            min: i64::MIN,
            max: i64::MAX,
            step: 1,
        }
    }

    fn too_many_used(&self, skipped: u32, started: Instant) -> Error {
        Error::Contention {
            name: self.name.clone(),
            attempts: skipped,
            elapsed: started.elapsed(),
        }
    }

    /// Voids `number` on purpose, with a reason kept in the state (some laws require voided
    /// invoice numbers to be recorded): the sequence moves past it and it counts as
    /// accounted for. Only the next number can be voided — the one no business document
    /// carries yet — and only while no live lease holds it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty reason (or over 1000 bytes), a number that is
    /// not the next one (saying which is), a number held by a live lease, or one a business
    /// document already carries (a holder that died after its write; nothing is voided, the
    /// sequence moves past it); [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one conditional write.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// let next = g.status().await?.next;
    /// g.void(next, "printer jam: form destroyed").await?;
    /// # Ok(()) }
    /// ```
    pub async fn void(&self, number: i64, reason: &str) -> Result<()> {
        let reason = reason.trim();
        if reason.is_empty() || reason.len() > 1000 {
            return Err(Error::invalid_argument(
                "void reason",
                "give a reason of 1 to 1000 bytes (it is kept with the voided number)",
            ));
        }
        let s = self.status().await?;
        if number != s.next {
            let what = if number < s.next {
                "is already used or voided"
            } else {
                "is not handed out yet"
            };
            return Err(Error::invalid_argument(
                "void",
                format!(
                    "{number} {what}; only the next number of gap-free sequence {:?}, {}, can be voided",
                    self.name, s.next
                ),
            ));
        }
        let now = DateTime::now();
        let mut filter = doc! { "_id": &self.name, "next": number };
        match &s.lease {
            None => {
                filter.insert("lease", Bson::Null);
            }
            Some(l) if l.expires <= now => {
                filter.insert("lease.holder", l.holder);
            }
            Some(l) => {
                return Err(Error::invalid_argument(
                    "void",
                    format!(
                        "{number} of gap-free sequence {:?} is held by a caller until {}; try again after",
                        self.name,
                        l.expires.try_to_rfc3339_string().unwrap_or_default()
                    ),
                ));
            }
        }
        if self.used(number).await? {
            // Move past it as a taker would (its holder died after the write). If this
            // fails, the next taker finds the number used and moves past it itself.
            if let Err(e) = self
                .move_past(filter, number, "moving past a used number")
                .await
            {
                tracing::debug!(sequence = %self.name, number, error = %e, "could not move past a used number; the next taker will");
            }
            return Err(Error::invalid_argument(
                "void",
                format!(
                    "{number} is carried by a document of {:?} (its holder stopped before confirming); nothing voided, the sequence moved past it",
                    self.options.collection
                ),
            ));
        }
        let next = number
            .checked_add(1)
            .ok_or_else(|| self.exhausted(number))?;
        let done = self
            .bounded(
                "voiding a number",
                self.state.update_one(
                    filter,
                    doc! {
                        "$set": { "next": next, "lease": Bson::Null },
                        "$push": { "voided": { "n": number, "reason": reason, "at": now } },
                    },
                ),
            )
            .await?;
        if done.matched_count == 0 {
            return Err(Error::invalid_argument(
                "void",
                format!(
                    "{number} of gap-free sequence {:?} was taken by a caller meanwhile; try again",
                    self.name
                ),
            ));
        }
        Ok(())
    }
}

/// A short jittered pause between polls of a lease: 1 ms growing to about 20 ms.
fn jitter(attempt: u32) -> Duration {
    use std::hash::{BuildHasher, RandomState};
    let cap = 1_u64 << attempt.min(4); // 2 … 16 ms
    let r = RandomState::new().hash_one(attempt) % (cap * 1000);
    Duration::from_micros(1000 + r)
}
