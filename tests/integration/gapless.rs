//! Gap-free sequences: no gap and no duplicate in the business collection, whatever the
//! holders do (fail, panic, stall past their lease, get SIGKILLed before or after their
//! write), checked with `audit`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use dispenser::Error;
use dispenser::gapless::{GaplessAlter, GaplessOptions};
use dispenser::mongodb::bson::doc;

use crate::common::{self, DB, Fixture};
use crate::proxy::XorShift;

pub(crate) fn cli(f: &Fixture) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
    c.env("MONGODB_URI", common::uri())
        .env_remove("DISPENSER_TEST_GAPLESS_HOLD")
        .args(["--db", DB, "--collection", &f.collection]);
    c
}

/// A holder whose first attempt stops once it holds its number, until the test lets it write
/// `{number, by}`; later attempts (after its write met the index) write at once. Events, not
/// sleeps: `holding` once it holds its number, `written` after each write returned.
struct PausedHolder {
    task: tokio::task::JoinHandle<
        dispenser::Result<dispenser::gapless::Issued<dispenser::mongodb::results::InsertOneResult>>,
    >,
    holding: Arc<Notify>,
    write: Arc<Notify>,
    written: Arc<Notify>,
    attempts: Arc<AtomicU32>,
}

impl PausedHolder {
    /// Waits until the holder holds its number (a bug that never gets there fails the test,
    /// it does not hang it).
    async fn holds(&self) {
        within("the holder to hold its number", self.holding.notified()).await;
    }
}

/// `f`, or a panic naming `what` after a minute (a test waiting on an event that a bug
/// never triggers fails instead of hanging the suite).
async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("waited a minute for {what}"))
}

fn paused_holder(g: &dispenser::gapless::Gapless, by: &'static str) -> PausedHolder {
    let (holding, write, written) = (
        Arc::new(Notify::new()),
        Arc::new(Notify::new()),
        Arc::new(Notify::new()),
    );
    let attempts = Arc::new(AtomicU32::new(0));
    let task = {
        let g = g.clone();
        let (holding, write, written) = (holding.clone(), write.clone(), written.clone());
        let attempts = attempts.clone();
        tokio::spawn(async move {
            let coll = g.business();
            g.issue(|n| {
                let first = attempts.fetch_add(1, SeqCst) == 0;
                let (holding, write, written) = (holding.clone(), write.clone(), written.clone());
                async move {
                    if first {
                        holding.notify_one();
                        write.notified().await;
                    }
                    let r = coll.insert_one(doc! { "number": n, "by": by }).await;
                    written.notify_one();
                    r
                }
            })
            .await
        })
    };
    PausedHolder {
        task,
        holding,
        write,
        written,
        attempts,
    }
}

/// `gapless issue inv` of `count` numbers, after making sure `inv` exists, numbering
/// `business.number`.
fn issue_cmd(f: &Fixture, business: &str, count: u64, lease: &str) -> Command {
    gapless_create(f, business, "number");
    let mut c = cli(f);
    c.args(["gapless", "issue", "inv"])
        .args(["--lease", lease, "--count", &count.to_string()]);
    c
}

/// `gapless create inv --if-not-exists` numbering `business.field` unless `inv` exists: it
/// must succeed.
pub(crate) fn gapless_create(f: &Fixture, business: &str, field: &str) {
    let peek = cli(f)
        .args(["gapless", "peek", "inv"])
        .output()
        .expect("peek");
    if peek.status.success() {
        return;
    }
    let out = cli(f)
        .args(["gapless", "create", "inv", "--if-not-exists"])
        .args(["--into", business, "--field", field])
        .output()
        .expect("run gapless create");
    assert!(
        out.status.success(),
        "gapless create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn numbers(out: &Output) -> Vec<i64> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().expect("a number per line"))
        .collect()
}

/// Runs `c` with its clock moved by `offset` (`+1h`, `-30m`) through libfaketime (installed
/// into `.tools/` by `scripts/tools.sh`). Only the wall clock moves; the monotonic clock the
/// runtime's timers use stays true, as on a machine whose clock is merely set wrong.
pub fn skewed<'c>(c: &'c mut Command, offset: &str) -> &'c mut Command {
    let lib = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join(".tools/faketime/libfaketimeMT.so.1");
    assert!(
        lib.exists(),
        "{} is missing: run scripts/tools.sh (scripts/test.sh does)",
        lib.display()
    );
    c.env("LD_PRELOAD", lib)
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("FAKETIME_NO_CACHE", "1")
}

/// Starts a holder that stops at `point` (before/after its insert); returns it once it
/// said which number it holds.
fn holder(f: &Fixture, business: &str, point: &str) -> (Child, i64) {
    holder_with(issue_cmd(f, business, 1, "1"), point)
}

/// [`holder`] from a prepared `gapless issue` command.
fn holder_with(mut c: Command, point: &str) -> (Child, i64) {
    let mut child = c
        .env("DISPENSER_TEST_GAPLESS_HOLD", point)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a holder");
    let mut line = String::new();
    BufReader::new(child.stderr.take().expect("stderr"))
        .read_line(&mut line)
        .expect("read");
    let n = line
        .trim()
        .strip_prefix("holding ")
        .unwrap_or_else(|| panic!("unexpected {line:?}"))
        .parse()
        .expect("number");
    (child, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failing_and_panicking_writes_from_eight_tasks_leave_no_gap_and_no_duplicate() {
    let f = Fixture::new("gapless_tasks").await;
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let g = d
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let seed: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("gapless tasks: seed {seed}");
    let used = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for t in 0..8_u64 {
        let (g, used) = (g.clone(), used.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = XorShift::new(seed ^ t);
            let mut mine = Vec::new();
            for _ in 0..15 {
                let roll = rng.below(100);
                let coll = g.business().clone();
                match g
                    .issue(|n| {
                        let coll = coll.clone();
                        async move {
                            if roll < 5 {
                                panic!("the invoice template is broken");
                            }
                            if roll < 30 {
                                return Err(std::io::Error::other("the customer is blocked"));
                            }
                            coll.insert_one(doc! { "number": n, "task": t as i64 })
                                .await
                                .map_err(std::io::Error::other)
                        }
                    })
                    .await
                {
                    Ok(issued) => {
                        used.fetch_add(1, SeqCst);
                        mine.push(issued.number);
                    }
                    Err(Error::BusinessWrite { reason, .. }) => {
                        assert!(
                            reason.contains("blocked") || reason.contains("panicked"),
                            "{reason}"
                        );
                    }
                    Err(e) => panic!("seed {seed}: {e}"),
                }
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let n = i64::from(used.load(SeqCst));
    assert!(n > 0);
    common::assert_each_exactly(all, 1..=n, 1);
    let a = common::audit(&d, &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean(), "seed {seed}: {a:?}");
    assert_eq!((a.numbers as i64, a.last), (n, Some(n)));
    let s = g.peek().await.unwrap();
    assert_eq!(
        (s.next, s.lease),
        (n + 1, None),
        "every failure released its lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_holder_that_stalls_past_its_lease_meets_the_unique_index_not_a_duplicate() {
    let f = Fixture::new("gapless_stall").await;
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let g = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_lease(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    // Events, not sleeps: the other caller starts once the first holds its number, and the
    // first writes only after the other has issued (it used to sleep 900 ms and hope). The
    // first is past its lease meanwhile: another caller takes the same number.
    let spawned = Instant::now();
    let stalled = paused_holder(&g, "stalled");
    stalled.holds().await;
    // Another handle, as another process would have (clones of one handle take turns).
    let g2 = d.open_gapless("inv").await.unwrap();
    let coll = g2.business().clone();
    let other = g2
        .issue(|n| {
            let coll = coll.clone();
            async move { coll.insert_one(doc! { "number": n, "by": "other" }).await }
        })
        .await
        .unwrap();
    assert_eq!(other.number, 1, "the lease ran out, the number went on");
    // The lease (300 ms) was taken after `spawned`: the other caller waited for it to run out.
    assert!(spawned.elapsed() >= Duration::from_millis(250));
    stalled.write.notify_one();
    let runs = stalled.attempts.clone();
    let stalled = stalled.task.await.unwrap().unwrap();
    assert_eq!(
        stalled.number, 2,
        "the stalled holder met the index and took the next"
    );
    assert_eq!(runs.load(SeqCst), 2);
    let a = common::audit(&d, &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean() && a.last == Some(2), "{a:?}");
}

#[tokio::test]
async fn holders_killed_before_and_after_their_write_and_eight_processes_leave_no_gap() {
    let f = Fixture::new("gapless_kill").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    assert_eq!(
        numbers(&issue_cmd(&f, &business, 3, "1").output().unwrap()),
        vec![1, 2, 3]
    );
    // Killed holding 4 before writing it: 4 goes to the next caller once the lease ran out.
    let (mut before, n) = holder(&f, &business, "before");
    assert_eq!(n, 4);
    before.kill().unwrap();
    before.wait().unwrap();
    // Killed after writing 4, before confirming: the next caller finds 4 used, moves on.
    let (mut after, n) = holder(&f, &business, "after");
    assert_eq!(n, 4, "the killed holder's number was given again");
    after.kill().unwrap();
    after.wait().unwrap();
    assert_eq!(
        numbers(&issue_cmd(&f, &business, 2, "1").output().unwrap()),
        vec![5, 6]
    );
    // Eight processes at once.
    let procs: Vec<Child> = (0..8)
        .map(|_| {
            issue_cmd(&f, &business, 5, "5")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut all: Vec<i64> = (1..=6).collect();
    for p in procs {
        let got = numbers(&p.wait_with_output().unwrap());
        assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
        all.extend(got);
    }
    common::assert_each_exactly(all, 1..=46, 1);
    let a = common::audit(&d, &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean() && a.last == Some(46), "{a:?}");
    // The same from the command line.
    let out = cli(&f)
        .args(["audit", &business, "--field", "number", "--from", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("OK "), "{text}");
    assert!(
        text.contains("46 number(s), 1 to 46; 0 missing, 0 duplicated"),
        "{text}"
    );
}

#[tokio::test]
async fn voids_are_kept_with_their_reason_and_misuse_is_refused() {
    let f = Fixture::new("gapless_void").await;
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let g = d
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let insert =
        |g: dispenser::gapless::Gapless| async move { common::issue_next(&g).await.unwrap() };
    assert_eq!(insert(g.clone()).await, 1);
    assert_eq!(insert(g.clone()).await, 2);
    for (n, reason, needle) in [
        (2, "x", "already used"),
        (5, "x", "not handed out yet"),
        (3, "  ", "reason"),
    ] {
        let e = g.void(n, reason).await.unwrap_err();
        assert!(
            e.kind() == dispenser::error::ErrorKind::InvalidInput && e.to_string().contains(needle),
            "{e}"
        );
    }
    g.void(3, "printer jam: form destroyed").await.unwrap();
    assert_eq!(insert(g.clone()).await, 4);
    let s = g.peek().await.unwrap();
    assert_eq!(s.next, 5);
    assert_eq!(s.voided.len(), 1);
    assert_eq!(
        (s.voided[0].number, s.voided[0].reason.as_str()),
        (3, "printer jam: form destroyed")
    );
    let a = common::audit(&d, &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean(), "a voided number is accounted for: {a:?}");
    assert_eq!((a.numbers, a.voided, a.voids.clone()), (4, 1, vec![3]));
    let void = g
        .business()
        .find_one(doc! { "number": 3 })
        .await
        .unwrap()
        .unwrap();
    let info = void.get_document("voided").unwrap();
    assert_eq!(info.get_str("reason"), Ok("printer jam: form destroyed"));
    assert_eq!(info.get_str("sequence"), Ok("inv"));
    assert!(info.get_datetime("at").is_ok(), "{void:?}");
    // The command line shows it, and voids too.
    let out = cli(&f).args(["gapless", "peek", "inv"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("next 5; no holder; 1 voided"), "{text}");
    assert!(text.contains("voided 3 at "), "{text}");
    let out = cli(&f)
        .args(["gapless", "void", "inv", "5", "--reason", "cancelled"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(g.peek().await.unwrap().next, 6);
    // Audit from the command line: no gap, the two voided numbers listed: exit 0.
    insert(g.clone()).await;
    let out = cli(&f)
        .args(["audit", &business, "--field", "number", "--from", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("6 number(s), 1 to 6; 0 missing, 0 duplicated; 2 voided"),
        "{text}"
    );
    assert!(text.contains("voided: 3, 5"), "{text}");
    // Told that nothing marks voids, it sees them as business documents: still no gap.
    let out = cli(&f)
        .args([
            "audit", &business, "--field", "number", "--from", "1", "--json",
        ])
        .args(["--void-field", "nothing"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["voided"].as_u64(), v["missing"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
}

/// Void documents carry the configured void field (a nested path) and extra fields, the
/// sequence keeps them (the CLI's void writes the same document), and the audit and status
/// find them by that field.
#[tokio::test]
async fn void_documents_carry_the_configured_void_field_and_extra_fields() {
    let f = Fixture::new("gapless_void_shape").await;
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let options = GaplessOptions::new(&business, "meta.number")
        .with_void_field("audit.void")
        .with_void_extra(doc! { "status": "VOID", "total": 0 });
    let g = d.ensure_gapless("inv", options.clone()).await.unwrap();
    g.void(1, "never printed").await.unwrap();
    let out = cli(&f)
        .args(["gapless", "void", "inv", "2", "--reason", "torn"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let coll = g.business().clone();
    let n = g
        .issue(|n| {
            let coll = coll.clone();
            async move {
                coll.insert_one(doc! { "meta": { "number": n }, "status": "OPEN" })
                    .await
            }
        })
        .await
        .unwrap()
        .number;
    assert_eq!(n, 3);
    for (n, reason) in [(1, "never printed"), (2, "torn")] {
        let v = coll
            .find_one(doc! { "meta.number": n })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(v.get_str("status"), Ok("VOID"), "{v:?}");
        assert_eq!(v.get_i32("total"), Ok(0), "{v:?}");
        let info = v
            .get_document("audit")
            .unwrap()
            .get_document("void")
            .unwrap();
        assert_eq!(info.get_str("reason"), Ok(reason), "{v:?}");
    }
    let s = g.peek().await.unwrap();
    assert_eq!(
        s.voided.iter().map(|v| v.number).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let a = common::audit_of(&g, Some(1)).await.unwrap();
    assert!(a.is_clean(), "{a:?}");
    assert_eq!((a.numbers, a.voids.clone()), (3, vec![1, 2]));
    // Opening it with other void settings is a conflict; nothing changes.
    let e = d
        .ensure_gapless("inv", options.clone().with_void_field("voided"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::SpecConflict { .. }), "{e}");
}

#[tokio::test]
async fn a_collection_that_cannot_have_the_unique_index_is_refused_and_nothing_written() {
    let f = Fixture::new("gapless_index").await;
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let coll = f
        .client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&business);
    coll.insert_many([
        doc! { "number": 1 },
        doc! { "number": 1 },
        doc! { "number": 3 },
    ])
    .await
    .unwrap();
    let e = d
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unique index"), "{e}");
    assert!(matches!(
        d.open_gapless("inv").await.unwrap_err(),
        Error::NotFound { .. }
    ));
    // The audit works on any collection.
    let a = common::audit(&d, &business, "number", None).await.unwrap();
    assert_eq!(
        (a.duplicates.clone(), a.gaps.clone()),
        (vec![(1, 2)], vec![(2, 2)])
    );
    // Bad options name what is wrong, and nothing is written.
    let e = d
        .ensure_gapless("inv", GaplessOptions::new(&business, "$number"))
        .await
        .unwrap_err();
    assert!(
        e.kind() == dispenser::error::ErrorKind::InvalidInput && e.to_string().contains("field"),
        "{e}"
    );
}

/// Issue 20, item 4: `--field meta.number` sets the nested field (it used to insert a
/// top-level key named "meta.number": the index saw null, the second issue failed forever).
#[tokio::test]
async fn a_nested_number_field_works_end_to_end_through_the_cli_and_audit() {
    let f = Fixture::new("gapless_nested").await;
    let business = format!("{}_inv", f.collection);
    gapless_create(&f, &business, "meta.number");
    let issue = |count: &str, body: &str| {
        cli(&f)
            .args(["gapless", "issue", "inv"])
            .args(["--count", count, "--doc", body])
            .output()
            .unwrap()
    };
    assert_eq!(
        numbers(&issue("2", r#"{"meta": {"customer": "ACME"}, "total": 5}"#)),
        vec![1, 2]
    );
    assert_eq!(numbers(&issue("1", "{}")), vec![3]);
    let coll = f
        .client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&business);
    let first = coll
        .find_one(doc! { "meta.number": 1 })
        .await
        .unwrap()
        .expect("the number is at the nested path");
    assert_eq!(
        first.get_document("meta").unwrap().get_str("customer"),
        Ok("ACME")
    );
    assert!(!first.contains_key("meta.number"), "{first:?}");
    // A body whose `meta` is not a document: a clear error, exit 2, nothing written.
    let out = issue("1", r#"{"meta": 7}"#);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("meta") && err.contains("--doc"), "{err}");
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 3);
    // The audit reads the nested field: 1 to 3, clean.
    let out = cli(&f)
        .args(["audit", &business, "--field", "meta.number", "--from", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("3 number(s), 1 to 3; 0 missing, 0 duplicated"),
        "{text}"
    );
}

/// Issue 20, item 5: a unique index that lets two documents carry one number (partial,
/// sparse, or with a collation) is refused, naming it; nothing is written. A plain unique
/// index (either direction, or with the simple collation) is used as it is.
#[tokio::test]
async fn a_partial_sparse_or_collated_unique_index_is_refused_naming_it() {
    use dispenser::mongodb::IndexModel;
    use dispenser::mongodb::options::{Collation, IndexOptions};

    let f = Fixture::new("gapless_weak_index").await;
    let d = f.dispenser(f.options());
    let weak: [(&str, IndexOptions, &str); 3] = [
        (
            "partial",
            IndexOptions::builder()
                .unique(true)
                .name("by_number".to_owned())
                .partial_filter_expression(doc! { "number": { "$gt": 100 } })
                .build(),
            "partial",
        ),
        (
            "sparse",
            IndexOptions::builder()
                .unique(true)
                .name("by_number".to_owned())
                .sparse(true)
                .build(),
            "sparse",
        ),
        (
            "collated",
            IndexOptions::builder()
                .unique(true)
                .name("by_number".to_owned())
                .collation(
                    Collation::builder()
                        .locale("en")
                        .strength(dispenser::mongodb::options::CollationStrength::Secondary)
                        .build(),
                )
                .build(),
            "collation",
        ),
    ];
    for (i, (what, options, needle)) in weak.into_iter().enumerate() {
        let business = format!("{}_{what}", f.collection);
        let coll = f
            .client
            .database(DB)
            .collection::<dispenser::mongodb::bson::Document>(&business);
        coll.create_index(
            IndexModel::builder()
                .keys(doc! { "number": 1 })
                .options(options)
                .build(),
        )
        .await
        .unwrap();
        let name = format!("inv{i}");
        let Err(e) = d
            .ensure_gapless(&name, GaplessOptions::new(&business, "number"))
            .await
        else {
            panic!("{what}: the weak index was accepted");
        };
        let text = e.to_string();
        assert!(
            e.kind() == dispenser::error::ErrorKind::InvalidInput,
            "{what}: {text}"
        );
        assert!(
            text.contains("\"by_number\"") && text.contains(needle),
            "{what}: {text}"
        );
        assert!(
            matches!(
                d.open_gapless(&name).await.unwrap_err(),
                Error::NotFound { .. }
            ),
            "{what}: nothing written"
        );
        assert_eq!(coll.list_index_names().await.unwrap().len(), 2, "{what}");
    }
    // Plain unique indexes are used as they are: descending, or with the simple collation.
    for (i, (key, collation)) in [
        (-1, None),
        (1, Some(Collation::builder().locale("simple").build())),
    ]
    .into_iter()
    .enumerate()
    {
        let business = format!("{}_plain{i}", f.collection);
        let coll = f
            .client
            .database(DB)
            .collection::<dispenser::mongodb::bson::Document>(&business);
        let options = IndexOptions::builder()
            .unique(true)
            .name("mine".to_owned())
            .collation(collation)
            .build();
        coll.create_index(
            IndexModel::builder()
                .keys(doc! { "number": key })
                .options(options)
                .build(),
        )
        .await
        .unwrap();
        d.ensure_gapless(
            &format!("plain{i}"),
            GaplessOptions::new(&business, "number"),
        )
        .await
        .unwrap();
        assert_eq!(
            coll.list_index_names().await.unwrap(),
            vec!["_id_".to_owned(), "mine".to_owned()],
            "no second index"
        );
    }
}

/// Issue 20, item 3: the look-ups that decide a number is used (after a lease ran out, after
/// a duplicate key) read with majority read concern, so that a write rolled back in a
/// failover cannot make the sequence move past a number no document keeps. Checked on the
/// commands the driver sends (the local server has no replication to roll back).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn look_ups_of_a_number_read_with_majority_read_concern() {
    use dispenser::mongodb::bson::Document;

    let f = Fixture::new("gapless_majority").await;
    let business = format!("{}_inv", f.collection);
    let (client, seen) = common::client_recording("find", &business).await;
    let d = dispenser::Dispenser::new(&client, f.options()).unwrap();
    let g = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_lease(Duration::from_millis(200)),
        )
        .await
        .unwrap();
    // A holder that stalls past its lease: the next caller takes over and looks its number
    // up; the stalled write then meets the index and looks the number up too.
    // Events, not sleeps: the other caller starts once the first holds its number; the first
    // writes once the other has issued.
    let stalled = paused_holder(&g, "stalled");
    stalled.holds().await;
    let other = d.open_gapless("inv").await.unwrap();
    let n = common::issue_next(&other).await.unwrap();
    assert_eq!(n, 1);
    stalled.write.notify_one();
    assert_eq!(stalled.task.await.unwrap().unwrap().number, 2);
    // Every find names its read concern; the look-ups that can move the sequence past a
    // number (a range from it: how far the used numbers go) read majority. (A `local` read
    // only tells a duplicate in flight from one on another index; it moves nothing.)
    let finds = seen.lock().unwrap().clone();
    let level = |f: &Document| {
        f.get_document("readConcern")
            .ok()
            .and_then(|r| r.get_str("level").ok())
            .map(str::to_owned)
    };
    let deciding: Vec<&Document> = finds
        .iter()
        .filter(|f| {
            f.get_document("filter")
                .is_ok_and(|q| q.to_string().contains("$gte"))
        })
        .collect();
    assert!(
        deciding.len() >= 2,
        "a look-up after the lease ran out and one after the duplicate: {finds:?}"
    );
    for f in &deciding {
        assert_eq!(level(f).as_deref(), Some("majority"), "{f:?}");
    }
    for f in &finds {
        assert!(level(f).is_some(), "{f:?}");
    }
}

/// Issue 20, item 1: a holder's business write stalls past its lease, the number is voided
/// meanwhile, then the write lands. The void and the late write meet at the unique index:
/// the late write fails with a duplicate key and its caller moves on to the next number, so
/// the number is voided and not used (it used to be both).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_void_and_a_late_write_meet_at_the_unique_index_so_no_number_is_both() {
    let f = Fixture::new("gapless_void_late").await;
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let g = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_lease(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    // Events, not sleeps: the void comes once the holder holds 1 and its lease (300 ms, by the
    // server's clock, taken before `holding`) ran out; the late write comes after the void.
    let late = paused_holder(&g, "late");
    late.holds().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let voider = d.open_gapless("inv").await.unwrap();
    voider.void(1, "form destroyed").await.unwrap();
    late.write.notify_one();
    let issued = late.task.await.unwrap().unwrap();
    assert_eq!(
        (issued.number, late.attempts.load(SeqCst)),
        (2, 2),
        "the late write met the void at the index and went on to 2"
    );
    let coll = f
        .client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&business);
    let one = coll.find_one(doc! { "number": 1 }).await.unwrap().unwrap();
    assert!(!one.contains_key("by"), "1 is the void's document: {one:?}");
    let two = coll.find_one(doc! { "number": 2 }).await.unwrap().unwrap();
    assert_eq!(two.get_str("by"), Ok("late"));
    let s = g.peek().await.unwrap();
    assert_eq!(s.next, 3);
    assert_eq!(
        s.voided.iter().map(|v| v.number).collect::<Vec<_>>(),
        vec![1]
    );
}

/// The other order of the same race: the void looked the number up and found nothing, then
/// the late write landed before the void's insert. The index decides for the write that
/// landed: the void fails saying the number is carried, the sequence moves past it, and the
/// number is the late writer's — not voided, not an error of the database. (Forced with the
/// proxy holding the void's insert; found by cargo-mutants: a void that took every duplicate
/// key for a database failure went unnoticed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_write_landing_between_a_voids_look_up_and_its_insert_keeps_the_number() {
    use futures::TryStreamExt;

    use crate::proxy::{Faults, Proxy};
    let f = Fixture::new("gapless_void_race").await;
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let g = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_lease(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    let late = paused_holder(&g, "late");
    late.holds().await;
    // The holder's lease (300 ms by the server's clock, taken before `holding`) runs out.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let proxy = Proxy::to_test_server(Faults::default(), 1).await;
    let voider = dispenser::Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap()
        .open_gapless("inv")
        .await
        .unwrap();
    let insert = proxy.hold_next("insert", &business);
    let mut void = tokio::spawn(async move { voider.void(1, "form destroyed").await });
    // The void found 1 free and its lease run out, looked 1 up and found nothing; its insert
    // waits at the proxy while the late write lands.
    tokio::select! {
        () = within("the void's insert at the proxy", insert.arrived()) => {}
        r = &mut void => panic!("the void ended before its insert reached the proxy: {r:?}"),
    }
    late.write.notify_one();
    within("the late write", late.written.notified()).await;
    insert.open();
    let e = within("the void", void).await.unwrap().unwrap_err();
    assert_eq!(e.kind(), dispenser::error::ErrorKind::InvalidInput, "{e}");
    assert!(
        e.to_string().contains("already carried by a document"),
        "{e}"
    );
    assert_eq!(
        late.task.await.unwrap().unwrap().number,
        1,
        "the write that landed keeps 1"
    );
    let coll = f
        .client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&business);
    let docs: Vec<_> = coll
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        docs.len(),
        1,
        "the late write's document, no void document: {docs:?}"
    );
    assert_eq!(docs[0].get_str("by"), Ok("late"), "{docs:?}");
    let s = g.peek().await.unwrap();
    assert_eq!((s.next, s.voided.len()), (2, 0), "{s:?}");
}

/// A void document the business collection's validator refuses (its readers require fields
/// `void_extra` lacks) is a database error that says so — not "another caller is writing the
/// number; try again", which would be retried forever — and so is any other refusal (here a
/// user without the right to insert), without the validator's hint; nothing is voided, and
/// once the collection accepts the document the same void goes through. (The refusals are
/// the write errors a server so configured answers, sent by the proxy; found by
/// cargo-mutants: any failed insert of a void could be taken for a duplicate key.)
#[tokio::test]
async fn a_void_document_the_server_refuses_is_a_database_error_that_says_why_and_voids_nothing() {
    use crate::proxy::{Faults, Proxy};
    let f = Fixture::new("gapless_void_refused").await;
    let business = format!("{}_inv", f.collection);
    let g = f
        .dispenser(f.options())
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 2).await;
    let voider = dispenser::Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap()
        .open_gapless("inv")
        .await
        .unwrap();
    let coll = f
        .client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&business);
    for (code, errmsg, validator) in [
        (121, "Document failed validation", true),
        (13, "not authorized to execute command insert", false),
    ] {
        proxy.answer_next(
            "insert",
            &business,
            doc! {
                "ok": 1.0,
                "n": 0,
                "writeErrors": [{ "index": 0, "code": code, "errmsg": errmsg }],
            },
        );
        let e = voider.void(1, "form destroyed").await.unwrap_err();
        let text = e.to_string();
        assert!(e.is_database(), "{text}");
        assert!(
            text.contains(&format!("code {code}")) && !text.contains("another caller"),
            "{text}"
        );
        assert_eq!(
            text.contains("validator refused it: nothing was voided") && text.contains(&business),
            validator,
            "{text}"
        );
        let s = g.peek().await.unwrap();
        assert_eq!((s.next, s.voided.len()), (1, 0), "{s:?}");
        assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 0);
    }
    voider.void(1, "form destroyed").await.unwrap();
    let s = g.peek().await.unwrap();
    assert_eq!(
        (
            s.next,
            s.voided.iter().map(|v| v.number).collect::<Vec<_>>()
        ),
        (2, vec![1])
    );
}

/// `issue`'s cancel safety: a call dropped midway blocks nobody for its lease. Dropped
/// before its business write, its lease is released in the background at once and another
/// handle (another process) gets the same number right away — not after the two minutes of
/// the lease; dropped after its write landed, the other handle finds the number used and
/// moves past it. (Found by cargo-mutants: a dropped call whose lease was left to run out
/// went unnoticed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_dropped_midway_blocks_nobody_for_its_lease() {
    let f = Fixture::new("gapless_dropped").await;
    let business = format!("{}_inv", f.collection);
    let options = GaplessOptions::new(&business, "number")
        .with_lease(Duration::from_secs(120))
        .with_wait(Duration::from_secs(20));
    let g = f
        .dispenser(f.options())
        .ensure_gapless("inv", options.clone())
        .await
        .unwrap();
    let other = f
        .dispenser(f.options())
        .ensure_gapless("inv", options)
        .await
        .unwrap();
    // Twice before the write: the flusher of the first drop has finished by the second, which
    // arms another.
    for (write_first, want) in [(false, 1), (true, 3), (false, 4)] {
        let holding = Arc::new(Notify::new());
        let call = {
            let (g, holding) = (g.clone(), holding.clone());
            tokio::spawn(async move {
                let coll = g.business();
                g.issue(|n| {
                    let holding = holding.clone();
                    async move {
                        let r = if write_first {
                            Some(coll.insert_one(doc! { "number": n }).await)
                        } else {
                            None
                        };
                        holding.notify_one();
                        // Dropped here: holding the number, its write landed or not.
                        std::future::pending::<()>().await;
                        r.expect("written")
                    }
                })
                .await
            })
        };
        within("the call to hold its number", holding.notified()).await;
        call.abort();
        assert!(call.await.unwrap_err().is_cancelled());
        // Within the other handle's wait of 20 s (a lease left to run out takes 120 s).
        assert_eq!(
            common::issue_next(&other).await.unwrap(),
            want,
            "dropped {} its write",
            if write_first { "after" } else { "before" }
        );
    }
    let a = common::audit(&f.dispenser(f.options()), &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean() && a.last == Some(4), "{a:?}");
}

/// `Issued::skipped` counts the numbers a call moved past, not the look-ups that found
/// them: numbers 1 to 5 written outside the sequence (a migration) are five numbers found in
/// one look-up; a holder that died after writing its run leaves the numbers it did not
/// confirm to the next caller, who counts each. (It used to count look-ups: 1 for each.)
#[tokio::test]
async fn skipped_counts_every_number_moved_past_not_the_look_ups_that_found_them() {
    let f = Fixture::new("gapless_skipped").await;
    let business = format!("{}_inv", f.collection);
    let g = f
        .dispenser(f.options())
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_lease(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    let migrated: Vec<_> = (1..=5_i64)
        .map(|n| doc! { "number": n, "by": "migration" })
        .collect();
    g.business().insert_many(migrated).await.unwrap();
    let coll = g.business();
    let issued = g
        .issue(|n| async move { coll.insert_one(doc! { "number": n }).await })
        .await
        .unwrap();
    assert_eq!((issued.number, issued.skipped), (6, 5));
    g.flush().await.unwrap();
    // A holder in another process — its own runtime, dropped with everything on it the
    // moment its third call returns, so nothing of it confirms what it wrote — dies.
    let (uri, options) = (common::uri(), f.options());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let d = dispenser::Dispenser::connect(&uri, options).await.unwrap();
            let dead = d.open_gapless("inv").await.unwrap();
            for want in 7..=9 {
                assert_eq!(common::issue_next(&dead).await.unwrap(), want);
            }
        });
    })
    .join()
    .unwrap();
    // Its last number at least is not confirmed (nothing confirmed the run it wrote last).
    let next = g.peek().await.unwrap().next;
    assert!((7..=9).contains(&next), "next is {next}");
    let coll = g.business();
    let issued = within(
        "the number after the dead holder's",
        g.issue(|n| async move { coll.insert_one(doc! { "number": n }).await }),
    )
    .await
    .unwrap();
    assert_eq!(
        (issued.number, issued.skipped),
        (10, u32::try_from(10 - next).unwrap()),
        "the dead holder left {next} to 9"
    );
    let a = common::audit_of(&g, Some(1)).await.unwrap();
    assert!(a.is_clean() && a.last == Some(10), "{a:?}");
}

/// A handle issuing in a burst holds one lease for the whole burst — each number after the
/// first is its business write (and, every few milliseconds, one write that confirms the run
/// and renews the lease), never a new lease — and once its calls stop the run is confirmed
/// in the background within moments, without `flush`; after a second burst too (the
/// background task that confirms is started again). Calls follow each other here without a
/// pause: on this test's single thread the background task runs only while a call waits
/// for the database. (Found by cargo-mutants: a run never confirmed in the background, or
/// confirmed only once, went unnoticed.)
#[tokio::test]
async fn a_burst_keeps_one_lease_and_its_run_is_confirmed_in_the_background_once_it_stops() {
    let f = Fixture::new("gapless_burst").await;
    let business = format!("{}_inv", f.collection);
    let state = format!("{}_gapless", f.collection);
    let (client, takes) = common::client_recording("findAndModify", &state).await;
    let g = dispenser::Dispenser::new(&client, f.options())
        .unwrap()
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let watcher = f.dispenser(f.options()).open_gapless("inv").await.unwrap();
    let mut last = 0;
    for burst in [40, 3] {
        takes.lock().unwrap().clear();
        for _ in 0..burst {
            let n = common::issue_next(&g).await.unwrap();
            assert_eq!(n, last + 1);
            last = n;
        }
        let taken = takes.lock().unwrap().len();
        assert_eq!(taken, 1, "leases taken in a burst of {burst}");
        within("the run confirmed in the background", async {
            loop {
                let s = watcher.peek().await.unwrap();
                if s.next == last + 1 && s.lease.is_none() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }
    assert_eq!(
        takes.lock().unwrap().len(),
        1,
        "a lease taken after the burst"
    );
}

/// A business write that fails releases its number before `issue` returns — the call's last
/// act, not a background task's — so whoever hears of the failure and tries again elsewhere
/// finds the number free: when the call took its lease for itself, and when it came under
/// the lease its handle held for the number before. The release is held at a proxy: until
/// it goes on, the call has not returned. (Found by cargo-mutants: a call that left its
/// release to the background went unnoticed.)
#[tokio::test]
async fn a_failed_business_write_releases_its_number_before_issue_returns() {
    use crate::proxy::{Faults, Proxy};
    let f = Fixture::new("gapless_failed_release").await;
    let business = format!("{}_inv", f.collection);
    let state = format!("{}_gapless", f.collection);
    f.dispenser(f.options())
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 2).await;
    let g = dispenser::Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap()
        .open_gapless("inv")
        .await
        .unwrap();
    for (chained, want) in [(false, 1), (true, 2)] {
        if chained {
            assert_eq!(common::issue_next(&g).await.unwrap(), 1);
        }
        let release = proxy.hold_next("update", &state);
        let mut call = tokio::spawn({
            let g = g.clone();
            async move {
                g.issue(|_| async { Err::<(), _>(std::io::Error::other("printer jam")) })
                    .await
            }
        });
        tokio::select! {
            () = within("the release at the proxy", release.arrived()) => {}
            r = &mut call => panic!("issue returned before its release was sent: {r:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !call.is_finished(),
            "issue returned while its release was held (chained: {chained})"
        );
        release.open();
        let e = within("the failed call", call).await.unwrap().unwrap_err();
        assert!(
            matches!(e, Error::BusinessWrite { number, .. } if number == want),
            "{e}"
        );
        let s = g.peek().await.unwrap();
        assert_eq!((s.next, s.lease.is_none()), (want, true), "{s:?}");
    }
}

/// One call of `issue` on `g`, spawned: its business write says that it runs (recording the
/// handle's count of writes then), pauses `pause`, and inserts `{number: n}` into `coll`.
fn spawn_paused_issue(
    g: &dispenser::gapless::Gapless,
    coll: &dispenser::mongodb::Collection<dispenser::mongodb::bson::Document>,
    pause: Duration,
) -> (
    tokio::task::JoinHandle<dispenser::Result<dispenser::gapless::Issued<()>>>,
    Arc<Notify>,
    Arc<std::sync::atomic::AtomicU64>,
) {
    let (running, writes) = (
        Arc::new(Notify::new()),
        Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX)),
    );
    let (g, coll, told, count) = (g.clone(), coll.clone(), running.clone(), writes.clone());
    let task = tokio::spawn(async move {
        let counted = g.clone();
        g.issue(move |n| {
            let (coll, told, count, counted) =
                (coll.clone(), told.clone(), count.clone(), counted.clone());
            async move {
                count.store(counted.stats().writes, SeqCst);
                told.notify_one();
                tokio::time::sleep(pause).await;
                coll.insert_one(doc! { "number": n }).await.map(drop)
            }
        })
        .await
    });
    (task, running, writes)
}

/// A run of numbers a handle wrote under one lease ends in the write that confirms the run
/// and takes the next lease, sent beside the next number's business write. When that write
/// is refused (a caller said it waits), its reply is lost, or it is never answered, the
/// number written beside it is confirmed with the run: the next caller starts right after
/// it, with nothing to move past (issue 53: with `n + 1` there mutated to `n - 1` or `n * 1`,
/// the next caller met used numbers and skipped them). The handle's state writes go through
/// a proxy that faults that one write; its business writes go straight to the server.
///
/// The second call writes under the first call's lease and pauses past `RENEW`, so the third
/// ends the run. A round where this machine paused the handle long enough for it to renew
/// its lease earlier proves nothing and is run again (at most five times).
#[tokio::test]
async fn a_run_whose_last_write_is_refused_lost_or_unanswered_is_confirmed_past_its_last_number() {
    use crate::proxy::{Fault, Faults, Proxy};
    let f = Fixture::new("gapless_run_end").await;
    let state_name = format!("{}_gapless", f.collection);
    let state = f
        .client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&state_name);
    let direct = f.dispenser(f.options());
    let proxy = Proxy::to_test_server(Faults::default(), 11).await;
    let proxied = dispenser::Dispenser::connect(
        &proxy.uri("&serverSelectionTimeoutMS=2000"),
        f.options()
            .with_operation_timeout(Duration::from_millis(500)),
    )
    .await
    .unwrap();
    let ms = Duration::from_millis;
    for case in ["refused", "lost", "unanswered"] {
        let mut concluded = false;
        for attempt in 0..5 {
            let name = format!("{case}_{attempt}");
            let options = GaplessOptions::new(format!("{}_{name}", f.collection), "number")
                .with_lease(Duration::from_secs(60));
            let business = direct
                .create_gapless(&name, options)
                .await
                .unwrap()
                .business()
                .clone();
            let a = proxied.open_gapless(&name).await.unwrap();
            let (one, running, at_one) = spawn_paused_issue(&a, &business, ms(10));
            within("the first write", running.notified()).await;
            // Waits for the baton behind the first call: it follows at once, under its lease.
            let (two, running, at_two) = spawn_paused_issue(&a, &business, ms(30));
            within("the second write", running.notified()).await;
            let gate = match case {
                "refused" => {
                    proxy.script(None);
                    Some(proxy.hold_next("update", &state_name))
                }
                "lost" => {
                    proxy.script(Some((0, Fault::DropReply)));
                    None
                }
                _ => {
                    proxy.script(Some((0, Fault::NeverAnswer)));
                    None
                }
            };
            // Queued behind the second call (and the flusher, which then finds calls
            // following each other): its state write is the next request at the proxy.
            tokio::time::sleep(ms(5)).await;
            let (three, _, _) = spawn_paused_issue(&a, &business, Duration::ZERO);
            if let Some(gate) = gate {
                within("the write ending the run", gate.arrived()).await;
                // A caller elsewhere says it waits, as a waiter does.
                state
                    .update_one(
                        doc! { "_id": &name },
                        doc! { "$set": { "lease.want": true }, "$currentDate": { "lease.want_at": true } },
                    )
                    .await
                    .unwrap();
                gate.open();
            }
            let mut issued = Vec::new();
            for call in [one, two, three] {
                issued.push(within("a call", call).await.unwrap().unwrap());
            }
            issued.push(
                a.issue(|n| {
                    let business = business.clone();
                    async move { business.insert_one(doc! { "number": n }).await.map(drop) }
                })
                .await
                .unwrap(),
            );
            let seen = proxy.seen();
            let first = seen.first().map(ToString::to_string).unwrap_or_default();
            if at_two.load(SeqCst) != at_one.load(SeqCst) + 1
                || first != format!("update {state_name}")
            {
                eprintln!(
                    "{case}, round {attempt}: the run ended elsewhere (writes {} then {}, first request {first:?}); again",
                    at_one.load(SeqCst),
                    at_two.load(SeqCst)
                );
                continue;
            }
            let numbers: Vec<i64> = issued.iter().map(|i| i.number).collect();
            let skipped: Vec<u32> = issued.iter().map(|i| i.skipped).collect();
            assert_eq!(numbers, [1, 2, 3, 4], "{case}");
            assert_eq!(skipped, [0, 0, 0, 0], "{case}: numbers moved past");
            assert_eq!(a.stats().retries, 0, "{case}");
            let mut stored: Vec<i64> = business
                .distinct("number", doc! {})
                .await
                .unwrap()
                .iter()
                .filter_map(dispenser::mongodb::bson::Bson::as_i64)
                .collect();
            stored.sort_unstable();
            assert_eq!(stored, [1, 2, 3, 4], "{case}");
            concluded = true;
            break;
        }
        assert!(
            concluded,
            "{case}: five rounds where the run ended elsewhere"
        );
    }
}

/// Issue 20, item 2: a holder whose clock runs an hour ahead takes a number and is killed.
/// Leases are timed by the server's clock, so the next caller waits for the lease (1 s), not
/// for the lease plus the hour (it used to end in `Contention` after its `wait`).
#[tokio::test]
async fn a_killed_holder_whose_clock_runs_an_hour_ahead_blocks_others_only_for_its_lease() {
    let f = Fixture::new("gapless_skew_holder").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let mut c = issue_cmd(&f, &business, 1, "1");
    skewed(&mut c, "+1h");
    let (mut ahead, n) = holder_with(c, "before");
    assert_eq!(n, 1);
    ahead.kill().unwrap();
    ahead.wait().unwrap();
    let g = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number")
                .with_lease(Duration::from_secs(1))
                .with_wait(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let started = Instant::now();
    let issued = common::issue_next(&g).await.unwrap();
    assert_eq!(issued, 1, "the dead holder's number went on");
    // The lease is 1 s; a lease judged by the holder's clock would be an hour.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

/// Issue 20, item 2: a voider whose clock runs an hour ahead cannot void a number a live
/// holder holds (by the server's clock the lease has not run out); a status read by it does
/// not call the lease expired either.
#[tokio::test]
async fn a_voider_whose_clock_runs_ahead_cannot_void_a_live_holders_number() {
    let f = Fixture::new("gapless_skew_void").await;
    let business = format!("{}_inv", f.collection);
    let (mut live, n) = holder_with(issue_cmd(&f, &business, 1, "60"), "before");
    assert_eq!(n, 1);
    let mut void = cli(&f);
    void.args(["gapless", "void", "inv", "1", "--reason", "form destroyed"]);
    let out = skewed(&mut void, "+1h").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(6),
        "a refusal, not bad input: {err}"
    );
    assert!(err.contains("held by a caller"), "{err}");
    let mut status = cli(&f);
    status.args(["gapless", "peek", "inv", "--json"]);
    let out = skewed(&mut status, "+1h").output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["lease_expired"], false, "{v}");
    live.kill().unwrap();
    live.wait().unwrap();
    let d = f.dispenser(f.options());
    let s = d.open_gapless("inv").await.unwrap().peek().await.unwrap();
    assert_eq!((s.next, s.voided.len()), (1, 0));
}

/// A void of a number already used — its holder was killed after its write, before
/// confirming — is refused (the void document meets the holder's document at the index) and
/// the sequence moves past the number; a void of a number held by a killed holder that never
/// wrote it succeeds once its lease ran out, and the number is never used.
#[tokio::test]
async fn a_void_meets_a_dead_holders_write_at_the_index_or_takes_its_unwritten_number() {
    let f = Fixture::new("gapless_void_dead").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let (mut after, n) = holder(&f, &business, "after");
    assert_eq!(n, 1);
    after.kill().unwrap();
    after.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await; // its lease (1 s) runs out
    let g = d.open_gapless("inv").await.unwrap();
    let e = g.void(1, "form destroyed").await.unwrap_err();
    assert!(
        e.kind() == dispenser::error::ErrorKind::InvalidInput
            && e.to_string().contains("already carried"),
        "{e}"
    );
    let s = g.peek().await.unwrap();
    assert_eq!(
        (s.next, s.voided.len()),
        (2, 0),
        "moved past the used number"
    );
    let (mut before, n) = holder(&f, &business, "before");
    assert_eq!(n, 2);
    before.kill().unwrap();
    before.wait().unwrap();
    let e = g.void(2, "x").await.unwrap_err();
    assert!(e.to_string().contains("held by a caller"), "{e}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    g.void(2, "the holder died before writing").await.unwrap();
    let a = common::audit_of(&g, Some(1)).await.unwrap();
    assert!(a.is_clean(), "{a:?}");
    assert_eq!((a.numbers, a.voids.clone()), (2, vec![2]));
    assert_eq!(g.peek().await.unwrap().next, 3);
}

/// A `dispenser serve` of its own, with an admin token (every operation) and a token that
/// may only void (and release) the gap-free sequences `inv*`, not read them.
struct VoidService {
    child: Child,
    base: String,
    collection: String,
    tokens: std::path::PathBuf,
}

const ADMIN: &str = "gapless-admin-token-0001";
const VOIDER: &str = "gapless-voider-token-0002";

impl VoidService {
    fn start(test: &str) -> VoidService {
        common::ready();
        let collection = common::unique(test);
        let tokens = std::env::temp_dir().join(format!("{collection}.tokens.json"));
        std::fs::write(
            &tokens,
            serde_json::json!({ "tokens": [
                { "name": "admin", "token": ADMIN, "sequences": ["*"],
                  "operations": ["next", "create", "peek", "list", "advance-to", "adopt", "reset", "delete", "alter", "void", "release", "history", "take", "call"] },
                { "name": "voider", "token": VOIDER, "sequences": ["inv*"], "operations": ["void", "release"] },
            ]})
            .to_string(),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", common::uri())
            .args(["--db", DB, "--collection", &collection, "serve"])
            .args(["--listen", "127.0.0.1:0", "--tokens"])
            .arg(&tokens)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dispenser serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        VoidService {
            child,
            base,
            collection,
            tokens,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for VoidService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.tokens);
    }
}

/// The gap-free endpoints check names as the sequence endpoints do (a 201-character name is
/// 400 everywhere; it was 422 on the gap-free ones), declare the same name schema in the
/// OpenAPI document, and tell a token only what it may read: one that may void but not
/// `peek` is refused a wrong number without being told the next one (it used to be named),
/// and a void answers it what was voided, not the status.
#[tokio::test]
async fn gap_free_endpoints_check_names_and_answer_only_what_the_token_may_read() {
    use crate::serve::send;
    use serde_json::json;
    let svc = VoidService::start("gapless_http");
    let f = Fixture {
        client: common::client().await,
        collection: svc.collection.clone(),
    };
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let g = d
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    for _ in 0..2 {
        common::issue_next(&g).await.unwrap();
    }
    g.flush().await.unwrap();
    let http = reqwest::Client::new();
    // Names: as the sequence endpoints check them.
    let long = "a".repeat(201);
    let (status, body) = send(
        http.get(svc.url(&format!("/v1/sequences/{long}")))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = send(
        http.get(svc.url(&format!("/v1/gapless/{long}")))
            .bearer_auth(ADMIN),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = send(
        http.post(svc.url(&format!("/v1/gapless/{long}/void")))
            .bearer_auth(ADMIN)
            .json(&json!({ "number": 3, "reason": "x" })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (_, doc) = send(http.get(svc.url("/openapi.json"))).await;
    let name_schema = |path: &str, method: &str| {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "name")
            .unwrap()["schema"]
            .clone()
    };
    let sequence = name_schema("/v1/sequences/{name}", "get");
    assert_eq!(sequence["maxLength"], 200, "{sequence}");
    assert_eq!(name_schema("/v1/gapless/{name}", "get"), sequence);
    assert_eq!(name_schema("/v1/gapless/{name}/void", "post"), sequence);
    // A token that may void but not peek: not told the next number (3).
    let (status, body) = send(http.get(svc.url("/v1/gapless/inv")).bearer_auth(VOIDER)).await;
    assert_eq!(status, 403, "{body}");
    for wrong in [1, 7] {
        let (status, body) = send(
            http.post(svc.url("/v1/gapless/inv/void"))
                .bearer_auth(VOIDER)
                .json(&json!({ "number": wrong, "reason": "x" })),
        )
        .await;
        assert_eq!(status, 422, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(!message.contains('3'), "names the next number: {message}");
        assert!(message.contains("peek"), "{message}");
    }
    // An admin is told.
    let (status, body) = send(
        http.post(svc.url("/v1/gapless/inv/void"))
            .bearer_auth(ADMIN)
            .json(&json!({ "number": 7, "reason": "x" })),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains(", 3,"),
        "{body}"
    );
    // A void by the void-only token answers what it voided, not the status.
    let (status, body) = send(
        http.post(svc.url("/v1/gapless/inv/void"))
            .bearer_auth(VOIDER)
            .json(&json!({ "number": 3, "reason": "torn" })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({ "name": "inv", "voided": 3 }));
    assert_eq!(g.peek().await.unwrap().next, 4);
    // Release (token operation `release`) and the longest lease (`alter`).
    let release = |token: &'static str, body: serde_json::Value| {
        http.post(svc.url("/v1/gapless/inv/release"))
            .bearer_auth(token)
            .json(&body)
    };
    let (status, body) = send(release(VOIDER, json!({ "number": 9 }))).await;
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains('4') && message.contains("peek"),
        "{message}"
    );
    let (status, body) = send(release(ADMIN, json!({ "number": 4 }))).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no holder"),
        "{body}"
    );
    // A holder whose lease runs: a release without force is a refusal, 409 `lease_held` (it
    // was 422, invalid input: issue 49, item 10), nothing written; forced, it goes through.
    let (mut live, n) = holder_with(issue_cmd(&f, &business, 1, "60"), "before");
    assert_eq!(n, 4);
    let (status, body) = send(release(ADMIN, json!({ "number": 4 }))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("lease_held")),
        "{body}"
    );
    assert_eq!(g.peek().await.unwrap().next, 4, "nothing written");
    live.kill().unwrap();
    live.wait().unwrap();
    let (status, body) = send(release(ADMIN, json!({ "number": 4, "force": true }))).await;
    assert_eq!(
        (status, &body["outcome"]),
        (200, &json!("voided")),
        "{body}"
    );
    let (status, body) = send(
        http.post(svc.url(&format!("/v1/gapless/{long}/release")))
            .bearer_auth(ADMIN)
            .json(&json!({ "number": 4 })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let max_lease = |token: &'static str, seconds: f64| {
        http.post(svc.url("/v1/gapless/inv/alter"))
            .bearer_auth(token)
            .json(&json!({ "max_lease_seconds": seconds }))
    };
    // An unknown field is refused, nothing written; the old path is gone.
    let (status, body) = send(
        http.post(svc.url("/v1/gapless/inv/alter"))
            .bearer_auth(ADMIN)
            .json(&json!({ "max_lease_seconds": 60, "lease": 1 })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = send(
        http.post(svc.url("/v1/gapless/inv/max-lease"))
            .bearer_auth(ADMIN)
            .json(&json!({ "max_lease_seconds": 60 })),
    )
    .await;
    assert_eq!(status, 404);
    // The longest lease was in milliseconds (`max_lease_ms`): refused, naming the new field.
    let (status, body) = send(
        http.post(svc.url("/v1/gapless/inv/alter"))
            .bearer_auth(ADMIN)
            .json(&json!({ "max_lease_ms": 60_000 })),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let said = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("`max_lease_ms` is now `max_lease_seconds`"),
        "{body}"
    );
    let (status, body) = send(max_lease(VOIDER, 60.0)).await;
    assert_eq!(status, 403, "{body}");
    for bad in [0.0, 0.0009, 86_400.5] {
        let (status, body) = send(max_lease(ADMIN, bad)).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, body) = send(max_lease(ADMIN, 60.0)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({ "name": "inv", "max_lease_seconds": 60.0 }));
    // A fraction of a second is a lease in milliseconds.
    let (status, body) = send(max_lease(ADMIN, 0.25)).await;
    assert_eq!(
        (status, &body["max_lease_seconds"]),
        (200, &json!(0.25)),
        "{body}"
    );
    let (status, _) = send(max_lease(ADMIN, 60.0)).await;
    assert_eq!(status, 200);
    let (_, body) = send(http.get(svc.url("/v1/gapless/inv")).bearer_auth(ADMIN)).await;
    assert_eq!(
        (
            body["max_lease_seconds"].as_f64(),
            body["unique_index"].as_bool()
        ),
        (Some(60.0), Some(true)),
        "{body}"
    );
    for (path, op) in [
        ("/v1/gapless/{name}/release", "gapless_release"),
        ("/v1/gapless/{name}/alter", "gapless_alter"),
    ] {
        assert_eq!(doc["paths"][path]["post"]["operationId"], op, "{path}");
        assert_eq!(name_schema(path, "post"), sequence, "{path}");
    }
}

/// A forced release of a holder that is alive after all: its number is voided, and its
/// business write, landing afterwards, fails on the unique index — the holder moves on to
/// the next number. No number both used and voided, none twice. Without force the release
/// is refused while the lease runs; the status shows a dropped index; the longest lease is
/// checked and refuses a longer lease on open.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_forced_release_of_a_live_holder_voids_its_number_and_its_late_write_fails() {
    use dispenser::gapless::Released;
    let f = Fixture::new("gapless_release_live").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let g = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_lease(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let go = Arc::new(tokio::sync::Notify::new());
    let runs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let holder = {
        let (g, go, runs) = (g.clone(), go.clone(), runs.clone());
        tokio::spawn(async move {
            let coll = g.business().clone();
            g.issue(|n| {
                let (coll, go, runs) = (coll.clone(), go.clone(), runs.clone());
                async move {
                    let first = {
                        let mut r = runs.lock().unwrap();
                        r.push(n);
                        r.len() == 1
                    };
                    if first {
                        go.notified().await;
                    }
                    coll.insert_one(doc! { "number": n, "by": "holder" }).await
                }
            })
            .await
        })
    };
    let other = d.open_gapless("inv").await.unwrap();
    while other.peek().await.unwrap().lease.is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let e = other.release(1, "x").await.unwrap_err();
    assert!(e.to_string().contains("could still land"), "{e}");
    let e = other.release(2, "x").force(true).await.unwrap_err();
    assert!(e.to_string().contains("1, can be released"), "{e}");
    assert_eq!(
        other
            .release(1, "operator: holder declared dead")
            .force(true)
            .await
            .unwrap(),
        Released::Voided(1)
    );
    go.notify_one();
    let issued = holder.await.unwrap().unwrap();
    assert_eq!((issued.number, issued.skipped), (2, 1));
    assert_eq!(*runs.lock().unwrap(), vec![1, 2]);
    g.flush().await.unwrap();
    assert_eq!(
        g.business()
            .count_documents(doc! { "number": 1 })
            .await
            .unwrap(),
        1
    );
    let a = common::audit_of(&g, Some(1)).await.unwrap();
    assert!(a.is_clean(), "{a:?}");
    assert_eq!((a.numbers, a.voids.clone()), (2, vec![1]));
    // The status shows a dropped index; the next operation that writes creates it again.
    g.business().drop_index("number_1").await.unwrap();
    assert!(!g.peek().await.unwrap().unique_index);
    g.void(3, "torn").await.unwrap();
    assert!(g.peek().await.unwrap().unique_index);
    // The longest lease.
    assert_eq!(g.peek().await.unwrap().max_lease, Duration::from_secs(300));
    assert!(
        g.alter(GaplessAlter::default().with_max_lease(Duration::ZERO))
            .await
            .unwrap_err()
            .kind()
            == dispenser::error::ErrorKind::InvalidInput
    );
    // An alter that changes nothing is refused, naming the sequence.
    let e = g.alter(GaplessAlter::default()).await.unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("\"inv\""),
        "{e}"
    );
    let s = g
        .alter(GaplessAlter::default().with_max_lease(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(s.max_lease, Duration::from_secs(30));
    // Ensure keeps the longest lease an alter set, and tells it (issue 60): a start-up that
    // ensures the settings in its code does not fail after the alter.
    let kept = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_lease(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert_eq!(
        kept.altered()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["max lease 30s (asked 300s)"]
    );
    let e = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number")
                .with_max_lease(Duration::from_secs(30))
                .with_lease(Duration::from_secs(31)),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("longest lease"), "{e}");
    assert_eq!(
        d.open_gapless("inv").await.unwrap().options().lease,
        Duration::from_secs(10)
    );
    g.alter(GaplessAlter::default().with_max_lease(Duration::from_secs(2)))
        .await
        .unwrap();
    let found = d.open_gapless("inv").await.unwrap();
    assert_eq!(found.options().lease, Duration::from_secs(2));
    assert!(matches!(
        d.open_gapless("none").await.unwrap_err(),
        Error::NotFound { .. }
    ));
}

/// A void after someone dropped the unique index never adds a second document for a number
/// a business document carries: a holder wrote 3 and was SIGKILLed, the index `number_1`
/// was dropped, and `gapless void inv 3` used to print "3 voided" — the audit then found 3
/// both used and voided. Now every gap-free operation makes sure of the index (creating it
/// again) and a void looks the number up first. An open handle's issue does the same.
#[tokio::test]
async fn a_void_after_the_unique_index_was_dropped_never_makes_a_number_both_used_and_voided() {
    let f = Fixture::new("gapless_dropped_index").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    assert_eq!(
        numbers(&issue_cmd(&f, &business, 2, "1").output().unwrap()),
        vec![1, 2]
    );
    let (mut after, n) = holder(&f, &business, "after");
    assert_eq!(n, 3);
    after.kill().unwrap();
    after.wait().unwrap();
    let coll = f
        .client
        .database(DB)
        .collection::<dispenser::mongodb::bson::Document>(&business);
    coll.drop_index("number_1").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await; // its lease (1 s) runs out
    let out = cli(&f)
        .args(["gapless", "void", "inv", "3", "--reason", "x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("already carried"), "{err}");
    assert_eq!(coll.count_documents(doc! { "number": 3 }).await.unwrap(), 1);
    let a = common::audit(&d, &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean() && a.voided == 0, "{a:?}");
    let unique_on_number = || async {
        use futures::TryStreamExt;
        coll.list_indexes()
            .await
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .iter()
            .any(|ix| {
                ix.keys.contains_key("number")
                    && ix.options.as_ref().and_then(|o| o.unique) == Some(true)
            })
    };
    assert!(unique_on_number().await, "the void created the index again");
    // A handle opened before the drop makes sure of it too.
    let g = d
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    coll.drop_index("number_1").await.unwrap();
    let issued = common::issue_next(&g).await.unwrap();
    assert_eq!(issued, 4);
    assert!(
        unique_on_number().await,
        "the issue created the index again"
    );
}

/// A document whose number field holds the next number as a `Decimal128` or inside an array
/// used to wedge the sequence: every issue failed after its whole wait (~2 000 attempts),
/// a void said "being written by another caller", the audit said OK. Now it is
/// `CorruptDocument` naming the document's `_id` and the field, at once, and the audit
/// reports it.
#[tokio::test]
async fn a_number_stored_as_decimal128_or_in_an_array_is_reported_at_once_not_a_wedge() {
    let f = Fixture::new("gapless_malformed").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let g = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_wait(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(common::issue_next(&g).await.unwrap(), 1);
    assert_eq!(common::issue_next(&g).await.unwrap(), 2);
    g.flush().await.unwrap();
    let decimal: dispenser::mongodb::bson::Decimal128 = "3".parse().unwrap();
    for (id, bad) in [
        (
            "bad-decimal",
            dispenser::mongodb::bson::Bson::Decimal128(decimal),
        ),
        ("bad-array", dispenser::mongodb::bson::bson!([3, 9])),
    ] {
        g.business()
            .insert_one(doc! { "_id": id, "number": bad.clone() })
            .await
            .unwrap();
        let started = Instant::now();
        let e = common::issue_next(&g).await.unwrap_err();
        assert!(
            matches!(e, Error::CorruptDocument { .. }),
            "{id}: {e} after {:?}",
            started.elapsed()
        );
        let text = e.to_string();
        assert!(text.contains(id) && text.contains("\"number\""), "{text}");
        // At once: a wedge waited the whole wait (60 s here) first.
        assert!(started.elapsed() < Duration::from_secs(15), "{text}");
        let e = g.void(3, "x").await.unwrap_err();
        assert!(matches!(e, Error::CorruptDocument { .. }), "{e}");
        let out = cli(&f)
            .args(["audit", &business, "--field", "number", "--from", "1"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(text.starts_with("PROBLEMS") && text.contains(id), "{text}");
        g.business().delete_one(doc! { "_id": id }).await.unwrap();
    }
    assert_eq!(common::issue_next(&g).await.unwrap(), 3);
}

/// A refused ensure of a gap-free sequence (`gapless create --if-not-exists` with another
/// field, or another collection, than the sequence's) writes nothing: `gapless issue`, which
/// used to ensure, created a unique index on the field it was refused for. `gapless issue`
/// of a sequence that does not exist is refused (exit 3) and creates nothing.
#[tokio::test]
async fn a_refused_issue_writes_nothing_not_even_an_index() {
    use futures::TryStreamExt;
    let f = Fixture::new("gapless_refused").await;
    let business = format!("{}_inv", f.collection);
    let other = format!("{}_other", f.collection);
    assert_eq!(
        numbers(&issue_cmd(&f, &business, 1, "1").output().unwrap()),
        vec![1]
    );
    for (into, field) in [(business.as_str(), "other"), (other.as_str(), "number")] {
        let out = cli(&f)
            .args(["gapless", "create", "inv", "--if-not-exists"])
            .args(["--into", into, "--field", field])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{err}");
        assert!(err.contains(into) || err.contains(field), "{err}");
        assert!(err.contains("exists with another spec"), "{err}");
    }
    let out = cli(&f)
        .args(["gapless", "issue", "missing"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("missing"), "{err}");
    let d = f.dispenser(f.options());
    let listed: Vec<String> = d
        .list_gapless()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.unwrap().name)
        .collect();
    assert_eq!(listed, ["inv"]);
    let db = f.client.database(DB);
    let indexes: Vec<_> = db
        .collection::<dispenser::mongodb::bson::Document>(&business)
        .list_indexes()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(
        indexes.iter().all(|ix| !ix.keys.contains_key("other")),
        "{indexes:?}"
    );
    let names = db.list_collection_names().await.unwrap();
    assert!(!names.contains(&other), "{names:?}");
}

/// A timed-out operation says what it left behind: a read lost nothing, a gap-free
/// operation leaves no gap (the message used to say "any numbers it reserved are a gap"
/// for both).
#[tokio::test]
async fn timeouts_say_what_they_left_behind_reads_lose_nothing_gap_free_leaves_no_gap() {
    use crate::proxy::{Faults, Proxy};
    let f = Fixture::new("gapless_timeouts").await;
    let business = format!("{}_inv", f.collection);
    f.dispenser(f.options())
        .create("s", dispenser::Spec::default())
        .await
        .unwrap();
    f.dispenser(f.options())
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 7).await;
    let uri = proxy.uri("&serverSelectionTimeoutMS=2000&heartbeatFrequencyMS=500");
    let d = dispenser::Dispenser::connect(
        &uri,
        f.options()
            .with_operation_timeout(Duration::from_millis(400)),
    )
    .await
    .unwrap();
    let g = d.open_gapless("inv").await.unwrap();
    proxy.set_faults(Faults {
        drop_reply: 1.0,
        stall_share: 1.0,
        ..Faults::default()
    });
    let e = d.peek("s").await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Timeout { .. }), "{text}");
    assert!(
        text.contains("nothing is lost") && !text.contains("gap"),
        "{text}"
    );
    let e = g.peek().await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Timeout { .. }), "{text}");
    assert!(!text.contains("are a gap"), "{text}");
    let e = g.void(1, "x").await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Timeout { .. }), "{text}");
    assert!(!text.contains("are a gap"), "{text}");
}

/// A gap-free sequence stores its longest lease (5 minutes unless changed): a longer lease
/// is refused, nothing written; an admin raises it; a holder killed with a long lease blocks
/// no one once `gapless release` ends its lease (refused while it runs, unless --force:
/// an unwritten number is voided, a written one moved past) — or once the longest lease is
/// lowered below what it asked. It used to block every other caller for up to a day.
#[tokio::test]
async fn a_dead_holders_long_lease_is_capped_by_the_longest_lease_and_released_at_once() {
    let f = Fixture::new("gapless_release_cli").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let out = issue_cmd(&f, &business, 1, "86400").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("longest lease"), "{err}");
    let untouched = d.open_gapless("inv").await.unwrap().peek().await.unwrap();
    assert_eq!((untouched.next, untouched.lease.is_none()), (1, true));
    assert_eq!(
        numbers(&issue_cmd(&f, &business, 1, "10").output().unwrap()),
        vec![1]
    );
    let run = |args: &[&str]| {
        let out = cli(&f).arg("gapless").args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(&["alter", "inv", "--max-lease", "3600"]);
    assert_eq!(code, Some(0), "{err}");
    // Killed before writing 2, with an hour's lease.
    let (mut before, n) = holder_with(issue_cmd(&f, &business, 1, "3600"), "before");
    assert_eq!(n, 2);
    before.kill().unwrap();
    before.wait().unwrap();
    // Regression (issue 49, item 10): a release while the lease runs is a refusal, exit 6
    // (it was 2, "invalid input").
    let (code, _, err) = run(&["release", "inv", "2"]);
    assert_eq!(code, Some(6), "{err}");
    assert!(err.contains("could still land"), "{err}");
    let (code, out, err) = run(&["release", "inv", "3", "--force"]);
    assert_eq!(code, Some(2), "{out}{err}");
    let (code, out, err) = run(&["release", "inv", "2", "--force"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("2 voided"), "{out}");
    // Killed after writing 3: a forced release moves past it.
    let (mut after, n) = holder_with(issue_cmd(&f, &business, 1, "3600"), "after");
    assert_eq!(n, 3);
    after.kill().unwrap();
    after.wait().unwrap();
    let (code, out, err) = run(&["release", "inv", "3", "--force"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("3 was written"), "{out}");
    // Killed before writing 4; then the longest lease is lowered to 1 s: its lease counts
    // for that long, and the next issue gets 4.
    let (mut before, n) = holder_with(issue_cmd(&f, &business, 1, "3600"), "before");
    assert_eq!(n, 4);
    before.kill().unwrap();
    before.wait().unwrap();
    let (code, _, err) = run(&["alter", "inv", "--max-lease", "1"]);
    assert_eq!(code, Some(0), "{err}");
    let started = Instant::now();
    assert_eq!(
        numbers(&issue_cmd(&f, &business, 1, "1").output().unwrap()),
        vec![4]
    );
    // The lease counts for 1 s now (an hour before).
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let (code, out, _) = run(&["peek", "inv"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("next 5; no holder; 1 voided"), "{out}");
    assert!(out.contains("longest lease 1s"), "{out}");
    let a = common::audit(&d, &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean(), "{a:?}");
    assert_eq!((a.numbers, a.voids.clone()), (4, vec![2]));
}

/// The edge of 64 bits: a gap-free sequence's last number is `i64::MAX − 1` (`i64::MAX` is
/// where its `next` rests once every number is used). It can be issued, and it can be voided
/// — both move `next` to `i64::MAX` — and after either the sequence is exhausted. Before, a
/// void of `i64::MAX − 1` was refused as exhausted while an issue of it was not.
#[tokio::test]
async fn the_last_number_can_be_issued_or_voided_and_then_it_is_exhausted() {
    let f = Fixture::new("gapless_edge").await;
    let d = f.dispenser(f.options());
    let business = format!("{}_inv", f.collection);
    let last = i64::MAX - 1;
    let options = || GaplessOptions::new(&business, "number").with_start(last);
    let issued = d.ensure_gapless("issued", options()).await.unwrap();
    assert_eq!(common::issue_next(&issued).await.unwrap(), last);
    assert!(
        common::issue_next(&issued)
            .await
            .unwrap_err()
            .is_exhausted()
    );
    // A second sequence, on a business collection of its own.
    let other = format!("{}_inv_v", f.collection);
    let voided = d
        .ensure_gapless(
            "voided",
            GaplessOptions::new(&other, "number").with_start(last),
        )
        .await
        .unwrap();
    voided.void(last, "the last form, torn").await.unwrap();
    let s = voided.peek().await.unwrap();
    assert_eq!(s.next, i64::MAX);
    assert_eq!(s.voided.len(), 1);
    assert!(
        common::issue_next(&voided)
            .await
            .unwrap_err()
            .is_exhausted()
    );
    assert!(voided.void(i64::MAX, "no such number").await.is_err());
}

/// Issue 53: a business write that fails on its own unique index — an invoice for an order
/// that has one already, unique on `order_id` — is the business write's own failure: the
/// call fails at once with `BusinessWrite` naming the index, having written once, the
/// number released for the next caller. (A mutant that took the duplicate for "another
/// holder wrote the number" survived: it wrote again and again until its wait ran out.)
#[tokio::test]
async fn a_business_write_failing_on_its_own_unique_index_fails_at_once_naming_it() {
    use dispenser::mongodb::IndexModel;
    use dispenser::mongodb::options::IndexOptions;
    let f = Fixture::new("gapless_own_index").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let g = d
        .ensure_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_wait(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    let coll = g.business().clone();
    coll.create_index(
        IndexModel::builder()
            .keys(doc! { "order_id": 1 })
            .options(
                IndexOptions::builder()
                    .unique(true)
                    .name("one_invoice_per_order".to_owned())
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap();
    let writes = AtomicU32::new(0);
    let invoice = |order: i64| {
        let (coll, writes) = (coll.clone(), &writes);
        g.issue(move |n| {
            writes.fetch_add(1, SeqCst);
            let coll = coll.clone();
            async move {
                coll.insert_one(doc! { "number": n, "order_id": order })
                    .await
            }
        })
    };
    assert_eq!(invoice(7).await.unwrap().number, 1);
    writes.store(0, SeqCst);
    let e = invoice(7).await.unwrap_err();
    assert!(
        matches!(e, Error::BusinessWrite { number: 2, .. }),
        "a second invoice for order 7: {e}"
    );
    assert_eq!(e.written(), dispenser::error::Written::Nothing, "{e}");
    assert!(
        e.to_string().contains("order_id"),
        "the index is named: {e}"
    );
    assert_eq!(writes.load(SeqCst), 1, "the failed write was tried once");
    // Number 2 was released: the next order's invoice carries it, and the audit is clean.
    assert_eq!(invoice(8).await.unwrap().number, 2);
    let a = common::audit_of(&g, Some(1)).await.unwrap();
    assert!(a.is_clean(), "{a:?}");
}

/// Issue 53: a handle writing number after number renews its lease once a quarter of it (at
/// most 5 ms) has passed since it took it — in the write that confirms the numbers before —
/// so a long run of slow business writes never outlives its lease; and it never writes more
/// than 32 numbers under one lease. Each renewal is an `update` that takes the lease anew
/// (`$currentDate`). (A mutant that renewed only when both were true survived.)
#[tokio::test]
async fn a_handle_writing_number_after_number_renews_its_lease_by_time_and_by_count() {
    let f = Fixture::new("gapless_renew").await;
    let business = format!("{}_inv", f.collection);
    let state = format!("{}_gapless", f.collection);
    let (client, updates) = common::client_recording("update", &state).await;
    let g = dispenser::Dispenser::new(&client, f.options())
        .unwrap()
        .ensure_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let coll = g.business().clone();
    // (to, from) of every renewal: the update's new `next` and the `next` it matched.
    let renewals = || -> Vec<(i64, i64)> {
        updates
            .lock()
            .unwrap()
            .iter()
            .flat_map(|c| c.get_array("updates").unwrap().clone())
            .filter_map(|u| {
                let u = u.as_document().unwrap().clone();
                let update = u.get_document("u").unwrap();
                update.get_document("$currentDate").ok()?;
                let to = update
                    .get_document("$set")
                    .unwrap()
                    .get_i64("next")
                    .unwrap();
                let from = u.get_document("q").unwrap().get_i64("next").unwrap();
                Some((to, from))
            })
            .collect()
    };
    // Slow writes (10 ms each, more than 5 ms): the lease is renewed every other number.
    for want in 1..=10 {
        let n = g
            .issue(|n| {
                let coll = coll.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    coll.insert_one(doc! { "number": n }).await
                }
            })
            .await
            .unwrap()
            .number;
        assert_eq!(n, want);
    }
    // The lease taken with number k is renewed with number k + 2 at the latest (the number
    // written alongside the renewal comes under the new lease at once).
    let slow = renewals();
    assert!(slow.len() >= 4, "renewals in 10 slow writes: {slow:?}");
    for (to, from) in &slow {
        assert!(
            to - from <= 2,
            "{} slow numbers under one lease: {slow:?}",
            to - from
        );
    }
    // A fast burst: no lease covers more than 32 numbers.
    for _ in 0..200 {
        common::issue_next(&g).await.unwrap();
    }
    for (to, from) in renewals() {
        assert!(to - from <= 33, "{} numbers under one lease", to - from);
    }
}

/// Issue 50: a gap-free sequence has the whole lifecycle on the command line and over HTTP —
/// create (exit 6 / 409 when it exists), list, status, delete: refused while a holder's
/// lease runs (exit 6 / 409 `lease_held`, nothing deleted), done with force, recorded — and
/// the documents it numbered outlive it: created again from the same start, it moves past
/// every number they carry, the one the holder wrote after the delete included.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gap_free_sequence_is_created_listed_and_deleted_on_every_surface() {
    let f = Fixture::new("gapless_lifecycle").await;
    let business = format!("{}_inv", f.collection);
    let run = |args: &[&str]| cli(&f).args(args).output().unwrap();
    let err = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let create = [
        "gapless", "create", "inv", "--into", &business, "--field", "number", "--start", "100",
    ];
    let out = run(&create);
    assert!(out.status.success(), "{}", err(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("100, 101"));
    let again = run(&create);
    assert_eq!(again.status.code(), Some(6), "{}", err(&again));
    // A bad name is refused as a sequence's is, naming the kind.
    let bad = run(&[
        "gapless", "create", "$x", "--into", &business, "--field", "number",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", err(&bad));
    assert!(
        err(&bad).contains("invalid gap-free sequence name \"$x\": must not start with '$'"),
        "{}",
        err(&bad)
    );
    let listed = run(&["gapless", "list", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        (all[0]["name"].as_str(), all[0]["next"].as_i64()),
        (Some("inv"), Some(100)),
        "{all}"
    );
    // A holder holds 100: the delete is refused and deletes nothing.
    let d = f.dispenser(f.options());
    let g = d.open_gapless("inv").await.unwrap();
    let h = paused_holder(&g, "holder");
    h.holds().await;
    let refused = run(&["gapless", "delete", "inv"]);
    assert_eq!(refused.status.code(), Some(6), "{}", err(&refused));
    assert!(
        err(&refused).contains("held by a caller"),
        "{}",
        err(&refused)
    );
    assert_eq!(
        d.open_gapless("inv")
            .await
            .unwrap()
            .peek()
            .await
            .unwrap()
            .next,
        100
    );
    let forced = run(&["gapless", "delete", "inv", "--force"]);
    assert!(forced.status.success(), "{}", err(&forced));
    let gone = run(&["gapless", "peek", "inv"]);
    assert_eq!(gone.status.code(), Some(3), "{}", err(&gone));
    // The holder writes 100 after the delete; the documents stay.
    h.write.notify_one();
    within("the holder's write", h.written.notified()).await;
    let _ = within("the holder's call", h.task).await;
    let again = d
        .create_gapless(
            "inv",
            GaplessOptions::new(&business, "number").with_start(100),
        )
        .await
        .unwrap();
    assert_eq!(common::issue_next(&again).await.unwrap(), 101);
    let a = common::audit_of(&again, Some(100)).await.unwrap();
    assert!(a.is_clean() && a.duplicates.is_empty(), "{a:?}");
    // The history: created, deleted by force, created again.
    let h = d
        .history(dispenser::error::Kind::Gapless, "inv")
        .await
        .unwrap();
    let ops: Vec<_> = h
        .iter()
        .map(|e| (e.op.as_str(), e.params["force"].as_bool()))
        .collect();
    assert_eq!(
        ops,
        [("create", None), ("delete", Some(true)), ("create", None)],
        "{h:?}"
    );

    // Over HTTP.
    let svc = VoidService::start("gapless_lifecycle_http");
    let http = reqwest::Client::new();
    let url = |p: &str| format!("{}{p}", svc.base);
    let body = serde_json::json!({ "name": "web", "collection": format!("{}_web", svc.collection), "field": "n" });
    let send = |r: reqwest::RequestBuilder| async move {
        let r = r.bearer_auth(ADMIN).send().await.unwrap();
        let code = r.status().as_u16();
        (
            code,
            r.json::<serde_json::Value>().await.unwrap_or_default(),
        )
    };
    let (code, made) = send(http.post(url("/v1/gapless")).json(&body)).await;
    assert_eq!(
        (code, made["next"].as_i64(), made["created"].as_bool()),
        (201, Some(1), Some(true)),
        "{made}"
    );
    let (code, twice) = send(http.post(url("/v1/gapless")).json(&body)).await;
    assert_eq!(
        (code, twice["error"]["code"].as_str()),
        (409, Some("already_exists")),
        "{twice}"
    );
    assert!(
        twice["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gap-free sequence \"web\" already exists"),
        "{twice}"
    );
    let (code, list) = send(http.get(url("/v1/gapless"))).await;
    assert_eq!(
        (code, list["gapless"][0]["name"].as_str()),
        (200, Some("web")),
        "{list}"
    );
    let (code, _) = send(http.delete(url("/v1/gapless/web"))).await;
    assert_eq!(code, 204);
    let (code, _) = send(http.get(url("/v1/gapless/web"))).await;
    assert_eq!(code, 404);
}

/// A handle's `stats()` count what it did (issue 53: two mutants survived here): a read is
/// no write, and numbers written one after the other by one handle, with nobody else,
/// meet no conflict — past a run of 32 under one lease, the handle confirms the run and
/// takes the next lease in one write.
#[tokio::test]
async fn a_handles_stats_count_its_writes_and_no_conflict_when_alone() {
    let f = Fixture::new("gapless_stats").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    d.create_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let g = d.open_gapless("inv").await.unwrap();
    g.peek().await.unwrap();
    let read = g.stats();
    assert!(read.round_trips > 0, "{read:?}");
    assert_eq!(
        (read.writes, read.issued, read.conflicts),
        (0, 0, 0),
        "{read:?}"
    );
    for want in 1..=70 {
        assert_eq!(common::issue_next(&g).await.unwrap(), want);
    }
    let wrote = g.stats();
    assert_eq!(
        (wrote.issued, wrote.conflicts, wrote.waits),
        (70, 0, 0),
        "{wrote:?}"
    );
    assert!(wrote.writes >= 70, "{wrote:?}");
}

/// A handle issuing number after number writes its state once per run of `RUN` (32)
/// numbers or per `RENEW` (5 ms) of lease, not once per number: with business writes that take
/// no time, 64 numbers cost 64 business writes and a few state writes (issue 53: a renewal at
/// every number, which doubles the writes, went unnoticed).
#[tokio::test]
async fn a_burst_writes_its_state_once_per_run_not_once_per_number() {
    let f = Fixture::new("gapless_burst").await;
    let business = format!("{}_inv", f.collection);
    let g = f
        .dispenser(f.options())
        .create_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    for want in 1..=64 {
        let issued = g
            .issue(|n| async move { Ok::<_, std::io::Error>(n) })
            .await
            .unwrap();
        assert_eq!((issued.number, issued.value), (want, want));
    }
    let s = g.stats();
    assert_eq!(s.issued, 64, "{s:?}");
    // 64 business writes, the first lease, and its renewal at 33 that confirms 1 to 32: 66
    // on an idle machine; a pause of more than RENEW between two calls adds one or two.
    // Never renewing would be 65; renewing at every number, 128.
    assert!(s.writes >= 66 && s.writes <= 96, "{s:?}");
}

/// A forced release looks up what its holder wrote, and moves past exactly the run of
/// numbers from the held one on — not past documents further on that another writer put
/// there (issue 53: mutants of that look-up's run survived). A holder that wrote nothing has
/// its number voided although later numbers are used; one that wrote its number has the run
/// it ends moved past, up to the first number no document carries.
#[tokio::test]
async fn a_release_moves_past_exactly_the_run_its_holder_ended_not_documents_beyond_it() {
    use dispenser::gapless::{Gapless, Released};
    let f = Fixture::new("gapless_release_run").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let options = GaplessOptions::new(&business, "number").with_lease(Duration::from_secs(60));
    let g = d.create_gapless("inv", options).await.unwrap();
    let admin = d.open_gapless("inv").await.unwrap();
    let coll = g.business().clone();
    let put = |n: i64| {
        let coll = coll.clone();
        async move {
            coll.insert_one(doc! { "number": n, "by": "another app" })
                .await
                .unwrap();
        }
    };
    // A holder that takes its number, writes it or not, and stops there (its lease runs).
    let hold = |g: &Gapless, write: bool| {
        let (g, holding) = (g.clone(), Arc::new(Notify::new()));
        let told = holding.clone();
        let task = tokio::spawn(async move {
            let coll = g.business().clone();
            g.issue(move |n| {
                let (coll, told) = (coll.clone(), told.clone());
                async move {
                    if write {
                        coll.insert_one(doc! { "number": n, "by": "holder" })
                            .await?;
                    }
                    told.notify_one();
                    std::future::pending::<Result<(), dispenser::mongodb::error::Error>>().await
                }
            })
            .await
        });
        (task, holding)
    };

    // 3 and 4 are used by another app; the holder of 1 wrote nothing: 1 is voided.
    put(3).await;
    put(4).await;
    let (task, holding) = hold(&g, false);
    within("the holder of 1", holding.notified()).await;
    let released = admin.release(1, "its holder stopped").force(true).await;
    assert_eq!(released.unwrap(), Released::Voided(1));
    task.abort();

    // The holder of 2 wrote it: 2, 3, 4 are a run, moved past; 6 (also another app's) is not
    // part of it.
    put(6).await;
    let (task, holding) = hold(&g, true);
    within("the holder of 2", holding.notified()).await;
    let released = admin.release(2, "its holder stopped").force(true).await;
    assert_eq!(released.unwrap(), Released::Used { first: 2, last: 4 });
    task.abort();
    assert_eq!(common::issue_next(&admin).await.unwrap(), 5);
    assert_eq!(common::issue_next(&admin).await.unwrap(), 7);
    let a = common::audit(&d, &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean(), "{a:?}");
}

/// A caller that waits for a handle issuing number after number gets in: it says on the
/// lease that it waits, and the busy handle lets go at its next number instead of keeping
/// its lease for its whole burst (issue 53: a mutant that never says so survived; the
/// waiter then waited out its whole wait and failed with `Contention`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_waiting_for_a_busy_handle_gets_in_before_its_wait_runs_out() {
    use std::sync::atomic::AtomicBool;
    let f = Fixture::new("gapless_waiter").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let options = GaplessOptions::new(&business, "number").with_wait(Duration::from_secs(60));
    let busy = d.create_gapless("inv", options.clone()).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let task = {
        let (busy, stop) = (busy.clone(), stop.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            while !stop.load(SeqCst) && started.elapsed() < Duration::from_secs(40) {
                common::issue_next(&busy).await.unwrap();
            }
        })
    };
    within("the busy handle's first numbers", async {
        while busy.stats().issued < 5 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let waiter = d
        .ensure_gapless("inv", options.with_wait(Duration::from_secs(20)))
        .await
        .unwrap();
    let started = Instant::now();
    let got = common::issue_next(&waiter).await;
    let waited = started.elapsed();
    let still_busy = !task.is_finished();
    stop.store(true, SeqCst);
    task.await.unwrap();
    let n = got.unwrap_or_else(|e| panic!("after {waited:?}: {e}"));
    assert!(n > 5, "{n}");
    assert!(
        still_busy,
        "the busy handle stopped first: the waiter got in only then"
    );
    assert!(waited < Duration::from_secs(15), "{waited:?}");
    busy.flush().await.unwrap();
    let a = common::audit(&d, &business, "number", Some(1))
        .await
        .unwrap();
    assert!(a.is_clean(), "{a:?}");
}

/// A gap-free sequence over a collection whose documents cannot all be told apart by the field
/// (two lack it: a unique index counts a missing field as null) is refused naming the
/// collection and the field, from the library and the command line; nothing is written. It
/// was a database error ("503 database" over HTTP).
#[tokio::test]
async fn a_collection_the_unique_index_cannot_be_built_on_is_refused_naming_it() {
    use dispenser::mongodb::bson::Document;
    let f = Fixture::new("gapless_unindexable").await;
    let business = format!("{}_old", f.collection);
    f.client
        .database(DB)
        .collection::<Document>(&business)
        .insert_many([doc! { "other": 1 }, doc! { "other": 2 }])
        .await
        .unwrap();
    let d = f.dispenser(f.options());
    let e = d
        .create_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(
        matches!(e, Error::InvalidArgument { .. })
            && m.contains(&format!("{business}.number"))
            && m.contains("missing field"),
        "{m}"
    );
    assert!(d.open_gapless("inv").await.is_err(), "nothing written");
    let out = cli(&f)
        .args([
            "gapless", "create", "inv", "--into", &business, "--field", "number",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("number"),
        "{out:?}"
    );
}

/// A waiter looks up the number of a live holder only once that same holder has held it for a
/// while: holders handing the lease on quickly cost it no look-up of the business collection,
/// one holder that stays is looked up again and again (issue 63: the watch's `&&` → `||`, which
/// looks up whenever any holder was seen a while ago, survived with no test of how often a
/// waiter reads).
#[tokio::test]
async fn a_waiter_looks_up_a_holder_that_stays_not_each_of_quick_hand_overs() {
    use dispenser::mongodb::bson::{Document, oid::ObjectId};
    let f = Fixture::new("gapless_watch").await;
    let business = format!("{}_inv", f.collection);
    let (client, finds) = common::client_recording("find", &business).await;
    let d = dispenser::Dispenser::new(&client, f.options()).unwrap();
    let options = GaplessOptions::new(&business, "number").with_wait(Duration::from_secs(30));
    let g = d.create_gapless("inv", options).await.unwrap();
    let state = f
        .client
        .database(DB)
        .collection::<Document>(&format!("{}_gapless", f.collection));
    // Another holder takes the lease, for a minute (as the library's take writes it).
    let hold = |holder: Option<ObjectId>| {
        state.update_one(
            doc! { "_id": "inv" },
            doc! {
                "$set": { "lease.holder": holder, "lease.ms": 60_000_i64 },
                "$currentDate": { "lease.at": true },
            },
        )
    };
    hold(Some(ObjectId::new())).await.unwrap();
    finds.lock().unwrap().clear();
    let waiter = tokio::spawn({
        let g = g.clone();
        async move { common::issue_next(&g).await }
    });
    // Quick hand-overs: a new holder every 10 ms, each far under the 50 ms a waiter lets one
    // hold before it looks.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(600) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        hold(Some(ObjectId::new())).await.unwrap();
    }
    let quick = finds.lock().unwrap().len();
    // One holder that stays as long.
    hold(Some(ObjectId::new())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let staying = finds.lock().unwrap().len() - quick;
    hold(None).await.unwrap();
    let n = within("the waiter's number", waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 1);
    assert!(
        staying >= 8 && quick * 4 < staying,
        "look-ups of the business collection: {quick} over 60 quick holders, {staying} under one that stayed"
    );
}

/// A holder whose process returned its number and stopped before confirming it leaves a live
/// lease on a used number. A caller that finds the same live holder there for a while looks
/// the number up and moves past it once it is used, instead of waiting out the lease (here a
/// minute) — also when the number was written only after the caller had waited longer than
/// the pause before its first look-up. The holder's confirmation is held at a proxy forever,
/// as if its process had stopped (issue 53: mutants that never helped, helped only early, or
/// forgot the holder at every look, survived).
#[tokio::test]
async fn a_caller_moves_past_a_live_lease_on_a_used_number_instead_of_waiting_it_out() {
    use crate::proxy::{Faults, Proxy};
    let f = Fixture::new("gapless_help").await;
    let business = format!("{}_inv", f.collection);
    let state = format!("{}_gapless", f.collection);
    let d = f.dispenser(f.options());
    let options = GaplessOptions::new(&business, "number").with_lease(Duration::from_secs(60));
    d.create_gapless("inv", options.clone()).await.unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 5).await;
    let holder = dispenser::Dispenser::connect(&proxy.uri(""), f.options())
        .await
        .unwrap()
        .open_gapless("inv")
        .await
        .unwrap();
    // Its number is taken with findAndModify; the first update is the confirmation.
    let _never = proxy.hold_next("update", &state);
    let holder = paused_holder(&holder, "holder");
    within("the holder", holder.holding.notified()).await;
    let other = d
        .ensure_gapless("inv", options.with_wait(Duration::from_secs(5)))
        .await
        .unwrap();
    let started = Instant::now();
    let call = tokio::spawn({
        let other = other.clone();
        async move { common::issue_next(&other).await }
    });
    // The caller waits, looks the number up, finds nothing; then the holder writes it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.write.notify_one();
    let written = within("the holder", holder.task).await.unwrap().unwrap();
    assert_eq!(written.number, 1);
    let n = within("the caller", call)
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("after {:?}: {e}", started.elapsed()));
    assert_eq!(n, 2);
    let s = other.stats();
    assert_eq!((s.issued, s.retries), (1, 1), "{s:?}");
}

/// A caller that waits out its wait behind a live holder fails with `Contention` saying how
/// many times it tried to take the lease, and says on the lease that it waits, once — unless
/// another caller said so already (issue 53: a count that stayed at 0, and a waiter that said
/// so again, went unnoticed).
#[tokio::test]
async fn contention_says_how_many_times_the_caller_tried_the_lease() {
    let f = Fixture::new("gapless_attempts").await;
    let business = format!("{}_inv", f.collection);
    let d = f.dispenser(f.options());
    let options = GaplessOptions::new(&business, "number").with_lease(Duration::from_secs(60));
    let g = d.create_gapless("inv", options.clone()).await.unwrap();
    let holder = paused_holder(&g, "holder");
    within("the holder", holder.holding.notified()).await;
    // Each waiter's writes are its tries of the lease, and the first one's word that it
    // waits; the second finds that word there and writes none.
    for (which, says) in [("first", 1), ("second", 0)] {
        let waiter = d
            .ensure_gapless("inv", options.clone().with_wait(Duration::from_millis(400)))
            .await
            .unwrap();
        let e = common::issue_next(&waiter).await.unwrap_err();
        let s = waiter.stats();
        match &e {
            Error::Contention { attempts, .. } => {
                assert!(*attempts > 1, "{which}: {e}");
                assert_eq!(s.writes, u64::from(*attempts) + says, "{which}: {e} {s:?}");
            }
            other => panic!("{which}: {other}"),
        }
        assert_eq!(s.issued, 0);
    }
    holder.write.notify_one();
    let issued = within("the holder", holder.task).await.unwrap().unwrap();
    assert_eq!(issued.number, 1);
}

/// `gapless issue` opens the sequence with its stored settings and the lease asked. An admin
/// changing the longest lease between its two reads of them is no spec conflict: it reads
/// them again and issues (it exited 6, "exists with another spec: max lease …", a race the
/// gap-free model test met). The second read is held at a proxy while the admin alters.
#[tokio::test]
async fn gapless_issue_is_not_refused_when_the_longest_lease_changes_while_it_opens() {
    use crate::proxy::{Faults, Proxy};
    let f = Fixture::new("gapless_issue_alter_race").await;
    let business = format!("{}_inv", f.collection);
    let state = format!("{}_gapless", f.collection);
    let g = f
        .dispenser(f.options())
        .create_gapless("inv", GaplessOptions::new(&business, "number"))
        .await
        .unwrap();
    let proxy = Proxy::to_test_server(Faults::default(), 3).await;
    let second_read = proxy.hold_after("find", &state, 1);
    let child = cli(&f)
        .env("MONGODB_URI", proxy.uri(""))
        .args(["gapless", "issue", "inv", "--lease", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    within("the second read of the settings", second_read.arrived()).await;
    g.alter(GaplessAlter::default().with_max_lease(Duration::from_secs(60)))
        .await
        .unwrap();
    second_read.open();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(numbers(&out), vec![1]);
}

/// Issue 60: a gap-free sequence with void extras is made from the command line
/// (`--void-extra JSON`) and over HTTP (`void_extra`) as from the library and the bindings,
/// and a void then writes them; what is not an object of plain field names is refused,
/// nothing made. A release answers the library's shape (`gapless release --json`).
#[tokio::test]
async fn void_extras_are_set_from_the_command_line_and_over_http() {
    let f = Fixture::new("gapless_void_extra").await;
    let business = format!("{}_inv", f.collection);
    let run = |args: &[&str]| cli(&f).args(args).output().unwrap();
    let err = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let create = |extra: &str| {
        run(&[
            "gapless",
            "create",
            "inv",
            "--into",
            &business,
            "--field",
            "n",
            "--void-extra",
            extra,
        ])
    };
    for (bad, says) in [("VOID", "not JSON"), ("[1]", "must be a JSON object")] {
        let out = create(bad);
        assert_eq!(out.status.code(), Some(2), "{}", err(&out));
        assert!(
            err(&out).contains("--void-extra") && err(&out).contains(says),
            "{}",
            err(&out)
        );
    }
    let d = f.dispenser(f.options());
    assert!(matches!(
        d.open_gapless("inv").await,
        Err(Error::NotFound { .. })
    ));
    let out = create(r#"{"status":"VOID","total":0}"#);
    assert!(out.status.success(), "{}", err(&out));
    let out = run(&["gapless", "void", "inv", "1", "--reason", "misprint"]);
    assert!(out.status.success(), "{}", err(&out));
    let db = f.client.database(DB);
    let voided = db
        .collection::<dispenser::mongodb::bson::Document>(&business)
        .find_one(doc! { "n": 1 })
        .await
        .unwrap()
        .expect("the void document");
    assert_eq!(
        (
            voided.get_str("status"),
            voided
                .get_i64("total")
                .or(voided.get_i32("total").map(i64::from))
        ),
        (Ok("VOID"), Ok(0)),
        "{voided:?}"
    );
    // A release of a number nobody holds is refused; of a held one, the library's shape.
    let g = d.open_gapless("inv").await.unwrap();
    let h = paused_holder(&g, "holder");
    h.holds().await;
    let out = run(&["gapless", "release", "inv", "2", "--force", "--json"]);
    assert!(out.status.success(), "{}", err(&out));
    let released: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        released,
        serde_json::json!({ "outcome": "voided", "number": 2 })
    );
    h.write.notify_one();
    within("the holder's write", h.written.notified()).await;
    let _ = within("the holder's call", h.task).await;

    // Over HTTP.
    let svc = VoidService::start("gapless_void_extra_http");
    let http = reqwest::Client::new();
    let web = format!("{}_web", svc.collection);
    let send = |body: serde_json::Value| {
        let r = http
            .post(format!("{}/v1/gapless", svc.base))
            .bearer_auth(ADMIN)
            .json(&body);
        async move {
            let r = r.send().await.unwrap();
            let code = r.status().as_u16();
            (
                code,
                r.json::<serde_json::Value>().await.unwrap_or_default(),
            )
        }
    };
    let body = |extra: serde_json::Value| serde_json::json!({ "name": "web", "collection": web, "field": "n", "void_extra": extra });
    for (bad, status) in [
        (serde_json::json!("VOID"), 400),
        (serde_json::json!({ "$set": 1 }), 422),
        (serde_json::json!({ "a.b": 1 }), 422),
    ] {
        let (code, answer) = send(body(bad.clone())).await;
        assert_eq!(code, status, "{bad}: {answer}");
    }
    let (code, made) = send(body(serde_json::json!({ "status": "VOID" }))).await;
    assert_eq!(
        (code, made["created"].as_bool()),
        (201, Some(true)),
        "{made}"
    );
    let (code, voided) = {
        let r = http
            .post(format!("{}/v1/gapless/web/void", svc.base))
            .bearer_auth(ADMIN)
            .json(&serde_json::json!({ "number": 1, "reason": "torn" }))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    assert_eq!(code, 200, "{voided}");
    let doc = db
        .collection::<dispenser::mongodb::bson::Document>(&web)
        .find_one(doc! { "n": 1 })
        .await
        .unwrap()
        .expect("the void document");
    assert_eq!(doc.get_str("status"), Ok("VOID"), "{doc:?}");
}
