//! The `dispenser` binary: commands, output, exit codes, bad input, no leaked passwords.

use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Output};

use crate::common::{self, DB};

const EXIT_INVALID: i32 = 2;
const EXIT_NO_SUCH: i32 = 3;
const EXIT_EXHAUSTED: i32 = 4;
const EXIT_DATABASE: i32 = 5;
const EXIT_CONFLICT: i32 = 6;

/// The CLI pointed at the test server and a fresh collection.
struct Cli {
    collection: String,
}

impl Cli {
    fn new(test: &str) -> Self {
        common::ready();
        Cli {
            collection: common::unique(test),
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
        c.env("MONGODB_URI", common::uri())
            .args(["--db", DB, "--collection", &self.collection]);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run dispenser")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// Runs a command that must fail with `code`, and returns its single stderr line.
    fn fails(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} printed {:?}", out.stdout);
        stderr
    }
}

fn numbers(stdout: &str) -> Vec<i64> {
    stdout
        .lines()
        .map(|l| l.parse().expect("a number per line"))
        .collect()
}

/// Regression (issue 50): `create --format` created, then altered (two writes), so
/// `create --if-not-exists --format X` on a sequence stored with format Y silently changed
/// it to X. The format is now part of what create writes (one insert) and what
/// `--if-not-exists` compares: another format is refused, naming both, and nothing changes.
#[test]
fn create_if_not_exists_with_another_format_is_refused_and_changes_nothing() {
    let cli = Cli::new("cli_format_ensure");
    cli.ok(&["create", "inv", "--format", "Y-{n}"]);
    let before: serde_json::Value =
        serde_json::from_str(&cli.ok(&["peek", "inv", "--json"])).unwrap();
    assert_eq!(before["format"], "Y-{n}");
    assert_eq!(before["version"], 0, "one insert, no alter after it");
    // Another format (what an alter changes): kept, and said (issue 60); exit 0.
    let out = cli.run(&["create", "inv", "--if-not-exists", "--format", "X-{n}"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "dispenser: sequence inv exists with format \"Y-{n}\" (asked \"X-{n}\"): changed since by an alter; kept as it is"
    );
    // None asked and one stored differs too: the whole spec is compared.
    let out = cli.run(&["create", "inv", "--if-not-exists"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("format \"Y-{n}\" (asked none)"),
        "{out:?}"
    );
    // Another start (which nothing changes) is still refused.
    let err = cli.fails(
        &[
            "create",
            "inv",
            "--if-not-exists",
            "--start",
            "5",
            "--format",
            "Y-{n}",
        ],
        EXIT_CONFLICT,
    );
    assert_eq!(
        err.trim(),
        "dispenser: sequence \"inv\" exists with another spec: start 1 (asked 5); nothing was written"
    );
    let after: serde_json::Value =
        serde_json::from_str(&cli.ok(&["peek", "inv", "--json"])).unwrap();
    assert_eq!(after, before, "nothing changed");
    let out = cli.run(&["create", "inv", "--if-not-exists", "--format", "Y-{n}"]);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
}

/// Regression (issue 60): after an operator's `alter`, the app's start-up `create
/// --if-not-exists` with the spec in its code failed (exit 6) on every kind; it opens, keeps
/// what the alter set, and says each setting on stderr.
#[test]
fn if_not_exists_after_an_alter_keeps_the_alter_on_every_kind() {
    let cli = Cli::new("cli_ensure_after_alter");
    let business = format!("{}_inv", cli.collection);
    for (create, alter, ensure, said) in [
        (
            vec!["create", "x", "--max", "99"],
            vec!["alter", "x", "--max", "200"],
            vec!["create", "x", "--max", "99", "--if-not-exists"],
            "dispenser: sequence x exists with max 200 (asked 99): changed since by an alter; kept as it is",
        ),
        (
            vec!["create", "ids", "--stripes", "2", "--max", "99"],
            vec!["alter", "ids", "--max", "1001"],
            vec![
                "create",
                "ids",
                "--stripes",
                "2",
                "--max",
                "99",
                "--if-not-exists",
            ],
            "dispenser: striped sequence ids exists with max 1001 (asked 99)",
        ),
        (
            vec!["queue", "create", "q", "--max", "99"],
            vec!["queue", "alter", "q", "--max", "200"],
            vec!["queue", "create", "q", "--max", "99", "--if-not-exists"],
            "dispenser: queue q exists with max 200 (asked 99): changed since by an alter; kept as it is",
        ),
        (
            vec![
                "gapless", "create", "g", "--into", &business, "--field", "n",
            ],
            vec!["gapless", "alter", "g", "--max-lease", "60"],
            vec![
                "gapless",
                "create",
                "g",
                "--into",
                &business,
                "--field",
                "n",
                "--if-not-exists",
            ],
            "dispenser: gap-free sequence g exists with max lease 60s (asked 300s): changed since by an alter; kept as it is",
        ),
    ] {
        cli.ok(&create);
        cli.ok(&alter);
        let out = cli.run(&ensure);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{ensure:?}: {stderr}");
        assert!(stderr.contains(said), "{ensure:?}: {stderr}");
    }
    // What the alter set stays.
    let x: serde_json::Value = serde_json::from_str(&cli.ok(&["peek", "x", "--json"])).unwrap();
    assert_eq!(x["max"], 200);
}

/// Regression (issue 50): `create --stripes S` silently opened a striped sequence that
/// existed (it was an ensure); like every create it now refuses a name taken
/// (`already_exists`, exit 6), and `--if-not-exists` is the ensure.
#[test]
fn create_stripes_of_a_name_taken_is_refused_unless_if_not_exists() {
    let cli = Cli::new("cli_stripes_taken");
    cli.ok(&["create", "ids", "--stripes", "2"]);
    let err = cli.fails(&["create", "ids", "--stripes", "2"], EXIT_CONFLICT);
    assert_eq!(
        err.trim(),
        "dispenser: striped sequence \"ids\" already exists"
    );
    assert_eq!(
        cli.ok(&["create", "ids", "--stripes", "2", "--if-not-exists"])
            .lines()
            .count(),
        2
    );
    let err = cli.fails(
        &["create", "ids", "--stripes", "3", "--if-not-exists"],
        EXIT_CONFLICT,
    );
    assert!(
        err.contains("striped sequence \"ids\" exists with another spec"),
        "{err}"
    );
}

#[test]
fn create_next_peek_list_reset_delete() {
    let cli = Cli::new("cli_flow");
    let out = cli.ok(&["create", "tickets", "--max", "3", "--cycle"]);
    assert!(out.contains("tickets: value 0 next 1"), "{out}");
    assert_eq!(
        numbers(&cli.ok(&["next", "tickets", "--count", "5"])),
        vec![1, 2, 3, 0, 1]
    );
    assert_eq!(
        numbers(&cli.ok(&["next", "tickets", "--strategy", "cas"])),
        vec![2]
    );
    let peek: serde_json::Value =
        serde_json::from_str(&cli.ok(&["peek", "tickets", "--json"])).unwrap();
    assert_eq!(peek["value"], 2);
    assert_eq!(peek["next"], 3);
    assert_eq!(peek["cycles"], 1);
    assert_eq!(peek["remaining"], 1);
    cli.ok(&[
        "create",
        "tickets",
        "--max",
        "3",
        "--cycle",
        "--if-not-exists",
    ]);
    let err = cli.fails(&["create", "tickets"], EXIT_CONFLICT);
    assert!(err.contains("already exists"), "{err}");
    let err = cli.fails(
        &["create", "tickets", "--if-not-exists", "--start", "2"],
        EXIT_CONFLICT,
    );
    assert!(
        err.contains("exists with another spec: start 1 (asked 2)"),
        "{err}"
    );
    cli.ok(&["create", "orders", "--start", "1000"]);
    let list: serde_json::Value = serde_json::from_str(&cli.ok(&["list", "--json"])).unwrap();
    let names: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].clone())
        .collect();
    assert_eq!(names, vec!["orders", "tickets"]);
    let err = cli.fails(&["reset", "orders", "--next", "5"], EXIT_CONFLICT);
    assert!(err.contains("backwards"), "{err}");
    // `--value` was `--next`'s old name: refused, naming `--next`, nothing written.
    let err = cli.fails(
        &["reset", "orders", "--value", "5", "--force"],
        EXIT_INVALID,
    );
    assert!(err.contains("`--next`"), "{err}");
    cli.ok(&["reset", "orders", "--next", "5", "--force"]);
    assert_eq!(numbers(&cli.ok(&["next", "orders"])), vec![5]);
    cli.ok(&["delete", "orders"]);
    cli.fails(&["next", "orders"], EXIT_NO_SUCH);
    cli.fails(&["delete", "orders"], EXIT_NO_SUCH);
}

#[test]
fn exhaustion_has_its_own_exit_code_and_writes_nothing() {
    let cli = Cli::new("cli_exhausted");
    cli.ok(&["create", "s", "--max", "10"]);
    let err = cli.fails(&["next", "s", "--count", "11"], EXIT_EXHAUSTED);
    assert!(
        err.contains("exhausted") && err.contains("10 left"),
        "{err}"
    );
    assert_eq!(
        numbers(&cli.ok(&["next", "s", "--count", "10"])),
        (1..=10).collect::<Vec<_>>()
    );
    cli.fails(&["next", "s"], EXIT_EXHAUSTED);
}

#[test]
fn eight_processes_share_one_sequence() {
    let cli = Cli::new("cli_processes");
    cli.ok(&["create", "s"]);
    for strategy in ["inc", "cas"] {
        let before: i64 = {
            let peek: serde_json::Value =
                serde_json::from_str(&cli.ok(&["peek", "s", "--json"])).unwrap();
            peek["value"].as_i64().unwrap()
        };
        let children: Vec<_> = (0..8)
            .map(|_| {
                cli.cmd()
                    .args(["next", "s", "--count", "250", "--strategy", strategy])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        let mut all = Vec::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            all.extend(numbers(&String::from_utf8(out.stdout).unwrap()));
        }
        common::assert_each_exactly(all, before + 1..=before + 2000, 1);
    }
}

#[test]
fn bad_input_is_rejected_with_a_clear_message() {
    let cli = Cli::new("cli_bad_input");
    let long = "n".repeat(201);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["create", ""], "must not be empty"),
        (vec!["create", "$x"], "must not start with '$'"),
        (vec!["create", &long], "201 bytes"),
        (vec!["create", "s", "--step", "0"], "step must not be 0"),
        (
            vec!["create", "s", "--min", "10", "--max", "5"],
            "min (10) must be below max (5)",
        ),
        (
            vec!["create", "s", "--start", "-1"],
            "start (-1) must lie within",
        ),
        (vec!["create", "s", "--max", "abc"], "--max"),
        (
            vec!["create", "s", "--max", "99999999999999999999"],
            "--max",
        ),
        (vec!["next", "s", "--count", "0"], "--count"),
        (vec!["next", "s", "--count", "-3"], "--count"),
        (vec!["next", "s", "--count", "1000000000"], "--count"),
        (vec!["next", "s", "--strategy", "fast"], "--strategy"),
        (vec!["next", "s", "--timeout", "0"], "--timeout"),
        (vec!["reset", "s"], "--next"),
        (vec!["frobnicate"], "frobnicate"),
    ];
    for (args, needle) in cases {
        let err = cli.fails(&args, EXIT_INVALID);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A name that is not UTF-8.
    let out = cli
        .cmd()
        .args(["create".as_ref(), std::ffi::OsStr::from_bytes(b"bad\xff")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(EXIT_INVALID));
    assert!(String::from_utf8_lossy(&out.stderr).contains("UTF-8"));
    // Nothing was written by any of them.
    let list: serde_json::Value = serde_json::from_str(&cli.ok(&["list", "--json"])).unwrap();
    assert_eq!(list, serde_json::json!([]));
    // Invalid database and collection names.
    let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .args(["--db", "a.b", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(EXIT_INVALID));
    assert!(String::from_utf8_lossy(&out.stderr).contains("database name"));
}

#[test]
fn passwords_never_appear_in_output() {
    let cli = Cli::new("cli_secret");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let uri = format!("mongodb://admin:hunter2secret@127.0.0.1:{port}/?directConnection=true");
    let out = cli
        .cmd()
        .env("MONGODB_URI", &uri)
        .args(["--timeout", "1", "peek", "s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(EXIT_DATABASE));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("hunter2secret"), "{all}");
    let help = cli
        .cmd()
        .env("MONGODB_URI", &uri)
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(!String::from_utf8_lossy(&help.stdout).contains("hunter2secret"));
    // A malformed URI with a password is reported without it.
    let out = cli
        .cmd()
        .args(["--uri", "mongodb://u:hunter2secret@/bad?foo=", "list"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2secret"));
}

#[test]
fn names_with_control_characters_or_separators_exit_2_and_list_stays_one_line_each() {
    let cli = Cli::new("cli_bad_names");
    let cases = [
        ("multi\nline", "control character"),
        ("tab\there", "control character"),
        ("del\u{7f}", "control character"),
        ("x@y", "'@' separates a template from its scope"),
        (
            "q~0",
            "'~' separates a striped sequence from its stripe number",
        ),
    ];
    for (name, reason) in cases {
        for args in [
            vec!["create", name],
            vec!["create", name, "--if-not-exists"],
        ] {
            let err = cli.fails(&args, EXIT_INVALID);
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains(reason), "{args:?}: {err}");
            assert!(
                err.contains(&format!("{name:?}")),
                "{args:?}: the name is not named: {err}"
            );
        }
    }
    // A scope key with a control character.
    cli.ok(&["create", "tickets"]);
    let err = cli.fails(&["next", "tickets", "--scope", "a\nb"], EXIT_INVALID);
    assert!(err.contains("control character"), "{err}");
    // Nothing was written but the template; list is one line per sequence.
    let list = cli.ok(&["list"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    // Names the library builds are readable and deletable by their full name.
    assert_eq!(
        numbers(&cli.ok(&["next", "tickets", "--scope", "2026-11-22"])),
        vec![1]
    );
    let peek = cli.ok(&["peek", "tickets@2026-11-22"]);
    assert!(peek.starts_with("tickets@2026-11-22: value 1"), "{peek}");
    cli.ok(&["delete", "tickets@2026-11-22"]);
    cli.fails(&["peek", "tickets@2026-11-22"], EXIT_NO_SUCH);
}

#[tokio::test]
async fn list_shows_a_stored_name_with_a_newline_on_one_line() {
    // Written by another client: the name is stored, and list must not split it.
    let f = common::Fixture::new("cli_list_newline").await;
    let d = f.dispenser(f.options());
    d.create("plain", dispenser::Spec::default())
        .await
        .expect("create");
    let mut doc = f
        .raw()
        .find_one(dispenser::mongodb::bson::doc! {"_id": "plain"})
        .await
        .expect("read")
        .expect("stored");
    doc.insert("_id", "evil\nname: value 0 next 1");
    f.raw().insert_one(doc).await.expect("insert");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", common::uri())
        .args(["--db", DB, "--collection", &f.collection, "list"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let list = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.contains(r"evil\nname"), "{list}");
}

/// `bench --processes N --duration S` used to fail: every worker got both `--count` and
/// `--duration`, which conflict. The JSON names the default run and reports the order check.
#[test]
fn bench_with_processes_runs_for_a_duration() {
    let cli = Cli::new("cli_bench_duration");
    let out = cli.ok(&[
        "bench",
        "--processes",
        "2",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).expect("bench prints JSON");
    assert_eq!(report["processes"], 2);
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{report}");
    let run = &runs[0];
    for key in [
        "run",
        "numbers",
        "numbers_per_s",
        "p50_us",
        "p99_us",
        "max_us",
        "duplicates",
        "order_violations",
        "default",
        "coalesce",
    ] {
        assert!(run.get(key).is_some(), "no {key:?} in {run}");
    }
    assert!(run["numbers"].as_u64().unwrap() > 0, "{run}");
    assert_eq!(run["duplicates"], 0, "{run}");
    assert_eq!(run["order_violations"], 0, "{run}");
    assert_eq!(run["default"], true, "{run}");
    assert_eq!(run["coalesce"], true, "{run}");
    assert!(run["seconds"].as_f64().unwrap() >= 0.9, "{run}");
}

/// Issue 19, item 8: `bench --block` takes the library's defaults — prefetch 0.5 — unless
/// `--no-prefetch` (it used to measure blocks without prefetch, so every refill was a wait:
/// 20 000 of 20 000). Without prefetch each refill is waited for, by construction.
#[test]
fn bench_blocks_prefetch_by_default_as_the_library_does() {
    let cli = Cli::new("cli_bench_prefetch");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "bench", "--block", "100", "--count", "20000", "--warmup", "0", "--json",
        ];
        args.extend_from_slice(extra);
        let report: serde_json::Value =
            serde_json::from_str(&cli.ok(&args)).expect("bench prints JSON");
        report["runs"][0].clone()
    };
    let default = run(&[]);
    assert_eq!(default["run"], "inc block 100 prefetch 0.5", "{default}");
    assert_eq!(default["duplicates"], 0, "{default}");
    assert_eq!(
        default["numbers"], 20_000,
        "every number drawn is reported: {default}"
    );
    let off = run(&["--no-prefetch"]);
    assert_eq!(off["run"], "inc block 100", "{off}");
    assert_eq!(off["block_waits"], off["block_refills"], "{off}");
    let out = cli.run(&[
        "bench",
        "--block",
        "100",
        "--prefetch",
        "0.3",
        "--no-prefetch",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// Issue 30: `bench --scale` fills a scratch collection, serves it from a child service and
/// reports each read beside its anchor and goal, the service's memory, and the numbers its
/// blocks hold before and after the idle release (given back: 0); the collection is dropped.
#[test]
fn bench_scale_reports_the_reads_the_memory_and_the_numbers_given_back() {
    let cli = Cli::new("cli_bench_scale");
    let out = cli.ok(&["bench", "--scale", "300", "--scale-drawn", "3", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).expect("bench prints JSON");
    assert_eq!(report["sequences"], 300, "{report}");
    assert_eq!(report["drawn_through_the_service"], 3, "{report}");
    let reads = report["reads"].as_array().expect("reads");
    let names: Vec<&str> = reads.iter().map(|r| r["read"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "raw driver: first page of 50",
            "raw driver: middle page of 50",
            "/metrics",
            "/v1/overview (first page)",
            "/v1/overview (middle page)",
            "/v1/sequences?limit=1000"
        ],
        "{report}"
    );
    for r in reads {
        assert!(r["median_ms"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["bytes"].as_u64().unwrap() > 0, "{r}");
    }
    assert_eq!(reads[2]["goal_ms"], 100.0, "{report}");
    // Each page of the overview is timed in pairs with the raw read of the same page and held
    // to what it adds to it (the median of the pairs' differences, never more than its own
    // slowest read).
    for (page, raw) in [(3, 0), (4, 1)] {
        let anchor = reads[raw]["median_ms"].as_f64().unwrap();
        assert_eq!(reads[page]["anchor_ms"].as_f64(), Some(anchor), "{report}");
        let over = reads[page]["over_anchor_ms"].as_f64().unwrap();
        assert!(over >= 0.0, "{report}");
        assert!(over <= reads[page]["max_ms"].as_f64().unwrap(), "{report}");
        assert_eq!(reads[page]["goal_ms"], 50.0, "{report}");
        assert_eq!(reads[raw]["goal_ms"], serde_json::Value::Null, "{report}");
    }
    assert!(report["peak_memory_mb"].as_f64().unwrap() > 0.0, "{report}");
    // Three sequences drawn once through blocks: they hold numbers, then give them back.
    assert!(report["numbers_held"].as_f64().unwrap() > 0.0, "{report}");
    assert_eq!(report["numbers_held_after_idle_release"], 0.0, "{report}");
}

/// Issue 30: `bench --http` measures the service started in its own process beside the floor
/// (the same stack answering a constant), over the same load: both runs answer every request
/// with one number, none twice, and the ratios are to the floor (the last run). With `--count`
/// the requests are shared out over the connections and rounds exactly.
#[test]
fn bench_http_measures_the_service_beside_its_floor() {
    let cli = Cli::new("cli_bench_http");
    let out = cli.ok(&[
        "bench",
        "--http",
        "--connections",
        "4",
        "--count",
        "600",
        "--rounds",
        "3",
        "--warmup",
        "40",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).expect("bench prints JSON");
    assert_eq!(report["connections"], 4, "{report}");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{report}");
    assert!(
        runs[0]["run"].as_str().unwrap().starts_with("service"),
        "{report}"
    );
    assert!(
        runs[1]["run"].as_str().unwrap().starts_with("floor"),
        "{report}"
    );
    for run in runs {
        assert_eq!(run["requests"], 600, "{run}");
        assert_eq!(run["numbers"], 600, "one number per request: {run}");
        assert_eq!(run["errors"], 0, "{run}");
        assert_eq!(run["duplicates"], 0, "{run}");
        assert!(run["requests_per_s"].as_f64().unwrap() > 0.0, "{run}");
    }
    assert_eq!(runs[1]["throughput_vs_floor"], 1.0, "{report}");
    assert!(
        runs[0]["throughput_vs_floor"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    // --url needs the service's token.
    let refused = cli.run(&[
        "bench",
        "--http",
        "--url",
        "http://127.0.0.1:9",
        "--count",
        "1",
    ]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
}
