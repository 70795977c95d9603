//! The reports as a table or as JSON.
//!
//! The table's columns are [`COLUMNS`]: the header and every row are built from that one list,
//! so they cannot drift apart. The JSON is `{"server", "processes", "tasks", "runs": [..]}`
//! ([`TOP_KEYS`]), each run an object with the keys [`RUN_KEYS`].

use super::args::BenchArgs;
use super::rtt::RttLabel;
#[cfg(test)]
use super::samples::RUN_KEYS;
use super::samples::Report;

/// The keys of the JSON object `bench --json` prints (the tests hold [`json`] to them).
#[cfg(test)]
pub(super) const TOP_KEYS: &[&str] = &["server", "processes", "tasks", "rtt", "runs"];

/// The table's columns: header and width (the first is left-aligned and widens to the
/// longest run label, the others are right-aligned).
pub(super) const COLUMNS: &[(&str, usize)] = &[
    ("run", 30),
    ("numbers", 9),
    ("numbers/s", 12),
    ("p50 us", 9),
    ("p99 us", 9),
    ("max us", 10),
    ("wr/num", 7),
    ("rt/num", 7),
    ("confl/num", 9),
    ("retr/num", 8),
    ("refills", 7),
    ("waits", 7),
    ("dups", 5),
    ("order!", 6),
    ("x raw/s", 8),
    ("x rawp50", 8),
    ("x rawp99", 8),
];

/// Marks the run that uses the library's defaults in the table.
const DEFAULT_MARK: &str = " *";

pub(super) fn print_reports(
    uri: &str,
    args: &BenchArgs,
    rtt: Option<RttLabel>,
    reports: &[Report],
) {
    if args.json {
        println!("{}", json(uri, args, rtt, reports));
        return;
    }
    println!(
        "dispenser bench: {} process(es) x {} task(s) against {}{}",
        args.processes,
        args.tasks,
        dispenser::error::redact::redact_uri(uri),
        rtt.map_or_else(String::new, |r| format!(", {}", r.describe()))
    );
    for line in table(reports) {
        println!("{line}");
    }
    if reports.iter().any(|r| r.is_default) {
        println!(
            "{}: the library's defaults. order!: calls that returned a number smaller than one \
             returned before they began (within a process; '-' with blocks).",
            DEFAULT_MARK.trim()
        );
    }
    if reports.iter().any(|r| r.compared_with.is_some()) {
        println!(
            "x raw: ratios to the raw call of the same run ({}).",
            if reports
                .iter()
                .any(|r| r.compared_with.as_deref() == Some("raw insert_one, unique index"))
            {
                "raw insert_one for the gap-free runs, raw findOneAndUpdate $inc for the others"
            } else {
                "the raw call of each run's kind"
            }
        );
    }
    if reports.iter().any(|r| r.writes_per_number.is_none()) {
        println!("-: not counted (a queue's take counts no writes).");
    }
    for r in reports
        .iter()
        .filter(|r| r.errors > 0 || (args.queue && r.run.starts_with("queue")))
    {
        if r.run.starts_with("queue") {
            println!(
                "{}: {} take(s) or call(s) gave up (see the log)",
                r.run, r.errors
            );
        } else {
            println!("{}: {} draw(s) failed (see the log)", r.run, r.errors);
        }
    }
}

/// The JSON report: [`TOP_KEYS`], each run with [`RUN_KEYS`]; `rtt` is `null` without
/// `--rtt`, else `{"asked_ms", "applied_ms"}`.
pub(super) fn json(
    uri: &str,
    args: &BenchArgs,
    rtt: Option<RttLabel>,
    reports: &[Report],
) -> serde_json::Value {
    serde_json::json!({
        "server": dispenser::error::redact::redact_uri(uri),
        "processes": args.processes,
        "tasks": args.tasks,
        "rtt": rtt.map(|r| serde_json::json!({ "asked_ms": r.asked_ms, "applied_ms": r.applied_ms })),
        "runs": reports,
    })
}

/// The table's lines: the header, then one line per run.
pub(super) fn table(reports: &[Report]) -> Vec<String> {
    let header: Vec<String> = COLUMNS.iter().map(|(h, _)| (*h).to_owned()).collect();
    let rows: Vec<Vec<String>> = std::iter::once(header)
        .chain(reports.iter().map(cells))
        .collect();
    let first = rows
        .iter()
        .filter_map(|row| row.first())
        .map(|cell| cell.chars().count())
        .fold(COLUMNS[0].1, usize::max);
    rows.iter().map(|row| render(row, first)).collect()
}

/// One run's cells, in the order of [`COLUMNS`].
pub(super) fn cells(r: &Report) -> Vec<String> {
    let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    let per = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |v| format!("{v:.4}"));
    let mark = if r.is_default { DEFAULT_MARK } else { "" };
    vec![
        format!("{}{mark}", r.run),
        r.numbers.to_string(),
        format!("{:.0}", r.numbers_per_s),
        format!("{:.1}", r.p50_us),
        format!("{:.1}", r.p99_us),
        format!("{:.1}", r.max_us),
        per(r.writes_per_number),
        per(r.round_trips_per_number),
        per(r.conflicts_per_number),
        per(r.retries_per_number),
        r.block_refills.to_string(),
        r.block_waits.to_string(),
        r.duplicates.to_string(),
        r.order_violations
            .map_or_else(|| "-".to_owned(), |v| v.to_string()),
        ratio(r.throughput_vs_raw),
        ratio(r.p50_vs_raw),
        ratio(r.p99_vs_raw),
    ]
}

/// Pads the cells to the widths of [`COLUMNS`] (the first to `first`), one space apart.
fn render(cells: &[String], first: usize) -> String {
    let mut line = String::new();
    for (i, (cell, (_, width))) in cells.iter().zip(COLUMNS).enumerate() {
        if i == 0 {
            line.push_str(&format!("{cell:<first$}"));
        } else {
            line.push_str(&format!(" {cell:>width$}"));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn report(run: &str, is_default: bool, order_violations: Option<u64>) -> Report {
        Report {
            run: run.to_owned(),
            is_default,
            coalesce: true,
            processes: 1,
            tasks: 4,
            numbers: 1000,
            seconds: 0.5,
            numbers_per_s: 2000.0,
            p50_us: 100.0,
            p99_us: 300.0,
            max_us: 900.0,
            timed_calls: 1000,
            writes_per_number: Some(0.5),
            round_trips_per_number: Some(0.5),
            conflicts_per_number: Some(0.0),
            retries_per_number: Some(0.0),
            block_refills: 3,
            block_waits: 7,
            errors: 0,
            duplicates: 0,
            order_violations,
            throughput_vs_raw: Some(0.9),
            p50_vs_raw: None,
            p99_vs_raw: None,
            compared_with: Some("raw findOneAndUpdate $inc".into()),
            rtt_ms: Some(2.0),
        }
    }

    fn reports() -> Vec<Report> {
        vec![
            report("dispenser inc", true, Some(0)),
            report("inc block 1000 prefetch 0.5, uncoalesced", false, None),
        ]
    }

    fn bench_args(extra: &[&str]) -> BenchArgs {
        let cli = Cli::parse_from(["dispenser", "bench"].iter().chain(extra));
        match cli.command {
            Command::Bench(args) => args,
            other => panic!("parsed {other:?}"),
        }
    }

    #[test]
    fn the_header_and_every_row_have_the_same_columns() {
        let rows = reports();
        for r in &rows {
            assert_eq!(cells(r).len(), COLUMNS.len(), "{r:?}");
        }
        let lines = table(&rows);
        assert_eq!(lines.len(), 1 + rows.len());
        // Columns line up: every right-aligned column ends at the same offset in every line
        // (the header's "waits" sits above the waits, "dups" above the duplicates).
        let header = &lines[0];
        let end_of = |name: &str| header.find(name).map(|i| i + name.len()).unwrap();
        for line in &lines[1..] {
            assert_eq!(line.chars().count(), header.chars().count(), "{line}");
            assert_eq!(&line[end_of("waits") - 1..end_of("waits")], "7", "{line}");
            assert_eq!(
                &line[end_of("refills") - 1..end_of("refills")],
                "3",
                "{line}"
            );
            assert_eq!(&line[end_of("dups") - 1..end_of("dups")], "0", "{line}");
        }
        assert!(lines[1].starts_with("dispenser inc *"), "{}", lines[1]);
        assert!(lines[1].ends_with("0.90        -        -"), "{}", lines[1]);
        assert_eq!(&lines[2][end_of("order!") - 1..end_of("order!")], "-");
    }

    #[test]
    fn the_json_has_the_documented_keys() {
        let args = bench_args(&["--json", "--processes", "2", "--tasks", "4"]);
        let rtt = RttLabel {
            asked_ms: 2.0,
            applied_ms: 2.02,
        };
        let value = json("mongodb://u:secret@h/", &args, Some(rtt), &reports());
        assert_eq!(value["rtt"]["asked_ms"], 2.0);
        let mut top: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
        let mut want: Vec<_> = TOP_KEYS.iter().map(|k| (*k).to_owned()).collect();
        top.sort();
        want.sort();
        assert_eq!(top, want);
        assert!(!value["server"].as_str().unwrap().contains("secret"));
        let runs = value["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        let mut want: Vec<_> = RUN_KEYS.iter().map(|k| (*k).to_owned()).collect();
        want.sort();
        for run in runs {
            let mut keys: Vec<_> = run.as_object().unwrap().keys().cloned().collect();
            keys.sort();
            assert_eq!(keys, want);
        }
        assert_eq!(runs[0]["default"], true);
        assert_eq!(runs[0]["order_violations"], 0);
        assert_eq!(runs[1]["default"], false);
        assert!(runs[1]["order_violations"].is_null());
    }

    #[test]
    fn coalesce_defaults_to_on() {
        use crate::bench::args::OnOff;
        assert_eq!(bench_args(&[]).coalesce, OnOff::On);
        assert_eq!(bench_args(&["--coalesce", "off"]).coalesce, OnOff::Off);
    }
}
