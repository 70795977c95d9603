//! What is drawn from: the kinds of run (raw driver call, sequence, blocks), their worker
//! encoding, and the source each opens.

use dispenser::mongodb::Collection;
use dispenser::mongodb::bson::{Document, doc};
use dispenser::mongodb::options::{CollectionOptions, ReturnDocument};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use dispenser::gapless::{Gapless, GaplessOptions};
use dispenser::mongodb::IndexModel;
use dispenser::mongodb::options::IndexOptions;

use dispenser::{
    Dispenser, Error, Options, Spec,
    block::{BlockOptions, BlockSequence},
    queue::{Queue, QueueSpec},
    sequence::Stats,
    sequence::Strategy,
    source::{BoxNumberSource, NumberSource, SourceKind},
};

/// What one run measures.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Kind {
    /// `findOneAndUpdate({_id}, {$inc: {value: 1}})` with the driver, nothing else.
    Raw,
    /// The same raw call on a document of the sequence schema (10 fields): separates the
    /// server's cost of the document from the library's.
    RawShaped,
    /// `Sequence::next()` with a strategy, coalesced (`true`, the library's default) or not.
    Seq(Strategy, bool),
    /// `BlockSequence::next()`: blocks of `size`, prefetch share (0 = off), coalesced or not.
    Blocks(Strategy, u64, f64, bool),
    /// `insert_one({number})` into a collection with a unique index on `number` (numbers from
    /// a counter of the process): the baseline of gap-free numbers.
    RawInsert,
    /// `Gapless::issue` with the same insert.
    Gapless,
    /// What a user writes by hand (the seeds' loop): read the counter, then
    /// `updateOne({_id, value: read}, {$inc: {value: 1}})`; when that matched nothing, read
    /// again and retry, without backoff. One call at a time per task, nothing shared.
    HandLoop,
    /// A ticket through a queue: `Queue::take`, then `Queue::call` (each a compare-and-set of
    /// the queue's document), so that the line stays as short as the tasks drawing: a queue
    /// keeps the times of up to 1000 takes of the people waiting in its document, and a line
    /// that only grows would measure the replacing of a document of 1000 entries, not a take.
    /// The number is the ticket taken.
    QueueTake,
}

/// The business collection of a gap-free run on `target`.
pub(super) fn business_of(d: &Dispenser, target: &str) -> String {
    format!("{}_{target}", d.options().collection)
}

pub(super) fn strategy_code(s: Strategy) -> &'static str {
    match s {
        Strategy::Cas => "cas",
        _ => "inc",
    }
}

pub(super) fn parse_strategy(s: &str) -> Option<Strategy> {
    match s {
        "cas" => Some(Strategy::Cas),
        "inc" => Some(Strategy::ConditionalIncrement),
        _ => None,
    }
}

fn coalesce_code(coalesce: bool) -> &'static str {
    if coalesce { "on" } else { "off" }
}

fn parse_coalesce(s: &str) -> Option<bool> {
    match s {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

impl Kind {
    pub(super) fn label(&self) -> String {
        match self {
            Kind::Raw => "raw findOneAndUpdate $inc".into(),
            Kind::RawInsert => "raw insert_one, unique index".into(),
            Kind::Gapless => "gapless issue + insert_one".into(),
            Kind::RawShaped => "raw $inc, sequence doc".into(),
            Kind::HandLoop => "hand-written read + update loop".into(),
            Kind::QueueTake => "queue take + call".into(),
            Kind::Seq(s, c) => format!("dispenser {}{}", strategy_code(*s), uncoalesced(*c)),
            Kind::Blocks(s, size, prefetch, c) => {
                let p = if *prefetch > 0.0 {
                    format!(" prefetch {prefetch}")
                } else {
                    String::new()
                };
                format!("{} block {size}{p}{}", strategy_code(*s), uncoalesced(*c))
            }
        }
    }

    /// Whether concurrent calls of this run share writes (raw runs never do).
    pub(super) fn coalesce(&self) -> bool {
        match self {
            Kind::Raw
            | Kind::RawShaped
            | Kind::RawInsert
            | Kind::Gapless
            | Kind::HandLoop
            | Kind::QueueTake => false,
            Kind::Seq(_, c) | Kind::Blocks(.., c) => *c,
        }
    }

    /// Whether every call is one round trip (no blocks): then every call is timed and the
    /// order of the numbers is checked against the calls' invoke and return times.
    pub(super) fn every_call_a_round_trip(&self) -> bool {
        !matches!(self, Kind::Blocks(..))
    }

    /// The raw call this run is compared with: a raw `insert_one` for gap-free numbers and
    /// for it, the raw `$inc` for the others.
    pub(super) fn baseline(&self) -> Kind {
        match self {
            Kind::RawInsert | Kind::Gapless => Kind::RawInsert,
            _ => Kind::Raw,
        }
    }

    /// Whether this run draws the way an application with `Options::default()` does: a
    /// plain sequence, the default strategy, coalesced.
    pub(super) fn is_library_default(&self) -> bool {
        let d = Options::default();
        *self == Kind::Seq(d.strategy, d.coalesce)
    }

    /// The worker-process encoding: `raw:DOC`, `seq:inc|cas:on|off:NAME` or
    /// `blocks:inc|cas:on|off:SIZE:PREFETCH:NAME` (`on|off`: coalesced or not).
    pub(super) fn encode(&self, target: &str) -> String {
        match self {
            Kind::Raw | Kind::RawShaped => format!("raw:{target}"),
            Kind::RawInsert => format!("rawinsert:{target}"),
            Kind::Gapless => format!("gapless:{target}"),
            Kind::HandLoop => format!("hand:{target}"),
            Kind::QueueTake => format!("queue:{target}"),
            Kind::Seq(s, c) => format!("seq:{}:{}:{target}", strategy_code(*s), coalesce_code(*c)),
            Kind::Blocks(s, size, prefetch, c) => format!(
                "blocks:{}:{}:{size}:{prefetch}:{target}",
                strategy_code(*s),
                coalesce_code(*c)
            ),
        }
    }

    pub(super) fn decode(s: &str) -> Result<(Kind, String), Error> {
        let bad = || Error::InvalidArgument {
            what: "--worker".into(),
            reason: format!("{s:?} is not a worker spec"),
        };
        let (head, rest) = s.split_once(':').ok_or_else(bad)?;
        match head {
            "raw" => Ok((Kind::Raw, rest.to_owned())),
            "rawinsert" => Ok((Kind::RawInsert, rest.to_owned())),
            "gapless" => Ok((Kind::Gapless, rest.to_owned())),
            "hand" => Ok((Kind::HandLoop, rest.to_owned())),
            "queue" => Ok((Kind::QueueTake, rest.to_owned())),
            "seq" => {
                let mut parts = rest.splitn(3, ':');
                let strategy = parts.next().and_then(parse_strategy).ok_or_else(bad)?;
                let coalesce = parts.next().and_then(parse_coalesce).ok_or_else(bad)?;
                let name = parts.next().ok_or_else(bad)?;
                Ok((Kind::Seq(strategy, coalesce), name.to_owned()))
            }
            "blocks" => {
                let mut parts = rest.splitn(5, ':');
                let strategy = parts.next().and_then(parse_strategy).ok_or_else(bad)?;
                let coalesce = parts.next().and_then(parse_coalesce).ok_or_else(bad)?;
                let size = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
                let prefetch = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
                let name = parts.next().ok_or_else(bad)?;
                Ok((
                    Kind::Blocks(strategy, size, prefetch, coalesce),
                    name.to_owned(),
                ))
            }
            _ => Err(bad()),
        }
    }
}

/// One source of numbers, shared by the tasks of a process: the raw driver call, a plain
/// sequence through the `NumberSource` trait (opened from a `SourceKind`, as an application
/// configured by name would), or a block client as its concrete type — what a Rust caller
/// of blocks holds. (Through the object-safe trait each call boxes its future: about 40 ns,
/// which is nothing next to a round trip but most of a call served from memory.)
#[derive(Clone)]
pub(super) enum Source {
    Raw(Collection<Document>, String),
    Lib(Arc<BoxNumberSource>),
    Blocks(BlockSequence),
    /// The business collection and this process's counter (its high bits: the process id).
    RawInsert(Collection<Document>, Arc<AtomicI64>),
    Gapless(Gapless),
    /// The raw counter document, its name, and what the loop counted.
    HandLoop(Collection<Document>, String, Arc<LoopCounters>),
    Queue(Queue),
}

/// What the hand-written loop did: its writes, the ones that matched nothing, its reads.
#[derive(Debug, Default)]
pub(super) struct LoopCounters {
    writes: AtomicU64,
    conflicts: AtomicU64,
    round_trips: AtomicU64,
}

fn raw_error(context: &str) -> impl Fn(dispenser::mongodb::error::Error) -> Error + '_ {
    move |e| Error::Database {
        context: context.into(),
        source: e,
        written: dispenser::error::Written::Nothing,
    }
}

/// The `value` of a raw counter document read through a projection.
fn value_of(d: Option<Document>, id: &str) -> dispenser::Result<i64> {
    let d = d.ok_or_else(|| Error::NotFound {
        kind: dispenser::error::Kind::Sequence,
        name: id.into(),
    })?;
    d.get_i64("value").map_err(|e| Error::CorruptDocument {
        what: "sequence".into(),
        name: id.into(),
        field: "value".into(),
        problem: e.to_string(),
    })
}

/// One call of the hand-written loop (see [`Kind::HandLoop`]).
async fn hand_loop(
    coll: &Collection<Document>,
    id: &str,
    counted: &LoopCounters,
) -> dispenser::Result<i64> {
    loop {
        counted.round_trips.fetch_add(1, Ordering::Relaxed);
        let read = coll
            .find_one(doc! { "_id": id })
            .projection(doc! { "value": 1, "_id": 0 })
            .await
            .map_err(raw_error("hand-written loop: read"))?;
        let value = value_of(read, id)?;
        counted.round_trips.fetch_add(1, Ordering::Relaxed);
        counted.writes.fetch_add(1, Ordering::Relaxed);
        let written = coll
            .update_one(
                doc! { "_id": id, "value": value },
                doc! { "$inc": { "value": 1_i64 } },
            )
            .await
            .map_err(raw_error("hand-written loop: conditional update"))?;
        if written.matched_count == 1 {
            return Ok(value + 1);
        }
        counted.conflicts.fetch_add(1, Ordering::Relaxed);
    }
}

impl Source {
    pub(super) async fn next(&self) -> dispenser::Result<i64> {
        match self {
            Source::Raw(coll, id) => {
                let d = coll
                    .find_one_and_update(
                        doc! { "_id": id.as_str() },
                        doc! { "$inc": { "value": 1_i64 } },
                    )
                    .projection(doc! { "value": 1, "_id": 0 })
                    .return_document(ReturnDocument::After)
                    .await
                    .map_err(raw_error("raw baseline increment"))?;
                value_of(d, id)
            }
            Source::HandLoop(coll, id, counted) => hand_loop(coll, id, counted).await,
            Source::Queue(q) => {
                let ticket = q.take().await?.number;
                // Every task calls after its own take: someone always waits.
                q.call().await?;
                Ok(ticket)
            }
            Source::Lib(s) => s.next().await,
            Source::Blocks(b) => b.next().await,
            Source::RawInsert(coll, counter) => {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                coll.insert_one(doc! { "number": n })
                    .await
                    .map_err(|e| Error::Database {
                        context: "raw baseline insert".into(),
                        source: e,
                        written: dispenser::error::Written::Nothing,
                    })?;
                Ok(n)
            }
            Source::Gapless(g) => {
                let coll = g.business(); // a reference: each write's future copies it
                g.issue(|n| async move { coll.insert_one(doc! { "number": n }).await })
                    .await
                    .map(|i| i.number)
            }
        }
    }

    /// The source's counters: `None` for the raw calls (one write and one round trip per
    /// number) and for a queue, which counts nothing.
    pub(super) fn stats(&self) -> Option<Stats> {
        match self {
            Source::Raw(..) | Source::RawInsert(..) | Source::Queue(_) => None,
            Source::HandLoop(.., counted) => {
                let mut s = Stats::default();
                s.writes = counted.writes.load(Ordering::Relaxed);
                s.conflicts = counted.conflicts.load(Ordering::Relaxed);
                s.retries = s.conflicts;
                s.round_trips = counted.round_trips.load(Ordering::Relaxed);
                Some(s)
            }
            Source::Gapless(g) => Some(g.stats()),
            Source::Lib(s) => Some(s.stats()),
            Source::Blocks(b) => Some(b.stats()),
        }
    }

    /// Gives back what a block client still holds, so the run leaves no gap it need not.
    pub(super) async fn close(self) {
        let closed = match &self {
            Source::Raw(..) | Source::RawInsert(..) | Source::HandLoop(..) | Source::Queue(_) => {
                return;
            }
            Source::Gapless(g) => g.flush().await,
            Source::Lib(s) => s.close().await.map(drop),
            Source::Blocks(b) => b.close().await.map(drop),
        };
        if let Err(e) = closed {
            tracing::warn!("closing the bench's source failed: {e}");
        }
    }
}

fn uncoalesced(coalesce: bool) -> &'static str {
    if coalesce { "" } else { ", uncoalesced" }
}

pub(super) fn raw_collection(
    d: &Dispenser,
    client: &dispenser::mongodb::Client,
) -> Collection<Document> {
    let o = d.options();
    client.database(&o.database).collection_with_options(
        &o.collection,
        CollectionOptions::builder()
            .write_concern(o.write_concern.clone())
            .build(),
    )
}

pub(super) async fn source_for(
    kind: &Kind,
    target: &str,
    uri: &str,
    options: &Options,
) -> dispenser::Result<Source> {
    match kind {
        Kind::Raw | Kind::RawShaped | Kind::HandLoop => {
            let client = client(uri, options).await?;
            let d = Dispenser::new(&client, options.clone())?;
            let coll = raw_collection(&d, &client);
            Ok(if *kind == Kind::HandLoop {
                Source::HandLoop(coll, target.to_owned(), Arc::default())
            } else {
                Source::Raw(coll, target.to_owned())
            })
        }
        Kind::QueueTake => {
            let d = Dispenser::connect(uri, options.clone()).await?;
            Ok(Source::Queue(d.open_queue(target).await?))
        }
        Kind::Seq(strategy, coalesce) => {
            let o = options.clone().with_strategy(*strategy);
            let d = Dispenser::connect(uri, o.with_coalesce(*coalesce)).await?;
            let source = d.open_source(target, &SourceKind::Plain).await?;
            Ok(Source::Lib(Arc::new(source)))
        }
        Kind::RawInsert => {
            let d = Dispenser::connect(uri, options.clone()).await?;
            let client = client(uri, options).await?;
            let coll = client.database(&options.database).collection_with_options(
                &business_of(&d, target),
                CollectionOptions::builder()
                    .write_concern(options.write_concern.clone())
                    .build(),
            );
            let base = i64::from(std::process::id()) << 32;
            Ok(Source::RawInsert(coll, Arc::new(AtomicI64::new(base))))
        }
        Kind::Gapless => {
            let d = Dispenser::connect(uri, options.clone()).await?;
            let g = d
                .ensure_gapless(
                    target,
                    GaplessOptions::new(business_of(&d, target), "number"),
                )
                .await?;
            Ok(Source::Gapless(g))
        }
        Kind::Blocks(strategy, size, prefetch, coalesce) => {
            let o = options.clone().with_strategy(*strategy);
            let d = Dispenser::connect(uri, o.with_coalesce(*coalesce)).await?;
            let opts = BlockOptions::default()
                .with_size(*size)
                .with_prefetch((*prefetch > 0.0).then_some(*prefetch));
            let blocks = d.open_blocks(target).options(opts).await?;
            // A client made ahead of its first call: with prefetch, its first block is
            // reserved when it is made (as Leaf does at start); let it land.
            blocks.settle().await;
            Ok(Source::Blocks(blocks))
        }
    }
}

pub(super) async fn client(
    uri: &str,
    options: &Options,
) -> dispenser::Result<dispenser::mongodb::Client> {
    let invalid = |e: dispenser::mongodb::error::Error| Error::InvalidArgument {
        what: format!("MongoDB URI {}", dispenser::error::redact::redact_uri(uri)),
        reason: dispenser::error::redact::scrub(
            &dispenser::error::redact::describe_driver_error(&e),
            uri,
        ),
    };
    dispenser::error::redact::check_credentials(uri)?;
    let mut o = dispenser::mongodb::options::ClientOptions::parse(uri)
        .await
        .map_err(invalid)?;
    o.server_selection_timeout
        .get_or_insert(options.operation_timeout);
    dispenser::mongodb::Client::with_options(o).map_err(invalid)
}

/// Creates the document a run draws from: a raw counter or a fresh sequence.
pub(super) async fn prepare_target(
    d: &Dispenser,
    raw: &Collection<Document>,
    kind: &Kind,
    target: &str,
) -> dispenser::Result<()> {
    match kind {
        Kind::Raw | Kind::HandLoop => raw
            .insert_one(doc! { "_id": target, "value": 0_i64 })
            .await
            .map(drop)
            .map_err(|e| Error::Database {
                context: "creating the raw baseline document".into(),
                source: e,
                written: dispenser::error::Written::Nothing,
            }),
        Kind::RawShaped | Kind::Seq(..) | Kind::Blocks(..) => {
            d.create(target, Spec::default()).await.map(drop)
        }
        Kind::RawInsert => {
            let coll = raw
                .client()
                .database(&d.options().database)
                .collection::<Document>(&business_of(d, target));
            coll.create_index(
                IndexModel::builder()
                    .keys(doc! { "number": 1 })
                    .options(IndexOptions::builder().unique(true).build())
                    .build(),
            )
            .await
            .map(drop)
            .map_err(|e| Error::Database {
                context: "creating the raw baseline's unique index".into(),
                source: e,
                written: dispenser::error::Written::Nothing,
            })
        }
        Kind::Gapless => d
            .ensure_gapless(
                target,
                GaplessOptions::new(business_of(d, target), "number"),
            )
            .await
            .map(drop),
        Kind::QueueTake => d
            .create_queue(target, QueueSpec::default().with_max(QUEUE_MAX))
            .await
            .map(drop),
    }
}

/// The highest ticket of the bench's queue: its range never fills.
const QUEUE_MAX: i64 = 1 << 62;

/// Removes what a run on `target` left: its document, and a gap-free run's business
/// collection and state, a queue's document (a queue with people waiting cannot be deleted
/// through the library, and the bench's never stops having them).
pub(super) async fn clean_up(d: &Dispenser, raw: &Collection<Document>, kind: &Kind, target: &str) {
    let db = raw.client().database(&d.options().database);
    let collection = &d.options().collection;
    let _ = raw.delete_one(doc! { "_id": target }).await;
    match kind {
        Kind::RawInsert | Kind::Gapless => {
            let _ = db
                .collection::<Document>(&business_of(d, target))
                .drop()
                .await;
            let _ = db
                .collection::<Document>(&format!("{collection}_gapless"))
                .delete_one(doc! { "_id": target })
                .await;
        }
        Kind::QueueTake => {
            let _ = db
                .collection::<Document>(&format!("{collection}_queues"))
                .delete_one(doc! { "_id": target })
                .await;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_specs_round_trip() {
        let kinds = [
            Kind::Raw,
            Kind::Seq(Strategy::Cas, true),
            Kind::Seq(Strategy::ConditionalIncrement, false),
            Kind::Blocks(Strategy::ConditionalIncrement, 1000, 0.25, true),
            Kind::Blocks(Strategy::Cas, 7, 0.0, false),
            Kind::HandLoop,
            Kind::QueueTake,
            Kind::RawInsert,
            Kind::Gapless,
        ];
        for kind in kinds {
            let (back, name) = Kind::decode(&kind.encode("a:b")).expect("decodes");
            assert_eq!((back, name.as_str()), (kind, "a:b"));
        }
        assert!(Kind::decode("seq:inc:maybe:x").is_err());
    }

    #[test]
    fn only_the_coalesced_default_strategy_is_the_default() {
        assert!(Kind::Seq(Strategy::ConditionalIncrement, true).is_library_default());
        assert!(!Kind::Seq(Strategy::ConditionalIncrement, false).is_library_default());
        assert!(!Kind::Seq(Strategy::Cas, true).is_library_default());
        assert!(!Kind::Raw.is_library_default());
        assert!(!Kind::Blocks(Strategy::ConditionalIncrement, 1, 0.0, true).is_library_default());
        assert_eq!(
            Kind::Seq(Strategy::ConditionalIncrement, false).label(),
            "dispenser inc, uncoalesced"
        );
    }
}
