//! Switching over from another numbering: [`Dispenser::adopt`] reads what a source issued
//! before — a mongoose-sequence counter, a mongoengine counter, any counter document, or the
//! highest number a business collection's field holds — and moves the sequence (or each scope
//! of a template) past it, so that no number the source handed out is handed out again.
//!
//! Adopting is [`Sequence::advance_to`](crate::Sequence::advance_to) from a number read at the
//! source, recorded in the history as `adopt` with the source and the number read: never
//! backwards (a sequence already past the source is left as it is), one write per sequence.
//! The source is read once: stop the old numbering first (or adopt again after the last
//! process that used it stopped); a number it issues after the read is not seen.

use std::future::{Future, IntoFuture};
use std::pin::Pin;

use bson::{Bson, Document, doc};
use futures::TryStreamExt;

use crate::dispenser::{Dispenser, Sequence};
use crate::document::SequenceState;
use crate::error::{Error, Result};

/// Where numbers were issued before, for [`Dispenser::adopt`]: a counter document's field
/// (the last number it issued), or the highest (for a sequence that counts down: the lowest)
/// number a collection's field holds. In the dispenser's database unless
/// [`AdoptSource::in_database`] names another.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// use dispenser::sequence::AdoptSource;
/// // The counter mongoose-sequence kept for the field `number` (collection `counters`).
/// d.adopt("orders", AdoptSource::mongoose_sequence("number")).await?;
/// // mongoengine's SequenceField of `Invoice.number` (`mongoengine.counters`).
/// d.adopt("invoices", AdoptSource::mongoengine("invoice.number")).await?;
/// // Whatever the documents already carry.
/// d.adopt("tickets", AdoptSource::highest("tickets", "number")).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AdoptSource {
    /// The database holding the source (`None`: the dispenser's).
    pub database: Option<String>,
    /// The collection holding the source.
    pub collection: String,
    /// What the source is.
    pub kind: AdoptKind,
}

/// What kind of source an [`AdoptSource`] is.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AdoptKind {
    /// The document `filter` matches holds the last number issued in `field`.
    Counter {
        /// Matches the one counter document.
        filter: Document,
        /// Its field holding the last number issued.
        field: String,
    },
    /// mongoose-sequence's counters of the id `id` (`{id, reference_value, seq}`): the
    /// unscoped one (`reference_value: null`) for the sequence, or with `scoped` every scoped
    /// one, each into the scope of the template whose key is the values of its
    /// `reference_value` (see [`scope_key`]).
    MongooseSequence {
        /// The counter's `id` (mongoose-sequence's `id` option, the field name by default).
        id: String,
        /// Each `reference_value` into its own scope of the template.
        scoped: bool,
    },
    /// The highest (for a sequence counting down: the lowest) whole number of `field` among
    /// the collection's documents.
    Highest {
        /// The field the documents carry their numbers in.
        field: String,
    },
}

impl AdoptSource {
    /// The document `filter` matches in `collection` holds the last number issued in `field`
    /// (a counter written by hand).
    pub fn counter(
        collection: impl Into<String>,
        filter: Document,
        field: impl Into<String>,
    ) -> Self {
        AdoptSource {
            database: None,
            collection: collection.into(),
            kind: AdoptKind::Counter {
                filter,
                field: field.into(),
            },
        }
    }

    /// mongoose-sequence's counter of the id `id` (its `id` option, which defaults to the
    /// field's name), unscoped: collection `counters` (its `collection_name` option:
    /// [`AdoptSource::in_collection`]), `{id, reference_value: null, seq}`.
    pub fn mongoose_sequence(id: impl Into<String>) -> Self {
        AdoptSource {
            database: None,
            collection: "counters".into(),
            kind: AdoptKind::MongooseSequence {
                id: id.into(),
                scoped: false,
            },
        }
    }

    /// mongoose-sequence's counters of the id `id` kept per `reference_fields`: each into the
    /// scope of the template named in [`Dispenser::adopt`] whose key is its reference values
    /// ([`scope_key`]), created as the template's scopes are.
    pub fn mongoose_sequence_scoped(id: impl Into<String>) -> Self {
        AdoptSource {
            database: None,
            collection: "counters".into(),
            kind: AdoptKind::MongooseSequence {
                id: id.into(),
                scoped: true,
            },
        }
    }

    /// mongoengine's `SequenceField` counter: collection `mongoengine.counters`, `{_id:
    /// "<sequence_name>.<field>", next}` (`next` holds the last number issued; the sequence
    /// name defaults to the owner's collection name).
    pub fn mongoengine(sequence_id: impl Into<String>) -> Self {
        AdoptSource::counter(
            "mongoengine.counters",
            doc! { "_id": sequence_id.into() },
            "next",
        )
    }

    /// The highest (for a sequence counting down: the lowest) whole number the documents of
    /// `collection` carry in `field`.
    pub fn highest(collection: impl Into<String>, field: impl Into<String>) -> Self {
        AdoptSource {
            database: None,
            collection: collection.into(),
            kind: AdoptKind::Highest {
                field: field.into(),
            },
        }
    }

    /// The same source in the database `database`.
    #[must_use]
    pub fn in_database(mut self, database: impl Into<String>) -> Self {
        self.database = Some(database.into());
        self
    }

    /// The same source in the collection `collection` (mongoose-sequence's
    /// `collection_name`).
    #[must_use]
    pub fn in_collection(mut self, collection: impl Into<String>) -> Self {
        self.collection = collection.into();
        self
    }

    /// The source as the history records it.
    fn describe(&self) -> Document {
        let mut d = doc! { "collection": &self.collection };
        if let Some(db) = &self.database {
            d.insert("database", db);
        }
        match &self.kind {
            AdoptKind::Counter { filter, field } => {
                d.insert("kind", "counter");
                d.insert("filter", filter.clone());
                d.insert("field", field);
            }
            AdoptKind::MongooseSequence { id, scoped } => {
                d.insert("kind", "mongoose-sequence");
                d.insert("id", id);
                d.insert("scoped", *scoped);
            }
            AdoptKind::Highest { field } => {
                d.insert("kind", "highest");
                d.insert("field", field);
            }
        }
        d
    }

    fn check(&self) -> Result<()> {
        let bad =
            |what: &str, reason: String| Err(Error::invalid_argument(what.to_owned(), reason));
        if let Some(db) = &self.database
            && (db.is_empty() || db.contains(['/', '\\', '.', ' ', '"', '$', '\0']))
        {
            return bad(
                "adopt source database",
                format!("{db:?} is not a database name"),
            );
        }
        if self.collection.is_empty()
            || self.collection.starts_with('$')
            || self.collection.contains('\0')
        {
            return bad(
                "adopt source collection",
                format!("{:?} is not a collection name", self.collection),
            );
        }
        let field = match &self.kind {
            AdoptKind::Counter { field, .. } | AdoptKind::Highest { field } => Some(field),
            AdoptKind::MongooseSequence { id, .. } => {
                if id.is_empty() {
                    return bad("adopt source id", "the counter's id is empty".to_owned());
                }
                None
            }
        };
        if let Some(f) = field
            && (f.is_empty() || f.starts_with('$') || f.contains('\0'))
        {
            return bad("adopt source field", format!("{f:?} is not a field name"));
        }
        if let AdoptKind::Counter { filter, .. } = &self.kind
            && let Some(key) = nul_key(filter)
        {
            return bad(
                "adopt source filter",
                format!("its key {key:?} holds a NUL character, which no BSON key can hold"),
            );
        }
        Ok(())
    }
}

/// The first key of `doc`, or of a document inside it (in arrays too), that holds a NUL
/// character: a BSON key is a C string, so the driver cannot send such a filter.
fn nul_key(doc: &Document) -> Option<String> {
    fn in_value(v: &Bson) -> Option<String> {
        match v {
            Bson::Document(d) => nul_key(d),
            Bson::Array(a) => a.iter().find_map(in_value),
            _ => None,
        }
    }
    doc.iter().find_map(|(k, v)| {
        if k.contains('\0') {
            Some(k.clone())
        } else {
            in_value(v)
        }
    })
}

/// A scope key made of several values, as the Mongoose plugin (and
/// [`AdoptSource::mongoose_sequence_scoped`]) make it: each value's text — a string as it
/// is, a number in decimal, an ObjectId in hex, `true`/`false` — percent-encoded as
/// JavaScript's `encodeURIComponent` does, joined by `/`. `None` for a value of another type
/// (a date, a document, an array, null), which names no scope.
///
/// # Example
///
/// ```
/// use dispenser::mongodb::bson::Bson;
/// let key = dispenser::sequence::scope_key(&[Bson::String("Acme & Co".into()), Bson::Int32(7)]);
/// assert_eq!(key.as_deref(), Some("Acme%20%26%20Co/7"));
/// ```
pub fn scope_key(values: &[Bson]) -> Option<String> {
    let mut parts = Vec::with_capacity(values.len());
    for v in values {
        let text = match v {
            Bson::String(s) => s.clone(),
            Bson::Int32(n) => n.to_string(),
            Bson::Int64(n) => n.to_string(),
            Bson::Double(f)
                if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 =>
            {
                format!("{f:.0}")
            }
            Bson::Double(f) if f.is_finite() => f.to_string(),
            Bson::ObjectId(id) => id.to_hex(),
            Bson::Boolean(b) => b.to_string(),
            _ => return None,
        };
        parts.push(encode_component(&text));
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// `text` percent-encoded as JavaScript's `encodeURIComponent` does: everything but
/// `A-Z a-z 0-9 - _ . ! ~ * ' ( )`.
fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What [`Dispenser::adopt`] did to one sequence.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Adopted {
    /// The sequence (for a scoped source, the scope `template@key`).
    pub name: String,
    /// The last number the source issued (`None`: the source holds none).
    pub highest: Option<i64>,
    /// Whether the sequence moved (false: it was past the source already, or the source holds
    /// nothing).
    pub moved: bool,
    /// The sequence's state afterwards: its next number is past `highest`.
    pub state: SequenceState,
}

/// An adopt ([`Dispenser::adopt`], [`Sequence::adopt`]). `.await` it for what it did to each
/// sequence: one for a sequence, one per scope found for a scoped source.
#[must_use = "an adopt does nothing until it is awaited"]
pub struct Adopt<'a> {
    dispenser: &'a Dispenser,
    name: String,
    source: AdoptSource,
}

impl std::fmt::Debug for Adopt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adopt")
            .field("name", &self.name)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl<'a> IntoFuture for Adopt<'a> {
    type Output = Result<Vec<Adopted>>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Vec<Adopted>>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.dispenser.adopt_now(&self.name, &self.source).await })
    }
}

impl Dispenser {
    /// Moves the sequence `name` past every number `source` issued (see [`AdoptSource`]):
    /// the switch-over from mongoose-sequence, mongoengine, a hand-written counter, or
    /// documents already numbered — so no number they carry is handed out again. For a scoped
    /// source, `name` is a template and each scope found is created from it (as
    /// [`Dispenser::ensure_scope`] does) and moved. Recorded in the history as `adopt`, with
    /// the source and the number read; a sequence already past the source is left as it is
    /// (nothing written, nothing recorded). Returns an [`Adopt`] to `.await`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad source (nothing read), for a source number that is
    /// not a whole number (naming the document and field), or one outside the sequence's
    /// bounds (nothing written); [`Error::NotFound`], [`Error::InvalidName`], and those of
    /// [`Sequence::advance_to`](crate::Sequence::advance_to).
    ///
    /// # Cancel safety
    ///
    /// Each sequence is moved by one write: dropped part way, some may have moved (adopt
    /// again: it never goes backwards).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::{Spec, sequence::AdoptSource};
    /// d.ensure("number", Spec::default()).await?;
    /// for a in d.adopt("number", AdoptSource::mongoose_sequence("number")).await? {
    ///     println!("{}: the old counter stood at {:?}; next {}", a.name, a.highest, a.state.value + a.state.step);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn adopt<'a>(&'a self, name: &str, source: AdoptSource) -> Adopt<'a> {
        Adopt {
            dispenser: self,
            name: name.to_owned(),
            source,
        }
    }

    async fn adopt_now(&self, name: &str, source: &AdoptSource) -> Result<Vec<Adopted>> {
        source.check()?;
        crate::spec::validate_name(name)?;
        let found = match &source.kind {
            AdoptKind::MongooseSequence { scoped: true, .. } => {
                crate::spec::validate_plain_name(name)?;
                // The template must exist: its scopes are made from it.
                self.peek(name).await?;
                self.scoped_counters(name, source).await?
            }
            _ => {
                let state = self.peek(name).await?;
                let down = state.step < 0;
                vec![(name.to_owned(), self.read_highest(source, down).await?)]
            }
        };
        let mut out = Vec::with_capacity(found.len());
        for (target, highest) in found {
            if target != name {
                let key = target.split_once('@').map_or("", |(_, k)| k);
                self.ensure_scope(name, key).await?;
            }
            out.push(self.adopt_into(&target, source, highest).await?);
        }
        Ok(out)
    }

    /// Moves `name` past `highest`, recorded as an adopt of `source`.
    async fn adopt_into(
        &self,
        name: &str,
        source: &AdoptSource,
        highest: Option<i64>,
    ) -> Result<Adopted> {
        let Some(n) = highest else {
            let state = self.peek(name).await?;
            return Ok(Adopted {
                name: name.to_owned(),
                highest,
                moved: false,
                state,
            });
        };
        let before = self.peek(name).await?;
        if n < before.min || n > before.max {
            return Err(Error::invalid_argument(
                "adopt",
                format!(
                    "the source ({}) issued up to {n}, outside the bounds {}..={} of sequence {name:?}: widen them first (alter), or adopt into another sequence; nothing was written",
                    describe_briefly(source),
                    before.min,
                    before.max
                ),
            ));
        }
        let params = doc! { "source": source.describe(), "highest": n };
        let state = self.advance_recorded(name, n, "adopt", params).await?;
        Ok(Adopted {
            name: name.to_owned(),
            highest,
            moved: state.version != before.version,
            state,
        })
    }

    /// The last number `source` issued: a counter's field, or its documents' highest (with
    /// `down`, lowest) number. `None` when it holds none.
    async fn read_highest(&self, source: &AdoptSource, down: bool) -> Result<Option<i64>> {
        let coll = self.source_collection(source);
        let what = || format!("reading the adopt source {}", describe_briefly(source));
        let store = self.store();
        match &source.kind {
            AdoptKind::Counter { filter, field } => {
                let found = store
                    .bounded_read(
                        what,
                        coll.find_one(filter.clone())
                            .projection(doc! { field.as_str(): 1 }),
                    )
                    .await?;
                found
                    .map(|d| whole(source, &d, field))
                    .transpose()
                    .map(Option::flatten)
            }
            AdoptKind::MongooseSequence { id, .. } => {
                let found = store
                    .bounded_read(
                        what,
                        coll.find_one(doc! { "id": id, "reference_value": Bson::Null })
                            .projection(doc! { "seq": 1 }),
                    )
                    .await?;
                found
                    .map(|d| whole(source, &d, "seq"))
                    .transpose()
                    .map(Option::flatten)
            }
            AdoptKind::Highest { field } => {
                let numbers =
                    doc! { field.as_str(): { "$type": ["int", "long", "double", "decimal"] } };
                let order = if down { 1 } else { -1 };
                let found = store
                    .bounded_read(
                        what,
                        coll.find_one(numbers)
                            .sort(doc! { field.as_str(): order })
                            .projection(doc! { field.as_str(): 1 }),
                    )
                    .await?;
                found
                    .map(|d| whole(source, &d, field))
                    .transpose()
                    .map(Option::flatten)
            }
        }
    }

    /// mongoose-sequence's scoped counters of `source`: each `(template@key, seq)`.
    async fn scoped_counters(
        &self,
        template: &str,
        source: &AdoptSource,
    ) -> Result<Vec<(String, Option<i64>)>> {
        let AdoptKind::MongooseSequence { id, .. } = &source.kind else {
            return Ok(Vec::new());
        };
        let coll = self.source_collection(source);
        let what = || format!("reading the adopt source {}", describe_briefly(source));
        let store = self.store();
        let cursor = store
            .bounded_read(
                what,
                coll.find(doc! { "id": id, "reference_value": { "$ne": Bson::Null } })
                    .projection(doc! { "reference_value": 1, "seq": 1 }),
            )
            .await?;
        let docs: Vec<Document> = store.bounded_read(what, cursor.try_collect()).await?;
        let mut out = Vec::with_capacity(docs.len());
        for d in docs {
            let values: Vec<Bson> = match d.get("reference_value") {
                Some(Bson::Document(r)) => r.values().cloned().collect(),
                Some(Bson::Array(a)) => a.clone(),
                Some(other) => vec![other.clone()],
                None => Vec::new(),
            };
            let key = scope_key(&values).ok_or_else(|| {
                Error::invalid_argument(
                    "adopt",
                    format!(
                        "the counter {} of {} has a reference_value ({}) that names no scope: its values must be strings, numbers, ObjectIds or booleans",
                        d.get("_id").map_or_else(|| "?".to_owned(), ToString::to_string),
                        describe_briefly(source),
                        d.get("reference_value").map_or_else(String::new, ToString::to_string)
                    ),
                )
            })?;
            out.push((key, whole(source, &d, "seq")?));
        }
        out.sort();
        Ok(out
            .into_iter()
            .map(|(key, seq)| (format!("{template}@{key}"), seq))
            .collect())
    }

    fn source_collection(&self, source: &AdoptSource) -> mongodb::Collection<Document> {
        let db = source
            .database
            .as_deref()
            .unwrap_or(&self.options().database);
        self.client().database(db).collection(&source.collection)
    }
}

/// The whole number of `field` in the source's document `d`: `None` when absent; an error
/// naming the document and the field when it is not a whole number (an integral double up to
/// 2^53 is one: Mongoose stores numbers so).
fn whole(source: &AdoptSource, d: &Document, field: &str) -> Result<Option<i64>> {
    let not = |shown: String| {
        Error::invalid_argument(
            "adopt",
            format!(
                "field {field:?} of the document {} of {} holds {shown}, not a whole number; nothing was written",
                d.get("_id")
                    .map_or_else(|| "?".to_owned(), ToString::to_string),
                describe_briefly(source)
            ),
        )
    };
    match d.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Int32(n)) => Ok(Some(i64::from(*n))),
        Some(Bson::Int64(n)) => Ok(Some(*n)),
        Some(Bson::Double(f)) if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => {
            Ok(Some(*f as i64))
        }
        Some(Bson::Decimal128(x)) => x
            .to_string()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| not(format!("the decimal {x}"))),
        Some(other) => Err(not(other.to_string())),
    }
}

/// The source in a few words, for messages.
fn describe_briefly(source: &AdoptSource) -> String {
    let place = match &source.database {
        Some(db) => format!("{db}.{}", source.collection),
        None => source.collection.clone(),
    };
    match &source.kind {
        AdoptKind::Counter { filter, field } => {
            format!("counter {filter} in {place}, field {field:?}")
        }
        AdoptKind::MongooseSequence { id, scoped } => format!(
            "mongoose-sequence counter{} {id:?} in {place}",
            if *scoped { "s" } else { "" }
        ),
        AdoptKind::Highest { field } => format!("field {field:?} of {place}"),
    }
}

impl Sequence {
    /// [`Dispenser::adopt`] for this sequence.
    ///
    /// # Cancel safety
    ///
    /// As [`Dispenser::adopt`]'s: the sequence is moved by one write; dropped part way, it may
    /// have moved (adopt again: it never goes backwards).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(orders: dispenser::Sequence) -> dispenser::Result<()> {
    /// use dispenser::sequence::AdoptSource;
    /// orders.adopt(AdoptSource::highest("orders", "number")).await?;
    /// # Ok(()) }
    /// ```
    pub fn adopt(&self, source: AdoptSource) -> Adopt<'_> {
        self.dispenser().adopt(self.name(), source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_keys_encode_each_value_as_the_mongoose_plugin_does() {
        let oid = bson::oid::ObjectId::parse_str("65f000000000000000000001").unwrap();
        assert_eq!(
            scope_key(&[
                Bson::String("a b/é".into()),
                Bson::Int64(-3),
                Bson::Double(5.0),
                Bson::ObjectId(oid),
                Bson::Boolean(true),
            ])
            .as_deref(),
            Some("a%20b%2F%C3%A9/-3/5/65f000000000000000000001/true")
        );
        assert_eq!(
            scope_key(&[Bson::String("-_.!~*'()".into())]).as_deref(),
            Some("-_.!~*'()")
        );
        assert_eq!(scope_key(&[Bson::Null]), None);
        assert_eq!(scope_key(&[]), None);
    }

    #[test]
    fn a_source_number_must_be_whole_and_its_error_names_the_field() {
        let s = AdoptSource::mongoengine("invoice.number");
        let d = doc! { "_id": "invoice.number", "next": 41_i32, "big": 9.0e15, "half": 2.5, "text": "7" };
        assert_eq!(whole(&s, &d, "next").unwrap(), Some(41));
        assert_eq!(whole(&s, &d, "big").unwrap(), Some(9_000_000_000_000_000));
        assert_eq!(whole(&s, &d, "absent").unwrap(), None);
        for bad in ["half", "text"] {
            let e = whole(&s, &d, bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("field {bad:?}")) && e.contains("mongoengine.counters"),
                "{e}"
            );
        }
    }

    #[test]
    fn bad_sources_are_refused_naming_what_is_wrong() {
        for (s, needle) in [
            (AdoptSource::highest("", "n"), "collection"),
            (AdoptSource::highest("c", "$n"), "field"),
            (
                AdoptSource::highest("c", "n").in_database("a.b"),
                "database",
            ),
            (AdoptSource::mongoose_sequence(""), "id"),
            // Found by Schemathesis: a key with a NUL, deep in the filter, was sent and failed
            // in the driver as a database error (503 over HTTP).
            (
                AdoptSource::counter("c", doc! { "a": [1, { "b": { "x\0y": 1 } }] }, "n"),
                "adopt source filter: its key \"x\\0y\" holds a NUL",
            ),
            (
                AdoptSource::counter("c", doc! { "\0": 1 }, "n"),
                "adopt source filter",
            ),
        ] {
            let e = s.check().unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        assert!(AdoptSource::mongoose_sequence("number").check().is_ok());
        let nested = doc! { "a": [1, { "b": { "x y": 1 } }], "": 2 };
        assert!(AdoptSource::counter("c", nested, "n").check().is_ok());
    }
}
