//! What the history holds and how it is asked for: the entries read back ([`HistoryEntry`])
//! and the query (`HistoryQuery`). No I/O.

use bson::oid::ObjectId;
use bson::{Bson, Document, doc};
use serde_json::Value;

use super::subject::{self, Subject, field};
use crate::error::{Error, Result};

/// How an operation ended, as its records say.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The change was made.
    Done,
    /// Refused by the state the operation found (a reset that would go backwards without
    /// force, a cancel of a ticket that does not wait, a name already taken): nothing
    /// changed. The reason is the error the caller got.
    Refused(String),
    /// The operation failed in a way that leaves its effect unknown (a database error or a
    /// timeout after its write was sent): the change may or may not have been made; the state
    /// of the sequence or queue shows which.
    Failed(String),
    /// No outcome was recorded: the operation is still running, or the process stopped
    /// between its two writes (the change may or may not have been made; the state shows
    /// which, and the next entry's `before`).
    Pending,
}

impl Outcome {
    /// `"done"`, `"refused"`, `"failed"` or `"pending"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Refused(_) => "refused",
            Outcome::Failed(_) => "failed",
            Outcome::Pending => "pending",
        }
    }

    /// The error of a refused or failed operation.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Refused(r) | Outcome::Failed(r) => Some(r),
            Outcome::Done | Outcome::Pending => None,
        }
    }
}

/// One admin operation, as the history recorded it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct HistoryEntry {
    /// The record's id (its intent's `_id`, hexadecimal).
    pub id: String,
    /// What kind of subject the operation changed.
    pub subject: Subject,
    /// The exact name of what the operation changed: the sequence, the stripe's document
    /// (`ids~3`), the scope (`t@k`), the gap-free sequence or the queue.
    pub name: String,
    /// For a stripe: its index (the striped sequence is `name` before its last `~`, see
    /// [`HistoryEntry::striped_sequence`]).
    pub stripe: Option<u32>,
    /// For a scope: its template (`name` is `template@key`).
    pub template: Option<String>,
    /// For a scope: its key.
    pub key: Option<String>,
    /// The operation: `create`, `alter`, `advance-to`, `reset`, `delete`, `delete-scopes` (a
    /// template's; each scope deleted has its own `delete`), for gap-free sequences `create`,
    /// `alter`, `void`, `release`, `delete`, for queues `create`, `alter`, `cancel`, `delete`
    /// (records written before `alter` carried every setting say `set-format` and
    /// `max-lease`).
    pub op: String,
    /// Its parameters, as given.
    pub params: Value,
    /// Who acted ([`Options::caller`](crate::Options::caller)); `None` for a dispenser with
    /// no caller set.
    pub who: Option<String>,
    /// When the operation started, by the server's clock (when its intent was written).
    pub at: jiff::Timestamp,
    /// Whether `at` is this client's clock (the server did not say its time).
    pub client_clock: bool,
    /// The state read just before the operation (`None` before a create). Draws by others
    /// may fall between this read and the change.
    pub before: Option<Value>,
    /// The state read just after it (`None` after a delete, or when the operation did not
    /// end with a state to show).
    pub after: Option<Value>,
    /// How it ended.
    pub outcome: Outcome,
    /// When it ended, by the server's clock (`None` while [`Outcome::Pending`]).
    pub ended_at: Option<jiff::Timestamp>,
}

impl HistoryEntry {
    /// For a stripe: the striped sequence it belongs to (`ids` for `ids~3`).
    pub fn striped_sequence(&self) -> Option<&str> {
        self.stripe?;
        self.name.rsplit_once('~').map(|(base, _)| base)
    }

    /// Where a history read continues after this entry ([`History::after`](super::History::after)): an opaque
    /// string.
    pub fn cursor(&self) -> String {
        format!("{}-{}", self.at.as_millisecond(), self.id)
    }

    /// The entry as JSON: `{id, kind, name, stripe, template, key, op, params, who, at,
    /// clock, before, after, outcome, error, ended_at, cursor}` (times in RFC 3339; `clock`
    /// is `"server"` or `"client"`; `stripe` is `null` unless the kind is `stripe`,
    /// `template` and `key` unless it is `scope`; `error` is `null` unless the outcome is
    /// `refused` or `failed`).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// for e in d.open("invoices").await?.history().await? {
    ///     println!("{}", e.to_json());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "id": self.id,
            "kind": self.subject.as_str(),
            "name": self.name,
            "stripe": self.stripe,
            "template": self.template,
            "key": self.key,
            "op": self.op,
            "params": self.params,
            "who": self.who,
            "at": self.at.to_string(),
            "clock": if self.client_clock { "client" } else { "server" },
            "before": self.before,
            "after": self.after,
            "outcome": self.outcome.as_str(),
            "error": self.outcome.reason(),
            "ended_at": self.ended_at.map(|t| t.to_string()),
            "cursor": self.cursor(),
        })
    }
}

/// The most entries one query returns.
pub const MAX_HISTORY_PAGE: usize = 1000;

/// Which entries to read (what a [`History`](super::History) builder sets): of a sequence
/// (a plain or striped sequence, a stripe or a scope, as its name says), a gap-free sequence
/// or a queue, from a time on, after a cursor, at most `limit`, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HistoryQuery {
    /// Whose history: [`Subject::Sequence`] (the name says whether a plain or striped
    /// sequence, a stripe `ids~3` or a scope `t@k`), [`Subject::Gapless`] or
    /// [`Subject::Queue`].
    pub(crate) subject: Subject,
    /// Only entries at or after this time (the server's clock).
    pub(crate) since: Option<jiff::Timestamp>,
    /// Only entries after this cursor ([`HistoryEntry::cursor`] of the last entry of the
    /// previous page).
    pub(crate) after: Option<String>,
    /// At most this many entries (1 to [`MAX_HISTORY_PAGE`]). Defaults to 100.
    pub(crate) limit: usize,
}

impl HistoryQuery {
    /// The history of a `subject`, from its first entry, at most 100 entries.
    pub(crate) fn of(subject: Subject) -> Self {
        HistoryQuery {
            subject,
            since: None,
            after: None,
            limit: 100,
        }
    }

    /// The filter of the records this query reads for the history of `name` (their intents:
    /// each entry's outcome is then looked up by its `of`), as the library sends it — for
    /// a tool that reads the history collection itself with the same filter,
    /// [`HistoryQuery::sort`] and `limit`. Exact subjects only: see
    /// [`Dispenser::history`](crate::Dispenser::history).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit outside 1 to [`MAX_HISTORY_PAGE`] or a cursor
    /// that is not one.
    pub(crate) fn filter(&self, name: &str) -> Result<Document> {
        if !(1..=MAX_HISTORY_PAGE).contains(&self.limit) {
            return Err(Error::invalid_argument(
                "history limit",
                format!(
                    "{} entries asked; ask for 1 to {MAX_HISTORY_PAGE}",
                    self.limit
                ),
            ));
        }
        let mut filter = doc! { field::PHASE: field::INTENT };
        filter.extend(subject::read_filter(self.subject, name));
        if let Some(since) = self.since {
            filter.insert(field::AT, doc! { "$gte": to_bson_time(since) });
        }
        if let Some(cursor) = &self.after {
            let (at, id) = parse_cursor(cursor)?;
            filter.insert(
                "$and",
                vec![Bson::Document(doc! { "$or": [
                    { field::AT: { "$gt": at } },
                    { field::AT: at, field::ID: { "$gt": id } },
                ] })],
            );
        }
        Ok(filter)
    }

    /// The order of a read: oldest first, `{at: 1, _id: 1}` (see [`HistoryQuery::filter`]).
    pub(crate) fn sort(&self) -> Document {
        doc! { field::AT: 1, field::ID: 1 }
    }
}

fn to_bson_time(t: jiff::Timestamp) -> bson::DateTime {
    bson::DateTime::from_millis(t.as_millisecond())
}

fn bad_cursor(cursor: &str) -> Error {
    Error::invalid_argument(
        "history cursor",
        format!("{cursor:?} is not a cursor of a history entry (MILLISECONDS-ID)"),
    )
}

fn parse_cursor(cursor: &str) -> Result<(bson::DateTime, ObjectId)> {
    let (ms, id) = cursor.split_once('-').ok_or_else(|| bad_cursor(cursor))?;
    let ms: i64 = ms.parse().map_err(|_| bad_cursor(cursor))?;
    let id = ObjectId::parse_str(id).map_err(|_| bad_cursor(cursor))?;
    Ok((bson::DateTime::from_millis(ms), id))
}

/// A stored value as JSON (relaxed: integers as numbers).
fn json_of(b: Option<&Bson>) -> Option<Value> {
    match b {
        None | Some(Bson::Null) => None,
        Some(b) => Some(b.clone().into_relaxed_extjson()),
    }
}

fn time_of(name: &str, d: &Document) -> Result<jiff::Timestamp> {
    let at = d
        .get_datetime(field::AT)
        .map_err(|_| corrupt(name, d, field::AT, "not a date"))?;
    jiff::Timestamp::from_millisecond(at.timestamp_millis())
        .map_err(|_| corrupt(name, d, field::AT, "out of range"))
}

fn corrupt(name: &str, d: &Document, at: &str, problem: &str) -> Error {
    Error::corrupt_of(
        "history record",
        name,
        at,
        format!(
            "{problem} (record {})",
            d.get(field::ID)
                .map(ToString::to_string)
                .unwrap_or_default()
        ),
    )
}

/// An entry from its intent record and its outcome record, if any.
pub(crate) fn entry(intent: &Document, outcome: Option<&Document>) -> Result<HistoryEntry> {
    let name = intent.get_str(field::NAME).unwrap_or_default().to_owned();
    let id = intent
        .get_object_id(field::ID)
        .map_err(|_| corrupt(&name, intent, field::ID, "not an ObjectId"))?;
    let Some(of) = subject::decode(intent) else {
        return Err(corrupt(
            &name,
            intent,
            field::KIND,
            "an unknown kind, or a stripe or scope without its fields",
        ));
    };
    let op = intent
        .get_str(field::OP)
        .map_err(|_| corrupt(&name, intent, field::OP, "missing"))?
        .to_owned();
    let (outcome_state, after, ended_at) = match outcome {
        None => (Outcome::Pending, None, None),
        Some(o) => {
            let error = o.get_str(field::ERROR).unwrap_or_default().to_owned();
            let state = match o.get_str(field::OUTCOME) {
                Ok("done") => Outcome::Done,
                Ok("refused") => Outcome::Refused(error),
                Ok("failed") => Outcome::Failed(error),
                _ => return Err(corrupt(&name, o, field::OUTCOME, "unknown")),
            };
            (
                state,
                json_of(o.get(field::AFTER)),
                Some(time_of(&name, o)?),
            )
        }
    };
    let (template, key) = of.scope.unzip();
    Ok(HistoryEntry {
        id: id.to_hex(),
        subject: of.subject,
        stripe: of.stripe,
        template,
        key,
        name: of.name,
        op,
        params: json_of(intent.get(field::PARAMS)).unwrap_or(Value::Null),
        who: intent.get_str(field::WHO).ok().map(str::to_owned),
        at: time_of(&name, intent)?,
        client_clock: intent.get_str(field::CLOCK) == Ok("client"),
        before: json_of(intent.get(field::BEFORE)),
        after,
        outcome: outcome_state,
        ended_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_refused() {
        let id = ObjectId::new();
        let (at, back) = parse_cursor(&format!("1700000000123-{}", id.to_hex())).unwrap();
        assert_eq!((at.timestamp_millis(), back), (1_700_000_000_123, id));
        for bad in ["", "12", "x-y", "12-nothex", "-1"] {
            let e = parse_cursor(bad).unwrap_err();
            assert!(e.to_string().contains("cursor"), "{e}");
        }
        for limit in [0, MAX_HISTORY_PAGE + 1] {
            let q = HistoryQuery {
                limit,
                ..HistoryQuery::of(Subject::Sequence)
            };
            assert!(q.filter("s").is_err(), "{limit}");
        }
        let q = HistoryQuery {
            limit: MAX_HISTORY_PAGE,
            ..HistoryQuery::of(Subject::Sequence)
        };
        assert!(q.filter("s").is_ok());
    }

    #[test]
    fn an_intent_without_outcome_is_pending() {
        let id = ObjectId::new();
        let intent = doc! {
            "_id": id, "phase": "intent", "kind": "queue", "name": "lobby", "op": "cancel",
            "params": { "ticket": 7_i64 }, "who": "desk-1",
            "at": bson::DateTime::from_millis(1_700_000_000_000), "before": { "waiting": 3_i64 },
        };
        let e = entry(&intent, None).unwrap();
        assert_eq!(e.outcome, Outcome::Pending);
        assert_eq!(e.params, serde_json::json!({ "ticket": 7 }));
        assert_eq!(e.subject, Subject::Queue);
        assert_eq!(e.who.as_deref(), Some("desk-1"));
        let outcome = doc! {
            "_id": ObjectId::new(), "of": id, "phase": "outcome", "kind": "queue", "name": "lobby",
            "at": bson::DateTime::from_millis(1_700_000_000_005), "outcome": "refused",
            "error": "ticket 7 does not wait",
        };
        let e = entry(&intent, Some(&outcome)).unwrap();
        assert_eq!(e.outcome, Outcome::Refused("ticket 7 does not wait".into()));
        assert_eq!(e.to_json()["outcome"], "refused");
        assert_eq!(e.to_json()["error"], "ticket 7 does not wait");
    }
}
