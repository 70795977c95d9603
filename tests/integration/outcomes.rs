//! The outcomes harness: every command that writes — each CLI command and each HTTP operation
//! — run through the fault proxy (`proxy.rs`) with its requests faulted one at a time: a reply
//! dropped, a connection reset after the request, a server that never answers; and each CLI
//! command with its standard output full (`/dev/full`). Every run must
//!
//! - return within its `--timeout` plus a small margin (every database operation is bounded,
//!   set-up included);
//! - say what happened truthfully, checked against the database afterwards: exit 0 or 14
//!   ("written, the answer could not be printed") only when its write is there; exit 5
//!   ("nothing was written") or a refusal only when it is not; exit 13 ("the outcome is
//!   unknown") only when a write of its own lost its answer; over HTTP the same through the
//!   error body's `outcome` (`nothing_written`, `unknown`);
//! - never hand out a number or ticket twice, and never panic.
//!
//! The commands come from the CLI's own help: the harness's lists of commands that write and
//! commands that only read must together be exactly the binary's subcommands, and the HTTP
//! operations that write exactly the non-GET operations of `/openapi.json`, so a new command is
//! not forgotten. A run first goes through untouched to learn its requests (`Proxy::seen`);
//! then each request is faulted in turn: reads by a server that never answers, writes by all
//! three faults.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dispenser::gapless::GaplessOptions;
use dispenser::mongodb::Client;
use dispenser::mongodb::bson::{Document, doc};
use dispenser::queue::QueueSpec;
use dispenser::{Dispenser, Error, Options, Spec};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::common::{self, DB};
use crate::proxy::{Fault, Faults, Proxy, Seen};

/// `--timeout` of the runs through the proxy (seconds): each database operation's bound.
const TIMEOUT: f64 = 0.5;
/// What a run may take beyond its timeout: the process starting, connecting, its other
/// requests (the bug this catches is a run that never ends: it is killed at [`KILL_AFTER`]).
const MARGIN: Duration = Duration::from_secs(6);
const KILL_AFTER: Duration = Duration::from_secs(40);
/// Runs at once.
const PARALLEL: usize = 12;
/// Who the runs act as (request ids are the caller's).
const CALLER: &str = "outcomes-harness";

/// The exit codes of the three outcomes (the guide's command-line chapter).
const EXIT_NOTHING: i32 = 5;
const EXIT_UNKNOWN: i32 = 13;
const EXIT_UNPRINTED: i32 = 14;

/// Every CLI command that writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Create,
    Next,
    Alter,
    AdvanceTo,
    Adopt,
    Reset,
    Delete,
    GaplessCreate,
    GaplessDelete,
    GaplessIssue,
    GaplessVoid,
    GaplessRelease,
    GaplessAlter,
    QueueCreate,
    QueueTake,
    QueueCall,
    QueueRecall,
    QueueFinish,
    QueueCancel,
    /// `queue call --serial`, `queue cancel --serial`: the acts that name a ticket by its
    /// serial (issue 59).
    QueueCallSerial,
    QueueCancelSerial,
    QueueAlter,
    QueueDelete,
}

/// The commands that write, as the CLI names them.
const WRITERS: [(Cmd, &str); 23] = [
    (Cmd::Create, "create"),
    (Cmd::Next, "next"),
    (Cmd::Alter, "alter"),
    (Cmd::AdvanceTo, "advance-to"),
    (Cmd::Adopt, "adopt"),
    (Cmd::Reset, "reset"),
    (Cmd::Delete, "delete"),
    (Cmd::GaplessCreate, "gapless create"),
    (Cmd::GaplessDelete, "gapless delete"),
    (Cmd::GaplessIssue, "gapless issue"),
    (Cmd::GaplessVoid, "gapless void"),
    (Cmd::GaplessRelease, "gapless release"),
    (Cmd::GaplessAlter, "gapless alter"),
    (Cmd::QueueCreate, "queue create"),
    (Cmd::QueueTake, "queue take"),
    (Cmd::QueueCall, "queue call"),
    (Cmd::QueueRecall, "queue recall"),
    (Cmd::QueueFinish, "queue finish"),
    (Cmd::QueueCancel, "queue cancel"),
    (Cmd::QueueCallSerial, "queue call"),
    (Cmd::QueueCancelSerial, "queue cancel"),
    (Cmd::QueueAlter, "queue alter"),
    (Cmd::QueueDelete, "queue delete"),
];

/// The commands that only read (`doctor` and `bench` write only scratch documents of their
/// own and remove them; `serve` is checked through its HTTP operations).
const READERS: [&str; 14] = [
    "peek",
    "list",
    "check",
    "audit",
    "doctor",
    "history",
    "queue history",
    "gapless history",
    "bench",
    "serve",
    "gapless peek",
    "gapless list",
    "queue peek",
    "queue list",
];

/// One run's fresh world: a collection of its own, and the names the commands use in it.
struct World {
    d: Dispenser,
    collection: String,
    business: String,
    /// A holder of gap-free number 1 (for `gapless release`), held until the run is checked.
    holder: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(h) = self.holder.take() {
            h.abort();
        }
    }
}

impl World {
    async fn new(client: &Client) -> World {
        let collection = common::unique("outcomes");
        let options = Options::default()
            .with_database(DB)
            .with_collection(collection.as_str())
            .with_caller(CALLER);
        World {
            d: Dispenser::new(client, options).expect("options"),
            business: format!("{collection}_b"),
            collection,
            holder: None,
        }
    }

    fn gapless_options(&self) -> GaplessOptions {
        GaplessOptions::new(&self.business, "n")
    }

    async fn gapless(&self) -> dispenser::gapless::Gapless {
        self.d
            .ensure_gapless("inv", self.gapless_options())
            .await
            .expect("ensure gap-free")
    }

    async fn queue(&self) -> dispenser::queue::Queue {
        self.d.open_queue("q").await.expect("open queue")
    }

    async fn queue_status(&self) -> Option<dispenser::queue::QueueState> {
        match self.d.open_queue("q").await {
            Ok(q) => Some(q.peek().await.expect("queue peek")),
            Err(Error::NotFound {
                kind: dispenser::error::Kind::Queue,
                ..
            }) => None,
            Err(e) => panic!("{e}"),
        }
    }

    async fn business_docs(&self, filter: Document) -> u64 {
        self.d
            .client()
            .database(DB)
            .collection::<Document>(&self.business)
            .count_documents(filter)
            .await
            .expect("count business documents")
    }

    /// Makes what `cmd` needs to exist.
    async fn set_up(&mut self, cmd: Cmd) {
        let d = &self.d;
        match cmd {
            Cmd::Create | Cmd::GaplessCreate | Cmd::QueueCreate => {}
            Cmd::Next | Cmd::Alter | Cmd::AdvanceTo | Cmd::Delete => {
                d.create("s", Spec::default()).await.expect("create");
            }
            Cmd::Reset => {
                d.create("s", Spec::default()).await.expect("create");
                d.open("s").await.unwrap().next().await.expect("draw");
            }
            Cmd::Adopt => {
                // Documents another numbering gave numbers up to 41.
                d.create("s", Spec::default()).await.expect("create");
                self.d
                    .client()
                    .database(DB)
                    .collection::<Document>(&self.business)
                    .insert_one(doc! { "n": 41_i64 })
                    .await
                    .expect("a numbered document");
            }
            Cmd::GaplessIssue | Cmd::GaplessVoid | Cmd::GaplessAlter | Cmd::GaplessDelete => {
                self.gapless().await;
            }
            Cmd::GaplessRelease => {
                // A holder that took number 1 and never writes it.
                let g = self.gapless().await;
                let held = Arc::new(tokio::sync::Notify::new());
                let told = held.clone();
                self.holder = Some(tokio::spawn(async move {
                    let _ = g
                        .issue(|_| {
                            told.notify_one();
                            std::future::pending::<Result<(), std::io::Error>>()
                        })
                        .await;
                }));
                held.notified().await;
            }
            Cmd::QueueTake | Cmd::QueueAlter | Cmd::QueueDelete => {
                d.create_queue("q", QueueSpec::default())
                    .await
                    .expect("create queue");
            }
            Cmd::QueueCall | Cmd::QueueCancel | Cmd::QueueCallSerial | Cmd::QueueCancelSerial => {
                let q = d.create_queue("q", QueueSpec::default()).await.unwrap();
                q.take().await.expect("take");
            }
            Cmd::QueueRecall | Cmd::QueueFinish => {
                let q = d.create_queue("q", QueueSpec::default()).await.unwrap();
                q.take().await.expect("take");
                q.call().await.expect("call");
            }
        }
    }

    /// The command's words after the global options.
    fn args(&self, cmd: Cmd) -> Vec<String> {
        let b = self.business.as_str();
        let words: Vec<&str> = match cmd {
            Cmd::Create => vec!["create", "s"],
            Cmd::Next => vec!["next", "s", "--count", "3"],
            Cmd::Alter => vec!["alter", "s", "--max", "1000"],
            Cmd::AdvanceTo => vec!["advance-to", "s", "100"],
            Cmd::Adopt => vec![
                "adopt",
                "s",
                "--from",
                "highest",
                "--source-collection",
                b,
                "--field",
                "n",
            ],
            Cmd::Reset => vec!["reset", "s", "--next", "50"],
            Cmd::Delete => vec!["delete", "s"],
            Cmd::GaplessCreate => vec!["gapless", "create", "inv", "--into", b, "--field", "n"],
            Cmd::GaplessDelete => vec!["gapless", "delete", "inv"],
            Cmd::GaplessIssue => vec!["gapless", "issue", "inv", "--lease", "5"],
            Cmd::GaplessVoid => vec!["gapless", "void", "inv", "1", "--reason", "spoilt"],
            Cmd::GaplessRelease => vec!["gapless", "release", "inv", "1", "--force"],
            Cmd::GaplessAlter => vec!["gapless", "alter", "inv", "--max-lease", "60"],
            Cmd::QueueCreate => vec!["queue", "create", "q"],
            Cmd::QueueTake => vec!["queue", "take", "q", "--request-id", "kiosk-1"],
            Cmd::QueueCall => vec!["queue", "call", "q"],
            Cmd::QueueRecall => vec!["queue", "recall", "q"],
            Cmd::QueueFinish => vec!["queue", "finish", "q"],
            Cmd::QueueCancel => vec!["queue", "cancel", "q", "1"],
            Cmd::QueueCallSerial => vec!["queue", "call", "q", "--serial", "1"],
            Cmd::QueueCancelSerial => vec!["queue", "cancel", "q", "--serial", "1"],
            Cmd::QueueAlter => vec!["queue", "alter", "q", "--max", "50"],
            Cmd::QueueDelete => vec!["queue", "delete", "q"],
        };
        words.into_iter().map(str::to_owned).collect()
    }

    /// Whether `cmd`'s write is in the database.
    async fn applied(&self, cmd: Cmd) -> bool {
        let d = &self.d;
        let seq = || async { d.peek("s").await };
        match cmd {
            Cmd::Create => seq().await.is_ok(),
            Cmd::Next => seq().await.expect("peek").value > 0,
            Cmd::Alter => seq().await.expect("peek").max == 1000,
            Cmd::AdvanceTo => seq().await.expect("peek").value >= 100,
            Cmd::Adopt => seq().await.expect("peek").value >= 41,
            Cmd::Reset => seq().await.expect("peek").value == 49,
            Cmd::Delete => matches!(seq().await, Err(Error::NotFound { .. })),
            Cmd::GaplessCreate => d.open_gapless("inv").await.is_ok(),
            Cmd::GaplessDelete => {
                matches!(d.open_gapless("inv").await, Err(Error::NotFound { .. }))
            }
            Cmd::GaplessIssue => {
                self.business_docs(doc! { "n": 1, "voided": { "$exists": false } })
                    .await
                    > 0
            }
            Cmd::GaplessVoid | Cmd::GaplessRelease => {
                self.business_docs(doc! { "n": 1, "voided": { "$exists": true } })
                    .await
                    > 0
            }
            Cmd::GaplessAlter => {
                let g = d.open_gapless("inv").await.expect("open gap-free");
                g.peek().await.expect("status").max_lease == Duration::from_secs(60)
            }
            Cmd::QueueCreate => self.queue_status().await.is_some(),
            Cmd::QueueTake => self.queue_status().await.expect("queue").taken == 1,
            Cmd::QueueCall | Cmd::QueueCallSerial => {
                self.queue_status().await.expect("queue").served == 1
            }
            Cmd::QueueRecall => {
                let s = self.queue_status().await.expect("queue");
                s.recent_calls.iter().any(|c| c.recall)
            }
            Cmd::QueueFinish => self.queue_status().await.expect("queue").desks.is_empty(),
            Cmd::QueueCancel | Cmd::QueueCancelSerial => {
                self.queue_status().await.expect("queue").cancelled == 1
            }
            Cmd::QueueAlter => self.queue_status().await.expect("queue").max == 50,
            Cmd::QueueDelete => self.queue_status().await.is_none(),
        }
    }

    /// No number or ticket twice: what the run printed is never handed out again, and the
    /// business collection carries no number twice.
    async fn no_duplicate(&self, cmd: Cmd, printed: &str) -> Result<(), String> {
        let printed: Vec<i64> = printed
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        match cmd {
            Cmd::Next => {
                let n = self.d.open("s").await.unwrap().next().await.unwrap();
                if printed.contains(&n) || printed.iter().any(|p| *p >= n) {
                    return Err(format!("printed {printed:?}, then {n} was drawn"));
                }
            }
            Cmd::QueueTake => {
                let t = self.queue().await.take().await.unwrap().number;
                let waiting = self.queue_status().await.unwrap().waiting;
                if printed.contains(&t) && waiting > 1 {
                    return Err(format!("printed ticket {printed:?}, then {t} was taken"));
                }
            }
            Cmd::GaplessIssue | Cmd::GaplessVoid | Cmd::GaplessRelease => {
                let a = common::audit(&self.d, &self.business, "n", None)
                    .await
                    .map_err(|e| e.to_string())?;
                if !a.duplicates.is_empty() {
                    return Err(format!("numbers carried twice: {:?}", a.duplicates));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// What a run of the binary did.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs the binary with `args` against `uri` in `world`'s collection, stdout to `/dev/full`
/// when `full`; killed after [`KILL_AFTER`].
async fn run(uri: &str, world: &World, args: &[String], timeout: f64, full: bool) -> Ran {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_dispenser"));
    c.env("MONGODB_URI", uri)
        .env_remove("DISPENSER_LOG")
        .args(["--db", DB, "--collection", &world.collection])
        .args(["--timeout", &timeout.to_string(), "--caller", CALLER])
        .args(args)
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if full {
        c.stdout(std::fs::File::create("/dev/full").expect("/dev/full"));
    } else {
        c.stdout(Stdio::piped());
    }
    let started = Instant::now();
    let child = c.spawn().expect("run dispenser");
    match tokio::time::timeout(KILL_AFTER, child.wait_with_output()).await {
        Ok(out) => {
            let out = out.expect("output");
            Ran {
                code: out.status.code(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                took: started.elapsed(),
            }
        }
        Err(_) => Ran {
            code: None,
            stdout: String::new(),
            stderr: format!("killed after {KILL_AFTER:?}"),
            took: started.elapsed(),
        },
    }
}

/// The subcommands the binary's help lists (`gapless issue` for those of a group), `help`
/// left out.
fn cli_commands() -> BTreeSet<String> {
    fn listed(args: &[&str]) -> Vec<String> {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dispenser"))
            .args(args)
            .arg("--help")
            .output()
            .expect("help");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .filter(|c| c != "help")
            .collect()
    }
    let mut all = BTreeSet::new();
    for c in listed(&[]) {
        let sub = listed(&[c.as_str()]);
        if sub.is_empty() {
            all.insert(c);
        } else {
            all.extend(sub.into_iter().map(|s| format!("{c} {s}")));
        }
    }
    all
}

/// What a run said, checked against what the database holds (`applied`). `faulted`: the
/// request the proxy faulted (`None` for a run with stdout full).
fn judge(ran: &Ran, applied: bool, faulted: Option<&Seen>, limit: Duration) -> Result<(), String> {
    let err = &ran.stderr;
    if ran.took > limit {
        return Err(format!("took {:?}, more than {limit:?}", ran.took));
    }
    if err.contains("panicked") {
        return Err("panicked".to_owned());
    }
    // The server answered the requests before the faulted one: it was reachable. (A run
    // that never reached its fault may have met a slow machine's selection timeout.)
    if faulted.is_some() && err.contains("is the server running") {
        return Err("said the server could not be reached; it was reached".to_owned());
    }
    match ran.code {
        Some(0) if !applied => Err("exit 0, but its write is not there".to_owned()),
        Some(0) => Ok(()),
        Some(EXIT_UNPRINTED) if !applied => Err("exit 14 (written), but nothing is there".into()),
        Some(EXIT_UNPRINTED) if !err.contains("written, but") => {
            Err("exit 14 without saying what was written".into())
        }
        Some(EXIT_UNPRINTED) => Ok(()),
        Some(EXIT_UNKNOWN) if !err.contains("unknown") => {
            Err("exit 13 without saying the outcome is unknown".into())
        }
        Some(EXIT_UNKNOWN) if faulted.is_some_and(|f| !f.writes()) => Err(format!(
            "exit 13 (unknown) after a read ({}) lost its answer",
            faulted.map(ToString::to_string).unwrap_or_default()
        )),
        Some(EXIT_UNKNOWN) => Ok(()),
        Some(EXIT_NOTHING) if !err.contains("nothing was written") => {
            Err("exit 5 without saying nothing was written".into())
        }
        Some(code) if applied => Err(format!(
            "exit {code} says nothing was written, but its write is there"
        )),
        Some(_) => Ok(()),
        None => Err("no exit code (killed)".into()),
    }
}

/// One faulted (or stdout-full) run of `cmd`, checked; `Err` names what was wrong.
async fn case(
    client: &Client,
    cmd: Cmd,
    fault: Option<(usize, Fault)>,
    full: bool,
) -> (Vec<Seen>, Result<(), String>) {
    let mut world = World::new(client).await;
    world.set_up(cmd).await;
    let args = world.args(cmd);
    let proxy = Proxy::to_test_server(Faults::default(), 1).await;
    proxy.script(fault);
    let timeout = if fault.is_some() { TIMEOUT } else { 10.0 };
    let ran = run(&proxy.uri(""), &world, &args, timeout, full).await;
    let seen = proxy.seen();
    drop(proxy);
    let faulted = fault.and_then(|(k, _)| seen.get(k).cloned());
    let applied = world.applied(cmd).await;
    let limit = Duration::from_secs_f64(timeout) + MARGIN;
    let mut verdict = judge(&ran, applied, faulted.as_ref(), limit);
    if verdict.is_ok() && fault.is_none() && !full && ran.code != Some(0) {
        verdict = Err("the untouched run failed".to_owned());
    }
    if verdict.is_ok() {
        verdict = world.no_duplicate(cmd, &ran.stdout).await;
    }
    if full && verdict.is_ok() && ran.code != Some(EXIT_UNPRINTED) {
        verdict = Err(format!("stdout full: exit {:?}, not 14", ran.code));
    }
    let verdict = verdict.map_err(|why| {
        format!(
            "{cmd:?} {}: {why}\n    exit {:?} in {:?}, applied {applied}; stderr: {}",
            match (fault, &faulted) {
                (Some((k, f)), Some(s)) => format!("{f:?} on request {k} ({s})"),
                (Some((k, f)), None) => format!("{f:?} on request {k} (not reached)"),
                (None, _) if full => "stdout full".to_owned(),
                (None, _) => "untouched".to_owned(),
            },
            ran.code,
            ran.took,
            ran.stderr.trim()
        )
    });
    (seen, verdict)
}

/// The CLI's commands that write, each with every request faulted in turn (and its stdout
/// full), and its commands that only read with stdout full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_that_writes_tells_its_outcome_truthfully_within_its_timeout() {
    common::ready();
    let started = Instant::now();
    // The lists cover the binary's subcommands exactly.
    let mut ours: BTreeSet<String> = WRITERS.iter().map(|(_, n)| (*n).to_owned()).collect();
    ours.extend(READERS.iter().map(|n| (*n).to_owned()));
    assert_eq!(
        ours,
        cli_commands(),
        "classify every subcommand as writing (WRITERS, run by this harness) or reading (READERS)"
    );
    let client = common::client().await;

    // Untouched: learn each command's requests (and that it succeeds).
    let baselines = futures::future::join_all(
        WRITERS
            .iter()
            .map(|(cmd, _)| async { (*cmd, case(&client, *cmd, None, false).await) }),
    )
    .await;
    let mut plans = Vec::new();
    for (cmd, (seen, verdict)) in baselines {
        if let Err(why) = verdict {
            panic!("untouched run failed: {why}");
        }
        assert!(
            !seen.is_empty(),
            "{cmd:?} sent no request the proxy counted"
        );
        plans.push((cmd, seen));
    }
    let mut jobs = Vec::new();
    for (cmd, seen) in &plans {
        jobs.push((*cmd, None, true));
        for (k, s) in seen.iter().enumerate() {
            let faults: &[Fault] = if s.writes() {
                &[Fault::DropReply, Fault::ResetAfter, Fault::NeverAnswer]
            } else {
                &[Fault::NeverAnswer]
            };
            for f in faults {
                jobs.push((*cmd, Some((k, *f)), false));
            }
        }
    }
    let gate = Arc::new(Semaphore::new(PARALLEL));
    let client = Arc::new(client);
    let runs = jobs.len();
    let mut tasks = tokio::task::JoinSet::new();
    for (cmd, fault, full) in jobs {
        let (gate, client) = (gate.clone(), client.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.expect("gate");
            let (seen, verdict) = case(&client, cmd, fault, full).await;
            (fault.is_none_or(|(k, _)| k < seen.len()), verdict)
        });
    }
    let mut wrong = Vec::new();
    let mut missed = 0;
    while let Some(done) = tasks.join_next().await {
        let (reached, verdict) = done.expect("case task");
        missed += usize::from(!reached);
        if let Err(why) = verdict {
            wrong.push(why);
        }
    }
    // Commands that only read: nothing written, exit 14.
    let world = World::new(&client).await;
    world.d.create("s", Spec::default()).await.unwrap();
    world.gapless().await;
    world
        .d
        .create_queue("q", QueueSpec::default())
        .await
        .unwrap();
    for args in [
        vec!["peek", "s"],
        vec!["list"],
        vec!["history", "s"],
        vec!["audit", world.business.as_str(), "--field", "n"],
        vec!["gapless", "peek", "inv"],
        vec!["queue", "peek", "q"],
        vec!["queue", "list"],
    ] {
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        let ran = run(&common::uri(), &world, &args, 10.0, true).await;
        if ran.code != Some(EXIT_UNPRINTED) || !ran.stderr.contains("nothing was written") {
            wrong.push(format!(
                "{args:?} with stdout full: exit {:?}: {}",
                ran.code, ran.stderr
            ));
        }
    }
    eprintln!(
        "outcomes: {runs} CLI runs of {} commands in {:?} ({missed} ended before their fault)",
        WRITERS.len(),
        started.elapsed()
    );
    assert!(
        wrong.is_empty(),
        "{} of {runs} runs told their outcome wrongly:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The HTTP operations that write (the non-GET operations of `/openapi.json`), each with the
/// requests it sends to the database faulted in turn: a status 2xx only when its write is
/// there; an error answer's `outcome` says `nothing_written` only when it is not, `written`
/// only when it is, and `unknown` only after a write lost its answer. Several services, each
/// behind a proxy of its own, share the operations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_operation_that_writes_tells_its_outcome_truthfully() {
    common::ready();
    let started = Instant::now();
    let mut services = Vec::new();
    for i in 0..HTTP_SERVICES {
        let proxy = Proxy::to_test_server(Faults::default(), i as u64).await;
        let svc = crate::serve::Service::start_tokens(
            "outcomes_http",
            &proxy.uri(""),
            &tokens(),
            &["--timeout", &TIMEOUT.to_string(), "--request-timeout", "20"],
        );
        services.push((proxy, svc));
    }
    let http = reqwest::Client::new();
    let (_, openapi) = crate::serve::send(http.get(services[0].1.url("/openapi.json"))).await;
    let mut writing = BTreeSet::new();
    for (_, item) in openapi["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            if ["post", "put", "patch", "delete"].contains(&method.as_str()) {
                writing.insert(op["operationId"].as_str().expect("operationId").to_owned());
            }
        }
    }
    let ours: BTreeSet<String> = HTTP_WRITERS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(
        ours, writing,
        "every HTTP operation that writes is in HTTP_WRITERS"
    );
    let runs_of: Vec<&str> = HTTP_WRITERS
        .iter()
        .chain(&LINK_ACTS)
        .chain(&SERIAL_ACTS)
        .copied()
        .collect();

    let client = common::client().await;
    let workers = services.iter().enumerate().map(|(i, (proxy, svc))| {
        let (http, client, runs_of) = (&http, &client, &runs_of);
        async move {
            let d = Dispenser::new(
                client,
                Options::default()
                    .with_database(DB)
                    .with_collection(svc.collection.as_str()),
            )
            .unwrap();
            let mut done = (0, Vec::new());
            for op in runs_of.iter().skip(i).step_by(HTTP_SERVICES) {
                let (runs, wrong) = http_operation(proxy, svc, http, &d, op).await;
                done.0 += runs;
                done.1.extend(wrong);
            }
            done
        }
    });
    let mut runs = 0;
    let mut wrong = Vec::new();
    for (r, w) in futures::future::join_all(workers).await {
        runs += r;
        wrong.extend(w);
    }
    drop(services);
    eprintln!("outcomes: {runs} HTTP runs in {:?}", started.elapsed());
    assert!(
        wrong.is_empty(),
        "{} of {runs} HTTP runs told their outcome wrongly:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// How many services the HTTP operations are shared among.
const HTTP_SERVICES: usize = 6;

/// `op` through `svc` (behind `proxy`): untouched, then with each request it sends faulted
/// in turn. How many runs, and what each run that told its outcome wrongly did.
async fn http_operation(
    proxy: &Proxy,
    svc: &crate::serve::Service,
    http: &reqwest::Client,
    d: &Dispenser,
    op: &str,
) -> (usize, Vec<String>) {
    let mut wrong = Vec::new();
    let mut plan: Vec<Option<(usize, Fault)>> = vec![None];
    let mut k = 0;
    while k < plan.len() {
        let fault = plan[k];
        k += 1;
        let n = format!("{op}{k}");
        let business = format!("{}_{n}", svc.collection);
        let before = set_up_http(d, op, &n, &business).await;
        proxy.script(fault);
        let (method, path, body) = request(op, &n);
        let url = svc.url(&path);
        let req = match method {
            "delete" => http.delete(url),
            _ if body.is_null() => http.post(url),
            _ => http.post(url).json(&body),
        };
        let req = match op {
            // A give-up names the take whose ticket it gives up (made in the set-up).
            "give_up" => req.header("Idempotency-Key", GIVE_UP_KEY),
            // A phone's acts through the ticket link: each run a phone of its own.
            _ if LINK_ACTS.contains(&op) => {
                req.header("Idempotency-Key", format!("outcomes-{op}-{k:04}.1"))
            }
            _ => req,
        };
        let token = if LINK_ACTS.contains(&op) {
            LINK
        } else {
            crate::serve::ADMIN
        };
        let started = Instant::now();
        let (status, answer) = crate::serve::send(req.bearer_auth(token)).await;
        let took = started.elapsed();
        let seen = proxy.seen();
        proxy.script(None);
        let applied = applied_http(d, op, &n, &business, before).await;
        let faulted = fault.and_then(|(i, _)| seen.get(i).cloned());
        if fault.is_none() {
            assert!(
                (200..300).contains(&status) && applied,
                "{op} untouched: {status} {answer}"
            );
            for (i, s) in seen.iter().enumerate() {
                if s.writes() {
                    for f in [Fault::DropReply, Fault::ResetAfter, Fault::NeverAnswer] {
                        plan.push(Some((i, f)));
                    }
                } else {
                    plan.push(Some((i, Fault::NeverAnswer)));
                }
            }
            continue;
        }
        let outcome = answer["error"]["written"].as_str().unwrap_or("");
        let why = if took > Duration::from_secs_f64(TIMEOUT) + MARGIN {
            Some(format!("took {took:?}"))
        } else if (200..300).contains(&status) && !applied {
            Some("a success, but its write is not there".to_owned())
        } else if (200..300).contains(&status) {
            None
        } else if !["nothing_written", "unknown", "written"].contains(&outcome) {
            Some("an error answer without an outcome".to_owned())
        } else if outcome == "written" && !applied {
            Some("`written`, but its write is not there".to_owned())
        } else if outcome == "nothing_written" && applied {
            Some("`nothing_written`, but its write is there".to_owned())
        } else if outcome == "unknown" && faulted.as_ref().is_some_and(|f| !f.writes()) {
            Some("`unknown` after a read lost its answer".to_owned())
        } else {
            None
        };
        if let Some(why) = why {
            wrong.push(format!(
                "{op} {:?} on {}: {why}: {status} {answer}",
                fault.map(|f| f.1),
                faulted.map(|s| s.to_string()).unwrap_or_default()
            ));
        }
    }
    (plan.len(), wrong)
}

/// The HTTP operations that write.
const HTTP_WRITERS: [&str; 21] = [
    "next",
    "create",
    "alter",
    "advance_to",
    "adopt",
    "reset",
    "delete",
    "gapless_create",
    "gapless_delete",
    "gapless_void",
    "gapless_release",
    "gapless_alter",
    "queue_create",
    "take",
    "call",
    "recall",
    "finish",
    "cancel",
    "queue_alter",
    "queue_delete",
    "give_up",
];

/// The request id of the take whose ticket `give_up` gives up.
const GIVE_UP_KEY: &str = "outcomes-give-up-1";

/// What a phone does through the ticket link (the token [`LINK`], of the queue
/// [`LINKED`]), run beside the operations: a take, and a give-up whose take never came —
/// which takes a ticket and gives it up in one write (issue 59: a give-up that took, then
/// failed, answered `nothing_written`).
const LINK_ACTS: [&str; 2] = ["link_take", "link_give_up"];

/// The queue's acts that name a ticket by its serial (issue 59: acts by identity), beside the
/// same acts by number or by what a desk shows.
const SERIAL_ACTS: [&str; 4] = [
    "call_serial",
    "cancel_serial",
    "recall_serial",
    "finish_serial",
];

/// The ticket link's token and its queue.
const LINK: &str = "outcomes-link-token-00000007";
const LINKED: &str = "linked";

/// The services' tokens: an admin, and a ticket link with limits no run reaches.
fn tokens() -> Value {
    json!({ "tokens": [
        { "name": "admin", "token": crate::serve::ADMIN, "sequences": ["*"],
          "operations": ["next", "create", "peek", "list", "advance-to", "adopt", "reset", "delete", "alter", "void", "release", "history", "take", "call"] },
        { "name": "phones", "token": LINK,
          "ticket_link": { "queue": LINKED, "takes_per_phone": 100, "takes_per_address": 100000,
                           "per_seconds": 3600 } },
    ]})
}

/// The method, path and body of `op` on the name `n`.
fn request(op: &str, n: &str) -> (&'static str, String, Value) {
    let (method, path, body) = match op {
        "next" => ("post", format!("/v1/sequences/{n}/next"), json!(null)),
        "create" => ("post", "/v1/sequences".to_owned(), json!({ "name": n })),
        "alter" => (
            "post",
            format!("/v1/sequences/{n}/alter"),
            json!({ "max": 1000 }),
        ),
        "advance_to" => (
            "post",
            format!("/v1/sequences/{n}/advance-to"),
            json!({ "to": 100 }),
        ),
        "adopt" => (
            "post",
            format!("/v1/sequences/{n}/adopt"),
            json!({ "source": "highest", "collection": format!("{n}_numbered"), "field": "n" }),
        ),
        "reset" => (
            "post",
            format!("/v1/sequences/{n}/reset"),
            json!({ "next": 50 }),
        ),
        "delete" => ("delete", format!("/v1/sequences/{n}"), json!(null)),
        "gapless_create" => (
            "post",
            "/v1/gapless".to_owned(),
            json!({ "name": n, "collection": format!("{n}_inv"), "field": "n" }),
        ),
        "gapless_delete" => ("delete", format!("/v1/gapless/{n}"), json!(null)),
        "gapless_void" => (
            "post",
            format!("/v1/gapless/{n}/void"),
            json!({ "number": 1, "reason": "spoilt" }),
        ),
        "gapless_release" => (
            "post",
            format!("/v1/gapless/{n}/release"),
            json!({ "number": 1, "force": true }),
        ),
        "gapless_alter" => (
            "post",
            format!("/v1/gapless/{n}/alter"),
            json!({ "max_lease_seconds": 60 }),
        ),
        "queue_create" => ("post", "/v1/queues".to_owned(), json!({ "name": n })),
        "take" => ("post", format!("/v1/queues/{n}/take"), json!({})),
        "call" => ("post", format!("/v1/queues/{n}/call"), json!({})),
        "recall" => ("post", format!("/v1/queues/{n}/recall"), json!({})),
        "finish" => ("post", format!("/v1/queues/{n}/finish"), json!({})),
        "cancel" => (
            "post",
            format!("/v1/queues/{n}/cancel"),
            json!({ "ticket": 1 }),
        ),
        "call_serial" => (
            "post",
            format!("/v1/queues/{n}/call"),
            json!({ "serial": 1 }),
        ),
        "cancel_serial" => (
            "post",
            format!("/v1/queues/{n}/cancel"),
            json!({ "serial": 1 }),
        ),
        "recall_serial" => (
            "post",
            format!("/v1/queues/{n}/recall"),
            json!({ "serial": 1 }),
        ),
        "finish_serial" => (
            "post",
            format!("/v1/queues/{n}/finish"),
            json!({ "serial": 1 }),
        ),
        "queue_alter" => (
            "post",
            format!("/v1/queues/{n}/alter"),
            json!({ "max": 50 }),
        ),
        "queue_delete" => ("delete", format!("/v1/queues/{n}"), json!(null)),
        "give_up" => ("post", format!("/v1/queues/{n}/give-up"), json!(null)),
        "link_take" => ("post", format!("/v1/queues/{LINKED}/take"), json!({})),
        "link_give_up" => ("post", format!("/v1/queues/{LINKED}/give-up"), json!(null)),
        other => panic!("no request for {other}"),
    };
    (method, path, body)
}

/// Sets up the run of `op` on the name `n`: what the link's queue counted before (taken,
/// cancelled), for the acts through the link, which share it.
async fn set_up_http(d: &Dispenser, op: &str, n: &str, business: &str) -> (u64, u64) {
    match op {
        "link_take" | "link_give_up" => {
            let q = d
                .ensure_queue(LINKED, QueueSpec::default().with_max(999_999))
                .await
                .unwrap();
            let s = q.peek().await.unwrap();
            return (s.taken, s.cancelled);
        }
        "create" | "queue_create" | "gapless_create" => {}
        "next" | "alter" | "advance_to" | "delete" => {
            d.create(n, Spec::default()).await.unwrap();
        }
        "adopt" => {
            // Documents another numbering gave numbers up to 41.
            d.create(n, Spec::default()).await.unwrap();
            d.client()
                .database(DB)
                .collection::<Document>(&format!("{n}_numbered"))
                .insert_one(doc! { "n": 41_i64 })
                .await
                .unwrap();
        }
        "reset" => {
            d.create(n, Spec::default()).await.unwrap();
            d.open(n).await.unwrap().next().await.unwrap();
        }
        "gapless_void" | "gapless_alter" | "gapless_delete" => {
            d.ensure_gapless(n, GaplessOptions::new(business, "n"))
                .await
                .unwrap();
        }
        "gapless_release" => {
            // A holder of number 1 that never writes: its process stopped.
            let g = d
                .ensure_gapless(n, GaplessOptions::new(business, "n"))
                .await
                .unwrap();
            let held = Arc::new(tokio::sync::Notify::new());
            let told = held.clone();
            let holder = tokio::spawn(async move {
                let _ = g
                    .issue(|_| {
                        told.notify_one();
                        std::future::pending::<Result<(), std::io::Error>>()
                    })
                    .await;
            });
            held.notified().await;
            // Stopped: the lease stays, nobody releases it.
            std::mem::forget(holder);
        }
        "take" | "queue_alter" | "queue_delete" => {
            d.create_queue(n, QueueSpec::default()).await.unwrap();
        }
        "call" | "cancel" | "call_serial" | "cancel_serial" => {
            let q = d.create_queue(n, QueueSpec::default()).await.unwrap();
            q.take().await.unwrap();
        }
        "give_up" => {
            // The admin token's take, by its request id.
            let q = d.create_queue(n, QueueSpec::default()).await.unwrap();
            q.take()
                .request_id(GIVE_UP_KEY)
                .caller("admin")
                .await
                .unwrap();
        }
        "recall" | "finish" | "recall_serial" | "finish_serial" => {
            let q = d.create_queue(n, QueueSpec::default()).await.unwrap();
            q.take().await.unwrap();
            q.call().await.unwrap();
        }
        other => panic!("no set-up for {other}"),
    }
    (0, 0)
}

async fn applied_http(
    d: &Dispenser,
    op: &str,
    n: &str,
    business: &str,
    (taken, cancelled): (u64, u64),
) -> bool {
    let queue = || async {
        match d.open_queue(n).await {
            Ok(q) => Some(q.peek().await.unwrap()),
            Err(Error::NotFound {
                kind: dispenser::error::Kind::Queue,
                ..
            }) => None,
            Err(e) => panic!("{e}"),
        }
    };
    let voided = || async {
        d.client()
            .database(DB)
            .collection::<Document>(business)
            .count_documents(doc! { "n": 1, "voided.sequence": n })
            .await
            .unwrap()
            > 0
    };
    match op {
        "next" => d.peek(n).await.unwrap().value > 0,
        "create" => d.peek(n).await.is_ok(),
        "alter" => d.peek(n).await.unwrap().max == 1000,
        "advance_to" => d.peek(n).await.unwrap().value >= 100,
        "adopt" => d.peek(n).await.unwrap().value >= 41,
        "reset" => d.peek(n).await.unwrap().value == 49,
        "delete" => matches!(d.peek(n).await, Err(Error::NotFound { .. })),
        "gapless_create" => d.open_gapless(n).await.is_ok(),
        "gapless_delete" => matches!(d.open_gapless(n).await, Err(Error::NotFound { .. })),
        "gapless_void" | "gapless_release" => voided().await,
        "gapless_alter" => {
            let g = d.open_gapless(n).await.unwrap();
            g.peek().await.unwrap().max_lease == Duration::from_secs(60)
        }
        "queue_create" => queue().await.is_some(),
        "take" => queue().await.unwrap().taken == 1,
        "call" | "call_serial" => queue().await.unwrap().served == 1,
        "recall" | "recall_serial" => queue().await.unwrap().recent_calls.iter().any(|c| c.recall),
        "finish" | "finish_serial" => queue().await.unwrap().desks.is_empty(),
        "cancel" | "cancel_serial" | "give_up" => queue().await.unwrap().cancelled == 1,
        "link_take" | "link_give_up" => {
            let s = d.open_queue(LINKED).await.unwrap().peek().await.unwrap();
            // A give-up's take and cancel are one write: both or neither.
            let (took, gave_up) = (s.taken - taken, s.cancelled - cancelled);
            let expected = u64::from(op == "link_give_up");
            assert!(
                took <= 1 && (took == 0 || gave_up == expected),
                "{op}: took {took}, gave up {gave_up}"
            );
            took == 1
        }
        "queue_alter" => queue().await.unwrap().max == 50,
        "queue_delete" => queue().await.is_none(),
        other => panic!("no check for {other}"),
    }
}

/// Regression (issue 49, item 5): a business write whose reply was lost — applied, but the
/// driver answered a connection reset — made `Gapless::issue` say the number "was released
/// and goes to the next caller" while the document carrying it was in the collection. Its
/// outcome is unknown, and the number is not handed out again: the next caller moves past it.
/// A write the server refused is still a definite failure, its number released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_business_write_whose_reply_was_lost_is_of_unknown_outcome_never_released() {
    use dispenser::error::Written;
    let client = common::client().await;
    let w = World::new(&client).await;
    let g = w.gapless().await;
    let coll = g.business().clone();
    let lost = g
        .issue(|n| {
            let coll = coll.clone();
            async move {
                coll.insert_one(doc! { "n": n }).await?;
                // Written, then the connection was cut before the reply.
                let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
                Err::<(), _>(dispenser::mongodb::error::Error::from(reset))
            }
        })
        .await
        .expect_err("the reply was lost");
    assert_eq!(lost.written(), Written::Unknown, "{lost}");
    // The command line's exit code 13 (`dispenser-cli`'s `exit::code`).
    assert_eq!(lost.code(), "business_write");
    let said = lost.to_string();
    assert!(
        said.contains("unknown") && said.contains("audit") && !said.contains("was released"),
        "{said}"
    );
    // Not handed out again: the next number is 2.
    assert_eq!(common::issue_next(&g).await.unwrap(), 2);
    // A refusal is definite: nothing written, its number released to the next caller.
    let refused = g
        .issue(|_| async { Err::<(), _>(std::io::Error::other("the customer is blocked")) })
        .await
        .expect_err("refused");
    assert_eq!(refused.written(), Written::Nothing, "{refused}");
    assert_eq!(refused.code(), "business_write");
    assert_eq!(common::issue_next(&g).await.unwrap(), 3);
    let a = common::audit_of(&g, None).await.unwrap();
    assert!(a.duplicates.is_empty() && a.gaps.is_empty(), "{a:?}");
}
