//! Docs the suite keeps true (issue 38):
//!
//! * every command and every long flag the binary's own help lists is in the command-line
//!   chapter (`src/guide/cli.md`), so the reference cannot fall behind the binary;
//! * every test the docs cite (`module::test_name` in the guide, the README and CONTRIBUTING)
//!   exists, in the integration tests or as a unit test in `src/`;
//! * every public function of the library that returns a future documents its
//!   `# Cancel safety`, as the blocks chapter (`src/guide/blocks.md`) says.
//! * no chapter of the guide is longer than [`MAX_CHAPTER_LINES`];
//! * no chapter of the guide, the README or CONTRIBUTING holds a lab notebook's marks: a date or a
//!   time of day in its prose, a commit hash, narration of how the work went (history goes to
//!   `CHANGELOG.md`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
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
pub(crate) fn every_command() -> Vec<(Vec<String>, BTreeSet<String>)> {
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

/// The types under `dir` that are awaited (`impl … IntoFuture for NAME`): the builders.
fn awaited_builders(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                awaited_builders(&path, out);
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        for line in read(&path).lines() {
            if let Some((_, name)) = line.split_once("IntoFuture for ")
                && line.starts_with("impl")
            {
                let name = name.split(['<', ' ', '{']).next().unwrap_or_default();
                out.push(name.to_owned());
            }
        }
    }
}

/// The public functions under `dir` that return a future (`pub async fn`, a `pub fn` whose
/// return type is a future or an awaited builder, a method of a `pub trait` that returns
/// one), as `path:line: signature`, each with whether its doc comment has a `# Cancel
/// safety` section. The command line (`src/cli/`) and `mod tests` are skipped.
fn futures(dir: &Path, out: &mut Vec<(String, bool)>) {
    let mut builders = Vec::new();
    awaited_builders(&root().join("src"), &mut builders);
    futures_of(dir, &builders, out);
}

fn futures_of(dir: &Path, builders: &[String], out: &mut Vec<(String, bool)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "cli") {
                futures_of(&path, builders, out);
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
            // A setter of a builder (`fn count(self, …) -> TakeMany`) returns a builder too,
            // but is not where the operation starts.
            let setter = signature.contains("(self") || signature.contains("(mut self");
            let returns_future = !setter
                && signature.split_once("->").is_some_and(|(_, ret)| {
                    ret.contains("Future")
                        || ret
                            .split(|c: char| !c.is_alphanumeric())
                            .any(|word| builders.iter().any(|b| b == word))
                });
            let public = trimmed.starts_with("pub async fn ")
                || (trimmed.starts_with("pub fn ") && returns_future)
                || (in_trait
                    && (trimmed.starts_with("async fn ")
                        || (trimmed.starts_with("fn ") && returns_future)));
            if !public {
                continue;
            }
            // The doc comment above the attributes (an attribute may span lines: up to its
            // `#[` every line between is part of it).
            let above: Vec<&str> = lines[..i].iter().rev().map(|l| l.trim_start()).collect();
            let docs_from = above
                .iter()
                .position(|l| l.starts_with("///"))
                .filter(|&k| {
                    // Only attribute lines between: no blank line, no end of an item.
                    above[..k]
                        .iter()
                        .all(|l| !l.is_empty() && !l.starts_with('}') && !l.contains("fn "))
                })
                .unwrap_or(above.len());
            let documented = above[docs_from..]
                .iter()
                .take_while(|l| l.starts_with("///"))
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

/// The prose of a Markdown text: what is outside fenced code blocks and inline code spans (a
/// span opens with a run of backticks and closes with a run of the same length, so that
/// ```` ```rust ```` is one span; a run that is never closed is text).
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
    let b = outside.as_bytes();
    let run = |i: usize| b[i..].iter().take_while(|&&c| c == b'`').count();
    let mut out = String::new();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        let close = loop {
            match b[j..].iter().position(|&c| c == b'`') {
                None => break None,
                Some(k) => {
                    let m = run(j + k);
                    if m == n {
                        break Some(j + k);
                    }
                    j += k + m;
                }
            }
        };
        match close {
            Some(c) => {
                out.push_str(&outside[start..i]);
                out.push(' ');
                i = c + n;
                start = i;
            }
            None => i += n,
        }
    }
    out.push_str(&outside[start..]);
    out
}

/// The dates in `text`: `20YY-MM-DD`, and a month named with its year (`November 2026`).
fn dates(text: &str) -> Vec<String> {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let mut out: Vec<String> = (0..b.len().saturating_sub(9))
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
        .collect();
    let words: Vec<&str> = text.split_whitespace().collect();
    for pair in words.windows(2) {
        let year = pair[1].trim_end_matches(|c: char| !c.is_ascii_digit());
        if MONTHS.contains(&pair[0])
            && year.len() == 4
            && year.starts_with("20")
            && digits_only(year)
        {
            out.push(format!("{} {year}", pair[0]));
        }
    }
    out
}

fn digits_only(s: &str) -> bool {
    s.bytes().all(|c| c.is_ascii_digit())
}

/// The times of day in `text` given with a time zone: `HH:MM` (or `HH:MM:SS`) with `UTC`,
/// `GMT`, a zone's abbreviation (`CET`, `PST`) or an offset (`+01:00`) within the few words that
/// follow, so that both ends of `19:31–20:18 UTC` or `between 19:31 and 20:18 UTC` count.
fn times(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let zone = |word: &str| {
        let w = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '+');
        w == "UTC"
            || w == "GMT"
            || (w.starts_with("UTC+") || w.starts_with('+')) && w.len() > 1
            || (2..=5).contains(&w.len())
                && w.ends_with('T')
                && w.chars().all(|c| c.is_ascii_uppercase())
    };
    (0..b.len().saturating_sub(4))
        .filter(|&i| {
            b[i].is_ascii_digit()
                && b[i + 1].is_ascii_digit()
                && b[i + 2] == b':'
                && b[i + 3].is_ascii_digit()
                && b[i + 4].is_ascii_digit()
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b"./:".contains(&b[i - 1])))
                && (b[i] - b'0') * 10 + (b[i + 1] - b'0') < 24
                && b[i + 3] < b'6'
                && !b.get(i + 5).is_some_and(u8::is_ascii_alphanumeric)
                && text[i + 5..]
                    .split_whitespace()
                    .take(4)
                    .take_while(|w| !w.contains(['.', ',', ';', '(', ')']) || zone(w))
                    .any(zone)
        })
        .map(|i| text[i..i + 5].to_owned())
        .collect()
}

/// The tokens of `text` (its prose and its inline code spans) that look like commit hashes: 7 to
/// 40 lowercase hex digits, letters and digits both.
fn hashes(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
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

/// Words that narrate how the work went rather than say what is: a lab notebook's, not a
/// reference's. Lowercase; matched case-insensitively in the prose.
const NARRATION: [&str; 11] = [
    "this round",
    "the round before",
    "other engineers",
    "re-measured",
    "in the same hour",
    "an hour earlier",
    "as of commit",
    "this work",
    "an earlier run",
    "earlier runs",
    "the start of this work",
];

/// The narrating phrases of [`NARRATION`] in `text`, as whole words.
fn narration(text: &str) -> Vec<String> {
    let text = text
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric());
    NARRATION
        .iter()
        .filter(|p| {
            text.match_indices(*p).any(|(i, _)| {
                !word(text[..i].chars().next_back()) && !word(text[i + p.len()..].chars().next())
            })
        })
        .map(|p| (*p).to_owned())
        .collect()
}

/// The docs a reader takes as the reference: the README, every chapter of the guide (the
/// benchmarks ones included) and CONTRIBUTING.
fn reference_docs() -> Vec<PathBuf> {
    let mut docs = chapters();
    docs.push(root().join("README.md"));
    docs.push(root().join(".github/CONTRIBUTING.md"));
    docs
}

/// What `text` (Markdown) holds of a lab notebook: dates and times of day in its prose, commit
/// hashes in its prose or inline code, narration. Code blocks and inline code are data
/// (`tickets@2026-11-22`, an example's output), and are left out of all but the hashes.
fn notebook_marks(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut inline = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            inline.push_str(line);
            inline.push('\n');
        }
    }
    let mut found = Vec::new();
    found.extend(dates(&prose).into_iter().map(|d| format!("the date {d}")));
    found.extend(
        times(&prose)
            .into_iter()
            .map(|t| format!("the time of day {t}")),
    );
    found.extend(
        hashes(&inline)
            .into_iter()
            .map(|h| format!("the commit hash {h}")),
    );
    found.extend(
        narration(&prose)
            .into_iter()
            .map(|n| format!("the narration \"{n}\"")),
    );
    found
}

/// Docs are a reference (issue 50): every figure with its command and the machine class, and no
/// lab notebook's marks — no date of a run, no time of day, no commit hash, no narration of how
/// the work went — in the README, any chapter of the guide or CONTRIBUTING. History goes to
/// `CHANGELOG.md`.
#[test]
fn no_lab_notebook_marks_in_the_docs() {
    // The parser finds the marks (in prose, not in code) …
    let sample = "Re-measured on 2026-11-25 at 20:20 UTC, between 19:31 and 20:18 UTC, in \
                  November 2026, as of commit `0a34ab7` (the start of this work; e3f9a12 this \
                  round); not x2026-11-25, `tickets@2026-11-22`, 127.0.0.1:8080, 1:20, \
                  `20000000` or `deadline`.\n```text\n2026-11-27T08:01:12Z 0a34ab7e\n```\n";
    assert_eq!(
        notebook_marks(sample),
        [
            "the date 2026-11-25",
            "the date November 2026",
            "the time of day 20:20",
            "the time of day 19:31",
            "the time of day 20:18",
            "the commit hash 0a34ab7",
            "the commit hash e3f9a12",
            "the narration \"this round\"",
            "the narration \"re-measured\"",
            "the narration \"as of commit\"",
            "the narration \"this work\"",
            "the narration \"the start of this work\"",
        ]
    );
    assert_eq!(
        times("from 02:10–02:12 UTC; at 9:30, 10:15 CET"),
        ["02:10", "02:12", "10:15"]
    );
    // … and none is left in the docs.
    let docs = reference_docs();
    assert!(docs.len() > 12, "{} docs found", docs.len());
    let mut found = Vec::new();
    for doc in &docs {
        let name = doc
            .strip_prefix(root())
            .unwrap_or(doc)
            .display()
            .to_string();
        for mark in notebook_marks(&read(doc)) {
            found.push(format!("{name}: {mark}"));
        }
    }
    assert!(
        found.is_empty(),
        "the docs are a reference: a figure with its command and machine class, no date of a \
         run, time of day, commit hash or narration (history goes to CHANGELOG.md): {found:#?}"
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

/// The operationIds `src/guide/service.md` lists: the backticked words of the parenthesis that
/// follows "its `operationId` (" in the `/openapi.json` row.
fn listed_operation_ids(chapter: &str) -> BTreeSet<String> {
    let (_, after) = chapter
        .split_once("with its `operationId` (")
        .expect("service.md lists the operationIds after \"with its `operationId` (\"");
    let list = &after[..after
        .find(')')
        .expect("the list of operationIds ends with ')'")];
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The service chapter is a reference of the HTTP API (issue 50): it lists every operationId of
/// the service's own `/openapi.json`, and no other, and every endpoint of the document — method
/// and path — is a row of its table.
#[tokio::test]
async fn the_service_chapter_lists_every_operation_of_the_openapi_document() {
    let svc = crate::serve::Service::start("docs_openapi");
    let (status, doc) =
        crate::serve::send(reqwest::Client::new().get(svc.url("/openapi.json"))).await;
    assert_eq!(status, 200, "{doc}");
    let mut ids = BTreeSet::new();
    let mut endpoints = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            if let Some(id) = op["operationId"].as_str() {
                ids.insert(id.to_owned());
                endpoints.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    assert!(
        ids.len() > 25,
        "{} operationIds in /openapi.json",
        ids.len()
    );
    let chapter = read(&root().join("src/guide/service.md"));
    let listed = listed_operation_ids(&chapter);
    assert!(
        listed == ids,
        "src/guide/service.md lists the operationIds {listed:?}; /openapi.json has {ids:?}: \
         missing from the chapter {:?}, not in the document {:?}",
        ids.difference(&listed).collect::<Vec<_>>(),
        listed.difference(&ids).collect::<Vec<_>>()
    );
    // `POST /v1/sequences` written as itself, not only as the start of a longer path.
    let missing: Vec<&String> = endpoints
        .iter()
        .filter(|e| {
            let written = format!("`{e}");
            !chapter.match_indices(&written).any(|(i, _)| {
                chapter[i + written.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| matches!(c, '`' | '?'))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "src/guide/service.md has no row for {missing:?}"
    );
    let (status, stderr) = svc.stop();
    assert!(status.success(), "{stderr}");
}

/// The numbers a Markdown table cell states: `1 – 100 000 000` is 1 and 100000000 (groups of
/// three digits after a space belong to the number before), `0.001` none.
fn numbers_in(cell: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for word in cell.split_whitespace() {
        let trimmed = word.trim_start_matches(['(', '`']);
        let digits = trimmed.trim_end_matches(|c: char| !c.is_ascii_digit());
        let whole = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        let ends = digits.len() < trimmed.len();
        match (&mut current, whole) {
            (Some(n), true) if digits.len() == 3 && trimmed.len() == word.len() => {
                n.push_str(digits)
            }
            (_, true) => {
                if let Some(n) = current.take() {
                    out.push(n.parse().unwrap());
                }
                current = Some(digits.to_owned());
            }
            (_, false) => {
                if let Some(n) = current.take() {
                    out.push(n.parse().unwrap());
                }
            }
        }
        if ends && let Some(n) = current.take() {
            out.push(n.parse().unwrap());
        }
    }
    if let Some(n) = current {
        out.push(n.parse().unwrap());
    }
    out
}

/// The value of a constant as `file` (under `src/`) defines it: `NAME: T = 100_000;`,
/// `64 * 1024`, `10_000.0`, `Duration::from_secs(3600)` — for the binary's constants, which a
/// test cannot name.
fn source_const(file: &str, name: &str) -> u64 {
    let text = read(&root().join("src").join(file));
    let line = text
        .lines()
        .find(|l| l.contains(&format!("const {name}:")))
        .unwrap_or_else(|| panic!("src/{file} defines no const {name}"));
    let value = line
        .split_once('=')
        .and_then(|(_, v)| v.split_once(';'))
        .map(|(v, _)| v.trim())
        .unwrap_or_else(|| panic!("src/{file}: {line}"));
    let value = value
        .strip_prefix("Duration::from_secs(")
        .and_then(|v| v.strip_suffix(')'))
        .unwrap_or(value);
    value
        .split('*')
        .map(|f| {
            let f = f.trim().replace('_', "");
            f.strip_suffix(".0")
                .unwrap_or(&f)
                .parse::<u64>()
                .unwrap_or_else(|e| panic!("src/{file}: {name} = {value}: {e}"))
        })
        .product()
}

/// The `pub const MAX_…` names of the crate's sources (the language bindings' aside).
fn public_max_constants(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() && !path.ends_with("bindings") {
            public_max_constants(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            for line in read(&path).lines() {
                if let Some(rest) = line.trim_start().strip_prefix("pub const MAX_")
                    && let Some((name, _)) = rest.split_once(':')
                {
                    out.insert(format!("MAX_{name}"));
                }
            }
        }
    }
}

/// The README promises every limit in the command-line chapter (issue 50): each limit's number
/// there is the code's — the library's public constants, and the binary's and the service's as
/// their sources define them — and every public `MAX_…` constant is one of them.
#[test]
fn the_command_line_chapter_states_every_limit_as_the_code_defines_it() {
    use dispenser::doctor::DoctorOptions;
    let chapter = read(&root().join("src/guide/cli.md"));
    let rows: Vec<Vec<String>> = chapter
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| l.split('|').map(|c| c.trim().to_owned()).collect())
        .collect();
    let u = |n: usize| n as u64;
    // (the start of the row's first cell, the constant, its value)
    let limits: Vec<(&str, &str, u64)> = vec![
        (
            "a name:",
            "MAX_NAME_BYTES",
            u(dispenser::sequence::MAX_NAME_BYTES),
        ),
        ("who acts", "MAX_CALLER", u(dispenser::sequence::MAX_CALLER)),
        ("a format", "MAX_BYTES", u(dispenser::Format::MAX_BYTES)),
        ("a format", "MAX_PAD", u(dispenser::Format::MAX_PAD)),
        (
            "a desk's label",
            "MAX_DESK_CHARS",
            u(dispenser::queue::MAX_DESK_CHARS),
        ),
        (
            "a request id",
            "MAX_REQUEST_ID",
            u(dispenser::queue::MAX_REQUEST_ID),
        ),
        (
            "desks showing",
            "MAX_DESKS",
            source_const("queue/state.rs", "MAX_DESKS"),
        ),
        (
            "spans of tickets",
            "MAX_SPANS",
            source_const("queue/state.rs", "MAX_SPANS"),
        ),
        (
            "waiting tickets",
            "WAITING_LISTED",
            u(dispenser::queue::WAITING_LISTED),
        ),
        (
            "entries of one history query",
            "MAX_HISTORY_PAGE",
            u(dispenser::history::MAX_HISTORY_PAGE),
        ),
        (
            "entries of one history query",
            "DEFAULT_PAGE",
            source_const("server/src/history.rs", "DEFAULT_PAGE"),
        ),
        (
            "gap ranges",
            "AUDIT_LIST_LIMIT",
            u(dispenser::gapless::AUDIT_LIST_LIMIT),
        ),
        (
            "HTTP: a request body",
            "MAX_BODY",
            source_const("server/src/json.rs", "MAX_BODY"),
        ),
        (
            "HTTP: a page of `GET /v1/sequences`",
            "MAX_PAGE",
            source_const("server/src/handlers.rs", "MAX_PAGE"),
        ),
        (
            "HTTP: a page of `GET /v1/sequences`",
            "DEFAULT_PAGE",
            source_const("server/src/handlers.rs", "DEFAULT_PAGE"),
        ),
        (
            "HTTP: a page of `GET /v1/overview`",
            "MAX_PAGE",
            source_const("server/src/overview.rs", "MAX_PAGE"),
        ),
        (
            "HTTP: a page of `GET /v1/overview`",
            "DEFAULT_PAGE",
            source_const("server/src/overview.rs", "DEFAULT_PAGE"),
        ),
        (
            "HTTP: numbers a draw answers",
            "LIST_LIMIT",
            source_const("server/src/draw.rs", "LIST_LIMIT"),
        ),
        (
            "HTTP: a token",
            "MIN_TOKEN_LEN",
            source_const("server/src/tokens.rs", "MIN_TOKEN_LEN"),
        ),
        (
            "HTTP: a token",
            "MAX_TOKEN_LEN",
            source_const("server/src/tokens.rs", "MAX_TOKEN_LEN"),
        ),
        (
            "`next --count`",
            "MAX_COUNT",
            source_const("cli/src/args.rs", "MAX_COUNT"),
        ),
        (
            "`serve --max-count`",
            "MAX_COUNT",
            source_const("cli/src/args.rs", "MAX_COUNT"),
        ),
        (
            "`next --block`",
            "MAX_BLOCK",
            source_const("cli/src/args.rs", "MAX_BLOCK"),
        ),
        (
            "`serve --max-block`",
            "MAX_BLOCK",
            source_const("cli/src/args.rs", "MAX_BLOCK"),
        ),
        (
            "`create --stripes`",
            "MAX_STRIPES",
            u64::from(dispenser::stripe::MAX_STRIPES),
        ),
        (
            "`queue take --count`",
            "MAX_TAKE",
            source_const("cli/src/queue.rs", "MAX_TAKE"),
        ),
        (
            "`queue take --count`",
            "MAX_TAKE",
            source_const("server/src/queues.rs", "MAX_TAKE"),
        ),
        (
            "`doctor --tasks`",
            "MAX_TASKS",
            u64::from(DoctorOptions::MAX_TASKS),
        ),
        (
            "`doctor --tasks`",
            "MAX_PER_TASK",
            u64::from(DoctorOptions::MAX_PER_TASK),
        ),
        (
            "`doctor --tasks`",
            "MAX_TIME_LIMIT",
            DoctorOptions::MAX_TIME_LIMIT.as_secs(),
        ),
        (
            "`gapless alter --max-lease`",
            "MAX_LEASE_SECONDS",
            source_const("server/src/gapless.rs", "MAX_LEASE_SECONDS"),
        ),
        (
            "`bench --rtt`",
            "MAX_RTT_MS",
            source_const("cli/src/bench/rtt.rs", "MAX_RTT_MS"),
        ),
    ];
    let mut wrong = Vec::new();
    for (row, name, value) in &limits {
        match rows
            .iter()
            .find(|r| r.get(1).is_some_and(|c| c.starts_with(row)))
        {
            None => wrong.push(format!("no row starting {row:?} (for {name} = {value})")),
            Some(r) => {
                // The row's name may state the limit too.
                let mut stated = numbers_in(&r[1]);
                stated.extend(numbers_in(&r[2]));
                if !stated.contains(value) {
                    wrong.push(format!("{row:?} states {stated:?}; {name} is {value}"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "src/guide/cli.md and the code disagree on {} limits: {wrong:#?}",
        wrong.len()
    );
    // Every public MAX_ constant is a limit the chapter states.
    let mut public = BTreeSet::new();
    public_max_constants(&root().join("src"), &mut public);
    assert!(public.len() >= 10, "{public:?}");
    let checked: BTreeSet<String> = limits.iter().map(|(_, n, _)| (*n).to_owned()).collect();
    let unstated: Vec<&String> = public.difference(&checked).collect();
    assert!(
        unstated.is_empty(),
        "public limits the command-line chapter does not state (add a row to its limits and \
         to this test): {unstated:?}"
    );
    // The cell parser reads the chapter's way of writing numbers.
    assert_eq!(
        numbers_in("1 – 100 000 000; default 1000 (64 KiB), 0.001 – 86 400, 64, 100 000, 3600 s"),
        [1, 100_000_000, 1000, 64, 86_400, 64, 100_000, 3600]
    );
}

/// The code spans of `text` (`` `a` ``), in order.
fn code_spans(text: &str) -> Vec<String> {
    text.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_owned())
        .collect()
}

/// The glossary's verb table: per row the verb and, per kind, the library's, the command
/// line's and HTTP's code spans (empty where the kind or the surface has none).
fn verb_table() -> Vec<(String, Vec<[Vec<String>; 3]>)> {
    let text = read(&root().join("src/guide/glossary.md"));
    let mut rows = Vec::new();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("| act | verb |"));
    assert!(lines.next().is_some(), "glossary.md has no verb table");
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 7, "a verb table row has 7 cells: {line}");
        let kinds = cells[2..]
            .iter()
            .map(|cell| {
                if *cell == "—" {
                    return [Vec::new(), Vec::new(), Vec::new()];
                }
                let parts: Vec<&str> = cell.split("<br>").collect();
                assert_eq!(parts.len(), 3, "library<br>CLI<br>HTTP: {cell}");
                [
                    code_spans(parts[0]),
                    code_spans(parts[1]),
                    code_spans(parts[2])
                        .into_iter()
                        .filter(|s| s.starts_with(['G', 'P', 'D']))
                        .collect(),
                ]
            })
            .collect();
        rows.push((cells[1].to_owned(), kinds));
    }
    assert!(rows.len() >= 15, "{} rows in the verb table", rows.len());
    rows
}

/// Each method named, referred to (so a rename breaks the build), as `Type::method`.
/// A generic method is written with its type arguments (`Gapless::issue::<…>`); its name is
/// the path without them.
macro_rules! methods {
    ($($t:ident :: $m:ident $(:: <$($g:ty),*>)?),* $(,)?) => {
        [$({
            let _ = $t::$m $(::<$($g),*>)?;
            concat!(stringify!($t), "::", stringify!($m))
        }),*]
    };
}

/// A business write for [`Gapless::issue`](dispenser::gapless::Gapless::issue)'s type.
type Write = fn(i64) -> std::future::Ready<Result<(), std::io::Error>>;

/// Issue 50: the glossary's verb table has one verb per row, for every kind and surface, and
/// names only what exists: each library method (referred to here, so a rename fails the
/// build, and the set compared with the table's), each command (and its flags) in the binary's
/// help, each endpoint (method and path) in `/openapi.json`.
#[tokio::test]
async fn the_glossary_verb_table_names_what_each_surface_has() {
    use dispenser::gapless::Gapless;
    use dispenser::queue::Queue;
    use dispenser::stripe::StripedSequence;
    use dispenser::{Dispenser, Sequence};
    let mut compiled: BTreeSet<&str> = methods![
        Dispenser::create,
        Dispenser::create_striped,
        Dispenser::create_scope,
        Dispenser::create_gapless,
        Dispenser::create_queue,
        Dispenser::ensure,
        Dispenser::ensure_striped,
        Dispenser::ensure_scope,
        Dispenser::ensure_gapless,
        Dispenser::ensure_queue,
        Dispenser::open,
        Dispenser::open_striped,
        Dispenser::open_scope,
        Dispenser::open_gapless,
        Dispenser::open_queue,
        Sequence::peek,
        StripedSequence::peek,
        Gapless::peek,
        Queue::peek,
        Sequence::alter,
        StripedSequence::alter,
        Gapless::alter,
        Queue::alter,
        Sequence::history,
        StripedSequence::history,
        Gapless::history,
        Queue::history,
        Dispenser::list,
        Dispenser::list_gapless,
        Dispenser::list_queues,
        Sequence::delete,
        StripedSequence::delete,
        Gapless::delete,
        Queue::delete,
        Sequence::next,
        StripedSequence::next,
        Sequence::advance_to,
        StripedSequence::advance_to,
        Sequence::adopt,
        Dispenser::adopt,
        Sequence::reset,
        StripedSequence::reset,
        Gapless::issue::<Write, std::future::Ready<Result<(), std::io::Error>>, (), std::io::Error>,
        Gapless::void,
        Queue::take,
        Queue::call,
        Queue::recall,
        Queue::finish,
        Queue::cancel,
    ]
    .into_iter()
    .collect();
    // A method with an `impl Trait` argument is referred to by a call (never run).
    let _ = |g: &Gapless| drop(g.release(1, "reason"));
    compiled.insert("Gapless::release");
    let rows = verb_table();
    let commands: std::collections::BTreeMap<Vec<String>, BTreeSet<String>> =
        every_command().into_iter().collect();
    let svc = crate::serve::Service::start("docs_verbs");
    let (status, doc) =
        crate::serve::send(reqwest::Client::new().get(svc.url("/openapi.json"))).await;
    assert_eq!(status, 200, "{doc}");
    let mut named = BTreeSet::new();
    let mut verbs = BTreeSet::new();
    for (verb, kinds) in &rows {
        assert!(verbs.insert(verb.clone()), "the verb {verb} has two rows");
        let word = verb.replace('-', "_");
        for [library, cli, http] in kinds {
            for m in library {
                let method = m.rsplit("::").next().unwrap_or_default();
                assert!(
                    method.starts_with(&word),
                    "row {verb}: {m} is not named after the verb"
                );
                named.insert(m.clone());
            }
            for c in cli {
                let words: Vec<&str> = c.split_whitespace().collect();
                let path: Vec<String> = words
                    .iter()
                    .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                    .filter(|w| !w.starts_with("--"))
                    .map(|w| (*w).to_owned())
                    .collect();
                let flags = commands.get(&path).unwrap_or_else(|| {
                    panic!("row {verb}: `{c}`: no command {path:?} in the binary's help")
                });
                for flag in words.iter().filter(|w| w.starts_with("--")) {
                    assert!(
                        flags.contains(*flag),
                        "row {verb}: `{c}`: {path:?} has no {flag} ({flags:?})"
                    );
                }
            }
            for h in http {
                let (method, path) = h.split_once(' ').expect("METHOD /path");
                assert!(
                    doc["paths"][path][method.to_lowercase()]["operationId"].is_string(),
                    "row {verb}: {h} is not in /openapi.json"
                );
            }
        }
    }
    let named: BTreeSet<&str> = named.iter().map(String::as_str).collect();
    assert_eq!(
        named, compiled,
        "the methods the glossary's verb table names, and those this test refers to"
    );
}
