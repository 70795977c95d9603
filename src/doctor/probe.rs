//! The concurrency probe: many tasks writing one document at once, with the library's own
//! operations, counting acknowledged writes against distinct results.
//!
//! The tasks are futures polled together (`join_all`), not spawned: what matters is that
//! their operations are in flight at the server at once, each on its own pooled connection.
//! When the time for work runs out, every task stops where it is and the parts not begun are
//! skipped: the probe is then cut short (inconclusive, unless it already saw a loss).

use std::collections::HashSet;
use std::future::Future;

use bson::{Document, doc};
use futures::future::join_all;
use mongodb::Collection;
use mongodb::options::ReturnDocument;

use super::Clock;
use super::options::DoctorOptions;
use super::report::{CasProbe, IncrementProbe, InsertRace, Probe};
use crate::error::{Error, Result};
use crate::spec::Spec;
use crate::store::Store;

/// What the tasks of one part of the probe got: the values their acknowledged writes
/// returned or stored, their lost races and failures, and whether the clock stopped them.
#[derive(Default)]
struct Tally {
    values: Vec<i64>,
    lost_races: u64,
    failed: u64,
    first_error: Option<String>,
    cut_short: bool,
}

impl Tally {
    fn merge(tallies: Vec<Tally>) -> Tally {
        let mut all = Tally::default();
        for t in tallies {
            all.values.extend(t.values);
            all.lost_races += t.lost_races;
            all.failed += t.failed;
            all.first_error = all.first_error.or(t.first_error);
            all.cut_short |= t.cut_short;
        }
        all
    }

    fn distinct(&self) -> u64 {
        self.values.iter().collect::<HashSet<_>>().len() as u64
    }

    /// Whether the task may send its next operation (else the clock stopped it).
    fn go_on(&mut self, clock: &Clock) -> bool {
        self.cut_short |= clock.work_over();
        !self.cut_short
    }

    /// Counts a failed operation; the task stops there. A failure once the time for work ran
    /// out is the clock's doing (the operation was cut).
    fn fail(&mut self, clock: &Clock, why: impl FnOnce() -> String) {
        self.failed += 1;
        self.first_error.get_or_insert_with(why);
        self.cut_short |= clock.work_over();
    }

    fn cut() -> Tally {
        Tally {
            cut_short: true,
            ..Tally::default()
        }
    }
}

/// Creates a probe document: `Ok(false)` when the time for work ran out first.
async fn setup<T>(clock: &Clock, op: impl Future<Output = Result<T>>) -> Result<bool> {
    if clock.work_over() {
        return Ok(false);
    }
    match op.await {
        Ok(_) => Ok(true),
        Err(Error::Timeout { .. }) if clock.work_over() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs the three parts. `increment_works`: whether the library's conditional increment
/// passed its check; when it did not, the increments are sent without a projection, to still
/// find out whether the server loses updates.
pub(super) async fn run(
    store: &Store,
    raw: &Collection<Document>,
    clock: &Clock,
    options: DoctorOptions,
    increment_works: bool,
) -> Result<Probe> {
    let (increments, inc_final) = if increment_works {
        increments(store, clock, options).await?
    } else {
        raw_increments(raw, clock, options).await?
    };
    let (swaps, cas_final) = compare_and_set(store, clock, options).await?;
    let (inserts, insert_tally) = racing_inserts(store, raw, clock, options.tasks).await?;
    let tasks = u64::from(options.tasks);
    Ok(Probe {
        tasks: options.tasks,
        increments: IncrementProbe {
            planned: tasks * u64::from(options.increments),
            acknowledged: increments.values.len() as u64,
            failed: increments.failed,
            distinct: increments.distinct(),
            final_value: inc_final,
            library_operation: increment_works,
        },
        compare_and_set: CasProbe {
            planned: tasks * u64::from(options.swaps),
            wins: swaps.values.len() as u64,
            lost_races: swaps.lost_races,
            failed: swaps.failed,
            distinct: swaps.distinct(),
            final_value: cas_final,
        },
        inserts,
        first_error: [&increments, &swaps, &insert_tally]
            .iter()
            .find_map(|t| t.first_error.clone()),
        cut_short: increments.cut_short || swaps.cut_short || insert_tally.cut_short,
    })
}

/// K tasks × M of the library's conditional increments ([`Store::increment`]: findAndModify
/// with a projection); each acknowledged one returns the value it wrote.
async fn increments(
    store: &Store,
    clock: &Clock,
    options: DoctorOptions,
) -> Result<(Tally, Option<i64>)> {
    let name = "probe_increment";
    let spec = Spec::default();
    let created = clock.work(
        || format!("creating {name}"),
        store.insert(name, &spec, None),
    );
    if !setup(clock, created).await? {
        return Ok((Tally::cut(), None));
    }
    let tally = Tally::merge(
        join_all((0..options.tasks).map(|_| async {
            let mut t = Tally::default();
            for _ in 0..options.increments {
                if !t.go_on(clock) {
                    break;
                }
                let drawn = clock
                    .work(
                        || format!("incrementing {name}"),
                        store.increment(name, &spec, (0, i64::MAX - 1), 1, None),
                    )
                    .await;
                match drawn {
                    Ok(Some((value, _))) => t.values.push(value),
                    Ok(None) => {
                        t.fail(clock, || format!("an increment of {name} matched nothing"));
                        break;
                    }
                    Err(e) => {
                        t.fail(clock, || e.to_string());
                        break;
                    }
                }
            }
            t
        }))
        .await,
    );
    Ok((tally, stored_value(store, clock, name).await))
}

/// The value a probe left in its sequence, read once after its tasks; `None` when it cannot
/// be read (the probe's verdict then rests on the values the tasks saw).
async fn stored_value(store: &Store, clock: &Clock, name: &str) -> Option<i64> {
    clock
        .finish(|| format!("reading {name}"), store.load(name))
        .await
        .ok()
        .flatten()
        .map(|s| s.value)
}

/// The same increments without a projection (a plain `findOneAndUpdate` `$inc`), for a server
/// that refused the library's.
async fn raw_increments(
    raw: &Collection<Document>,
    clock: &Clock,
    options: DoctorOptions,
) -> Result<(Tally, Option<i64>)> {
    let name = "probe_increment";
    let created = clock.driver(
        || format!("creating {name}"),
        raw.insert_one(doc! { "_id": name, "value": 0_i64 }),
    );
    if !setup(clock, created).await? {
        return Ok((Tally::cut(), None));
    }
    let tally = Tally::merge(
        join_all((0..options.tasks).map(|_| async {
            let mut t = Tally::default();
            for _ in 0..options.increments {
                if !t.go_on(clock) {
                    break;
                }
                let drawn = clock
                    .driver(
                        || format!("incrementing {name}"),
                        raw.find_one_and_update(
                            doc! { "_id": name },
                            doc! { "$inc": { "value": 1_i64 } },
                        )
                        .return_document(ReturnDocument::After),
                    )
                    .await;
                match drawn.map(|d| d.and_then(|d| d.get_i64("value").ok())) {
                    Ok(Some(value)) => t.values.push(value),
                    Ok(None) => {
                        t.fail(clock, || {
                            format!("an increment of {name} returned no Int64 value")
                        });
                        break;
                    }
                    Err(e) => {
                        t.fail(clock, || e.to_string());
                        break;
                    }
                }
            }
            t
        }))
        .await,
    );
    let stored = clock
        .finish(|| format!("reading {name}"), async {
            raw.find_one(doc! { "_id": name })
                .await
                .map_err(|e| Error::database(format!("reading {name}"), e))
        })
        .await
        .ok()
        .flatten()
        .and_then(|d| d.get_i64("value").ok());
    Ok((tally, stored))
}

/// K tasks collecting S compare-and-set wins each: read ([`Store::load`]), then write the
/// value read plus one pinned on the state read ([`Store::compare_and_set`]); a win stored
/// that value.
async fn compare_and_set(
    store: &Store,
    clock: &Clock,
    options: DoctorOptions,
) -> Result<(Tally, Option<i64>)> {
    let name = "probe_compare_and_set";
    let spec = Spec::default();
    let created = clock.work(
        || format!("creating {name}"),
        store.insert(name, &spec, None),
    );
    if !setup(clock, created).await? {
        return Ok((Tally::cut(), None));
    }
    let tally = Tally::merge(
        join_all((0..options.tasks).map(|_| async {
            let mut t = Tally::default();
            let mut won = 0;
            while won < options.swaps && t.go_on(clock) {
                let read = clock
                    .work(|| format!("reading {name}"), store.load(name))
                    .await;
                let seen = match read {
                    Ok(Some(seen)) => seen,
                    Ok(None) => {
                        t.fail(clock, || format!("{name} vanished"));
                        break;
                    }
                    Err(e) => {
                        t.fail(clock, || e.to_string());
                        break;
                    }
                };
                let new_value = seen.value + 1;
                let wrote = clock
                    .work(
                        || format!("writing {name}"),
                        store.compare_and_set(name, &seen, new_value, false, None, None),
                    )
                    .await;
                match wrote {
                    Ok(Some(_)) => {
                        t.values.push(new_value);
                        won += 1;
                    }
                    Ok(None) => {
                        t.lost_races += 1;
                        tokio::task::yield_now().await;
                    }
                    Err(e) => {
                        t.fail(clock, || e.to_string());
                        break;
                    }
                }
            }
            t
        }))
        .await,
    );
    Ok((tally, stored_value(store, clock, name).await))
}

/// K racing inserts of one new sequence ([`Store::insert`]): one creates it, the others see
/// duplicate key 11000.
async fn racing_inserts(
    store: &Store,
    raw: &Collection<Document>,
    clock: &Clock,
    tasks: u32,
) -> Result<(InsertRace, Tally)> {
    let name = "probe_insert";
    let spec = Spec::default();
    let mut race = InsertRace {
        tasks: 0,
        inserted: 0,
        duplicate_key: 0,
        failed: 0,
        documents: None,
    };
    let mut tally = Tally::default();
    if !tally.go_on(clock) {
        return Ok((race, tally));
    }
    let outcomes = join_all((0..tasks).map(|_| {
        clock.work(
            || format!("creating {name}"),
            store.insert(name, &spec, None),
        )
    }))
    .await;
    for outcome in outcomes {
        race.tasks += 1;
        match outcome {
            Ok(Some(_)) => race.inserted += 1,
            Ok(None) => race.duplicate_key += 1,
            Err(e) => {
                race.failed += 1;
                tally.fail(clock, || e.to_string());
            }
        }
    }
    race.documents = clock
        .finish(|| format!("counting {name}"), async {
            raw.count_documents(doc! { "_id": name })
                .await
                .map_err(|e| Error::database(format!("counting {name}"), e))
        })
        .await
        .ok();
    Ok((race, tally))
}
