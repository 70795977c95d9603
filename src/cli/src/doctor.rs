//! `dispenser doctor`: whether the server can keep the library's promise (exit 0 fit, 1 unfit).

use std::io::Write;
use std::time::Duration;

use dispenser::Dispenser;
use dispenser::doctor::DoctorOptions;
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
    let report = d.doctor().options(options).await?;
    let shown = dispenser::error::redact::redact_uri(uri);
    if args.json {
        let mut v = report.to_json();
        v["uri"] = json!(shown);
        writeln!(out, "{v}").map_err(io_err)?;
    } else {
        writeln!(out, "server         {shown}").map_err(io_err)?;
        write!(out, "{report}").map_err(io_err)?;
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Exit(if report.is_fit() { 0 } else { 1 }))
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
}
