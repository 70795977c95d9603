//! Docs the suite keeps true (issue 38):
//!
//! * every command and every long flag the binary's own help lists is in the command-line
//!   chapter (`src/guide/cli.md`), so the reference cannot fall behind the binary;
//! * every test the docs cite (`module::test_name` in the guide, the README and CONTRIBUTING)
//!   exists, in the integration tests or as a unit test in `src/`;
//! * every public function of the library that returns a future documents its
//!   `# Cancel safety`, as the blocks chapter (`src/guide/blocks.md`) says.
//! * no chapter of the guide is longer than [`MAX_CHAPTER_LINES`];
//! * no chapter but the benchmarks ones, and not the README, holds a lab notebook's marks: a date
//!   in its prose or a commit hash in backticks (history goes to `CHANGELOG.md`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The help of `dispenser <path> --help`.
fn help(path: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dispenser"))
        .args(path)
        .arg("--help")
        .env_remove("MONGODB_URI")
        .output()
        .expect("run dispenser --help");
    assert!(out.status.success(), "{path:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subcommands and the long flags a help text lists.
fn commands_and_flags(text: &str) -> (Vec<String>, BTreeSet<String>) {
    let mut commands = Vec::new();
    let mut flags = BTreeSet::new();
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line.trim_end_matches(':');
            continue;
        }
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if section == "Commands"
            && indent == 2
            && let Some(name) = trimmed.split_whitespace().next()
            && name != "help"
        {
            commands.push(name.to_owned());
        }
        if section.ends_with("Options") || section == "Options" || section.contains("options") {
            for word in trimmed.split(|c: char| c.is_whitespace() || c == ',' || c == '=') {
                if let Some(flag) = word.strip_prefix("--")
                    && !flag.is_empty()
                    && flag.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    && flag != "help"
                    && flag != "version"
                {
                    flags.insert(format!("--{flag}"));
                }
            }
        }
    }
    (commands, flags)
}

/// Every command path of the binary (`["queue", "take"]`, …) with its long flags.
fn every_command() -> Vec<(Vec<String>, BTreeSet<String>)> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let (subcommands, flags) = commands_and_flags(&help(&args));
        for s in subcommands {
            let mut p = path.clone();
            p.push(s);
            todo.push(p);
        }
        out.push((path, flags));
    }
    out.sort();
    out
}

#[test]
fn the_command_line_chapter_lists_every_command_and_flag_the_help_lists() {
    let chapter = read(&root().join("src/guide/cli.md"));
    let commands = every_command();
    assert!(commands.len() > 20, "{} commands found", commands.len());
    let mut missing = Vec::new();
    for (path, flags) in &commands {
        if let Some(last) = path.last() {
            // The command appears on a line with its parent (`queue  take …`) or alone.
            let found = chapter.lines().any(|l| {
                l.split_whitespace().any(|w| w == last)
                    && path[..path.len() - 1]
                        .iter()
                        .all(|parent| chapter.contains(parent.as_str()))
            });
            if !found {
                missing.push(path.join(" "));
            }
        }
        for flag in flags {
            let written = chapter.match_indices(flag.as_str()).any(|(i, _)| {
                // Not a prefix of a longer flag (`--block` in `--block-idle-release`).
                !chapter[i + flag.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase() || c == '-')
            });
            if !written {
                missing.push(format!("{} {flag}", path.join(" ")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "src/guide/cli.md lacks {} of what the binary's help lists: {missing:#?}",
        missing.len()
    );
}

/// The test names cited in `text`: backticked `a::b` paths whose first segment is an
/// integration test module or whose path goes through `tests`.
fn cited(text: &str, modules: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for piece in text.split('`').skip(1).step_by(2) {
        let piece = piece.trim();
        if !piece.contains("::")
            || !piece
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '…')
        {
            continue;
        }
        let first = piece.split("::").next().unwrap_or_default();
        let unit = piece.contains("::tests::");
        if modules.contains(first) || unit || first == "…" {
            out.push(piece.to_owned());
        }
    }
    out
}

/// Every `fn NAME` in the Rust files under `dir`.
fn functions(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            functions(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            for line in read(&path).lines() {
                let line = line.trim_start();
                let rest = line
                    .strip_prefix("async fn ")
                    .or_else(|| line.strip_prefix("fn "))
                    .or_else(|| line.strip_prefix("pub fn "))
                    .or_else(|| line.strip_prefix("pub(crate) fn "));
                if let Some(rest) = rest {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(name);
                }
            }
        }
    }
}

#[test]
fn every_test_the_docs_cite_exists() {
    let tests = root().join("tests/integration");
    let modules: BTreeSet<String> = std::fs::read_dir(&tests)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some(name.trim_end_matches(".rs").to_owned())
        })
        .filter(|n| n != "main" && n != "snapshots")
        .collect();
    let mut known = BTreeSet::new();
    functions(&tests, &mut known);
    functions(&root().join("src"), &mut known);
    let mut docs = chapters();
    docs.push(root().join("README.md"));
    docs.push(root().join(".github/CONTRIBUTING.md"));
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in &docs {
        for path in cited(&read(doc), &modules) {
            let name = path.rsplit("::").next().unwrap_or_default();
            // `module::…` names a module, `…::name` a test named in a module said before; a
            // `…` inside a name stands for any run of characters.
            if name.is_empty() || name == "…" {
                continue;
            }
            // A module (`queue::state`, `alter::tests`) or a type (`doctor::Report`).
            let module = root().join("src").join(path.replace("::", "/"));
            if name == "tests"
                || name.starts_with(|c: char| c.is_ascii_uppercase())
                || module.with_extension("rs").exists()
                || module.join("mod.rs").exists()
            {
                continue;
            }
            checked += 1;
            let parts: Vec<&str> = name.split('…').collect();
            let matches = |f: &str| {
                if parts.len() == 1 {
                    return f == name;
                }
                let (first, last) = (parts[0], parts[parts.len() - 1]);
                f.starts_with(first)
                    && f.ends_with(last)
                    && f.len() >= first.len() + last.len()
                    && parts[1..parts.len() - 1].iter().all(|m| f.contains(m))
            };
            if !known.iter().any(|f| matches(f)) {
                missing.push(format!(
                    "{}: {path}",
                    doc.strip_prefix(root()).unwrap_or(doc).display()
                ));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} cited tests found: is the parser right?"
    );
    assert!(
        missing.is_empty(),
        "the docs cite tests that do not exist: {missing:#?}"
    );
}

/// The public functions under `dir` that return a future (`pub async fn`, a `pub fn` whose
/// return type is a future, a method of a `pub trait` that returns one), as
/// `path:line: signature`, each with whether its doc comment has a `# Cancel safety` section.
/// `src/bin/` and `mod tests` are skipped.
fn futures(dir: &Path, out: &mut Vec<(String, bool)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                futures(&path, out);
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = read(&path);
        let lines: Vec<&str> = text.lines().collect();
        let mut in_trait = false;
        for (i, line) in lines.iter().enumerate() {
            if line.starts_with("mod tests") {
                break;
            }
            if line.starts_with("pub trait ") {
                in_trait = true;
            } else if *line == "}" {
                in_trait = false;
            }
            let trimmed = line.trim_start();
            let signature: String = lines[i..]
                .iter()
                .map(|l| l.trim())
                .scan(false, |done, l| {
                    let take = !*done;
                    *done = l.contains('{') || l.ends_with(';');
                    take.then_some(l)
                })
                .collect::<Vec<_>>()
                .join(" ");
            let returns_future = signature
                .split_once("->")
                .is_some_and(|(_, ret)| ret.contains("Future"));
            let public = trimmed.starts_with("pub async fn ")
                || (trimmed.starts_with("pub fn ") && returns_future)
                || (in_trait
                    && (trimmed.starts_with("async fn ")
                        || (trimmed.starts_with("fn ") && returns_future)));
            if !public {
                continue;
            }
            let documented = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim_start())
                .take_while(|l| l.starts_with("///") || l.starts_with("#["))
                .any(|l| l.contains("# Cancel safety"));
            let at = path.strip_prefix(root()).unwrap_or(&path).display();
            out.push((format!("{at}:{}: {}", i + 1, trimmed), documented));
        }
    }
}

/// The guide (`src/guide/blocks.md`) promises that every public async fn documents what
/// dropping its future part way leaves behind.
#[test]
fn every_public_async_fn_documents_its_cancel_safety() {
    let mut found = Vec::new();
    futures(&root().join("src"), &mut found);
    assert!(
        found.len() > 60,
        "only {} public async fns found: is the parser right?",
        found.len()
    );
    let missing: Vec<&String> = found
        .iter()
        .filter(|(_, documented)| !documented)
        .map(|(at, _)| at)
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} public functions returning a future have no `# Cancel safety` section in \
         their doc comment: {missing:#?}",
        missing.len(),
        found.len()
    );
}

/// The guide's chapters, `src/guide/*.md`, by name.
fn chapters() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("src/guide"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    out.sort();
    out
}

/// The longest a chapter may be: about 250 lines, task-first, then split.
const MAX_CHAPTER_LINES: usize = 260;

#[test]
fn no_chapter_of_the_guide_is_longer_than_the_limit() {
    let chapters = chapters();
    assert!(chapters.len() > 10, "{} chapters found", chapters.len());
    let long: Vec<String> = chapters
        .iter()
        .map(|p| (p, read(p).lines().count()))
        .filter(|(_, n)| *n > MAX_CHAPTER_LINES)
        .map(|(p, n)| {
            format!(
                "{}: {n} lines",
                p.strip_prefix(root()).unwrap_or(p).display()
            )
        })
        .collect();
    assert!(
        long.is_empty(),
        "chapters over {MAX_CHAPTER_LINES} lines (split them, and add the parts to \
         src/guide/mod.rs): {long:#?}"
    );
}

/// The prose of a Markdown text: what is outside fenced code blocks and inline code spans.
fn prose(text: &str) -> String {
    let mut outside = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            outside.push_str(line);
            outside.push('\n');
        }
    }
    outside.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// The dates `20YY-MM-DD` in `text`.
fn dates(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    (0..b.len().saturating_sub(9))
        .filter(|&i| {
            b[i..].starts_with(b"20")
                && digits(i..i + 4)
                && b[i + 4] == b'-'
                && digits(i + 5..i + 7)
                && b[i + 7] == b'-'
                && digits(i + 8..i + 10)
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
        })
        .map(|i| text[i..i + 10].to_owned())
        .collect()
}

/// The backticked tokens of `text` that look like commit hashes: 7 to 40 lowercase hex digits,
/// letters and digits both.
fn hashes(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            (7..=40).contains(&s.len())
                && s.chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
                && s.chars().any(|c| c.is_ascii_digit())
                && s.chars().any(|c| c.is_ascii_lowercase())
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn lab_notebook_marks_stay_in_the_benchmarks_chapters() {
    // The marks are found where they should be (the parser works) …
    let benchmarks = read(&root().join("src/guide/benchmarks_service.md"));
    assert!(!dates(&prose(&benchmarks)).is_empty() && !hashes(&benchmarks).is_empty());
    assert_eq!(
        dates("on 2026-11-25 at 20:20, not x2026-11-25"),
        ["2026-11-25"]
    );
    assert_eq!(
        hashes("commit `0a34ab7`, not `20000000` or `deadline`"),
        ["0a34ab7"]
    );
    // … and nowhere else. A date in code (`tickets@2026-11-22`, an example's output) is data.
    let mut docs: Vec<PathBuf> = chapters()
        .into_iter()
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("benchmarks"))
        })
        .collect();
    docs.push(root().join("README.md"));
    let mut found = Vec::new();
    for doc in &docs {
        let text = read(doc);
        let name = doc
            .strip_prefix(root())
            .unwrap_or(doc)
            .display()
            .to_string();
        for date in dates(&prose(&text)) {
            found.push(format!("{name}: the date {date}"));
        }
        for hash in hashes(&text) {
            found.push(format!("{name}: the commit hash `{hash}`"));
        }
    }
    assert!(
        found.is_empty(),
        "measurements' dates and commit hashes belong in the benchmarks chapters or \
         CHANGELOG.md: {found:#?}"
    );
}

/// Layers are modules (issue 50): `scripts/circles.py` fails on two modules that import each
/// other through different files — no file circle — and names both hops; with the hop back
/// removed, it passes.
#[test]
fn the_circle_check_finds_a_module_circle_that_no_file_circle_shows() {
    let dir = std::env::temp_dir().join(format!("circles-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\n");
    write("a.rs", "use crate::b::c::Low;\npub struct High(Low);\n");
    write("b/mod.rs", "pub mod c;\npub mod d;\n");
    write("b/c.rs", "pub struct Low;\n");
    write("b/d.rs", "use crate::a::High;\npub fn up(_: High) {}\n");
    let run = || {
        Command::new("python3")
            .arg(root().join("scripts/circles.py"))
            .arg(&dir)
            .output()
            .unwrap()
    };
    let out = run();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("0 circles, 1 module circles"), "{text}");
    assert!(
        text.contains("module circle: crate::a → crate::b → crate::a"),
        "{text}"
    );
    assert!(
        text.contains("crate::b → crate::a: b/d.rs uses crate::a::High"),
        "{text}"
    );
    write("b/d.rs", "pub fn up() {}\n");
    let out = run();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
