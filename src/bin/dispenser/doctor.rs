//! `dispenser doctor`: whether the server can keep the library's promise (exit 0 fit, 1 unfit).

use std::io::Write;
use std::time::Duration;

use dispenser::Dispenser;
use dispenser::doctor::{DoctorOptions, Report};
use serde_json::json;

use crate::args::whole;
use crate::exit::Outcome;
use crate::output::io_err;

/// `dispenser doctor`.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Concurrent tasks of the concurrency probe (2–64).
    #[arg(long, default_value_t = 8, value_parser = whole::<u32>(2, u64::from(DoctorOptions::MAX_TASKS)), allow_negative_numbers = true)]
    pub tasks: u32,
    /// Conditional increments per task (1–100000); each task also collects half as many
    /// compare-and-set wins.
    #[arg(long, default_value_t = 200, value_parser = whole::<u32>(1, u64::from(DoctorOptions::MAX_PER_TASK)), allow_negative_numbers = true)]
    pub increments: u32,
    /// Seconds the whole examination may take, the removal of its scratch collection
    /// included (more than 0, at most 3600).
    #[arg(long, default_value_t = 10.0, value_parser = parse_time_limit, allow_negative_numbers = true)]
    pub time_limit: f64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_time_limit(s: &str) -> Result<f64, String> {
    let max = DoctorOptions::MAX_TIME_LIMIT.as_secs();
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= max as f64) || Duration::from_secs_f64(v).is_zero() {
        return Err(format!("{s} must be more than 0 and at most {max} seconds"));
    }
    Ok(v)
}

/// Examines the server and prints the report; the exit code is 0 when it is fit, 1 when not.
pub async fn run(
    d: &Dispenser,
    args: DoctorArgs,
    uri: &str,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    let options = DoctorOptions::default()
        .with_tasks(args.tasks)
        .with_increments(args.increments)
        .with_swaps((args.increments / 2).max(1))
        .with_time_limit(Duration::from_secs_f64(args.time_limit));
    let report = d.doctor(options).await?;
    let shown = dispenser::redact::redact_uri(uri);
    if args.json {
        let mut v = report.to_json();
        v["uri"] = json!(shown);
        writeln!(out, "{v}").map_err(io_err)?;
    } else {
        write!(out, "{}", text(&report, &shown)).map_err(io_err)?;
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Exit(if report.is_fit() { 0 } else { 1 }))
}

fn mark(ok: bool) -> &'static str {
    if ok { "ok  " } else { "FAIL" }
}

/// The report as text: one fact per line, the verdict last.
fn text(r: &Report, uri: &str) -> String {
    let s = &r.server;
    let wire = match (s.min_wire_version, s.max_wire_version) {
        (Some(lo), Some(hi)) => format!("{lo} to {hi}"),
        (_, Some(hi)) => format!("up to {hi}"),
        _ => "unknown".to_owned(),
    };
    let version = s.version.as_deref().unwrap_or("unknown");
    let product = s
        .product
        .as_ref()
        .map(|p| format!(" (the server is {p})"))
        .unwrap_or_default();
    let wc = &r.write_concern;
    let mut t = format!(
        "server         {uri}\n\
         version        MongoDB {version}{product}; wire versions {wire}\n\
         topology       {}\n\
         write concern  {} w: majority, j: true {}; the dispenser's: {}\n\
         operations\n",
        s.topology,
        mark(wc.majority_journaled),
        match &wc.detail {
            None => "acknowledged".to_owned(),
            Some(d) => format!("not acknowledged: {d}"),
        },
        wc.configured,
    );
    for o in &r.operations {
        t += &format!("  {} {:<14} {}", mark(o.ok), o.name, o.what);
        if let Some(d) = &o.detail {
            t += &format!(": {d}");
        }
        t.push('\n');
    }
    let p = &r.probe;
    let (inc, cas, ins) = (&p.increments, &p.compare_and_set, &p.inserts);
    let final_value = |v: Option<i64>| match v {
        Some(v) if v >= 0 => grouped(v.unsigned_abs()),
        Some(v) => v.to_string(),
        None => "unknown".to_owned(),
    };
    t += &format!("concurrency probe, {} tasks\n", p.tasks);
    t += &format!(
        "  {} increments      {} of {} acknowledged, {} distinct values, final value {}{}{}\n",
        mark(inc.distinct == inc.acknowledged && inc.final_value >= Some(count(inc.acknowledged))),
        grouped(inc.acknowledged),
        grouped(inc.planned),
        grouped(inc.distinct),
        final_value(inc.final_value),
        failed(inc.failed),
        if inc.library_operation {
            ""
        } else {
            " (sent without a projection: the server refused the library's findAndModify)"
        },
    );
    t += &format!(
        "  {} compare-and-set {} of {} wins, {} distinct values, final value {}; {} lost races{}\n",
        mark(cas.distinct == cas.wins && cas.final_value == Some(count(cas.wins))),
        grouped(cas.wins),
        grouped(cas.planned),
        grouped(cas.distinct),
        final_value(cas.final_value),
        grouped(cas.lost_races),
        failed(cas.failed),
    );
    t += &format!(
        "  {} racing inserts  {} of one _id: {} inserted, {} duplicate key 11000, {} document(s){}\n",
        mark(ins.inserted == 1 && ins.documents == Some(1)),
        ins.tasks,
        ins.inserted,
        ins.duplicate_key,
        ins.documents
            .map_or_else(|| "unknown".to_owned(), |n| n.to_string()),
        failed(ins.failed),
    );
    if let Some(e) = &p.first_error {
        t += &format!("  first error: {e}\n");
    }
    let sc = &r.scratch;
    t += &format!(
        "scratch        {}.{} {}\n",
        sc.database,
        sc.collection,
        match &sc.detail {
            None if sc.removed => "removed".to_owned(),
            None => "NOT removed".to_owned(),
            Some(d) => format!("NOT removed: {d}"),
        }
    );
    t += &format!(
        "time           {:.1} s (limit {} s)\n",
        r.elapsed.as_secs_f64(),
        r.time_limit.as_secs_f64()
    );
    match r.reason() {
        None => t += "fit: every check passed; the library's promise can hold on this server\n",
        Some(why) => t += &format!("UNFIT: {why}\n"),
    }
    t
}

fn failed(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!("; {} failed", grouped(n))
    }
}

/// `n` with its digits in groups of three (`1 600`, `196`), as the guide writes counts.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_are_checked() {
        assert_eq!(parse_time_limit("2.5"), Ok(2.5));
        for bad in ["0", "-1", "nan", "inf", "3601", "1e-12", "x"] {
            assert!(parse_time_limit(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(196), "196");
        assert_eq!(grouped(1600), "1 600");
        assert_eq!(grouped(1_234_567), "1 234 567");
    }
}
