//! Where numbers are written: every MongoDB operation on a sequence document.
//!
//! Each function is one round trip, bounded by the operation timeout, with the configured
//! write concern and primary reads. Results are always read through a projection of the
//! fields needed (a smaller reply, and on some MongoDB-compatible servers the only way to get
//! a document copied under the write lock).

use std::future::IntoFuture;
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, doc};
use futures::TryStreamExt;
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::options::{
    CollectionOptions, FindOneAndUpdateOptions, FindOneOptions, FindOptions, ReadPreference,
    ReturnDocument, SelectionCriteria,
};
use mongodb::{Client, Collection};

use crate::clock::ServerClock;
use crate::document::{self, Stamp, Stored, StripeId, field};
use crate::error::{Aftermath, Error, Result};
use crate::options::Options;
use crate::spec::Spec;
use crate::usage;
use jiff::Timestamp;
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Duplicate key: someone else inserted that `_id` first.
const DUPLICATE_KEY: i32 = 11000;
/// MongoDB's error code for a document its collection's validator refuses.
const DOCUMENT_VALIDATION_FAILURE: i32 = 121;
/// MongoDB's error code for an update operator applied to a field of the wrong type (an
/// `$inc` of a value that is no number).
const TYPE_MISMATCH: i32 = 14;

/// The sequence collection, with the options every operation uses.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    coll: Collection<Document>,
    timeout: Duration,
    /// The UTC day (see [`usage::day_number`]) of the last write that pruned old per-day
    /// counters; shared by the clones, so one write a day per dispenser prunes.
    pruned_day: Arc<AtomicI64>,
    /// The server's clock, shared by every store of one dispenser (its siblings included).
    clock: Arc<ServerClock>,
    /// The collections whose indexes this dispenser made sure of (the history's), shared
    /// like the clock.
    indexed: Arc<Mutex<HashSet<String>>>,
}

/// The filter that pins a document to the shape a computation assumed.
fn shape_filter(name: &str, spec: &Spec) -> Document {
    doc! {
        field::ID: name,
        field::STEP: spec.step,
        field::MIN: spec.min,
        field::MAX: spec.max,
        field::CYCLE: spec.cycle,
    }
}

/// A change of shape (and optionally of format) written with a compare-and-set.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ShapeChange {
    /// The new step, min, max and cycle.
    pub spec: Spec,
    /// `None`: keep the format; `Some(None)`: remove it; `Some(Some(f))`: set it.
    pub format: Option<Option<crate::format::Format>>,
}

/// The filter that pins a conditional write to one state of one incarnation: `_id`,
/// `version` and the incarnation. Every write moves `version` (the write rule of every
/// client, in the guide's [document chapter](crate::guide::document)), so these name one state, its shape and value included; the shape is not
/// repeated (each predicate costs the server time on every draw). For a document written
/// before incarnations existed: the shape, "no incarnation" and `value` as well (so that the
/// write is correct for whatever document holds that state, whichever history led there).
fn pinned_filter(name: &str, spec: &Spec, stamp: Stamp, value: i64) -> Document {
    match stamp.incarnation {
        Some(t) => doc! { field::ID: name, field::VERSION: stamp.version, field::INCARNATION: t },
        None => {
            let mut filter = shape_filter(name, spec);
            filter.insert(field::VERSION, stamp.version);
            filter.insert(field::INCARNATION, doc! { "$exists": false });
            filter.insert(field::VALUE, value);
            filter
        }
    }
}

impl Store {
    pub(crate) fn new(client: &Client, options: &Options) -> Self {
        let coll_options = CollectionOptions::builder()
            .write_concern(options.write_concern.clone())
            .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
            .build();
        let coll = client
            .database(&options.database)
            .collection_with_options(&options.collection, coll_options);
        Store {
            coll,
            timeout: options.operation_timeout,
            pruned_day: Arc::new(AtomicI64::new(i64::MIN)),
            clock: Arc::default(),
            indexed: Arc::default(),
        }
    }

    /// The server's time now, in ms since the epoch (see [`ServerClock`]): what every rule
    /// shared by many clients reads, never the client machine's own clock.
    pub(crate) async fn server_now(&self) -> Result<i64> {
        let db = self
            .coll
            .client()
            .database(self.coll.namespace().db.as_str());
        self.clock.now_ms(&db, self.timeout).await
    }

    /// With `Some(n)`: sets `updated_at` in `update` and adds `n` to today's issued counter,
    /// and on this store's first such write of the day also prunes the old counters (see
    /// [`usage::tally`]). With `None` (a draw whose count stays pending, see
    /// [`usage::Pending`]): neither, so the write has two update paths fewer.
    fn put_usage(&self, update: &mut Document, usage: Option<i64>) {
        let Some(n) = usage else { return };
        update.insert("$currentDate", doc! { field::UPDATED_AT: true });
        let now = Timestamp::now();
        let day = usage::day_number(now);
        let prune = n != 0 && self.pruned_day.swap(day, Relaxed) != day;
        usage::tally(update, n, now, prune);
    }

    /// A store over another collection of the same database, with the same write concern,
    /// read preference and operation timeout (queues keep their documents beside the
    /// sequences, in `<collection>_queues`).
    pub(crate) fn sibling(&self, collection: &str) -> Store {
        let coll_options = CollectionOptions::builder()
            .write_concern(self.coll.write_concern().cloned())
            .selection_criteria(self.coll.selection_criteria().cloned())
            .build();
        let coll = self
            .coll
            .client()
            .database(self.coll.namespace().db.as_str())
            .collection_with_options(collection, coll_options);
        Store {
            coll,
            timeout: self.timeout,
            pruned_day: Arc::new(AtomicI64::new(i64::MIN)),
            clock: self.clock.clone(),
            indexed: self.indexed.clone(),
        }
    }

    /// The collections whose indexes this dispenser made sure of (see the field).
    pub(crate) fn indexed(&self) -> Arc<Mutex<HashSet<String>>> {
        self.indexed.clone()
    }

    /// Runs one write under the timeout, mapping driver errors (a timeout: its outcome is
    /// unknown, and numbers it may have reserved are a gap).
    pub(crate) async fn bounded<T>(
        &self,
        context: impl FnOnce() -> String,
        op: impl IntoFuture<Output = mongodb::error::Result<T>>,
    ) -> Result<T> {
        self.bounded_as(Aftermath::Draw, context, op).await
    }

    /// Runs one read under the timeout, mapping driver errors (a timeout lost nothing).
    pub(crate) async fn bounded_read<T>(
        &self,
        context: impl FnOnce() -> String,
        op: impl IntoFuture<Output = mongodb::error::Result<T>>,
    ) -> Result<T> {
        self.bounded_as(Aftermath::Read, context, op).await
    }

    pub(crate) async fn bounded_as<T>(
        &self,
        left: Aftermath,
        context: impl FnOnce() -> String,
        op: impl IntoFuture<Output = mongodb::error::Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.timeout, op.into_future()).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Error::database_as(context(), e, left)),
            Err(_) => Err(Error::timeout(context(), self.timeout, left)),
        }
    }

    /// Inserts a new sequence document with a fresh incarnation. `Ok(Some(incarnation))`
    /// when inserted, `Ok(None)` when the name already exists.
    pub(crate) async fn insert(
        &self,
        name: &str,
        spec: &Spec,
        stripe: Option<StripeId>,
    ) -> Result<Option<ObjectId>> {
        self.insert_with(name, spec, stripe, None).await
    }

    /// [`Store::insert`] of a document that carries `format` too, in the same insert.
    pub(crate) async fn insert_with(
        &self,
        name: &str,
        spec: &Spec,
        stripe: Option<StripeId>,
        format: Option<&crate::format::Format>,
    ) -> Result<Option<ObjectId>> {
        let incarnation = ObjectId::new();
        let mut doc = document::new_document(name, spec, stripe, incarnation, DateTime::now());
        if let Some(f) = format {
            doc.insert(field::FORMAT, f.as_str());
        }
        let res = tokio::time::timeout(self.timeout, self.coll.insert_one(doc)).await;
        match res {
            Ok(Ok(_)) => Ok(Some(incarnation)),
            Ok(Err(e)) if is_duplicate_key(&e) => Ok(None),
            Ok(Err(e)) => Err(Error::database_as(
                format!("creating sequence {name:?}"),
                e,
                Aftermath::Admin,
            )),
            Err(_) => Err(Error::timeout(
                format!("creating sequence {name:?}"),
                self.timeout,
                Aftermath::Admin,
            )),
        }
    }

    /// `e`, a draw's failed write of `name`; or, when the server refused it because a field
    /// of the document has the wrong type (edited since the handle read it), the document's
    /// corruption as a read of it reports it ([`Error::CorruptDocument`] naming the field).
    /// Nothing was written either way.
    async fn corrupt_or(&self, name: &str, e: Error) -> Error {
        match &e {
            Error::Database { source, .. } if write_error_code(source) == Some(TYPE_MISMATCH) => {
                match self.load(name).await {
                    Err(corrupt @ Error::CorruptDocument { .. }) => corrupt,
                    _ => e,
                }
            }
            _ => e,
        }
    }

    /// Reads what the strategies need. `Ok(None)` when the document does not exist.
    pub(crate) async fn load(&self, name: &str) -> Result<Option<Stored>> {
        let found = self.find(name, document::stored_projection()).await?;
        found.map(|d| document::decode_stored(name, &d)).transpose()
    }

    /// [`Store::load`] with the document's format: what `ensure` compares.
    pub(crate) async fn load_with_format(
        &self,
        name: &str,
    ) -> Result<Option<(Stored, Option<crate::format::Format>)>> {
        let mut projection = document::stored_projection();
        projection.insert(field::FORMAT, 1);
        let found = self.find(name, projection).await?;
        found
            .map(|d| {
                Ok((
                    document::decode_stored(name, &d)?,
                    document::get_format(name, &d)?,
                ))
            })
            .transpose()
    }

    /// Reads the whole document. `Ok(None)` when it does not exist.
    pub(crate) async fn load_state(&self, name: &str) -> Result<Option<document::SequenceState>> {
        let found = self.find(name, document::state_projection()).await?;
        found.map(|d| document::decode_state(&d)).transpose()
    }

    async fn find(&self, name: &str, projection: Document) -> Result<Option<Document>> {
        let opts = FindOneOptions::builder().projection(projection).build();
        self.bounded_read(
            || format!("reading sequence {name:?}"),
            self.coll
                .find_one(doc! { field::ID: name })
                .with_options(opts),
        )
        .await
    }

    /// The sequences whose names lie in `[from, to)` (byte order), sorted by name.
    pub(crate) async fn list_range(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Vec<Result<document::SequenceState>>> {
        self.list_page(doc! { field::ID: { "$gte": from, "$lt": to } }, None)
            .await
    }

    /// The sequences `filter` finds, at most `limit`, sorted by name.
    pub(crate) async fn list_page(
        &self,
        filter: Document,
        limit: Option<i64>,
    ) -> Result<Vec<Result<document::SequenceState>>> {
        self.list_limited(filter, limit).await
    }

    async fn list_limited(
        &self,
        filter: Document,
        limit: Option<i64>,
    ) -> Result<Vec<Result<document::SequenceState>>> {
        let opts = FindOptions::builder()
            .projection(document::state_projection())
            .sort(doc! { field::ID: 1 })
            .limit(limit)
            .build();
        let docs: Vec<Document> = self
            .bounded_read(|| "listing sequences".to_owned(), async {
                self.coll
                    .find(filter)
                    .with_options(opts)
                    .await?
                    .try_collect()
                    .await
            })
            .await?;
        Ok(docs.iter().map(document::decode_state).collect())
    }

    /// Deletes the documents named `ids` (those that still exist); returns how many.
    pub(crate) async fn delete_ids(&self, ids: &[String]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let res = self
            .bounded_as(
                Aftermath::Admin,
                || format!("deleting {} sequences", ids.len()),
                self.coll.delete_many(doc! { field::ID: { "$in": ids } }),
            )
            .await?;
        Ok(res.deleted_count)
    }

    /// The compare-and-set: stores `new_value` only if the document is still the state
    /// `expected` (same incarnation, version and shape; see [`pinned_filter`]). Returns the
    /// stamp written when this write won, `None` when another writer came first. A document
    /// without an incarnation receives one with this write. `usage`: see
    /// [`Store::put_usage`].
    pub(crate) async fn compare_and_set(
        &self,
        name: &str,
        expected: &Stored,
        new_value: i64,
        wrapped: bool,
        shape: Option<&ShapeChange>,
        usage: Option<i64>,
    ) -> Result<Option<Stamp>> {
        let filter = pinned_filter(name, &expected.spec, expected.stamp(), expected.value);
        let incarnation = expected.incarnation.unwrap_or_default();
        let mut inc = doc! { field::VERSION: 1_i64 };
        if wrapped {
            inc.insert(field::CYCLES, 1_i64);
        }
        let mut update = doc! {};
        // A plain draw moves `value` with the `$inc` it needs anyway (the filter pins the
        // state, so adding the difference stores `new_value`): one update operator fewer
        // than a `$set`, which the server pays for on every draw.
        let delta = new_value.checked_sub(expected.value);
        match (shape, expected.incarnation, delta) {
            (None, Some(_), Some(delta)) => {
                inc.insert(field::VALUE, delta);
            }
            _ => {
                let mut set = doc! { field::VALUE: new_value };
                if expected.incarnation.is_none() {
                    set.insert(field::INCARNATION, incarnation);
                }
                if let Some(change) = shape {
                    set.insert(field::STEP, change.spec.step);
                    set.insert(field::MIN, change.spec.min);
                    set.insert(field::MAX, change.spec.max);
                    set.insert(field::CYCLE, change.spec.cycle);
                    match &change.format {
                        Some(Some(f)) => {
                            set.insert(field::FORMAT, f.as_str());
                        }
                        Some(None) => {
                            update.insert("$unset", doc! { field::FORMAT: "" });
                        }
                        None => {}
                    }
                }
                update.insert("$set", set);
            }
        }
        update.insert("$inc", inc);
        self.put_usage(&mut update, usage);
        let res = match self
            .bounded(
                || format!("writing sequence {name:?}"),
                self.coll.update_one(filter, update),
            )
            .await
        {
            Ok(res) => res,
            Err(e) => return Err(self.corrupt_or(name, e).await),
        };
        Ok((res.matched_count == 1).then_some(Stamp {
            version: expected.version + 1,
            incarnation: Some(incarnation),
        }))
    }

    /// The conditional increment: adds `delta` to `value` (and 1 to `version`) only while
    /// `value` lies in `[low, high]` and the shape is `spec`; returns the new `value` and the
    /// stamp written, or `None` when the filter did not match (a bound, a wrap, a different
    /// shape, or no such document). `usage`: see [`Store::put_usage`].
    ///
    /// It needs no incarnation in its filter: its outcome depends only on the value and shape
    /// it matches, so it is correct on whichever document holds them.
    pub(crate) async fn increment(
        &self,
        name: &str,
        spec: &Spec,
        (low, high): (i64, i64),
        delta: i64,
        usage: Option<i64>,
    ) -> Result<Option<(i64, Stamp)>> {
        let mut filter = shape_filter(name, spec);
        filter.insert(
            field::VALUE,
            doc! { "$type": "long", "$gte": low, "$lte": high },
        );
        let mut update = doc! {
            "$inc": { field::VALUE: delta, field::VERSION: 1_i64 },
        };
        self.put_usage(&mut update, usage);
        let opts = FindOneAndUpdateOptions::builder()
            .return_document(ReturnDocument::After)
            .projection(doc! {
                field::VALUE: 1, field::VERSION: 1, field::INCARNATION: 1, field::ID: 0,
            })
            .build();
        let found = match self
            .bounded(
                || format!("incrementing sequence {name:?}"),
                self.coll
                    .find_one_and_update(filter, update)
                    .with_options(opts),
            )
            .await
        {
            Ok(found) => found,
            Err(e) => return Err(self.corrupt_or(name, e).await),
        };
        let Some(d) = found else { return Ok(None) };
        let value = document::get_i64(name, &d, field::VALUE)?;
        let version = document::get_i64(name, &d, field::VERSION)?;
        let incarnation = match d.get(field::INCARNATION) {
            Some(Bson::ObjectId(t)) => Some(*t),
            _ => None,
        };
        Ok(Some((
            value,
            Stamp {
                version,
                incarnation,
            },
        )))
    }

    /// Gives the unused tail of a block back: moves `value` from `last` (the end of the block
    /// reserved by the write that produced `stamp`) back to `new_value`, only if the
    /// document is still that incarnation, has the shape `spec`, is at that version and
    /// holds `last` (no write happened after the reservation). `Ok(true)` when the tail was
    /// given back.
    pub(crate) async fn give_back(
        &self,
        name: &str,
        spec: &Spec,
        stamp: Stamp,
        last: i64,
        new_value: i64,
    ) -> Result<bool> {
        let mut filter = pinned_filter(name, spec, stamp, last);
        filter.insert(field::VALUE, last);
        let mut update = doc! {
            "$set": { field::VALUE: new_value },
            "$inc": { field::VERSION: 1_i64 },
        };
        // What is given back was counted as issued when it was reserved.
        let returned = (i128::from(last) - i128::from(new_value)) / i128::from(spec.step);
        self.put_usage(&mut update, Some(-i64::try_from(returned).unwrap_or(0)));
        let res = self
            .bounded(
                || format!("giving back numbers of sequence {name:?}"),
                self.coll.update_one(filter, update),
            )
            .await?;
        Ok(res.matched_count == 1)
    }

    /// Adds `n` numbers to today's issued counter of the sequence's incarnation `incarnation`
    /// (a handle's pending count, written when the handle goes away). Like every write it
    /// moves `version` (the write rule of every client), though neither `value` nor the
    /// shape changes.
    pub(crate) async fn add_usage(&self, name: &str, incarnation: ObjectId, n: i64) -> Result<()> {
        let mut update = doc! { "$inc": { field::VERSION: 1_i64 } };
        self.put_usage(&mut update, Some(n));
        self.bounded(
            || format!("counting the numbers issued from sequence {name:?}"),
            self.coll.update_one(
                doc! { field::ID: name, field::INCARNATION: incarnation },
                update,
            ),
        )
        .await
        .map(drop)
    }

    /// The sequence collection (other parts of the library reach the database through it).
    pub(crate) fn collection(&self) -> &Collection<Document> {
        &self.coll
    }

    /// The operation timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Asks the server to answer (`ping`), bounded by the timeout.
    pub(crate) async fn ping(&self) -> Result<()> {
        let db = self
            .coll
            .client()
            .database(self.coll.namespace().db.as_str());
        self.bounded_read(
            || "pinging the server".to_owned(),
            db.run_command(doc! { "ping": 1 }),
        )
        .await
        .map(drop)
    }

    /// Deletes the document. `Ok(false)` when there was none.
    pub(crate) async fn delete(&self, name: &str) -> Result<bool> {
        let res = self
            .bounded_as(
                Aftermath::Admin,
                || format!("deleting sequence {name:?}"),
                self.coll.delete_one(doc! { field::ID: name }),
            )
            .await?;
        Ok(res.deleted_count == 1)
    }
}

/// The filter of one page of a listing by name: the names after `after` (from the first
/// when `None`), matching the regular expression `names` when given (see
/// `spec::names_regex`). The two conditions are joined with `$and` (mongo-java-server reads
/// only the `$regex` of `{_id: {$gt, $regex}}`).
pub(crate) fn page_filter(after: Option<&str>, names: Option<&str>) -> Document {
    let range = match after {
        Some(a) => doc! { field::ID: { "$gt": a } },
        // Every name is a string, and `$gte: ""` matches exactly the strings (a comparison
        // matches values of its own type only), in the order the cursor relies on: the same
        // range query as the later pages, which a server reads from the `_id` index (a
        // `$type` filter costs mongo-java-server a second pass over every document).
        None => doc! { field::ID: { "$gte": "" } },
    };
    match names {
        Some(r) => doc! { "$and": [range, { field::ID: { "$regex": r } }] },
        None => range,
    }
}

pub(crate) fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    write_error_code(e) == Some(DUPLICATE_KEY)
}

/// Whether `e` says the collection's validator refused the document.
pub(crate) fn is_validation_failure(e: &mongodb::error::Error) -> bool {
    write_error_code(e) == Some(DOCUMENT_VALIDATION_FAILURE)
}

fn write_error_code(e: &mongodb::error::Error) -> Option<i32> {
    match e.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        ErrorKind::Command(c) => Some(c.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a store's first counted write of a day prunes the old counters; the later ones'
    /// updates stay small (found by cargo-mutants: pruning on every write went unnoticed, the
    /// documents being the same either way).
    #[tokio::test]
    async fn only_the_first_counted_write_of_a_day_prunes() {
        let client = Client::with_uri_str("mongodb://127.0.0.1:1").await.unwrap();
        let store = Store::new(&client, &Options::default());
        let mut first = Document::new();
        store.put_usage(&mut first, Some(1));
        assert!(first.contains_key("$unset"), "{first}");
        assert!(first.contains_key("$inc"), "{first}");
        let mut second = Document::new();
        store.put_usage(&mut second, Some(3));
        assert!(!second.contains_key("$unset"), "{second}");
        assert!(second.contains_key("$inc"), "{second}");
        // Pending (`None`): neither counted nor dated; nothing issued (`Some(0)`): dated only.
        let mut pending = Document::new();
        store.put_usage(&mut pending, None);
        assert!(pending.is_empty(), "{pending}");
        let mut none = Document::new();
        store.put_usage(&mut none, Some(0));
        assert!(
            !none.contains_key("$unset") && !none.contains_key("$inc"),
            "{none}"
        );
        assert!(none.contains_key("$currentDate"), "{none}");
    }

    /// A duplicate key and a validator's refusal are told apart by their code, whether the
    /// server reports them as a write error (insert, update) or as a command error
    /// (`findAndModify`): a refused void document is then explained, not retried, and a
    /// lost insert race is not taken for a refusal (found by cargo-mutants: the local test
    /// server has no validators, so no integration test meets code 121).
    #[test]
    fn write_and_command_errors_are_told_apart_by_code() {
        let write = |code: i32| {
            let w: mongodb::error::WriteError =
                bson::from_document(doc! { "code": code, "errmsg": "refused" }).unwrap();
            mongodb::error::Error::from(ErrorKind::Write(WriteFailure::WriteError(w)))
        };
        let command = |code: i32| {
            let c: mongodb::error::CommandError =
                bson::from_document(doc! { "code": code, "codeName": "X", "errmsg": "refused" })
                    .unwrap();
            mongodb::error::Error::from(ErrorKind::Command(c))
        };
        for e in [write(121), command(121)] {
            assert!(is_validation_failure(&e) && !is_duplicate_key(&e), "{e}");
        }
        for e in [write(11000), command(11000)] {
            assert!(is_duplicate_key(&e) && !is_validation_failure(&e), "{e}");
        }
        let other = mongodb::error::Error::from(std::io::Error::other("no code"));
        assert!(!is_duplicate_key(&other) && !is_validation_failure(&other));
    }
}
