//! The history of admin operations: who created, altered, advanced, reset or deleted a
//! sequence, voided or released a gap-free number, changed a longest lease, created, altered,
//! deleted a queue or cancelled a ticket — when (by the server's clock), with which
//! parameters, the state before and after, and how it ended.
//!
//! Every such operation of the library records itself, so the command line and the service,
//! which act through it, do too: in the collection `<collection>_history` beside the
//! sequences (`dispensers_history` by default), as two inserts — its **intent** before the
//! operation starts (no change is made unless that record is on the server) and its
//! **outcome** after it. Records are never updated or deleted by the library. Who acted is
//! the dispenser's [`Options::caller`](crate::Options::caller): the token's name in the
//! service, `--caller` (by default the OS user and host, `user@host`) in the command line;
//! a library dispenser without a caller records `who: null`.
//!
//! What it holds and what it proves:
//!
//! - An operation refused by the state it finds (a reset that would go backwards without
//!   force, a cancel of a ticket that does not wait) is recorded `refused` when the refusal
//!   came from the operation itself; bad input (a malformed name, an invalid spec or
//!   argument, a refusal the state read before shows) is refused before anything is written,
//!   history included.
//! - A crash (or a lost connection) between the two writes leaves an entry `pending`: its
//!   change may or may not have been made, and the state — or the next entry's `before` —
//!   tells which. An operation whose write failed with its outcome unknown is `failed`.
//! - `before` and `after` are the states read just before and just after the operation:
//!   draws by other clients may fall between those reads and the change.
//! - Draws, takes and calls are not admin operations and are not recorded.
//! - The history proves what the library's clients recorded. Anyone with write access to
//!   the database can still change a sequence without a record, or edit and delete records:
//!   give the clients only `insert` and `find` on the history collection, and the right to
//!   change it to no one (see the guide's
//!   [deploying chapter](crate::guide::deploying#least-privilege-for-the-history)).
//!
//! # Example
//!
//! ```no_run
//! use dispenser::{Dispenser, Options, history::HistoryQuery};
//!
//! # async fn f() -> dispenser::Result<()> {
//! let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default().with_caller("billing-admin")).await?;
//! d.open("invoices").await?.reset(dispenser::sequence::Reset::to(1000)).await?;
//! for e in d.history("invoices", &HistoryQuery::default()).await? {
//!     println!("{} {} by {:?}: {}", e.at, e.op, e.who, e.outcome.as_str());
//! }
//! # Ok(()) }
//! ```

mod entry;
pub(crate) mod record;
pub(crate) mod states;

use bson::{Document, doc};
use futures::TryStreamExt;
use mongodb::options::FindOptions;

pub use entry::{HistoryEntry, HistoryQuery, MAX_HISTORY_PAGE, Outcome, Subject};

use crate::dispenser::Dispenser;
use crate::error::Result;
use entry::field;

impl Dispenser {
    /// The history of the sequence (its stripes included) or queue `name`, as `query` says:
    /// oldest first, at most `query.limit` entries (continue with
    /// [`HistoryQuery::with_after`] and the last entry's [`HistoryEntry::cursor`]). Two
    /// queries, whatever the length of the history. A name without history (or without a
    /// document) has an empty history.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a limit outside 1 to
    /// [`MAX_HISTORY_PAGE`] or a cursor that is not one; [`Error::CorruptDocument`](crate::Error::CorruptDocument) for a record
    /// that does not decode; [`Error::Database`](crate::Error::Database),
    /// [`Error::Timeout`](crate::Error::Timeout).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::history::HistoryQuery;
    /// let last_day = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24);
    /// for e in d.history("lobby", &HistoryQuery::queue().with_since(last_day)).await? {
    ///     println!("{}", e.to_json());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn history(&self, name: &str, query: &HistoryQuery) -> Result<Vec<HistoryEntry>> {
        let filter = query.filter(name)?;
        let store = self
            .store()
            .sibling(&record::collection_name(&self.options().collection));
        let coll = store.collection();
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let intents: Vec<Document> = store
            .bounded_read(|| format!("reading the history of {name:?}"), async {
                coll.find(filter)
                    .with_options(
                        FindOptions::builder()
                            .sort(doc! { field::AT: 1, field::ID: 1 })
                            .limit(limit)
                            .build(),
                    )
                    .await?
                    .try_collect()
                    .await
            })
            .await?;
        if intents.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<_> = intents
            .iter()
            .filter_map(|d| d.get_object_id(field::ID).ok())
            .collect();
        let outcomes: Vec<Document> = store
            .bounded_read(|| format!("reading the history of {name:?}"), async {
                coll.find(doc! { field::PHASE: field::OUTCOME_PHASE, field::OF: { "$in": ids } })
                    .await?
                    .try_collect()
                    .await
            })
            .await?;
        intents
            .iter()
            .map(|intent| {
                let id = intent.get_object_id(field::ID).ok();
                let outcome = outcomes
                    .iter()
                    .find(|o| id.is_some() && o.get_object_id(field::OF).ok() == id);
                entry::entry(intent, outcome)
            })
            .collect()
    }
}
