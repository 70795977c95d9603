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
        // reset --next.
        (&["reset", "s", "--next", "abc"], "--next"),
        (&["reset", "s", "--next", ""], "--next"),
        (&["reset", "s", "--next", "1.5"], "--next"),
        (&["reset", "s", "--next", "9223372036854775808"], "--next"),
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
    // reset --next outside the bounds of an existing sequence.
    let out = run(cli(&coll), &["create", "r", "--max", "100"]);
    assert!(out.status.success(), "{:?}", text(&out));
    for value in ["101", "-1", "9223372036854775807", "-9223372036854775808"] {
        let out = run(cli(&coll), &["reset", "r", "--next", value, "--force"]);
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
/// Slack for scheduling on a loaded 2-core machine (a debug build beside the other tests); a
/// hang, or the driver's own 30 s server selection, would take longer than the CLI's bound
/// (the timeout and twice this).
const SLACK: Duration = Duration::from_secs(6);

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
            assert!(
                err.is_database() || err.is_timeout(),
                "{kind:?}: {op}: {err}"
            );
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
        &["reset", "s", "--next", "50"],
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
        (&["reset", "s", "--next", "1000"], EXIT_INVALID),
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
                let what = format!("{args:?} on {}", dispenser::error::redact::redact_uri(uri));
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

/// Passwords that break a naive redactor: raw reserved characters (which the driver splits on
/// or rejects), percent-encoded forms, a password that looks like a host, and `+srv`. Each is
/// `(userinfo, password as typed, password decoded)`: neither may appear anywhere.
const NASTY: &[(&str, &str, &str)] = &[
    ("alice:Zq8/Secret91@", "Zq8/Secret91", "Zq8/Secret91"),
    ("alice:Zq8?Secret91@", "Zq8?Secret91", "Zq8?Secret91"),
    ("alice:Zq8?x=Secret91@", "Zq8?x=Secret91", "Zq8?x=Secret91"),
    ("alice:Zq8@Secret91@", "Zq8@Secret91", "Zq8@Secret91"),
    ("alice:Zq8:Secret91@", "Zq8:Secret91", "Zq8:Secret91"),
    ("alice:Zq8#Secret91@", "Zq8#Secret91", "Zq8#Secret91"),
    ("alice:Zq8%Secret91@", "Zq8%Secret91", "Zq8%Secret91"),
    ("alice:Zq8%zzSecret91@", "Zq8%zzSecret91", "Zq8%zzSecret91"),
    ("alice:Zq8%2FSecret91@", "Zq8%2FSecret91", "Zq8/Secret91"),
    ("alice:Zq8%40Secret91@", "Zq8%40Secret91", "Zq8@Secret91"),
    (
        "alice:Zq8%3FSecret91%23@",
        "Zq8%3FSecret91%23",
        "Zq8?Secret91#",
    ),
    (
        "alice:Zq8/?@:#%Secret91@",
        "Zq8/?@:#%Secret91",
        "Zq8/?@:#%Secret91",
    ),
    // A password that equals a host-like string.
    (
        "alice:db9.example.net:27017@",
        "db9.example.net:27017",
        "db9.example.net:27017",
    ),
    (
        "alice:Zq8%2C10.9.8.7%3A9@",
        "Zq8%2C10.9.8.7%3A9",
        "Zq8,10.9.8.7:9",
    ),
];

/// The password as typed and decoded, and each piece of either of 3 or more characters
/// between reserved characters (the driver may quote a piece as a host or an option).
fn secrets(raw: &'static str, decoded: &'static str) -> Vec<&'static str> {
    let mut all = vec![raw, decoded];
    for p in [raw, decoded] {
        all.extend(
            p.split(|c| "/?@:#%&=,[]".contains(c))
                .filter(|piece| piece.len() >= 3),
        );
    }
    all
}

/// Spawns the CLI, waits at most `limit` for it to end (else kills it) and returns its output.
fn output_within(mut c: Command, limit: Duration) -> Output {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dispenser");
    let started = Instant::now();
    while started.elapsed() < limit {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().expect("collect output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nasty_passwords_never_appear_anywhere() {
    common::ready();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let mut uris = Vec::new();
    for (i, (userinfo, raw, decoded)) in NASTY.iter().enumerate() {
        let shapes = [
            format!("mongodb://{userinfo}{closed}"),
            format!("mongodb://{userinfo}{closed},127.0.0.1:1/db?appName=x"),
            format!("mongodb+srv://{userinfo}cluster0.invalid/"),
        ];
        for uri in [
            format!("mongodb://{userinfo}{closed}/?directConnection=true"),
            shapes[i % shapes.len()].clone(),
        ] {
            uris.push((uri, *raw, *decoded));
        }
    }
    // The password the driver's own parser would see in a URI with a query holding '@'.
    uris.push((
        format!("mongodb://alice:Zq8Secret91@{closed}/?appName=a@b"),
        "Zq8Secret91",
        "Zq8Secret91",
    ));
    // Without a scheme.
    uris.push((
        format!("alice:Zq8/Secret91@{closed}"),
        "Zq8/Secret91",
        "Zq8/Secret91",
    ));
    let commands: &[&[&str]] = &[
        &["next", "s"],
        &["peek", "s"],
        &["bench", "--count", "1", "--warmup", "0"],
        &["serve", "--listen", "127.0.0.1:0"],
        &["--help"],
        &["next", "--help"],
    ];
    let checks = uris
        .iter()
        .enumerate()
        .flat_map(|(i, (uri, raw, decoded))| {
            // Help only for a few URIs: it never connects.
            let commands = if i < 4 { commands } else { &commands[..4] };
            commands.iter().enumerate().map(move |(j, args)| {
                // The URI in the environment or on the command line.
                let env = (i + j) % 2 == 0;
                {
                    let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
                    c.env("DISPENSER_LOG", "trace")
                        .env("DISPENSER_TOKENS", r#"{"tokens": []}"#)
                        .args(["--timeout", "1", "--db", DB]);
                    if env {
                        c.env("MONGODB_URI", uri);
                    } else {
                        c.env_remove("MONGODB_URI").args(["--uri", uri]);
                    }
                    c.args(*args);
                    let what = format!(
                        "{args:?} with {:?} (in env: {env})",
                        dispenser::error::redact::redact_uri(uri)
                    );
                    let help = args.contains(&"--help");
                    let (raw, decoded): (&'static str, &'static str) = (raw, decoded);
                    tokio::task::spawn_blocking(move || {
                        let out = output_within(c, Duration::from_secs(3));
                        let (stdout, stderr) = text(&out);
                        for secret in secrets(raw, decoded) {
                            assert!(
                                !stdout.contains(secret) && !stderr.contains(secret),
                                "{what} leaked {secret:?}:\n{stdout}\n{stderr}"
                            );
                        }
                        // A failure is one line (logs aside).
                        if !help && out.status.code() != Some(0) {
                            let last = stderr.lines().last().unwrap_or_default();
                            assert!(last.starts_with("dispenser: "), "{what}: {stderr}");
                            for noise in ["Kind:", "labels:", "source: None", "Topology"] {
                                assert!(!last.contains(noise), "{what}: {last}");
                            }
                        }
                    })
                }
            })
        });
    // A few at a time: each waits out its 1 s timeout.
    let mut checks: Vec<_> = checks.collect();
    for chunk in checks.chunks_mut(16) {
        for r in join_all(chunk.iter_mut()).await {
            r.expect("check panicked");
        }
    }
    // The library: connect and an operation, displayed and debug-printed.
    for (uri, raw, decoded) in &uris {
        let options = Options::default()
            .with_database(DB)
            .with_operation_timeout(TIMEOUT);
        let shown = match Dispenser::connect(uri, options).await {
            Err(e) => format!("{e} {e:?}"),
            Ok(d) => {
                let e = d.peek("s").await.expect_err("nothing listens");
                format!("{e} {e:?} {d:?}")
            }
        };
        for secret in secrets(raw, decoded) {
            assert!(
                !shown.contains(secret),
                "{uri:?} leaked {secret:?}: {shown}"
            );
        }
    }
}

/// Asserts that a driver error is shown as one readable line without debug noise.
fn assert_readable(message: &str, what: &str) {
    assert_eq!(message.lines().count(), 1, "{what}: {message}");
    for noise in [
        "Kind:",
        "labels:",
        "source: None",
        "server response:",
        "Topology",
    ] {
        assert!(!message.contains(noise), "{what}: {noise:?} in {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_errors_are_one_readable_line() {
    common::ready();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let garbage = FakeServer::start(Fake::Garbage).await;
    let http = FakeServer::start(Fake::Http).await;
    let cases = [
        (
            format!("mongodb://{closed}/?directConnection=true"),
            "connection refused",
        ),
        (garbage.uri(""), ""),
        (http.uri(""), ""),
        (
            format!("mongodb://alice:pw@{closed}/?directConnection=true&w=nonsense"),
            "",
        ),
    ];
    for (uri, needle) in &cases {
        let options = Options::default()
            .with_database(DB)
            .with_operation_timeout(TIMEOUT);
        let d = Dispenser::connect(uri, options).await.expect("connect");
        let err = d.peek("s").await.expect_err("not a MongoDB server");
        let shown = err.to_string();
        assert_readable(&shown, uri);
        assert!(shown.contains(needle), "{uri}: {needle:?} not in {shown}");
        if let dispenser::Error::Database { .. } = err {
            assert!(
                std::error::Error::source(&err).is_some(),
                "{uri}: the driver error is the source"
            );
            assert!(shown.contains(&closed.to_string()) || !uri.contains(&closed.to_string()));
        }
        let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
        c.env("MONGODB_URI", uri).env_remove("DISPENSER_LOG").args([
            "--timeout",
            "1",
            "--db",
            DB,
            "next",
            "s",
        ]);
        let out = c.output().expect("run dispenser");
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(EXIT_DATABASE), "{uri}: {stderr}");
        assert_readable(stderr.trim_end(), uri);
        assert!(stderr.contains(needle), "{uri}: {needle:?} not in {stderr}");
    }
    // A URI the driver rejects: one line naming the problem, exit 2.
    let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .env("MONGODB_URI", "mongodb://127.0.0.1:9/?w=1&w=2")
        .args(["--timeout", "1", "next", "s"])
        .output()
        .expect("run dispenser");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(EXIT_INVALID), "{stderr}");
    assert_readable(stderr.trim_end(), "repeated option");
    assert!(stderr.contains("repeated options"), "{stderr}");
}

/// Names with control characters, and the scope and stripe separators in names users create.
const BAD_NAMES: &[(&str, &str)] = &[
    ("multi\nline", "control character"),
    ("tab\there", "control character"),
    ("cr\rhere", "control character"),
    ("nul\0here", "control character"),
    ("del\u{7f}here", "control character"),
    ("nel\u{85}here", "control character"),
    ("x@y", "'@' separates a template from its scope"),
    ("@", "'@' separates a template from its scope"),
    (
        "q~0",
        "'~' separates a striped sequence from its stripe number",
    ),
    (
        "ids~1",
        "'~' separates a striped sequence from its stripe number",
    ),
];

#[tokio::test]
async fn names_with_control_characters_or_separators_are_rejected_and_nothing_is_written() {
    let f = Fixture::new("bad_names").await;
    let d = f.dispenser(f.options());
    for (name, reason) in BAD_NAMES {
        let calls = [
            ("create", d.create(name, Spec::default()).await.map(drop)),
            ("ensure", d.ensure(name, Spec::default()).await.map(drop)),
            (
                "ensure_striped",
                d.ensure_striped(name, 2, Spec::default()).await.map(drop),
            ),
            ("ensure_scope", d.ensure_scope(name, "k").await.map(drop)),
            (
                "daily",
                d.open_daily(name, dispenser::jiff::tz::TimeZone::get("UTC").unwrap())
                    .map(drop),
            ),
        ];
        for (call, r) in calls {
            let err = r.expect_err(&format!("{call}({name:?}) accepted"));
            assert!(
                matches!(err, dispenser::Error::InvalidName { .. }),
                "{call}({name:?}): {err}"
            );
            let shown = err.to_string();
            assert!(shown.contains(reason), "{call}({name:?}): {shown}");
            assert_eq!(shown.lines().count(), 1, "{call}({name:?}): {shown}");
        }
        if reason.contains("control") {
            // Not even a stored name may hold a control character.
            let err = d.peek(name).await.expect_err("control characters");
            assert!(err.to_string().contains(reason), "{err}");
            assert!(dispenser::sequence::validate_name(name).is_err());
        }
    }
    // A scope key with a control character.
    d.create("tickets", Spec::default())
        .await
        .expect("template");
    for key in ["a\nb", "\t", "k\u{7f}"] {
        let err = d
            .ensure_scope("tickets", key)
            .await
            .expect_err("control key");
        assert!(
            matches!(err, dispenser::Error::InvalidName { .. }),
            "{key:?}: {err}"
        );
        assert!(err.to_string().contains("control character"), "{err}");
    }
    // Nothing was written but the template.
    let count = f.raw().count_documents(mongodb_doc()).await.expect("count");
    assert_eq!(count, 1);
    // Names the library builds stay readable, peekable and deletable by their full name.
    let acme = d.ensure_scope("tickets", "acme").await.expect("scope");
    assert_eq!(acme.next().await.expect("draw"), 1);
    assert_eq!(d.peek("tickets@acme").await.expect("peek scope").value, 1);
    d.open("tickets@acme").await.expect("open scope");
    d.delete("tickets@acme").await.expect("delete scope");
    let ids = d
        .ensure_striped("ids", 2, Spec::default())
        .await
        .expect("striped");
    ids.next().await.expect("draw");
    d.peek("ids~1").await.expect("peek stripe");
    d.delete("ids~1").await.expect("delete stripe");
}

fn mongodb_doc() -> dispenser::mongodb::bson::Document {
    dispenser::mongodb::bson::Document::new()
}
