//! `dispenser bench --queue-growth`: a queue at its largest beside the fresh case, in one run.
//!
//! - **A take**: on a queue that stored 1 000 request ids and made 600 calls, beside a take on
//!   a queue made for the round — with a request id and without, alternated one by one, each
//!   followed by an untimed call so that neither queue fills. Goal: the grown median at most
//!   1.5× the fresh one.
//! - **The service's reads**: two services, started here, over two collections — one holding
//!   one queue, `qa`; the other `qa` and 300 queue documents of the largest size the rules
//!   allow (1 000 spans of tickets done out of line, 1 000 takes' times, 100 desks, 20 calls,
//!   64 request ids with the longest caller and id; made by operations once, then copied) —
//!   read in turns: `/v1/overview`
//!   for a token that sees `qa` only, and `/metrics`. Goal: the large collection's median
//!   within 50 ms of the small one's.

use std::time::{Duration, Instant};

use dispenser::mongodb::bson::{Document, doc, oid::ObjectId};
use dispenser::queue::QueueSpec;
use dispenser::{Dispenser, Error, Options};

use super::args::BenchArgs;
use super::scale::{request_as, serve};

/// Takes timed per kind (fresh, grown) and per round.
const TAKES: usize = 30;
const ROUNDS: usize = 5;
/// Reads of each path on each service.
const READS: usize = 15;
const TAKE_GOAL: f64 = 1.5;
const READ_GOAL: Duration = Duration::from_millis(50);
const QUEUES: usize = 300;
const TOKEN_ALL: &str = "bench-growth-token-all-0123456789";
const TOKEN_ONE: &str = "bench-growth-token-one-0123456789";

fn growth_error(reason: String) -> Error {
    Error::InvalidArgument {
        what: "bench --queue-growth".into(),
        reason,
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A scratch collection name.
fn stamp(what: &str) -> String {
    format!(
        "bench_growth_{what}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|t| t.as_millis())
            .unwrap_or_default()
    )
}

/// Drops the collections of `d` (its queues, their request ids).
async fn drop_all(d: &Dispenser) {
    let o = d.options();
    let db = d.client().database(&o.database);
    for suffix in ["", "_queues", "_queue_requests"] {
        let _ = db
            .collection::<Document>(&format!("{}{suffix}", o.collection))
            .drop()
            .await;
    }
}

/// Runs `bench --queue-growth`.
pub(super) async fn run(uri: &str, options: Options, args: &BenchArgs) -> Result<(), Error> {
    let small = Dispenser::connect(uri, options.clone().with_collection(stamp("one"))).await?;
    let large = Dispenser::connect(uri, options.with_collection(stamp("many"))).await?;
    let outcome = measure(uri, &small, &large, args).await;
    drop_all(&small).await;
    drop_all(&large).await;
    outcome
}

/// The medians of one kind of take.
struct Takes {
    fresh: Duration,
    grown: Duration,
}

impl Takes {
    fn ratio(&self) -> f64 {
        self.grown.as_secs_f64() / self.fresh.as_secs_f64().max(1e-9)
    }
}

/// One read, on both services.
struct Reads {
    path: &'static str,
    small: Duration,
    large: Duration,
    large_bytes: usize,
}

async fn measure(
    uri: &str,
    small: &Dispenser,
    large: &Dispenser,
    args: &BenchArgs,
) -> Result<(), Error> {
    let (keyed, plain, grown_doc) = takes(large).await?;
    let reads = service_reads(uri, small, large).await?;
    report(args, &keyed, &plain, grown_doc, &reads);
    Ok(())
}

/// The take on a grown queue beside the take on a fresh one, with and without a request id;
/// and the grown document's size.
async fn takes(d: &Dispenser) -> Result<(Takes, Takes, usize), Error> {
    let grown = d
        .create_queue("grown", QueueSpec::default().with_max(99_999))
        .await?;
    // 1 000 request ids from 8 kiosks, 600 calls among them.
    for i in 0..1000_u32 {
        grown
            .take()
            .request_id(format!("kiosk-{}/{i:06}", i % 8))
            .caller(format!("kiosk-{}", i % 8))
            .await?;
        if i % 5 < 3 {
            grown.call().await?;
        }
    }
    let size = document_size(d, "grown").await?;
    let (mut keyed, mut plain) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    let mut id = 0_u64;
    for round in 0..ROUNDS {
        let fresh = d
            .create_queue(
                &format!("fresh-{round}"),
                QueueSpec::default().with_max(99_999),
            )
            .await?;
        for _ in 0..TAKES {
            for (q, with_id, out) in [
                (&fresh, true, &mut keyed.0),
                (&grown, true, &mut keyed.1),
                (&fresh, false, &mut plain.0),
                (&grown, false, &mut plain.1),
            ] {
                id += 1;
                let take = if with_id {
                    q.take().request_id(format!("bench/{id}")).caller("bench")
                } else {
                    q.take()
                };
                let start = Instant::now();
                take.await?;
                out.push(start.elapsed());
                q.call().await?;
            }
        }
    }
    let medians = |(f, g): (Vec<Duration>, Vec<Duration>)| Takes {
        fresh: median(f),
        grown: median(g),
    };
    Ok((medians(keyed), medians(plain), size))
}

/// The BSON size of the queue document `name`.
async fn document_size(d: &Dispenser, name: &str) -> Result<usize, Error> {
    let o = d.options();
    let found = d
        .client()
        .database(&o.database)
        .collection::<Document>(&format!("{}_queues", o.collection))
        .find_one(doc! { "_id": name })
        .await
        .map_err(|e| Error::Database {
            context: "bench --queue-growth: reading a queue document".into(),
            source: e,
            written: dispenser::Written::Nothing,
        })?
        .ok_or_else(|| growth_error(format!("queue {name:?} is gone")))?;
    let mut bytes = Vec::new();
    found
        .to_writer(&mut bytes)
        .map_err(|e| growth_error(format!("encoding queue {name:?}: {e}")))?;
    Ok(bytes.len())
}

/// A queue of the largest size the rules allow, made by operations (so the document is
/// whatever this version writes): 3 000 tickets taken one by one (the last 64 with the
/// longest caller and request id), 900 of them cancelled and 100 called out of order by 100
/// desks (1 000 spans of tickets done out of line), so 1 000 waiting takes' times are kept.
/// Returns its document.
async fn largest(d: &Dispenser, name: &str) -> Result<Document, Error> {
    let long = |c: char, n: usize| std::iter::repeat_n(c, n).collect::<String>();
    let q = d
        .create_queue(
            name,
            QueueSpec::default()
                .with_max(99_999)
                .with_format(dispenser::Format::parse("A-{n:05}")?),
        )
        .await?;
    for i in 0..3000_i64 {
        let take = if i >= 3000 - 64 {
            q.take()
                .request_id(format!("{i:04}{}", long('k', 60)))
                .caller(format!("{i:04}{}", long('c', 124)))
        } else {
            q.take()
        };
        take.await?;
    }
    // Serial k shows ticket k (min 0, 100 000 tickets).
    for k in 1..=900_u64 {
        q.cancel().serial(2 * k).await?;
    }
    for k in 901..=1000_u64 {
        let desk = format!("desk-{k:04}-{}", long('x', 6));
        q.call().desk(desk).serial(2 * k).await?;
    }
    let o = d.options();
    d.client()
        .database(&o.database)
        .collection::<Document>(&format!("{}_queues", o.collection))
        .find_one(doc! { "_id": name })
        .await
        .map_err(|e| Error::Database {
            context: "bench --queue-growth: reading the largest queue".into(),
            source: e,
            written: dispenser::Written::Nothing,
        })?
        .ok_or_else(|| growth_error(format!("queue {name:?} is gone")))
}

/// `/v1/overview` (for a token that sees `qa` only) and `/metrics` of a service over a
/// collection of `qa` alone beside one over `qa` and [`QUEUES`] of the largest queue
/// documents, in turns.
async fn service_reads(
    uri: &str,
    small: &Dispenser,
    large: &Dispenser,
) -> Result<Vec<Reads>, Error> {
    for d in [small, large] {
        d.create_queue("qa", QueueSpec::default()).await?;
    }
    let o = large.options();
    let coll = large
        .client()
        .database(&o.database)
        .collection::<Document>(&format!("{}_queues", o.collection));
    let model = largest(large, "big-0000").await?;
    let docs: Vec<Document> = (1..QUEUES)
        .map(|i| {
            let mut copy = model.clone();
            copy.insert("_id", format!("big-{i:04}"));
            copy.insert("incarnation", ObjectId::new());
            copy
        })
        .collect();
    coll.insert_many(docs).await.map_err(|e| Error::Database {
        context: "bench --queue-growth: writing the large queue documents".into(),
        source: e,
        written: dispenser::Written::Nothing,
    })?;
    // The copies are valid: the library reads one whole.
    large.open_queue("big-0299").await?.peek().await?;
    let rules = serde_json::json!({ "tokens": [
        { "name": "bench", "token": TOKEN_ALL, "sequences": ["*"], "operations": ["peek", "list"] },
        { "name": "one-queue", "token": TOKEN_ONE, "sequences": ["qa"], "operations": ["peek", "list"] },
    ]});
    let (_small_served, small_addr) = serve(uri, small.options(), &rules, &[])?;
    let (_large_served, large_addr) = serve(uri, large.options(), &rules, &[])?;
    let mut out = Vec::new();
    for (path, token) in [("/v1/overview", TOKEN_ONE), ("/metrics", TOKEN_ALL)] {
        let (mut a, mut b, mut bytes) = (Vec::new(), Vec::new(), 0);
        for i in 0..=READS {
            for (addr, times) in [(&small_addr, &mut a), (&large_addr, &mut b)] {
                let start = Instant::now();
                let (status, body) = request_as(addr, "GET", path, token).await?;
                let took = start.elapsed();
                if status != 200 {
                    return Err(growth_error(format!(
                        "GET {path} answered {status}: {}",
                        String::from_utf8_lossy(&body)
                    )));
                }
                // The first pair warms both services up.
                if i > 0 {
                    times.push(took);
                }
                bytes = body.len();
            }
        }
        out.push(Reads {
            path,
            small: median(a),
            large: median(b),
            large_bytes: bytes,
        });
    }
    Ok(out)
}

fn report(args: &BenchArgs, keyed: &Takes, plain: &Takes, grown_doc: usize, reads: &[Reads]) {
    let take_met = |t: &Takes| t.ratio() <= TAKE_GOAL;
    let read_met = |r: &Reads| r.large.saturating_sub(r.small) <= READ_GOAL;
    if args.json {
        let takes = |t: &Takes| {
            serde_json::json!({ "fresh_ms": ms(t.fresh), "grown_ms": ms(t.grown),
                "ratio": t.ratio(), "goal": TAKE_GOAL, "met": take_met(t) })
        };
        let reads: Vec<serde_json::Value> = reads
            .iter()
            .map(|r| {
                serde_json::json!({ "path": r.path, "one_queue_ms": ms(r.small),
                    "large_ms": ms(r.large), "difference_ms": ms(r.large.saturating_sub(r.small)),
                    "large_bytes": r.large_bytes, "goal_ms": ms(READ_GOAL), "met": read_met(r) })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "take_with_request_id": takes(keyed), "take": takes(plain),
                "grown_document_bytes": grown_doc, "queues": QUEUES, "reads": reads,
            })
        );
        return;
    }
    let yes = |b: bool| if b { "met" } else { "NOT met" };
    println!("queues at their largest beside the fresh case (medians, one run)");
    println!(
        "  take on a queue with 1 000 stored ids and 600 calls (document {grown_doc} bytes) vs a new queue:"
    );
    for (what, t) in [("with a request id", keyed), ("without", plain)] {
        println!(
            "    {what:18} {:8.3} ms vs {:8.3} ms = {:.2}x (goal <= {TAKE_GOAL}x: {})",
            ms(t.grown),
            ms(t.fresh),
            t.ratio(),
            yes(take_met(t))
        );
    }
    println!("  the service over {QUEUES} queue documents of the largest size vs one queue:");
    for r in reads {
        println!(
            "    {:14} {:8.2} ms vs {:8.2} ms: +{:.2} ms (goal <= +{} ms: {}), {} bytes",
            r.path,
            ms(r.large),
            ms(r.small),
            ms(r.large.saturating_sub(r.small)),
            READ_GOAL.as_millis(),
            yes(read_met(r)),
            r.large_bytes
        );
    }
}
