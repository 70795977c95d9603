//! The README's clients in other languages — mongosh (JavaScript) and Python (pymongo) — run
//! exactly as printed: each test extracts the fenced block after `<!-- client:NAME -->` from
//! README.md and runs it with the tools `scripts/tools.sh` installs into `.tools/` (a test
//! fails, never skips, when they are missing). They draw from one document together with
//! `dispenser next` processes of both strategies, and must never issue a duplicate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;

use crate::common::{self, DB};

const EXIT_EXHAUSTED: i32 = 4;

/// A tool under `.tools/`, or a panic saying how to install it.
pub fn tool(relative: &str) -> PathBuf {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join(".tools")
        .join(relative);
    assert!(
        path.exists(),
        "{} is missing: run scripts/tools.sh (scripts/test.sh runs it)",
        path.display()
    );
    path
}

/// The Python of the tools venv (pymongo, openapi-spec-validator).
pub fn python() -> PathBuf {
    tool("venv/bin/python")
}

fn mongosh() -> PathBuf {
    tool("npm/node_modules/.bin/mongosh")
}

/// The body of the fenced code block right after `<!-- client:NAME -->` in the guide's
/// chapter on the sequence document, which holds the client recipes.
fn readme_block(name: &str) -> String {
    const RECIPES: &str = "src/guide/document.md";
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(RECIPES);
    let readme = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {RECIPES}: {e}"));
    let marker = format!("<!-- client:{name} -->");
    let at = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("{RECIPES} has no {marker} marker"));
    let rest = readme[at + marker.len()..].trim_start();
    assert!(
        rest.starts_with("```"),
        "{RECIPES}: {marker} is not followed by a fenced code block"
    );
    let body = &rest[rest.find('\n').expect("fence line") + 1..];
    let end = body
        .find("\n```")
        .unwrap_or_else(|| panic!("{RECIPES}: the block after {marker} is not closed"));
    body[..=end].to_owned()
}

/// A client from the README with a driver loop that prints `T_COUNT` numbers, one a line.
#[derive(Clone, Copy, Debug)]
enum Client {
    Mongosh,
    /// The mongosh block's `nextFast`: the conditional increment, `next` at the bound.
    MongoshIncrement,
    Python,
}

impl Client {
    fn script(self) -> PathBuf {
        let (block, driver, ext) = match self {
            Client::Mongosh => (
                readme_block("mongosh"),
                "const coll = db.getSiblingDB(process.env.T_DB).getCollection(process.env.T_COLL);\n\
                 for (let i = 0; i < Number(process.env.T_COUNT); i++)\n  \
                 print(String(next(process.env.T_NAME, coll)));\n",
                "js",
            ),
            Client::MongoshIncrement => (
                readme_block("mongosh"),
                "const coll = db.getSiblingDB(process.env.T_DB).getCollection(process.env.T_COLL);\n\
                 for (let i = 0; i < Number(process.env.T_COUNT); i++) {\n  \
                 print(String(nextFast(process.env.T_NAME, coll)));\n  \
                 // Between two draws, another client lowers max (what `alter` writes).\n  \
                 if (String(i + 1) === process.env.T_ALTER_AFTER)\n    \
                 coll.updateOne({ _id: process.env.T_NAME }, { $set: { max: Long.fromString(process.env.T_ALTER_MAX) }, \
                 $inc: { version: Long.fromString(\"1\") } });\n}\n",
                "js",
            ),
            Client::Python => (
                readme_block("python"),
                "import os\nfrom pymongo import MongoClient\n\
                 coll = MongoClient(os.environ['T_URI'])[os.environ['T_DB']][os.environ['T_COLL']]\n\
                 for _ in range(int(os.environ['T_COUNT'])):\n    \
                 print(next_number(coll, os.environ['T_NAME']), flush=True)\n",
                "py",
            ),
        };
        let path = std::env::temp_dir().join(format!("{}.{ext}", common::unique("client")));
        std::fs::write(&path, format!("{block}\n{driver}")).expect("write client script");
        path
    }

    /// Runs the client: `count` draws from `name` in `collection`.
    fn run(self, collection: &str, name: &str, count: usize) -> Output {
        let script = self.script();
        let mut cmd = match self {
            Client::Mongosh | Client::MongoshIncrement => {
                let mut c = Command::new(mongosh());
                c.arg(common::uri())
                    .arg("--quiet")
                    .arg("--file")
                    .arg(&script);
                c
            }
            Client::Python => {
                let mut c = Command::new(python());
                c.arg(&script);
                c
            }
        };
        let out = cmd
            .env("T_URI", common::uri())
            .env("T_DB", DB)
            .env("T_COLL", collection)
            .env("T_NAME", name)
            .env("T_COUNT", count.to_string())
            .output()
            .unwrap_or_else(|e| panic!("run {self:?}: {e}"));
        let _ = std::fs::remove_file(&script);
        out
    }

    /// Runs the client and returns its numbers; it must succeed and print nothing else.
    fn draw(self, collection: &str, name: &str, count: usize) -> Vec<i64> {
        let out = self.run(collection, name, count);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "{self:?} ({}): stdout {stdout:?} stderr {stderr:?}",
            out.status
        );
        let numbers: Vec<i64> = stdout
            .lines()
            .map(|l| {
                l.parse()
                    .unwrap_or_else(|_| panic!("{self:?} printed {l:?}, not a number"))
            })
            .collect();
        assert_eq!(numbers.len(), count, "{self:?}: {stdout:?}");
        numbers
    }
}

/// The CLI on the test server and `collection`.
fn cli(collection: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dispenser"));
    c.env("MONGODB_URI", common::uri())
        .args(["--db", DB, "--collection", collection]);
    c
}

fn cli_ok(collection: &str, args: &[&str]) -> String {
    let out = cli(collection).args(args).output().expect("run dispenser");
    assert!(
        out.status.success(),
        "dispenser {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `dispenser next` with `strategy`, `count` numbers in one process.
fn cli_next(collection: &str, name: &str, strategy: &str, count: usize) -> Vec<i64> {
    cli_ok(
        collection,
        &[
            "next",
            name,
            "--strategy",
            strategy,
            "--count",
            &count.to_string(),
        ],
    )
    .lines()
    .map(|l| l.parse().expect("a number per line"))
    .collect()
}

fn peek(collection: &str, name: &str) -> serde_json::Value {
    serde_json::from_str(&cli_ok(collection, &["peek", name, "--json"])).expect("peek --json")
}

#[test]
fn readme_clients_and_both_cli_strategies_share_a_cyclic_sequence_without_duplicates() {
    common::ready();
    let coll = common::unique("clients_mix");
    const N: i64 = 10;
    const K: usize = 8;
    cli_ok(
        &coll,
        &["create", "tickets", "--min", "1", "--max", "10", "--cycle"],
    );
    // 80 = 10 × 8 numbers: two processes of each client, and CLI processes of both strategies
    // (single draws and runs that cross the wrap), all at once.
    let mut workers: Vec<thread::JoinHandle<Vec<i64>>> = Vec::new();
    for client in [
        Client::Mongosh,
        Client::MongoshIncrement,
        Client::Python,
        Client::Python,
    ] {
        let coll = coll.clone();
        workers.push(thread::spawn(move || client.draw(&coll, "tickets", 12)));
    }
    for strategy in ["inc", "cas"] {
        let coll = coll.clone();
        workers.push(thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..12 {
                got.extend(cli_next(&coll, "tickets", strategy, 1));
            }
            got.extend(cli_next(&coll, "tickets", strategy, 4));
            got
        }));
    }
    let all: Vec<i64> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect();
    common::assert_each_exactly(all, 1..=N, K);
    let state = peek(&coll, "tickets");
    assert_eq!(state["value"], 10, "{state}");
    assert_eq!(state["cycles"], K as i64 - 1, "{state}");
}

/// The numbers a sequence standing at `value` issues next (the README's rule, in i128).
fn model(mut value: i64, step: i64, min: i64, max: i64, count: usize) -> Vec<i64> {
    (0..count)
        .map(|_| {
            let n = i128::from(value) + i128::from(step);
            value = if n > i128::from(max) {
                min
            } else if n < i128::from(min) {
                max
            } else {
                i64::try_from(n).expect("within bounds")
            };
            value
        })
        .collect()
}

#[test]
fn readme_clients_are_exact_at_both_ends_of_int64() {
    common::ready();
    let coll = common::unique("clients_exact");
    // Ascending by 2 up to i64::MAX (past 2^53 a double cannot tell these apart), wrapping.
    let (min, max) = (i64::MAX - 7, i64::MAX);
    cli_ok(
        &coll,
        &[
            "create",
            "top",
            "--min",
            &min.to_string(),
            "--max",
            &max.to_string(),
            "--start",
            &(max - 2).to_string(),
            "--step",
            "2",
            "--cycle",
        ],
    );
    // Descending by 3 down to i64::MIN, wrapping to max.
    let (dmin, dmax) = (i64::MIN, i64::MIN + 9);
    cli_ok(
        &coll,
        &[
            "create",
            "bottom",
            &format!("--min={dmin}"),
            &format!("--max={dmax}"),
            &format!("--start={dmax}"),
            "--step=-3",
            "--cycle",
        ],
    );
    for (name, first, step, lo, hi) in [
        ("top", max - 2, 2, min, max),
        ("bottom", dmax, -3, dmin, dmax),
    ] {
        let mut got = Vec::new();
        for _ in 0..2 {
            got.extend(Client::Mongosh.draw(&coll, name, 3));
            got.extend(Client::Python.draw(&coll, name, 3));
            got.extend(cli_next(&coll, name, "cas", 2));
        }
        let mut want = vec![first];
        want.extend(model(first, step, lo, hi, got.len() - 1));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn readme_clients_refuse_an_exhausted_sequence_and_write_nothing() {
    common::ready();
    let coll = common::unique("clients_exhausted");
    cli_ok(
        &coll,
        &["create", "last", "--start", &(i64::MAX - 1).to_string()],
    );
    assert_eq!(Client::Mongosh.draw(&coll, "last", 1), vec![i64::MAX - 1]);
    assert_eq!(Client::Python.draw(&coll, "last", 1), vec![i64::MAX]);
    let before = peek(&coll, "last");
    for client in [Client::Mongosh, Client::Python] {
        let out = client.run(&coll, "last", 1);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{client:?} drew past i64::MAX");
        assert!(out.stdout.is_empty(), "{client:?}: {:?}", out.stdout);
        assert!(stderr.contains("is exhausted"), "{client:?}: {stderr}");
    }
    let out = cli(&coll)
        .args(["next", "last"])
        .output()
        .expect("run dispenser");
    assert_eq!(out.status.code(), Some(EXIT_EXHAUSTED));
    let after = peek(&coll, "last");
    for key in ["value", "version", "cycles", "updated_at"] {
        assert_eq!(after[key], before[key], "a refused draw wrote {key}");
    }
}

/// Issue 19, item 7: the README's conditional increment carries the shape in its filter. It
/// draws 1…5 with the shape it read first; then another client lowers `max` to 7 (as `alter`
/// writes it); its next draws are 6 and 7, then it is exhausted — with a filter on `value`
/// alone it went on past the new bound (8, 9, …).
#[test]
fn the_readme_increment_never_passes_a_bound_an_alter_lowered() {
    common::ready();
    let coll = common::unique("clients_increment_alter");
    cli_ok(&coll, &["create", "orders", "--max", "1000"]);
    let script = Client::MongoshIncrement.script();
    let out = Command::new(mongosh())
        .arg(common::uri())
        .arg("--quiet")
        .arg("--file")
        .arg(&script)
        .env("T_DB", DB)
        .env("T_COLL", &coll)
        .env("T_NAME", "orders")
        .env("T_COUNT", "10")
        .env("T_ALTER_AFTER", "5")
        .env("T_ALTER_MAX", "7")
        .output()
        .expect("run mongosh");
    let _ = std::fs::remove_file(&script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let got: Vec<i64> = stdout.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(got, [1, 2, 3, 4, 5, 6, 7], "stderr: {stderr}");
    assert!(
        !out.status.success() && stderr.contains("is exhausted"),
        "{stderr}"
    );
    let state = peek(&coll, "orders");
    assert_eq!(
        (state["value"].as_i64(), state["max"].as_i64()),
        (Some(7), Some(7))
    );
}
