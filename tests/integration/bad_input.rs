//! Bad input and bad servers: every malformed flag is exit code 2 naming the flag with
//! nothing written; a `--count` beyond the range is exit 4 with nothing written; a server that
//! is not MongoDB is a database error (exit 5) within the timeout, never a hang; and the URI's
//! password shows up nowhere.

use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use dispenser::{Dispenser, Options, Spec};
use futures::future::join_all;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::common::{self, DB, Fixture};
use crate::proxy::{Faults, OP_MSG, Proxy, XorShift};

const EXIT_INVALID: i32 = 2;
const EXIT_NO_SUCH: i32 = 3;
const EXIT_EXHAUSTED: i32 = 4;
const EXIT_DATABASE: i32 = 5;
const EXIT_CONFLICT: i32 = 6;

/// The CLI on the test server, on a fresh collection.
fn cli(collection: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
    c.env("MONGODB_URI", common::uri())
        .env_remove("DISPENSER_LOG")
        .args(["--db", DB, "--collection", collection]);
    c
}

fn run(mut c: Command, args: &[&str]) -> Output {
    c.args(args).output().expect("run dispenser")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts exit `code`, nothing on stdout, and `needle` in stderr.
fn assert_fails(out: &Output, code: i32, needle: &str, what: &str) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(code), "{what}: {stderr}");
    assert!(stdout.is_empty(), "{what} printed {stdout:?}");
    assert!(
        stderr.contains(needle),
        "{what}: {needle:?} not in {stderr:?}"
    );
}

#[test]
fn malformed_flags_exit_2_name_the_flag_and_write_nothing() {
    common::ready();
    let coll = common::unique("bad_flags");
    let cases: &[(&[&str], &str)] = &[
        // create: malformed, out of i64 range, or an invalid combination.
        (&["create", "s", "--start", "abc"], "--start"),
        (&["create", "s", "--start", ""], "--start"),
        (&["create", "s", "--start", "1.5"], "--start"),
        (
            &["create", "s", "--start", "9223372036854775808"],
            "--start",
        ),
        (&["create", "s", "--start", "0", "--min", "1"], "start (0)"),
        (&["create", "s", "--step", "abc"], "--step"),
        (&["create", "s", "--step", "1e3"], "--step"),
        (&["create", "s", "--step", "99999999999999999999"], "--step"),
        (&["create", "s", "--step", "-9223372036854775809"], "--step"),
        (&["create", "s", "--step", "0"], "step must not be 0"),
        (&["create", "s", "--step", "-9223372036854775808"], "step"),
        (&["create", "s", "--min", "x"], "--min"),
        (&["create", "s", "--min", "-9223372036854775809"], "--min"),
        (
            &[
                "create",
                "s",
                "--min",
                "-9223372036854775808",
                "--start",
                "-9223372036854775808",
            ],
            "start - step",
        ),
        (
            &["create", "s", "--max", "-5"],
            "min (0) must be below max (-5)",
        ),
        (
            &["create", "s", "--max", "0"],
            "min (0) must be below max (0)",
        ),
        (&["create", "s", "--max", "1e9"], "--max"),
        (&["create", "s", "--cycle", "yes"], "yes"),
        // next --count: malformed, zero, negative, beyond u64, beyond the CLI's maximum.
        (&["next", "s", "--count", "abc"], "--count"),
        (&["next", "s", "--count", ""], "--count"),
        (&["next", "s", "--count", "1.5"], "--count"),
        (&["next", "s", "--count", "0"], "--count"),
        (&["next", "s", "--count", "-1"], "--count"),
        (&["next", "s", "--count", "18446744073709551616"], "--count"),
        (&["next", "s", "--count", "100000001"], "--count"),
        // reset --value.
        (&["reset", "s", "--value", "abc"], "--value"),
        (&["reset", "s", "--value", ""], "--value"),
        (&["reset", "s", "--value", "1.5"], "--value"),
        (&["reset", "s", "--value", "9223372036854775808"], "--value"),
        // --timeout: not a number, not finite, not positive, too long, rounds to zero.
        (&["--timeout", "abc", "list"], "--timeout"),
        (&["--timeout", "", "list"], "--timeout"),
        (&["--timeout=-1", "list"], "--timeout"),
        (&["--timeout", "0", "list"], "--timeout"),
        (&["--timeout", "nan", "list"], "--timeout"),
        (&["--timeout", "inf", "list"], "--timeout"),
        (&["--timeout", "1e400", "list"], "--timeout"),
        (&["--timeout", "3601", "list"], "--timeout"),
        (&["--timeout", "1e-12", "list"], "--timeout"),
    ];
    for (args, needle) in cases {
        let out = run(cli(&coll), args);
        assert_fails(&out, EXIT_INVALID, needle, &format!("{args:?}"));
    }
    // --db and --collection (given once, so without the defaults of `cli`).
    let long_db = "d".repeat(64);
    let names: &[(&str, &str, &str)] = &[
        ("--db", "", "database name"),
        ("--db", "a.b", "database name"),
        ("--db", "a b", "database name"),
        ("--db", "a/b", "database name"),
        ("--db", "x$", "database name"),
        ("--db", &long_db, "database name"),
        ("--collection", "", "collection name"),
        ("--collection", "a$b", "collection name"),
        ("--collection", "system.users", "collection name"),
    ];
    for (flag, value, needle) in names {
        for command in [&["list"][..], &["create", "s"], &["next", "s"]] {
            let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
            c.env("MONGODB_URI", common::uri()).args([flag, value]);
            let out = run(c, command);
            assert_fails(&out, EXIT_INVALID, needle, &format!("{flag} {value:?}"));
        }
    }
    // reset --value outside the bounds of an existing sequence.
    let out = run(cli(&coll), &["create", "r", "--max", "100"]);
    assert!(out.status.success(), "{:?}", text(&out));
    for value in ["101", "-1", "9223372036854775807", "-9223372036854775808"] {
        let out = run(cli(&coll), &["reset", "r", "--value", value, "--force"]);
        assert_fails(&out, EXIT_INVALID, "reset value", value);
    }
    // Nothing was written: only "r" exists, untouched.
    let out = run(cli(&coll), &["list", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let list = list.as_array().expect("array");
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (&list[0]["name"], &list[0]["version"]),
        (&"r".into(), &0.into())
    );
}

#[test]
fn a_count_beyond_the_remaining_range_is_exit_4_and_writes_nothing() {
    common::ready();
    let coll = common::unique("bad_count");
    let out = run(cli(&coll), &["create", "s", "--max", "1000"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let peek = |coll: &str| -> serde_json::Value {
        let out = run(cli(coll), &["peek", "s", "--json"]);
        serde_json::from_slice(&out.stdout).expect("json")
    };
    for strategy in ["inc", "cas"] {
        let out = run(
            cli(&coll),
            &["next", "s", "--count", "100000000", "--strategy", strategy],
        );
        assert_fails(&out, EXIT_EXHAUSTED, "1000 left", strategy);
    }
    let out = run(cli(&coll), &["next", "s", "--count", "990"]);
    assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 990);
    for strategy in ["inc", "cas"] {
        for count in ["11", "100000000"] {
            let out = run(
                cli(&coll),
                &["next", "s", "--count", count, "--strategy", strategy],
            );
            assert_fails(&out, EXIT_EXHAUSTED, "10 left", strategy);
        }
    }
    let state = peek(&coll);
    assert_eq!(
        (&state["value"], &state["version"]),
        (&990.into(), &1.into())
    );
}

/// How a fake (non-MongoDB) server behaves on each connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fake {
    /// Accepts, reads everything, never answers.
    Silent,
    /// Answers with an HTTP error and closes (the length prefix reads as ~1.3 GB).
    Http,
    /// Answers with seeded random bytes and keeps the connection open.
    Garbage,
    /// Answers with a plausible 16-byte header announcing 1000 bytes, then nothing.
    Truncated,
    /// Accepts and closes at once.
    Close,
}

/// A fake server on 127.0.0.1. Stops when dropped.
pub struct FakeServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeServer {
    pub async fn start(kind: Fake) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake");
        let addr = listener.local_addr().expect("fake address");
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            let mut seed = 1_u64;
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                seed += 1;
                conns.spawn(fake_conn(stream, kind, seed));
                while conns.try_join_next().is_some() {}
            }
        });
        FakeServer { addr, task }
    }

    pub fn uri(&self, userinfo: &str) -> String {
        format!("mongodb://{userinfo}{}/?directConnection=true", self.addr)
    }
}

async fn fake_conn(mut stream: TcpStream, kind: Fake, seed: u64) {
    let mut buf = [0_u8; 4096];
    match kind {
        Fake::Close => return,
        Fake::Silent => {}
        Fake::Http => {
            let _ = stream.read(&mut buf).await;
            let _ = stream
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            return;
        }
        Fake::Garbage => {
            let _ = stream.read(&mut buf).await;
            let mut rng = XorShift::new(seed);
            let junk: Vec<u8> = (0..256).map(|_| rng.next_u64() as u8).collect();
            let _ = stream.write_all(&junk).await;
        }
        Fake::Truncated => {
            let _ = stream.read(&mut buf).await;
            let mut header = Vec::new();
            header.extend_from_slice(&1000_i32.to_le_bytes());
            header.extend_from_slice(&7_i32.to_le_bytes());
            header.extend_from_slice(&1_i32.to_le_bytes());
            header.extend_from_slice(&OP_MSG.to_le_bytes());
            let _ = stream.write_all(&header).await;
        }
    }
    // Keep the connection open, read and ignore, until the client closes.
    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
}

/// Connection options for a server that is not what it claims: 1 s for everything.
const TIMEOUT: Duration = Duration::from_secs(1);
/// Slack for scheduling on a busy machine; a hang would take far longer.
const SLACK: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_are_not_mongodb_fail_within_the_timeout() {
    common::ready();
    let kinds = [
        Fake::Silent,
        Fake::Http,
        Fake::Garbage,
        Fake::Truncated,
        Fake::Close,
    ];
    let checks = kinds.map(|kind| async move {
        let fake = FakeServer::start(kind).await;
        let uri = fake.uri("");
        let options = Options::default()
            .with_database(DB)
            .with_operation_timeout(TIMEOUT);
        let d = Dispenser::connect(&uri, options).await.expect("connect");
        // The library: create, open, peek and list each fail with a database error in time.
        let ops = ["create", "open", "peek", "list"];
        for op in ops {
            let started = Instant::now();
            let call = async {
                match op {
                    "create" => d.create("s", Spec::default()).await.map(|_| ()),
                    "open" => d.open("s").await.map(|_| ()),
                    "peek" => d.peek("s").await.map(|_| ()),
                    _ => d.list().await.map(|_| ()),
                }
            };
            let r = tokio::time::timeout(Duration::from_secs(30), call)
                .await
                .unwrap_or_else(|_| panic!("{kind:?}: {op} hung"));
            let took = started.elapsed();
            let err = r.expect_err("not a MongoDB server");
            assert!(err.is_database(), "{kind:?}: {op}: {err}");
            assert!(took <= TIMEOUT + SLACK, "{kind:?}: {op} took {took:?}");
        }
        // The CLI: exit 5, one line on stderr, nothing on stdout, in time.
        let started = Instant::now();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .env("MONGODB_URI", &uri)
            .args(["--timeout", "1", "next", "s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(30), child)
            .await
            .unwrap_or_else(|_| panic!("{kind:?}: the CLI hung"))
            .expect("run dispenser");
        let took = started.elapsed();
        // Which of the two 1 s limits fires first (server selection or the operation
        // timeout) is a race: either message is right.
        assert_fails(&out, EXIT_DATABASE, "dispenser: ", &format!("{kind:?}"));
        let (_, stderr) = text(&out);
        assert!(
            stderr.contains("database error") || stderr.contains("timed out after 1s"),
            "{kind:?}: {stderr}"
        );
        assert_eq!(out.stderr.iter().filter(|&&b| b == b'\n').count(), 1);
        // Process start-up is part of it: a little more slack.
        assert!(
            took <= TIMEOUT + 2 * SLACK,
            "{kind:?}: the CLI took {took:?}"
        );
        eprintln!("not MongoDB ({kind:?}): library and CLI failed in time; CLI {took:.2?}");
    });
    join_all(checks).await;
}

const SECRET: &str = "hunter2";
/// A password with a percent-encoded '@': neither "hunter2%40Secret" nor "hunter2@Secret"
/// may appear.
const USERINFO: &str = "admin:hunter2%40Secret@";

fn assert_no_secret(out: &Output, what: &str) {
    let (stdout, stderr) = text(out);
    assert!(
        !stdout.contains(SECRET) && !stderr.contains(SECRET),
        "{what} leaked the password: {stdout} {stderr}"
    );
}

/// The CLI with a password in `uri`, debug logging on, on `collection`, with a 1 s timeout.
fn secret_cli(uri: &str, collection: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"));
    c.env("MONGODB_URI", uri)
        .env("DISPENSER_LOG", "trace")
        .args(["--timeout", "1", "--db", DB, "--collection", collection])
        .kill_on_drop(true);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_never_appears_in_errors_logs_help_or_output() {
    let f = Fixture::new("secret").await;
    // 1. Success: the proxy accepts any PLAIN login, so every command works with the password.
    let proxy = Proxy::to_test_server(Faults::default(), 1).await;
    proxy.accept_any_plain_login();
    let uri = format!(
        "mongodb://{USERINFO}{}/?directConnection=true&authMechanism=PLAIN",
        proxy.addr
    );
    let ok: &[&[&str]] = &[
        &["create", "s", "--max", "100"],
        &["next", "s", "--count", "3"],
        &["next", "s", "--strategy", "cas"],
        &["peek", "s"],
        &["peek", "s", "--json"],
        &["list"],
        &["list", "--json"],
        &["reset", "s", "--value", "50"],
    ];
    for args in ok {
        let out = secret_cli(&uri, &f.collection)
            .args(*args)
            .output()
            .await
            .expect("run");
        assert!(out.status.success(), "{args:?}: {:?}", text(&out));
        assert_no_secret(&out, &format!("{args:?}"));
    }
    // Errors that are not about the connection.
    for (args, code) in [
        (&["next", "nope"][..], EXIT_NO_SUCH),
        (&["create", "s"], EXIT_CONFLICT),
        (&["next", "s", "--count", "1000"], EXIT_EXHAUSTED),
        (&["reset", "s", "--value", "1000"], EXIT_INVALID),
    ] {
        let out = secret_cli(&uri, &f.collection)
            .args(args)
            .output()
            .await
            .expect("run");
        assert_eq!(out.status.code(), Some(code), "{args:?}: {:?}", text(&out));
        assert_no_secret(&out, &format!("{args:?}"));
    }
    // 2. Connection errors: the real server (SCRAM fails: it has no auth), fake servers, and a
    // closed port.
    let silent = FakeServer::start(Fake::Silent).await;
    let http = FakeServer::start(Fake::Http).await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let upstream = crate::proxy::upstream_addr(&common::uri());
    let bad_uris = [
        format!("mongodb://{USERINFO}{upstream}/?directConnection=true"),
        silent.uri(USERINFO),
        http.uri(USERINFO),
        format!("mongodb://{USERINFO}{closed}/?directConnection=true"),
    ];
    // All at once: each waits out its 1 s timeout.
    let failing = bad_uris.iter().flat_map(|uri| {
        [&["peek", "s"][..], &["list", "--json"], &["next", "s"]].map(|args| {
            let mut c = secret_cli(uri, &f.collection);
            c.args(args);
            async move {
                let out = c.output().await.expect("run");
                let what = format!("{args:?} on {}", dispenser::redact_uri(uri));
                assert_eq!(
                    out.status.code(),
                    Some(EXIT_DATABASE),
                    "{what}: {:?}",
                    text(&out)
                );
                assert_no_secret(&out, &what);
            }
        })
    });
    join_all(failing).await;
    // The library's errors, displayed and debug-printed, and the dispenser itself.
    let library = bad_uris.iter().map(|uri| async move {
        let options = Options::default()
            .with_database(DB)
            .with_operation_timeout(TIMEOUT);
        let d = Dispenser::connect(uri, options).await.expect("connect");
        let err = d.peek("s").await.expect_err("cannot work");
        let shown = format!("{err} {err:?} {d:?}");
        assert!(!shown.contains(SECRET), "leaked: {shown}");
    });
    join_all(library).await;
    // 3. Help, with the password in the environment or on the command line.
    for args in [
        &["--help"][..],
        &["next", "--help"],
        &["create", "--help"],
        &[
            "--uri",
            "mongodb://admin:hunter2%40Secret@localhost",
            "--help",
        ],
        &[
            "--uri",
            "mongodb://admin:hunter2%40Secret@localhost",
            "list",
            "--help",
        ],
    ] {
        let out = secret_cli(&bad_uris[0], &f.collection)
            .args(args)
            .output()
            .await
            .expect("run");
        assert!(out.status.success(), "{args:?}");
        assert!(!out.stdout.is_empty());
        assert_no_secret(&out, &format!("{args:?}"));
    }
}
