//! One vocabulary (issue 38): for every kind of sequence, `create` makes it and fails if it
//! exists, `ensure` makes it or opens it, `open` opens an existing one and never writes.

use dispenser::gapless::GaplessOptions;
use dispenser::queue::QueueSpec;
use dispenser::{Error, Spec};

use std::collections::BTreeSet;

use crate::common::Fixture;

/// How many documents the fixture's collections hold (sequences, gap-free states, queues).
async fn documents(f: &Fixture) -> u64 {
    let db = f.client.database(crate::common::DB);
    let mut n = 0;
    for c in [
        f.collection.clone(),
        format!("{}_gapless", f.collection),
        format!("{}_queues", f.collection),
    ] {
        n += db
            .collection::<dispenser::mongodb::bson::Document>(&c)
            .count_documents(dispenser::mongodb::bson::doc! {})
            .await
            .unwrap();
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_ensure_and_open_mean_the_same_for_every_kind() {
    let f = Fixture::new("vocabulary").await;
    let d = f.dispenser(f.options());
    let is_exists = |e: &Error| e.kind() == dispenser::error::ErrorKind::AlreadyExists;
    let is_missing = |e: &Error| e.kind() == dispenser::error::ErrorKind::NotFound;

    // open of what does not exist: an error, and nothing written.
    let before = documents(&f).await;
    d.ensure("invoices", Spec::default()).await.unwrap(); // the scopes' template
    let before = before + 1;
    assert!(is_missing(&d.open("nope").await.unwrap_err()));
    assert!(is_missing(
        &d.open_scope("invoices", "acme").await.unwrap_err()
    ));
    assert!(is_missing(&d.open_gapless("inv-2027").await.unwrap_err()));
    assert!(is_missing(&d.open_queue("post").await.unwrap_err()));
    assert!(is_missing(&d.open_striped("ids").await.err().unwrap()));
    assert_eq!(documents(&f).await, before, "an open wrote");

    // create makes; a second create fails; ensure and open then open it.
    d.create("orders", Spec::default()).await.unwrap();
    assert!(is_exists(
        &d.create("orders", Spec::default()).await.unwrap_err()
    ));
    d.ensure("orders", Spec::default()).await.unwrap();
    d.open("orders").await.unwrap();

    let acme = d.create_scope("invoices", "acme").await.unwrap();
    assert_eq!(acme.next().await.unwrap(), 1);
    assert!(is_exists(
        &d.create_scope("invoices", "acme").await.unwrap_err()
    ));
    assert_eq!(
        d.ensure_scope("invoices", "acme")
            .await
            .unwrap()
            .next()
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        d.open_scope("invoices", "acme")
            .await
            .unwrap()
            .next()
            .await
            .unwrap(),
        3
    );

    let business = format!("{}_business", f.collection);
    let options = || GaplessOptions::new(business.as_str(), "number");
    d.create_gapless("inv-2027", options()).await.unwrap();
    assert!(is_exists(
        &d.create_gapless("inv-2027", options()).await.err().unwrap()
    ));
    d.ensure_gapless("inv-2027", options()).await.unwrap();
    let opened = d.open_gapless("inv-2027").await.unwrap();
    assert_eq!(opened.peek().await.unwrap().next, 1);

    d.create_queue("post", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    assert!(is_exists(
        &d.create_queue("post", QueueSpec::default().with_max(9))
            .await
            .err()
            .unwrap()
    ));
    d.ensure_queue("post", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    d.open_queue("post").await.unwrap();

    d.create_striped("ids", 3, Spec::default()).await.unwrap();
    assert!(is_exists(
        &d.create_striped("ids", 3, Spec::default())
            .await
            .err()
            .unwrap()
    ));
    d.ensure_striped("ids", 3, Spec::default()).await.unwrap();
    assert_eq!(d.open_striped("ids").await.unwrap().stripes(), 3);
}

/// Admin operations are methods of the handle (issue 38): a handle opened from a dispenser with a
/// caller records its alter, advance-to, reset, alter of the format and delete as that caller, each
/// answering the state the next draw follows; a queue's alter and delete likewise. An empty
/// change is refused by name and writes nothing, history included; a reset backwards without
/// force is recorded, refused; a handle that outlives its delete is refused, never handed a
/// number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_operations_are_methods_of_the_handle_recorded_as_its_caller() {
    use dispenser::queue::QueueAlter;
    use dispenser::sequence::Alter;

    let f = Fixture::new("vocabulary_admin").await;
    let d = f.dispenser(f.options().with_caller("ops"));
    let orders = d.create("orders", Spec::default()).await.unwrap();
    assert_eq!(orders.next().await.unwrap(), 1);
    let s = orders.alter(Alter::default().with_max(500)).await.unwrap();
    assert_eq!((s.max, s.next_number()), (500, Some(2)));
    let s = orders.advance_to(100).await.unwrap();
    assert_eq!(s.next_number(), Some(101));
    assert_eq!(orders.next().await.unwrap(), 101);
    assert!(matches!(
        orders.reset(50).await,
        Err(Error::WouldGoBackwards { .. })
    ));
    let s = orders.reset(50).force(true).await.unwrap();
    assert_eq!(s.next_number(), Some(50));
    assert_eq!(orders.peek().await.unwrap().next_number(), Some(50));
    let f6 = dispenser::Format::parse("ORD-{n:06}").unwrap();
    orders
        .alter(Alter::default().with_format(Some(f6.clone())))
        .await
        .unwrap();
    assert_eq!(orders.peek().await.unwrap().format, Some(f6));
    let version = orders.peek().await.unwrap().version;
    assert!(matches!(
        orders.alter(Alter::default()).await,
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(orders.peek().await.unwrap().version, version);
    orders.delete().await.unwrap();
    assert!(matches!(orders.next().await, Err(Error::NotFound { .. })));
    let h = d
        .history(dispenser::error::Kind::Sequence, "orders")
        .await
        .unwrap();
    let ops: Vec<_> = h.iter().map(|e| e.op.as_str()).collect();
    // The refused reset (backwards without force) is recorded, refused.
    assert_eq!(
        ops,
        [
            "create",
            "alter",
            "advance-to",
            "reset",
            "reset",
            "alter",
            "delete"
        ],
        "{h:#?}"
    );
    assert_eq!(h[3].outcome.as_str(), "refused", "{h:#?}");
    assert!(h.iter().all(|e| e.who.as_deref() == Some("ops")), "{h:#?}");

    // A queue: alter and delete on the handle, an empty alter refused with nothing written.
    let lobby = d
        .create_queue("lobby", QueueSpec::default().with_max(9))
        .await
        .unwrap();
    let version = lobby.peek().await.unwrap().version;
    let e = lobby.alter(QueueAlter::default()).await.unwrap_err();
    assert!(e.to_string().contains("lobby"), "{e}");
    assert_eq!(lobby.peek().await.unwrap().version, version);
    let s = lobby
        .alter(QueueAlter::default().with_max(19))
        .await
        .unwrap();
    assert_eq!(s.capacity, 20);
    lobby.delete().await.unwrap();
    assert!(matches!(
        lobby.take().await,
        Err(Error::NotFound {
            kind: dispenser::error::Kind::Queue,
            ..
        })
    ));
    let h = d
        .history(dispenser::error::Kind::Queue, "lobby")
        .await
        .unwrap();
    let ops: Vec<_> = h.iter().map(|e| e.op.as_str()).collect();
    assert_eq!(ops, ["create", "alter", "delete"], "{h:#?}");
}

/// A queue's actions are builders (issue 38): nothing is sent before the `.await` (a builder
/// dropped unawaited takes nothing), a take answers one ticket and `.count(n)` a family, the
/// options set on a builder are those used (a request id answers the same take again, a
/// desk shows what it called), and a bad option is refused naming the queue, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_actions_are_builders_that_do_nothing_until_awaited() {
    let f = Fixture::new("vocabulary_actions").await;
    let d = f.dispenser(f.options());
    let q = d
        .create_queue("post", QueueSpec::default().with_max(99))
        .await
        .unwrap();
    let version = q.peek().await.unwrap().version;
    drop(q.take().count(3).request_id("never-sent"));
    drop(q.call().desk("1"));
    assert_eq!(
        q.peek().await.unwrap().version,
        version,
        "a dropped builder wrote"
    );

    let one = q.take().await.unwrap();
    assert_eq!(one.number, 1);
    let family = q
        .take()
        .count(3)
        .request_id("k-1")
        .caller("kiosk")
        .await
        .unwrap();
    assert_eq!(
        family.iter().map(|t| t.number).collect::<Vec<_>>(),
        [2, 3, 4]
    );
    let again = q
        .take()
        .count(3)
        .request_id("k-1")
        .caller("kiosk")
        .await
        .unwrap();
    assert!(again.iter().all(|t| t.replayed), "{again:?}");
    assert_eq!(again[0].number, 2);
    // The same id from another caller is another take.
    let other = q.take().request_id("k-1").caller("kiosk-2").await.unwrap();
    assert_eq!((other.number, other.replayed), (5, false));

    let called = q.call().desk("A").await.unwrap();
    assert_eq!((called.number, called.desk.as_deref()), (1, Some("A")));
    let given = q.call().desk("B").serial(4).await.unwrap();
    assert_eq!((given.number, given.desk.as_deref()), (4, Some("B")));
    let recalled = q.recall().desk("A").await.unwrap();
    assert_eq!(recalled.number, 1);
    let released = q.finish().desk("B").await.unwrap();
    assert_eq!(released.number, 4);
    assert!(matches!(
        q.finish().desk("B").await,
        Err(Error::NoTicketShown { .. })
    ));
    let version = q.peek().await.unwrap().version;
    for e in [
        q.take().count(0).await.unwrap_err(),
        q.take().request_id("").await.unwrap_err(),
        q.call().desk("no/slash").await.unwrap_err(),
        q.recall().desk("").await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        assert!(e.to_string().contains("post"), "{e}");
    }
    assert_eq!(q.peek().await.unwrap().version, version);
}

/// Issue 50: "plain or striped?" is decided once, by `Dispenser::open_either`: a plain
/// sequence is plain, a striped one striped, neither is `NotFound` naming the name, a
/// name that cannot be either is `InvalidName`.
#[tokio::test]
async fn open_either_tells_a_plain_sequence_from_a_striped_one() {
    use dispenser::stripe::Either;
    let f = Fixture::new("vocabulary_either").await;
    let d = f.dispenser(f.options());
    d.create("plain", Spec::default()).await.unwrap();
    d.create_striped("ids", 3, Spec::default()).await.unwrap();
    match d.open_either("plain").await.unwrap() {
        Either::Plain(s) => assert_eq!(s.peek().await.unwrap().name, "plain"),
        Either::Striped(ids) => panic!("plain opened as striped: {ids:?}"),
    }
    match d.open_either("ids").await.unwrap() {
        Either::Striped(ids) => assert_eq!(ids.stripes(), 3),
        Either::Plain(s) => panic!("striped opened as plain: {s:?}"),
    }
    match d.open_either("neither").await {
        Err(Error::NotFound {
            kind: dispenser::error::Kind::Sequence,
            name,
        }) => assert_eq!(name, "neither"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        d.open_either("$x").await,
        Err(Error::InvalidName { .. })
    ));
}

/// The handle types whose public methods are the surfaces' verbs (the same names in Python and
/// Node.js).
const HANDLES: [&str; 7] = [
    "Dispenser",
    "Sequence",
    "StripedSequence",
    "BlockSequence",
    "DailySequence",
    "Gapless",
    "Queue",
];

fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn text(path: &str) -> String {
    let p = repo().join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The glossary's five-surface table: per row the verb and the code spans of its Rust,
/// command-line, HTTP, Python and Node.js cells.
fn five_surfaces() -> Vec<(String, [Vec<String>; 5])> {
    let glossary = text("src/guide/glossary.md");
    let mut lines = glossary
        .lines()
        .skip_while(|l| !l.starts_with("| verb | what it does | Rust |"));
    assert!(
        lines.next().is_some(),
        "glossary.md has no five-surface table"
    );
    let mut rows = Vec::new();
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 7, "a five-surface row has 7 cells: {line}");
        let spans = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        rows.push((
            cells[0].trim_matches('*').to_owned(),
            [
                spans(cells[2]),
                spans(cells[3]),
                spans(cells[4]),
                spans(cells[5]),
                spans(cells[6]),
            ],
        ));
    }
    assert!(
        rows.len() >= 30,
        "{} rows in the five-surface table",
        rows.len()
    );
    rows
}

/// Every `pub fn` of the handle types in the library's source (`Type::method`), read from
/// their `impl Type` blocks (not trait impls); one marked `#[doc(hidden)]` or `#[cfg(test)]`
/// is not public API.
fn rust_methods() -> BTreeSet<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                // The other crates (the service, the command line, the bindings) live under src/.
                if !["server", "cli", "bindings"]
                    .iter()
                    .any(|c| p.ends_with(c) && p.parent() == Some(&repo().join("src")))
                {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo().join("src"), &mut files);
    assert!(files.len() > 30, "{} source files", files.len());
    let mut out = BTreeSet::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        let mut current: Option<&str> = None;
        let mut attributes: Vec<&str> = Vec::new();
        for line in source.lines() {
            if line.starts_with("impl") && line.trim_end().ends_with('{') {
                // `impl Type {` or `impl<'a> Type<'a> {`: the type is the last path segment.
                let head = line.trim_end().trim_end_matches('{').trim();
                let head = match head.strip_prefix("impl<") {
                    Some(rest) => rest.split_once("> ").map_or("", |(_, t)| t),
                    None => head.trim_start_matches("impl").trim(),
                };
                current = (!head.contains(" for "))
                    .then(|| head.split('<').next().unwrap_or(head).trim())
                    .filter(|t| HANDLES.contains(t));
                continue;
            }
            if line.starts_with('}') {
                current = None;
            }
            let Some(ty) = current else { continue };
            let trimmed = line.trim_start();
            if line.starts_with("    ") && !line.starts_with("     ") {
                if trimmed.starts_with("#[") || trimmed.starts_with("///") {
                    attributes.push(trimmed);
                    continue;
                }
                let f = ["pub fn ", "pub async fn ", "pub const fn "]
                    .iter()
                    .find_map(|p| trimmed.strip_prefix(p));
                if let Some(f) = f {
                    let name: String = f
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    let hidden = attributes
                        .iter()
                        .any(|a| a.contains("doc(hidden)") || a.contains("cfg(test)"));
                    if !hidden {
                        out.insert(format!("{ty}::{name}"));
                    }
                }
                attributes.clear();
            }
        }
    }
    out
}

/// The methods (`Class.method`) and the properties of the handle classes a declaration file
/// declares: Python's `.pyi` (`class X:`, `def m(`, `@property`) or TypeScript's `.d.ts`
/// (`export declare class X {` or `interface X {` inside `declare module`, `m(`, `get m()`).
fn declared(file: &str, python: bool) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut methods, mut properties) = (BTreeSet::new(), BTreeSet::new());
    let mut class: Option<String> = None;
    // A TypeScript interface inside `declare module` is indented one more level.
    let mut indent = if python { "    " } else { "  " };
    let mut property = false;
    for line in text(file).lines() {
        let opens = if python {
            line.strip_prefix("class ")
        } else {
            line.strip_prefix("export declare class ")
                .or_else(|| line.strip_prefix("  interface "))
        };
        if let Some(rest) = opens {
            indent = if line.starts_with("  ") {
                "    "
            } else {
                indent
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            class = HANDLES.contains(&name.as_str()).then_some(name);
            continue;
        }
        if !python && (line.starts_with('}') || line == "  }") {
            class = None;
            indent = "  ";
        }
        if python && !line.is_empty() && !line.starts_with(' ') {
            class = None;
        }
        let Some(c) = &class else { continue };
        let Some(member) = line.strip_prefix(indent) else {
            continue;
        };
        if member.starts_with(' ') {
            continue;
        }
        if python && member.trim() == "@property" {
            property = true;
            continue;
        }
        let (member, getter) = if python {
            let m = member.strip_prefix("async ").unwrap_or(member);
            match m.strip_prefix("def ") {
                Some(m) => (m, property),
                None => continue,
            }
        } else {
            match member.strip_prefix("get ") {
                Some(m) => (m, true),
                None => (member.strip_prefix("static ").unwrap_or(member), false),
            }
        };
        let name: String = member
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let rest = &member[name.len()..];
        property = false;
        if name.is_empty()
            || name.starts_with('_')
            || !(rest.starts_with('(') || rest.starts_with('<'))
        {
            continue;
        }
        let entry = format!("{c}.{name}");
        if getter {
            properties.insert(entry);
        } else {
            methods.insert(entry);
        }
    }
    (methods, properties)
}

/// Issue 60: one vocabulary across five surfaces. The glossary's five-surface table names
/// what exists — each Rust method in the library's source (and `gapless::audit` compiled
/// here), each command and flag in the binary's help, each endpoint in `/openapi.json`, each
/// Python method or property in the `.pyi` stubs and each Node.js one in the `.d.ts`
/// declarations (which `tests/python/test_stubs.py` and `tests/node/types.test.js` check against
/// the packages) — and every public verb of each surface is in it: every public method of the
/// handles, every command, every endpoint, every method of the packages' handle classes.
#[tokio::test]
async fn the_glossary_names_every_public_verb_of_the_five_surfaces() {
    // The one free function of the table, compiled so that a rename breaks the build.
    let _ = dispenser::gapless::audit;
    let rows = five_surfaces();
    let mut named: [BTreeSet<String>; 5] = Default::default();
    for (_, cells) in &rows {
        for (i, cell) in cells.iter().enumerate() {
            named[i].extend(cell.iter().cloned());
        }
    }
    let mut wrong = Vec::new();
    fn compare(
        wrong: &mut Vec<String>,
        surface: &str,
        named: &BTreeSet<String>,
        exists: &BTreeSet<String>,
        required: &BTreeSet<String>,
    ) {
        for n in named.difference(exists) {
            wrong.push(format!(
                "{surface}: the glossary names {n}, which does not exist"
            ));
        }
        for r in required.difference(named) {
            wrong.push(format!(
                "{surface}: {r} is not in the glossary's five-surface table"
            ));
        }
    }

    // Rust.
    let mut rust = rust_methods();
    for m in [
        "Dispenser::create",
        "Sequence::next",
        "Gapless::release",
        "Queue::take",
    ] {
        assert!(rust.contains(m), "the source scan missed {m}: {rust:?}");
    }
    rust.insert("gapless::audit".to_owned());
    compare(&mut wrong, "Rust", &named[0], &rust, &rust);

    // The command line: each span is a command path and its flags.
    let commands: std::collections::BTreeMap<Vec<String>, BTreeSet<String>> =
        crate::docs::every_command().into_iter().collect();
    let mut cli_named = BTreeSet::new();
    for span in &named[1] {
        let words: Vec<&str> = span.split_whitespace().collect();
        let path: Vec<String> = words
            .iter()
            .filter(|w| !w.starts_with("--"))
            .map(|w| (*w).to_owned())
            .collect();
        match commands.get(&path) {
            None => wrong.push(format!("command line: no command {span:?}")),
            Some(flags) => {
                for flag in words.iter().filter(|w| w.starts_with("--")) {
                    if !flags.contains(*flag) {
                        wrong.push(format!("command line: {span:?}: no {flag} ({flags:?})"));
                    }
                }
            }
        }
        cli_named.insert(path.join(" "));
    }
    // Every command that acts (not a parent of others, such as `gapless`).
    let leaves: BTreeSet<String> = commands
        .keys()
        .filter(|p| !p.is_empty())
        .filter(|p| {
            !commands
                .keys()
                .any(|q| q.len() > p.len() && q.starts_with(p))
        })
        .map(|p| p.join(" "))
        .collect();
    assert!(leaves.len() > 25, "{leaves:?}");
    compare(&mut wrong, "command line", &cli_named, &cli_named, &leaves);

    // HTTP: every operation of /openapi.json.
    let svc = crate::serve::Service::start("vocabulary_five");
    let (status, doc) =
        crate::serve::send(reqwest::Client::new().get(svc.url("/openapi.json"))).await;
    assert_eq!(status, 200, "{doc}");
    let mut endpoints = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            if ["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                endpoints.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    assert!(endpoints.len() > 30, "{endpoints:?}");
    compare(&mut wrong, "HTTP", &named[2], &endpoints, &endpoints);

    // Python: the sync and asyncio stubs.
    let (mut py, mut py_properties) =
        declared("src/bindings/python/python/dispenser/_dispenser.pyi", true);
    let (aio, aio_properties) = declared("src/bindings/python/python/dispenser/aio.pyi", true);
    py.extend(aio);
    py_properties.extend(aio_properties);
    assert!(
        py.contains("Queue.take") && py_properties.contains("Sequence.name"),
        "{py:?}"
    );
    let py_exists: BTreeSet<String> = py.union(&py_properties).cloned().collect();
    compare(&mut wrong, "Python", &named[3], &py_exists, &py);

    // Node.js: the generated declarations and what index.d.ts adds to them.
    let (mut node, mut node_properties) = declared("src/bindings/node/native.d.ts", false);
    let (added, added_properties) = declared("src/bindings/node/index.d.ts", false);
    node.extend(added);
    node_properties.extend(added_properties);
    assert!(
        node.contains("Queue.take")
            && node.contains("Gapless.issue")
            && node_properties.contains("Sequence.name"),
        "{node:?}"
    );
    let node_exists: BTreeSet<String> = node.union(&node_properties).cloned().collect();
    compare(&mut wrong, "Node.js", &named[4], &node_exists, &node);

    assert!(wrong.is_empty(), "the five-surface vocabulary: {wrong:#?}");
}
