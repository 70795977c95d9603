//! `dispenser history`, `queue history` and `gapless history`: the admin operations
//! recorded for a sequence (a striped one with its stripes), a stripe, a scope, a queue or a
//! gap-free sequence, oldest first, printed page by page — and the caller the command line
//! acts as (`--caller`).

use std::io::Write;

use dispenser::history::{HistoryEntry, MAX_HISTORY_PAGE};
use dispenser::{Dispenser, error::Kind};
use serde_json::Value;

use crate::args::whole;
use crate::exit::Outcome;
use crate::output::{io_err, one_line_name};

/// `dispenser history`, `queue history`, `gapless history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// Whose history: for `history`, a sequence (a striped sequence with its stripes; a
    /// stripe ids~3 or a scope t@k alone); for `queue history` a queue, for `gapless history`
    /// a gap-free sequence.
    pub name: String,
    /// Only operations from then on: a time (2026-11-26T08:00:00Z), a date (2026-11-26, from
    /// midnight UTC) or a time ago (90m, 12h, 7d, -7d).
    #[arg(long, value_name = "WHEN", value_parser = parse_since, allow_hyphen_values = true)]
    pub since: Option<jiff::Timestamp>,
    /// At most this many operations, the oldest first [default: all].
    #[arg(long, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub limit: Option<usize>,
    /// Print JSON (one array).
    #[arg(long)]
    pub json: bool,
}

/// `--since`: an RFC 3339 time, a date (midnight UTC) or a span back from now (`7d`, or
/// `-7d`: a span is always back from now).
pub fn parse_since(s: &str) -> Result<jiff::Timestamp, String> {
    let utc = jiff::tz::TimeZone::UTC;
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    if let Ok(date) = s.parse::<jiff::civil::Date>() {
        return date
            .to_zoned(utc)
            .map(|z| z.timestamp())
            .map_err(|e| format!("{s:?}: {e}"));
    }
    let out_of_range = || {
        format!(
            "{s:?} is out of range: a time ago reaches back at most to {}, the earliest time \
             there is (about {} years); give a shorter span or a date",
            jiff::Timestamp::MIN
                .to_string()
                .split('T')
                .next()
                .unwrap_or_default(),
            (jiff::Timestamp::now().as_second() - jiff::Timestamp::MIN.as_second())
                / (365 * 86_400)
        )
    };
    match s.parse::<jiff::Span>() {
        Ok(span) => jiff::Timestamp::now()
            .to_zoned(utc)
            .checked_sub(span.abs())
            .map(|z| z.timestamp())
            .map_err(|_| out_of_range()),
        // Digits and units that do not fit a span (`1000000y`): a time ago, too far back.
        Err(_) if looks_like_a_span(s) => Err(out_of_range()),
        Err(_) => Err(format!(
            "{s:?} is not a time (2026-11-26T08:00:00Z), a date (2026-11-26) or a time ago (90m, 12h, 7d)"
        )),
    }
}

/// Whether `s` has the shape of a time ago — an optional sign, then numbers each followed by
/// a unit (`7d`, `-1000000y`, `2h 30m`) — whatever its size.
fn looks_like_a_span(s: &str) -> bool {
    let body = s.trim().trim_start_matches(['-', '+']).trim_start();
    body.starts_with(|c: char| c.is_ascii_digit())
        && body.chars().any(|c| c.is_ascii_alphabetic())
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | ',' | '.'))
}

/// The user and host the command line acts as when neither `--caller` nor
/// `DISPENSER_CALLER` names one: `USER@HOST` (printable ASCII, at most 128 characters).
pub fn default_caller() -> String {
    let user = ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{user}@{host}")
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .take(dispenser::sequence::MAX_CALLER)
        .collect()
}

/// Prints the history page by page as the pages arrive (one page in memory at a time), so
/// a long history starts printing at once and never has to fit in memory.
pub async fn run(
    d: &Dispenser,
    kind: Kind,
    a: HistoryArgs,
    out: &mut impl Write,
) -> dispenser::Result<Outcome> {
    let mut query = d.history(kind, &a.name);
    if let Some(since) = a.since {
        query = query.since(since);
    }
    let wanted = a.limit.unwrap_or(usize::MAX);
    let mut printed = 0_usize;
    if a.json {
        write!(out, "[").map_err(io_err)?;
    }
    loop {
        let page = wanted.saturating_sub(printed).min(MAX_HISTORY_PAGE);
        if page == 0 {
            break;
        }
        let got = query.clone().limit(page).await?;
        for e in &got {
            if a.json {
                let comma = if printed == 0 { "" } else { "," };
                write!(out, "{comma}{}", e.to_json()).map_err(io_err)?;
            } else {
                writeln!(out, "{}", describe(e)).map_err(io_err)?;
            }
            printed += 1;
        }
        out.flush().map_err(io_err)?;
        match got.last() {
            Some(last) if got.len() == page => query = query.after(last.cursor()),
            _ => break,
        }
    }
    if a.json {
        writeln!(out, "]").map_err(io_err)?;
    } else if printed == 0 {
        let o = d.options();
        eprintln!(
            "dispenser: no history of {kind} {:?} in {}.{}_history",
            a.name, o.database, o.collection
        );
    }
    out.flush().map_err(io_err)?;
    Ok(Outcome::Done)
}

/// One entry as one line: when, what, who, how it ended, the parameters and what changed.
pub fn describe(e: &HistoryEntry) -> String {
    let mut line = format!(
        "{at} {name} {op} by {who}: {outcome}",
        at = e.at,
        name = one_line_name(&e.name),
        op = e.op,
        who = e
            .who
            .as_deref()
            .map_or("(no caller)".to_owned(), one_line_name),
        outcome = e.outcome.as_str(),
    );
    if let Some(reason) = e.outcome.reason() {
        line.push_str(&format!(" ({})", one_line_name(reason)));
    }
    if e.client_clock {
        line.push_str(" [client clock]");
    }
    if e.params.as_object().is_some_and(|p| !p.is_empty()) {
        line.push_str(&format!("; {}", e.params));
    }
    match (&e.before, &e.after) {
        (Some(b), Some(a)) => line.push_str(&format!("; {}", changes(b, a))),
        (None, Some(a)) => line.push_str(&format!("; after {a}")),
        (Some(b), None) => line.push_str(&format!("; before {b}")),
        (None, None) => {}
    }
    line
}

/// What differs between two states: `key old -> new`, by key.
fn changes(before: &Value, after: &Value) -> String {
    let (Some(b), Some(a)) = (before.as_object(), after.as_object()) else {
        return format!("before {before} after {after}");
    };
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    let moved: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let (old, new) = (
                b.get(k).unwrap_or(&Value::Null),
                a.get(k).unwrap_or(&Value::Null),
            );
            (old != new).then(|| format!("{k} {old} -> {new}"))
        })
        .collect();
    if moved.is_empty() {
        "nothing changed".to_owned()
    } else {
        moved.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_times_dates_and_times_ago() {
        let t = parse_since("2026-11-26T08:00:00Z").unwrap();
        assert_eq!(t.to_string(), "2026-11-26T08:00:00Z");
        assert_eq!(
            parse_since("2026-11-26").unwrap().to_string(),
            "2026-11-26T00:00:00Z"
        );
        let ago = jiff::Timestamp::now() - parse_since("2h").unwrap();
        assert!((ago.get_seconds() - 7200).abs() <= 5, "{ago:?}");
        let week = jiff::Timestamp::now() - parse_since("7d").unwrap();
        assert!((week.get_seconds() - 7 * 86_400).abs() <= 5, "{week:?}");
        let e = parse_since("yesterday-ish").unwrap_err();
        assert!(
            e.contains("yesterday-ish") && e.contains("not a time"),
            "{e}"
        );
        // A span is back from now, with or without its sign.
        let week = jiff::Timestamp::now() - parse_since("-7d").unwrap();
        assert!((week.get_seconds() - 7 * 86_400).abs() <= 5, "{week:?}");
        // Too far back: out of range, with the range; not "not a time".
        for far in ["1000000y", "-1000000y", "5000000d", "20000y"] {
            let e = parse_since(far).unwrap_err();
            assert!(
                e.contains("out of range") && e.contains("-009999"),
                "{far}: {e}"
            );
        }
    }

    #[test]
    fn the_default_caller_is_printable_ascii() {
        let c = default_caller();
        assert!(c.contains('@') && (1..=128).contains(&c.len()), "{c}");
        assert!(c.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{c}");
    }

    #[test]
    fn changes_name_what_moved() {
        let b = serde_json::json!({ "value": 9, "max": 99, "version": 4 });
        let a = serde_json::json!({ "value": 4, "max": 99, "version": 5 });
        assert_eq!(changes(&b, &a), "value 9 -> 4, version 4 -> 5");
        assert_eq!(changes(&b, &b), "nothing changed");
    }
}
