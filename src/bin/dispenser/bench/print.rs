//! The reports as a table or as JSON.

use super::samples::Report;
use crate::cli::BenchArgs;

pub(super) fn print_reports(uri: &str, args: &BenchArgs, reports: &[Report]) {
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "server": dispenser::redact_uri(uri),
                "processes": args.processes,
                "tasks": args.tasks,
                "runs": reports,
            })
        );
        return;
    }
    println!(
        "dispenser bench: {} process(es) x {} task(s) against {}",
        args.processes,
        args.tasks,
        dispenser::redact_uri(uri)
    );
    println!(
        "{:<26} {:>9} {:>12} {:>9} {:>9} {:>10} {:>7} {:>9} {:>8} {:>7} {:>5} {:>8} {:>8}",
        "run",
        "numbers",
        "numbers/s",
        "p50 us",
        "p99 us",
        "max us",
        "rt/num",
        "confl/num",
        "retr/num",
        "refills",
        "dups",
        "x raw/s",
        "x rawp50"
    );
    let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    for r in reports {
        println!(
            "{:<26} {:>9} {:>12.0} {:>9.1} {:>9.1} {:>10.1} {:>7.4} {:>9.4} {:>8.4} {:>7} {:>6} {:>5} {:>8} {:>8}",
            r.run,
            r.numbers,
            r.numbers_per_s,
            r.p50_us,
            r.p99_us,
            r.max_us,
            r.round_trips_per_number,
            r.conflicts_per_number,
            r.retries_per_number,
            r.block_refills,
            r.block_waits,
            r.duplicates,
            ratio(r.throughput_vs_raw),
            ratio(r.p50_vs_raw),
        );
    }
    for r in reports.iter().filter(|r| r.errors > 0) {
        println!("{}: {} draw(s) failed (see the log)", r.run, r.errors);
    }
}
