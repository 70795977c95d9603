//! `dispenser bench --history N`: the history read at scale. A scratch collection's history
//! gets `N` records (intents and their outcomes, copies of the records the library wrote for
//! a real creation, so the library made its indexes as it does with any collection), of
//! which `--history-name` (default `N/12`) belong to the name read and the rest to other
//! names. Then,
//! in the same run, pairs of reads one after the other: the raw driver's `find` with the
//! filter, sort and limit the library sends ([`History::filter`](dispenser::history::History::filter), [`History::sort`](dispenser::history::History::sort))
//! beside `Dispenser::history` — what `dispenser history NAME --limit 10` runs — held to
//! [`GOAL_RATIO`] times the raw read; and once, the whole history of the name page by page
//! (as the command line prints it) beside the raw driver reading it in one query. The
//! scratch collections are dropped at the end.

use std::time::{Duration, Instant};

use dispenser::history::History;
use dispenser::mongodb::bson::{DateTime, Document, doc, oid::ObjectId};
use dispenser::{Dispenser, Error, Options, Spec, error::Kind};
use futures::TryStreamExt;

use super::args::BenchArgs;
use super::scale::bench_error;

/// The goal: the library's read of a page of 10 within this many times the raw driver's.
pub const GOAL_RATIO: f64 = 1.5;
/// How many pairs of reads are timed (the medians are reported).
const TRIES: usize = 7;
/// The page the command line's `--limit 10` asks for.
const PAGE: usize = 10;
/// The name whose history is read.
const READ: &str = "h-read";

fn db_error(e: dispenser::mongodb::error::Error) -> Error {
    Error::Database {
        context: "bench --history".into(),
        source: e,
        // The benchmark's own collections: what a failed write left there does not matter.
        written: dispenser::error::Written::Nothing,
    }
}

/// Runs `bench --history N`.
pub(super) async fn run(
    uri: &str,
    options: Options,
    args: &BenchArgs,
    records: u64,
) -> Result<(), Error> {
    let stamp = format!(
        "bench_history_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|t| t.as_millis())
            .unwrap_or_default()
    );
    let options = options.with_collection(stamp).with_caller("bench");
    let d = Dispenser::connect(uri, options).await?;
    let outcome = measure(&d, args, records).await;
    let o = d.options();
    let db = d.client().database(&o.database);
    for coll in [o.collection.clone(), format!("{}_history", o.collection)] {
        let _ = db.collection::<Document>(&coll).drop().await;
    }
    outcome
}

/// The history collection of `d`.
fn history_of(d: &Dispenser) -> dispenser::mongodb::Collection<Document> {
    let o = d.options();
    d.client()
        .database(&o.database)
        .collection(&format!("{}_history", o.collection))
}

/// Fills the history with `records` records: `entries_read` entries of [`READ`], the rest of
/// other names (`h-0000`, …, 20 000 entries each), in time order, each an intent and its
/// outcome copied from the creation the library recorded.
async fn fill(d: &Dispenser, records: u64, entries_read: u64) -> Result<(), Error> {
    d.create(READ, Spec::default()).await?;
    let history = history_of(d);
    let intent = history
        .find_one(doc! { "phase": "intent" })
        .await
        .map_err(db_error)?
        .ok_or_else(|| bench_error("the library recorded no creation".into()))?;
    let outcome = history
        .find_one(doc! { "phase": "outcome" })
        .await
        .map_err(db_error)?
        .ok_or_else(|| bench_error("the library recorded no outcome".into()))?;
    let start = intent
        .get_datetime("at")
        .map(|t| t.timestamp_millis())
        .unwrap_or_default();
    let entries = records / 2;
    let others = entries.saturating_sub(entries_read);
    // The read name's entries spread evenly among the others'.
    let every = (entries / entries_read.max(1)).max(1);
    let (mut read, mut other) = (1_u64, 0_u64);
    let mut batch = Vec::with_capacity(10_000);
    for i in 1..entries {
        let name = if i % every == 0 && read < entries_read || other >= others {
            read += 1;
            READ.to_owned()
        } else {
            other += 1;
            format!("h-{:04}", other / 20_000)
        };
        let at = DateTime::from_millis(start + i64::try_from(i).unwrap_or(i64::MAX));
        let id = ObjectId::new();
        let mut a = intent.clone();
        a.extend(doc! { "_id": id, "name": &name, "at": at });
        let mut b = outcome.clone();
        b.extend(doc! { "_id": ObjectId::new(), "of": id, "name": &name, "at": at });
        batch.push(a);
        batch.push(b);
        if batch.len() >= 10_000 {
            history
                .insert_many(std::mem::take(&mut batch))
                .await
                .map_err(db_error)?;
        }
    }
    if !batch.is_empty() {
        history.insert_many(batch).await.map_err(db_error)?;
    }
    Ok(())
}

/// The raw driver reading what `query` reads of [`READ`] (the same filter, sort and limit),
/// in one query: how long it took and how many records it read.
async fn raw(
    d: &Dispenser,
    query: &History,
    limit: Option<usize>,
) -> Result<(Duration, usize), Error> {
    let filter = query.filter()?;
    let history = history_of(d);
    let begun = Instant::now();
    let mut find = history.find(filter).sort(query.sort());
    if let Some(n) = limit {
        find = find.limit(i64::try_from(n).unwrap_or(i64::MAX));
    }
    let got: Vec<Document> = find
        .await
        .map_err(db_error)?
        .try_collect()
        .await
        .map_err(db_error)?;
    Ok((begun.elapsed(), got.len()))
}

/// The library reading the whole history of [`READ`] page by page, as `dispenser history`
/// prints it: how long it took and how many entries it read.
async fn paged(d: &Dispenser) -> Result<(Duration, usize), Error> {
    let begun = Instant::now();
    let limit = dispenser::history::MAX_HISTORY_PAGE;
    let mut query = d.history(Kind::Sequence, READ).limit(limit);
    let mut read = 0;
    loop {
        let page = query.clone().await?;
        read += page.len();
        match page.last() {
            Some(last) if page.len() == limit => query = query.after(last.cursor()),
            _ => break,
        }
    }
    Ok((begun.elapsed(), read))
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn measure(d: &Dispenser, args: &BenchArgs, records: u64) -> Result<(), Error> {
    let entries_read = (args.history_name.unwrap_or(records / 12) / 2)
        .min(records / 2)
        .max(1);
    let filled = Instant::now();
    fill(d, records, entries_read).await?;
    let filled = filled.elapsed();
    let page = d.history(Kind::Sequence, READ).limit(PAGE);
    // Warm-up: one of each, unmeasured.
    raw(d, &page, Some(PAGE)).await?;
    page.clone().await?;
    let (mut raws, mut libs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..TRIES {
        let (r, n) = raw(d, &page, Some(PAGE)).await?;
        let begun = Instant::now();
        let got = page.clone().await?;
        let l = begun.elapsed();
        if (n, got.len()) != (PAGE, PAGE) {
            return Err(bench_error(format!(
                "a page of {PAGE} read {n} records raw and {} entries through the library",
                got.len()
            )));
        }
        raws.push(r);
        libs.push(l);
        ratios.push(l.as_secs_f64() / r.as_secs_f64().max(1e-9));
    }
    ratios.sort_by(f64::total_cmp);
    let ratio = ratios[ratios.len() / 2];
    let (raw_page, lib_page) = (median(raws), median(libs));
    let all = d.history(Kind::Sequence, READ);
    let (raw_all, raw_n) = raw(d, &all, None).await?;
    let (lib_all, lib_n) = paged(d).await?;
    let met = ratio <= GOAL_RATIO;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "records": records,
                "records_of_the_name": entries_read * 2,
                "entries_of_the_name": entries_read,
                "fill_seconds": filled.as_secs_f64(),
                "page": PAGE,
                "raw_page_ms": ms(raw_page),
                "history_page_ms": ms(lib_page),
                "ratio": ratio,
                "goal_ratio": GOAL_RATIO,
                "goal_met": met,
                "raw_all_ms": ms(raw_all),
                "raw_all_records": raw_n,
                "history_all_ms": ms(lib_all),
                "history_all_entries": lib_n,
            })
        );
    } else {
        println!(
            "{records} history records, {} of them ({entries_read} entries) of the name read; filled in {:.1} s",
            entries_read * 2,
            filled.as_secs_f64()
        );
        println!("{:<52} {:>12} {:>10}", "read", "median ms", "entries");
        println!(
            "{:<52} {:>12.1} {:>10}",
            format!("raw driver: find, the same filter, sort, limit {PAGE}"),
            ms(raw_page),
            PAGE
        );
        println!(
            "{:<52} {:>12.1} {:>10}",
            format!("history NAME --limit {PAGE} (Dispenser::history)"),
            ms(lib_page),
            PAGE
        );
        println!(
            "ratio (median of {TRIES} pairs): {ratio:.2}× the raw read (goal ≤{GOAL_RATIO}×: {})",
            if met { "ok" } else { "MISSED" }
        );
        println!(
            "{:<52} {:>12.1} {:>10}",
            "raw driver: find, the name's every record, one query",
            ms(raw_all),
            raw_n
        );
        println!(
            "{:<52} {:>12.1} {:>10}",
            "history NAME (every entry, pages of 1000)",
            ms(lib_all),
            lib_n
        );
    }
    Ok(())
}
