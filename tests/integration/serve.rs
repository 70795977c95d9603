//! `dispenser serve` end to end: a real server process on a free port, real HTTP clients.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::{Value, json};

use crate::common::{self, DB};

const ADMIN: &str = "admin-token-for-tests-0001";
const ORDERS: &str = "orders-token-for-tests-0002";

struct Service {
    child: Child,
    base: String,
    collection: String,
    tokens: std::path::PathBuf,
}

impl Service {
    fn start(test: &str) -> Service {
        common::ready();
        let collection = common::unique(test);
        let tokens = std::env::temp_dir().join(format!("{collection}.tokens.json"));
        std::fs::write(
            &tokens,
            json!({ "tokens": [
                { "name": "admin", "token": ADMIN, "sequences": ["*"],
                  "operations": ["next", "create", "peek", "list", "advance", "reset", "delete"] },
                { "name": "orders", "token": ORDERS, "sequences": ["orders", "orders@*"],
                  "operations": ["next", "peek"] },
            ]})
            .to_string(),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", common::uri())
            .args([
                "--db",
                DB,
                "--collection",
                &collection,
                "serve",
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--block", "100", "--max-count", "10000", "--tokens"])
            .arg(&tokens)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start dispenser serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Service {
            child,
            base,
            collection,
            tokens,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGTERM, then the exit status and stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err)
                    .unwrap();
                let _ = std::fs::remove_file(&self.tokens);
                return (status, err);
            }
            assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = std::fs::remove_file(&self.tokens);
    }
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_end_to_end() {
    let svc = Service::start("serve");
    let http = reqwest::Client::new();

    // Create through the API.
    let (status, body) = send(
        http.post(svc.url("/v1/sequences"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "orders", "start": 1 })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["next"], 1);

    // A large count comes back as runs reserved directly.
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/orders/next?count=5000"))
            .bearer_auth(ORDERS),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut all: Vec<i64> = Vec::new();
    for run in body["runs"].as_array().unwrap() {
        let (first, count) = (
            run["first"].as_i64().unwrap(),
            run["count"].as_i64().unwrap(),
        );
        all.extend(first..first + count);
    }
    assert_eq!(all.len(), 5000);

    // Many concurrent clients, small counts, through the block client.
    let started = Instant::now();
    let clients = (0..16).map(|c| {
        let http = http.clone();
        let url = svc.url("/v1/sequences/orders/next");
        tokio::spawn(async move {
            let mut got = Vec::new();
            let mut latencies = Vec::new();
            for i in 0..60 {
                let count = 1 + (c + i) % 5;
                let t0 = Instant::now();
                let (status, body) = send(
                    http.post(format!("{url}?count={count}"))
                        .bearer_auth(ORDERS),
                )
                .await;
                latencies.push(t0.elapsed());
                assert_eq!(status, 200, "{body}");
                let numbers = body["numbers"].as_array().unwrap();
                assert_eq!(numbers.len(), count);
                got.extend(numbers.iter().map(|n| n.as_i64().unwrap()));
            }
            (got, latencies)
        })
    });
    let mut latencies = Vec::new();
    let mut requests = 0;
    for r in join_all(clients).await {
        let (got, lat) = r.unwrap();
        requests += lat.len();
        all.extend(got);
        latencies.extend(lat);
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    eprintln!(
        "serve load: {requests} requests from 16 clients in {elapsed:.2?} ({:.0} req/s), p99 {:?}",
        requests as f64 / elapsed.as_secs_f64(),
        latencies[latencies.len() * 99 / 100]
    );
    let distinct: HashSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a number was served twice");
    let max = *all.iter().max().unwrap();

    // Health and metrics.
    let (status, _) = send(http.get(svc.url("/healthz"))).await;
    assert_eq!(status, 200);
    let metrics = http
        .get(svc.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let issued: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("dispenser_numbers_issued_total "))
        .expect("issued counter")
        .parse()
        .unwrap();
    assert_eq!(issued, all.len() as u64);
    assert!(metrics.contains("dispenser_request_duration_seconds_bucket{le=\"+Inf\"}"));
    assert!(metrics.contains("dispenser_block_refills_total"));
    assert!(!metrics.contains(ADMIN) && !metrics.contains(ORDERS));

    // Graceful shutdown gives the unused block back: the next number follows the last served.
    let collection = svc.collection.clone();
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("given back"), "{stderr}");
    assert!(
        !stderr.contains(ADMIN) && !stderr.contains(ORDERS),
        "{stderr}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .args(["--db", DB, "--collection", &collection, "next", "orders"])
        .output()
        .unwrap();
    let next: i64 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(next, max + 1, "shutdown: {stderr}");
}

#[tokio::test]
async fn serve_rejects_bad_requests_with_json_errors() {
    let svc = Service::start("serve_bad");
    let http = reqwest::Client::new();
    let (status, _) = send(
        http.post(svc.url("/v1/sequences"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "orders" })),
    )
    .await;
    assert_eq!(status, 201);
    let next = |q: &str, token: Option<&str>| {
        let mut r = http.post(svc.url(&format!("/v1/sequences/{q}")));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r
    };
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (next("orders/next", None), 401, "unauthorized"),
        (
            next("orders/next", Some("not-a-real-token-at-all")),
            401,
            "unauthorized",
        ),
        (
            http.post(svc.url("/v1/sequences/orders/next"))
                .header("Authorization", "Basic YWRtaW4="),
            401,
            "unauthorized",
        ),
        (next("payroll/next", Some(ORDERS)), 403, "forbidden"),
        (
            http.delete(svc.url("/v1/sequences/orders"))
                .bearer_auth(ORDERS),
            403,
            "forbidden",
        ),
        (
            next("orders/next?count=0", Some(ORDERS)),
            400,
            "invalid_input",
        ),
        (
            next("orders/next?count=-1", Some(ORDERS)),
            400,
            "invalid_input",
        ),
        (
            next("orders/next?count=abc", Some(ORDERS)),
            400,
            "invalid_input",
        ),
        (
            next("orders/next?count=10001", Some(ORDERS)),
            400,
            "invalid_input",
        ),
        (
            next("orders/next?cnt=1", Some(ORDERS)),
            400,
            "invalid_input",
        ),
        (next("missing/next", Some(ADMIN)), 404, "no_such_sequence"),
        (next("%24bad/next", Some(ADMIN)), 400, "invalid_input"),
        (
            http.post(svc.url("/v1/sequences"))
                .bearer_auth(ADMIN)
                .header("Content-Type", "application/json")
                .body("{not json"),
            400,
            "malformed_json",
        ),
        (
            http.post(svc.url("/v1/sequences"))
                .bearer_auth(ADMIN)
                .header("Content-Type", "text/plain")
                .body("{\"name\": \"x\"}"),
            415,
            "unsupported_media_type",
        ),
        (
            http.post(svc.url("/v1/sequences"))
                .bearer_auth(ADMIN)
                .json(&json!({ "name": "x", "step": 0 })),
            400,
            "invalid_input",
        ),
        (
            http.post(svc.url("/v1/sequences"))
                .bearer_auth(ADMIN)
                .json(&json!({ "name": "orders" })),
            409,
            "already_exists",
        ),
        (
            http.post(svc.url("/v1/sequences/orders/reset"))
                .bearer_auth(ADMIN)
                .json(&json!({ "value": "five" })),
            400,
            "malformed_json",
        ),
        (http.get(svc.url("/v2/nothing")), 404, "not_found"),
        (next("%FF%FE/next", Some(ADMIN)), 400, "bad_request"),
        (
            next("orders/next?count=%ZZ", Some(ORDERS)),
            400,
            "invalid_input",
        ),
        (
            http.put(svc.url("/v1/sequences/orders/next"))
                .bearer_auth(ADMIN),
            405,
            "method_not_allowed",
        ),
    ];
    for (req, want_status, want_kind) in cases {
        let (status, body) = send(req).await;
        assert_eq!(status, want_status, "{body}");
        assert_eq!(body["error"]["kind"], want_kind, "{body}");
        assert!(body["error"]["message"].is_string(), "{body}");
    }
    // Admin operations mirror the CLI.
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/orders/advance"))
            .bearer_auth(ADMIN)
            .json(&json!({ "to": 500 })),
    )
    .await;
    assert_eq!((status, body["next"].as_i64()), (200, Some(501)), "{body}");
    let (status, body) = send(http.get(svc.url("/v1/sequences")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 200);
    assert_eq!(body["sequences"].as_array().unwrap().len(), 1);
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/orders/reset"))
            .bearer_auth(ADMIN)
            .json(&json!({ "value": 1 })),
    )
    .await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (409, Some("would_go_backwards"))
    );
    let (status, _) = send(
        http.delete(svc.url("/v1/sequences/orders"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = send(http.get(svc.url("/v1/sequences/orders")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 404);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

#[test]
fn serve_refuses_to_start_without_valid_tokens() {
    common::ready();
    let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .env_remove("DISPENSER_TOKENS")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no tokens configured"));
    let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .env(
            "DISPENSER_TOKENS",
            r#"{"tokens": [{"name": "x", "token": "tiny", "sequences": ["*"], "operations": []}]}"#,
        )
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("shorter than 16") && !err.contains("tiny"),
        "{err}"
    );
}
