//! `dispenser check`: thresholds and exit codes of the monitoring convention, cyclic
//! sequences never "exhaust", a corrupt document is UNKNOWN (not a crash), and draws count
//! per day in the document (the rate a cron job reads).

use std::process::{Command, Output};

use dispenser::mongodb::bson::doc;

use crate::common::{self, DB};

fn run(coll: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .args(["--db", DB, "--collection", coll])
        .args(args)
        .output()
        .expect("run dispenser")
}

fn ok(coll: &str, args: &[&str]) -> String {
    let out = run(coll, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_speaks_the_monitoring_convention() {
    common::ready();
    let coll = common::unique("check");
    ok(&coll, &["create", "low", "--max", "1000"]);
    ok(&coll, &["create", "high", "--max", "100"]);
    ok(&coll, &["create", "wheel", "--max", "9", "--cycle"]);
    ok(&coll, &["next", "low", "--count", "100"]);
    ok(&coll, &["next", "high", "--count", "85"]);
    ok(
        &coll,
        &["next", "wheel", "--count", "35", "--strategy", "cas"],
    );
    // A zero horizon keeps the forecast out of it: only the shares decide.
    let c = |args: &[&str]| {
        let mut all = vec!["check", "--horizon", "0s"];
        all.extend_from_slice(args);
        run(&coll, &all)
    };
    let out = c(&["low"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("OK low: used 10.0%"));
    let out = c(&["high"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "85% is past the default 80% warning"
    );
    let out = c(&["high", "--critical", "85%"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("CRITICAL high"));
    let out = c(&[
        "wheel",
        "--warn",
        "1%",
        "--critical",
        "2%",
        "--min-history",
        "0s",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a cyclic sequence never exhausts"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("wraps"));
    // The counters behind the rate: 100 numbers today.
    let peek: serde_json::Value =
        serde_json::from_str(&ok(&coll, &["peek", "low", "--json"])).unwrap();
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .to_string();
    assert_eq!(
        peek["usage"]["issued_by_day"][&today].as_i64(),
        Some(100),
        "{peek}"
    );
    assert!(peek["usage"]["rate_per_sec"].as_f64().unwrap() > 0.0);
    // A forecast within the horizon: 900 left at well over 1/s is far less than 30 days
    // (a history of seconds is enough when --min-history says so).
    let out = run(&coll, &["check", "low", "--min-history", "0s"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A corrupt document is UNKNOWN, not a crash; --all takes the worst.
    let client = common::client().await;
    client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&coll)
        .update_one(doc! { "_id": "low" }, doc! { "$set": { "value": "ten" } })
        .await
        .unwrap();
    let out = c(&["low"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("UNKNOWN low"));
    let out = c(&["--all"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "WARNING (high) outranks UNKNOWN (low)"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
    // Usage errors and a missing sequence are UNKNOWN too.
    assert_eq!(
        run(&coll, &["check", "--warn", "lots", "high"])
            .status
            .code(),
        Some(3)
    );
    assert_eq!(run(&coll, &["check", "nope"]).status.code(), Some(3));
}

/// Regression (issue 49, item 10): `check --warn 80% --critical 70%` was accepted, and WARNING
/// could never be seen. Thresholds in the wrong order (or equal) are a usage error — UNKNOWN
/// (3), the message naming both flags and their values — found before anything connects (here
/// to a server that does not exist).
#[test]
fn warn_at_or_above_critical_is_a_usage_error() {
    for (warn, critical) in [("80%", "70%"), ("0.9", "90%")] {
        let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .args(["--uri", "mongodb://127.0.0.1:1", "check", "orders"])
            .args(["--warn", warn, "--critical", critical])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        let want = format!(
            "--warn {} must be below --critical {}",
            if warn == "0.9" { "90%" } else { warn },
            critical
        );
        assert!(err.contains(&want), "{err}");
        assert!(!err.contains("connection refused"), "{err}");
    }
}

/// The per-day counters behind the rate are carried on a handle's draws at most a second
/// late (not on every write: each update path costs the server time on every draw), and
/// nothing is left out: a dropped handle adds what it still holds, a closed block client too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issued_counts_arrive_late_but_complete() {
    use dispenser::Spec;
    use dispenser::block::BlockOptions;
    use std::time::{Duration, Instant};
    let f = common::Fixture::new("usage_carry").await;
    let d = f.dispenser(f.options());
    let today = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date();
    let issued = |d: dispenser::Dispenser| async move {
        let state = d.peek("s").await.unwrap();
        state
            .issued_by_day
            .iter()
            .filter(|(day, _)| *day == today)
            .map(|(_, n)| *n)
            .sum::<i64>()
    };
    let seq = d.create("s", Spec::default()).await.unwrap();
    let started = Instant::now();
    for _ in 0..20 {
        seq.next().await.unwrap();
    }
    let shown = issued(d.clone()).await;
    if started.elapsed() < Duration::from_secs(1) {
        assert_eq!(shown, 1, "only the first draw carried the count");
    } else {
        assert!((1..=20).contains(&shown), "{shown}");
    }
    // A second later the next draw carries everything pending.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    seq.next().await.unwrap();
    assert_eq!(issued(d.clone()).await, 21);
    for _ in 0..4 {
        seq.next().await.unwrap();
    }
    drop(seq);
    let deadline = Instant::now() + Duration::from_secs(10);
    while issued(d.clone()).await != 25 {
        assert!(
            Instant::now() < deadline,
            "the dropped handle's 4 never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Blocks: reserved minus given back, exactly, once the client is closed.
    let blocks = d
        .open("s")
        .await
        .unwrap()
        .into_blocks(
            BlockOptions::default()
                .with_size(10)
                .with_prefetch(None)
                .with_grow_to(None)
                .with_adaptive(None),
        )
        .unwrap();
    for _ in 0..35 {
        blocks.next().await.unwrap();
    }
    let report = blocks.close().await.unwrap();
    assert_eq!(report.given_back, 5, "{report:?}");
    assert_eq!(issued(d.clone()).await, 25 + 35);
}

/// Issue 19, item 6: a sequence created a second ago with 50 of its 100 numbers drawn was
/// `CRITICAL …, runs out in 0 s`: a forecast from seconds of history. Before `--min-history`
/// (1 h by default) only the shares decide and the line says the rate is too early to tell;
/// with a day of counted history the forecast pages as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_a_new_sequence_pages_no_one_until_its_rate_has_history() {
    common::ready();
    let coll = common::unique("check_history");
    ok(&coll, &["create", "fresh", "--max", "100"]);
    ok(&coll, &["next", "fresh", "--count", "50"]);
    let thresholds = ["--warn", "80%", "--critical", "95%"];
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "fresh"];
        args.extend_from_slice(&thresholds);
        args.extend_from_slice(extra);
        let out = run(&coll, &args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, line) = check(&[]);
    assert_eq!(code, Some(0), "{line}");
    assert!(
        line.starts_with("OK fresh: used 50.0%, 50 left, rate too early to tell (")
            && line.contains("forecasts after 1 h 0 min")
            && line.contains("no forecast"),
        "{line}"
    );
    // The forecast is what paged: without the minimum it does again.
    let (code, line) = check(&["--min-history", "0s"]);
    assert_eq!(code, Some(2), "{line}");
    assert!(line.contains("runs out in"), "{line}");
    // Past the shares, the shares still page at once.
    let out = run(&coll, &["check", "fresh", "--warn", "40%"]);
    assert_eq!(out.status.code(), Some(1));
    // A day and more of history: 50 numbers counted since yesterday, created two days ago.
    let now = jiff::Timestamp::now();
    let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
    let yesterday = today.yesterday().unwrap();
    common::client()
        .await
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&coll)
        .update_one(
            doc! { "_id": "fresh" },
            doc! { "$set": {
                "created_at": dispenser::mongodb::bson::DateTime::from_millis(
                    now.as_millisecond() - 2 * 86_400_000,
                ),
                "issued": { yesterday.to_string(): 25_i64, today.to_string(): 25_i64 },
            } },
        )
        .await
        .unwrap();
    let (code, line) = check(&[]);
    assert_eq!(code, Some(2), "{line}");
    assert!(line.contains("/s, runs out in"), "{line}");
    let (code, line) = check(&["--min-history", "3d"]);
    assert_eq!(code, Some(0), "{line}");
    assert!(line.contains("rate too early to tell"), "{line}");
}
