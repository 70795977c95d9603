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

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, doc};
use mongodb::options::IndexOptions;
use mongodb::{Collection, IndexModel};

use super::subject::{Target, field};
use crate::document::SequenceState;
use crate::error::{Aftermath, Error, Result};
use crate::store::Store;

/// Writes the history of one dispenser's collections, as one caller.
#[derive(Clone, Debug)]
pub(crate) struct Recorder {
    /// The history collection, for reads ([`Recorder::history`]).
    reader: Store,
    coll: Collection<Document>,
    timeout: Duration,
    who: Option<String>,
    /// The collections whose indexes the dispenser made sure of (shared by its clones).
    indexed: Arc<Mutex<HashSet<String>>>,
}

/// The indexes of a history collection: what the reads filter and sort on. `reads` serves
/// a read's intents (equality on `phase`, `name` and `kind`, then in order of `at` and
/// `_id`); `outcomes` finds an entry's outcome by its `of`, and keeps it one per intent
/// (unique; sparse: intents have no `of`).
pub(crate) fn indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder()
            .keys(doc! {
                field::PHASE: 1, field::NAME: 1, field::KIND: 1, field::AT: 1, field::ID: 1,
            })
            .options(IndexOptions::builder().name("reads".to_owned()).build())
            .build(),
        IndexModel::builder()
            .keys(doc! { field::OF: 1 })
            .options(
                IndexOptions::builder()
                    .name("outcomes".to_owned())
                    .unique(true)
                    .sparse(true)
                    .build(),
            )
            .build(),
    ]
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
            indexed: store.indexed(),
            reader: history,
        }
    }

    /// A read of the history of `name`, a `subject`.
    pub(crate) fn history(&self, subject: super::Subject, name: &str) -> super::History {
        super::History::new(self.reader.clone(), subject, name)
    }

    /// Creates the history's [`indexes`] with the collection: before this dispenser's first
    /// record (a no-op on the server once they exist). A failure — a database user with only
    /// `insert` and `find` on the history, as the deploying chapter advises, or an index of
    /// the same keys made by hand with other options — is logged, once, and never stops the
    /// operation: the reads are right without the indexes, only slower.
    async fn ensure_indexes(&self) {
        let name = self.coll.name().to_owned();
        {
            let mut done = self.indexed.lock().unwrap_or_else(|p| p.into_inner());
            if !done.insert(name.clone()) {
                return;
            }
        }
        let made = tokio::time::timeout(self.timeout, self.coll.create_indexes(indexes())).await;
        let problem = match made {
            Ok(Ok(_)) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {:?}", self.timeout),
        };
        tracing::warn!(
            "could not create the indexes of the history collection {name:?} ({problem}): its \
             reads are right but scan the collection; create them as the deploying chapter shows"
        );
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

    /// Inserts `records` with the server's time, in one write.
    async fn insert(&self, mut records: Vec<Document>, what: &str) -> Result<()> {
        self.ensure_indexes().await;
        let (at, client_clock) = self.now().await?;
        for record in &mut records {
            record.insert(field::AT, at);
            if client_clock {
                record.insert(field::CLOCK, "client");
            }
        }
        let sent = async {
            if records.len() == 1 {
                self.coll.insert_one(&records[0]).await.map(drop)
            } else {
                self.coll.insert_many(&records).await.map(drop)
            }
        };
        match tokio::time::timeout(self.timeout, sent).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::database(what, e)),
            Err(_) => Err(Error::timeout(what, self.timeout, Aftermath::Intent)),
        }
    }

    /// Records the intent of `op` on `target` (its parameters and the state before); the
    /// operation must start only once this returned `Ok`.
    ///
    /// # Errors
    ///
    /// [`Error::Database`] or [`Error::Timeout`]: the operation must not be made.
    pub(crate) async fn begin(
        &self,
        target: &Target,
        op: &str,
        params: Document,
        before: Option<Document>,
    ) -> Result<Entry<'_>> {
        let mut entries = self
            .begin_many(op, vec![(target.clone(), params, before)])
            .await?;
        entries.pop().ok_or_else(|| {
            Error::invalid_argument("history", "no record was written for the operation")
        })
    }

    /// Records the intents of one operation `op` on several subjects, each with its
    /// parameters and state before, in one write (see [`Recorder::begin`]).
    pub(crate) async fn begin_many(
        &self,
        op: &str,
        items: Vec<(Target, Document, Option<Document>)>,
    ) -> Result<Vec<Entry<'_>>> {
        let who = self.who.clone().map_or(Bson::Null, Bson::String);
        let mut records = Vec::with_capacity(items.len());
        let mut entries = Vec::with_capacity(items.len());
        for (target, params, before) in items {
            let id = ObjectId::new();
            let mut record = doc! { field::ID: id, field::PHASE: field::INTENT };
            record.extend(target.fields());
            record.extend(doc! {
                field::OP: op,
                field::PARAMS: params,
                field::WHO: who.clone(),
                field::BEFORE: before.map_or(Bson::Null, Bson::Document),
            });
            records.push(record);
            entries.push(Entry {
                recorder: self,
                id,
                target,
                op: op.to_owned(),
            });
        }
        let what = match entries.as_slice() {
            [one] => format!("recording {op} of {} in the history", one.target.shown()),
            many => format!("recording {op} of {} subjects in the history", many.len()),
        };
        if !records.is_empty() {
            self.insert(records, &what).await?;
        }
        Ok(entries)
    }

    /// Runs the admin operation `run` with its history: the intent of `op` on `target` (with
    /// `params` and the state `before`) is recorded first — `run` is not started unless it
    /// was — and the outcome after, with the state `after` makes of what `run` returned.
    ///
    /// # Errors
    ///
    /// Those of [`Recorder::begin`] (nothing done), else what `run` returned.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run<T>(
        &self,
        target: &Target,
        op: &str,
        params: Document,
        before: Option<Document>,
        run: impl Future<Output = Result<T>>,
        after: impl FnOnce(&T) -> Option<Document>,
    ) -> Result<T> {
        let entry = self.begin(target, op, params, before).await?;
        let result = run.await;
        let state = result.as_ref().ok().and_then(after);
        entry.end(&result, state).await;
        result
    }

    /// Records a refusal the state read before the operation shows: its intent and its
    /// `refused` outcome, so that the history holds every refused change (a reset that
    /// would go backwards without force), not only those the write itself refused. Returns
    /// `refusal`, the error the caller gets; a failure to record is logged.
    pub(crate) async fn refused(
        &self,
        target: &Target,
        op: &str,
        params: Document,
        before: Option<Document>,
        refusal: Error,
    ) -> Error {
        match self.begin(target, op, params, before).await {
            Ok(entry) => entry.end::<()>(&Err(refusal.clone()), None).await,
            Err(e) => tracing::warn!("{e} (the refusal is not in the history)"),
        }
        refusal
    }
}

/// An operation whose intent is recorded: [`Entry::end`] records its outcome.
pub(crate) struct Entry<'r> {
    recorder: &'r Recorder,
    id: ObjectId,
    target: Target,
    op: String,
}

impl Entry<'_> {
    /// The outcome record of this entry: how `result` ended, and `after`.
    fn outcome<T>(&self, result: &Result<T>, after: Option<Document>) -> Document {
        let mut record = doc! { field::PHASE: field::OUTCOME_PHASE, field::OF: self.id };
        record.extend(self.target.fields());
        record.insert(field::AFTER, after.map_or(Bson::Null, Bson::Document));
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
        record
    }

    /// Records how the operation ended (`after`: the state read after it). A failure to
    /// write it is logged and leaves the entry `pending`; the operation's own result stands.
    pub(crate) async fn end<T>(self, result: &Result<T>, after: Option<Document>) {
        let record = self.outcome(result, after);
        let what = format!(
            "recording the outcome of {} of {} in the history",
            self.op,
            self.target.shown()
        );
        if let Err(e) = self.recorder.insert(vec![record], &what).await {
            tracing::warn!(
                "{e} (the history shows the operation pending; its change stands or not as it was made)"
            );
        }
    }

    /// Records how each of `entries` ended, in one write (see [`Entry::end`]).
    pub(crate) async fn end_many<T>(entries: Vec<Self>, result: &Result<T>) {
        let Some(first) = entries.first() else {
            return;
        };
        let recorder = first.recorder;
        let what = format!(
            "recording the outcome of {} of {} subjects in the history",
            first.op,
            entries.len()
        );
        let records = entries.iter().map(|e| e.outcome(result, None)).collect();
        if let Err(e) = recorder.insert(records, &what).await {
            tracing::warn!(
                "{e} (the history shows the operations pending; their changes stand or not as they were made)"
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
