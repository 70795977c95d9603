//! Where tickets are written: every MongoDB operation on a queue document, through the
//! crate's [`Store`] (its write concern, primary reads and operation timeout), on the
//! collection `<collection>_queues`. Each function is one round trip; results are read
//! through a projection.
//!
//! Every write of a queue is one compare-and-set: the whole document replaced by the state an
//! operation computed, filtered on `_id`, `version`, `incarnation` and the counters the
//! decoder checked (`taken`, `served`, `waiting`, each an Int64 of the value read). A document
//! that changed since it was read — by anyone, even by hand without moving `version` — matches
//! nothing, so a write never lands on a state it was not computed from, and never on a
//! document the decoder refused.

use std::future::IntoFuture;

use bson::{Document, doc};
use futures::TryStreamExt;
use mongodb::options::{FindOneOptions, FindOptions};

use super::document::{self, field};
use super::state::{KEY_RETENTION_MS, Key, RequestId, State};
use super::status::{self, QueueCounters, QueueState};
use crate::error::{Aftermath, Error, Result};
use crate::store::{Store, is_duplicate_key};

/// The queue collection, and beside it the request ids that left the queues' rings.
#[derive(Clone, Debug)]
pub(crate) struct QueueStore {
    store: Store,
    /// `<collection>_queue_requests`: one document per request id that left a queue
    /// document's ring, `{_id, queue, incarnation, caller, key, first, count, version, max,
    /// at}`, never changed once written; a TTL index on `at` removes it after 24 hours on
    /// MongoDB, and a reader ignores it after 24 hours by the server's clock on any server.
    requests: Store,
}

/// A request document's `_id`: the queue, its incarnation, the caller and the id, joined
/// by U+001F (which none of them may contain), so one caller's id is never another's.
fn request_key(name: &str, incarnation: bson::oid::ObjectId, id: &RequestId) -> String {
    format!(
        "{name}\u{1f}{}\u{1f}{}\u{1f}{}",
        incarnation.to_hex(),
        id.caller,
        id.id
    )
}

/// The take a spilled request document `d` records for request id `id` of queue `name`:
/// `None` when it is 24 hours old or more at `now` (the TTL index may not have removed it
/// yet, and other servers have none). Its counters may be Int32 (written by hand or by
/// another driver); a field of another type, or an `at` that is not a date, is a corrupt
/// document naming the field.
fn spilled_key(d: &Document, name: &str, id: &RequestId, now: i64) -> Result<Option<Key>> {
    let corrupt = |k: &str, problem: &str| {
        Error::corrupt_of(
            "queue request id",
            &format!("{name}/{}/{}", id.caller, id.id),
            k,
            problem,
        )
    };
    let int = |k: &str| match d.get(k) {
        Some(bson::Bson::Int64(v)) => Ok(*v),
        Some(bson::Bson::Int32(v)) => Ok(i64::from(*v)),
        _ => Err(corrupt(k, "is not a 64-bit integer")),
    };
    let at = match d.get("at") {
        Some(bson::Bson::DateTime(t)) => t.timestamp_millis(),
        _ => return Err(corrupt("at", "is not a date")),
    };
    if at.saturating_add(KEY_RETENTION_MS) <= now {
        return Ok(None);
    }
    Ok(Some(Key {
        caller: id.caller.clone(),
        key: id.id.clone(),
        first: int("first")?,
        count: int("count")?,
        at,
        version: int("version")?,
        max: int("max")?,
    }))
}

impl QueueStore {
    /// The queues of the dispenser whose sequences `sequences` holds.
    pub(crate) fn new(sequences: &Store) -> QueueStore {
        let name = format!("{}_queues", sequences.collection().name());
        QueueStore {
            store: sequences.sibling(&name),
            requests: sequences
                .sibling(&format!("{}_queue_requests", sequences.collection().name())),
        }
    }

    /// The server's time now (ms since the epoch), from the dispenser's reading of the
    /// server's clock.
    pub(crate) async fn now(&self) -> Result<i64> {
        self.store.server_now().await
    }

    /// The take that request id `id` made on the queue `name` of `incarnation`, if it left
    /// the ring and is younger than 24 hours at `now`.
    pub(crate) async fn find_request(
        &self,
        name: &str,
        incarnation: bson::oid::ObjectId,
        id: &RequestId,
        now: i64,
    ) -> Result<Option<Key>> {
        let found = self
            .requests
            .bounded_read(
                || format!("reading a request id of queue {name:?}"),
                self.requests
                    .collection()
                    .find_one(doc! { field::ID: request_key(name, incarnation, id) })
                    .projection(doc! { "first": 1, "count": 1, "version": 1, "max": 1, "at": 1 }),
            )
            .await?;
        found.map_or(Ok(None), |d| spilled_key(&d, name, id, now))
    }

    /// Writes request ids leaving the ring of queue `name` into the request collection,
    /// before the write that takes them out of the ring: inserted unordered, and an id
    /// already there (another writer spilled it first) is no error — its document says the
    /// same. Makes sure the TTL index exists (a no-op once it does).
    pub(crate) async fn spill(
        &self,
        name: &str,
        incarnation: bson::oid::ObjectId,
        keys: &[Key],
    ) -> Result<()> {
        let coll = self.requests.collection();
        self.requests
            .bounded_read(
                || format!("indexing the request ids of queue {name:?}"),
                coll.create_index(
                    mongodb::IndexModel::builder()
                        .keys(doc! { "at": 1 })
                        .options(
                            mongodb::options::IndexOptions::builder()
                                .expire_after(std::time::Duration::from_millis(
                                    KEY_RETENTION_MS.unsigned_abs(),
                                ))
                                .build(),
                        )
                        .build(),
                ),
            )
            .await?;
        let docs: Vec<Document> = keys
            .iter()
            .map(|k| {
                let id = RequestId {
                    caller: k.caller.clone(),
                    id: k.key.clone(),
                };
                doc! {
                    field::ID: request_key(name, incarnation, &id),
                    "queue": name, "incarnation": incarnation, "caller": &k.caller,
                    "key": &k.key, "first": k.first, "count": k.count, "version": k.version,
                    "max": k.max, "at": bson::DateTime::from_millis(k.at),
                }
            })
            .collect();
        let timeout = self.requests.timeout();
        let sent = coll.insert_many(docs).ordered(false).into_future();
        match tokio::time::timeout(timeout, sent).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) if only_duplicates(&e) => Ok(()),
            Ok(Err(e)) => Err(Error::database(
                format!(
                    "moving request ids of queue {name:?} out of its document (nothing was taken)"
                ),
                e,
            )),
            Err(_) => Err(Error::Timeout {
                context: format!(
                    "moving request ids of queue {name:?} out of its document (nothing was taken)"
                ),
                after: timeout,
                written: crate::error::Written::Nothing,
            }),
        }
    }

    /// Deletes the request ids of queue `name`: of its incarnation `incarnation`, or of all
    /// when `None` (a document that did not decode).
    async fn delete_requests(
        &self,
        name: &str,
        incarnation: Option<bson::oid::ObjectId>,
    ) -> Result<()> {
        let mut filter = doc! { "queue": name };
        if let Some(i) = incarnation {
            filter.insert("incarnation", i);
        }
        self.requests
            .bounded_read(
                || format!("deleting the request ids of queue {name:?}"),
                self.requests.collection().delete_many(filter),
            )
            .await
            .map(|_| ())
    }

    fn coll(&self) -> &mongodb::Collection<Document> {
        self.store.collection()
    }

    /// Inserts a new queue. `Ok(true)` when inserted, `Ok(false)` when the name exists.
    pub(crate) async fn insert(&self, name: &str, s: &State) -> Result<bool> {
        let d = document::encode(name, s);
        let timeout = self.store.timeout();
        match tokio::time::timeout(timeout, self.coll().insert_one(d).into_future()).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(e)) if is_duplicate_key(&e) => Ok(false),
            Ok(Err(e)) => Err(Error::database_as(
                format!("creating queue {name:?}"),
                e,
                Aftermath::Admin,
            )),
            Err(_) => Err(Error::timeout(
                format!("creating queue {name:?}"),
                timeout,
                Aftermath::Admin,
            )),
        }
    }

    async fn find(&self, name: &str) -> Result<Option<Document>> {
        self.store
            .bounded_read(
                || format!("reading queue {name:?}"),
                self.coll()
                    .find_one(doc! { field::ID: name })
                    .with_options(FindOneOptions::default()),
            )
            .await
    }

    /// The state. `Ok(None)` when there is no such queue.
    ///
    /// A document that does not decode is read again, twice, before it is refused: the
    /// local test server (mongo-java-server) encodes a reply after it released the
    /// collection's lock, so a read racing a write can see some fields of each (a desk
    /// showing the ticket just called beside the `served` before it). MongoDB reads a
    /// document whole; a document that is really corrupt fails all three reads.
    pub(crate) async fn load(&self, name: &str) -> Result<Option<State>> {
        let mut reads = 1;
        loop {
            let found = self.find(name).await?;
            match found.map(|d| document::decode(name, &d)).transpose() {
                Err(crate::error::Error::CorruptDocument { .. }) if reads < 3 => {
                    reads += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                decoded => return decoded,
            }
        }
    }

    /// Every queue named after `after` (all when `None`), by name, at most `limit` (all when
    /// `None`), only those whose names match the regular expression `names` when given; a
    /// document that does not decode is an error in its place.
    pub(crate) async fn list(
        &self,
        filter: Document,
        limit: Option<i64>,
    ) -> Result<Vec<Result<QueueState>>> {
        let mut opts = FindOptions::builder().sort(doc! { field::ID: 1 }).build();
        opts.limit = limit;
        let docs = self.find_all("listing queues", filter, opts).await?;
        Ok(docs.iter().map(status::decode_status).collect())
    }

    /// The counters of the queues named after `after` (from the first when `None`), by
    /// name, at most `limit`, read through a projection of the fields they need.
    pub(crate) async fn list_counters(
        &self,
        filter: Document,
        limit: Option<i64>,
    ) -> Result<Vec<Result<QueueCounters>>> {
        let mut opts = FindOptions::builder()
            .sort(doc! { field::ID: 1 })
            .projection(document::counters_projection())
            .build();
        opts.limit = limit;
        let docs = self
            .find_all("listing the queues' counters", filter, opts)
            .await?;
        Ok(docs.iter().map(status::decode_counters).collect())
    }

    /// The queue documents `filter` and `opts` find, within the operation timeout (`what`
    /// names the read in a timeout's message).
    async fn find_all(
        &self,
        what: &'static str,
        filter: Document,
        opts: FindOptions,
    ) -> Result<Vec<Document>> {
        self.store
            .bounded_read(|| what.to_owned(), async {
                self.coll()
                    .find(filter)
                    .with_options(opts)
                    .await?
                    .try_collect()
                    .await
            })
            .await
    }

    /// Deletes the queue `name` whatever its state (a document that does not decode), then
    /// its request ids; `Ok(false)` when there was none.
    pub(crate) async fn delete(&self, name: &str) -> Result<bool> {
        self.delete_where(name, doc! { field::ID: name }, None)
            .await
    }

    /// Deletes the queue `name` only if it is still exactly the state `expected` (as
    /// [`QueueStore::replace`] matches it), then its request ids: `Ok(false)` when it changed
    /// (a take landed, a desk called) or is gone, and nothing was deleted.
    pub(crate) async fn delete_unchanged(&self, name: &str, expected: &State) -> Result<bool> {
        self.delete_where(name, pinned(name, expected), Some(expected.incarnation))
            .await
    }

    async fn delete_where(
        &self,
        name: &str,
        filter: Document,
        incarnation: Option<bson::oid::ObjectId>,
    ) -> Result<bool> {
        let res = self
            .store
            .bounded_as(
                Aftermath::Admin,
                || format!("deleting queue {name:?}"),
                self.coll().delete_one(filter),
            )
            .await?;
        if res.deleted_count == 0 {
            return Ok(false);
        }
        // The request ids carry the incarnation, so none could answer for a queue created
        // again under the name; they are deleted only to leave nothing behind (those of the
        // deleted incarnation: a queue created again meanwhile keeps its own; they expire
        // within a day if this fails: the queue is deleted all the same).
        if let Err(e) = self.delete_requests(name, incarnation).await {
            tracing::warn!(queue = %name, "{e} (the queue is deleted; its request ids expire within a day)");
        }
        Ok(true)
    }

    /// The compare-and-set: replaces the queue by `next` only if it is still exactly the
    /// state `expected` (same incarnation, version and counters). `Ok(true)` when this write
    /// won, `Ok(false)` when another writer came first (or the queue is gone).
    pub(crate) async fn replace(
        &self,
        name: &str,
        expected: &State,
        next: &State,
        what: &str,
    ) -> Result<bool> {
        let filter = pinned(name, expected);
        let res = self
            .store
            .bounded_as(
                Aftermath::Queue,
                || format!("{what} queue {name:?}"),
                self.coll()
                    .replace_one(filter, document::encode(name, next)),
            )
            .await?;
        Ok(res.matched_count == 1)
    }
}

/// The filter of a write pinned to the state `expected` of queue `name`: its incarnation,
/// version and the counters the decoder checked.
fn pinned(name: &str, expected: &State) -> Document {
    doc! {
        field::ID: name,
        field::VERSION: expected.version,
        field::INCARNATION: expected.incarnation,
        field::TAKEN: expected.taken,
        field::SERVED: expected.served,
        field::WAITING: expected.waiting(),
    }
}

/// Whether an `insert_many` failed only on ids that exist already.
fn only_duplicates(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        mongodb::error::ErrorKind::InsertMany(m) => {
            m.write_concern_error.is_none()
                && m.write_errors
                    .as_ref()
                    .is_some_and(|w| !w.is_empty() && w.iter().all(|x| x.code == 11000))
        }
        _ => is_duplicate_key(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> RequestId {
        RequestId {
            caller: "kiosk".into(),
            id: "order-7".into(),
        }
    }

    fn spilled(at: i64) -> Document {
        doc! {
            "first": 40_i64, "count": 2_i32, "version": 9_i64, "max": i64::MAX,
            "at": bson::DateTime::from_millis(at),
        }
    }

    #[test]
    fn a_spilled_request_is_read_back_with_int32_or_int64_counters_for_24_hours() {
        let at = 1_700_000_000_000;
        let key = spilled_key(&spilled(at), "q", &id(), at + KEY_RETENTION_MS - 1)
            .expect("a well-formed document")
            .expect("younger than 24 hours");
        assert_eq!(
            key,
            Key {
                caller: "kiosk".into(),
                key: "order-7".into(),
                first: 40,
                count: 2,
                at,
                version: 9,
                max: i64::MAX,
            }
        );
        // At 24 hours exactly it is gone, as it is from the ring.
        assert_eq!(
            spilled_key(&spilled(at), "q", &id(), at + KEY_RETENTION_MS).expect("read"),
            None
        );
        // An `at` near the end of time does not overflow into the past.
        assert!(
            spilled_key(&spilled(i64::MAX - 5), "q", &id(), at)
                .expect("read")
                .is_some()
        );
    }

    #[test]
    fn a_spilled_request_with_a_field_of_another_type_is_corrupt_naming_it() {
        for (field, value, problem) in [
            (
                "first",
                bson::Bson::String("40".into()),
                "is not a 64-bit integer",
            ),
            ("count", bson::Bson::Double(2.0), "is not a 64-bit integer"),
            ("max", bson::Bson::Null, "is not a 64-bit integer"),
            ("at", bson::Bson::Int64(5), "is not a date"),
        ] {
            let mut d = spilled(0);
            d.insert(field, value);
            match spilled_key(&d, "q", &id(), 1) {
                Err(Error::CorruptDocument {
                    name,
                    field: f,
                    problem: p,
                    ..
                }) => {
                    assert_eq!(
                        (name.as_str(), f.as_str(), p.as_str()),
                        ("q/kiosk/order-7", field, problem)
                    );
                }
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_request_documents_id_names_the_queue_its_incarnation_the_caller_and_the_id() {
        let incarnation = bson::oid::ObjectId::parse_str("0123456789abcdef01234567").expect("hex");
        assert_eq!(
            request_key("q", incarnation, &id()),
            "q\u{1f}0123456789abcdef01234567\u{1f}kiosk\u{1f}order-7"
        );
    }
}
