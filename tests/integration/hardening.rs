//! Regression tests for numbers issued twice *around* the draw paths (issue: "never a
//! duplicate, everywhere"): handles and block clients that outlive a delete + re-create,
//! stripes laid over each other or moved out of their residue class, daily scopes deleted
//! while live, `ensure` with another start, and documents written before incarnations.

use dispenser::mongodb::bson::{Bson, DateTime, doc};
use dispenser::{Error, Spec, block::BlockOptions, sequence::Strategy};

use crate::common::Fixture;

fn with(f: &Fixture, strategy: Strategy) -> dispenser::Dispenser {
    f.dispenser(f.options().with_strategy(strategy))
}

/// The reproduction from the issue: a compare-and-set handle draws 1, 2, 3; the sequence is
/// deleted and created again at 1000; another client draws 1000..=1002, so the new document
/// reaches the version the old handle remembers. The old handle must not write `value 4`
/// into the new document: it re-reads and continues the new incarnation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cas_handle_that_outlives_delete_and_recreate_continues_the_new_incarnation() {
    let f = Fixture::new("outlive_cas").await;
    let d = with(&f, Strategy::Cas);
    let old = d.create("orders", Spec::default()).await.unwrap();
    for want in 1..=3 {
        assert_eq!(old.next().await.unwrap(), want);
    }
    d.delete("orders").await.unwrap();
    let new = d
        .create("orders", Spec::default().with_start(1000))
        .await
        .unwrap();
    for want in 1000..=1002 {
        assert_eq!(new.next().await.unwrap(), want);
    }
    let n = old.next().await.unwrap();
    assert_eq!(n, 1003, "the old handle must continue the new incarnation");
    assert_eq!(new.next().await.unwrap(), 1004);
    assert_eq!(d.peek("orders").await.unwrap().value, 1004);
}

/// The conditional increment falls back to the compare-and-set at a bound; that fallback
/// must not match a re-created document either. Old handle at value 5, version 5; the new
/// incarnation starts at 5 and reaches value 9 (the bound) at version 5: the increment does
/// not match (bound), and an optimistic compare-and-set from the remembered value 5 would
/// write 6 and re-issue 6..=9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_increments_fallback_never_writes_into_a_recreated_document() {
    let f = Fixture::new("outlive_inc").await;
    let d = with(&f, Strategy::ConditionalIncrement);
    let tickets = Spec::default().with_max(9).with_cycle(true);
    let old = d.create("tickets", tickets).await.unwrap();
    for want in 1..=5 {
        assert_eq!(old.next().await.unwrap(), want);
    }
    d.delete("tickets").await.unwrap();
    let new = d.create("tickets", tickets.with_start(5)).await.unwrap();
    for want in 5..=9 {
        assert_eq!(new.next().await.unwrap(), want);
    }
    assert_eq!(d.peek("tickets").await.unwrap().version, 5);
    // The next ticket after 9 is the wrap to 0, whoever draws it.
    assert_eq!(old.next().await.unwrap(), 0);
    let state = d.peek("tickets").await.unwrap();
    assert_eq!((state.value, state.cycles), (0, 1));
}

/// A block client's give-back (on close) must not undo numbers of another incarnation that
/// happens to stand at the same version and value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_give_back_never_matches_a_recreated_document() {
    for strategy in [Strategy::ConditionalIncrement, Strategy::Cas] {
        let f = Fixture::new("outlive_give_back").await;
        let d = with(&f, strategy);
        d.create("ids", Spec::default()).await.unwrap();
        let blocks = d
            .open_blocks("ids")
            .options(BlockOptions::default().with_size(10).with_prefetch(None))
            .await
            .unwrap();
        assert_eq!(blocks.next().await.unwrap(), 1); // reserved 1..=10 at version 1
        d.delete("ids").await.unwrap();
        let new = d.create("ids", Spec::default()).await.unwrap();
        let run = new.next_n(10).await.unwrap(); // 1..=10, version 1: the same state
        assert_eq!((run.first(), run.last()), (1, 10));
        let report = blocks.close().await.unwrap();
        assert_eq!(
            (report.given_back, report.lost),
            (0, 9),
            "{strategy:?}: the tail belongs to a deleted incarnation"
        );
        let state = d.peek("ids").await.unwrap();
        assert_eq!(
            state.value, 10,
            "{strategy:?}: 1..=10 were issued by the new one"
        );
        assert_eq!(new.next().await.unwrap(), 11);
    }
}

/// Documents written before incarnations (and `start`) existed keep working with both
/// strategies, and receive an incarnation on their first compare-and-set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_written_by_earlier_versions_keep_working() {
    let f = Fixture::new("legacy_docs").await;
    let now = Bson::DateTime(DateTime::now());
    for (name, strategy) in [
        ("legacy_inc", Strategy::ConditionalIncrement),
        ("legacy_cas", Strategy::Cas),
    ] {
        f.raw()
            .insert_one(doc! {
                "_id": name, "value": 41_i64, "step": 1_i64, "min": 0_i64, "max": 45_i64,
                "cycle": true, "version": 7_i64, "cycles": 0_i64,
                "created_at": now.clone(), "updated_at": now.clone(),
            })
            .await
            .unwrap();
        let d = with(&f, strategy);
        // ensure with any start accepts a document that recorded none.
        let seq = d
            .ensure(name, Spec::default().with_max(45).with_cycle(true))
            .await
            .unwrap();
        let got: Vec<i64> = {
            let mut v = Vec::new();
            for _ in 0..8 {
                v.push(seq.next().await.unwrap());
            }
            v
        };
        assert_eq!(got, vec![42, 43, 44, 45, 0, 1, 2, 3], "{strategy:?}");
        let state = d.peek(name).await.unwrap();
        assert_eq!(state.value, 3);
        assert!(
            state.incarnation.is_some(),
            "{strategy:?}: the wrap's compare-and-set gives the document an incarnation"
        );
        assert_eq!(state.start, None);
    }
}

/// `ensure` with another start than the one the sequence was created with is a conflict,
/// like another max; the same start (where the sequence now stands does not matter) is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_with_another_start_is_a_conflict() {
    let f = Fixture::new("ensure_start").await;
    let d = f.dispenser(f.options());
    let orders = d.create("orders", Spec::default()).await.unwrap();
    let _issued = orders.next_n(5).await.unwrap();
    let err = d
        .ensure("orders", Spec::default().with_start(1000))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SpecConflict { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("start 1 (asked 1000)"), "{msg}");
    let again = d.ensure("orders", Spec::default()).await.unwrap();
    assert_eq!(again.next().await.unwrap(), 6);
    assert_eq!(d.peek("orders").await.unwrap().start, Some(1));
}

/// Issue reproduction: 2 stripes of step 2 (steps 4: 1, 5, 9 … and 3, 7, 11 …), then 4
/// stripes of step 1 reopened `ids~0`/`ids~1` (same step 4) and created `ids~2` starting
/// at 3, so stripes 1 and 2 both issued 3, 7, 11. Each stripe now records what it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_stripe_layout_over_the_same_documents_is_a_conflict() {
    let f = Fixture::new("stripe_layouts").await;
    let d = f.dispenser(f.options());
    d.ensure_striped("ids", 2, Spec::default().with_step(2))
        .await
        .unwrap();
    let err = d
        .ensure_striped("ids", 4, Spec::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SpecConflict { .. }), "{err}");
    assert!(err.to_string().contains("stripe 0 of 2"), "{err}");
    // Stripe 0 is checked first: nothing of the refused layout was written.
    assert_eq!(f.raw().count_documents(doc! {}).await.unwrap(), 2);
    let again = d
        .ensure_striped("ids", 2, Spec::default().with_step(2))
        .await
        .unwrap();
    assert_eq!(again.stripes(), 2);
    let opened = d.open_striped("ids").await.unwrap();
    assert_eq!(opened.stripes(), 2);
}

/// Issue reproduction: `advance-to ids~0 100` and `advance-to ids~1 100` put both stripes on
/// 100, so both issued 102, 104 … Advancing keeps each stripe in its residue class, and the
/// striped admin operations move all stripes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advancing_or_resetting_stripes_keeps_them_disjoint() {
    let f = Fixture::new("stripe_admin").await;
    let d = f.dispenser(f.options());
    let ids = d.ensure_striped("ids", 2, Spec::default()).await.unwrap();
    for _ in 0..6 {
        ids.next().await.unwrap();
    }
    d.open("ids~0")
        .await
        .unwrap()
        .advance_to(100)
        .await
        .unwrap();
    d.open("ids~1")
        .await
        .unwrap()
        .advance_to(100)
        .await
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let n = ids.next().await.unwrap();
        assert!(n > 100, "{n} is not past 100");
        assert!(seen.insert(n), "{n} issued twice after advance-to");
    }
    // A stripe refuses a reset outside its class.
    let err = async { d.open("ids~0").await?.reset(1000).await }
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(err.to_string().contains("StripedSequence::reset"), "{err}");
    // The striped operations move every stripe within its class.
    let states = ids.advance_to(5000).await.unwrap();
    let nexts: Vec<i64> = states.iter().filter_map(|s| s.next_number()).collect();
    assert_eq!(nexts, vec![5001, 5002]);
    let states = ids.reset(7000).await.unwrap();
    let nexts: Vec<i64> = states.iter().filter_map(|s| s.next_number()).collect();
    assert_eq!(nexts, vec![7001, 7000]);
    let err = ids.reset(10).await.unwrap_err();
    assert!(matches!(err, Error::WouldGoBackwards { .. }), "{err}");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let n = ids.next().await.unwrap();
        assert!(n >= 7000 && seen.insert(n), "{n}");
    }
    assert_eq!(ids.delete().await.unwrap(), 2);
    assert!(matches!(
        d.open_striped("ids").await,
        Err(Error::NotFound { .. })
    ));
}

/// Issue reproduction: "delete scopes before 2026-11-22" run in UTC while the template's
/// zone is still on the 21st deleted the live scope; the next draw re-created it from the
/// template's start and re-issued the day's numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_daily_scope_is_never_deleted() {
    use std::sync::Arc;
    let f = Fixture::new("live_scope").await;
    let d = f.dispenser(f.options());
    d.ensure("tickets", Spec::default()).await.unwrap();
    // 05:00 UTC on the 22nd is still the 21st in Honolulu.
    let at =
        |ts: &'static str| -> dispenser::scope::Clock { Arc::new(move || ts.parse().unwrap()) };
    let honolulu = d
        .open_daily(
            "tickets",
            dispenser::jiff::tz::TimeZone::get("Pacific/Honolulu").unwrap(),
        )
        .unwrap()
        .with_clock(at("2026-11-21T05:00:00Z"));
    assert_eq!(honolulu.next().await.unwrap().scope, "2026-11-20");
    let honolulu = honolulu.with_clock(at("2026-11-22T05:00:00Z"));
    for want in 1..=3 {
        let t = honolulu.next().await.unwrap();
        assert_eq!((t.scope.as_str(), t.number), ("2026-11-21", want));
    }
    let err = honolulu
        .delete_scopes_before(dispenser::jiff::civil::date(2026, 11, 22))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
    assert!(
        err.to_string().contains("tickets@2026-11-21") && err.to_string().contains("Honolulu"),
        "{err}"
    );
    assert_eq!(d.list().scopes_of("tickets").await.unwrap().len(), 2);
    assert_eq!(
        honolulu
            .delete_scopes_before(dispenser::jiff::civil::date(2026, 11, 21))
            .await
            .unwrap(),
        1
    );
    assert_eq!(honolulu.next().await.unwrap().number, 4);

    // Without a zone, today anywhere on Earth is protected: a scope dated today at UTC−12
    // survives any cut-off.
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::fixed(jiff::tz::offset(-12)))
        .date()
        .to_string();
    d.ensure("queue", Spec::default()).await.unwrap();
    let live = d.ensure_scope("queue", &today).await.unwrap();
    let _issued = live.next_n(3).await.unwrap();
    let err = d
        .delete_scopes_before("queue", "9999-12-31")
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&today), "{err}");
    assert_eq!(live.next().await.unwrap(), 4);
}

/// A delete of a striped sequence interrupted part way (a process killed after the highest
/// stripes went; stripe 0, which records the layout, goes last) is finished by deleting again:
/// through the handle made before, through `Dispenser::delete_striped`, and through
/// `dispenser delete NAME` — though the layout no longer opens. Before, each of them failed
/// with "no such sequence" on the first missing stripe and the rest stayed for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_striped_delete_is_finished_by_deleting_again() {
    let f = Fixture::new("stripe_delete_again").await;
    let d = f.dispenser(f.options());
    let remaining = |name: &'static str| {
        let raw = f.raw();
        async move {
            raw.count_documents(doc! { "_id": { "$regex": format!("^{name}~") } })
                .await
                .unwrap()
        }
    };
    // The handle made before the interruption.
    let ids = d.ensure_striped("ids", 4, Spec::default()).await.unwrap();
    ids.next().await.unwrap();
    d.delete("ids~3").await.unwrap(); // what an interrupted delete leaves
    assert!(d.open_striped("ids").await.is_err());
    assert_eq!(ids.delete().await.unwrap(), 3);
    assert_eq!(remaining("ids").await, 0);
    // By name, from another process that cannot open the layout.
    d.ensure_striped("jobs", 3, Spec::default()).await.unwrap();
    d.delete("jobs~2").await.unwrap();
    assert_eq!(d.delete_striped("jobs").await.unwrap(), 2);
    assert_eq!(remaining("jobs").await, 0);
    assert!(matches!(
        d.delete_striped("jobs").await,
        Err(Error::NotFound { .. })
    ));
    // The command line.
    d.ensure_striped("tix", 4, Spec::default()).await.unwrap();
    d.delete("tix~3").await.unwrap();
    d.delete("tix~2").await.unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", crate::common::uri())
        .args([
            "--db",
            crate::common::DB,
            "--collection",
            f.collection.as_str(),
        ])
        .args(["delete", "tix"])
        .output()
        .expect("run dispenser");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "deleted tix (2 stripes)"
    );
    assert_eq!(remaining("tix").await, 0);
}

/// The CLI acts on a striped sequence by its name: create --stripes, next, peek, advance-to,
/// reset and delete move every stripe, each within its class.
#[test]
fn the_cli_administers_striped_sequences_by_name() {
    crate::common::ready();
    let coll = crate::common::unique("cli_stripes");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", crate::common::uri())
            .args(["--db", crate::common::DB, "--collection", coll.as_str()])
            .args(args)
            .output()
            .expect("run dispenser");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&["create", "ids", "--stripes", "3"]).lines().count(), 3);
    let drawn: Vec<i64> = run(&["next", "ids", "--count", "9"])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let mut sorted = drawn.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=9).collect::<Vec<i64>>());
    let out = run(&["advance-to", "ids", "100"]);
    assert!(
        out.contains("next 101") && out.contains("next 102") && out.contains("next 103"),
        "{out}"
    );
    let out = run(&["reset", "ids", "--next", "500"]);
    assert!(
        out.contains("next 500") && out.contains("next 501"),
        "{out}"
    );
    assert_eq!(run(&["peek", "ids", "--json"]).lines().count(), 3);
    let out = run(&["delete", "ids"]);
    assert!(out.contains("3 stripes"), "{out}");
}

/// A plain `ids` and a striped `ids` (`ids~0 …`) would both start at 1: whichever exists
/// first, the other is refused and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_and_a_striped_sequence_never_share_a_name() {
    let f = Fixture::new("plain_vs_striped").await;
    let d = f.dispenser(f.options());
    d.create("ids", Spec::default()).await.unwrap();
    let err = d
        .ensure_striped("ids", 4, Spec::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SpecConflict { .. }), "{err}");
    assert_eq!(f.raw().count_documents(doc! {}).await.unwrap(), 1);
    d.ensure_striped("codes", 2, Spec::default()).await.unwrap();
    for attempt in [
        d.create("codes", Spec::default()).await.map(drop),
        d.ensure("codes", Spec::default()).await.map(drop),
    ] {
        assert!(
            matches!(attempt, Err(Error::SpecConflict { .. })),
            "{attempt:?}"
        );
    }
    assert_eq!(f.raw().count_documents(doc! {}).await.unwrap(), 3);
}

/// A queue's time is the server's (found by cargo-mutants: `Store::server_now` answering 0 or 1
/// went unnoticed): a ticket taken now is stamped with the server's time, within minutes of
/// this machine's clock (the same machine here; minutes of slack for a real server elsewhere),
/// never 1970.
#[tokio::test]
async fn a_ticket_is_stamped_with_the_servers_time() {
    let f = Fixture::new("server_time").await;
    let d = f.dispenser(f.options());
    let q = d
        .create_queue("lobby", dispenser::queue::QueueSpec::default())
        .await
        .unwrap();
    let t = q.take().await.unwrap();
    let called = q.call().await.unwrap();
    let now = DateTime::now().timestamp_millis();
    for at in [t.at, called.at] {
        let off = (at.timestamp_millis() - now).abs();
        assert!(off < 10 * 60 * 1000, "stamped {at}, {off} ms from now");
    }
}

/// Usage counters (found by cargo-mutants: `Store::put_usage` left out, or its pruning
/// condition reversed, went unnoticed): draws add to today's `issued` counter and set
/// `updated_at`, and a store's first counted write of a day removes the counters older than
/// `KEPT_DAYS`, leaving the recent ones.
#[tokio::test]
async fn draws_count_today_and_prune_counters_older_than_the_kept_days() {
    use dispenser::jiff::{Timestamp, ToSpan, tz::TimeZone};
    let f = Fixture::new("usage_prune").await;
    let d = f.dispenser(f.options());
    d.create("u", Spec::default()).await.unwrap();
    let coll = f
        .client
        .database(crate::common::DB)
        .collection::<dispenser::mongodb::bson::Document>(&f.collection);
    let today = Timestamp::now().to_zoned(TimeZone::UTC).date();
    let day = |back: i64| today.checked_sub(back.days()).unwrap().to_string();
    let kept = dispenser::sequence::KEPT_DAYS;
    let (stale, recent) = (day(kept + 1), day(kept - 2));
    coll.update_one(
        doc! { "_id": "u" },
        doc! { "$set": { format!("issued.{stale}"): 5_i64, format!("issued.{recent}"): 7_i64 } },
    )
    .await
    .unwrap();
    // A fresh dispenser: its store has not pruned today.
    let seq = f.dispenser(f.options()).open("u").await.unwrap();
    seq.next().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    seq.next().await.unwrap();
    let raw = coll.find_one(doc! { "_id": "u" }).await.unwrap().unwrap();
    let issued = raw.get_document("issued").unwrap();
    assert!(!issued.contains_key(&stale), "{issued}");
    assert_eq!(issued.get_i64(&recent).unwrap(), 7, "{issued}");
    let counted = issued
        .get_i64(today.to_string())
        .or_else(|_| issued.get_i32(today.to_string()).map(i64::from));
    assert!(counted.unwrap_or(0) >= 1, "{issued}");
    assert!(raw.get_datetime("updated_at").is_ok(), "{raw}");
}

/// A create or an ensure whose insert the server refuses for a reason other than a taken
/// name (a validator, missing rights) fails with that database error, naming the sequence and
/// the server's code — not "already exists", not a handle on nothing — and creates nothing.
/// (The refusals are write errors the test proxy answers; found by cargo-mutants: every failed
/// insert taken for a duplicate name went unnoticed.)
#[tokio::test]
async fn a_create_the_server_refuses_fails_with_its_error_not_already_exists() {
    use crate::proxy::{Faults, Proxy};
    let f = Fixture::new("create_refused").await;
    let proxy = Proxy::to_test_server(Faults::default(), 2).await;
    let d = dispenser::Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap();
    for (ensure, code) in [(false, 121), (true, 121), (false, 13), (true, 13)] {
        proxy.answer_next(
            "insert",
            &f.collection,
            doc! {
                "ok": 1.0,
                "n": 0,
                "writeErrors": [{ "index": 0, "code": code, "errmsg": "refused by the test" }],
            },
        );
        let e = if ensure {
            d.ensure("s", Spec::default())
                .await
                .map(|_| ())
                .unwrap_err()
        } else {
            d.create("s", Spec::default())
                .await
                .map(|_| ())
                .unwrap_err()
        };
        let text = e.to_string();
        assert!(e.is_database(), "ensure {ensure}: {text}");
        assert!(
            text.contains("creating sequence \"s\"") && text.contains(&format!("code {code}")),
            "ensure {ensure}: {text}"
        );
        assert!(
            matches!(d.peek("s").await, Err(Error::NotFound { .. })),
            "ensure {ensure}"
        );
    }
    assert_eq!(
        d.create("s", Spec::default())
            .await
            .unwrap()
            .next()
            .await
            .unwrap(),
        1
    );
}

/// A handle that alters its own sequence draws by the new shape at once — the next numbers
/// follow the new step and stop at the new bound, the first in one round trip — by either
/// strategy: the alter is the handle's own write, and the state it remembers after it is the
/// one it wrote, shape included. (Found by cargo-mutants: a handle remembering the old shape
/// went unnoticed, because `alter` wrote through a handle of its own and left the caller's
/// stale — its next draw lost a race and read again.)
#[tokio::test]
async fn a_handle_that_alters_its_sequence_draws_by_the_new_shape_at_once() {
    use dispenser::sequence::Alter;
    let f = Fixture::new("alter_remembered").await;
    for strategy in [Strategy::ConditionalIncrement, Strategy::Cas] {
        let d = with(&f, strategy);
        let name = format!("s_{strategy:?}");
        let seq = d
            .create(&name, Spec::default().with_max(1000))
            .await
            .unwrap();
        assert_eq!(seq.next().await.unwrap(), 1);
        seq.alter(Alter::default().with_step(10)).await.unwrap();
        let before = seq.stats();
        assert_eq!(seq.next().await.unwrap(), 11, "{name}");
        let after = seq.stats();
        assert_eq!(
            (
                after.round_trips - before.round_trips,
                after.conflicts - before.conflicts
            ),
            (1, 0),
            "{name}: the draw after the handle's own alter"
        );
        let run = seq.next_n(2).await.unwrap();
        assert_eq!(run.into_iter().collect::<Vec<_>>(), [21, 31], "{name}");
        seq.alter(Alter::default().with_max(35)).await.unwrap();
        let e = seq.next().await.unwrap_err();
        assert!(e.is_exhausted(), "{name}: {e}");
        assert_eq!(d.peek(&name).await.unwrap().value, 31, "{name}");
    }
}

/// The per-day usage counters (`issued`: what `check` and the forecasts read) count exactly
/// the numbers issued — draws of one number and of several, a draw that lost its race and
/// drew again, a block client's close and handles that went away. A handle keeps most of its
/// count pending between writes: it must neither lose what a lost write carried nor count
/// those numbers twice, and what is pending when it closes or goes away is added then.
/// (Found by cargo-mutants: a lost race's count, a dropped handle's or a closed block
/// client's pending count, or a write carrying a fixed count, went unnoticed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_counters_count_exactly_the_numbers_issued_through_lost_races_closes_and_drops() {
    use dispenser::mongodb::bson::Document;
    let f = Fixture::new("usage_exact").await;
    f.dispenser(f.options())
        .create("u", Spec::default())
        .await
        .unwrap();
    let coll = f
        .client
        .database(crate::common::DB)
        .collection::<Document>(&f.collection);
    // Every day's counter, summed (a run over midnight UTC counts on two days).
    let counted = || {
        let coll = coll.clone();
        async move {
            let raw = coll.find_one(doc! { "_id": "u" }).await.unwrap().unwrap();
            raw.get_document("issued").map_or(0, |days| {
                days.iter()
                    .map(|(day, v)| match v {
                        Bson::Int64(n) => *n,
                        Bson::Int32(n) => i64::from(*n),
                        other => panic!("issued.{day} is {other}"),
                    })
                    .sum::<i64>()
            })
        }
    };
    // A block client reserves two blocks of 4 in quick succession (the second's count stays
    // pending), hands out 6 numbers and gives the other 2 back when it closes.
    let blocks = f
        .dispenser(f.options())
        .open_blocks("u")
        .options(
            BlockOptions::default()
                .with_size(4)
                .with_prefetch(None)
                .with_grow_to(None)
                .with_range_share(None),
        )
        .await
        .unwrap();
    for want in 1..=6 {
        assert_eq!(blocks.next().await.unwrap(), want);
    }
    blocks.close().await.unwrap();
    assert_eq!(counted().await, 6, "after the block client closed");
    drop(blocks);
    // Two handles: `b` draws, so `a`'s remembered state is stale and its next draw loses its
    // race and draws again.
    let (da, db) = (
        f.dispenser(f.options().with_strategy(Strategy::Cas)),
        f.dispenser(f.options()),
    );
    let (a, b) = (da.open("u").await.unwrap(), db.open("u").await.unwrap());
    a.next().await.unwrap();
    assert_eq!(a.next_n(5).await.unwrap().count(), 5);
    b.next().await.unwrap();
    let lost = a.stats().conflicts;
    assert_eq!(a.next_n(3).await.unwrap().count(), 3);
    assert!(a.stats().conflicts > lost, "a's draw did not lose its race");
    drop((a, b, da, db));
    let total = 6 + 1 + 5 + 1 + 3;
    let started = std::time::Instant::now();
    while counted().await < total && started.elapsed() < std::time::Duration::from_secs(60) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(counted().await, total, "after the handles went away");
}

/// Opening a handle to draw from reads only what a draw needs: a projection that leaves the
/// per-day usage counters (`issued`, which grow with the days kept) and the format on the
/// server, so a read's size does not grow with the sequence's history. (Found by
/// cargo-mutants: reading the whole document went unnoticed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_reads_only_what_a_draw_needs_not_the_usage_counters() {
    let f = Fixture::new("read_projection").await;
    let (client, seen) = crate::common::client_recording("find", &f.collection).await;
    let d = dispenser::Dispenser::new(&client, f.options().with_strategy(Strategy::Cas)).unwrap();
    f.dispenser(f.options())
        .create("orders", Spec::default())
        .await
        .unwrap();
    let seq = d.open("orders").await.unwrap();
    assert_eq!(seq.next().await.unwrap(), 1);
    let finds = seen.lock().unwrap().clone();
    assert!(!finds.is_empty(), "the open reads the sequence");
    for find in &finds {
        let projection = find
            .get_document("projection")
            .unwrap_or_else(|_| panic!("{find:?}"));
        assert!(
            projection.get_i32("value").is_ok() || projection.get_i64("value").is_ok(),
            "{find:?}"
        );
        for left_out in ["issued", "format", "created_at", "updated_at"] {
            assert!(
                !projection.contains_key(left_out),
                "{left_out} read: {find:?}"
            );
        }
    }
}

/// `delete_scopes_before` says how many scopes it deleted — the number the command line prints
/// and the history records — and deletes exactly those (a count of 1 for three would hide
/// what went).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_old_daily_scopes_reports_how_many_went() {
    use std::sync::Arc;
    let f = Fixture::new("scopes_count").await;
    let d = f.dispenser(f.options());
    d.ensure("slips", Spec::default()).await.unwrap();
    let at =
        |ts: &'static str| -> dispenser::scope::Clock { Arc::new(move || ts.parse().unwrap()) };
    let utc = d
        .open_daily("slips", dispenser::jiff::tz::TimeZone::UTC)
        .unwrap();
    for day in [
        "2026-11-19T12:00:00Z",
        "2026-11-20T12:00:00Z",
        "2026-11-21T12:00:00Z",
        "2026-11-23T12:00:00Z",
    ] {
        assert_eq!(
            utc.clone().with_clock(at(day)).next().await.unwrap().number,
            1
        );
    }
    let today = utc.with_clock(at("2026-11-23T12:00:00Z"));
    let deleted = today
        .delete_scopes_before(dispenser::jiff::civil::date(2026, 11, 22))
        .await
        .unwrap();
    assert_eq!(deleted, 3, "scopes of the 19th, 20th and 21st");
    let left: Vec<String> = d
        .list()
        .scopes_of("slips")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.unwrap().name)
        .collect();
    assert_eq!(left, ["slips@2026-11-23"]);
}

/// `ping` asks the server: with nothing listening it fails (within the server selection
/// timeout) instead of answering that the database is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_of_a_server_that_is_down_fails() {
    let f = Fixture::new("ping_down").await;
    assert!(f.dispenser(f.options()).ping().await.is_ok());
    let down = dispenser::Dispenser::connect(
        "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300&connectTimeoutMS=300",
        f.options(),
    )
    .await
    .unwrap();
    let err = down.ping().await.unwrap_err();
    assert_eq!(
        err.kind(),
        dispenser::error::ErrorKind::Unavailable,
        "{err}"
    );
}
