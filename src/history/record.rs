//! Writing the history: a record of each admin operation's **intent**, written (and
//! acknowledged) before the operation starts, and a record of its **outcome** after it. Both
//! are inserts into `<collection>_history`; nothing there is ever updated or deleted by the
//! library, so its writers need only the `insert` privilege on it.
//!
//! Why two records: the test server, like any MongoDB deployment without transactions, cannot
//! write a record and change another document in one atomic write, and a sequence's,
//! queue's or gap-free sequence's document is written by many clients in other languages
//! that know nothing of a history. So the intent comes first: no change is made unless its
//! record is on the server. A crash (or a lost connection) between the two writes leaves an
//! intent without an outcome — an entry shown `pending` — whose change may or may not have
//! been made: the state (and the next entry's `before`) tells which. Never a change without
//! its record.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, doc};
use mongodb::Collection;

use super::entry::{Subject, field};
use crate::document::SequenceState;
use crate::error::{Aftermath, Error, Result};
use crate::store::Store;

/// Writes the history of one dispenser's collections, as one caller.
#[derive(Clone, Debug)]
pub(crate) struct Recorder {
    coll: Collection<Document>,
    timeout: Duration,
    who: Option<String>,
}

/// The history collection of a sequences collection.
pub(crate) fn collection_name(sequences: &str) -> String {
    format!("{sequences}_history")
}

impl Recorder {
    /// The recorder of the sequences collection `store`'s history, acting as `who`.
    pub(crate) fn new(store: &Store, who: Option<&str>) -> Recorder {
        let history = store.sibling(&collection_name(store.collection().name()));
        Recorder {
            coll: history.collection().clone(),
            timeout: history.timeout(),
            who: who.map(str::to_owned),
        }
    }

    /// The same recorder acting as `who`.
    pub(crate) fn as_caller(&self, who: &str) -> Recorder {
        Recorder {
            who: Some(who.to_owned()),
            ..self.clone()
        }
    }

    /// The server's clock (its `hello` reply's `localTime`), and whether this process's
    /// clock stands in for it (a server that does not say its time).
    async fn now(&self) -> Result<(DateTime, bool)> {
        let db = self
            .coll
            .client()
            .database(self.coll.namespace().db.as_str());
        let reply = tokio::time::timeout(self.timeout, db.run_command(doc! { "hello": 1 }))
            .await
            .map_err(|_| {
                Error::timeout(
                    "asking the server its time for the history",
                    self.timeout,
                    Aftermath::Intent,
                )
            })?
            .map_err(|e| Error::database("asking the server its time for the history", e))?;
        Ok(match reply.get_datetime("localTime") {
            Ok(t) => (*t, false),
            Err(_) => (DateTime::now(), true),
        })
    }

    /// Inserts `record` with the server's time.
    async fn insert(&self, mut record: Document, what: &str) -> Result<()> {
        let (at, client_clock) = self.now().await?;
        record.insert(field::AT, at);
        if client_clock {
            record.insert(field::CLOCK, "client");
        }
        match tokio::time::timeout(self.timeout, self.coll.insert_one(record)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(Error::database(what, e)),
            Err(_) => Err(Error::timeout(what, self.timeout, Aftermath::Intent)),
        }
    }

    /// Records the intent of `op` on `name` (its parameters and the state before); the
    /// operation must start only once this returned `Ok`.
    ///
    /// # Errors
    ///
    /// [`Error::Database`] or [`Error::Timeout`]: the operation must not be made.
    pub(crate) async fn begin(
        &self,
        subject: Subject,
        name: &str,
        op: &str,
        params: Document,
        before: Option<Document>,
    ) -> Result<Entry<'_>> {
        let id = ObjectId::new();
        let who = self.who.clone().map_or(Bson::Null, Bson::String);
        let record = doc! {
            field::ID: id,
            field::PHASE: field::INTENT,
            field::KIND: subject.as_str(),
            field::NAME: name,
            field::OP: op,
            field::PARAMS: params,
            field::WHO: who,
            field::BEFORE: before.map_or(Bson::Null, Bson::Document),
        };
        self.insert(
            record,
            &format!(
                "recording {op} of {} {name:?} in the history",
                subject.as_str()
            ),
        )
        .await?;
        Ok(Entry {
            recorder: self,
            id,
            subject,
            name: name.to_owned(),
            op: op.to_owned(),
        })
    }
}

impl Recorder {
    /// Runs the admin operation `run` with its history: the intent of `op` on `name` (with
    /// `params` and the state `before`) is recorded first — `run` is not started unless it
    /// was — and the outcome after, with the state `after` makes of what `run` returned.
    ///
    /// # Errors
    ///
    /// Those of [`Recorder::begin`] (nothing done), else what `run` returned.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run<T>(
        &self,
        subject: Subject,
        name: &str,
        op: &str,
        params: Document,
        before: Option<Document>,
        run: impl Future<Output = Result<T>>,
        after: impl FnOnce(&T) -> Option<Document>,
    ) -> Result<T> {
        let entry = self.begin(subject, name, op, params, before).await?;
        let result = run.await;
        let state = result.as_ref().ok().and_then(after);
        entry.end(&result, state).await;
        result
    }
}

/// An operation whose intent is recorded: [`Entry::end`] records its outcome.
pub(crate) struct Entry<'r> {
    recorder: &'r Recorder,
    id: ObjectId,
    subject: Subject,
    name: String,
    op: String,
}

impl Entry<'_> {
    /// Records how the operation ended (`after`: the state read after it). A failure to
    /// write it is logged and leaves the entry `pending`; the operation's own result stands.
    pub(crate) async fn end<T>(self, result: &Result<T>, after: Option<Document>) {
        let mut record = doc! {
            field::PHASE: field::OUTCOME_PHASE,
            field::OF: self.id,
            field::KIND: self.subject.as_str(),
            field::NAME: &self.name,
            field::AFTER: after.map_or(Bson::Null, Bson::Document),
        };
        match result {
            Ok(_) => {
                record.insert(field::OUTCOME, "done");
            }
            Err(e) => {
                record.insert(
                    field::OUTCOME,
                    if unknown(e) { "failed" } else { "refused" },
                );
                record.insert(field::ERROR, e.to_string());
            }
        }
        let what = format!(
            "recording the outcome of {} of {} {:?} in the history",
            self.op,
            self.subject.as_str(),
            self.name
        );
        if let Err(e) = self.recorder.insert(record, &what).await {
            tracing::warn!(
                "{e} (the history shows the operation pending; its change stands or not as it was made)"
            );
        }
    }
}

/// Whether an operation that failed with `e` may still have made its change.
fn unknown(e: &Error) -> bool {
    matches!(e, Error::Database { .. } | Error::Timeout { .. })
}

/// A sequence's state as the history keeps it: its value, next number, shape, format,
/// cycles and version (not its usage counters).
pub(crate) fn sequence_state(s: &SequenceState) -> Document {
    let mut d = doc! {
        "value": s.value,
        "next": s.next_number().map_or(Bson::Null, Bson::Int64),
        "step": s.step,
        "min": s.min,
        "max": s.max,
        "cycle": s.cycle,
        "cycles": s.cycles,
        "version": s.version,
        "format": s.format.as_ref().map_or(Bson::Null, |f| Bson::String(f.as_str().to_owned())),
    };
    if let Some(t) = s.incarnation {
        d.insert("incarnation", t.to_hex());
    }
    if let Some(st) = s.stripe {
        d.insert("stripe", doc! { "index": st.index, "count": st.count });
    }
    d
}
