//! The service's cost stays flat as the collection grows: `/metrics` has series only for the
//! sequences the service draws (at most `--metrics-max-sequences`), `/v1/overview` is paged,
//! the hourly counts cover what this service issued, and an idle block client gives its
//! numbers back. (The timings with 100 000 sequences are `dispenser bench --scale`.)

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use crate::serve::{ADMIN, ORDERS, Service, create, draw, parse_metrics, sample, send};

/// May only list `orders` and its scopes.
const LISTER: &str = "lister-token-for-tests-0005";

async fn scrape_text(http: &reqwest::Client, svc: &Service) -> String {
    http.get(svc.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn scrape(http: &reqwest::Client, svc: &Service) -> prometheus_parse::Scrape {
    parse_metrics(&scrape_text(http, svc).await)
}

/// Five sequences exist, three are drawn (3, 2 and 1 numbers); with a cap of 2 only the two
/// most drawn have series, the third is counted in the totals, the two never drawn appear
/// nowhere. Before, every document of the collection had series at every scrape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_have_series_only_for_the_most_drawn_sequences_within_the_cap() {
    let svc = Service::start_args(
        "scale_metrics",
        &common::uri(),
        &["--metrics-max-sequences", "2"],
    );
    let http = reqwest::Client::new();
    for name in ["a", "b", "c", "idle1", "idle2"] {
        let (status, body) = create(&http, &svc, json!({ "name": name })).await;
        assert_eq!(status, 201, "{body}");
    }
    for (name, n) in [("a", 3), ("b", 2), ("c", 1)] {
        let (status, body) = draw(&http, &svc, ADMIN, name, n).await;
        assert_eq!(status, 200, "{body}");
    }
    let m = scrape(&http, &svc).await;
    let issued = |name: &str| sample(&m, "dispenser_numbers_issued_total", &[("sequence", name)]);
    assert_eq!(issued("a"), Some(3.0));
    assert_eq!(issued("b"), Some(2.0));
    assert_eq!(issued("c"), None, "beyond the cap");
    for name in ["c", "idle1", "idle2"] {
        for metric in [
            "dispenser_sequence_remaining",
            "dispenser_numbers_held",
            "dispenser_writes_total",
        ] {
            assert_eq!(
                sample(&m, metric, &[("sequence", name)]),
                None,
                "{metric} {name}"
            );
        }
    }
    assert!(sample(&m, "dispenser_sequence_remaining", &[("sequence", "a")]).is_some());
    assert_eq!(
        sample(&m, "dispenser_numbers_issued_all_total", &[]),
        Some(6.0)
    );
    assert_eq!(
        sample(&m, "dispenser_sequences_without_series", &[]),
        Some(1.0)
    );
    // The totals of what the blocks hold cover every sequence, those beyond the cap too.
    let held_all = sample(&m, "dispenser_numbers_held_all", &[]).expect("held_all");
    let held_shown: f64 = ["a", "b"]
        .iter()
        .filter_map(|n| sample(&m, "dispenser_numbers_held", &[("sequence", n)]))
        .sum();
    assert!(held_all > held_shown, "{held_all} vs {held_shown}");
    svc.stop();
}

/// `/v1/overview` answers one page of sequences with a cursor; following `next` lists every
/// sequence the token may use exactly once, and never another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_is_paged_and_the_pages_cover_the_allowed_names_once() {
    let tokens = json!({ "tokens": [
        { "name": "admin", "token": ADMIN, "sequences": ["*"],
          "operations": ["next", "create", "peek", "list"] },
        { "name": "lister", "token": LISTER, "sequences": ["orders", "orders@*"],
          "operations": ["list"] },
    ]});
    let svc = Service::start_tokens("scale_overview", &common::uri(), &tokens, &[]);
    let http = reqwest::Client::new();
    let mut names = vec!["orders".to_owned(), "other".to_owned()];
    for name in &names {
        let (status, body) = create(&http, &svc, json!({ "name": name })).await;
        assert_eq!(status, 201, "{body}");
    }
    // Seven scopes of `orders`, made by their first draw.
    for i in 0..7 {
        let name = format!("orders@k{i}");
        let (status, body) = draw(&http, &svc, ADMIN, &urlencoding(&name), 1).await;
        assert_eq!(status, 200, "{body}");
        names.push(name);
    }
    for (token, expected) in [
        (ADMIN, names.len()),
        // `orders` and `orders@*`.
        (LISTER, names.len() - 1),
    ] {
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut url = svc.url("/v1/overview?limit=3");
            if let Some(a) = &after {
                url.push_str(&format!("&after={}", urlencoding(a)));
            }
            let (status, body) = send(http.get(url).bearer_auth(token)).await;
            assert_eq!(status, 200, "{body}");
            let page = body["sequences"].as_array().unwrap();
            assert!(page.len() <= 3, "{body}");
            seen.extend(page.iter().map(|s| s["name"].as_str().unwrap().to_owned()));
            pages += 1;
            assert!(pages < 20, "the cursor does not end: {body}");
            match &body["next"] {
                Value::Null => break,
                Value::String(n) => after = Some(n.clone()),
                other => panic!("next {other}"),
            }
        }
        let unique: BTreeSet<&String> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "a name listed twice: {seen:?}");
        assert_eq!(seen.len(), expected, "{token}: {seen:?}");
        if token == LISTER {
            assert!(!seen.iter().any(|n| n == "other"), "{seen:?}");
        }
    }
    let (status, body) = send(http.get(svc.url("/v1/overview?limit=0")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("limit"));
    svc.stop();
}

fn urlencoding(s: &str) -> String {
    s.replace('@', "%40")
}

/// `GET /v1/sequences/{name}/hourly`: 24 hours, the last with what this service issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hourly_counts_show_what_the_service_issued_this_hour() {
    let svc = Service::start("scale_hourly");
    let http = reqwest::Client::new();
    let (status, body) = create(&http, &svc, json!({ "name": "orders" })).await;
    assert_eq!(status, 201, "{body}");
    for _ in 0..3 {
        let (status, body) = draw(&http, &svc, ORDERS, "orders", 4).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = send(
        http.get(svc.url("/v1/sequences/orders/hourly"))
            .bearer_auth(ORDERS),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let hours = body["hours"].as_array().unwrap();
    assert_eq!(hours.len(), 24, "{body}");
    let total: u64 = hours.iter().map(|h| h["issued"].as_u64().unwrap()).sum();
    // An hour may turn during the test: the total is what counts.
    assert_eq!(total, 12, "{body}");
    let stamps: Vec<&str> = hours.iter().map(|h| h["hour"].as_str().unwrap()).collect();
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    assert!(stamps.iter().all(|s| s.ends_with(":00:00Z")), "{stamps:?}");
    // Another token's name is refused like any read.
    let (status, _) = send(
        http.get(svc.url("/v1/sequences/other/hourly"))
            .bearer_auth(ORDERS),
    )
    .await;
    assert_eq!(status, 403);
    svc.stop();
}

/// With `--block-idle-release`, a sequence nobody draws gets its block client closed and
/// its reserved numbers given back: the stored value comes back to the last number issued,
/// the held total drops to 0, and the next draw goes on without a duplicate or a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_block_client_gives_its_numbers_back() {
    let svc = Service::start_args(
        "scale_idle",
        &common::uri(),
        &["--block-idle-release", "0.3"],
    );
    let http = reqwest::Client::new();
    let (status, body) = create(&http, &svc, json!({ "name": "orders" })).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = draw(&http, &svc, ORDERS, "orders", 5).await;
    assert_eq!(status, 200, "{body}");
    let last = body["numbers"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_i64()
        .unwrap();
    let stored = || async {
        let (_, s) = send(http.get(svc.url("/v1/sequences/orders")).bearer_auth(ADMIN)).await;
        s["value"].as_i64().unwrap()
    };
    assert!(stored().await > last, "a block is reserved");
    let deadline = Instant::now() + Duration::from_secs(10);
    while stored().await != last {
        assert!(
            Instant::now() < deadline,
            "the idle block was never given back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m = scrape(&http, &svc).await;
    assert_eq!(sample(&m, "dispenser_numbers_held_all", &[]), Some(0.0));
    let (status, body) = draw(&http, &svc, ORDERS, "orders", 1).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["numbers"][0].as_i64(), Some(last + 1), "{body}");
    svc.stop();
}

/// Queue series on `/metrics`: waiting, taken, served, cancelled, and the wait histogram of
/// the calls made since the service started (by any client); a deleted queue's series go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_have_series_and_a_wait_histogram() {
    let svc = Service::start("scale_queue_metrics");
    let http = reqwest::Client::new();
    let (status, body) = send(
        http.post(svc.url("/v1/queues"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "lobby", "max": 9 })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    for _ in 0..4 {
        let (status, body) = send(
            http.post(svc.url("/v1/queues/lobby/take"))
                .bearer_auth(ADMIN),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = send(
        http.post(svc.url("/v1/queues/lobby/cancel"))
            .bearer_auth(ADMIN)
            .json(&json!({ "ticket": 4 })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for desk in ["1", "2"] {
        let (status, body) = send(
            http.post(svc.url("/v1/queues/lobby/call"))
                .bearer_auth(ADMIN)
                .json(&json!({ "desk": desk })),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let text = scrape_text(&http, &svc).await;
    let m = parse_metrics(&text);
    let lobby = [("queue", "lobby")];
    assert_eq!(
        sample(&m, "dispenser_queue_waiting", &lobby),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&m, "dispenser_queue_taken_total", &lobby), Some(4.0));
    assert_eq!(
        sample(&m, "dispenser_queue_served_total", &lobby),
        Some(2.0)
    );
    assert_eq!(
        sample(&m, "dispenser_queue_cancelled_total", &lobby),
        Some(1.0)
    );
    assert!(
        text.contains("dispenser_queue_wait_seconds_count{queue=\"lobby\"} 2"),
        "{text}"
    );
    // A second scrape observes nothing twice.
    let again = scrape_text(&http, &svc).await;
    assert!(
        again.contains("dispenser_queue_wait_seconds_count{queue=\"lobby\"} 2"),
        "{again}"
    );
    // A ticket still waits: the delete is forced (issue 49, item 2).
    let (status, body) = send(
        http.delete(svc.url("/v1/queues/lobby"))
            .bearer_auth(ADMIN)
            .json(&json!({ "force": true })),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let gone = scrape_text(&http, &svc).await;
    assert!(!gone.contains("queue=\"lobby\""), "{gone}");
    svc.stop();
}
