//! Switching over from another numbering: `d.adopt(name, source)` and `s.adopt(source)`, the
//! core's [`Dispenser::adopt`](dispenser::Dispenser::adopt) with its source as one object.

use dispenser::mongodb::bson::Document;
use dispenser::sequence::{AdoptKind, AdoptSource, Adopted};
use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use serde_json::{Value, json};

use crate::abort::SignalOptions;
use crate::convert::{JsonList, invalid};
use crate::dispenser::Dispenser;
use crate::promise::promise;
use crate::sequence::Sequence;

/// Where numbers were issued before: exactly one of `mongooseSequence`, `mongoengine`,
/// `counter` and `highest`; `database` (all) and `collection` (mongoose-sequence and
/// mongoengine) say where it is when not the default.
#[napi(object)]
pub struct AdoptSourceInput {
    /// mongoose-sequence's counter of this `id` (its `id` option; the field's name by
    /// default): `{id, reference_value, seq}` in the collection `counters`.
    pub mongoose_sequence: Option<String>,
    /// With `mongooseSequence`: its counters kept per `reference_fields`, each into the scope
    /// of the sequence (a template) named by its reference values. Defaults to false.
    pub scoped: Option<bool>,
    /// mongoengine's `SequenceField` counter `"<sequence_name>.<field>"`: `{_id, next}` in the
    /// collection `mongoengine.counters`.
    pub mongoengine: Option<String>,
    /// A counter document of your own: the one `filter` matches holds the last number issued
    /// in `field`.
    pub counter: Option<CounterSourceInput>,
    /// The highest number (for a sequence counting down: the lowest) the documents of a
    /// collection carry in a field.
    pub highest: Option<HighestSourceInput>,
    /// The collection of mongoose-sequence's counters (its `collection_name`, `counters` by
    /// default) or of mongoengine's (`mongoengine.counters`).
    pub collection: Option<String>,
    /// The database holding the source. Defaults to the dispenser's.
    pub database: Option<String>,
}

/// A counter document of your own.
#[napi(object)]
pub struct CounterSourceInput {
    /// Its collection.
    pub collection: String,
    /// Matches the one counter document: JSON values (extended JSON for other types:
    /// `{ $oid: "…" }`).
    #[napi(ts_type = "Record<string, unknown>")]
    pub filter: Value,
    /// Its field holding the last number issued.
    pub field: String,
}

/// The documents' highest number.
#[napi(object)]
pub struct HighestSourceInput {
    /// The collection of the documents.
    pub collection: String,
    /// The field they carry their numbers in.
    pub field: String,
}

/// A JSON object (a filter, a document's extra fields) as a BSON document, or an error naming
/// `what`.
pub fn document(what: &str, value: Value) -> napi::Result<Document> {
    let Value::Object(map) = value else {
        return Err(invalid(
            what,
            format!("{value} is not an object; give an object of JSON values"),
        ));
    };
    Document::try_from(map).map_err(|e| invalid(what, e.to_string()))
}

/// The core's source from its JavaScript form: exactly one kind, and only the places it has.
fn source(input: AdoptSourceInput) -> napi::Result<AdoptSource> {
    let bad = |reason: &str| Err(invalid("adopt source", reason.to_owned()));
    let own_collection = input.collection.is_some();
    let scoped = input.scoped;
    // The source, and whether it takes `collection` (the counters' collection).
    let (mut s, takes_collection) = match (
        input.mongoose_sequence,
        input.mongoengine,
        input.counter,
        input.highest,
    ) {
        (Some(id), None, None, None) if scoped.unwrap_or(false) => {
            (AdoptSource::mongoose_sequence_scoped(id), true)
        }
        (Some(id), None, None, None) => (AdoptSource::mongoose_sequence(id), true),
        (None, Some(id), None, None) => (AdoptSource::mongoengine(id), true),
        (None, None, Some(c), None) => (
            AdoptSource::counter(
                c.collection,
                document("adopt source counter filter", c.filter)?,
                c.field,
            ),
            false,
        ),
        (None, None, None, Some(h)) => (AdoptSource::highest(h.collection, h.field), false),
        _ => {
            return bad(
                "give exactly one of `mongooseSequence`, `mongoengine`, `counter` and `highest`",
            );
        }
    };
    if scoped.is_some() && !matches!(s.kind, AdoptKind::MongooseSequence { .. }) {
        return bad("`scoped` goes with `mongooseSequence` only");
    }
    if own_collection && !takes_collection {
        return bad(
            "`collection` goes with `mongooseSequence` or `mongoengine`; `counter` and `highest` name their own",
        );
    }
    if let Some(c) = input.collection {
        s = s.in_collection(c);
    }
    if let Some(db) = input.database {
        s = s.in_database(db);
    }
    Ok(s)
}

/// What an adopt did to each sequence, as JSON (`state` the sequence's state afterwards).
fn adopted(done: Vec<Adopted>) -> JsonList {
    JsonList(
        done.into_iter()
            .map(|a| {
                json!({ "name": a.name, "highest": a.highest, "moved": a.moved, "state": a.state.to_json() })
            })
            .collect(),
    )
}

#[napi]
impl Dispenser {
    /// Moves the sequence `name` past every number `source` issued — mongoose-sequence's
    /// counter (or, `scoped`, each of its counters into a scope of `name`), mongoengine's, a
    /// counter of your own, or the highest number documents carry — so that none is handed
    /// out again; never backwards; recorded in the history as `adopt`.
    ///
    /// # Cancel safety
    ///
    /// Each sequence is moved by one write: aborted part way, some may have moved (adopt
    /// again: it never goes backwards).
    #[napi(ts_return_type = "Promise<Array<Adopted>>")]
    pub fn adopt<'env>(
        &self,
        env: &'env Env,
        name: String,
        source: AdoptSourceInput,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| {
            let s = crate::adopt::source(source)?;
            Ok(adopted(inner.adopt(&name, s).await?))
        })
    }
}

#[napi]
impl Sequence {
    /// `Dispenser.adopt` for this sequence.
    ///
    /// # Cancel safety
    ///
    /// As `Dispenser.adopt`.
    #[napi(ts_return_type = "Promise<Array<Adopted>>")]
    pub fn adopt<'env>(
        &self,
        env: &'env Env,
        source: AdoptSourceInput,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.core(), |inner| {
            let s = crate::adopt::source(source)?;
            Ok(adopted(inner.adopt(s).await?))
        })
    }
}
