//! The history of admin operations (issue 39): recorded by the library — so by the command
//! line and the service too — with who, when, the parameters, the state before and after and
//! the outcome; read back with `Dispenser::history`, `dispenser history` and
//! `GET /v1/{sequences,queues}/{name}/history`.

use std::process::Command;
use std::time::Duration;

use dispenser::gapless::GaplessOptions;
use dispenser::history::{HistoryEntry, HistoryQuery, Outcome};
use dispenser::queue::QueueSpec;
use dispenser::sequence::Alter;
use dispenser::{Error, Spec};
use serde_json::{Value, json};

use crate::common::{self, DB, Fixture};
use crate::serve::{ADMIN, BOARD, KIOSK, ORDERS, Service, send};

fn ops(entries: &[HistoryEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.op.as_str()).collect()
}

/// Create, alter, advance-to, reset and delete through the library, acting as "alice": five
/// entries in order, each by alice, done, with its parameters and the state before and
/// after; a refusal the state shows (a reset backwards without force) and bad input write
/// nothing; `since`, `limit` and the cursor page through it. Before the history existed
/// nothing was recorded.
#[tokio::test]
async fn the_library_records_every_admin_operation_in_order_with_who_and_the_states() {
    let f = Fixture::new("history_lib").await;
    let d = f.dispenser(f.options().with_caller("alice"));
    d.create("orders", Spec::default().with_max(1000))
        .await
        .unwrap();
    let run = d.open("orders").await.unwrap().next_n(10).await.unwrap();
    assert_eq!(run.last(), 10);
    d.open("orders")
        .await
        .unwrap()
        .alter(Alter::default().with_max(5000))
        .await
        .unwrap();
    d.open("orders")
        .await
        .unwrap()
        .advance_to(100)
        .await
        .unwrap();
    d.open("orders")
        .await
        .unwrap()
        .reset(dispenser::sequence::Reset::to(50).force())
        .await
        .unwrap();
    // Refused by the state read first, and bad input: nothing written, history included.
    assert!(matches!(
        async {
            d.open("orders")
                .await?
                .reset(dispenser::sequence::Reset::to(10))
                .await
        }
        .await,
        Err(Error::WouldGoBackwards { .. })
    ));
    assert!(
        async {
            d.open("orders")
                .await?
                .alter(Alter::default().with_max(-5))
                .await
        }
        .await
        .is_err()
    );
    assert!(
        async {
            d.open("or\nders")
                .await?
                .reset(dispenser::sequence::Reset::to(1).force())
                .await
        }
        .await
        .is_err()
    );
    // Nothing to move: not recorded either.
    d.open("orders")
        .await
        .unwrap()
        .advance_to(20)
        .await
        .unwrap();
    d.delete("orders").await.unwrap();

    let all = d.history("orders", &HistoryQuery::default()).await.unwrap();
    assert_eq!(
        ops(&all),
        ["create", "alter", "advance-to", "reset", "delete"],
        "{all:#?}"
    );
    for e in &all {
        assert_eq!(e.who.as_deref(), Some("alice"), "{e:?}");
        assert_eq!(e.outcome, Outcome::Done, "{e:?}");
        assert!(!e.client_clock);
        assert!(e.ended_at.is_some_and(|t| t >= e.at), "{e:?}");
    }
    assert!(all.windows(2).all(|w| w[0].at <= w[1].at));
    let (create, alter, advance, reset, delete) = (&all[0], &all[1], &all[2], &all[3], &all[4]);
    assert_eq!(create.before, None);
    assert_eq!(create.params["max"], 1000);
    assert_eq!(create.after.as_ref().unwrap()["next"], 1);
    assert_eq!(alter.params, json!({ "max": 5000, "force": false }));
    assert_eq!(alter.before.as_ref().unwrap()["max"], 1000);
    assert_eq!(alter.after.as_ref().unwrap()["max"], 5000);
    assert_eq!(advance.params, json!({ "to": 100 }));
    assert_eq!(advance.before.as_ref().unwrap()["value"], 10);
    assert_eq!(advance.after.as_ref().unwrap()["next"], 101);
    assert_eq!(reset.params, json!({ "next": 50, "force": true }));
    assert_eq!(reset.after.as_ref().unwrap()["next"], 50);
    assert_eq!(delete.before.as_ref().unwrap()["next"], 50);
    assert_eq!(delete.after, None);

    // Paging: two at a time, by cursor; and from a time on.
    let first = d
        .history("orders", &HistoryQuery::default().with_limit(2))
        .await
        .unwrap();
    assert_eq!(ops(&first), ["create", "alter"]);
    let rest = d
        .history(
            "orders",
            &HistoryQuery::default().with_after(first[1].cursor()),
        )
        .await
        .unwrap();
    assert_eq!(ops(&rest), ["advance-to", "reset", "delete"]);
    let since = d
        .history("orders", &HistoryQuery::default().with_since(reset.at))
        .await
        .unwrap();
    assert_eq!(ops(&since).first(), Some(&"reset"));
    assert!(
        d.history("orders", &HistoryQuery::default().with_after("nonsense"))
            .await
            .is_err()
    );
    // Another name, and a queue of the same name, have their own (empty) histories.
    assert!(
        d.history("order", &HistoryQuery::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        d.history("orders", &HistoryQuery::queue())
            .await
            .unwrap()
            .is_empty()
    );
    // A dispenser with no caller records none.
    let nobody = f.dispenser(f.options());
    nobody.create("anon", Spec::default()).await.unwrap();
    let anon = nobody
        .history("anon", &HistoryQuery::default())
        .await
        .unwrap();
    assert_eq!((anon.len(), anon[0].who.as_deref()), (1, None));
}

/// A striped sequence's history holds its creation and each stripe's reset; a gap-free
/// sequence's its creation, a void and a change of its longest lease.
#[tokio::test]
async fn stripes_and_gap_free_sequences_are_recorded() {
    let f = Fixture::new("history_stripes").await;
    let d = f.dispenser(f.options().with_caller("bob"));
    let ids = d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    // Opened again: nothing recorded.
    d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    ids.reset(dispenser::sequence::Reset::to(1000))
        .await
        .unwrap();
    let h = d.history("ids", &HistoryQuery::default()).await.unwrap();
    assert_eq!(ops(&h), ["create", "reset", "reset"], "{h:#?}");
    assert_eq!(h[0].params["stripes"], 2);
    let mut names: Vec<&str> = h[1..].iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["ids~0", "ids~1"]);

    let business = common::unique("history_invoices");
    let inv = d
        .ensure_gapless("inv", GaplessOptions::new(business.as_str(), "number"))
        .await
        .unwrap();
    d.ensure_gapless("inv", GaplessOptions::new(business.as_str(), "number"))
        .await
        .unwrap();
    inv.void(1, "printer jam").await.unwrap();
    // Not the next number: refused from the state read first, not recorded.
    assert!(inv.void(7, "wrong").await.is_err());
    inv.set_max_lease(Duration::from_secs(30)).await.unwrap();
    let h = d.history("inv", &HistoryQuery::default()).await.unwrap();
    assert_eq!(ops(&h), ["create", "void", "max-lease"], "{h:#?}");
    assert_eq!(h[1].params, json!({ "number": 1, "reason": "printer jam" }));
    assert_eq!(h[1].before.as_ref().unwrap()["next"], 1);
    assert_eq!(h[1].after.as_ref().unwrap()["next"], 2);
    assert_eq!(h[2].after.as_ref().unwrap()["max_lease_ms"], 30_000);
}

/// A queue's creation, a cancel, a cancel the queue refuses (recorded `refused`: the
/// refusal came from the write's own read), an alter and its deletion, in order, as "desk-2"
/// through `Queue::with_caller`.
#[tokio::test]
async fn queue_operations_are_recorded_refusals_included() {
    let f = Fixture::new("history_queue").await;
    let d = f.dispenser(f.options().with_caller("manager"));
    let q = d
        .create_queue("lobby", QueueSpec::default().with_max(99))
        .await
        .unwrap();
    // Opened again: nothing recorded.
    d.ensure_queue("lobby", QueueSpec::default().with_max(99))
        .await
        .unwrap();
    q.take().count(3).await.unwrap();
    let desk = q.with_caller("desk-2").unwrap();
    desk.cancel(2).await.unwrap();
    assert!(matches!(
        desk.cancel(2).await,
        Err(Error::TicketNotWaiting { .. })
    ));
    q.alter(dispenser::queue::QueueAlter::default().with_max(199))
        .await
        .unwrap();
    // Two tickets still wait: only a forced delete deletes it (issue 49, item 2).
    d.delete_queue("lobby").force().await.unwrap();
    let h = d.history("lobby", &HistoryQuery::queue()).await.unwrap();
    assert_eq!(
        ops(&h),
        ["create", "cancel", "cancel", "alter", "delete"],
        "{h:#?}"
    );
    let who: Vec<_> = h.iter().map(|e| e.who.as_deref().unwrap()).collect();
    assert_eq!(who, ["manager", "desk-2", "desk-2", "manager", "manager"]);
    assert_eq!(h[1].outcome, Outcome::Done);
    assert_eq!(h[1].before.as_ref().unwrap()["waiting"], 3);
    assert_eq!(h[1].after.as_ref().unwrap()["waiting"], 2);
    assert!(
        matches!(&h[2].outcome, Outcome::Refused(r) if r.contains('2')),
        "{:?}",
        h[2].outcome
    );
    assert_eq!(h[2].after, None);
    assert_eq!(h[3].after.as_ref().unwrap()["max"], 199);
    assert_eq!(h[4].after, None);
}

fn cli(collection: &str, caller: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
    c.env("MONGODB_URI", common::uri())
        .env_remove("DISPENSER_CALLER")
        .env("USER", "tester")
        .args(["--db", DB, "--collection", collection]);
    if let Some(who) = caller {
        c.args(["--caller", who]);
    }
    c.args(args).output().unwrap()
}

/// `dispenser history` lists create, alter, advance-to and reset made through the command
/// line, in order, by `--caller` (or `USER@HOST` without it), as lines and as JSON; a
/// `--since` after them lists none.
#[tokio::test]
async fn the_command_line_records_as_its_caller_and_lists_the_history() {
    common::ready();
    let coll = common::unique("history_cli");
    for (who, args) in [
        (Some("ops-team"), &["create", "s", "--max", "1000"][..]),
        (Some("ops-team"), &["alter", "s", "--max", "500"]),
        (None, &["advance-to", "s", "100"]),
        (Some("ops-team"), &["reset", "s", "--next", "5", "--force"]),
    ] {
        let out = cli(&coll, who, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = cli(&coll, None, &["history", "s"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for (line, op) in lines.iter().zip(["create", "alter", "advance-to", "reset"]) {
        assert!(line.contains(&format!(" s {op} by ")), "{line}");
        assert!(line.contains(": done"), "{line}");
    }
    assert!(lines[0].contains("by ops-team"), "{}", lines[0]);
    assert!(lines[2].contains("by tester@"), "{}", lines[2]);
    assert!(lines[3].contains("next 101 -> 5"), "{}", lines[3]);

    let out = cli(&coll, None, &["history", "s", "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ops: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["create", "alter", "advance-to", "reset"]);
    assert_eq!(json[1]["who"], "ops-team");
    assert_eq!(json[1]["params"], json!({ "max": 500, "force": false }));

    let out = cli(&coll, None, &["history", "s", "--since", "2999-01-01"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no history of sequence"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(&coll, None, &["history", "s", "--since", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    let out = cli(&coll, Some("bad\u{7}name"), &["history", "s"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("caller"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Through the service, each admin operation is recorded as the token's name: the history
/// endpoints list create, alter, advance and reset of a sequence, and create, take-free
/// cancel and alter of a queue, in order, by "admin"; a token with `peek` on the name reads
/// them, one without gets 403; `limit` and the `next` cursor page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_records_the_tokens_name_and_serves_the_history_to_peek() {
    let svc = Service::start("history_serve");
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, token: &str, body: Option<Value>| {
        let mut req = http.request(method, svc.url(path)).bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        send(req)
    };
    use reqwest::Method;
    for (path, body) in [
        ("/v1/sequences", json!({ "name": "orders" })),
        ("/v1/sequences/orders/alter", json!({ "max": 9000 })),
        ("/v1/sequences/orders/advance-to", json!({ "to": 100 })),
        (
            "/v1/sequences/orders/reset",
            json!({ "next": 50, "force": true }),
        ),
    ] {
        let (status, answer) = call(Method::POST, path, ADMIN, Some(body)).await;
        assert!(status == 200 || status == 201, "{path}: {answer}");
    }
    // `orders` has peek on the sequence; the kiosk does not.
    let (status, body) = call(Method::GET, "/v1/sequences/orders/history", ORDERS, None).await;
    assert_eq!(status, 200, "{body}");
    let ops: Vec<&str> = body["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["create", "alter", "advance-to", "reset"], "{body}");
    assert!(
        body["history"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["who"] == "admin" && e["outcome"] == "done"),
        "{body}"
    );
    assert_eq!(body["next"], Value::Null);
    let (status, body) = call(Method::GET, "/v1/sequences/orders/history", KIOSK, None).await;
    assert_eq!((status, &body["error"]["kind"]), (403, &json!("forbidden")));
    let (status, page) = call(
        Method::GET,
        "/v1/sequences/orders/history?limit=3",
        ADMIN,
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["history"].as_array().unwrap().len(), 3);
    let next = page["next"].as_str().unwrap().to_owned();
    let (status, rest) = call(
        Method::GET,
        &format!("/v1/sequences/orders/history?after={next}"),
        ADMIN,
        None,
    )
    .await;
    assert_eq!(status, 200, "{rest}");
    assert_eq!(rest["history"][0]["op"], "reset");
    let (status, _) = call(
        Method::GET,
        "/v1/sequences/orders/history?since=yesterday",
        ADMIN,
        None,
    )
    .await;
    assert_eq!(status, 422);

    for (path, body) in [
        ("/v1/queues", json!({ "name": "lobby" })),
        ("/v1/queues/lobby/take", json!({ "count": 2 })),
        ("/v1/queues/lobby/cancel", json!({ "ticket": 1 })),
        ("/v1/queues/lobby/alter", json!({ "max": 199 })),
    ] {
        let (status, answer) = call(Method::POST, path, ADMIN, Some(body)).await;
        assert!(status == 200 || status == 201, "{path}: {answer}");
    }
    let (status, body) = call(Method::GET, "/v1/queues/lobby/history", BOARD, None).await;
    assert_eq!(status, 200, "{body}");
    let entries = body["history"].as_array().unwrap();
    let ops: Vec<&str> = entries.iter().map(|e| e["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["create", "cancel", "alter"], "{body}");
    assert!(entries.iter().all(|e| e["who"] == "admin"), "{body}");
    let (status, _) = call(Method::GET, "/v1/queues/lobby/history", KIOSK, None).await;
    assert_eq!(status, 403);
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}
