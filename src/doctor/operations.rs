//! Each operation the library sends, sent by the library's own code ([`Store`]) to a
//! document of the scratch collection, and its answer checked against what the library needs.

use bson::{Document, doc};
use mongodb::options::IndexOptions;
use mongodb::{Collection, IndexModel};

use super::Clock;
use super::report::OperationCheck;
use crate::error::{Error, Result};
use crate::spec::Spec;
use crate::store::{Store, is_duplicate_key};

/// The name of the conditional increment's check (the probe uses the increment only when it
/// passed).
pub(super) const INCREMENT: &str = "findAndModify";

/// What one check saw: `Ok(())` as needed, `Err(what differed)`.
type Seen = std::result::Result<(), String>;

/// Runs every check. An operation that fails is a failed check; one that does not finish in
/// time ([`Error::Timeout`]) ends the examination: nothing can be said of the server.
pub(super) async fn check(
    store: &Store,
    raw: &Collection<Document>,
    clock: &Clock,
) -> Result<Vec<OperationCheck>> {
    Ok(vec![
        verdict(
            INCREMENT,
            "the conditional increment: $inc within bounds ($type long, $gte, $lte), a projection, returnDocument after; no match at the bound",
            increment(store, clock).await,
        )?,
        verdict(
            "updateOne",
            "the compare-and-set: updateOne pinned on _id, version and incarnation; a stale version matches nothing",
            compare_and_set(store, clock).await,
        )?,
        verdict(
            "insert",
            "a new sequence: insertOne; the same _id again answers duplicate key 11000",
            insert(store, clock).await,
        )?,
        verdict(
            "unique index",
            "a unique index (gap-free sequences): a second document with the same key answers duplicate key 11000",
            unique_index(raw, clock).await,
        )?,
    ])
}

fn verdict(name: &str, what: &str, seen: Result<Seen>) -> Result<OperationCheck> {
    let detail = match seen {
        Ok(Ok(())) => None,
        Ok(Err(differed)) => Some(differed),
        Err(e @ Error::Timeout { .. }) => return Err(e),
        Err(e) => Some(e.to_string()),
    };
    Ok(OperationCheck {
        name: name.to_owned(),
        what: what.to_owned(),
        ok: detail.is_none(),
        detail,
    })
}

async fn increment(store: &Store, clock: &Clock) -> Result<Seen> {
    let name = "check_increment";
    let spec = Spec::default().with_max(2);
    clock
        .work(
            || format!("creating {name}"),
            store.insert(name, &spec, None),
        )
        .await?;
    let mut got = Vec::new();
    for _ in 0..3 {
        let drawn = clock
            .work(
                || format!("incrementing {name}"),
                store.increment(name, &spec, (0, 1), 1, Some(1)),
            )
            .await?;
        got.push(drawn.map(|(value, stamp)| (value, stamp.version)));
    }
    let want = vec![Some((1, 1)), Some((2, 2)), None];
    Ok(if got == want {
        Ok(())
    } else {
        Err(format!(
            "three increments of a sequence bounded at 2 returned (value, version) {got:?}; want {want:?}"
        ))
    })
}

async fn compare_and_set(store: &Store, clock: &Clock) -> Result<Seen> {
    let name = "check_compare_and_set";
    let spec = Spec::default();
    clock
        .work(
            || format!("creating {name}"),
            store.insert(name, &spec, None),
        )
        .await?;
    let read = || clock.work(|| format!("reading {name}"), store.load(name));
    let Some(before) = read().await? else {
        return Ok(Err("the document just inserted was not found".to_owned()));
    };
    let cas = || {
        clock.work(
            || format!("writing {name}"),
            store.compare_and_set(name, &before, before.value + 1, false, None, Some(1)),
        )
    };
    let first = cas().await?;
    let stale = cas().await?;
    let after = read().await?;
    let first_won = first.map(|s| s.version) == Some(before.version + 1);
    let stored = after.map(|a| (a.value, a.version));
    let want = Some((before.value + 1, before.version + 1));
    Ok(if !first_won {
        Err(format!(
            "a compare-and-set on the version just read matched nothing (wrote {first:?})"
        ))
    } else if stale.is_some() {
        Err("a compare-and-set on a stale version matched the document".to_owned())
    } else if stored != want {
        Err(format!(
            "after one winning and one stale write the document holds (value, version) {stored:?}; want {want:?}"
        ))
    } else {
        Ok(())
    })
}

async fn insert(store: &Store, clock: &Clock) -> Result<Seen> {
    let name = "check_insert";
    let spec = Spec::default();
    let mut created = Vec::new();
    for _ in 0..2 {
        let c = clock
            .work(
                || format!("creating {name}"),
                store.insert(name, &spec, None),
            )
            .await?;
        created.push(c.is_some());
    }
    Ok(if created == [true, false] {
        Ok(())
    } else {
        Err(format!(
            "two inserts of one _id: created {created:?}; want the first only"
        ))
    })
}

async fn unique_index(raw: &Collection<Document>, clock: &Clock) -> Result<Seen> {
    // Sparse: the other documents of the scratch collection have no `n` (a plain unique
    // index would count them all as duplicates of `n: null`).
    let model = IndexModel::builder()
        .keys(doc! { "n": 1 })
        .options(IndexOptions::builder().unique(true).sparse(true).build())
        .build();
    clock
        .driver(
            || "creating a unique index".to_owned(),
            raw.create_index(model),
        )
        .await?;
    clock
        .driver(
            || "inserting a keyed document".to_owned(),
            raw.insert_one(doc! { "_id": "unique_1", "n": 1 }),
        )
        .await?;
    let second = clock
        .work(
            || "inserting a second document with the same key".to_owned(),
            async { Ok(raw.insert_one(doc! { "_id": "unique_2", "n": 1 }).await) },
        )
        .await?;
    Ok(match second {
        Err(e) if is_duplicate_key(&e) => Ok(()),
        Err(e) => Err(format!(
            "a second document with the same key answered {} instead of duplicate key 11000",
            crate::error::describe_driver_error(&e)
        )),
        Ok(_) => Err("a second document with the same key was inserted".to_owned()),
    })
}
