//! `dispenser bench --scale N`: what the service costs when the collection holds `N`
//! sequences. The sequences are inserted directly into a scratch collection (copies of one
//! document the library made), a `dispenser serve` child process serves that collection,
//! `--scale-drawn` of them are drawn once through it (each gets a block client), and then
//! each read the operators and Prometheus make is timed: a scrape of `/metrics`, a page of
//! `/v1/overview`, a page of `/v1/sequences`. Each page of the overview is timed beside its
//! anchor, the raw driver reading the same page, and held to what it adds to it. The child's
//! resident memory is read from `/proc` (Linux) after them, and the numbers its blocks hold
//! before and after the idle release (`--block-idle-release`). Each figure is printed beside
//! the goal the guide states for it. The scratch collection is dropped at the end.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dispenser::mongodb::bson::{Document, doc};
use dispenser::{Dispenser, Error, Options, Spec};
use futures::TryStreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::args::BenchArgs;

/// The goals the guide states, checked by the run. A page of the overview is held to what
/// the service adds to the server's own read of that page (the anchor beside it: the raw
/// driver reading the same page), since that read is the server's, not the service's.
const SCRAPE_GOAL: Duration = Duration::from_millis(100);
const OVERVIEW_GOAL: Duration = Duration::from_millis(50);
const MEMORY_GOAL_MB: f64 = 200.0;
/// How many times each read is timed (the median is reported): a page of the overview in
/// as many pairs with its raw read.
const TRIES: usize = 7;
/// The idle release the child runs with, so that the run can see it happen.
const IDLE_RELEASE_SECS: f64 = 2.0;
/// The token of the child service (a scratch service on loopback only).
const TOKEN: &str = "bench-scale-token-0123456789";

/// One timed read.
struct Read {
    what: &'static str,
    median: Duration,
    max: Duration,
    bytes: usize,
    /// When the read is a page: the median of the raw driver's reads of the same page, and
    /// the median of what each read of the service took more than the raw read just before
    /// it (the goal then bounds that).
    anchor: Option<(Duration, Duration)>,
    goal: Option<Duration>,
}

impl Read {
    /// What the goal bounds: what the service adds to the raw read when the read is a page,
    /// else its median.
    fn own(&self) -> Duration {
        self.anchor.map_or(self.median, |(_, over)| over)
    }

    fn met(&self) -> Option<bool> {
        self.goal.map(|g| self.own() <= g)
    }
}

pub(super) fn bench_error(reason: String) -> Error {
    Error::InvalidArgument {
        what: "bench --scale".into(),
        reason,
    }
}

/// A `GET path` on a fresh connection: status and body.
async fn get(addr: &str, path: &str) -> Result<(u16, Vec<u8>), Error> {
    request(addr, "GET", path).await
}

/// A `POST path` with an empty body on a fresh connection: status and body.
async fn post(addr: &str, path: &str) -> Result<(u16, Vec<u8>), Error> {
    request(addr, "POST", path).await
}

/// `method path` with the bench's token and an empty body, on a fresh connection (HTTP/1.1,
/// `Connection: close`): the status and the body.
async fn request(addr: &str, method: &str, path: &str) -> Result<(u16, Vec<u8>), Error> {
    request_as(addr, method, path, TOKEN).await
}

/// [`request`] with `token`.
pub(super) async fn request_as(
    addr: &str,
    method: &str,
    path: &str,
    token: &str,
) -> Result<(u16, Vec<u8>), Error> {
    let io = |e: std::io::Error| bench_error(format!("{method} {path} on the service: {e}"));
    let mut conn = tokio::net::TcpStream::connect(addr).await.map_err(io)?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await.map_err(io)?;
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.map_err(io)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bench_error(format!("{method} {path}: no HTTP answer")))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bench_error(format!("{method} {path}: no status in {head:?}")))?;
    let mut body = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Ok((status, body))
}

/// The body of a chunked answer.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 || raw.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw = &raw[(eol + 4 + size).min(raw.len())..];
    }
    out
}

/// One read of `path` (it must answer 200): how long it took and the body's size.
async fn get_once(addr: &str, path: &str) -> Result<(Duration, usize), Error> {
    let start = Instant::now();
    let (status, body) = get(addr, path).await?;
    let took = start.elapsed();
    if status != 200 {
        return Err(bench_error(format!(
            "GET {path} answered {status}: {}",
            String::from_utf8_lossy(&body)
        )));
    }
    Ok((took, body.len()))
}

/// The median and the largest of `times`.
fn median_max(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort_unstable();
    (times[times.len() / 2], times[times.len() - 1])
}

/// Times `TRIES` reads of `path`.
async fn timed(
    addr: &str,
    what: &'static str,
    path: &str,
    goal: Option<Duration>,
) -> Result<Read, Error> {
    let mut times = Vec::with_capacity(TRIES);
    let mut bytes = 0;
    for _ in 0..TRIES {
        let (took, size) = get_once(addr, path).await?;
        times.push(took);
        bytes = size;
    }
    let (median, max) = median_max(times);
    Ok(Read {
        what,
        median,
        max,
        bytes,
        anchor: None,
        goal,
    })
}

/// Times `TRIES` pairs of reads of one page by name, after `after` or from the first: the raw
/// driver's, then the service's `path`, one pair after the other (so that both see the
/// server as it is then). Gives the raw reads (`raw`) and the service's, held to `goal` over
/// the raw read of its pair.
async fn paired(
    d: &Dispenser,
    addr: &str,
    (raw, what): (&'static str, &'static str),
    path: &str,
    after: Option<&str>,
    goal: Duration,
) -> Result<(Read, Read), Error> {
    let (mut raws, mut pages, mut over) = (Vec::new(), Vec::new(), Vec::new());
    let (mut raw_bytes, mut page_bytes) = (0, 0);
    for _ in 0..TRIES {
        let (r, size) = raw_page(d, after).await?;
        raw_bytes = size;
        let (p, size) = get_once(addr, path).await?;
        page_bytes = size;
        raws.push(r);
        pages.push(p);
        over.push(p.saturating_sub(r));
    }
    let (raw_median, raw_max) = median_max(raws);
    let (median, max) = median_max(pages);
    let (over, _) = median_max(over);
    Ok((
        Read {
            what: raw,
            median: raw_median,
            max: raw_max,
            bytes: raw_bytes,
            anchor: None,
            goal: None,
        },
        Read {
            what,
            median,
            max,
            bytes: page_bytes,
            anchor: Some((raw_median, over)),
            goal: Some(goal),
        },
    ))
}

/// A value of the scrape (`name value` on a line of its own).
fn scraped(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The child's resident memory now and at its peak, in MB (Linux `/proc`).
fn memory_mb(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |key: &str| -> Option<f64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some((kb("VmRSS:")? / 1024.0, kb("VmHWM:")? / 1024.0))
}

/// The child service; stopped (SIGKILL) when dropped.
pub(super) struct Served(pub(super) Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `dispenser serve` (this program) on the collection of `options`, with the tokens
/// `rules` and more arguments `extra`: the child (killed when dropped) and its address.
pub(super) fn serve(
    uri: &str,
    options: &Options,
    rules: &serde_json::Value,
    extra: &[&str],
) -> Result<(Served, String), Error> {
    let tokens = std::env::temp_dir().join(format!(
        "{}-{}.tokens.json",
        options.collection,
        std::process::id()
    ));
    std::fs::write(&tokens, rules.to_string())
        .map_err(|e| bench_error(format!("writing {}: {e}", tokens.display())))?;
    let exe =
        std::env::current_exe().map_err(|e| bench_error(format!("finding this program: {e}")))?;
    let mut child = Command::new(exe)
        .env("MONGODB_URI", uri)
        .args([
            "--db",
            &options.database,
            "--collection",
            &options.collection,
            "serve",
        ])
        .args(["--listen", "127.0.0.1:0", "--tokens"])
        .arg(&tokens)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| bench_error(format!("starting dispenser serve: {e}")))?;
    let stdout = child.stdout.take();
    let served = Served(child);
    let mut line = String::new();
    if let Some(out) = stdout {
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| bench_error(format!("reading the service's address: {e}")))?;
    }
    let _ = std::fs::remove_file(&tokens);
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .ok_or_else(|| bench_error(format!("the service did not start: {line:?}")))?
        .to_owned();
    Ok((served, addr))
}

/// Inserts `n` sequences named `s000000`, `s000001`, … (copies of one document the library
/// made, so each is a valid sequence) into `collection`.
async fn fill(d: &Dispenser, n: u64) -> Result<Vec<String>, Error> {
    d.create("s-template", Spec::default()).await?;
    let o = d.options();
    let coll = d
        .client()
        .database(&o.database)
        .collection::<Document>(&o.collection);
    let db_error = |e| Error::Database {
        context: "bench --scale: filling the scratch collection".into(),
        source: e,
        written: dispenser::error::Written::Nothing,
    };
    let template = coll
        .find_one(doc! { "_id": "s-template" })
        .await
        .map_err(db_error)?
        .ok_or_else(|| bench_error("the template document is gone".into()))?;
    coll.delete_one(doc! { "_id": "s-template" })
        .await
        .map_err(db_error)?;
    let names: Vec<String> = (0..n).map(|i| format!("s{i:06}")).collect();
    for batch in names.chunks(10_000) {
        let docs = batch.iter().map(|name| {
            let mut d = template.clone();
            d.insert("_id", name.as_str());
            d
        });
        coll.insert_many(docs).await.map_err(db_error)?;
    }
    Ok(names)
}

/// Runs `bench --scale`.
pub(super) async fn run(
    uri: &str,
    options: Options,
    args: &BenchArgs,
    n: u64,
) -> Result<(), Error> {
    let stamp = format!(
        "bench_scale_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|t| t.as_millis())
            .unwrap_or_default()
    );
    let options = options.with_collection(stamp);
    let d = Dispenser::connect(uri, options.clone()).await?;
    let outcome = measure(uri, &d, args, n).await;
    let o = d.options();
    let _ = d
        .client()
        .database(&o.database)
        .collection::<Document>(&o.collection)
        .drop()
        .await;
    outcome
}

async fn measure(uri: &str, d: &Dispenser, args: &BenchArgs, n: u64) -> Result<(), Error> {
    let filled = Instant::now();
    let names = fill(d, n).await?;
    let filled = filled.elapsed();
    let rules = serde_json::json!({ "tokens": [{ "name": "bench", "token": TOKEN,
        "sequences": ["*"], "operations": ["next", "peek", "list"] }] });
    let (served, addr) = serve(
        uri,
        d.options(),
        &rules,
        &["--block-idle-release", &IDLE_RELEASE_SECS.to_string()],
    )?;
    // Draw a spread of the sequences once each: each gets a block client.
    let drawn = args.scale_drawn.min(n);
    let every = (n / drawn.max(1)).max(1);
    for name in names
        .iter()
        .step_by(usize::try_from(every).unwrap_or(1))
        .take(usize::try_from(drawn).unwrap_or(0))
    {
        let path = format!("/v1/sequences/{name}/next");
        let (status, body) = post(&addr, &path).await?;
        if status != 200 {
            return Err(bench_error(format!(
                "POST {path} answered {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
    }
    let (_, text) = get(&addr, "/metrics").await?;
    let held = scraped(
        &String::from_utf8_lossy(&text),
        "dispenser_numbers_held_all",
    )
    .unwrap_or(f64::NAN);
    let middle = &names[names.len() / 2];
    let (first_raw, first) = paired(
        d,
        &addr,
        ("raw driver: first page of 50", "/v1/overview (first page)"),
        "/v1/overview",
        None,
        OVERVIEW_GOAL,
    )
    .await?;
    let (middle_raw, middle) = paired(
        d,
        &addr,
        (
            "raw driver: middle page of 50",
            "/v1/overview (middle page)",
        ),
        &format!("/v1/overview?after={middle}"),
        Some(middle),
        OVERVIEW_GOAL,
    )
    .await?;
    let reads = vec![
        first_raw,
        middle_raw,
        timed(&addr, "/metrics", "/metrics", Some(SCRAPE_GOAL)).await?,
        first,
        middle,
        timed(
            &addr,
            "/v1/sequences?limit=1000",
            "/v1/sequences?limit=1000",
            None,
        )
        .await?,
    ];
    let memory = memory_mb(served.0.id());
    tokio::time::sleep(Duration::from_secs_f64(IDLE_RELEASE_SECS * 2.0)).await;
    let (_, text) = get(&addr, "/metrics").await?;
    let held_after = scraped(
        &String::from_utf8_lossy(&text),
        "dispenser_numbers_held_all",
    )
    .unwrap_or(f64::NAN);
    drop(served);
    report(args, n, drawn, filled, &reads, memory, held, held_after);
    Ok(())
}

/// An anchor: the driver alone reading a page of 50 documents by name, after `after` or from
/// the first (the query a page of the overview makes): how long it took and its size.
async fn raw_page(d: &Dispenser, after: Option<&str>) -> Result<(Duration, usize), Error> {
    let o = d.options();
    let coll = d
        .client()
        .database(&o.database)
        .collection::<Document>(&o.collection);
    let db_error = |e| Error::Database {
        context: "bench --scale: the raw page".into(),
        source: e,
        written: dispenser::error::Written::Nothing,
    };
    let filter = match after {
        Some(a) => doc! { "_id": { "$gt": a } },
        None => doc! { "_id": { "$gte": "" } },
    };
    let start = Instant::now();
    let cursor = coll
        .find(filter)
        .sort(doc! { "_id": 1 })
        .limit(50)
        .await
        .map_err(db_error)?;
    let page: Vec<Document> = cursor.try_collect().await.map_err(db_error)?;
    let took = start.elapsed();
    Ok((took, page.iter().map(|d| d.to_string().len()).sum()))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[allow(clippy::too_many_arguments)]
fn report(
    args: &BenchArgs,
    n: u64,
    drawn: u64,
    filled: Duration,
    reads: &[Read],
    memory: Option<(f64, f64)>,
    held: f64,
    held_after: f64,
) {
    if args.json {
        let reads: Vec<serde_json::Value> = reads
            .iter()
            .map(|r| {
                serde_json::json!({
                    "read": r.what,
                    "median_ms": ms(r.median),
                    "max_ms": ms(r.max),
                    "bytes": r.bytes,
                    "anchor_ms": r.anchor.map(|(raw, _)| ms(raw)),
                    "over_anchor_ms": r.anchor.map(|_| ms(r.own())),
                    "goal_ms": r.goal.map(ms),
                    "goal_met": r.met(),
                })
            })
            .collect();
        let out = serde_json::json!({
            "sequences": n,
            "drawn_through_the_service": drawn,
            "fill_seconds": filled.as_secs_f64(),
            "reads": reads,
            "memory_mb": memory.map(|m| m.0),
            "peak_memory_mb": memory.map(|m| m.1),
            "memory_goal_mb": MEMORY_GOAL_MB,
            "memory_goal_met": memory.map(|m| m.1 <= MEMORY_GOAL_MB),
            "numbers_held": held,
            "numbers_held_after_idle_release": held_after,
            "idle_release_seconds": IDLE_RELEASE_SECS,
        });
        println!("{out}");
        return;
    }
    println!(
        "{n} sequences ({drawn} drawn once through the service); filled in {:.1} s",
        filled.as_secs_f64()
    );
    println!(
        "{:<30} {:>10} {:>10} {:>10} {:>12} {:>16}",
        "read", "median ms", "max ms", "+raw ms", "bytes", "goal"
    );
    for r in reads {
        let over = if r.anchor.is_some() { " over raw" } else { "" };
        let goal = match (r.goal, r.met()) {
            (Some(g), Some(true)) => format!("≤{:.0}{over} ok", ms(g)),
            (Some(g), _) => format!("≤{:.0}{over} MISSED", ms(g)),
            (None, _) => "-".to_owned(),
        };
        let plus = r
            .anchor
            .map_or("-".to_owned(), |_| format!("{:.1}", ms(r.own())));
        println!(
            "{:<30} {:>10.1} {:>10.1} {:>10} {:>12} {:>16}",
            r.what,
            ms(r.median),
            ms(r.max),
            plus,
            r.bytes,
            goal
        );
    }
    match memory {
        Some((now, peak)) => println!(
            "service memory: {now:.0} MB resident, {peak:.0} MB at its peak (goal ≤{MEMORY_GOAL_MB:.0} MB: {})",
            if peak <= MEMORY_GOAL_MB {
                "ok"
            } else {
                "MISSED"
            }
        ),
        None => println!("service memory: unknown (no /proc on this system)"),
    }
    println!(
        "numbers held by its blocks: {held} after the draws, {held_after} once idle for {IDLE_RELEASE_SECS} s (given back)"
    );
}
