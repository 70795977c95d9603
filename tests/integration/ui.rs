//! The pages `dispenser serve` serves (`/ui`, a queue's kiosk and board, the board of several
//! queues), in a real browser: Debian's Chromium, headless, driven by Selenium
//! (`tests/ui/drive.py`; both installed by `scripts/tools.sh`). A double tap on "Take a
//! ticket" takes one ticket, and a tap retried after the network came back sends the same
//! request id; calls from two desks through the command line show on the board with their
//! desks within 2 s, the last calls in order, each call and recall announced in the aria-live
//! region in order and spoken one after the other; `/ui` shows a queue's desks, calls and
//! cancels from a desk, and draws its charts; no page logs an error or a CSP violation.
//!
//! The screenshots in the README and the guide come from this test:
//! `DISPENSER_UI_SCREENSHOTS=.github/screenshots scripts/test.sh --test integration ui::`
//! writes them there (by default they go to a scratch directory and are only checked to be
//! images).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, DB};
use crate::queue::next_event;
use crate::serve::{ADMIN, BOARD, KIOSK, Service, send};

/// The ticket link of `lobby` in these tests: three takes per phone, and enough per address
/// for a crowd of phones on one machine.
const PHONE: &str = "phones-token-for-tests-0005";

/// The tokens of the browser test: the admin, the kiosk and the board of `lobby*`, and the
/// ticket link of `lobby`.
fn tokens() -> Value {
    json!({ "tokens": [
        { "name": "admin", "token": ADMIN, "sequences": ["*"],
          "operations": ["next", "create", "peek", "list", "advance-to", "adopt", "reset", "delete", "alter", "void", "release", "history", "take", "call"] },
        { "name": "kiosk", "token": KIOSK, "sequences": ["lobby*"], "operations": ["take"] },
        { "name": "board", "token": BOARD, "sequences": ["lobby*"], "operations": ["peek"] },
        { "name": "phones", "token": PHONE,
          "ticket_link": { "queue": "lobby", "takes_per_phone": 3, "takes_per_address": 1000 } },
    ]})
}

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
        Ok(dir) => Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(dir),
        Err(_) => std::env::temp_dir().join(format!("{collection}-shots")),
    }
}

/// `POST path` with `body` as the admin; the answer, which must be `expected`.
async fn admin(svc: &Service, path: &str, body: Value, expected: u16) -> Value {
    let (status, answer) = send(
        reqwest::Client::new()
            .post(svc.url(path))
            .bearer_auth(ADMIN)
            .json(&body),
    )
    .await;
    assert_eq!(status, expected, "{path} {body}: {answer}");
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_work_in_headless_chromium() {
    let svc = Service::start_tokens("ui", &common::uri(), &tokens(), &[]);
    let coll = svc.collection.clone();
    // The scene (the screenshots show it).
    cli(&coll, &["create", "orders"]);
    cli(&coll, &["next", "orders", "--count", "1234"]);
    cli(&coll, &["create", "tickets", "--max", "99", "--cycle"]);
    cli(&coll, &["next", "tickets", "--count", "42"]);
    cli(&coll, &["create", "serials", "--max", "1000"]);
    cli(&coll, &["next", "serials", "--count", "870"]);
    // Numbers the service issues (the chart of numbers issued per hour counts these).
    admin(&svc, "/v1/sequences/orders/next?count=3", json!({}), 200).await;
    // The business collection is the test's own (the database is shared); for the
    // screenshots, on a fresh server, a plain name.
    let business = match std::env::var("DISPENSER_UI_SCREENSHOTS") {
        Ok(_) => "invoices".to_owned(),
        Err(_) => format!("{coll}_invoices"),
    };
    cli(
        &coll,
        &[
            "gapless", "create", "invoices", "--into", &business, "--field", "number",
        ],
    );
    for _ in 0..3 {
        cli(&coll, &["gapless", "issue", "invoices"]);
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
    // The queues: `lobby` (tickets A-001…, three called at desk 1, four waiting), `lobby-b`
    // (B-001…) and `lobby-full` (as many wait as it holds).
    let create = |name: &str, body: Value| {
        let mut body = body;
        body["name"] = json!(name);
        body
    };
    admin(
        &svc,
        "/v1/queues",
        create("lobby", json!({"max": 999, "format": "A-{n:03}"})),
        201,
    )
    .await;
    admin(&svc, "/v1/queues/lobby/take", json!({"count": 7}), 200).await;
    for _ in 0..3 {
        admin(&svc, "/v1/queues/lobby/call", json!({"desk": "1"}), 200).await;
    }
    admin(
        &svc,
        "/v1/queues",
        create("lobby-b", json!({"format": "B-{n:03}"})),
        201,
    )
    .await;
    admin(&svc, "/v1/queues/lobby-b/take", json!({"count": 3}), 200).await;
    admin(
        &svc,
        "/v1/queues",
        create("lobby-full", json!({"max": 1})),
        201,
    )
    .await;
    admin(&svc, "/v1/queues/lobby-full/take", json!({"count": 2}), 200).await;
    // Issue 37: tickets past 2^53 (9007199254740991 …994), and a label of 190 characters
    // called at a desk.
    admin(
        &svc,
        "/v1/queues",
        create(
            "lobby-wide",
            json!({"min": 9_007_199_254_740_990_i64, "max": 9_007_199_254_741_089_i64}),
        ),
        201,
    )
    .await;
    admin(&svc, "/v1/queues/lobby-wide/take", json!({"count": 4}), 200).await;
    let long_format = format!("{{n}}{}", "W".repeat(189));
    admin(
        &svc,
        "/v1/queues",
        create("lobby-long", json!({"format": long_format})),
        201,
    )
    .await;
    admin(&svc, "/v1/queues/lobby-long/take", json!({}), 200).await;
    admin(
        &svc,
        "/v1/queues/lobby-long/call",
        json!({"desk": "1"}),
        200,
    )
    .await;

    let shots = screenshots(&coll);
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("tests/ui/drive.py");
    let started = std::time::Instant::now();
    let out = Command::new(crate::clients::python())
        .arg(&script)
        .env("BASE", &svc.base)
        .env("QUEUE", "lobby")
        .env("QUEUE_B", "lobby-b")
        .env("FULL", "lobby-full")
        .env("WIDE", "lobby-wide")
        .env("LONG", "lobby-long")
        .env("KIOSK_TOKEN", KIOSK)
        .env("BOARD_TOKEN", BOARD)
        .env("ADMIN_TOKEN", ADMIN)
        .env("PHONE_TOKEN", PHONE)
        .env("CROWD", "200")
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

    // The kiosk: a double tap sends one request (with a request id) and takes one ticket,
    // A-008 with four before it; the same id again answers A-008 again and takes nothing.
    let kiosk = &r["kiosk"];
    assert_eq!(kiosk["button"], "Take a ticket");
    assert_eq!(kiosk["token_left_in_address"], false);
    assert_eq!(kiosk["token_kept_in_session_storage"], true);
    let double = &kiosk["double_tap"];
    assert_eq!(double["ticket"], "A-008", "{double}");
    assert_eq!(double["ahead"], "4 people before you.", "{double}");
    assert!(
        double["estimate"]
            .as_str()
            .unwrap()
            .starts_with("Estimated wait: "),
        "{double}"
    );
    assert_eq!(
        double["requests"], 1,
        "one request for a double tap: {double}"
    );
    assert_eq!(double["taken"], 1, "one ticket for a double tap: {double}");
    assert_eq!(double["key_length"], 32, "a request id: {double}");
    assert_eq!(
        kiosk["same_key_again"],
        json!({"status": 200, "label": "A-008", "replayed": true, "taken": 1})
    );
    // A tap while offline says so in plain words; the tap after sends the same request id,
    // and one ticket is taken for both.
    assert!(
        kiosk["offline_message"]
            .as_str()
            .unwrap()
            .contains("you will not get two tickets"),
        "{kiosk}"
    );
    let retried = &kiosk["after_offline"];
    assert_eq!(retried["ticket"], "A-009", "{retried}");
    assert_eq!(retried["ahead"], "5 people before you.", "{retried}");
    assert_eq!(retried["one_key"], true, "{retried}");
    assert_eq!(retried["taken"], 1, "{retried}");
    // Printed: the ticket, without the buttons; the date and time.
    assert_eq!(kiosk["print"]["button_shown"], false, "{kiosk}");
    assert_eq!(kiosk["print"]["ticket_shown"], true, "{kiosk}");
    assert_eq!(kiosk["print"]["queue"], "lobby", "{kiosk}");
    assert_ne!(kiosk["print"]["taken_at"], "", "{kiosk}");
    assert_eq!(
        kiosk["full"],
        "The queue is full right now. Please wait a moment and try again."
    );
    assert_eq!(kiosk["full_result_hidden"], true);
    assert_eq!(kiosk["phone_overflow"], 0, "the kiosk fits a phone");

    // The board: calls from desks 2 and 3 through the CLI, then a recall at desk 2.
    let board = &r["board"];
    assert_eq!(board["before"]["current"], "A-003 Desk 1", "{board}");
    assert_eq!(
        board["before"]["calls"],
        json!([["A-002", "Desk 1"], ["A-001", "Desk 1"]]),
        "{board}"
    );
    assert_eq!(
        board["before"]["announced"],
        json!([]),
        "nothing announced at first"
    );
    assert_eq!(
        board["sound"],
        json!({"pressed": "true", "label": "Sound on"})
    );
    assert_eq!(board["called_by_cli"], json!(["A-004", "A-005"]));
    let shown = board["shown_after_ms"].as_u64().unwrap();
    assert!(shown < 2000, "the board showed the call after {shown} ms");
    assert_eq!(board["current"], "A-004 Desk 2", "the recall: {board}");
    assert_eq!(
        board["calls"],
        json!([
            ["A-005", "Desk 3"],
            ["A-004", "Desk 2"],
            ["A-003", "Desk 1"],
            ["A-002", "Desk 1"],
            ["A-001", "Desk 1"]
        ]),
        "the last calls, newest first: {board}"
    );
    let said = json!([
        "Ticket A 4, desk 2",
        "Ticket A 5, desk 3",
        "Ticket A 4, desk 2, again"
    ]);
    assert_eq!(board["announced"], said, "the aria-live region: {board}");
    assert_eq!(board["spoken"], said, "the spoken queue: {board}");
    assert_eq!(board["spoken_in_turn"], true, "none cut off: {board}");
    let waiting = board["waiting"][0].as_str().unwrap();
    assert!(waiting.starts_with("4 waiting"), "{board}");
    assert!(waiting.contains("estimated wait: "), "{board}");
    assert_eq!(board["phone_overflow"], 0, "the board fits a phone");
    // The board of two queues.
    let several = &board["several"];
    assert_eq!(several["title"], "lobby · lobby-b", "{several}");
    assert_eq!(several["current"], "B-001 Desk 4", "{several}");
    assert_eq!(
        several["calls"][0],
        json!(["A-004", "Desk 2 (again)"]),
        "{several}"
    );
    assert_eq!(
        several["announced"],
        json!(["Ticket B 1, desk 4"]),
        "{several}"
    );
    assert_eq!(several["waiting"].as_array().unwrap().len(), 2, "{several}");
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
    // The overview: what the CLI created, the queue's desks, a call and a cancel from it,
    // the charts.
    let o = &r["overview"];
    let names = |table: &str| -> Vec<String> {
        o[table]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row[0].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names("sequences"), ["orders", "serials", "tickets"]);
    let orders = &o["sequences"][0];
    assert_eq!(
        orders[1], "1,335",
        "next (past the service's block): {orders}"
    );
    assert_eq!(
        orders[6], "97",
        "held by the service's block of 100: {orders}"
    );
    assert_eq!(names("gapless"), ["invoices"]);
    assert_eq!(o["gapless"][0][1], format!("{business}.number"));
    assert_eq!(o["gapless"][0][4], "4: printer jam");
    assert_eq!(
        o["queues"],
        json!(["lobby", "lobby-b", "lobby-full", "lobby-long", "lobby-wide"])
    );
    assert_eq!(
        o["board_of_all"],
        format!(
            "{}/ui/board?queue=lobby&queue=lobby-b&queue=lobby-full&queue=lobby-long&queue=lobby-wide",
            svc.base
        )
    );
    // Issue 37, 9: the ticket cancelled is the one given, past 2^53.
    let e = &r["edges"];
    assert_eq!(e["cancel_result"], "Cancelled 9007199254740993.", "{e}");
    assert_eq!(
        e["still_waiting"],
        json!(["9007199254740991", "9007199254740992", "9007199254740994"]),
        "{e}"
    );
    // Issue 37, 12: a label of 190 characters stays on one line, the desk on the screen.
    let b = &e["board"];
    assert!(
        b["serving_height"].as_f64().unwrap() < b["height"].as_f64().unwrap() / 2.0,
        "{b}"
    );
    assert!(
        b["desk_right"].as_f64().unwrap() <= b["width"].as_f64().unwrap(),
        "{b}"
    );
    assert!(
        b["desk_bottom"].as_f64().unwrap() <= b["height"].as_f64().unwrap(),
        "{b}"
    );
    assert!(
        b["scroll_width"].as_f64().unwrap() <= b["width"].as_f64().unwrap(),
        "{b}"
    );
    assert_eq!(b["title"], 190, "the whole label in the title: {b}");
    assert_eq!(
        o["desks_before"],
        json!([["1", "A-003"], ["2", "A-004"], ["3", "A-005"]]),
        "{o}"
    );
    assert_eq!(o["call_result"], "Called A-006 to desk 7.", "{o}");
    assert_eq!(
        o["desks"],
        json!([
            ["1", "A-003"],
            ["2", "A-004"],
            ["3", "A-005"],
            ["7", "A-006"]
        ]),
        "{o}"
    );
    assert_eq!(
        o["cancel_result"],
        json!(["A-009", "Cancelled A-009."]),
        "{o}"
    );
    let figures = &o["figures"];
    assert_eq!(figures["now serving"], "A-006", "{figures}");
    assert_eq!(figures["waiting"], "2 of 1,000", "{figures}");
    assert_eq!(figures["cancelled"], "1", "{figures}");
    assert_eq!(figures["taken today"], "9", "{figures}");
    assert_eq!(figures["served today"], "6", "{figures}");
    assert_eq!(o["queue_chart"]["bars"], 24, "{o}");
    assert!(
        o["queue_chart"]["label"]
            .as_str()
            .unwrap()
            .starts_with("highest "),
        "{o}"
    );
    assert_eq!(o["phone_overflow"], 0, "the overview fits a phone");
    assert_eq!(o["sequence_chart"]["for"], "orders", "{o}");
    assert_eq!(o["sequence_chart"]["bars"], 24, "{o}");
    assert!(
        o["sequence_chart"]["label"]
            .as_str()
            .unwrap()
            .starts_with("highest "),
        "the service issued numbers of orders this hour: {o}"
    );
    // The ticket link's QR code on the kiosk and the board, read off their screenshots: the
    // ticket page's address with the link's token in its fragment.
    let link = format!("{}/ui/queues/lobby/ticket#token={PHONE}", svc.base);
    assert_eq!(r["qr"], json!({"kiosk": link, "board": link}));
    // The ticket page on a 390-pixel phone, from the link.
    let p = &r["phone"];
    assert_eq!(p["token_left_in_address"], false, "{p}");
    assert_eq!(p["token_kept"], true, "{p}");
    assert_eq!(p["phone_overflow"], 0, "the ticket page fits a phone");
    // Take: one request, its id `PHONE.TAKE`, one ticket, A-010 with two before it (A-006
    // was called by the overview's button, A-009 cancelled).
    let take = &p["take"];
    assert_eq!(
        (&take["ticket"], &take["state"], &take["title"]),
        (
            &json!("A-010"),
            &json!("2 people before you."),
            &json!("A-010 · 2 before you")
        ),
        "{take}"
    );
    assert_eq!(
        (&take["requests"], &take["key_form"], &take["taken"]),
        (&json!(1), &json!(true), &json!(1)),
        "{take}"
    );
    assert!(
        take["estimate"]
            .as_str()
            .unwrap()
            .starts_with("Estimated wait: "),
        "{take}"
    );
    assert_eq!(
        (&take["give_up"], &take["take"]),
        (&json!(true), &json!(false)),
        "{take}"
    );
    // Follow: a call of the oldest waiting ticket moves it up, live.
    let follow = &p["follow"];
    assert_eq!(follow["state"], "1 person before you.", "{follow}");
    let shown = follow["shown_after_ms"].as_u64().unwrap();
    assert!(
        shown < 1000,
        "the phone showed its new place after {shown} ms"
    );
    // Reload: the same ticket, followed, and no take sent.
    let reload = &p["reload"];
    assert_eq!(
        (
            &reload["ticket"],
            &reload["state"],
            &reload["take_requests"],
            &reload["taken"]
        ),
        (
            &json!("A-010"),
            &json!("1 person before you."),
            &json!(0),
            &json!(0)
        ),
        "{reload}"
    );
    // The call, out of order at desk 5: within a second, in the title, announced, a
    // vibration.
    let called = &p["called"];
    assert_eq!(called["state"], "It's your turn: desk 5", "{called}");
    assert_eq!(called["title"], "▶ Your turn: desk 5 — A-010", "{called}");
    assert_eq!(
        called["announced"],
        json!(["Your turn: ticket A 10, desk 5"]),
        "{called}"
    );
    assert_eq!(called["vibrations"], 1, "{called}");
    let shown = called["shown_after_ms"].as_u64().unwrap();
    assert!(shown < 1000, "the phone showed its call after {shown} ms");
    // Its desk moved on: the page says when it was called, and offers a new ticket.
    let passed = &p["passed"];
    assert!(
        passed["state"]
            .as_str()
            .unwrap()
            .starts_with("You were called to desk 5 at "),
        "{passed}"
    );
    assert_eq!(
        (&passed["title"], &passed["again"]),
        (&json!("Called — A-010"), &json!(true)),
        "{passed}"
    );
    // Called and passed while the page was closed: missed, in plain words.
    let missed = &p["missed"];
    assert_eq!(missed["ticket"], "A-011", "{missed}");
    let said = missed["state"].as_str().unwrap();
    assert!(
        said.starts_with("You missed your call: A-011 was called to desk 6 at ")
            && said.ends_with("while this page was closed. Please ask at the desk."),
        "{missed}"
    );
    assert_eq!(missed["title"], "Missed — A-011", "{missed}");
    // Given up: cancelled in the queue, and the page says so.
    let gave_up = &p["gave_up"];
    assert_eq!(
        (
            &gave_up["ticket"],
            &gave_up["state"],
            &gave_up["still_waiting"],
            &gave_up["cancelled"]
        ),
        (
            &json!("A-012"),
            &json!("You gave up your ticket."),
            &json!(false),
            &json!(1)
        ),
        "{gave_up}"
    );
    // The phone's fourth take: past the link's three per phone, refused in plain words,
    // nothing taken.
    let limited = &p["limited"];
    let message = limited["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "No ticket: ticket link \"phones\" lets one phone take 3 ticket(s) per hour, and all were taken: try again in "
        ),
        "{limited}"
    );
    assert_eq!(
        (&limited["taken"], &limited["mine"]),
        (&json!(0), &json!(false)),
        "{limited}"
    );
    // A crowd of 200 phones following `lobby`, each its stream open: the board still shows
    // a call within a second, and every phone is told (one of them is the ticket called).
    let crowd = &r["crowd"];
    assert_eq!(
        (&crowd["following"], &crowd["refused"]),
        (&json!(200), &json!([])),
        "{crowd}"
    );
    let shown = crowd["board_shown_after_ms"].as_u64().unwrap();
    assert!(
        shown < 1000,
        "with 200 phones following, the board showed the call after {shown} ms"
    );
    assert_eq!(crowd["told"], 200, "{crowd}");
    assert_eq!(crowd["moved_up"], 199, "{crowd}");
    let told = crowd["told_within_ms"].as_u64().unwrap();
    assert!(
        told < 2000,
        "the last of 200 phones was told after {told} ms"
    );
    assert_eq!(
        r["console_errors"],
        json!([]),
        "script errors or CSP violations"
    );
    for page in ["overview", "kiosk", "board", "ticket"] {
        for size in ["", "-phone"] {
            let name = format!("{page}{size}.png");
            let png = std::fs::read(shots.join(&name)).unwrap();
            assert!(
                png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5_000,
                "{name}"
            );
            assert!(png.len() < 300_000, "{name} is {} bytes", png.len());
        }
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
        (
            "/ui/queues/lobby/ticket",
            "text/html",
            "keep this page open",
        ),
        ("/ui/assets/ticket.js", "text/javascript", "localStorage"),
        ("/ui/queues/lobby%2Fwest/board", "text/html", "Now serving"),
        ("/ui/board?queues=lobby,lobby-b", "text/html", "aria-live"),
        (
            "/ui/assets/announce.js",
            "text/javascript",
            "speechSynthesis",
        ),
        ("/ui/assets/chart.js", "text/javascript", "createElementNS"),
        ("/ui/assets/ui.css", "text/css", "body.board"),
        ("/ui/assets/board.js", "text/javascript", "recent_calls"),
        (
            "/ui/assets/common.js",
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
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    for path in ["/ui/queues/lobby/events", "/v1/overview"] {
        let (status, body) = send(http.get(svc.url(path))).await;
        assert_eq!(status, 401, "{path}: {body}");
    }
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// A ticket link's token takes one ticket at a time on its one queue, with a request id that
/// names the phone; a retried id answers the same ticket and counts once; past the link's
/// limit per phone, then per address, a take is refused with 429 `too_many_takes`, a
/// `Retry-After` and a message that says which limit and when, and nothing is taken. The
/// phone follows its ticket and gives it up with its take's request id; the token may do
/// nothing else.
#[tokio::test]
async fn a_ticket_link_takes_follows_and_gives_up_within_its_limits() {
    const LINK: &str = "link-token-for-tests-000006";
    let tokens = json!({ "tokens": [
        { "name": "admin", "token": ADMIN, "sequences": ["*"],
          "operations": ["create", "peek", "take", "call", "delete"] },
        { "name": "phones", "token": LINK,
          "ticket_link": { "queue": "hall", "takes_per_phone": 2, "takes_per_address": 3,
                           "per_seconds": 3600 } },
    ]});
    let svc = Service::start_tokens(
        "ticket_link",
        &common::uri(),
        &tokens,
        &["--max-ticket-streams-per-address", "1"],
    );
    for name in ["hall", "hall-b"] {
        admin(&svc, "/v1/queues", json!({"name": name}), 201).await;
    }
    admin(&svc, "/v1/queues/hall/take", json!({"count": 2}), 200).await;
    let http = reqwest::Client::new();
    let take = |key: &str| {
        http.post(svc.url("/v1/queues/hall/take"))
            .bearer_auth(LINK)
            .header("Idempotency-Key", key)
    };
    let taken = || async {
        let (_, s) = send(http.get(svc.url("/v1/queues/hall")).bearer_auth(ADMIN)).await;
        s["taken"].as_u64().unwrap()
    };

    let (status, first) = send(take("phone-aaa.1")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (first["serial"].as_u64(), first["position"].as_u64()),
        (Some(3), Some(2))
    );
    // The page reloaded: the same request id answers the same ticket and counts once.
    for _ in 0..3 {
        let (status, again) = send(take("phone-aaa.1")).await;
        assert_eq!(
            (status, &again["serial"], &again["replayed"]),
            (200, &json!(3), &json!(true))
        );
    }
    let (status, second) = send(take("phone-aaa.2")).await;
    assert_eq!(status, 200, "{second}");
    // The phone's third take: refused, nothing taken.
    let before = taken().await;
    let resp = take("phone-aaa.3").send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&wait), "Retry-After {wait}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_takes", "{body}");
    assert_eq!(body["error"]["written"], "nothing_written", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("ticket link \"phones\" lets one phone take 2 ticket(s) per hour")
            && message.contains(&format!("try again in {wait} s")),
        "{message}"
    );
    assert!(!message.contains(LINK), "{message}");
    assert_eq!(taken().await, before, "a refused take takes nothing");
    // Another phone from the same address: its first take is the address's third, its
    // second is past the address's limit (the phone's own would allow it).
    let (status, other) = send(take("phone-bbb.1")).await;
    assert_eq!(status, 200, "{other}");
    let resp = take("phone-bbb.2").send().await.unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().contains_key("retry-after"));
    let body: Value = resp.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "ticket link \"phones\" lets one address (127.0.0.1) take 3 ticket(s) per hour"
        ),
        "{message}"
    );
    assert_eq!(taken().await, before + 1);
    // A retried id is still answered past the limits: it takes nothing new.
    let (status, again) = send(take("phone-aaa.2")).await;
    assert_eq!((status, &again["serial"]), (200, &second["serial"]));

    // Bad takes through the link: two tickets at once, no request id, one that names no
    // phone, another queue; each names what was wrong.
    for (req, expected, needle) in [
        (
            take("phone-ccc.1").json(&json!({"count": 2})),
            400,
            "one person, one ticket",
        ),
        (
            http.post(svc.url("/v1/queues/hall/take")).bearer_auth(LINK),
            400,
            "needs an Idempotency-Key",
        ),
        (take("x.1"), 400, "is not `PHONE.TAKE`"),
        (
            http.post(svc.url("/v1/queues/hall-b/take"))
                .bearer_auth(LINK)
                .header("Idempotency-Key", "phone-ccc.1"),
            403,
            "",
        ),
        (
            http.get(svc.url("/v1/queues/hall")).bearer_auth(LINK),
            403,
            "",
        ),
        (
            http.post(svc.url("/v1/queues/hall/call")).bearer_auth(LINK),
            403,
            "",
        ),
    ] {
        let (status, body) = send(req).await;
        assert_eq!(status, expected, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{message}");
    }

    // The second ticket's stream: its view at once. A second stream from this address is
    // past --max-ticket-streams-per-address 1.
    let events = |serial: &Value| {
        http.get(svc.url(&format!("/ui/queues/hall/tickets/{serial}/events")))
            .bearer_auth(LINK)
    };
    let mut live = events(&second["serial"]).send().await.unwrap();
    assert_eq!(live.status(), 200);
    let mut buffer = String::new();
    let wait = Duration::from_secs(5);
    let v = next_event(&mut live, &mut buffer, wait, |_| true)
        .await
        .unwrap();
    assert_eq!(
        (&v["state"], &v["serial"]),
        (&json!("waiting"), &second["serial"]),
        "{v}"
    );
    let resp = events(&first["serial"]).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "10");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the most the service's --max-ticket-streams-per-address allows"),
        "{body}"
    );

    // Following: two wait before the first ticket, then one after a call.
    let follow = |serial: &Value| http.get(svc.url(&format!("/v1/queues/hall/tickets/{serial}")));
    let (status, view) = send(follow(&first["serial"]).bearer_auth(LINK)).await;
    assert_eq!(
        (status, &view["state"], &view["position"]),
        (200, &json!("waiting"), &json!(2)),
        "{view}"
    );
    admin(&svc, "/v1/queues/hall/call", json!({"desk": "2"}), 200).await;
    let (_, view) = send(follow(&first["serial"]).bearer_auth(LINK)).await;
    assert_eq!(
        (&view["state"], &view["position"]),
        (&json!("waiting"), &json!(1)),
        "{view}"
    );
    let (status, view) = send(follow(&json!(999)).bearer_auth(LINK)).await;
    assert_eq!(
        (status, &view["state"]),
        (200, &json!("not_taken")),
        "{view}"
    );

    // Giving up: the ticket of the take with that request id, once.
    let give_up = |key: &str| {
        http.post(svc.url("/v1/queues/hall/give-up"))
            .bearer_auth(LINK)
            .header("Idempotency-Key", key)
    };
    let (status, gone) = send(give_up("phone-aaa.1")).await;
    assert_eq!(
        (status, &gone["serial"], &gone["cancelled"]),
        (200, &first["serial"], &json!(true)),
        "{gone}"
    );
    let (_, view) = send(follow(&first["serial"]).bearer_auth(LINK)).await;
    assert_eq!(view["state"], "cancelled", "{view}");
    let (status, body) = send(give_up("phone-aaa.1")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("ticket_not_waiting")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("it was given up already"),
        "{body}"
    );
    // A called ticket is not given up: its desk waits for it.
    admin(
        &svc,
        "/v1/queues/hall/call",
        json!({"desk": "2", "serial": second["serial"]}),
        200,
    )
    .await;
    let (status, body) = send(give_up("phone-aaa.2")).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("it is called to desk \"2\""),
        "{body}"
    );
    let (status, view) = send(follow(&second["serial"]).bearer_auth(LINK)).await;
    assert_eq!(
        (status, &view["state"], &view["desk"]),
        (200, &json!("called"), &json!("2")),
        "{view}"
    );
    // The stream tells the call, then that its desk moved on, and ends.
    let v = next_event(&mut live, &mut buffer, wait, |v| v["state"] == "called").await;
    assert_eq!(v.map(|v| v["desk"].clone()), Some(json!("2")));
    admin(&svc, "/v1/queues/hall/call", json!({"desk": "2"}), 200).await;
    let v = next_event(&mut live, &mut buffer, wait, |_| true).await;
    assert_eq!(v.map(|v| v["state"].clone()), Some(json!("passed")));
    assert_eq!(
        next_event(&mut live, &mut buffer, wait, |_| true).await,
        None,
        "ended"
    );
    // Its place came back: another stream is let in.
    let mut again = events(&first["serial"]).send().await.unwrap();
    for _ in 0..50 {
        if again.status() == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        again = events(&first["serial"]).send().await.unwrap();
    }
    assert_eq!(again.status(), 200);
    // The first ticket, given up, is past (the line has moved beyond it: `done`): its stream
    // sends its view once, without `version` and `queue_waiting`, and ends.
    let mut buffer = String::new();
    let v = next_event(&mut again, &mut buffer, wait, |_| true)
        .await
        .unwrap();
    assert_eq!(
        (&v["state"], &v["serial"]),
        (&json!("done"), &first["serial"]),
        "{v}"
    );
    assert!(
        v.get("version").is_none() && v.get("queue_waiting").is_none(),
        "{v}"
    );
    assert_eq!(
        next_event(&mut again, &mut buffer, wait, |_| true).await,
        None,
        "ended"
    );

    // The link as the board and the kiosk show it: the page's address with the token in its
    // fragment, and its QR code.
    let (status, link) = send(
        http.get(svc.url("/v1/queues/hall/ticket-link"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 200, "{link}");
    assert_eq!(
        link["url"],
        format!("{}/ui/queues/hall/ticket#token={LINK}", svc.base)
    );
    assert!(link["qr_svg"].as_str().unwrap().contains("<svg"), "{link}");
    let (status, none) = send(
        http.get(svc.url("/v1/queues/hall-b/ticket-link"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!((status, &none["url"]), (200, &Value::Null), "{none}");
    // Regression (found by Schemathesis's stateful phase): a queue deleted, or never created,
    // has no ticket link: 404 as for its peek, never a 200 a board would print a QR code for.
    let (status, gone) = send(http.delete(svc.url("/v1/queues/hall-b")).bearer_auth(ADMIN)).await;
    assert_eq!(status, 204, "{gone}");
    for name in ["hall-b", "hall-c"] {
        let (peek, peeked) = send(
            http.get(svc.url(&format!("/v1/queues/{name}")))
                .bearer_auth(ADMIN),
        )
        .await;
        let (status, link) = send(
            http.get(svc.url(&format!("/v1/queues/{name}/ticket-link")))
                .bearer_auth(ADMIN),
        )
        .await;
        assert_eq!((peek, status), (404, 404), "{name}: {link}");
        assert_eq!(link["error"]["code"], peeked["error"]["code"], "{link}");
        assert!(link.get("url").is_none(), "{link}");
    }
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// Regression (issue 59, 3): the public link's reads were unmetered — 4 000 answers of `GET
/// /v1/queues/{name}/tickets/{serial}` from 16 connections cost the database 4 009 requests
/// (a peek each), `GET …/ticket-link` likewise — and the ticket streams counted each IPv6
/// address apart. Views and the link are read from the queue's shared status (what the
/// streams follow): the same flood costs a bounded number of database requests, counted at a
/// proxy in front of the database; a ticket link's reads are limited per address (429
/// `too_many_reads`, `Retry-After`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_public_reads_cost_the_database_a_bounded_amount_and_are_limited_per_address() {
    use crate::proxy::{Faults, Proxy};
    const LINK: &str = "link-token-for-tests-000008";
    let proxy = Proxy::to_test_server(Faults::default(), 59).await;
    let tokens = json!({ "tokens": [
        { "name": "admin", "token": ADMIN, "sequences": ["*"],
          "operations": ["create", "peek", "take", "call"] },
        { "name": "phones", "token": LINK,
          "ticket_link": { "queue": "hall", "reads_per_minute_per_address": 20 } },
    ]});
    let svc = Service::start_tokens("public_reads", &proxy.uri(""), &tokens, &[]);
    admin(
        &svc,
        "/v1/queues",
        json!({ "name": "hall", "max": 99 }),
        201,
    )
    .await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(16)
        .build()
        .unwrap();
    let (status, t) = send(
        http.post(svc.url("/v1/queues/hall/take"))
            .bearer_auth(LINK)
            .header("Idempotency-Key", "phone-flood-1.1"),
    )
    .await;
    assert_eq!(status, 200, "{t}");
    // A ticket just taken is seen at once (the view waits for the feed to read it).
    let view = format!("/v1/queues/hall/tickets/{}", t["serial"]);
    let (status, v) = send(http.get(svc.url(&view)).bearer_auth(ADMIN)).await;
    assert_eq!((status, &v["state"]), (200, &json!("waiting")), "{v}");

    // The flood: 4 000 views and 400 ticket links from 16 connections; then the same again,
    // for the memory (it stays flat: what one flood leaves, the next reuses).
    let flood = |http: reqwest::Client| {
        let (view, link) = (svc.url(&view), svc.url("/v1/queues/hall/ticket-link"));
        async move {
            let tasks: Vec<_> = (0..16)
                .map(|i| {
                    let (http, view, link) = (http.clone(), view.clone(), link.clone());
                    tokio::spawn(async move {
                        let mut ok = 0;
                        for k in 0..275 {
                            let url = if k % 11 == 10 { &link } else { &view };
                            let r = http.get(url).bearer_auth(ADMIN).send().await.unwrap();
                            ok += usize::from(r.status() == 200);
                            let _ = r.bytes().await;
                        }
                        (i, ok)
                    })
                })
                .collect();
            let mut answered = 0;
            for t in tasks {
                answered += t.await.unwrap().1;
            }
            answered
        }
    };
    let rss_before = svc.rss_mib();
    let before = proxy.counts().requests;
    let started = std::time::Instant::now();
    let answered = flood(http.clone()).await;
    let took = started.elapsed();
    let cost = proxy.counts().requests - before;
    let rss_after = svc.rss_mib();
    assert_eq!(answered, 16 * 275);
    assert_eq!(flood(http.clone()).await, 16 * 275);
    let rss_again = svc.rss_mib();
    if let (Some(a), Some(b)) = (rss_after, rss_again) {
        assert!(
            b - a < 16.0,
            "the second flood grew the service from {a:.1} to {b:.1} MiB"
        );
    }
    // A read of the status (the queue and the server's time) every quarter of a second, at
    // most, while the flood lasts.
    let bound = 8 + 4 * (took.as_millis() as u64 / 250 + 1);
    assert!(
        cost <= bound,
        "{answered} answers in {took:?} cost the database {cost} requests (bound {bound})"
    );
    eprintln!(
        "public reads: {answered} answers in {took:?} cost the database {cost} requests; the service's memory {rss_before:?} MiB before, {rss_after:?} after, {rss_again:?} after as many again"
    );

    // A ticket link's reads from one address: 20 per minute, then 429 with Retry-After.
    let mut refused = None;
    for k in 0..25 {
        let r = http
            .get(svc.url(&view))
            .bearer_auth(LINK)
            .send()
            .await
            .unwrap();
        if r.status() == 429 {
            let after = r.headers().get("retry-after").cloned();
            let body: Value = r.json().await.unwrap();
            refused = Some((k, after, body));
            break;
        }
    }
    let (k, after, body) = refused.expect("the 21st read is refused");
    assert_eq!(k, 20, "{body}");
    assert!(after.is_some(), "{body}");
    assert_eq!(body["error"]["code"], "too_many_reads", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("lets one address (127.0.0.1) read 20 time(s) per minute"),
        "{body}"
    );
    // The link itself counts as a read too; other tokens are not metered.
    let r = http
        .get(svc.url("/v1/queues/hall/ticket-link"))
        .bearer_auth(LINK)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let (status, _) = send(http.get(svc.url(&view)).bearer_auth(ADMIN)).await;
    assert_eq!(status, 200);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}
