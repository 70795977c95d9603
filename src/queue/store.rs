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
use super::state::State;
use super::status::{self, QueueStatus};
use crate::error::{Aftermath, Error, Result};
use crate::store::{Store, is_duplicate_key};

/// The queue collection.
#[derive(Clone, Debug)]
pub(crate) struct QueueStore {
    store: Store,
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

    /// Inserts a new queue. `Ok(true)` when inserted, `Ok(false)` when the name exists.
    pub(crate) async fn insert(&self, name: &str, s: &State) -> Result<bool> {
        let d = document::encode(name, s);
        let timeout = self.store.timeout();
        match tokio::time::timeout(timeout, self.coll().insert_one(d).into_future()).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(e)) if is_duplicate_key(&e) => Ok(false),
            Ok(Err(e)) => Err(Error::database(format!("creating queue {name:?}"), e)),
            Err(_) => Err(Error::Timeout {
                context: format!("creating queue {name:?} (the queue may or may not exist)"),
                after: timeout,
            }),
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
    /// `None`); a document that does not decode is an error in its place.
    pub(crate) async fn list(
        &self,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Vec<Result<QueueStatus>>> {
        let mut opts = FindOptions::builder().sort(doc! { field::ID: 1 }).build();
        opts.limit = limit;
        let filter = match after {
            Some(a) => doc! { field::ID: { "$gt": a } },
            None => doc! {},
        };
        let docs: Vec<Document> = self
            .store
            .bounded_read(|| "listing queues".to_owned(), async {
                self.coll()
                    .find(filter)
                    .with_options(opts)
                    .await?
                    .try_collect()
                    .await
            })
            .await?;
        Ok(docs.iter().map(status::decode_status).collect())
    }

    /// Deletes the queue `name`; `Ok(false)` when there was none.
    pub(crate) async fn delete(&self, name: &str) -> Result<bool> {
        let res = self
            .store
            .bounded_as(
                Aftermath::Read,
                || format!("deleting queue {name:?} (it may or may not be deleted)"),
                self.coll().delete_one(doc! { field::ID: name }),
            )
            .await?;
        Ok(res.deleted_count == 1)
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
        let filter = doc! {
            field::ID: name,
            field::VERSION: expected.version,
            field::INCARNATION: expected.incarnation,
            field::TAKEN: expected.taken,
            field::SERVED: expected.served,
            field::WAITING: expected.waiting(),
        };
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
