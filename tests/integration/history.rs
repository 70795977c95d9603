//! The history of admin operations (issue 39): recorded by the library — so by the command
//! line and the service too — with who, when, the parameters, the state before and after and
//! the outcome; read back with `Dispenser::history`, `dispenser history` and
//! `GET /v1/{sequences,queues}/{name}/history`.

use std::process::Command;
use std::time::Duration;

use dispenser::gapless::{GaplessAlter, GaplessOptions};
use dispenser::history::{HistoryEntry, Outcome, Subject};
use dispenser::queue::QueueSpec;
use dispenser::sequence::Alter;
use dispenser::{Error, Spec};
use serde_json::{Value, json};

use crate::common::{self, DB, Fixture};
use crate::serve::{ADMIN, BOARD, KIOSK, ORDERS, Service, send};

fn ops(entries: &[HistoryEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.op.as_str()).collect()
}

/// Create, alter, advance-to, reset and delete through the library, acting as "alice": the
/// entries in order, each by alice, with its parameters and the state before and after; a
/// refusal the state shows (a reset backwards without force) is recorded `refused` with its
/// reason (regression, issue 49 item 7: it left no record, although `Outcome::Refused`
/// names it), bad input writes nothing; `since`, `limit` and the cursor page through it.
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
        .reset(50)
        .force(true)
        .await
        .unwrap();
    // Refused by the state read first: recorded, refused. Bad input: nothing written.
    assert!(matches!(
        async { d.open("orders").await?.reset(10).await }.await,
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
        async { d.open("or\nders").await?.reset(1).force(true).await }
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

    let mut all = d
        .history(dispenser::error::Kind::Sequence, "orders")
        .await
        .unwrap();
    assert_eq!(
        ops(&all),
        ["create", "alter", "advance-to", "reset", "reset", "delete"],
        "{all:#?}"
    );
    let refused = all.remove(4);
    assert!(
        matches!(&refused.outcome, Outcome::Refused(r) if r.contains("backwards") || r.contains("force")),
        "{refused:#?}"
    );
    assert_eq!(refused.params, json!({ "next": 10, "force": false }));
    assert_eq!(refused.before.as_ref().unwrap()["next"], 50);
    assert_eq!(
        (refused.after.as_ref(), refused.who.as_deref()),
        (None, Some("alice"))
    );
    for e in &all {
        assert_eq!(e.who.as_deref(), Some("alice"), "{e:?}");
        assert_eq!(e.outcome, Outcome::Done, "{e:?}");
        assert_eq!((e.subject, e.name.as_str()), (Subject::Sequence, "orders"));
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
        .history(dispenser::error::Kind::Sequence, "orders")
        .limit(2)
        .await
        .unwrap();
    assert_eq!(ops(&first), ["create", "alter"]);
    let rest = d
        .history(dispenser::error::Kind::Sequence, "orders")
        .after(first[1].cursor())
        .await
        .unwrap();
    assert_eq!(ops(&rest), ["advance-to", "reset", "reset", "delete"]);
    let since = d
        .history(dispenser::error::Kind::Sequence, "orders")
        .since(reset.at)
        .await
        .unwrap();
    assert_eq!(ops(&since).first(), Some(&"reset"));
    assert!(
        d.history(dispenser::error::Kind::Sequence, "orders")
            .after("nonsense")
            .await
            .is_err()
    );
    // Another name, and a queue of the same name, have their own (empty) histories.
    assert!(
        d.history(dispenser::error::Kind::Sequence, "order")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        d.history(dispenser::error::Kind::Queue, "orders")
            .await
            .unwrap()
            .is_empty()
    );
    // A dispenser with no caller records none.
    let nobody = f.dispenser(f.options());
    nobody.create("anon", Spec::default()).await.unwrap();
    let anon = nobody
        .history(dispenser::error::Kind::Sequence, "anon")
        .await
        .unwrap();
    assert_eq!((anon.len(), anon[0].who.as_deref()), (1, None));
}

/// A striped sequence's history holds its creation and each stripe's reset (each entry a
/// stripe, by index); a stripe's holds its own; a gap-free sequence's its creation, a void
/// and a change of its longest lease, read as a gap-free sequence's.
#[tokio::test]
async fn stripes_and_gap_free_sequences_are_recorded() {
    let f = Fixture::new("history_stripes").await;
    let d = f.dispenser(f.options().with_caller("bob"));
    let ids = d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    // Opened again: nothing recorded.
    d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    ids.reset(1000).await.unwrap();
    let h = d
        .history(dispenser::error::Kind::Sequence, "ids")
        .await
        .unwrap();
    assert_eq!(ops(&h), ["create", "reset", "reset"], "{h:#?}");
    assert_eq!(h[0].params["stripes"], 2);
    let mut names: Vec<(&str, Subject, Option<u32>)> = h[1..]
        .iter()
        .map(|e| (e.name.as_str(), e.subject, e.stripe))
        .collect();
    names.sort_unstable_by_key(|n| n.0);
    assert_eq!(
        names,
        [
            ("ids~0", Subject::Stripe, Some(0)),
            ("ids~1", Subject::Stripe, Some(1))
        ]
    );
    assert_eq!(h[1].striped_sequence(), Some("ids"));
    let one = d
        .history(dispenser::error::Kind::Sequence, "ids~1")
        .await
        .unwrap();
    assert_eq!(
        one.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["ids~1"]
    );

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
    inv.alter(GaplessAlter::default().with_max_lease(Duration::from_secs(30)))
        .await
        .unwrap();
    let h = d
        .history(dispenser::error::Kind::Gapless, "inv")
        .await
        .unwrap();
    assert_eq!(ops(&h), ["create", "void", "alter"], "{h:#?}");
    // The alter is recorded with the state before and after, as a sequence's is.
    // In seconds, as every surface gives a gap-free lease.
    let max_lease =
        |s: &Option<serde_json::Value>| s.as_ref().map(|s| s["max_lease_seconds"].clone());
    assert_eq!(
        (max_lease(&h[2].before), max_lease(&h[2].after)),
        (Some(json!(300.0)), Some(json!(30.0))),
        "{h:#?}"
    );
    assert_eq!(h[2].params["max_lease_seconds"], 30.0, "{h:#?}");
    assert!(h.iter().all(|e| e.subject == Subject::Gapless), "{h:#?}");
    // A gap-free sequence is not a sequence of the same name.
    assert!(
        d.history(dispenser::error::Kind::Sequence, "inv")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(h[1].params, json!({ "number": 1, "reason": "printer jam" }));
    assert_eq!(h[1].before.as_ref().unwrap()["next"], 1);
    assert_eq!(h[1].after.as_ref().unwrap()["next"], 2);
    assert_eq!(h[2].after.as_ref().unwrap()["max_lease_seconds"], 30.0);
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
    desk.cancel().serial(2).await.unwrap();
    assert!(matches!(
        desk.cancel().serial(2).await,
        Err(Error::TicketNotWaiting { .. })
    ));
    q.alter(dispenser::queue::QueueAlter::default().with_max(199))
        .await
        .unwrap();
    // Two tickets still wait: only a forced delete deletes it (issue 49, item 2).
    d.delete_queue("lobby").force(true).await.unwrap();
    let h = d
        .history(dispenser::error::Kind::Queue, "lobby")
        .await
        .unwrap();
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

/// Every handle reads its own history (`history()`: a builder with `.since`, `.after` and
/// `.limit`) as `Dispenser::history(kind, name)` reads it; a deleted queue's is still read
/// by kind and name; the command line prints a queue's and a gap-free sequence's with
/// `queue history NAME` and `gapless history NAME` (issue 50).
#[tokio::test]
async fn every_handle_reads_its_own_history_and_the_dispenser_reads_one_by_kind() {
    let f = Fixture::new("history_handles").await;
    let d = f.dispenser(f.options().with_caller("carol"));
    let orders = d.create("orders", Spec::default()).await.unwrap();
    orders.advance_to(10).await.unwrap();
    orders.reset(1).force(true).await.unwrap();
    let ids = d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    ids.reset(100).await.unwrap();
    let q = d.create_queue("lobby", QueueSpec::default()).await.unwrap();
    q.take().await.unwrap();
    q.cancel().serial(1).await.unwrap();
    let business = common::unique("history_handles_inv");
    let g = d
        .create_gapless("inv", GaplessOptions::new(business.as_str(), "number"))
        .await
        .unwrap();
    g.void(1, "torn").await.unwrap();

    let own = orders.history().await.unwrap();
    assert_eq!(ops(&own), ["create", "advance-to", "reset"], "{own:#?}");
    assert_eq!(
        own,
        d.history(dispenser::error::Kind::Sequence, "orders")
            .await
            .unwrap()
    );
    let striped = ids.history().await.unwrap();
    assert_eq!(ops(&striped), ["create", "reset", "reset"], "{striped:#?}");
    let queue = q.history().await.unwrap();
    assert_eq!(ops(&queue), ["create", "cancel"], "{queue:#?}");
    let gapless = g.history().await.unwrap();
    assert_eq!(ops(&gapless), ["create", "void"], "{gapless:#?}");
    assert_eq!(
        gapless,
        d.history(dispenser::error::Kind::Gapless, "inv")
            .await
            .unwrap()
    );
    // The options: a page, the next page, from a time on.
    let first = orders.history().limit(1).await.unwrap();
    assert_eq!(ops(&first), ["create"]);
    let rest = orders.history().after(first[0].cursor()).await.unwrap();
    assert_eq!(ops(&rest), ["advance-to", "reset"]);
    let since = orders.history().since(own[2].at).await.unwrap();
    assert_eq!(ops(&since), ["reset"]);
    let e = orders.history().limit(0).await.unwrap_err();
    assert_eq!(e.kind(), dispenser::error::ErrorKind::InvalidInput, "{e}");

    // Deleted: no handle opens it, the dispenser reads its history by kind and name.
    d.delete_queue("lobby").force(true).await.unwrap();
    let gone = d
        .history(dispenser::error::Kind::Queue, "lobby")
        .await
        .unwrap();
    assert_eq!(ops(&gone), ["create", "cancel", "delete"], "{gone:#?}");

    let out = cli(&f.collection, None, &["queue", "history", "lobby"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[2].contains("lobby delete by carol: done"), "{text}");
    let out = cli(
        &f.collection,
        None,
        &["gapless", "history", "inv", "--json"],
    );
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ops: Vec<_> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["op"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(ops, [("create", "gapless"), ("void", "gapless")]);
    // The flags that chose the kind are gone.
    let out = cli(&f.collection, None, &["history", "lobby", "--queue"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
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
    assert_eq!((status, &body["error"]["code"]), (403, &json!("forbidden")));
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

fn names(entries: &[HistoryEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.name.as_str()).collect()
}

/// Regression (issue 49 item 1, security): the history of `NAME` also returned every record
/// whose name starts with `NAME~` — meant for stripes — so `history("pub")` held the creation
/// and the voids of a gap-free `pub~hidden` (its business collection, a confidential reason),
/// `history("pub@a")` a forced reset of scope `pub@a~secret`, and `history("ids")` the
/// creation of a gap-free `ids~1`. Each read now returns exactly its subjects: a sequence
/// with its stripes, one stripe, one scope, a gap-free sequence, a queue.
#[tokio::test]
async fn a_read_returns_exactly_its_subjects_never_names_that_start_with_it() {
    let f = Fixture::new("history_exact").await;
    let d = f.dispenser(f.options().with_caller("carol"));
    let business = common::unique("history_exact_inv");
    d.create("pub", Spec::default()).await.unwrap();
    let hidden = d
        .create_gapless("pub~hidden", GaplessOptions::new(business.as_str(), "n"))
        .await
        .unwrap();
    hidden
        .void(1, "confidential: a layoff bonus")
        .await
        .unwrap();
    d.ensure_scope("pub", "a").await.unwrap();
    let secret = d.ensure_scope("pub", "a~secret").await.unwrap();
    secret.next().await.unwrap();
    secret.reset(1).force(true).await.unwrap();
    let ids = d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    ids.reset(100).await.unwrap();
    d.create_gapless("ids~1", GaplessOptions::new(business.as_str(), "m"))
        .await
        .unwrap();
    d.create_queue("pub~q", QueueSpec::default()).await.unwrap();
    let read = |name: &'static str, q: dispenser::error::Kind| {
        let d = d.clone();
        async move { d.history(q, name).await.unwrap() }
    };

    let h = read("pub", dispenser::error::Kind::Sequence).await;
    assert_eq!(
        (ops(&h), names(&h)),
        (vec!["create"], vec!["pub"]),
        "{h:#?}"
    );
    let h = read("pub@a", dispenser::error::Kind::Sequence).await;
    assert_eq!(
        (ops(&h), names(&h)),
        (vec!["create"], vec!["pub@a"]),
        "{h:#?}"
    );
    assert_eq!(
        (h[0].subject, h[0].template.as_deref(), h[0].key.as_deref()),
        (Subject::Scope, Some("pub"), Some("a"))
    );
    let h = read("pub@a~secret", dispenser::error::Kind::Sequence).await;
    assert_eq!(ops(&h), ["create", "reset"], "{h:#?}");
    assert_eq!(h[1].key.as_deref(), Some("a~secret"));
    let h = read("ids", dispenser::error::Kind::Sequence).await;
    assert_eq!(ops(&h), ["create", "reset", "reset"], "{h:#?}");
    assert!(
        h[1..].iter().all(|e| e.subject == Subject::Stripe),
        "{h:#?}"
    );
    let h = read("ids~1", dispenser::error::Kind::Sequence).await;
    assert_eq!(
        (ops(&h), names(&h)),
        (vec!["reset"], vec!["ids~1"]),
        "{h:#?}"
    );
    let h = read("pub~hidden", dispenser::error::Kind::Sequence).await;
    assert!(h.is_empty(), "a sequence's read of a gap-free name: {h:#?}");
    let h = read("pub~hidden", dispenser::error::Kind::Gapless).await;
    assert_eq!(ops(&h), ["create", "void"], "{h:#?}");
    assert_eq!(h[1].params["reason"], "confidential: a layoff bonus");
    let h = read("ids~1", dispenser::error::Kind::Gapless).await;
    assert_eq!((ops(&h), h[0].subject), (vec!["create"], Subject::Gapless));
    let h = read("pub~q", dispenser::error::Kind::Queue).await;
    assert_eq!(ops(&h), ["create"], "{h:#?}");
    assert!(read("pub", dispenser::error::Kind::Queue).await.is_empty());
    assert!(
        read("pub", dispenser::error::Kind::Gapless)
            .await
            .is_empty()
    );
}

/// Regression (issue 49 item 1, security), through the service: a token allowed only `pub`
/// and `pub@a` (peek) got 403 on the gap-free `pub~hidden` and on the scope
/// `pub@a~secret`, yet read the gap-free creation (its business collection), a void with its
/// confidential reason and the admin's forced reset with its states through
/// `GET /v1/sequences/pub/history` and `…/pub@a/history`. Now those answers hold only `pub`'s
/// and `pub@a`'s records; the gap-free sequence's history is `GET /v1/gapless/{name}/history`,
/// for a token with `history` on it (the right was `peek` until issue 60).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_reads_the_history_of_exactly_the_names_it_may_peek() {
    const PUB: &str = "pub-only-token-for-history-tests";
    let svc = Service::start_tokens(
        "history_leak",
        &common::uri(),
        &json!({ "tokens": [
            { "name": "admin", "token": ADMIN, "sequences": ["*"],
              "operations": ["next", "create", "peek", "reset", "void", "delete", "list", "history"] },
            { "name": "pub-reader", "token": PUB, "sequences": ["pub", "pub@a"], "operations": ["history"] },
        ] }),
        &[],
    );
    let http = reqwest::Client::new();
    let post =
        |path: &str, body: Value| send(http.post(svc.url(path)).bearer_auth(ADMIN).json(&body));
    let (status, body) = post("/v1/sequences", json!({ "name": "pub" })).await;
    assert_eq!(status, 201, "{body}");
    let d = dispenser::Dispenser::new(
        &common::client().await,
        dispenser::Options::default()
            .with_database(DB)
            .with_collection(svc.collection.as_str())
            .with_caller("admin-cli"),
    )
    .unwrap();
    let business = format!("{}_inv", svc.collection);
    d.create_gapless(
        "pub~hidden",
        GaplessOptions::new(business.as_str(), "number"),
    )
    .await
    .unwrap();
    let (status, body) = post(
        "/v1/gapless/pub~hidden/void",
        json!({ "number": 1, "reason": "confidential-reason-7731" }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for path in [
        "/v1/sequences/pub@a/next",
        "/v1/sequences/pub@a~secret/next",
        "/v1/sequences/pub@a~secret/next",
    ] {
        let (status, body) = post(path, json!({})).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, body) = post(
        "/v1/sequences/pub@a~secret/reset",
        json!({ "next": 1, "force": true }),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let get = |path: String, token: &'static str| send(http.get(svc.url(&path)).bearer_auth(token));
    for (path, own) in [
        ("/v1/sequences/pub/history", "pub"),
        ("/v1/sequences/pub@a/history", "pub@a"),
        ("/v1/sequences/pub%40a/history", "pub@a"),
    ] {
        let (status, body) = get(path.to_owned(), PUB).await;
        assert_eq!(status, 200, "{path}: {body}");
        let text = body.to_string();
        for secret in ["hidden", "confidential", "secret", &business] {
            assert!(!text.contains(secret), "{path} shows {secret:?}: {text}");
        }
        let entries = body["history"].as_array().unwrap();
        assert!(!entries.is_empty(), "{path}: {body}");
        assert!(entries.iter().all(|e| e["name"] == own), "{path}: {body}");
    }
    for path in [
        "/v1/gapless/pub~hidden/history",
        "/v1/sequences/pub~hidden/history",
        "/v1/sequences/pub@a~secret/history",
    ] {
        let (status, body) = get(path.to_owned(), PUB).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    let (status, body) = get("/v1/gapless/pub~hidden/history".to_owned(), ADMIN).await;
    assert_eq!(status, 200, "{body}");
    let entries = body["history"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["op"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [("gapless", "create"), ("gapless", "void")],
        "{body}"
    );
    assert_eq!(entries[1]["who"], "admin");
    let (status, body) = get("/v1/sequences/pub@a~secret/history".to_owned(), ADMIN).await;
    assert_eq!(status, 200, "{body}");
    let ops: Vec<&str> = body["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["create", "reset"], "{body}");
    assert_eq!(body["history"][0]["kind"], "scope");
    assert_eq!(body["history"][0]["key"], "a~secret");
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// Regression (issue 49 item 7): a reset backwards without force answered 409 (exit 6) and
/// left no record, though `Outcome::Refused` names it; a scope made by its first draw had no
/// `create` record, and a scope deleted by `delete --scopes-before` no record at all. Now:
/// the refusal is recorded through the command line and the service, each scope's creation
/// (by the library, a daily sequence, `next --scope`, a service draw of `T@KEY`) and each
/// scope's deletion has its record, beside the template's `delete-scopes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_scope_creations_and_scope_deletions_are_recorded() {
    common::ready();
    let coll = common::unique("history_promise");
    for args in [
        &["create", "s"][..],
        &["next", "s", "--count", "5"],
        &["create", "t", "--max", "1000000"],
        &["next", "t", "--scope", "2001-01-01"],
        &["next", "t", "--scope", "ann@example.com"],
    ] {
        let out = cli(&coll, Some("ops"), args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = cli(&coll, Some("ops"), &["reset", "s", "--next", "2"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    let d = dispenser::Dispenser::new(
        &common::client().await,
        dispenser::Options::default()
            .with_database(DB)
            .with_collection(coll.as_str()),
    )
    .unwrap();
    let h = d
        .history(dispenser::error::Kind::Sequence, "s")
        .await
        .unwrap();
    assert_eq!(ops(&h), ["create", "reset"], "{h:#?}");
    assert!(
        matches!(&h[1].outcome, Outcome::Refused(r) if r.contains("backwards")),
        "{h:#?}"
    );
    assert_eq!(h[1].who.as_deref(), Some("ops"));
    assert_eq!(h[1].before.as_ref().unwrap()["value"], 5);
    // A daily sequence's first draw of a day makes its scope: recorded.
    let daily = d
        .with_caller("kiosk")
        .unwrap()
        .open_daily("t", jiff::tz::TimeZone::UTC)
        .unwrap()
        .with_clock(std::sync::Arc::new(|| {
            "2002-02-02T12:00:00Z".parse().unwrap()
        }));
    daily.next().await.unwrap();
    daily.next().await.unwrap();
    for (scope, who) in [
        ("t@2001-01-01", "ops"),
        ("t@ann@example.com", "ops"),
        ("t@2002-02-02", "kiosk"),
    ] {
        let h = d
            .history(dispenser::error::Kind::Sequence, scope)
            .await
            .unwrap();
        assert_eq!(ops(&h), ["create"], "{scope}: {h:#?}");
        assert_eq!(
            (h[0].subject, h[0].who.as_deref(), h[0].outcome.as_str()),
            (Subject::Scope, Some(who), "done"),
            "{h:#?}"
        );
        assert_eq!(h[0].after.as_ref().unwrap()["next"], 1, "{h:#?}");
    }
    // Opening an existing scope again records nothing.
    d.ensure_scope("t", "2001-01-01").await.unwrap();
    let h = d
        .history(dispenser::error::Kind::Sequence, "t@2001-01-01")
        .await
        .unwrap();
    assert_eq!(h.len(), 1, "{h:#?}");

    let out = cli(
        &coll,
        Some("ops"),
        &["delete", "t", "--scopes-before", "2002-01-01"],
    );
    assert!(out.status.success(), "{out:?}");
    let h = d
        .history(dispenser::error::Kind::Sequence, "t")
        .await
        .unwrap();
    assert_eq!(ops(&h), ["create", "delete-scopes"], "{h:#?}");
    assert_eq!(h[1].params["scopes"], 1);
    assert_eq!(h[1].after.as_ref().unwrap()["deleted"], 1);
    let h = d
        .history(dispenser::error::Kind::Sequence, "t@2001-01-01")
        .await
        .unwrap();
    assert_eq!(ops(&h), ["create", "delete"], "{h:#?}");
    assert_eq!(
        (h[1].outcome.as_str(), h[1].who.as_deref()),
        ("done", Some("ops"))
    );
    assert_eq!(h[1].params, json!({ "scopes_before": "2002-01-01" }));
    assert_eq!(h[1].before.as_ref().unwrap()["value"], 1);
    // The scopes not deleted have no delete record.
    for kept in ["t@2002-02-02", "t@ann@example.com"] {
        let h = d
            .history(dispenser::error::Kind::Sequence, kept)
            .await
            .unwrap();
        assert_eq!(ops(&h), ["create"], "{kept}: {h:#?}");
    }

    // Through the service: a draw of `T@KEY` makes the scope (recorded as the token), a reset
    // backwards answers 409 and is recorded.
    let svc = Service::start("history_promise_serve");
    let http = reqwest::Client::new();
    let post =
        |path: &str, body: Value| send(http.post(svc.url(path)).bearer_auth(ADMIN).json(&body));
    let (status, body) = post("/v1/sequences", json!({ "name": "orders" })).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = post("/v1/sequences/orders@acme/next", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = post("/v1/sequences/orders@acme/next", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = post("/v1/sequences/orders@acme/reset", json!({ "next": 1 })).await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = send(
        http.get(svc.url("/v1/sequences/orders@acme/history"))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let got: Vec<(&str, &str, &str)> = body["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["op"].as_str().unwrap(),
                e["outcome"].as_str().unwrap(),
                e["who"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [("create", "done", "admin"), ("reset", "refused", "admin")],
        "{body}"
    );
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// Issue 49 item 8: the history collection gets the indexes its reads filter and sort on with
/// the first record (before, none: every read scanned the collection, and `history NAME`
/// timed out among 240 000 records); the command line prints a long history page by page —
/// every entry once, in order, as lines or as one JSON array — and `--since` takes `-7d` as a
/// time ago (it was taken for a flag) and says a span too long for a time is out of range
/// (it said "is not a time").
#[tokio::test]
async fn the_history_is_indexed_and_the_command_line_pages_through_a_long_one() {
    common::ready();
    let coll = common::unique("history_long");
    let out = cli(&coll, Some("ops"), &["create", "s"]);
    assert!(out.status.success(), "{out:?}");
    let client = common::client().await;
    let history = client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&format!("{coll}_history"));
    let indexes = history.list_index_names().await.unwrap();
    for index in ["reads", "outcomes"] {
        assert!(indexes.iter().any(|i| i == index), "{indexes:?}");
    }
    // 1 204 more entries of `s` (copies of its creation, a second apart), and as many of
    // another name beside them.
    use dispenser::mongodb::bson::{doc, oid::ObjectId};
    let intent = history
        .find_one(doc! { "phase": "intent", "name": "s" })
        .await
        .unwrap()
        .unwrap();
    let outcome = history
        .find_one(doc! { "phase": "outcome" })
        .await
        .unwrap()
        .unwrap();
    let at = intent.get_datetime("at").unwrap().timestamp_millis();
    let mut docs = Vec::new();
    for i in 1..=1204_i64 {
        for name in ["s", "s2"] {
            let id = ObjectId::new();
            let mut d = intent.clone();
            d.insert("_id", id);
            d.insert("name", name);
            d.insert("op", format!("op-{i:04}"));
            d.insert(
                "at",
                dispenser::mongodb::bson::DateTime::from_millis(at + i * 1000),
            );
            let mut o = outcome.clone();
            o.insert("_id", ObjectId::new());
            o.insert("of", id);
            o.insert("name", name);
            docs.push(d);
            docs.push(o);
        }
    }
    history.insert_many(docs).await.unwrap();
    let out = cli(&coll, None, &["history", "s"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1205, "{}", &text[..300.min(text.len())]);
    assert!(lines[0].contains(" s create by "), "{}", lines[0]);
    for (i, line) in lines[1..].iter().enumerate() {
        assert!(line.contains(&format!(" s op-{:04} by ", i + 1)), "{line}");
    }
    let out = cli(&coll, None, &["history", "s", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 1205);
    assert!(
        all.iter()
            .all(|e| e["name"] == "s" && e["outcome"] == "done")
    );
    let out = cli(&coll, None, &["history", "s", "--json", "--limit", "1001"]);
    let some: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(some.as_array().unwrap().len(), 1001);
    assert_eq!(some[1000]["op"], "op-1000");
    let out = cli(&coll, None, &["history", "s", "--json", "--since", "-7d"]);
    assert!(out.status.success(), "{out:?}");
    let recent: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(recent.as_array().unwrap().len(), 1205);
    let out = cli(&coll, None, &["history", "s", "--since", "1000000y"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("out of range") && !err.contains("not a time"),
        "{err}"
    );
}

/// Issue 49 item 2: what `~` and `@` mean in each kind's names (the glossary's table), on
/// every surface. A name a user creates for a sequence, a template or a striped sequence has
/// neither (`@` makes a scope, `~` a stripe) — refused by the library, the command line and
/// the service, naming the rule and what to do; a scope key may hold both (an e-mail
/// address); a gap-free sequence's and a queue's names may hold both, since they share no
/// document and no history with a stripe or a scope of the same name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_keep_to_their_kind_on_every_surface() {
    let f = Fixture::new("history_names").await;
    let d = f.dispenser(f.options());
    for bad in ["ids~1", "t@k", "a~b", "x@"] {
        for made in [
            d.create(bad, Spec::default()).await.map(drop),
            d.ensure(bad, Spec::default()).await.map(drop),
            d.ensure_striped(bad, 2, Spec::default()).await.map(drop),
            d.ensure_scope(bad, "k").await.map(drop),
        ] {
            let e = made.unwrap_err();
            assert!(matches!(e, Error::InvalidName { .. }), "{bad}: {e}");
            let text = e.to_string();
            assert!(
                text.contains("must not contain")
                    && (text.contains("use ") || text.contains("draw ")),
                "{bad}: {text}"
            );
        }
    }
    d.create("t", Spec::default()).await.unwrap();
    for key in ["ann@example.com", "a~1", "*?[/%é"] {
        let s = d.ensure_scope("t", key).await.unwrap();
        assert_eq!(s.next().await.unwrap(), 1, "{key}");
        let h = d
            .history(dispenser::error::Kind::Sequence, &format!("t@{key}"))
            .await
            .unwrap();
        assert_eq!(
            (h.len(), h[0].subject, h[0].key.as_deref()),
            (1, Subject::Scope, Some(key))
        );
    }
    let ids = d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    let business = common::unique("history_names_inv");
    let g = d
        .create_gapless("ids~1", GaplessOptions::new(business.as_str(), "n"))
        .await
        .unwrap();
    d.create_queue("ids~0", QueueSpec::default()).await.unwrap();
    d.create_queue("t@k", QueueSpec::default()).await.unwrap();
    // Each its own: drawing from stripe 1 and issuing from the gap-free `ids~1` move apart.
    let mut drawn = std::collections::BTreeSet::new();
    for _ in 0..4 {
        drawn.insert(ids.next().await.unwrap());
    }
    assert_eq!(drawn.len(), 4);
    assert_eq!(common::issue_next(&g).await.unwrap(), 1);
    assert_eq!(
        d.peek("ids~1").await.unwrap().stripe.map(|s| s.index),
        Some(1)
    );
    assert!(
        d.history(dispenser::error::Kind::Sequence, "ids~0")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        d.history(dispenser::error::Kind::Queue, "ids~0")
            .await
            .unwrap()
            .len(),
        1
    );

    // The command line and the service refuse the same names, with the rule.
    common::ready();
    let out = cli(&f.collection, None, &["create", "a~1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'~'") && err.contains("ensure_striped"),
        "{err}"
    );
    let out = cli(&f.collection, None, &["queue", "create", "lobby@x~1"]);
    assert!(out.status.success(), "{out:?}");
    let svc = Service::start("history_names_serve");
    let http = reqwest::Client::new();
    let (status, body) = send(
        http.post(svc.url("/v1/sequences"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "a@b" })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("'@'"), "{body}");
    let (status, body) = send(
        http.post(svc.url("/v1/queues"))
            .bearer_auth(ADMIN)
            .json(&json!({ "name": "desk~1@x" })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// A dispenser makes sure of its history's indexes once, before its first record, not on
/// every admin operation (issue 53: a mutant forgetting what it made sure of survived; each
/// operation then paid one more round trip). A second dispenser makes sure once too.
#[tokio::test]
async fn the_historys_indexes_are_made_once_per_dispenser() {
    let f = Fixture::new("history_indexed_once").await;
    let history = format!("{}_history", f.collection);
    let (client, seen) = common::client_recording("createIndexes", &history).await;
    let d = dispenser::Dispenser::new(&client, f.options()).unwrap();
    let count = || seen.lock().unwrap().len();
    d.create("a", Spec::default()).await.unwrap();
    assert_eq!(count(), 1, "the first record makes sure of the indexes");
    d.create("b", Spec::default()).await.unwrap();
    d.create_queue("q", QueueSpec::default()).await.unwrap();
    d.open("a")
        .await
        .unwrap()
        .alter(Alter::default().with_max(100))
        .await
        .unwrap();
    assert_eq!(count(), 1, "later records do not ask again");
    let other = dispenser::Dispenser::new(&client, f.options()).unwrap();
    other.create("c", Spec::default()).await.unwrap();
    other.create("d", Spec::default()).await.unwrap();
    assert_eq!(count(), 2, "another dispenser asks once");
}
