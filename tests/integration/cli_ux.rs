//! The first ten minutes with the `dispenser` binary, driven as a user would:
//! exit codes, stdout and stderr kept apart, messages that name the flag and the value, a
//! refused connection reported at once with what to check, and snapshots of every
//! subcommand's `--help` and of the text output.
//!
//! Snapshots live in `tests/integration/snapshots/` and are compared, never written, unless
//! asked (`INSTA_UPDATE=always cargo test --test integration cli_ux::`, then review the
//! diff): a mismatch fails the test. Ports, collection names and times are redacted.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::{self, DB};

const EXIT_INVALID: i32 = 2;
const EXIT_DATABASE: i32 = 5;

/// The binary with the test server in `MONGODB_URI` and `collection`.
fn cli(collection: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
    c.env("MONGODB_URI", common::uri())
        .env_remove("DISPENSER_LOG")
        .args(["--db", DB, "--collection", collection]);
    c
}

fn run(c: &mut Command) -> (Option<i32>, String, String) {
    let out: Output = c.output().expect("run dispenser");
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

/// Runs a command that must succeed; returns (stdout, stderr).
fn ok(collection: &str, args: &[&str]) -> (String, String) {
    let (code, out, err) = run(cli(collection).args(args));
    assert_eq!(code, Some(0), "{args:?}: {err}");
    (out, err)
}

/// Runs a command that must fail with `code`, print nothing on stdout and one line on
/// stderr (clap's usage errors add a "For more information" line); returns stderr.
fn fails(collection: &str, args: &[&str], code: i32) -> String {
    let (got, out, err) = run(cli(collection).args(args));
    assert_eq!(got, Some(code), "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?} printed on stdout: {out}");
    err
}

/// Redacts what changes from run to run: collection names, times, rates and forecasts.
fn settings(collection: &str) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_prepend_module_to_snapshot(false);
    s.set_snapshot_path("snapshots");
    s.add_filter(&regex_escape(collection), "[COLLECTION]");
    s.add_filter(r"updated_at \S+;", "updated_at [TIME];");
    // The draw rate and the forecast depend on timing.
    s.add_filter(r" left, .*", " left, [RATE AND FORECAST]");
    s
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[test]
fn a_refused_connection_fails_at_once_and_says_what_to_check() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let started = Instant::now();
    let (code, out, err) = run(Command::new(env!("CARGO_BIN_EXE_dispenser")).args([
        "--uri",
        &format!("mongodb://alice:s3cret@127.0.0.1:{port}/?directConnection=true"),
        "--timeout",
        "60",
        "next",
        "x",
    ]));
    let took = started.elapsed();
    assert_eq!(code, Some(EXIT_DATABASE), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    for needle in [
        "connection refused",
        &format!("127.0.0.1:{port}"),
        "MONGODB_URI",
        "scripts/server.sh start",
    ] {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    assert!(!err.contains("s3cret") && !err.contains("alice"), "{err}");
    // The driver would wait its server selection timeout (54 s here) before saying so.
    assert!(
        took < Duration::from_secs(30),
        "a refused connection took {took:?} of a 60 s timeout"
    );
}

#[test]
fn a_host_that_does_not_exist_fails_at_once_and_says_which() {
    // A mistyped host name (`.invalid` never resolves, RFC 6761): the driver waited its whole
    // server selection timeout before saying "failed to lookup address information".
    // Where no resolver answers at all, a lookup fails only "temporarily" and is rightly
    // left to the driver: then only the message is checked (with a short timeout).
    let definitive = match std::net::ToSocketAddrs::to_socket_addrs(&("no-such-host.invalid", 1)) {
        Ok(_) => false,
        Err(e) => !e.to_string().to_lowercase().contains("temporar"),
    };
    eprintln!("name lookup fails definitively here: {definitive}");
    let timeout = if definitive { "60" } else { "2" };
    let started = Instant::now();
    let (code, out, err) = run(Command::new(env!("CARGO_BIN_EXE_dispenser")).args([
        "--uri",
        "mongodb://alice:s3cret@no-such-host.invalid:27017/",
        "--timeout",
        timeout,
        "next",
        "x",
    ]));
    let took = started.elapsed();
    assert_eq!(code, Some(EXIT_DATABASE), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    for needle in ["no-such-host.invalid:27017", "MONGODB_URI"] {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    assert!(!err.contains("s3cret") && !err.contains("alice"), "{err}");
    assert!(
        !definitive || took < Duration::from_secs(30),
        "an unknown host took {took:?} of a 60 s timeout"
    );
}

#[test]
fn numeric_flags_name_the_flag_the_value_and_the_limits() {
    common::ready();
    let coll = common::unique("ux_numbers");
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["next", "x", "--count", "-1"],
            "'--count <COUNT>'",
            "-1 is not allowed: must be a whole number between 1 and 100000000",
        ),
        (
            &["next", "x", "--count", "0"],
            "'--count <COUNT>'",
            "0 is not allowed: must be a whole number between 1 and 100000000",
        ),
        (
            &["next", "x", "--count", "ten"],
            "'--count <COUNT>'",
            "\"ten\" is not a whole number",
        ),
        (
            &["next", "x", "--block", "-3"],
            "'--block <BLOCK>'",
            "-3 is not allowed: must be a whole number between 1 and 10000000",
        ),
        (
            &["--timeout", "-2", "list"],
            "'--timeout <TIMEOUT>'",
            "-2 must be more than 0 and at most 3600 seconds",
        ),
        (
            &["bench", "--rounds", "-1"],
            "'--rounds <ROUNDS>'",
            "-1 is not allowed: must be a whole number between 1 and 1000",
        ),
        (
            &["serve", "--max-count", "-5"],
            "'--max-count <MAX_COUNT>'",
            "-5 is not allowed",
        ),
        (
            &["create", "s", "--stripes", "2000"],
            "'--stripes <S>'",
            "2000 is not allowed: must be a whole number between 1 and 1024",
        ),
    ];
    for (args, flag, message) in cases {
        let err = fails(&coll, args, EXIT_INVALID);
        assert!(err.contains(flag), "{args:?}: {flag} not in {err}");
        assert!(err.contains(message), "{args:?}: {message:?} not in {err}");
        assert!(!err.contains("invalid digit"), "{args:?}: {err}");
        assert!(
            !err.contains("-- -"),
            "{args:?} suggests a positional: {err}"
        );
    }
    // Nothing was written.
    let (out, _) = ok(&coll, &["list", "--json"]);
    assert_eq!(out.trim(), "[]");
}

#[test]
fn usage_lines_do_not_show_uri_as_required_when_mongodb_uri_is_set() {
    let err = fails("unused", &["next"], EXIT_INVALID);
    assert!(err.contains("Usage: dispenser next <NAME>"), "{err}");
    assert!(!err.contains("--uri <URI>"), "{err}");
    // --uri still wins over MONGODB_URI.
    let (code, _, err) = run(cli("unused").args(["--uri", "mongodb://127.0.0.1:1", "peek", "s"]));
    assert_eq!(code, Some(EXIT_DATABASE), "{err}");
    assert!(err.contains("127.0.0.1:1"), "{err}");
}

#[test]
fn help_of_every_subcommand() {
    // The subcommands are read from the top-level help, so a new one gets its snapshot too.
    let (code, top, err) = run(Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", "mongodb://u:hunter2@example.invalid")
        .arg("--help"));
    assert_eq!(code, Some(0), "{err}");
    insta::with_settings!({ snapshot_path => "snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!("help", top);
    });
    let subcommands: Vec<&str> = top
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|sub| *sub != "help")
        .collect();
    for known in ["create", "next", "peek", "list", "check", "bench", "serve"] {
        assert!(
            subcommands.contains(&known),
            "{known} not in {subcommands:?}"
        );
    }
    for sub in subcommands {
        // With a password in MONGODB_URI: help never shows it (nor the URI at all).
        let (code, out, err) = run(Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", "mongodb://u:hunter2@example.invalid")
            .args([sub, "--help"]));
        assert_eq!(code, Some(0), "{sub}: {err}");
        assert!(err.is_empty(), "{sub}: {err}");
        assert!(!out.contains("hunter2"), "{sub}");
        insta::with_settings!({ snapshot_path => "snapshots", prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!(format!("help_{sub}"), out);
        });
    }
}

#[test]
fn text_output_of_create_next_peek_and_list() {
    common::ready();
    let coll = common::unique("ux_text");
    let _guard = settings(&coll).bind_to_scope();
    // An empty collection says so, on stderr; stdout stays one line per sequence.
    let (out, err) = ok(&coll, &["list"]);
    assert!(out.is_empty(), "{out}");
    insta::assert_snapshot!("list_empty", err);
    let (out, err) = ok(&coll, &["list", "--scopes", "inv"]);
    assert!(out.is_empty(), "{out}");
    insta::assert_snapshot!("list_scopes_empty", err);

    let (created, err) = ok(
        &coll,
        &[
            "create",
            "inv",
            "--max",
            "999999",
            "--format",
            "INV-{scope}-{n:06}",
        ],
    );
    assert!(err.is_empty(), "{err}");
    assert!(
        created.contains("format \"INV-{scope}-{n:06}\""),
        "{created}"
    );
    assert!(!created.contains("version"), "{created}");
    insta::assert_snapshot!("create_with_format", created);
    let (tickets, _) = ok(&coll, &["create", "tickets", "--max", "99", "--cycle"]);
    insta::assert_snapshot!("create_cyclic", tickets);

    // A {scope} format without a scope is refused before anything is drawn.
    let err = fails(&coll, &["next", "inv", "--formatted"], EXIT_INVALID);
    insta::assert_snapshot!("next_formatted_without_scope", err);
    let (out, _) = ok(&coll, &["next", "inv", "--formatted", "--scope", "2026"]);
    assert_eq!(out, "INV-2026-000001\n");
    let (out, _) = ok(
        &coll,
        &[
            "next",
            "inv",
            "--formatted",
            "--scope",
            "2026",
            "--count",
            "2",
        ],
    );
    assert_eq!(out, "INV-2026-000002\nINV-2026-000003\n");
    // The template itself never moved.
    let (peek, _) = ok(&coll, &["peek", "inv"]);
    assert!(peek.contains("inv: value 0 next 1"), "{peek}");
    insta::assert_snapshot!("peek_with_format", peek);

    let (out, _) = ok(&coll, &["next", "tickets", "--count", "3"]);
    assert_eq!(out, "1\n2\n3\n");
    let (list, err) = ok(&coll, &["list"]);
    assert!(err.is_empty(), "{err}");
    insta::assert_snapshot!("list", list);
}

#[test]
fn block_close_mentions_a_loss_only_when_there_is_one() {
    common::ready();
    let coll = common::unique("ux_block");
    ok(&coll, &["create", "s"]);
    let (out, err) = ok(&coll, &["next", "s", "--block", "10", "--count", "3"]);
    assert_eq!(out, "1\n2\n3\n");
    assert!(err.contains("given back"), "{err}");
    assert!(!err.contains("lost"), "{err}");
    // Everything handed back: the next draw carries on at 4.
    let (out, err) = ok(&coll, &["next", "s", "--block", "3", "--count", "3"]);
    assert_eq!(out, "4\n5\n6\n");
    assert!(!err.contains("lost"), "{err}");
}

/// The number in the block client's closing note ("N unused number(s) given back").
fn given_back(note: &str) -> u64 {
    note.split_whitespace()
        .zip(note.split_whitespace().skip(1))
        .find(|(_, w)| *w == "unused")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn next_with_a_block_reserves_no_more_than_the_run_can_use() {
    // `next --block 5 --count 3` gave back thousands: the prefetched block grew to keep
    // ahead of a fast caller, though the run knew it needed three numbers. A reservation
    // past what the run can use is what a killed run loses (a gap).
    common::ready();
    let coll = common::unique("ux_block_cap");
    ok(&coll, &["create", "s"]);
    for (block, count) in [("5", 3_u64), ("5", 40), ("100", 7), ("10", 3000)] {
        let size: u64 = block.parse().expect("size");
        let (out, err) = ok(
            &coll,
            &["next", "s", "--block", block, "--count", &count.to_string()],
        );
        assert_eq!(out.lines().count() as u64, count, "{out}");
        // At most the current block's rest and one prefetched block, each at most
        // max(size, count / 2).
        let most = (2 * size).max(count);
        assert!(
            given_back(&err) <= most,
            "--block {block} --count {count}: {err}"
        );
    }
}

#[test]
fn server_sh_start_twice_prints_the_running_uri_and_stop_leaves_no_zombie() {
    let state = std::env::temp_dir().join(common::unique("ux_server"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/server.sh");
    let start = || {
        let out = Command::new(script)
            .args(["start", "--state"])
            .arg(&state)
            .output()
            .expect("run server.sh");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let first = start();
    assert!(
        first.starts_with("MONGODB_URI=mongodb://127.0.0.1:"),
        "{first}"
    );
    let pid: u32 = std::fs::read_to_string(state.join("server.pid"))
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid");
    // Already running: the same URI on stdout, so `export "$(scripts/server.sh start)"` works.
    let second = start();
    let stop = Command::new(script)
        .args(["stop", "--state"])
        .arg(&state)
        .output()
        .expect("run server.sh stop");
    assert_eq!(second, first);
    assert!(stop.status.success());
    // Gone, not a <defunct> entry waiting to be reaped.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state_letter = stat.rsplit(") ").next().and_then(|r| r.split(' ').next());
    assert!(
        stat.is_empty() || (state_letter != Some("Z") && !stat.contains("java")),
        "pid {pid} after stop: {stat}"
    );
    let _ = std::fs::remove_dir_all(&state);
}

/// The demo's program (`scripts/demo.sh` runs it): `cargo test` builds the examples next to
/// the test binary's directory.
fn tickets_example() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let debug = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    debug.join("examples").join("tickets")
}

#[test]
fn the_demo_tells_a_story_and_the_second_run_carries_on_from_the_first() {
    common::ready();
    let demo = || {
        let out = Command::new(tickets_example())
            .env("MONGODB_URI", common::uri())
            .args(["--counters", "3", "--cycles", "1"])
            .output()
            .expect("run the tickets example (built by cargo test)");
        let stdout = String::from_utf8(out.stdout).expect("utf-8");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stdout}{stderr}");
        // No Rust debug formatting anywhere.
        for noise in [
            "Some(",
            "None",
            "ConditionalIncrement",
            "Cas",
            "{",
            "Duration",
        ] {
            assert!(
                !stdout.contains(noise),
                "{noise:?} in the demo's output:\n{stdout}"
            );
        }
        assert!(stdout.contains("Check: OK"), "{stdout}");
        stdout
    };
    let next_start = |text: &str| -> String {
        let after = text
            .split("the next run starts at ")
            .nth(1)
            .unwrap_or_else(|| panic!("no 'the next run starts at' in:\n{text}"));
        after.chars().take_while(char::is_ascii_digit).collect()
    };
    let first = demo();
    let second = demo();
    let expected = next_start(&first);
    assert!(
        second.contains(&format!("this run carries on at {expected}.")),
        "the first run ended before {expected}; the second says:\n{second}"
    );
    assert_ne!(
        next_start(&second),
        expected,
        "each run ends mid-cycle elsewhere"
    );
}
