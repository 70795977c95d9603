//! `dispenser check`: exhaustion alerts for monitoring systems (Nagios / Icinga / Sensu /
//! the Prometheus blackbox style "run a command, read its exit code").
//!
//! One line per sequence and the exit code of the monitoring-plugins convention: 0 OK,
//! 1 WARNING, 2 CRITICAL, 3 UNKNOWN (the worst line decides; CRITICAL > WARNING > UNKNOWN >
//! OK). That convention, not `dispenser`'s own exit codes, because every monitoring system
//! understands it; a usage error of `check` is UNKNOWN (3) for the same reason. The rate
//! comes from the per-day counters in each document (see `dispenser::sequence::Usage`), so one call
//! from a cron job is enough.

use std::io::Write;
use std::time::Duration;

use dispenser::{
    Dispenser, Error,
    sequence::{SequenceState, Usage},
};

use crate::exit::Outcome;

/// `dispenser check`.
#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Sequences to check.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub names: Vec<String>,
    /// Check every sequence in the collection.
    #[arg(long)]
    pub all: bool,
    /// WARNING at this share used (e.g. 80% or 0.8).
    #[arg(long, default_value = "80%", value_parser = parse_share)]
    pub warn: f64,
    /// CRITICAL at this share used.
    #[arg(long, default_value = "95%", value_parser = parse_share)]
    pub critical: f64,
    /// WARNING when the forecast runs out within this (30d, 12h, 90m, 3600s); CRITICAL within
    /// a quarter of it.
    #[arg(long, default_value = "30d", value_parser = parse_horizon)]
    pub horizon: Duration,
    /// Forecast only from a rate observed over at least this long (30d, 12h, 90m, 3600s);
    /// before that only --warn and --critical apply, and the line says the rate is too early
    /// to tell.
    #[arg(long, default_value = "1h", value_parser = parse_horizon)]
    pub min_history: Duration,
}

impl CheckArgs {
    /// Refuses thresholds in the wrong order: a sequence must reach WARNING before CRITICAL
    /// (with `--warn` at or above `--critical`, WARNING could never be seen). The message
    /// names both flags and their values.
    pub fn check_thresholds(&self) -> Result<(), String> {
        if self.warn < self.critical {
            return Ok(());
        }
        Err(format!(
            "--warn {} must be below --critical {}: a sequence is WARNING before it is CRITICAL, and with these it would never be WARNING; lower --warn or raise --critical",
            percent(self.warn),
            percent(self.critical)
        ))
    }
}

/// A share as a percentage, as it is given: `0.8` is `80%`, `0.955` is `95.5%`.
fn percent(share: f64) -> String {
    format!("{}%", (share * 10_000.0).round() / 100.0)
}

/// A monitoring status, worst last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Ok,
    Unknown,
    Warning,
    Critical,
}

impl Status {
    pub fn code(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Warning => 1,
            Status::Critical => 2,
            Status::Unknown => 3,
        }
    }
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warning => "WARNING",
            Status::Critical => "CRITICAL",
            Status::Unknown => "UNKNOWN",
        }
    }
}

/// A share given as `80%` or `0.8`.
pub fn parse_share(s: &str) -> Result<f64, String> {
    let (num, pct) = match s.strip_suffix('%') {
        Some(n) => (n, true),
        None => (s, false),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a share: use e.g. 80% or 0.8"))?;
    let v = if pct { v / 100.0 } else { v };
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s:?} lies outside 0%..100%"))
    }
}

/// A duration given as `30d`, `12h`, `90m` or `3600s`.
pub fn parse_horizon(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration: use e.g. 30d, 12h, 90m or 3600s");
    let (num, unit) = s.split_at(s.len().saturating_sub(1));
    let n: u64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "d" => n.checked_mul(86_400),
        "h" => n.checked_mul(3_600),
        "m" => n.checked_mul(60),
        "s" => Some(n),
        _ => None,
    }
    .ok_or_else(bad)?;
    Ok(Duration::from_secs(secs))
}

/// A duration as people read it: `3.2 y`, `14 d`, `5 h 12 min`, `40 s`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 365 * 86_400 {
        format!("{:.1} y", s as f64 / (365.0 * 86_400.0))
    } else if s >= 2 * 86_400 {
        format!("{} d", s / 86_400)
    } else if s >= 3_600 {
        format!("{} h {} min", s / 3_600, s % 3_600 / 60)
    } else if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}

/// How long a rate must have been observed before `check` forecasts from it (a rate seen over
/// seconds is a burst, not a trend).
pub const DEFAULT_MIN_HISTORY: Duration = Duration::from_secs(3_600);

/// Whether `u`'s rate was observed long enough to forecast from.
fn settled(u: &Usage, min_history: Duration) -> bool {
    u.history.is_some_and(|h| h >= min_history)
}

/// The usage part of a sequence's line: `used 12.3%, 340.0/s, runs out in 3.1 y`; before
/// `min_history` of counted draws, no forecast: `rate too early to tell (…)`.
pub fn usage_text(u: &Usage, cyclic: bool, min_history: Duration) -> String {
    let rate = match (u.rate_per_sec, u.history) {
        (None, _) => "rate unknown (no counted draws)".to_owned(),
        (Some(_), Some(h)) if h < min_history => format!(
            "rate too early to tell ({} of history, forecasts after {})",
            human(h),
            human(min_history)
        ),
        (Some(r), _) => format!("{r:.3}/s"),
    };
    let early = !settled(u, min_history);
    let forecast = if early && u.remaining > 0 {
        "no forecast".to_owned()
    } else if cyclic {
        match u.wraps_per_day {
            Some(w) => format!("wraps {w:.2} times a day"),
            None => "cyclic".to_owned(),
        }
    } else if u.remaining == 0 {
        "exhausted".to_owned()
    } else {
        match u.exhausted_in {
            Some(d) => format!("runs out in {}", human(d)),
            None => "no forecast".to_owned(),
        }
    };
    format!(
        "used {:.1}%, {} left, {rate}, {forecast}",
        u.fraction_used * 100.0,
        u.remaining
    )
}

/// The status of one sequence.
pub fn judge(s: &SequenceState, u: &Usage, args: &Thresholds) -> Status {
    if s.cycle {
        return Status::Ok;
    }
    if u.remaining == 0 || u.fraction_used >= args.critical {
        return Status::Critical;
    }
    // Before `min_history` only the shares decide: a burst on a new sequence pages no one.
    let forecast = u.exhausted_in.filter(|_| settled(u, args.min_history));
    if forecast.is_some_and(|d| d <= args.horizon / 4) {
        return Status::Critical;
    }
    if u.fraction_used >= args.warn || forecast.is_some_and(|d| d <= args.horizon) {
        return Status::Warning;
    }
    Status::Ok
}

/// The thresholds of a check.
pub struct Thresholds {
    pub warn: f64,
    pub critical: f64,
    pub horizon: Duration,
    pub min_history: Duration,
}

/// Runs the check; its answer is the exit code of the worst line. A sequence that cannot be
/// read is a line of its own (UNKNOWN), not a failure of the command.
pub async fn run(
    d: &Dispenser,
    args: CheckArgs,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    let thresholds = Thresholds {
        warn: args.warn,
        critical: args.critical,
        horizon: args.horizon,
        min_history: args.min_history,
    };
    let mut worst = Status::Ok;
    let mut line = |status: Status, text: String, out: &mut dyn Write| {
        worst = worst.max(status);
        let _ = writeln!(out, "{} {text}", status.label());
    };
    let now = jiff::Timestamp::now();
    let states: Vec<(String, Result<SequenceState, Error>)> = if args.all {
        match d.list().await {
            Ok(all) => all
                .into_iter()
                .map(|r| match r {
                    Ok(s) => (s.name.clone(), Ok(s)),
                    Err(e) => (corrupt_name(&e), Err(e)),
                })
                .collect(),
            Err(e) => vec![("(all)".to_owned(), Err(e))],
        }
    } else {
        let mut v = Vec::new();
        for name in &args.names {
            v.push((name.clone(), d.peek(name).await));
        }
        v
    };
    if states.is_empty() {
        line(Status::Unknown, "no sequences to check".to_owned(), out);
    }
    for (name, state) in states {
        match state {
            Ok(s) => {
                let u = s.usage(now);
                let status = judge(&s, &u, &thresholds);
                let text = usage_text(&u, s.cycle, thresholds.min_history);
                line(status, format!("{name}: {text}"), out);
            }
            Err(e) => line(Status::Unknown, format!("{name}: {e}"), out),
        }
    }
    let _ = out.flush();
    Ok(Outcome::Exit(worst.code()))
}

fn corrupt_name(e: &Error) -> String {
    match e {
        Error::CorruptDocument { name, .. } => name.clone(),
        _ => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_horizons_parse_and_bad_ones_say_why() {
        assert_eq!(parse_share("80%").unwrap(), 0.8);
        assert_eq!(parse_share("0.95").unwrap(), 0.95);
        assert!(parse_share("120%").unwrap_err().contains("outside"));
        assert!(parse_share("lots").unwrap_err().contains("not a share"));
        assert_eq!(
            parse_horizon("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(parse_horizon("90m").unwrap(), Duration::from_secs(5_400));
        assert!(parse_horizon("soon").is_err());
        assert!(parse_horizon("").is_err());
    }

    /// Regression (issue 49, item 10): `--warn 80% --critical 70%` was accepted (WARNING could
    /// never be seen). WARNING must come before CRITICAL; the message says so, naming both.
    #[test]
    fn warn_must_be_below_critical() {
        let args = |warn: f64, critical: f64| CheckArgs {
            names: vec!["orders".into()],
            all: false,
            warn,
            critical,
            horizon: Duration::from_secs(86_400),
            min_history: DEFAULT_MIN_HISTORY,
        };
        assert_eq!(args(0.8, 0.95).check_thresholds(), Ok(()));
        let e = args(0.8, 0.7).check_thresholds().unwrap_err();
        assert!(
            e.starts_with("--warn 80% must be below --critical 70%: "),
            "{e}"
        );
        let e = args(0.955, 0.955).check_thresholds().unwrap_err();
        assert!(
            e.contains("--warn 95.5% must be below --critical 95.5%"),
            "{e}"
        );
    }

    #[test]
    fn statuses_order_as_monitoring_expects() {
        let worst = [
            Status::Ok,
            Status::Unknown,
            Status::Warning,
            Status::Critical,
        ]
        .into_iter()
        .max();
        assert_eq!(worst, Some(Status::Critical));
        assert_eq!(Status::Unknown.code(), 3);
        assert_eq!(human(Duration::from_secs(3 * 86_400)), "3 d");
    }
}
