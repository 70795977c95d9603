//! `dispenser doctor`: it accepts the test server, refuses FerretDB 1.24 / SQLite
//! (a real server that loses concurrent updates, built by `scripts/ferretdb.sh`) naming the
//! lost updates, stays within its time limit on a slow server, removes its scratch
//! collection, prints JSON, and keeps its exit codes (0 fit, 1 unfit, 2 usage, 5 connection).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dispenser::doctor::{DoctorOptions, ProblemKind};
use dispenser::mongodb::options::{Acknowledgment, WriteConcern};
use dispenser::{Dispenser, Options};
use serde_json::Value;

use crate::common::{self, DB};
use crate::gate;
use crate::proxy::{Faults, Proxy};

const EXIT_UNFIT: i32 = 1;
const EXIT_INVALID: i32 = 2;
const EXIT_DATABASE: i32 = 5;

/// `dispenser --uri URI --db DB doctor ARGS…`: (exit code, stdout, stderr).
async fn doctor(uri: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env_remove("MONGODB_URI")
        .env_remove("DISPENSER_LOG")
        .args(["--uri", uri, "--db", DB, "doctor"])
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run dispenser doctor");
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

fn json(out: &str) -> Value {
    assert_eq!(out.lines().count(), 1, "one JSON line: {out}");
    serde_json::from_str(out).expect("JSON")
}

/// Whether `collection` exists in the test database of the server at `uri`.
async fn exists(uri: &str, collection: &str) -> bool {
    let client = dispenser::mongodb::Client::with_uri_str(uri)
        .await
        .expect("client");
    client
        .database(DB)
        .list_collection_names()
        .await
        .expect("list collections")
        .iter()
        .any(|n| n == collection)
}

/// What every report must show: the scratch collection gone, on the server's own word too.
async fn assert_scratch_removed(uri: &str, report: &Value) {
    let scratch = &report["scratch"];
    assert_eq!(scratch["database"], DB, "{report}");
    let name = scratch["collection"].as_str().expect("scratch collection");
    assert!(name.starts_with("dispenser_doctor_"), "{name}");
    assert_eq!(scratch["removed"], true, "{report}");
    assert!(!exists(uri, name).await, "{name} is still there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_accepts_the_test_server_and_removes_its_scratch_collection() {
    common::ready();
    let uri = common::uri();
    // As a user runs it (text), with time to spare on a loaded machine.
    let (code, out, err) = doctor(&uri, &["--time-limit", "60"]).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(err.is_empty(), "{err}");
    let last = out.lines().last().expect("a verdict line");
    assert_eq!(
        last,
        "fit: every check passed; the library's promise can hold on this server"
    );
    for line in [
        "server ",
        "version ",
        "topology ",
        "write concern  ok",
        "scratch ",
    ] {
        assert!(out.contains(line), "{line:?} missing: {out}");
    }
    assert!(!out.contains("FAIL"), "{out}");

    let (code, out, err) = doctor(&uri, &["--json", "--time-limit", "60"]).await;
    assert_eq!(code, Some(0), "{err}");
    let r = json(&out);
    assert_eq!(r["fit"], true, "{r}");
    assert_eq!(r["reason"], Value::Null);
    assert_eq!(r["problems"], serde_json::json!([]));
    assert_eq!(r["uri"], dispenser::error::redact::redact_uri(&uri));
    assert!(r["server"]["max_wire_version"].as_i64() >= Some(9), "{r}");
    assert_eq!(r["write_concern"]["majority_journaled"], true);
    let ops = r["operations"].as_array().expect("operations");
    let names: Vec<_> = ops
        .iter()
        .map(|o| o["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        ["findAndModify", "updateOne", "insert", "unique index"]
    );
    assert!(ops.iter().all(|o| o["ok"] == true), "{r}");
    // The defaults: 8 tasks × 200 increments, 8 × 100 compare-and-set wins, all distinct.
    let p = &r["probe"];
    assert_eq!(p["tasks"], 8);
    let inc = &p["increments"];
    assert_eq!(inc["library_operation"], true);
    for key in ["planned", "acknowledged", "distinct", "final_value"] {
        assert_eq!(inc[key], 1600, "{key}: {inc}");
    }
    let cas = &p["compare_and_set"];
    for key in ["planned", "wins", "distinct", "final_value"] {
        assert_eq!(cas[key], 800, "{key}: {cas}");
    }
    let ins = &p["inserts"];
    assert_eq!(
        (
            &ins["tasks"],
            &ins["inserted"],
            &ins["duplicate_key"],
            &ins["documents"]
        ),
        (
            &Value::from(8),
            &Value::from(1),
            &Value::from(7),
            &Value::from(1)
        )
    );
    assert_eq!(r["time_limit_seconds"], 60.0);
    assert!(r["elapsed_seconds"].as_f64() < Some(60.0), "{r}");
    assert_scratch_removed(&uri, &r).await;
}

/// FerretDB 1.24.2 with its SQLite backend, built by `scripts/ferretdb.sh install` on first use
/// (once per machine, into the tool cache; it waits for a build already under way, as `.ci/run`
/// starts one beside its builds), on a free port; killed and its files removed when dropped.
struct FerretDb {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl FerretDb {
    fn start() -> FerretDb {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        // Links the build from the cache (in well under a second once built), else builds it.
        let install = Command::new(root.join("scripts/ferretdb.sh"))
            .arg("install")
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/ferretdb.sh install");
        assert!(
            install.status.success(),
            "scripts/ferretdb.sh install failed ({}): {}",
            install.status,
            String::from_utf8_lossy(&install.stderr)
        );
        let mut last = String::new();
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let dir = std::env::temp_dir()
                .join(format!("dispenser-ferretdb-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("FerretDB dir");
            let log = std::fs::File::create(dir.join("log")).expect("FerretDB log");
            let child = Command::new(root.join("scripts/ferretdb.sh"))
                .args(["run", "--port", &port.to_string(), "--dir"])
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("start scripts/ferretdb.sh run");
            let mut f = FerretDb { child, dir, port };
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(20) {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return f;
                }
                if let Ok(Some(status)) = f.child.try_wait() {
                    last = format!(
                        "exited with {status}: {}",
                        std::fs::read_to_string(f.dir.join("log")).unwrap_or_default()
                    );
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if last.is_empty() {
                last = "did not listen within 20 s".to_owned();
            }
        }
        panic!("FerretDB did not start: {last}");
    }

    fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/", self.port)
    }
}

impl Drop for FerretDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The regression test of doctor's reason to exist: a server that loses concurrent updates is refused, and
/// the reason names the lost updates. Before doctor, the library ran on FerretDB silently
/// issuing numbers twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_refuses_ferretdb_which_loses_updates() {
    let ferret = FerretDb::start();
    let uri = ferret.uri();
    let (code, out, err) = doctor(&uri, &["--json", "--time-limit", "60"]).await;
    assert_eq!(code, Some(EXIT_UNFIT), "{out}{err}");
    let r = json(&out);
    assert_eq!(r["fit"], false);
    assert_eq!(r["server"]["product"], "FerretDB v1.24.2", "{r}");
    let reason = r["reason"].as_str().expect("a reason");
    assert_eq!(r["problems"][0]["kind"], "lost_updates", "{r}");
    let inc = &r["probe"]["increments"];
    // Its findAndModify refuses a projection (NotImplemented 238): the probe increments
    // without one, and sees the losses. It sends 1 600; on a loaded machine FerretDB fails
    // some of them (not acknowledged: no number, nothing to compare), so the count is of
    // those acknowledged (a run at load 14: 1 212), and fewer distinct values came back.
    assert_eq!(inc["library_operation"], false, "{inc}");
    let acknowledged = inc["acknowledged"].as_u64().expect("a count");
    assert!((100..=1600).contains(&acknowledged), "{inc}");
    assert!(
        reason.starts_with(&format!(
            "lost updates: {} acknowledged increments returned ",
            dispenser_grouped(acknowledged)
        )),
        "{reason}"
    );
    assert!(inc["distinct"].as_u64() < Some(acknowledged), "{inc}");
    let cas = &r["probe"]["compare_and_set"];
    assert!(cas["distinct"].as_u64() < cas["wins"].as_u64(), "{cas}");
    let find_and_modify = &r["operations"][0];
    assert_eq!(find_and_modify["ok"], false);
    assert!(
        find_and_modify["detail"]
            .as_str()
            .unwrap_or("")
            .contains("238"),
        "{find_and_modify}"
    );
    assert_scratch_removed(&uri, &r).await;

    // As text: the reason is the last line, one line.
    let (code, out, _) = doctor(&uri, &["--time-limit", "60"]).await;
    assert_eq!(code, Some(EXIT_UNFIT), "{out}");
    let last = out.lines().last().expect("a verdict line");
    assert!(last.starts_with("UNFIT: lost updates: "), "{last}");

    // The suite's gate is the same examination: it refuses FerretDB too.
    let refused = gate::verdict(
        &uri,
        DoctorOptions::default().with_time_limit(Duration::from_secs(60)),
    )
    .await
    .expect_err("the gate must refuse FerretDB");
    assert!(
        refused.contains("is unfit for the library: lost updates"),
        "{refused}"
    );
    assert!(refused.contains("really FerretDB v1.24.2"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_stays_within_its_time_limit_on_a_slow_server_and_still_cleans_up() {
    common::ready();
    // Every reply up to 40 ms late: 8 tasks × 2000 increments need about 40 s, far beyond
    // the bounds below, which leave room for a loaded machine (the limit is 2 s).
    let faults = Faults {
        max_latency: Duration::from_millis(40),
        ..Faults::default()
    };
    let proxy = Proxy::to_test_server(faults, 22).await;
    let started = Instant::now();
    let (code, out, err) = doctor(
        &proxy.uri(""),
        &["--json", "--time-limit", "2", "--increments", "2000"],
    )
    .await;
    let wall = started.elapsed();
    assert_eq!(code, Some(EXIT_UNFIT), "{out}{err}");
    let r = json(&out);
    let reason = r["reason"].as_str().expect("a reason");
    assert!(
        reason.starts_with("inconclusive: the time limit ran out after "),
        "{reason}"
    );
    assert_eq!(r["probe"]["cut_short"], true);
    assert_eq!(r["problems"].as_array().map(Vec::len), Some(1), "{r}");
    // The examination itself ends at its limit (operations are cut there); the process adds
    // its start and the connection.
    let elapsed = r["elapsed_seconds"].as_f64().expect("elapsed");
    assert!(elapsed <= 4.0, "the examination took {elapsed} s of 2");
    assert!(wall < Duration::from_secs(15), "the command took {wall:?}");
    assert_scratch_removed(&common::uri(), &r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_refuses_an_unjournaled_write_concern() {
    common::ready();
    let client = common::client().await;
    let w1 = WriteConcern::builder().w(Acknowledgment::Nodes(1)).build();
    let d = Dispenser::new(
        &client,
        Options::default().with_database(DB).with_write_concern(w1),
    )
    .expect("valid options");
    let report = d
        .doctor()
        .options(DoctorOptions::default().with_time_limit(Duration::from_secs(60)))
        .await
        .expect("examined");
    assert!(!report.is_fit());
    assert!(report.write_concern.majority_journaled, "{report:?}");
    assert!(!report.write_concern.configured_safe);
    let kinds: Vec<_> = report.problems.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, [ProblemKind::WriteConcern], "{:?}", report.problems);
    let reason = report.reason().expect("a reason");
    assert!(
        reason.starts_with("the dispenser's write concern is w: 1, j: default: "),
        "{reason}"
    );
    assert!(report.scratch.removed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_usage_errors_exit_2_name_the_flag_and_send_nothing() {
    common::ready();
    let uri = common::uri();
    let db = common::unique("doctor_usage");
    for (args, named) in [
        (&["--tasks", "1"][..], "--tasks"),
        (&["--tasks", "65"], "--tasks"),
        (&["--increments", "0"], "--increments"),
        (&["--increments", "x"], "--increments"),
        (&["--time-limit", "0"], "--time-limit"),
        (&["--time-limit", "3601"], "--time-limit"),
        (&["--time-limit", "soon"], "--time-limit"),
        (&["--bogus"], "--bogus"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .args(["--uri", &uri, "--db", &db, "doctor"])
            .args(args)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(EXIT_INVALID), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let client = common::client().await;
    let written = client
        .database(&db)
        .list_collection_names()
        .await
        .expect("list");
    assert!(written.is_empty(), "usage errors wrote {written:?}");
    // The library refuses bad options before sending anything: an unreachable server is
    // never tried.
    let d = Dispenser::connect("mongodb://127.0.0.1:1", Options::default())
        .await
        .expect("a client");
    let e = d
        .doctor()
        .options(DoctorOptions::default().with_tasks(1))
        .await
        .expect_err("invalid");
    assert!(e.kind() == dispenser::error::ErrorKind::InvalidInput, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_an_unreachable_server_as_exit_5_and_never_prints_the_password() {
    let (code, out, err) = doctor("mongodb://app:hunter2@127.0.0.1:1/", &[]).await;
    assert_eq!(code, Some(EXIT_DATABASE), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("127.0.0.1:1: connection refused"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");

    // Through a proxy that accepts any login: a fit report, the password nowhere.
    common::ready();
    let proxy = Proxy::to_test_server(Faults::default(), 5).await;
    proxy.accept_any_plain_login();
    let uri = format!(
        "mongodb://app:hunter2@{}/?directConnection=true&authMechanism=PLAIN",
        proxy.addr
    );
    for args in [
        &["--time-limit", "60"][..],
        &["--json", "--time-limit", "60"],
    ] {
        let (code, out, err) = doctor(&uri, args).await;
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(
            !out.contains("hunter2") && !err.contains("hunter2"),
            "{out}{err}"
        );
        assert!(
            out.contains(&dispenser::error::redact::redact_uri(&uri)),
            "{out}"
        );
    }
}

/// A count as doctor writes it: groups of three digits separated by a space (`1 600`).
fn dispenser_grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[tokio::test]
async fn the_doctor_builder_refuses_bad_options_before_sending_anything() {
    // An unreachable server: whatever is sent fails as a database error, so InvalidArgument
    // shows nothing was.
    let d = Dispenser::connect("mongodb://127.0.0.1:1", Options::default())
        .await
        .expect("a client");
    for (bad, named) in [
        (DoctorOptions::default().with_tasks(65), "doctor tasks"),
        (DoctorOptions::default().with_swaps(0), "doctor swaps"),
        (
            DoctorOptions::default().with_time_limit(Duration::ZERO),
            "doctor time limit",
        ),
    ] {
        let err = d.doctor().options(bad).await.unwrap_err();
        assert!(
            matches!(&err, dispenser::Error::InvalidArgument { what, .. } if what == named),
            "{bad:?}: {err}"
        );
    }
}
