//! The server gate: proves the server in `MONGODB_URI` is linearizable for exactly the
//! operations the library relies on, before any other test trusts it.
//!
//! 1. Concurrent `$inc` through findAndModify with a projection: 16 tasks × 500 must return
//!    8000 distinct values, and the final value must be 8000.
//! 2. A compare-and-set loop on a `version` field: every value issued exactly once.
//! 3. Concurrent inserts of one `_id`: exactly one succeeds, the rest see duplicate key 11000.

use std::collections::HashSet;

use dispenser::mongodb::bson::{Document, doc};
use dispenser::mongodb::error::{ErrorKind, WriteFailure};
use dispenser::mongodb::options::ReturnDocument;
use dispenser::mongodb::{Client, Collection};
use futures::future::join_all;

use crate::common;

const TASKS: i64 = 16;
const PER_TASK: i64 = 500;

/// Runs the three checks; `Err` names the server and the broken property.
pub async fn check() -> Result<(), String> {
    let client = common::client().await;
    let server = describe_server(&client).await?;
    let db = client.database(common::DB);
    let fail = |property: &str, detail: String| {
        Err(format!(
            "the server at {} ({server}) is not linearizable for {property}: {detail}",
            dispenser::redact_uri(&common::uri())
        ))
    };

    // 1. findAndModify $inc with a projection.
    let coll: Collection<Document> = db.collection(&common::unique("gate_inc"));
    coll.insert_one(doc! { "_id": "c", "value": 0_i64 })
        .await
        .map_err(|e| format!("insert failed: {e}"))?;
    let tasks = (0..TASKS).map(|_| {
        let coll = coll.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..PER_TASK {
                let d = coll
                    .find_one_and_update(doc! { "_id": "c" }, doc! { "$inc": { "value": 1_i64 } })
                    .projection(doc! { "value": 1, "_id": 0 })
                    .return_document(ReturnDocument::After)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("document vanished")?;
                got.push(d.get_i64("value").map_err(|e| e.to_string())?);
            }
            Ok::<_, String>(got)
        })
    });
    let mut all = Vec::new();
    for r in join_all(tasks).await {
        all.extend(r.map_err(|e| e.to_string())??);
    }
    let distinct: HashSet<_> = all.iter().collect();
    let final_doc = coll
        .find_one(doc! { "_id": "c" })
        .await
        .map_err(|e| e.to_string())?
        .ok_or("document vanished")?;
    let final_value = final_doc.get_i64("value").map_err(|e| e.to_string())?;
    if distinct.len() != (TASKS * PER_TASK) as usize || final_value != TASKS * PER_TASK {
        return fail(
            "findAndModify $inc with a projection",
            format!(
                "{} tasks x {} increments returned {} distinct values of {}, final value {final_value}",
                TASKS,
                PER_TASK,
                distinct.len(),
                TASKS * PER_TASK
            ),
        );
    }

    // 2. compare-and-set on a version field.
    let coll: Collection<Document> = db.collection(&common::unique("gate_cas"));
    coll.insert_one(doc! { "_id": "c", "value": 0_i64, "version": 0_i64 })
        .await
        .map_err(|e| e.to_string())?;
    const CAS_TASKS: usize = 8;
    const CAS_PER_TASK: usize = 100;
    let tasks = (0..CAS_TASKS).map(|_| {
        let coll = coll.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            while got.len() < CAS_PER_TASK {
                let d = coll
                    .find_one(doc! { "_id": "c" })
                    .projection(doc! { "value": 1, "version": 1, "_id": 0 })
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("document vanished")?;
                let value = d.get_i64("value").map_err(|e| e.to_string())?;
                let version = d.get_i64("version").map_err(|e| e.to_string())?;
                let res = coll
                    .update_one(
                        doc! { "_id": "c", "version": version },
                        doc! { "$set": { "value": value + 1 }, "$inc": { "version": 1_i64 } },
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                if res.matched_count == 1 {
                    got.push(value + 1);
                } else {
                    tokio::task::yield_now().await;
                }
            }
            Ok::<_, String>(got)
        })
    });
    let mut all = Vec::new();
    for r in join_all(tasks).await {
        all.extend(r.map_err(|e| e.to_string())??);
    }
    all.sort_unstable();
    let want: Vec<i64> = (1..=(CAS_TASKS * CAS_PER_TASK) as i64).collect();
    if all != want {
        let mut d = all.clone();
        d.dedup();
        return fail(
            "compare-and-set on a version field (update_one filtered on version)",
            format!(
                "{} winning writes issued {} distinct values",
                all.len(),
                d.len()
            ),
        );
    }

    // 3. racing inserts of one _id.
    let coll: Collection<Document> = db.collection(&common::unique("gate_upsert"));
    let tasks = (0..16).map(|i| {
        let coll = coll.clone();
        tokio::spawn(async move {
            match coll.insert_one(doc! { "_id": "same", "by": i }).await {
                Ok(_) => Ok(true),
                Err(e) => match *e.kind {
                    ErrorKind::Write(WriteFailure::WriteError(ref w)) if w.code == 11000 => {
                        Ok(false)
                    }
                    _ => Err(e.to_string()),
                },
            }
        })
    });
    let mut inserted = 0;
    for r in join_all(tasks).await {
        if r.map_err(|e| e.to_string())?? {
            inserted += 1;
        }
    }
    let count = coll
        .count_documents(doc! {})
        .await
        .map_err(|e| e.to_string())?;
    if inserted != 1 || count != 1 {
        return fail(
            "concurrent inserts of one _id",
            format!("{inserted} inserts succeeded, {count} documents stored; want 1 and 1"),
        );
    }
    Ok(())
}

async fn describe_server(client: &Client) -> Result<String, String> {
    let info = client
        .database("admin")
        .run_command(doc! { "buildInfo": 1 })
        .await
        .map_err(|e| {
            format!(
                "cannot reach the server at {}: {e} (run the tests with scripts/test.sh, or set MONGODB_URI)",
                dispenser::redact_uri(&common::uri())
            )
        })?;
    Ok(format!(
        "version {}",
        info.get_str("version").unwrap_or("unknown")
    ))
}

#[tokio::test]
async fn server_is_linearizable_for_the_operations_the_library_uses() {
    common::ready();
}
