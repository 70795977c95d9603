//! The scratch collection: the only place the examination writes, removed at the end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bson::Document;
use mongodb::Database;

use super::Clock;

/// The prefix of every scratch collection's name.
pub(super) const PREFIX: &str = "dispenser_doctor_";

/// A collection name no other examination uses: the prefix, the process and the time.
pub(super) fn name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{PREFIX}{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Drops the collection and then checks that it is gone: `(true, None)` when it is,
/// `(false, why)` when it could not be removed in time. A drop that fails because the
/// collection was never created (some servers answer a drop of a missing collection with an
/// error, without MongoDB's code 26) still ends in `true`: the listing decides.
pub(super) async fn remove(db: &Database, name: &str, clock: &Clock) -> (bool, Option<String>) {
    let dropped = clock
        .cleanup(
            || format!("dropping the scratch collection {name}"),
            db.collection::<Document>(name).drop(),
        )
        .await;
    let listed = clock
        .cleanup(
            || "listing the collections".to_owned(),
            db.list_collection_names(),
        )
        .await;
    match (listed, dropped) {
        (Ok(names), _) if !names.iter().any(|n| n == name) => (true, None),
        (Ok(_), Err(e)) | (Err(e), _) => (
            false,
            Some(format!(
                "{e}; drop it by hand: db.getCollection({name:?}).drop()"
            )),
        ),
        (Ok(_), Ok(())) => (
            false,
            Some(format!(
                "it is still listed after the drop; drop it by hand: db.getCollection({name:?}).drop()"
            )),
        ),
    }
}
