//! The pages `dispenser serve` serves (`/ui`, a queue's kiosk and board), in a real browser:
//! Debian's Chromium, headless, driven by Selenium (`tests/ui/drive.py`; both installed by
//! `scripts/tools.sh`). A click on "Take a ticket" shows the ticket; a `dispenser queue call`
//! from the command line shows on the board within 2 s; `/ui` lists what the CLI created.
//!
//! The screenshots in the README come from this test: `DISPENSER_UI_SCREENSHOTS=tests/ui/screenshots
//! scripts/test.sh --test integration ui::` writes them there (by default they go to a scratch
//! directory and are only checked to be images).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{self, DB};
use crate::serve::{ADMIN, BOARD, KIOSK, Service, send};

fn cli(collection: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .env_remove("DISPENSER_LOG")
        .args(["--db", DB, "--collection", collection])
        .args(args)
        .output()
        .expect("run dispenser");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Where the screenshots go: `DISPENSER_UI_SCREENSHOTS` (relative to the crate), else a
/// scratch directory.
fn screenshots(collection: &str) -> PathBuf {
    match std::env::var("DISPENSER_UI_SCREENSHOTS") {
        Ok(dir) => Path::new(env!("CARGO_MANIFEST_DIR")).join(dir),
        Err(_) => std::env::temp_dir().join(format!("{collection}-shots")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_work_in_headless_chromium() {
    let svc = Service::start("ui");
    let coll = svc.collection.clone();
    // The scene (the README's screenshots show it).
    cli(&coll, &["create", "orders"]);
    cli(&coll, &["next", "orders", "--count", "1234"]);
    cli(&coll, &["create", "tickets", "--max", "99", "--cycle"]);
    cli(&coll, &["next", "tickets", "--count", "42"]);
    cli(&coll, &["create", "serials", "--max", "1000"]);
    cli(&coll, &["next", "serials", "--count", "870"]);
    let http = reqwest::Client::new();
    let (status, body) = send(
        http.post(svc.url("/v1/sequences/orders/next?count=3"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // The business collection is the test's own (the database is shared); for the README's
    // screenshots, on a fresh server, a plain name.
    let business = match std::env::var("DISPENSER_UI_SCREENSHOTS") {
        Ok(_) => "invoices".to_owned(),
        Err(_) => format!("{coll}_invoices"),
    };
    for _ in 0..3 {
        cli(
            &coll,
            &[
                "gapless", "issue", "invoices", "--into", &business, "--field", "number",
            ],
        );
    }
    cli(
        &coll,
        &[
            "gapless",
            "void",
            "invoices",
            "4",
            "--reason",
            "printer jam",
        ],
    );
    cli(&coll, &["queue", "create", "lobby", "--max", "99"]);
    cli(&coll, &["queue", "take", "lobby", "--count", "7"]);
    for _ in 0..3 {
        cli(&coll, &["queue", "call", "lobby"]);
    }

    let shots = screenshots(&coll);
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/drive.py");
    let started = std::time::Instant::now();
    let out = Command::new(crate::clients::python())
        .arg(&script)
        .env("BASE", &svc.base)
        .env("QUEUE", "lobby")
        .env("KIOSK_TOKEN", KIOSK)
        .env("BOARD_TOKEN", BOARD)
        .env("ADMIN_TOKEN", ADMIN)
        .env("DISPENSER", env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .env("DB", DB)
        .env("COLLECTION", &coll)
        .env("SHOTS", &shots)
        .output()
        .expect("run tests/ui/drive.py");
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser run failed: {stderr}");
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    eprintln!("ui: headless Chromium in {elapsed:?}: {r}");

    assert_eq!(
        r["console_errors"],
        serde_json::json!([]),
        "script errors or CSP violations"
    );
    // The kiosk: the button shows the ticket (7 taken before: 8, then 9).
    let kiosk = &r["kiosk"];
    assert_eq!(kiosk["button"], "Take a ticket");
    assert_eq!(kiosk["tickets"], serde_json::json!(["8", "9"]));
    assert_eq!(
        kiosk["ahead"],
        serde_json::json!(["4 people before you.", "5 people before you."])
    );
    assert_eq!(kiosk["token_left_in_address"], false);
    assert_eq!(kiosk["token_kept_in_session_storage"], true);
    // The board: a call from the CLI shows within 2 s.
    let board = &r["board"];
    assert_eq!(board["before"]["serving"], "3");
    assert_eq!(board["before"]["waiting"], "6 waiting");
    assert_eq!(board["called_by_cli"], "4");
    assert_eq!(board["serving"], "4");
    assert_eq!(board["waiting"], "5 waiting");
    assert_eq!(board["next"], "Next ticket: 10");
    let shown = board["shown_after_ms"].as_u64().unwrap();
    assert!(shown < 2000, "the board showed the call after {shown} ms");
    // The board's link carried another token than the tab's (the kiosk's): the page asked,
    // kept the kiosk's token and did not start until the answer, then used the board's.
    let asked = &board["asked"];
    assert_eq!(
        asked["title"], "This link carries a different token.",
        "{asked}"
    );
    assert_eq!(asked["kept_while_asking"], true, "{asked}");
    assert_eq!(asked["waited"], "connecting…", "{asked}");
    assert_eq!(asked["token_left_in_address"], false, "{asked}");
    assert_eq!(asked["replaced"], true, "{asked}");
    // A crafted link to a tab that holds a token: asked, refused, the page goes on with its
    // own token — from a new address and from a fragment changed in place.
    let planted = &r["planted"];
    assert_eq!(
        planted["title"], "This link carries a different token.",
        "{planted}"
    );
    assert_eq!(planted["kept"], true, "{planted}");
    assert_eq!(planted["token_left_in_address"], false, "{planted}");
    assert_eq!(
        planted["fragment_title"], "This link carries a different token.",
        "{planted}"
    );
    assert_eq!(planted["fragment_kept"], true, "{planted}");
    assert_eq!(planted["fragment_left_in_address"], false, "{planted}");
    assert_eq!(planted["question_gone"], true, "{planted}");
    // The overview lists what the CLI created.
    let names = |table: &str| -> Vec<String> {
        r["overview"][table]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row[0].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("sequences"), ["orders", "serials", "tickets"]);
    let orders = &r["overview"]["sequences"][0];
    assert_eq!(
        orders[1], "1,335",
        "next (past the service's block): {orders}"
    );
    assert_eq!(
        orders[6], "97",
        "held by the service's block of 100: {orders}"
    );
    assert_eq!(names("gapless"), ["invoices"]);
    assert_eq!(r["overview"]["gapless"][0][1], format!("{business}.number"));
    assert_eq!(r["overview"]["gapless"][0][4], "4: printer jam");
    assert_eq!(names("queues"), ["lobby"]);
    assert_eq!(r["overview"]["queues"][0][1], "4", "now serving");
    for page in ["overview", "kiosk", "board"] {
        let png = std::fs::read(shots.join(format!("{page}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5_000,
            "{page}.png"
        );
    }
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// The pages are plain files anyone may load (they hold no data), each with a policy that
/// lets them load only this service's scripts, styles and API; their data needs a token.
#[tokio::test]
async fn pages_are_plain_files_with_a_strict_policy_and_data_needs_a_token() {
    let svc = Service::start("ui_plain");
    let http = reqwest::Client::new();
    for (path, kind, needle) in [
        ("/ui", "text/html", "Gap-free sequences"),
        ("/ui/queues/lobby/kiosk", "text/html", "Take a ticket"),
        ("/ui/queues/lobby%2Fwest/board", "text/html", "Now serving"),
        ("/ui/assets/ui.css", "text/css", "body.board"),
        (
            "/ui/assets/board.js",
            "text/javascript",
            "text/event-stream",
        ),
    ] {
        let resp = http.get(svc.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let h = resp.headers();
        assert!(
            h["content-type"].to_str().unwrap().starts_with(kind),
            "{path}"
        );
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert!(resp.text().await.unwrap().contains(needle), "{path}");
    }
    let (status, body) = send(http.get(svc.url("/ui/assets/nope.js"))).await;
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (404, Some("not_found"))
    );
    for path in ["/ui/queues/lobby/events", "/v1/overview"] {
        let (status, body) = send(http.get(svc.url(path))).await;
        assert_eq!(status, 401, "{path}: {body}");
    }
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}
