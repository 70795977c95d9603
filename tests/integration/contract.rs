//! `dispenser serve` keeps its contract under any request: metrics that always parse,
//! connections that cannot pin it, JSON for every error, every kind of sequence drawn, an
//! OpenAPI document that says what the service does, and Schemathesis driving it from that
//! document with every check on.

use std::collections::HashSet;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dispenser::mongodb::bson::doc;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{self, DB};
use crate::serve::{ADMIN, ORDERS, Service, parse_metrics, sample, send};

fn address(svc: &Service) -> String {
    svc.base.trim_start_matches("http://").to_owned()
}

/// The library on the service's collection.
async fn library(svc: &Service) -> dispenser::Dispenser {
    dispenser::Dispenser::new(
        &common::client().await,
        dispenser::Options::default()
            .with_database(DB)
            .with_collection(svc.collection.as_str()),
    )
    .unwrap()
}

/// Checks a scrape with Prometheus' own Python parsers (the text format's and the
/// OpenMetrics one): prints each sample with a `sequence` label as JSON `[metric, sequence,
/// value]` (the OpenMetrics parser's reading).
const PROMETHEUS_PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families as text_format
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
scrape = sys.stdin.read()
for family in text_format(scrape):          # raises on a scrape it cannot read
    pass
for family in openmetrics(scrape):
    for s in family.samples:
        if "sequence" in s.labels:
            print(json.dumps([s.name, s.labels["sequence"], s.value]))
"#;

/// The samples with a `sequence` label that Python's Prometheus parsers read from `scrape`:
/// `(metric, sequence, value)`.
fn python_parse(scrape: &str) -> Vec<(String, String, f64)> {
    let mut child = Command::new(crate::clients::python())
        .args(["-c", PROMETHEUS_PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(scrape.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client cannot parse the scrape: {}\n{scrape}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The sequences named in `samples`.
fn sequences(samples: &[(String, String, f64)]) -> HashSet<&str> {
    samples.iter().map(|(_, s, _)| s.as_str()).collect()
}

/// Item 1: a name with quotes and backslashes cannot break the scrape, a stored name with a
/// line feed is listed (it cannot be drawn through the service, so it has no series: those
/// are for the sequences the service draws), and a deleted sequence's series go away,
/// counters included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_escape_label_values_and_forget_deleted_sequences() {
    let svc = Service::start("metrics_escape");
    let http = reqwest::Client::new();
    let d = library(&svc).await;
    let quoted = r#"q"uo\te}x"#;
    let (status, body) = send(
        http.post(svc.url("/v1/sequences"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": quoted })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let path = format!("/v1/sequences/{}/next", "q%22uo%5Cte%7Dx");
    let (status, body) = send(http.post(svc.url(&path)).bearer_auth(ADMIN)).await;
    assert_eq!(status, 200, "{body}");
    // A name with a line feed cannot be created, but a stored one is read (and listed).
    let multi = "line\nbreak\\\"";
    d.create("plain", dispenser::Spec::default()).await.unwrap();
    let raw = common::client()
        .await
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&svc.collection);
    let mut copy = raw
        .find_one(doc! { "_id": "plain" })
        .await
        .unwrap()
        .unwrap();
    copy.insert("_id", multi);
    raw.insert_one(copy).await.unwrap();
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/plain/next"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(http.get(svc.url("/v1/sequences")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["sequences"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == multi),
        "{body}"
    );

    let scrape = || async {
        http.get(svc.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let text = scrape().await;
    // prometheus-parse reads the scrape too (it keeps label values as written and cuts them
    // at a '}', so it is asked only about a plain name).
    let parsed = parse_metrics(&text);
    assert!(
        sample(
            &parsed,
            "dispenser_sequence_remaining",
            &[("sequence", "plain")]
        )
        .is_some()
    );
    let samples = python_parse(&text);
    assert!(
        samples.contains(&("dispenser_numbers_issued_total".into(), quoted.into(), 1.0)),
        "{samples:?}\n{text}"
    );
    let names = sequences(&samples);
    for name in [quoted, "plain"] {
        assert!(names.contains(name), "{name:?} not in {names:?}\n{text}");
    }
    assert!(!names.contains(multi), "never drawn here: {names:?}");

    // Deleted through the service: every series of it goes, the counters too.
    let (status, body) = send(
        http.delete(svc.url(&path.replace("/next", "")))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    // Deleted behind the service's back: the same at the next scrape.
    raw.delete_one(doc! { "_id": multi }).await.unwrap();
    let text = scrape().await;
    let samples = python_parse(&text);
    let names = sequences(&samples);
    assert!(
        !names.contains(quoted) && !names.contains(multi),
        "series of deleted sequences left: {names:?}\n{text}"
    );
    assert!(names.contains("plain"), "{names:?}");
    parse_metrics(&text);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// Whether the server closed `conn` (end of stream or reset), waiting at most `wait`.
async fn closed_within(conn: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // An answer (hyper's 408 or ours) before closing: keep reading.
            Ok(Ok(_)) => {}
        }
    }
}

/// The open-file limit of this process, which the 2000 connections must fit in.
fn open_file_limit() -> u64 {
    let out = Command::new("sh")
        .args(["-c", "ulimit -n"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(u64::MAX)
}

/// Item 2: 2000 connections that sent half their headers do not keep `/healthz` from
/// answering before any of them could time out, and are closed within 30 s (the default
/// header timeout is 10 s). A service they pinned could answer only once the first of them
/// was closed, 10 s after it was opened; so `/healthz` gets until 9.5 s after the first was
/// opened (it used to get 1 s, which a loaded 2-core machine could miss).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn half_sent_connections_are_closed_and_never_block_the_service() {
    const HALF_SENT: usize = 2000;
    assert!(
        open_file_limit() > HALF_SENT as u64 + 500,
        "the test needs `ulimit -n` above {}",
        HALF_SENT + 500
    );
    let svc = Service::start("half_sent");
    let addr = address(&svc);
    let opened = Instant::now();
    let mut held = Vec::with_capacity(HALF_SENT);
    for _ in 0..HALF_SENT {
        let mut c = TcpStream::connect(&addr).await.unwrap();
        c.write_all(b"POST /v1/sequences/orders/next HTTP/1.1\r\nHost: x\r\nAuthor")
            .await
            .unwrap();
        held.push(c);
    }
    eprintln!(
        "{HALF_SENT} half-sent connections open in {:?}",
        opened.elapsed()
    );
    let http = reqwest::Client::new();
    let asked = Instant::now();
    // Before the header timeout (10 s) of the first half-sent connection could close it.
    let before_any_timeout = (Duration::from_millis(9500)).saturating_sub(opened.elapsed());
    let (status, body) = tokio::time::timeout(
        before_any_timeout,
        send(http.get(svc.url("/healthz"))),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "/healthz did not answer before a half-sent connection could time out ({:?} after the first was opened)",
            opened.elapsed()
        )
    });
    assert_eq!(status, 200, "{body}");
    eprintln!("/healthz answered in {:?}", asked.elapsed());
    let waits = held
        .iter_mut()
        .map(|c| closed_within(c, Duration::from_secs(30)));
    let closed = futures::future::join_all(waits).await;
    let open = closed.iter().filter(|c| !**c).count();
    eprintln!(
        "{} of {HALF_SENT} closed by the service {:?} after they were opened",
        HALF_SENT - open,
        opened.elapsed()
    );
    assert_eq!(
        open, 0,
        "{open} half-sent connections still open after 30 s"
    );
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// Item 2: an idle kept-alive connection is closed after `--idle-timeout`; at
/// `--max-connections`, with every place taken by a request being served, a new connection
/// waits until one closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_and_connections_are_capped() {
    let svc = Service::start_args(
        "idle_cap",
        &common::uri(),
        &["--idle-timeout", "1", "--max-connections", "3"],
    );
    let addr = address(&svc);
    // One complete request, then silence: answered, kept alive, closed at the idle timeout.
    // The idle time is measured from before the request was sent, which is before the service
    // started its idle clock (after the answer), so it cannot come out short on a busy machine.
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    let asked = Instant::now();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    assert!(closed_within(&mut idle, Duration::from_secs(30)).await);
    let idle_for = asked.elapsed();
    assert!(
        idle_for >= Duration::from_millis(900),
        "closed after {idle_for:?}"
    );
    eprintln!("idle connection closed {idle_for:?} after its request");

    // A request served for longer than the connection's timer was set for (its body comes
    // 1.5 s after its head, so the timer fires while the request is served), then silence:
    // closed at the idle timeout all the same. (The connection's task is woken after an
    // answer only when its timer cannot take up the idle deadline by itself.)
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    let body = r#"{"name": "slow-body"}"#;
    let head = format!(
        "POST /v1/sequences HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sent = Instant::now();
    slow.write_all(body.as_bytes()).await.unwrap();
    let n = slow.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 201"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    assert!(
        closed_within(&mut slow, Duration::from_secs(10)).await,
        "a connection idle after a long request was still open 10 s after its answer"
    );
    let idle_for = sent.elapsed();
    assert!(
        idle_for >= Duration::from_millis(900),
        "closed after {idle_for:?}"
    );
    eprintln!("idle connection after a long request closed {idle_for:?} after its body was sent");

    // Three requests being served (each waits for its body) hold the three places; a fourth
    // request waits for one of them. (Connections that only wait, idle or with a head still
    // arriving, would be closed to make room: see serve::streams_and_idle_connections_….)
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut c = TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /v1/sequences HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: 20\r\nExpect: 100-continue\r\n\r\n"
        );
        c.write_all(head.as_bytes()).await.unwrap();
        held.push(c);
    }
    // Until the service has read their heads they only wait (and may be closed to make room).
    // It answers `100 Continue` when the endpoint starts reading a body: by then the head was
    // read and the request is being served (it used to be given 500 ms, a guess).
    for c in &mut held {
        let mut line = Vec::new();
        while !line.ends_with(b"\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(30), c.read(&mut buf))
                .await
                .expect("no 100 Continue within 30 s")
                .unwrap();
            assert!(
                n > 0,
                "closed before 100 Continue: {}",
                String::from_utf8_lossy(&line)
            );
            line.extend_from_slice(&buf[..n]);
        }
        assert!(
            line.starts_with(b"HTTP/1.1 100"),
            "{}",
            String::from_utf8_lossy(&line)
        );
    }
    let http = reqwest::Client::new();
    let waiting = tokio::spawn({
        let url = svc.url("/healthz");
        async move { send(http.get(url)).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !waiting.is_finished(),
        "a fourth connection was served past the cap of 3"
    );
    drop(held.pop());
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("served once a place was free")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    // The requests still waiting for their bodies would hold the shutdown until they time out.
    drop(held);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// One raw request on a fresh connection; the whole answer, up to the connection's end.
async fn raw(addr: &str, request: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).await.unwrap();
    // The service may answer (and close) before it read everything.
    let _ = c.write_all(request).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), c.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The status and JSON body of a raw answer.
fn answer(text: &str) -> (u16, Value) {
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Item 5: the errors hyper answers itself are JSON too (414, 431, 400), a body that does
/// not arrive in time is 408 (not 503), and a repeated `count` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_slow_bodies_are_408_and_count_is_given_once() {
    let svc = Service::start_args("errors_json", &common::uri(), &["--request-timeout", "1"]);
    let addr = address(&svc);
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(500_000)
    );
    for (request, want, kind) in [
        (long.into_bytes(), 414, "uri_too_long"),
        (huge.into_bytes(), 431, "headers_too_large"),
        (b"NOT HTTP\x01\r\n\r\n".to_vec(), 400, "bad_request"),
    ] {
        let text = raw(&addr, &request).await;
        let (status, body) = answer(&text);
        assert_eq!(status, want, "{text}");
        assert_eq!(body["error"]["code"], kind, "{text}");
        assert!(
            text.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{text}"
        );
    }
    // A body announced but not sent: 408, and the connection is closed.
    let started = Instant::now();
    let text = raw(
        &addr,
        format!(
            "POST /v1/sequences HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{{\"name\": "
        )
        .as_bytes(),
    )
    .await;
    let (status, body) = answer(&text);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (408, Some("request_timeout")),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );

    let http = reqwest::Client::new();
    let (status, body) = send(
        http.post(svc.url("/v1/sequences"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "orders" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/orders/next?count=1&count=1000"))
            .bearer_auth(ORDERS),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_input")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("count is given 2 times"),
        "{body}"
    );
    // Whole numbers written as floats are the integers they are; 10.5 is not.
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/orders/next?count=2.0"))
            .bearer_auth(ORDERS),
    )
    .await;
    assert_eq!((status, &body["numbers"]), (200, &json!([1, 2])), "{body}");
    let reset = |body: Value| {
        http.post(svc.url("/v1/sequences/orders/reset"))
            .bearer_auth(ADMIN)
            .header("Content-Type", "application/json")
            .body(body.to_string())
    };
    let (status, body) = send(reset(json!({ "next": 1.0e3 }))).await;
    assert_eq!((status, body["next"].as_i64()), (200, Some(1000)), "{body}");
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/orders/reset"))
            .bearer_auth(ADMIN)
            .header("Content-Type", "application/json")
            .body(r#"{"next": 9007199254740993.0}"#),
    )
    .await;
    assert_eq!(
        (status, body["next"].as_i64()),
        (200, Some(9_007_199_254_740_993)),
        "read exactly, not through a float: {body}"
    );
    for bad in [
        json!({ "next": 10.5 }),
        json!({ "next": 5, "value": 5 }),
        json!({ "next": null }),
        json!({}),
    ] {
        let (status, body) = send(reset(bad.clone())).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // `value`, what earlier versions took beside `next`, is refused naming `next`.
    let (status, body) = send(reset(json!({ "value": 5 }))).await;
    assert_eq!(status, 400, "{body}");
    let said = body["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("`value` is now `next`"), "{body}");
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

fn numbers(body: &Value) -> Vec<i64> {
    body["numbers"]
        .as_array()
        .unwrap_or_else(|| panic!("no numbers in {body}"))
        .iter()
        .map(|n| n.as_i64().unwrap())
        .collect()
}

/// Item 4: a striped sequence is drawn (and altered) by its name, a scope that does not exist
/// yet is made from its template by the draw, under the token's rules, and the template
/// itself is not drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn striped_sequences_and_new_scopes_are_drawn_templates_are_not() {
    let svc = Service::start("draw_kinds");
    let http = reqwest::Client::new();
    let d = library(&svc).await;
    d.ensure_striped("ids", 3, dispenser::Spec::default())
        .await
        .unwrap();
    let draw = |token: &'static str, name: &str, count: u64| {
        http.post(svc.url(&format!("/v1/sequences/{name}/next?count={count}")))
            .bearer_auth(token)
    };
    let mut all = Vec::new();
    for _ in 0..6 {
        let (status, body) = send(draw(ADMIN, "ids", 5)).await;
        assert_eq!(status, 200, "{body}");
        all.extend(numbers(&body));
    }
    // Large counts come as runs, one stripe's step apart.
    let (status, body) = send(draw(ADMIN, "ids", 2000)).await;
    assert_eq!(status, 200, "{body}");
    for run in body["runs"].as_array().unwrap() {
        assert_eq!(run["step"], 3, "{body}");
        let (first, count) = (
            run["first"].as_i64().unwrap(),
            run["count"].as_i64().unwrap(),
        );
        all.extend((0..count).map(|i| first + 3 * i));
    }
    assert_eq!(all.len(), 2030);
    let distinct: HashSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a number was drawn twice");
    let stripes_used: HashSet<i64> = all.iter().map(|n| (n - 1) % 3).collect();
    assert_eq!(stripes_used.len(), 3, "{stripes_used:?}");

    // Altered by its name: every stripe gets the bound; a stripe keeps its step (422, nothing
    // written).
    let alter = |body: Value| {
        http.post(svc.url("/v1/sequences/ids/alter"))
            .bearer_auth(ADMIN)
            .json(&body)
    };
    let (status, body) = send(alter(json!({ "max": 1_000_000 }))).await;
    assert_eq!(status, 200, "{body}");
    let maxes: Vec<i64> = body["stripes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["max"].as_i64().unwrap())
        .collect();
    assert_eq!(maxes, vec![1_000_000; 3], "{body}");
    let (status, body) = send(alter(json!({ "step": 2 }))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_input")),
        "{body}"
    );
    for s in d.open_striped("ids").await.unwrap().peek().await.unwrap() {
        assert_eq!(s.step, 3, "{s:?}");
    }

    // Scopes: the template exists, the scope not yet. A token for `orders@*` with `next`
    // and `peek` draws a scope that exists, but may not make one (that needs `create` on the
    // scope and `peek` on its template); a token with both makes it on its first draw.
    d.create("orders", dispenser::Spec::default())
        .await
        .unwrap();
    let (status, body) = send(draw(ORDERS, "orders@acme", 3)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    assert!(
        d.peek("orders@acme").await.is_err(),
        "a refused draw made the scope"
    );
    let (status, body) = send(draw(ADMIN, "orders@acme", 3)).await;
    assert_eq!((status, numbers(&body)), (200, vec![1, 2, 3]), "{body}");
    let (status, body) = send(draw(ORDERS, "orders@acme", 1)).await;
    assert_eq!((status, numbers(&body)), (200, vec![4]), "{body}");
    let (status, body) = send(draw(ADMIN, "orders@globex", 1)).await;
    assert_eq!(
        (status, numbers(&body)),
        (200, vec![1]),
        "independent scopes: {body}"
    );
    // The template itself is refused now that it has scopes.
    let (status, body) = send(draw(ORDERS, "orders", 1)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("template")),
        "{body}"
    );
    // A template whose format uses {scope} is refused before any scope exists.
    d.create("invoices", dispenser::Spec::default())
        .await
        .unwrap();
    d.open("invoices")
        .await
        .unwrap()
        .alter(dispenser::sequence::Alter::default().with_format(Some(
            dispenser::Format::parse("INV-{scope}-{n:04}").unwrap(),
        )))
        .await
        .unwrap();
    let (status, body) = send(draw(ADMIN, "invoices", 1)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("template")),
        "{body}"
    );
    let (status, body) = send(draw(ADMIN, "invoices@2026", 2)).await;
    assert_eq!((status, numbers(&body)), (200, vec![1, 2]), "{body}");
    // A scope of a template that does not exist: 404 naming the template; a token without
    // the scope's name: 403, and nothing is created.
    let (status, body) = send(draw(ADMIN, "nothing@x", 1)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("no_such_sequence")),
        "{body}"
    );
    let (status, _) = send(draw(ORDERS, "invoices@x", 1)).await;
    assert_eq!(status, 403);
    assert!(d.peek("invoices@x").await.is_err());
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// The service's `/openapi.json`.
async fn openapi_of(http: &reqwest::Client, svc: &Service) -> Value {
    http.get(svc.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Item 3: the document says what the service does: name rules, `count` from 1 to
/// `--max-count`, reset with `next`, striped answers, `/metrics` and
/// `/openapi.json`, explicit status codes.
#[tokio::test]
async fn the_openapi_document_says_what_the_service_does() {
    let svc = Service::start("openapi_exact");
    let http = reqwest::Client::new();
    let doc = openapi_of(&http, &svc).await;
    let text = doc.to_string();
    assert!(
        !text.contains("\"4XX\"") && !text.contains("\"5XX\""),
        "wildcards left"
    );
    for path in ["/metrics", "/openapi.json"] {
        assert!(doc["paths"][path]["get"].is_object(), "{path} missing");
    }
    let next = &doc["paths"]["/v1/sequences/{name}/next"]["post"];
    let param = |name: &str| {
        next["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["schema"]
            .clone()
    };
    assert_eq!(param("count")["minimum"], 1);
    assert_eq!(
        param("count")["maximum"],
        10_000,
        "the service's --max-count"
    );
    let name = param("name");
    assert_eq!(
        (name["minLength"].as_u64(), name["maxLength"].as_u64()),
        (Some(1), Some(200))
    );
    assert!(name["pattern"].as_str().unwrap().contains("$"), "{name}");
    // Read as Python reads it (Schemathesis does): a name ending in a line feed is invalid
    // there too (`$` would match before it), and a plain name is valid.
    let python = crate::clients::tool("venv/bin/python");
    let check = std::process::Command::new(python)
        .args([
            "-c",
            "import re, sys; p = sys.argv[1]; \
             print(bool(re.search(p, 'orders')), bool(re.search(p, 'orders\\n')), bool(re.search(p, '$x')))",
            name["pattern"].as_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&check.stdout).trim(),
        "True False False",
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["ResetBody"]["required"], json!(["next"]));
    assert!(schemas["ResetBody"]["properties"]["value"].is_null());
    assert!(
        schemas["CreateBody"]["properties"]["name"]["pattern"]
            .as_str()
            .unwrap()
            .contains("@~"),
        "created names have no @ or ~"
    );
    assert!(schemas["Striped"]["properties"]["stripes"].is_object());
    for (path, method, statuses) in [
        (
            "/v1/sequences/{name}/next",
            "post",
            &["200", "400", "401", "403", "404", "409", "422", "503"][..],
        ),
        (
            "/v1/sequences/{name}/reset",
            "post",
            &["200", "400", "408", "413", "415", "422"][..],
        ),
        ("/v1/sequences", "post", &["200", "201", "409", "422"][..]),
    ] {
        let responses = &doc["paths"][path][method]["responses"];
        for s in statuses {
            assert!(
                responses[s].is_object(),
                "{method} {path} lacks {s}: {responses}"
            );
        }
    }
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// A valid body for the operation on `path` that needs one.
fn body_for(path: &str) -> Option<Value> {
    Some(match path.rsplit('/').next()? {
        "reset" => json!({ "next": 5 }),
        "advance-to" => json!({ "to": 5 }),
        "alter" if path.starts_with("/v1/queues") => json!({ "max": 5 }),
        "alter" if path.starts_with("/v1/gapless") => json!({ "max_lease_seconds": 1 }),
        "alter" => json!({ "max": 100 }),
        "void" => json!({ "number": 1, "reason": "x" }),
        "release" if path.starts_with("/v1/gapless") => json!({ "number": 1 }),
        "cancel" => json!({ "ticket": 1 }),
        _ => return None,
    })
}

/// For each value: whether it matches the path parameter's `pattern` as Python reads it, and
/// the value as Schemathesis puts it in a path (decoded once, then percent-encoded).
const PATH_VALUES: &str = r#"
import json, re, sys
from urllib.parse import quote, unquote
pattern, values = sys.argv[1], json.loads(sys.argv[2])
print(json.dumps([[v, bool(re.search(pattern, v)), quote(unquote(v), safe="")] for v in values]))
"#;

/// Regression (issue 49, item 10): Schemathesis found `POST /v1/gapless/{name}/release` with a
/// control character in the name answered 400, which `/openapi.json` did not rule out: it
/// decodes a path value once before it encodes it, so the schema-valid name `a%0A` reached the
/// service as `a` and a line feed. Every path parameter's schema now says what the service
/// refuses of the name it decodes: each value the pattern allows is not answered 400 on every
/// operation with a name in its path, and each it rules out is (as the value is sent by such a
/// client).
#[tokio::test]
async fn every_path_parameter_says_what_the_service_refuses() {
    let svc = Service::start("path_names");
    let http = reqwest::Client::new();
    let doc = openapi_of(&http, &svc).await;
    // Every operation with a path: one `name` parameter, one schema (and a ticket's serial).
    let mut operations = Vec::new();
    let mut schemas = HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for p in op["parameters"].as_array().into_iter().flatten() {
                if p["in"] == "path" && p["name"] == "serial" {
                    // A ticket's serial (sent as 1 below): a whole number, its own pattern.
                    assert!(p["schema"]["pattern"].is_string(), "{method} {path}: {p}");
                    continue;
                }
                if p["in"] == "path" {
                    assert_eq!(p["name"], "name", "{method} {path}");
                    assert!(
                        p["description"]
                            .as_str()
                            .unwrap()
                            .contains("no control character"),
                        "{method} {path}: {p}"
                    );
                    schemas.insert(p["schema"].to_string());
                    operations.push((method.clone(), path.clone()));
                }
            }
        }
    }
    assert_eq!(schemas.len(), 1, "{schemas:?}");
    assert!(operations.len() >= 20, "{operations:?}");
    let schema: Value = serde_json::from_str(schemas.iter().next().unwrap()).unwrap();
    let values = json!([
        "orders",
        "a%0A",
        "a%0a",
        "%24x",
        "x%7F",
        "a%C2%85",
        "a%c2%9f",
        "a%1F",
        "a%25",
        "50%",
        "%41b",
        "a%E2%80%A8",
        "a%C2%A0",
        "%2524",
        "é%C3%A9",
        "$x",
        "tab\there"
    ]);
    let out = Command::new(crate::clients::python())
        .args([
            "-c",
            PATH_VALUES,
            schema["pattern"].as_str().unwrap(),
            &values.to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: Vec<(String, bool, String)> = serde_json::from_slice(&out.stdout).unwrap();
    let allowed: Vec<&str> = cases.iter().filter(|c| c.1).map(|c| c.0.as_str()).collect();
    assert_eq!(
        allowed,
        [
            "orders",
            "a%25",
            "50%",
            "%41b",
            "a%E2%80%A8",
            "a%C2%A0",
            "%2524",
            "é%C3%A9"
        ],
        "{cases:?}"
    );
    for (method, path) in &operations {
        for (value, valid, wire) in &cases {
            let url = svc.url(&path.replace("{name}", wire).replace("{serial}", "1"));
            let mut req = match method.as_str() {
                "get" => http.get(url),
                "delete" => http.delete(url),
                _ => http.post(url),
            };
            // A body the operation takes (some read it before the name).
            if let Some(b) = body_for(path) {
                req = req.json(&b);
            }
            let (status, body) = send(req.bearer_auth(ADMIN)).await;
            assert_eq!(
                status == 400,
                !valid,
                "{method} {path} with {value:?} (sent as {wire}): {status} {body}"
            );
        }
    }
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// One Schemathesis run against `svc` with `token` (or none): its summary lines.
fn schemathesis(svc: &Service, token: Option<&str>, seed: u64, seconds: u32) -> String {
    let st = crate::clients::tool("venv/bin/st");
    let config = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("tests/schemathesis/schemathesis.toml");
    // Hypothesis keeps a database in the working directory: a scratch one.
    let dir =
        std::env::temp_dir().join(format!("{}-st-{seed}-{}", svc.collection, token.is_some()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(st);
    cmd.current_dir(&dir)
        .arg("--config-file")
        .arg(&config)
        .args(["--no-color", "run", &svc.url("/openapi.json")])
        // Every check runs by default; `--checks all` is not given because a check named on the
        // command line would override the configuration's one exception (the history's
        // use-after-free check, in tests/schemathesis/schemathesis.toml).
        .args(["--phases", "examples,coverage,fuzzing,stateful"])
        .args([
            "--seed",
            &seed.to_string(),
            "--max-time",
            &seconds.to_string(),
        ])
        // One worker: CPython 3.11's `ast` keeps one recursion count per interpreter, which two
        // threads describing Hypothesis lambdas at once corrupt (python/cpython#106905).
        .args(["--workers", "1", "--request-timeout", "20"]);
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let started = Instant::now();
    let mut out = cmd.output().expect("run Schemathesis");
    let mut stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    // Should CPython 3.11's `ast` still fail with "AST constructor recursion depth mismatch"
    // (python/cpython#106905): an error of the interpreter, not a finding about the service.
    // Such a run, with no failure of a check, is run again once with the same seed.
    if !out.status.success()
        && stdout.contains("AST constructor recursion depth mismatch")
        && !stdout.contains("FAILURES")
    {
        eprintln!("schemathesis: an interpreter error (cpython#106905), not a check; once more");
        out = cmd.output().expect("run Schemathesis");
        stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| {
            l.contains("generated")
                || l.contains("Seed:")
                || l.contains("failure")
                || l.starts_with("====")
        })
        .collect();
    eprintln!(
        "schemathesis ({}): {:?}\n{}",
        if token.is_some() { "token" } else { "no token" },
        started.elapsed(),
        summary.join("\n")
    );
    assert!(
        out.status.success(),
        "Schemathesis failed (seed {seed}):\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    summary.join("\n")
}

/// The seed every run of [`schemathesis_finds_nothing`] also runs as the admin, besides a new
/// one: what it finds is found on every run, not only by a lucky seed (issue 49, item 10).
const OUR_SEED: u64 = 49_010;

/// Item 6: Schemathesis 4.32.5 drives the service from its own `/openapi.json` with every
/// check and its stateful phase, as the admin (with [`OUR_SEED`], then a new seed), as a narrow
/// token and without a token: zero failures. The new seed is printed (set
/// DISPENSER_SCHEMATHESIS_SEED to replay one). It runs 45 s in all by default (a CI run; it was
/// 115 s, the longest test of the suite); `DISPENSER_SCHEMATHESIS_SECS=<s>` gives it longer
/// (shared 30 : 35 : 22 : 13), as `DISPENSER_SOAK_SECS` does for the model tests.
#[test]
fn schemathesis_finds_nothing() {
    let seed: u64 = std::env::var("DISPENSER_SCHEMATHESIS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000_000
        });
    eprintln!("schemathesis seed: {seed} (replay with DISPENSER_SCHEMATHESIS_SEED={seed})");
    let total: u32 = std::env::var("DISPENSER_SCHEMATHESIS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45)
        .max(3);
    eprintln!("schemathesis: {total} s in all (DISPENSER_SCHEMATHESIS_SECS)");
    let svc = Service::start_args("schemathesis", &common::uri(), &["--request-timeout", "10"]);
    let share = |part: u32| (total * part / 100).max(1);
    for (token, seed, seconds) in [
        (Some(ADMIN), OUR_SEED, share(30)),
        (Some(ADMIN), seed, share(35)),
        (Some(ORDERS), seed, share(22)),
        (None, seed, share(13)),
    ] {
        let summary = schemathesis(&svc, token, seed, seconds);
        assert!(summary.contains("generated"), "{summary}");
    }
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Validates each answer against its operation's schema in the document, as Python's
/// `jsonschema` (Draft 2020-12) reads it; besides the schema's own rules, an object may have
/// no property its schema does not declare (`unevaluatedProperties: false` added to the
/// answer and to every schema not merged into another by `allOf`). Prints one line per
/// answer: `ok` or what is wrong.
const VALIDATE_ANSWERS: &str = r#"
import json, sys
from jsonschema import Draft202012Validator
doc, answers = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
schemas = doc["components"]["schemas"]
merged = set()
def walk(v):
    if isinstance(v, dict):
        for part in v.get("allOf", []):
            if "$ref" in part:
                merged.add(part["$ref"].rsplit("/", 1)[1])
        for x in v.values():
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
walk(schemas)
for name, s in schemas.items():
    if name not in merged and "properties" in s:
        s["unevaluatedProperties"] = False
for method, path, status, body in answers:
    response = doc["paths"][path][method]["responses"].get(str(status))
    if response is None:
        print(f"{method} {path} {status}: the document has no such answer")
        continue
    schema = dict(response["content"]["application/json"]["schema"])
    schema["unevaluatedProperties"] = False
    schema["components"] = doc["components"]
    errors = [e.message for e in Draft202012Validator(schema).iter_errors(body)]
    print(f"{method} {path} {status}: " + ("ok" if not errors else "; ".join(errors)[:2000]))
"#;

/// Every answer the service gives is what its schema in `/openapi.json` says, with nothing
/// undeclared: the answers are the types the document is derived from (`serve/answers.rs`).
/// One request of every operation with an answer body (and both forms of the answers that
/// have two), each answer validated against the schema of its operation and status.
/// Regression: the gap-free endpoints' answers were described as any JSON value, and the
/// answers' types only shadowed what the handlers built (`serve/schemas.rs`).
#[tokio::test]
async fn every_answer_is_what_its_schema_in_the_document_says() {
    let svc = Service::start("answers_schema");
    let http = reqwest::Client::new();
    let doc = openapi_of(&http, &svc).await;
    let d = library(&svc).await;
    d.ensure_striped("ids", 3, dispenser::Spec::default())
        .await
        .unwrap();
    let mut answers: Vec<Value> = Vec::new();
    // (method, the path as documented, the path sent, body)
    let calls: Vec<(&str, &str, String, Option<Value>)> = vec![
        ("get", "/healthz", "/healthz".into(), None),
        (
            "post",
            "/v1/sequences",
            "/v1/sequences".into(),
            Some(json!({ "name": "inv", "format": "A-{n}" })),
        ),
        (
            "post",
            "/v1/sequences",
            "/v1/sequences".into(),
            Some(json!({ "name": "inv", "format": "A-{n}", "if_not_exists": true })),
        ),
        (
            "post",
            "/v1/sequences/{name}/next",
            "/v1/sequences/inv/next?count=3".into(),
            None,
        ),
        (
            "post",
            "/v1/sequences/{name}/next",
            "/v1/sequences/inv/next?count=2000".into(),
            None,
        ),
        (
            "get",
            "/v1/sequences/{name}",
            "/v1/sequences/inv".into(),
            None,
        ),
        (
            "get",
            "/v1/sequences/{name}",
            "/v1/sequences/ids".into(),
            None,
        ),
        ("get", "/v1/sequences", "/v1/sequences".into(), None),
        (
            "post",
            "/v1/sequences/{name}/advance-to",
            "/v1/sequences/inv/advance-to".into(),
            Some(json!({ "to": 5000 })),
        ),
        (
            "post",
            "/v1/sequences/{name}/reset",
            "/v1/sequences/inv/reset".into(),
            Some(json!({ "next": 6000 })),
        ),
        (
            "post",
            "/v1/sequences/{name}/alter",
            "/v1/sequences/inv/alter".into(),
            Some(json!({ "max": 1_000_000 })),
        ),
        (
            "post",
            "/v1/sequences/{name}/alter",
            "/v1/sequences/ids/alter".into(),
            Some(json!({ "max": 1_000_000 })),
        ),
        (
            "get",
            "/v1/sequences/{name}/hourly",
            "/v1/sequences/inv/hourly".into(),
            None,
        ),
        (
            "get",
            "/v1/sequences/{name}/history",
            "/v1/sequences/inv/history".into(),
            None,
        ),
        (
            "get",
            "/v1/sequences/{name}",
            "/v1/sequences/nothing-here".into(),
            None,
        ),
        (
            "post",
            "/v1/queues",
            "/v1/queues".into(),
            Some(json!({ "name": "lobby", "format": "A-{n:03}" })),
        ),
        (
            "post",
            "/v1/queues",
            "/v1/queues".into(),
            Some(json!({ "name": "lobby", "format": "A-{n:03}", "if_not_exists": true })),
        ),
        (
            "post",
            "/v1/queues/{name}/take",
            "/v1/queues/lobby/take".into(),
            None,
        ),
        (
            "post",
            "/v1/queues/{name}/take",
            "/v1/queues/lobby/take".into(),
            Some(json!({ "count": 3 })),
        ),
        (
            "post",
            "/v1/queues/{name}/call",
            "/v1/queues/lobby/call".into(),
            Some(json!({ "desk": "3" })),
        ),
        (
            "post",
            "/v1/queues/{name}/recall",
            "/v1/queues/lobby/recall".into(),
            Some(json!({ "desk": "3" })),
        ),
        (
            "post",
            "/v1/queues/{name}/finish",
            "/v1/queues/lobby/finish".into(),
            Some(json!({ "desk": "3" })),
        ),
        (
            "post",
            "/v1/queues/{name}/cancel",
            "/v1/queues/lobby/cancel".into(),
            Some(json!({ "ticket": 4 })),
        ),
        (
            "post",
            "/v1/queues/{name}/alter",
            "/v1/queues/lobby/alter".into(),
            Some(json!({ "max": 500 })),
        ),
        ("get", "/v1/queues/{name}", "/v1/queues/lobby".into(), None),
        ("get", "/v1/queues", "/v1/queues".into(), None),
        (
            "get",
            "/v1/queues/{name}/tickets/{serial}",
            "/v1/queues/lobby/tickets/2".into(),
            None,
        ),
        (
            "get",
            "/v1/queues/{name}/ticket-link",
            "/v1/queues/lobby/ticket-link".into(),
            None,
        ),
        (
            "get",
            "/v1/queues/{name}/history",
            "/v1/queues/lobby/history".into(),
            None,
        ),
        (
            "post",
            "/v1/gapless",
            "/v1/gapless".into(),
            Some(json!({ "name": "web", "collection": "web_orders", "field": "number" })),
        ),
        (
            "post",
            "/v1/gapless",
            "/v1/gapless".into(),
            Some(
                json!({ "name": "web", "collection": "web_orders", "field": "number", "if_not_exists": true }),
            ),
        ),
        ("get", "/v1/gapless/{name}", "/v1/gapless/web".into(), None),
        (
            "post",
            "/v1/gapless/{name}/void",
            "/v1/gapless/web/void".into(),
            Some(json!({ "number": 1, "reason": "torn" })),
        ),
        (
            "post",
            "/v1/gapless/{name}/alter",
            "/v1/gapless/web/alter".into(),
            Some(json!({ "max_lease_seconds": 60 })),
        ),
        ("get", "/v1/gapless", "/v1/gapless".into(), None),
        (
            "get",
            "/v1/gapless/{name}/history",
            "/v1/gapless/web/history".into(),
            None,
        ),
        ("get", "/v1/overview", "/v1/overview".into(), None),
    ];
    for (method, documented, sent, body) in &calls {
        let mut req = match *method {
            "get" => http.get(svc.url(sent)),
            _ => http.post(svc.url(sent)),
        };
        if let Some(b) = body {
            req = req.json(b);
        }
        let (status, answer) = send(req.bearer_auth(ADMIN)).await;
        assert!(
            status < 300 || documented == &"/v1/sequences/{name}",
            "{method} {sent}: {status} {answer}"
        );
        answers.push(json!([method, documented, status, answer]));
    }
    let dir = std::env::temp_dir().join(format!("{}-answers", svc.collection));
    std::fs::create_dir_all(&dir).unwrap();
    let (doc_file, answers_file) = (dir.join("openapi.json"), dir.join("answers.json"));
    std::fs::write(&doc_file, doc.to_string()).unwrap();
    std::fs::write(&answers_file, Value::Array(answers).to_string()).unwrap();
    let out = Command::new(crate::clients::python())
        .args(["-c", VALIDATE_ANSWERS])
        .arg(&doc_file)
        .arg(&answers_file)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wrong: Vec<&str> = report.lines().filter(|l| !l.ends_with(": ok")).collect();
    assert!(
        wrong.is_empty(),
        "answers the document does not describe:\n{}",
        wrong.join("\n")
    );
    assert_eq!(report.lines().count(), calls.len(), "{report}");
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}
