//! The arbiter against duplicates: a plain unique index on the number field of the business
//! collection, found or created, and refused when it is weaker than that.

use bson::{Document, doc};
use futures::TryStreamExt;
use mongodb::options::{Collation, IndexOptions};
use mongodb::{Collection, IndexModel};

use super::GaplessOptions;
use crate::error::{Error, Result};

/// Why a unique index on the field cannot keep two documents from carrying one number, or
/// `None` when it can: it must not be partial (documents outside the filter are not
/// indexed), sparse (documents without the field are not indexed — harmless for the number,
/// but a sign of an index made for something else), or collated other than `simple` (a
/// collation may make values equal that are not).
fn weakness(o: &IndexOptions) -> Option<String> {
    if let Some(filter) = &o.partial_filter_expression {
        return Some(format!(
            "partial (partialFilterExpression {filter}): two documents outside its filter could carry one number"
        ));
    }
    if o.sparse == Some(true) {
        return Some(
            "sparse: documents without the field are not indexed, so it is not the plain unique index gap-free numbers rely on"
                .to_owned(),
        );
    }
    if let Some(c) = &o.collation
        && c.locale != "simple"
    {
        return Some(format!(
            "collated (collation locale {:?}): a collation can make values equal that are not, or unequal that are",
            c.locale
        ));
    }
    None
}

/// Whether `keys` index exactly `field`, in either direction.
fn on_exactly(keys: &Document, field: &str) -> bool {
    keys.len() == 1
        && keys
            .get(field)
            .and_then(|v| match v {
                bson::Bson::Int32(i) => Some(i64::from(*i)),
                bson::Bson::Int64(i) => Some(*i),
                bson::Bson::Double(d) => Some(*d as i64),
                _ => None,
            })
            .is_some_and(|d| d == 1 || d == -1)
}

/// What the business collection's indexes offer on the field.
enum Offer {
    /// A plain unique index on exactly the field.
    Plain,
    /// Only a unique index on the field that is weaker (its name, why).
    Weak(String, String),
    /// No unique index on the field.
    Nothing,
}

fn context(o: &GaplessOptions) -> String {
    format!(
        "making sure collection {:?} has a unique index on {:?} (gap-free numbers need it: it is what keeps two writes from carrying one number)",
        o.collection, o.field
    )
}

async fn inspect(business: &Collection<Document>, o: &GaplessOptions) -> Result<Offer> {
    let mut weak = None;
    // No collection yet: no indexes (some servers answer an error, others an empty list).
    if let Ok(mut cursor) = business.list_indexes().await {
        while let Some(ix) = cursor
            .try_next()
            .await
            .map_err(|e| Error::database(context(o), e))?
        {
            let options = ix.options.clone().unwrap_or_default();
            if !on_exactly(&ix.keys, &o.field) || options.unique != Some(true) {
                continue;
            }
            match weakness(&options) {
                None => return Ok(Offer::Plain),
                Some(why) => {
                    weak.get_or_insert((options.name.clone().unwrap_or_default(), why));
                }
            }
        }
    }
    Ok(weak.map_or(Offer::Nothing, |(name, why)| Offer::Weak(name, why)))
}

/// Whether `business` has a plain unique index on exactly `o.field` (only reads).
pub(super) async fn has_unique_index(
    business: &Collection<Document>,
    o: &GaplessOptions,
) -> Result<bool> {
    Ok(matches!(inspect(business, o).await?, Offer::Plain))
}

/// Makes sure `business` has a plain unique index on exactly `o.field`: uses one that
/// exists, refuses (naming it) a unique index on the field that is partial, sparse or
/// collated when there is no plain one, and otherwise creates `{field: 1}` unique with the
/// simple collation (so a default collation of the collection does not apply). Every
/// gap-free operation that writes calls it before it relies on the index (one
/// `listIndexes`), so an index dropped at run time is created again — or, when the
/// collection now holds a number twice, the operation is refused.
pub(super) async fn ensure_unique_index(
    business: &Collection<Document>,
    o: &GaplessOptions,
) -> Result<()> {
    match inspect(business, o).await? {
        Offer::Plain => return Ok(()),
        Offer::Weak(name, why) => {
            return Err(Error::invalid_argument(
                "gap-free collection",
                format!(
                    "the unique index {name:?} on {}.{} is {why}; drop it, or add a plain unique index {{{}: 1}}, then open again",
                    o.collection, o.field, o.field
                ),
            ));
        }
        Offer::Nothing => {}
    }
    let model = IndexModel::builder()
        .keys(doc! { &o.field: 1 })
        .options(
            IndexOptions::builder()
                .unique(true)
                .collation(Collation::builder().locale("simple").build())
                .build(),
        )
        .build();
    business.create_index(model).await.map(drop).map_err(|e| {
        if crate::store::is_duplicate_key(&e) {
            // The documents already there cannot all be told apart by the field: two carry one
            // value, or two lack it (the index counts a missing field as null).
            Error::invalid_argument(
                "gap-free collection",
                format!(
                    "{}.{} cannot get its unique index: two documents there carry the same value in it, or lack it (a unique index counts a missing field as null); give every document of the collection its own number (or number another collection), then create again",
                    o.collection, o.field
                ),
            )
        } else {
            Error::database(context(o), e)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_unique_index_on_exactly_the_field_will_do() {
        assert!(on_exactly(&doc! { "n": 1 }, "n"));
        assert!(on_exactly(&doc! { "n": -1_i64 }, "n"));
        assert!(!on_exactly(&doc! { "n": "hashed" }, "n"));
        assert!(!on_exactly(&doc! { "n": 1, "m": 1 }, "n"));
        assert!(!on_exactly(&doc! { "meta.n": 1 }, "n"));
        let plain = IndexOptions::builder().unique(true).build();
        assert_eq!(weakness(&plain), None);
        let simple = IndexOptions::builder()
            .unique(true)
            .collation(Collation::builder().locale("simple").build())
            .build();
        assert_eq!(weakness(&simple), None);
        let partial = IndexOptions::builder()
            .partial_filter_expression(doc! { "n": { "$gt": 5 } })
            .build();
        assert!(weakness(&partial).unwrap().starts_with("partial"));
        let sparse = IndexOptions::builder().sparse(true).build();
        assert!(weakness(&sparse).unwrap().starts_with("sparse"));
        let collated = IndexOptions::builder()
            .collation(Collation::builder().locale("en").build())
            .build();
        assert!(weakness(&collated).unwrap().contains("\"en\""));
    }
}
