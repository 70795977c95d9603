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
//!   force, a cancel of a ticket that does not wait, a name already taken by a racing
//!   create) is recorded: its intent, then its outcome `refused` with the error the caller
//!   got — whether the state read before the operation or its write showed the refusal.
//!   Bad input (a malformed name, an invalid spec or argument) and a name that is not there
//!   (a reset of a sequence that does not exist) are refused before anything is written,
//!   history included.
//! - A crash (or a lost connection) between the two writes leaves an entry `pending`: its
//!   change may or may not have been made, and the state — or the next entry's `before` —
//!   tells which. An operation whose write failed with its outcome unknown is `failed`.
//! - `before` and `after` are the states read just before and just after the operation:
//!   draws by other clients may fall between those reads and the change.
//! - A scope made by its first draw has a `create` record (its template's next number is
//!   its start); each scope [`Dispenser::delete_scopes_before`](crate::Dispenser::delete_scopes_before) deletes has a `delete`
//!   record of its own, beside the template's `delete-scopes`.
//! - Draws, takes and calls are not admin operations and are not recorded.
//! - The history proves what the library's clients recorded. Anyone with write access to
//!   the database can still change a sequence without a record, or edit and delete records:
//!   give the clients only `insert` and `find` on the history collection, and the right to
//!   change it to no one (see the guide's
//!   [deploying chapter](crate::guide::deploying#least-privilege-for-the-history)).
//!
//! # What a record names, and what a read returns
//!
//! Every record names its **kind** and its **exact subject**, and a read returns the records
//! of exactly the subjects it asks for — by equality, never because a name starts with
//! another (a token allowed `pub` never reads the history of a gap-free `pub~hidden` or of
//! scope `pub@a~secret` through it):
//!
//! | subject | `kind` | `name` | more fields | read by |
//! |---|---|---|---|---|
//! | a sequence (plain, a template, a striped sequence as a whole) | `sequence` | its name | | `history("ids")`, with its stripes |
//! | stripe *i* of the striped sequence `ids` | `stripe` | `ids` | `stripe`: *i* | `history("ids")` and `history("ids~3")` |
//! | scope `k` of template `t` | `scope` | `t@k` | `template`, `key` | `history("t@k")` |
//! | a gap-free sequence | `gapless` | its name | | `history(name, &HistoryQuery::gapless())` |
//! | a queue | `queue` | its name | | `history(name, &HistoryQuery::queue())` |
//!
//! A record is `{_id, phase: "intent", kind, name, …, op, params, who, at, before}` and its
//! outcome `{_id, phase: "outcome", of: <the intent's _id>, kind, name, …, at, outcome,
//! error, after}` (`clock: "client"` beside `at` when the server did not say its time). The
//! library creates two indexes with the collection, before a dispenser's first record:
//! `reads` on `{phase, name, kind, at, _id}` (a read's intents: equality, then its order)
//! and `outcomes` on `{of}` (unique and sparse: one outcome per intent). Without them (a
//! database user without the right to create indexes: the first record logs it) the reads
//! are the same, only slower.
//!
//! Records written before kinds were recorded have kind `sequence` for every sequence,
//! stripe, scope and gap-free sequence, and a stripe's document name (`ids~3`) as its name.
//! They are read by that exact name: `ids~3`'s with stripe 3's history (`history("ids~3")`,
//! not `history("ids")`), `t@k`'s with the scope's, and a gap-free sequence's — told apart
//! by their operations, `void`, `release`, `max-lease` and a `create` whose parameters say
//! `gapless: true` — with the gap-free sequence's. Entries show them with their kind.
//!
//! # Example
//!
//! ```no_run
//! use dispenser::{Dispenser, error::Kind, Options};
//!
//! # async fn f() -> dispenser::Result<()> {
//! let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default().with_caller("billing-admin")).await?;
//! let invoices = d.open("invoices").await?;
//! invoices.reset(1000).await?;
//! for e in invoices.history().limit(50).await? {
//!     println!("{} {} by {:?}: {}", e.at, e.op, e.who, e.outcome.as_str());
//! }
//! // What no handle opens: a deleted queue's history.
//! for e in d.history(Kind::Queue, "old-lobby").await? {
//!     println!("{} {} by {:?}: {}", e.at, e.op, e.who, e.outcome.as_str());
//! }
//! # Ok(()) }
//! ```

mod entry;
pub(crate) mod record;
pub(crate) mod subject;

use std::collections::HashMap;

use bson::oid::ObjectId;
use bson::{Document, doc};
use futures::TryStreamExt;
use mongodb::options::FindOptions;

pub(crate) use entry::HistoryQuery;
pub use entry::{HistoryEntry, MAX_HISTORY_PAGE, Outcome};
pub use subject::Subject;

use crate::error::Result;
use crate::store::Store;
use subject::field;

/// A read of one subject's history: [`Sequence::history`](crate::Sequence::history),
/// [`StripedSequence::history`](crate::stripe::StripedSequence::history),
/// [`Queue::history`](crate::queue::Queue::history),
/// [`Gapless::history`](crate::gapless::Gapless::history), or
/// [`Dispenser::history`](crate::Dispenser::history) for what no handle opens (a deleted
/// one). `.await` it for the entries, oldest first: at most 100 unless [`History::limit`]
/// (continue with [`History::after`] and the last entry's [`HistoryEntry::cursor`]). Two
/// queries, whatever the length of the history, each served by an index the library creates
/// with the collection (see [record](self#what-a-record-names-and-what-a-read-returns)). A
/// name without history (or without a document) has an empty history.
///
/// The read returns the records of exactly the subject it asks for, never those of a name
/// that merely starts with the name: for a sequence, a sequence `ids` with its stripes
/// `ids~0 …` (a striped sequence's history), one stripe `ids~3`, or one scope `t@k`; for a
/// gap-free sequence or a queue, that one.
///
/// # Errors
///
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a limit outside 1 to
/// [`MAX_HISTORY_PAGE`] or a cursor that is not one;
/// [`Error::CorruptDocument`](crate::Error::CorruptDocument) for a record that does not
/// decode; [`Error::Database`](crate::Error::Database),
/// [`Error::Timeout`](crate::Error::Timeout).
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
///
/// # Example
///
/// ```no_run
/// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
/// let last_day = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24);
/// for e in lobby.history().since(last_day).await? {
///     println!("{}", e.to_json());
/// }
/// # Ok(()) }
/// ```
#[must_use = "a history read does nothing until it is awaited"]
#[derive(Clone, Debug)]
pub struct History {
    store: Store,
    name: String,
    query: HistoryQuery,
}

impl History {
    pub(crate) fn new(store: Store, subject: Subject, name: &str) -> Self {
        History {
            store,
            name: name.to_owned(),
            query: HistoryQuery::of(subject),
        }
    }

    /// Only entries at or after `since` (the server's clock). Defaults to every one.
    pub fn since(mut self, since: jiff::Timestamp) -> Self {
        self.query.since = Some(since);
        self
    }

    /// Only entries after `cursor` ([`HistoryEntry::cursor`] of the last entry of the
    /// previous page). Defaults to the first.
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.query.after = Some(cursor.into());
        self
    }

    /// At most `limit` entries (1 to [`MAX_HISTORY_PAGE`]). Defaults to 100.
    pub fn limit(mut self, limit: usize) -> Self {
        self.query.limit = limit;
        self
    }

    /// The filter of the records this read asks for (their intents: each entry's outcome
    /// is then looked up by its `of`), as the library sends it to the history collection
    /// (`<collection>_history`) — for a tool that reads the collection itself with the same
    /// filter, [`History::sort`] and the limit.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a limit outside 1 to
    /// [`MAX_HISTORY_PAGE`] or a cursor that is not one.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let f = d.history(dispenser::error::Kind::Queue, "lobby").filter()?;
    /// assert_eq!((f.get_str("name").ok(), f.get_str("kind").ok()), (Some("lobby"), Some("queue")));
    /// # Ok(()) }
    /// ```
    pub fn filter(&self) -> Result<Document> {
        self.query.filter(&self.name)
    }

    /// The order of a read: oldest first, `{at: 1, _id: 1}` (see [`History::filter`]).
    pub fn sort(&self) -> Document {
        self.query.sort()
    }
}

impl std::future::IntoFuture for History {
    type Output = Result<Vec<HistoryEntry>>;
    type IntoFuture =
        std::pin::Pin<Box<dyn std::future::Future<Output = Self::Output> + Send + 'static>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { read(&self.store, &self.name, &self.query).await })
    }
}

/// The history of `name` as `query` says, read from `store`, the history collection (see
/// [`Dispenser::history`](crate::Dispenser::history)).
pub(crate) async fn read(
    store: &Store,
    name: &str,
    query: &HistoryQuery,
) -> Result<Vec<HistoryEntry>> {
    let filter = query.filter(name)?;
    let coll = store.collection();
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let intents: Vec<Document> = store
        .bounded_read(|| format!("reading the history of {name:?}"), async {
            coll.find(filter)
                .with_options(
                    FindOptions::builder()
                        .sort(query.sort())
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
    // Only outcomes have `of`: the filter is the `outcomes` index's key alone, so a server
    // that uses an index only for a filter on exactly its keys uses it too.
    let outcomes: Vec<Document> = store
        .bounded_read(|| format!("reading the history of {name:?}"), async {
            coll.find(doc! { field::OF: { "$in": ids } })
                .await?
                .try_collect()
                .await
        })
        .await?;
    let by_intent: HashMap<ObjectId, &Document> = outcomes
        .iter()
        .filter(|o| o.get_str(field::PHASE) == Ok(field::OUTCOME_PHASE))
        .filter_map(|o| Some((o.get_object_id(field::OF).ok()?, o)))
        .collect();
    intents
        .iter()
        .map(|intent| {
            let outcome = intent
                .get_object_id(field::ID)
                .ok()
                .and_then(|id| by_intent.get(&id).copied());
            entry::entry(intent, outcome)
        })
        .collect()
}
