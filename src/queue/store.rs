//! Where tickets are written: every MongoDB operation on a queue document, through the
//! crate's [`Store`] (its write concern, primary reads and operation timeout), on the
//! collection `<collection>_queues`. Each function is one round trip; results are read
//! through a projection.

use std::future::IntoFuture;

use bson::oid::ObjectId;
use bson::{DateTime, Document, doc};
use futures::TryStreamExt;
use mongodb::options::{FindOneAndUpdateOptions, FindOneOptions, FindOptions, ReturnDocument};

use super::document::{self, Stored, field};
use super::spec::{Op, QueueSpec};
use super::status::{self, QueueStatus};
use crate::error::{Error, Result};
use crate::store::{Store, is_duplicate_key};

/// The queue collection.
#[derive(Clone, Debug)]
pub(crate) struct QueueStore {
    store: Store,
}

/// The update of `op`: the counter it moves, `waiting` with it, and `version`.
fn update(op: Op) -> Document {
    let (counter, by, waiting) = match op {
        Op::Take(n) => {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            (field::TAKEN, n, n)
        }
        Op::Call => (field::SERVED, 1, -1_i64),
    };
    doc! {
        "$inc": { counter: by, field::WAITING: waiting, field::VERSION: 1_i64 },
        "$currentDate": { field::UPDATED_AT: true },
    }
}

fn what(op: Op) -> &'static str {
    match op {
        Op::Take(1) => "taking a ticket of",
        Op::Take(_) => "taking tickets of",
        Op::Call => "calling the next ticket of",
    }
}

impl QueueStore {
    /// The queues of the dispenser whose sequences `sequences` holds.
    pub(crate) fn new(sequences: &Store) -> QueueStore {
        let name = format!("{}_queues", sequences.collection().name());
        QueueStore {
            store: sequences.sibling(&name),
        }
    }

    fn coll(&self) -> &mongodb::Collection<Document> {
        self.store.collection()
    }

    /// Inserts an empty queue. `Ok(Some(incarnation))` when inserted, `Ok(None)` when the name
    /// exists already.
    pub(crate) async fn insert(&self, name: &str, spec: &QueueSpec) -> Result<Option<ObjectId>> {
        let incarnation = ObjectId::new();
        let d = document::new_document(name, spec, incarnation, DateTime::now());
        let timeout = self.store.timeout();
        match tokio::time::timeout(timeout, self.coll().insert_one(d).into_future()).await {
            Ok(Ok(_)) => Ok(Some(incarnation)),
            Ok(Err(e)) if is_duplicate_key(&e) => Ok(None),
            Ok(Err(e)) => Err(Error::database(format!("creating queue {name:?}"), e)),
            Err(_) => Err(Error::Timeout {
                context: format!("creating queue {name:?}"),
                after: timeout,
            }),
        }
    }

    async fn find(&self, name: &str) -> Result<Option<Document>> {
        let opts = FindOneOptions::builder()
            .projection(document::projection())
            .build();
        self.store
            .bounded_read(
                || format!("reading queue {name:?}"),
                self.coll()
                    .find_one(doc! { field::ID: name })
                    .with_options(opts),
            )
            .await
    }

    /// What the writes need. `Ok(None)` when there is no such queue.
    pub(crate) async fn load(&self, name: &str) -> Result<Option<Stored>> {
        let found = self.find(name).await?;
        found.map(|d| document::decode_stored(name, &d)).transpose()
    }

    /// The whole state. `Ok(None)` when there is no such queue.
    pub(crate) async fn load_status(&self, name: &str) -> Result<Option<QueueStatus>> {
        let found = self.find(name).await?;
        found.map(|d| status::decode_status(&d)).transpose()
    }

    /// Every queue, by name; a document that does not decode is an error in its place.
    pub(crate) async fn list(&self) -> Result<Vec<Result<QueueStatus>>> {
        let opts = FindOptions::builder()
            .projection(document::projection())
            .sort(doc! { field::ID: 1 })
            .build();
        let docs: Vec<Document> = self
            .store
            .bounded_read(|| "listing queues".to_owned(), async {
                self.coll()
                    .find(doc! {})
                    .with_options(opts)
                    .await?
                    .try_collect()
                    .await
            })
            .await?;
        Ok(docs.iter().map(status::decode_status).collect())
    }

    /// The conditional increment: does `op` in one `findAndModify` whose filter admits only a
    /// state where it is allowed — for a take, fewer than `spec`'s capacity waiting and the
    /// range `spec` (so the capacity compared is the stored one); for a call, someone
    /// waiting. Returns the state after the write, `None` when the filter matched nothing
    /// (full, nobody waiting, another range, no such queue, or fields another client stored
    /// as another type: the compare-and-set then decides from a fresh read).
    ///
    /// Its outcome depends only on the counters and range it matches, so it needs no
    /// incarnation in its filter.
    pub(crate) async fn increment(
        &self,
        name: &str,
        spec: &QueueSpec,
        op: Op,
    ) -> Result<Option<Stored>> {
        // Only a document whose counters agree (`waiting = taken - served`, what the decoder
        // checks) is written: a corrupt one is left alone, and refused after a fresh read.
        let consistent = doc! {
            "$eq": [ format!("${}", field::WAITING), { "$subtract": [ format!("${}", field::TAKEN), format!("${}", field::SERVED) ] } ]
        };
        let filter = match op {
            Op::Take(n) => {
                let capacity = i64::try_from(spec.capacity()).unwrap_or(i64::MAX);
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                // Room for `n` more: the waiting tickets and, once one was called, the ticket
                // shown as now serving stay within the capacity.
                let room = |shown: i64| capacity.saturating_sub(n).saturating_sub(shown);
                doc! {
                    field::ID: name,
                    field::MIN: spec.min,
                    field::MAX: spec.max,
                    field::WAITING: { "$type": "long" },
                    field::TAKEN: { "$type": "long", "$lte": i64::MAX.saturating_sub(n) },
                    "$or": [
                        { field::SERVED: 0_i64, field::WAITING: { "$lte": room(0) } },
                        { field::SERVED: { "$type": "long", "$gt": 0_i64 }, field::WAITING: { "$lte": room(1) } },
                    ],
                    "$expr": consistent,
                }
            }
            Op::Call => doc! {
                field::ID: name,
                field::WAITING: { "$type": "long", "$gt": 0_i64 },
                field::SERVED: { "$type": "long" },
                field::TAKEN: { "$type": "long" },
                "$expr": consistent,
            },
        };
        let opts = FindOneAndUpdateOptions::builder()
            .return_document(ReturnDocument::After)
            .projection(document::projection())
            .build();
        let found = self
            .store
            .bounded(
                || format!("{} queue {name:?}", what(op)),
                self.coll()
                    .find_one_and_update(filter, update(op))
                    .with_options(opts),
            )
            .await?;
        found.map(|d| document::decode_stored(name, &d)).transpose()
    }

    /// Deletes the queue `name`; `Ok(false)` when there was none.
    pub(crate) async fn delete(&self, name: &str) -> Result<bool> {
        let res = self
            .store
            .bounded(
                || format!("deleting queue {name:?}"),
                self.coll().delete_one(doc! { field::ID: name }),
            )
            .await?;
        Ok(res.deleted_count == 1)
    }

    /// The compare-and-set: does `op` only if the queue is still exactly the state
    /// `expected` (same incarnation and version). `Ok(true)` when this write won, `Ok(false)`
    /// when another writer came first.
    pub(crate) async fn compare_and_set(
        &self,
        name: &str,
        expected: &Stored,
        op: Op,
    ) -> Result<bool> {
        let filter = doc! {
            field::ID: name,
            field::VERSION: expected.version,
            field::INCARNATION: expected.incarnation,
        };
        let res = self
            .store
            .bounded(
                || format!("{} queue {name:?}", what(op)),
                self.coll().update_one(filter, update(op)),
            )
            .await?;
        Ok(res.matched_count == 1)
    }
}
