//! SIGHUP re-reads the tokens file (issue 39): a token removed stops working at once and its
//! board streams end, while the other tokens' streams and the service's block clients go on
//! untouched; a bad file is refused and the tokens in use stay; tokens from the environment
//! cannot change.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, DB};
use crate::serve::{ADMIN, BOARD, ORDERS, Service, send};
use crate::tls::hang_up;

/// Another board's token, never removed.
const BOARD2: &str = "board-two-token-for-tests-06";

fn tokens(with_board: bool) -> Value {
    let mut list = vec![
        json!({ "name": "admin", "token": ADMIN, "sequences": ["*"],
                "operations": ["next", "create", "peek", "list", "reset", "take", "call"] }),
        json!({ "name": "orders", "token": ORDERS, "sequences": ["orders"], "operations": ["next", "peek"] }),
        json!({ "name": "board2", "token": BOARD2, "sequences": ["lobby*"], "operations": ["peek"] }),
    ];
    if with_board {
        list.push(json!({ "name": "board", "token": BOARD, "sequences": ["lobby*"], "operations": ["peek"] }));
    }
    json!({ "tokens": list })
}

/// Reads `resp` until it carried one more `event: status`: `Some(true)`; `Some(false)` when
/// the stream ended first; `None` when neither happened within `wait`.
async fn next_event(resp: &mut reqwest::Response, wait: Duration) -> Option<bool> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut seen = String::new();
    loop {
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Err(_) => return None,
            Ok(Ok(Some(bytes))) => {
                seen.push_str(&String::from_utf8_lossy(&bytes));
                if seen.contains("event: status") {
                    return Some(true);
                }
            }
            Ok(_) => return Some(false),
        }
    }
}

async fn stream(http: &reqwest::Client, svc: &Service, token: &str) -> reqwest::Response {
    let mut resp = http
        .get(svc.url("/ui/queues/lobby/events"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        next_event(&mut resp, Duration::from_secs(5)).await,
        Some(true)
    );
    resp
}

async fn draw(http: &reqwest::Client, svc: &Service) -> i64 {
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/orders/next"))
            .bearer_auth(ORDERS),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["numbers"][0].as_i64().unwrap()
}

/// The tokens file loses `board`; after SIGHUP its requests are 401 (at once: the first
/// request after the reload line) and its open stream ends, while `board2`'s stream goes on
/// (it sees the next take) and `orders`' block client is untouched: the sequence document is
/// not written by the reload (its value and version stay) and the next draw follows the last.
/// Then a file that is not JSON is refused with one line and the tokens in use stay. Before
/// the reload existed, SIGHUP stopped the service (the signal's default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_removed_from_the_file_stops_at_once_and_nothing_else_moves() {
    let svc = Service::start_tokens("reload_tokens", &common::uri(), &tokens(true), &[]);
    let http = reqwest::Client::new();
    let (status, body) = send(
        http.post(svc.url("/v1/sequences"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "orders" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(
        http.post(svc.url("/v1/queues"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "lobby" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut last = 0;
    for _ in 0..5 {
        last = draw(&http, &svc).await;
    }
    let peek = || async {
        let (status, body) =
            send(http.get(svc.url("/v1/sequences/orders")).bearer_auth(ADMIN)).await;
        assert_eq!(status, 200, "{body}");
        (body["value"].clone(), body["version"].clone())
    };
    let stored = peek().await;
    let mut removed = stream(&http, &svc, BOARD).await;
    let mut kept = stream(&http, &svc, BOARD2).await;

    std::fs::write(svc.tokens_path(), tokens(false).to_string()).unwrap();
    hang_up(&svc);
    let asked = Instant::now();
    loop {
        let (status, body) = send(http.get(svc.url("/v1/queues/lobby")).bearer_auth(BOARD)).await;
        if status == 401 {
            break;
        }
        assert_eq!(status, 200, "{body}");
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the removed token still worked 10 s after SIGHUP"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        next_event(&mut removed, Duration::from_secs(5)).await,
        Some(false),
        "the removed token's stream did not end"
    );
    let (status, body) = send(
        http.post(svc.url("/v1/queues/lobby/take"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        next_event(&mut kept, Duration::from_secs(5)).await,
        Some(true),
        "the kept token's stream did not go on"
    );
    assert_eq!(peek().await, stored, "the reload wrote the sequence");
    assert_eq!(draw(&http, &svc).await, last + 1);

    // A file that does not parse: refused, the tokens in use stay.
    std::fs::write(svc.tokens_path(), "{ not json").unwrap();
    hang_up(&svc);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, _) = send(http.get(svc.url("/v1/queues/lobby")).bearer_auth(BOARD2)).await;
    assert_eq!(status, 200);
    let (status, _) = send(http.get(svc.url("/v1/queues/lobby")).bearer_auth(BOARD)).await;
    assert_eq!(status, 401);
    assert_eq!(
        next_event(&mut kept, Duration::from_millis(300)).await,
        None,
        "the kept stream ended or changed on a refused reload"
    );
    drop((removed, kept));
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
    let reloaded: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("tokens reloaded"))
        .collect();
    assert_eq!(reloaded.len(), 1, "{stderr}");
    assert!(
        reloaded[0].contains("1 removed [\"board\"]"),
        "{}",
        reloaded[0]
    );
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("tokens not reloaded"))
            .count(),
        1,
        "{stderr}"
    );
    for secret in [ADMIN, BOARD, BOARD2, ORDERS] {
        assert!(!stderr.contains(secret), "{stderr}");
    }
}

/// Tokens given in `DISPENSER_TOKENS` cannot change: SIGHUP says so and changes nothing.
#[tokio::test]
async fn tokens_from_the_environment_stay_on_sighup() {
    common::ready();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .env("DISPENSER_TOKENS", tokens(true).to_string())
        .args(["--db", DB, "--collection", &common::unique("reload_env")])
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let pid = child.id().to_string();
    Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, body) = send(
        reqwest::Client::new()
            .get(format!("{base}/v1/queues"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("tokens not reloaded: they come from DISPENSER_TOKENS"),
        "{stderr}"
    );
}
