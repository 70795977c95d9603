//! Scoped sequences (daily and keyed), formatted serials, advance-to.

use std::process::Command;
use std::sync::{Arc, Mutex};

use dispenser::mongodb::bson::doc;
use dispenser::{Error, Format, Spec};
use futures::future::join_all;

use crate::common::{self, DB, Fixture, assert_each_exactly};

#[tokio::test]
async fn daily_numbering_restarts_at_local_midnight() {
    let f = Fixture::new("daily").await;
    let d = f.dispenser(f.options());
    d.create("tickets", Spec::default().with_max(999))
        .await
        .unwrap();
    // 23:59 in Paris is 22:59 UTC in winter; one minute later it is the next day there.
    let now = Arc::new(Mutex::new("2026-11-21T22:58:00Z".to_owned()));
    let clock_now = now.clone();
    let daily = d
        .open_daily(
            "tickets",
            dispenser::jiff::tz::TimeZone::get("Europe/Paris").unwrap(),
        )
        .unwrap()
        .with_clock(Arc::new(move || {
            clock_now.lock().unwrap().parse().expect("timestamp")
        }));
    let mut first_day = Vec::new();
    for _ in 0..3 {
        let t = daily.next().await.unwrap();
        assert_eq!(t.scope, "2026-11-21");
        first_day.push(t.number);
    }
    assert_eq!(first_day, vec![1, 2, 3]);
    *now.lock().unwrap() = "2026-11-21T23:00:00Z".to_owned();
    let t = daily.next().await.unwrap();
    assert_eq!((t.scope.as_str(), t.number), ("2026-11-22", 1));
    // The template was never drawn from; both days exist as scopes.
    assert_eq!(d.peek("tickets").await.unwrap().value, 0);
    let scopes: Vec<_> = d
        .list()
        .scopes_of("tickets")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.unwrap().name)
        .collect();
    assert_eq!(scopes, vec!["tickets@2026-11-21", "tickets@2026-11-22"]);
    // Clean up old days: only the scopes before the key go; the template stays.
    // (The daily sequence knows its zone: in it, the 21st is over.)
    assert_eq!(
        daily
            .delete_scopes_before(dispenser::jiff::civil::date(2026, 11, 22))
            .await
            .unwrap(),
        1
    );
    assert_eq!(d.list().scopes_of("tickets").await.unwrap().len(), 1);
    assert!(d.peek("tickets").await.is_ok());
    // A zone given by name (configuration) is checked where the name comes in.
    assert!(matches!(
        "daily:Mars/Olympus".parse::<dispenser::source::SourceKind>(),
        Err(Error::InvalidArgument { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_first_use_creates_a_scope_once() {
    let f = Fixture::new("scope_race").await;
    let d = f.dispenser(f.options());
    d.create("invoices", Spec::default().with_start(100))
        .await
        .unwrap();
    let handles = (0..16).map(|_| {
        let d = d.clone();
        tokio::spawn(async move {
            let seq = d.ensure_scope("invoices", "acme").await?;
            seq.next().await
        })
    });
    let got: Vec<i64> = join_all(handles)
        .await
        .into_iter()
        .map(|r| r.unwrap().unwrap())
        .collect();
    assert_each_exactly(got, 100..116, 1);
    let count = f
        .raw()
        .count_documents(doc! { "_id": "invoices@acme" })
        .await
        .unwrap();
    assert_eq!(count, 1);
    // Another scope is independent and starts at the template's start too.
    let other = d.ensure_scope("invoices", "globex").await.unwrap();
    assert_eq!(other.next().await.unwrap(), 100);
    assert!(matches!(
        d.ensure_scope("missing", "x").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        d.ensure_scope("invoices", "").await,
        Err(Error::InvalidName { .. })
    ));
}

#[tokio::test]
async fn advance_to_only_moves_forward() {
    let f = Fixture::new("advance").await;
    let d = f.dispenser(f.options());
    let seq = d
        .create("orders", Spec::default().with_max(1_000_000))
        .await
        .unwrap();
    assert_eq!(seq.next().await.unwrap(), 1);
    let state = d
        .open("orders")
        .await
        .unwrap()
        .advance_to(50_000)
        .await
        .unwrap();
    assert_eq!(state.value, 50_000);
    assert_eq!(seq.next().await.unwrap(), 50_001);
    // Never lowers, and then writes nothing.
    let before = d.peek("orders").await.unwrap();
    let state = d
        .open("orders")
        .await
        .unwrap()
        .advance_to(10)
        .await
        .unwrap();
    assert_eq!((state.value, state.version), (before.value, before.version));
    assert!(matches!(
        async { d.open("orders").await?.advance_to(2_000_000).await }.await,
        Err(Error::InvalidArgument { .. })
    ));
    // Descending: "past n" is below it.
    let down = d
        .create(
            "down",
            Spec::default()
                .with_step(-1)
                .with_min(0)
                .with_max(100)
                .with_start(100),
        )
        .await
        .unwrap();
    assert_eq!(down.next().await.unwrap(), 100);
    d.open("down").await.unwrap().advance_to(40).await.unwrap();
    assert_eq!(down.next().await.unwrap(), 39);
}

#[tokio::test]
async fn formats_are_stored_and_checked() {
    let f = Fixture::new("format").await;
    let d = f.dispenser(f.options());
    d.create("inv", Spec::default()).await.unwrap();
    let format = Format::parse("INV-{scope}-{n:06}").unwrap();
    d.open("inv")
        .await
        .unwrap()
        .alter(dispenser::sequence::Alter::default().with_format(Some(format.clone())))
        .await
        .unwrap();
    let state = d.peek("inv").await.unwrap();
    assert_eq!(state.format.as_ref(), Some(&format));
    assert_eq!(
        state.version, 1,
        "altering the format is a write: version moves"
    );
    assert_eq!(format.render(123, Some("2026")), "INV-2026-000123");
    d.open("inv")
        .await
        .unwrap()
        .alter(dispenser::sequence::Alter::default().with_format(None))
        .await
        .unwrap();
    assert_eq!(d.peek("inv").await.unwrap().format, None);
    assert!(matches!(
        async {
            d.open("nope")
                .await?
                .alter(dispenser::sequence::Alter::default().with_format(Some(format.clone())))
                .await
        }
        .await,
        Err(Error::NotFound { .. })
    ));
    // A stored format that does not parse is a corrupt document.
    f.raw()
        .update_one(
            doc! { "_id": "inv" },
            doc! { "$set": { "format": "A-{x}" } },
        )
        .await
        .unwrap();
    let err = d.peek("inv").await.unwrap_err();
    assert!(
        matches!(&err, Error::CorruptDocument { field, .. } if field == "format"),
        "{err}"
    );
}

fn cli(collection: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .args(["--db", DB, "--collection", collection])
        .args(args)
        .output()
        .expect("run dispenser")
}

#[test]
fn the_cli_draws_formatted_daily_serials() {
    common::ready();
    let coll = common::unique("cli_scope");
    let ok = |args: &[&str]| {
        let out = cli(&coll, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // A bad format is refused before anything is written.
    let out = cli(&coll, &["create", "tickets", "--format", "T-{nope}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown placeholder {nope}"));
    assert_eq!(ok(&["list", "--json"]).trim(), "[]");

    ok(&[
        "create",
        "tickets",
        "--max",
        "999",
        "--format",
        "T{scope}-{n:03}",
    ]);
    let out = ok(&[
        "next",
        "tickets",
        "--daily",
        "--tz",
        "UTC",
        "--formatted",
        "--count",
        "2",
    ]);
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .to_string();
    assert_eq!(out, format!("T{today}-001\nT{today}-002\n"));
    let out = ok(&["next", "tickets", "--scope", "desk-7", "--formatted"]);
    assert_eq!(out, "Tdesk-7-001\n");
    let listed: serde_json::Value =
        serde_json::from_str(&ok(&["list", "--json", "--scopes", "tickets"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    // Today's daily scope is live: a cut-off after it is refused and nothing is deleted.
    let out = cli(&coll, &["delete", "tickets", "--scopes-before", "~"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("tickets@{today}")));
    let listed: serde_json::Value =
        serde_json::from_str(&ok(&["list", "--json", "--scopes", "tickets"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    let out = ok(&[
        "delete",
        "tickets",
        "--scopes-before",
        "2000-01-01",
        "--tz",
        "UTC",
    ]);
    assert!(out.contains("deleted 0 scope(s)"), "{out}");
    ok(&["create", "plain"]);
    let out = cli(&coll, &["next", "plain", "--formatted"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no format"));
    let out = ok(&["advance-to", "plain", "500"]);
    assert!(out.contains("next 501"), "{out}");
    let out = cli(&coll, &["next", "plain", "--tz", "UTC"]);
    assert_eq!(out.status.code(), Some(2), "--tz needs --daily");
}
