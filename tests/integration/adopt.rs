//! Switching over (issue 62): `Dispenser::adopt` moves a sequence past what another numbering
//! issued — mongoose-sequence's counters (scoped too), mongoengine's, a hand-written counter, the
//! highest number documents carry — so no number they carry is handed out again; never
//! backwards, refused (nothing written) for a number outside the bounds or not a whole number.

use dispenser::mongodb::bson::{Bson, Document, doc};
use dispenser::sequence::AdoptSource;
use dispenser::{Error, Spec, error::Kind};

use crate::common::{DB, Fixture};

fn next_of(s: &dispenser::sequence::SequenceState) -> i64 {
    s.value + s.step
}

#[tokio::test]
async fn counters_of_mongoose_sequence_mongoengine_and_by_hand_are_adopted_never_backwards() {
    let f = Fixture::new("adopt_counters").await;
    let d = f.dispenser(f.options().with_caller("migration"));
    let db = f.client.database(DB);
    // mongoose-sequence numbered six documents; its counter says so.
    let counters = format!("{}_counters", f.collection);
    db.collection::<Document>(&counters)
        .insert_many([
            doc! { "id": "number", "reference_value": Bson::Null, "seq": 6.0 },
            doc! { "id": "other", "reference_value": Bson::Null, "seq": 900_i32 },
        ])
        .await
        .unwrap();
    let s = d.ensure("number", Spec::default()).await.unwrap();
    let done = d
        .adopt(
            "number",
            AdoptSource::mongoose_sequence("number").in_collection(&counters),
        )
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].highest, done[0].moved), (Some(6), true));
    assert_eq!(s.next().await.unwrap(), 7, "the next save gets 7, not 1");
    // Adopted again: the sequence is past it; nothing written or recorded.
    let again = s
        .adopt(AdoptSource::mongoose_sequence("number").in_collection(&counters))
        .await
        .unwrap();
    assert!(!again[0].moved);
    let h = d.history(Kind::Sequence, "number").await.unwrap();
    let adopts: Vec<_> = h.iter().filter(|e| e.op == "adopt").collect();
    assert_eq!(adopts.len(), 1, "{h:#?}");
    assert_eq!(adopts[0].who.as_deref(), Some("migration"));
    let params = adopts[0].to_json()["params"].clone();
    assert_eq!(params["highest"], 6, "{params}");
    assert_eq!(params["source"]["kind"], "mongoose-sequence", "{params}");

    // mongoengine's counter (`next` is the last number it issued), in another database.
    let other_db = format!("{DB}_adopt");
    let me = f
        .client
        .database(&other_db)
        .collection::<Document>("mongoengine.counters");
    let id = format!("{}.number", f.collection);
    me.insert_one(doc! { "_id": &id, "next": 41_i64 })
        .await
        .unwrap();
    let inv = d.ensure("invoices", Spec::default()).await.unwrap();
    d.adopt(
        "invoices",
        AdoptSource::mongoengine(&id).in_database(&other_db),
    )
    .await
    .unwrap();
    assert_eq!(inv.next().await.unwrap(), 42);
    me.delete_one(doc! { "_id": &id }).await.unwrap();

    // A counter by hand; a counter that is missing holds nothing (nothing moves).
    let hand = format!("{}_hand", f.collection);
    db.collection::<Document>(&hand)
        .insert_one(doc! { "_id": "orders", "last": 1_000_i32 })
        .await
        .unwrap();
    let orders = d.ensure("orders", Spec::default()).await.unwrap();
    let src = |id: &str| AdoptSource::counter(&hand, doc! { "_id": id }, "last");
    let none = d.adopt("orders", src("nobody")).await.unwrap();
    assert_eq!((none[0].highest, none[0].moved), (None, false));
    d.adopt("orders", src("orders")).await.unwrap();
    assert_eq!(orders.next().await.unwrap(), 1_001);
}

#[tokio::test]
async fn the_highest_number_documents_carry_is_adopted_and_the_lowest_for_a_sequence_counting_down()
{
    let f = Fixture::new("adopt_highest").await;
    let d = f.dispenser(f.options());
    let business = f
        .client
        .database(DB)
        .collection::<Document>(&format!("{}_docs", f.collection));
    business
        .insert_many([
            doc! { "n": 3_i32 },
            doc! { "n": 17_i64 },
            doc! { "n": 12.0 },
            doc! { "n": "99" }, // not a number: not a number the sequence issued
            doc! { "other": 1_i32 },
        ])
        .await
        .unwrap();
    let source = AdoptSource::highest(business.name(), "n");
    let up = d.ensure("up", Spec::default()).await.unwrap();
    let done = up.adopt(source.clone()).await.unwrap();
    assert_eq!(done[0].highest, Some(17));
    assert_eq!(up.next().await.unwrap(), 18);
    let down = d
        .ensure(
            "down",
            Spec::default()
                .with_start(100)
                .with_step(-1)
                .with_min(-1000),
        )
        .await
        .unwrap();
    down.adopt(source.clone()).await.unwrap();
    assert_eq!(down.next().await.unwrap(), 2, "below the lowest, 3");

    // Outside the bounds: refused, nothing written.
    let small = d
        .ensure("small", Spec::default().with_max(10))
        .await
        .unwrap();
    let before = small.peek().await.unwrap();
    let e = small.adopt(source.clone()).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("up to 17") && m.contains("0..=10") && m.contains("nothing was written"),
        "{m}"
    );
    assert_eq!(small.peek().await.unwrap().version, before.version);

    // A number that is not whole is refused naming the document's field.
    business.insert_one(doc! { "n": 1e18 }).await.unwrap();
    let e = up.adopt(source).await.unwrap_err().to_string();
    assert!(
        e.contains("field \"n\"") && e.contains("not a whole number"),
        "{e}"
    );
}

#[tokio::test]
async fn scoped_counters_of_mongoose_sequence_become_scopes_of_the_template() {
    let f = Fixture::new("adopt_scoped").await;
    let d = f.dispenser(f.options());
    let counters = format!("{}_counters", f.collection);
    d.ensure("inv", Spec::default()).await.unwrap();
    f.client
        .database(DB)
        .collection::<Document>(&counters)
        .insert_many([
            doc! { "id": "inv", "reference_value": { "shop": "Acme & Co", "year": 2026_i32 }, "seq": 12_i32 },
            doc! { "id": "inv", "reference_value": { "shop": "b", "year": 2026_i32 }, "seq": 3_i32 },
            doc! { "id": "inv", "reference_value": Bson::Null, "seq": 99_i32 },
            doc! { "id": "elsewhere", "reference_value": { "shop": "b", "year": 2026_i32 }, "seq": 500_i32 },
        ])
        .await
        .unwrap();
    let done = d
        .adopt(
            "inv",
            AdoptSource::mongoose_sequence_scoped("inv").in_collection(&counters),
        )
        .await
        .unwrap();
    let names: Vec<(&str, Option<i64>)> =
        done.iter().map(|a| (a.name.as_str(), a.highest)).collect();
    assert_eq!(
        names,
        [
            ("inv@Acme%20%26%20Co/2026", Some(12)),
            ("inv@b/2026", Some(3))
        ]
    );
    let acme = d.ensure_scope("inv", "Acme%20%26%20Co/2026").await.unwrap();
    assert_eq!(acme.next().await.unwrap(), 13);
    let b = d.ensure_scope("inv", "b/2026").await.unwrap();
    assert_eq!(next_of(&b.peek().await.unwrap()), 4);
    // A scoped source needs the template.
    let e = d
        .adopt(
            "no-template",
            AdoptSource::mongoose_sequence_scoped("inv").in_collection(&counters),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
}

/// The switch-over on the command line and over HTTP (issue 62: one operation on every
/// surface): `dispenser adopt NAME --from …` and `POST /v1/sequences/{name}/adopt`, each
/// recorded in the history; bad input refused naming it, nothing written; over HTTP it needs
/// the `adopt` right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_on_the_command_line_and_over_http() {
    let f = Fixture::new("adopt_surfaces").await;
    let d = f.dispenser(f.options());
    let numbered = format!("{}_numbered", f.collection);
    f.client
        .database(DB)
        .collection::<Document>(&numbered)
        .insert_many([doc! { "n": 7_i32 }, doc! { "n": 12_i64 }])
        .await
        .unwrap();
    d.ensure("cli", Spec::default()).await.unwrap();
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", crate::common::uri())
            .args(["--db", DB, "--collection", &f.collection])
            .args(args)
            .output()
            .unwrap()
    };
    let out = cli(&[
        "adopt",
        "cli",
        "--from",
        "highest",
        "--source-collection",
        &numbered,
        "--field",
        "n",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "cli: adopted up to 12; next 13"
    );
    let again = cli(&[
        "adopt",
        "cli",
        "--from",
        "highest",
        "--source-collection",
        &numbered,
        "--field",
        "n",
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        (json[0]["highest"].clone(), json[0]["moved"].clone()),
        (12.into(), false.into())
    );
    // Bad input: named, exit 2, nothing written.
    for (args, needle) in [
        (
            vec![
                "adopt",
                "cli",
                "--from",
                "counter",
                "--source-collection",
                "c",
                "--field",
                "n",
                "--filter",
                "[1]",
            ],
            "--filter",
        ),
        (
            vec![
                "adopt",
                "cli",
                "--from",
                "highest",
                "--source-collection",
                "c",
            ],
            "--field",
        ),
        (vec!["adopt", "cli", "--from", "mongoengine"], "--id"),
        (
            vec![
                "adopt",
                "cli",
                "--from",
                "highest",
                "--source-collection",
                "c",
                "--field",
                "n",
                "--scoped",
            ],
            "--scoped",
        ),
    ] {
        let out = cli(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {out:?}"
        );
    }
    assert_eq!(d.peek("cli").await.unwrap().value, 12);

    // Over HTTP.
    let tokens = serde_json::json!({ "tokens": [
        { "name": "ops", "token": "ops-token-for-adopt-0000001", "sequences": ["*"], "operations": ["create", "peek", "adopt"] },
        { "name": "app", "token": "app-token-for-adopt-0000002", "sequences": ["*"], "operations": ["create", "peek", "next", "advance-to"] },
        { "name": "narrow", "token": "narrow-token-for-adopt-003", "sequences": ["http", "http@a*"], "operations": ["adopt"] },
    ]});
    let svc =
        crate::serve::Service::start_tokens("adopt_http", &crate::common::uri(), &tokens, &[]);
    let d = f.dispenser(
        dispenser::Options::default()
            .with_database(DB)
            .with_collection(svc.collection.as_str()),
    );
    d.ensure("http", Spec::default()).await.unwrap();
    let http = reqwest::Client::new();
    let body = serde_json::json!({ "source": "highest", "collection": numbered, "field": "n" });
    let (status, answer) = crate::serve::send(
        http.post(svc.url("/v1/sequences/http/adopt"))
            .bearer_auth("app-token-for-adopt-0000002")
            .json(&body),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = crate::serve::send(
        http.post(svc.url("/v1/sequences/http/adopt"))
            .bearer_auth("ops-token-for-adopt-0000001")
            .json(&body),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["adopted"][0]["highest"], 12, "{answer}");
    assert_eq!(answer["adopted"][0]["state"]["next"], 13, "{answer}");
    let (status, answer) = crate::serve::send(
        http.post(svc.url("/v1/sequences/http/adopt"))
            .bearer_auth("ops-token-for-adopt-0000001")
            .json(
                &serde_json::json!({ "source": "counter", "collection": numbered, "field": "n" }),
            ),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`filter`"),
        "{answer}"
    );
    // A scoped adopt writes the scopes the source holds: a token must cover every scope of
    // the template, not only the template and some of them.
    let counters = format!("{numbered}_counters");
    f.client
        .database(DB)
        .collection::<Document>(&counters)
        .insert_one(doc! { "id": "http", "reference_value": "b", "seq": 40_i32 })
        .await
        .unwrap();
    let scoped = serde_json::json!({ "source": "mongoose-sequence", "id": "http", "scoped": true, "collection": counters });
    let (status, answer) = crate::serve::send(
        http.post(svc.url("/v1/sequences/http/adopt"))
            .bearer_auth("narrow-token-for-adopt-003")
            .json(&scoped),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("http@*"),
        "{answer}"
    );
    assert!(
        d.peek("http@b").await.is_err(),
        "nothing made for a refused token"
    );
    let (status, answer) = crate::serve::send(
        http.post(svc.url("/v1/sequences/http/adopt"))
            .bearer_auth("ops-token-for-adopt-0000001")
            .json(&scoped),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["adopted"][0]["name"], "http@b", "{answer}");
    assert_eq!(answer["adopted"][0]["state"]["next"], 41, "{answer}");
    let h = d.history(Kind::Sequence, "http").await.unwrap();
    assert_eq!(
        h.last().map(|e| (e.op.as_str(), e.who.as_deref())),
        Some(("adopt", Some("ops")))
    );
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}
