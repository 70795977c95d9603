//! The service mounted in an app's own axum router under a prefix: the example
//! `src/server/examples/mount.rs` (its [`app`](example::app), `/numbers`), served here over
//! the test server. Numbers are drawn under the prefix, the pages load their files and link
//! under it, the ticket link and `/openapi.json` name it, the app's own route still answers,
//! and the shutdown gives back the block's tail.

use std::net::SocketAddr;

use dispenser_server::{Config, Server};
use serde_json::{Value, json};

use crate::common::Fixture;

#[path = "../../src/server/examples/mount.rs"]
#[allow(dead_code)]
mod example;

const ADMIN: &str = "admin-token-for-the-mount-0001";
const LINK: &str = "link-token-for-the-mount-0001";

#[tokio::test]
async fn the_router_mounted_under_a_prefix_serves_draws_pages_and_links_under_it() {
    let f = Fixture::new("mount").await;
    let tokens = json!({ "tokens": [
        { "name": "admin", "token": ADMIN, "sequences": ["*"],
          "operations": ["create", "next", "peek", "list", "take"] },
        { "name": "phones", "token": LINK,
          "ticket_link": { "queue": "lobby", "takes_per_phone": 2, "takes_per_address": 10 } },
    ]});
    let server = Server::new(
        f.dispenser(f.options()),
        Config::default().with_tokens_json(tokens.to_string()),
    )
    .expect("the settings are valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(
        axum::serve(
            listener,
            example::app(&server).into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move {
            let _ = stopped.await;
        })
        .into_future(),
    );
    let http = reqwest::Client::new();
    let url = |path: &str| format!("http://{addr}{path}");
    let call = |method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut r = http.request(method, url(path)).bearer_auth(ADMIN);
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let resp = r.send().await.expect("the app answers");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };

    // The app's own route.
    let own = http.get(url("/")).send().await.unwrap();
    assert_eq!(own.status(), 200);
    assert_eq!(own.text().await.unwrap(), "the app's own page");

    // A draw under the prefix.
    let (status, created) = call(
        reqwest::Method::POST,
        "/numbers/v1/sequences",
        Some(json!({"name": "orders"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let (status, drawn) = call(
        reqwest::Method::POST,
        "/numbers/v1/sequences/orders/next",
        None,
    )
    .await;
    assert_eq!((status, &drawn["numbers"]), (200, &json!([1])), "{drawn}");
    // Not at the root: the service is only under its prefix.
    let root = http
        .post(url("/v1/sequences/orders/next"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(root.status(), 404);

    // A page under the prefix loads its files under it, and they are there.
    let (status, _) = call(
        reqwest::Method::POST,
        "/numbers/v1/queues",
        Some(json!({"name": "lobby"})),
    )
    .await;
    assert_eq!(status, 201);
    let page = http
        .get(url("/numbers/ui/queues/lobby/board"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains(r#"<meta name="dispenser-base" content="/numbers">"#),
        "{html}"
    );
    let mut loaded = 0;
    for part in html
        .split("src=\"")
        .skip(1)
        .chain(html.split("href=\"").skip(1))
    {
        let link = &part[..part.find('"').unwrap()];
        if link.starts_with("data:") {
            continue;
        }
        assert!(
            link.starts_with("/numbers/ui/assets/"),
            "{link} is not under the prefix"
        );
        let asset = http.get(url(link)).send().await.unwrap();
        assert_eq!(asset.status(), 200, "{link}");
        loaded += 1;
    }
    assert!(loaded >= 3, "{html}");

    // The ticket link (and its QR code) points under the prefix; a phone's take through it
    // is counted by its address (ConnectInfo).
    let (status, link) = call(
        reqwest::Method::GET,
        "/numbers/v1/queues/lobby/ticket-link",
        None,
    )
    .await;
    assert_eq!(status, 200, "{link}");
    let expected = format!("http://{addr}/numbers/ui/queues/lobby/ticket#token={LINK}");
    assert_eq!(link["url"], json!(expected), "{link}");
    assert!(
        link["qr_svg"]
            .as_str()
            .is_some_and(|s| s.starts_with("<svg")),
        "{link}"
    );
    let taken = http
        .post(url("/numbers/v1/queues/lobby/take"))
        .bearer_auth(LINK)
        .header("Idempotency-Key", "phone-mount.1")
        .send()
        .await
        .unwrap();
    assert_eq!(taken.status(), 200);

    // The OpenAPI document names the prefix as its server; /metrics answers under it.
    let doc: Value = http
        .get(url("/numbers/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["servers"], json!([{"url": "/numbers"}]));
    assert!(doc["paths"]["/v1/sequences/{name}/next"].is_object());
    let metrics = http.get(url("/numbers/metrics")).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(metrics.text().await.unwrap().contains("dispenser_"));

    // The app stops; the shutdown gives back the rest of the block the draw reserved.
    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
    let returned = server.shutdown().await;
    assert!(
        returned.given_back > 0 && returned.lost == 0,
        "{returned:?}"
    );
    let after = f.dispenser(f.options()).peek("orders").await.unwrap();
    assert_eq!(after.value, 1, "{after:?}");
}

/// The pages' script puts the prefix of its `dispenser-base` meta tag before every path it
/// calls, and reads the queue's name from the path under it (`common.js`, run in Node).
#[test]
fn the_pages_call_and_read_their_paths_under_the_prefix() {
    let common_js = include_str!("../../src/server/src/ui/common.js");
    let script = format!(
        "globalThis.document = {{ querySelector: () => ({{ content: '/numbers' }}) }};\n\
         globalThis.location = {{ pathname: '/numbers/ui/queues/lob%20by/board', hash: '', search: '' }};\n\
         globalThis.sessionStorage = {{ getItem: () => 't' }};\n\
         const called = [];\n\
         globalThis.fetch = async (path) => {{ called.push(path); throw new Error('offline'); }};\n\
         {common_js}\n\
         (async () => {{\n\
           await Dispenser.api('GET', Dispenser.queuePath('lob by', '/ticket-link')).catch(() => {{}});\n\
           await Dispenser.readEvents('/ui/queues/x/events', () => {{}}, () => false).catch(() => {{}});\n\
           process.stdout.write(JSON.stringify({{ called, name: Dispenser.queueName(), page: Dispenser.pagePath(), base: Dispenser.base }}));\n\
         }})();"
    );
    let out = std::process::Command::new("node")
        .arg("-e")
        .arg(&script)
        .output()
        .expect("node (installed with the test tools)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen,
        json!({
            "called": ["/numbers/v1/queues/lob%20by/ticket-link", "/numbers/ui/queues/x/events"],
            "name": "lob by",
            "page": "/ui/queues/lob%20by/board",
            "base": "/numbers",
        })
    );
}
