//! How fast a sequence is used and when it runs out: the data for exhaustion alerts.
//!
//! The numbers a handle issues are added to a per-day counter in the document
//! (`issued: {"2026-11-22": 1234, …}`, days in UTC) by its own draws — one more update path in
//! a write it makes anyway, never another round trip. Each update path costs the server time
//! on the hot path, so a handle does not carry its count on every write: it keeps a
//! [`Pending`] count and carries it (with `updated_at`) on its first write and then on the
//! first write at least [`CARRY_EVERY`] after the last carried one; a handle dropped with a
//! count pending adds it in a write of its own. A dispenser's first write of each day also
//! removes the counters older than [`KEPT_DAYS`] days. A give-back subtracts what it returns.
//! So the observed rate over the last week is in the document itself, and a cron job can
//! forecast exhaustion with one read.

use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use jiff::Timestamp;
use jiff::civil::Date;

use crate::arith;
use crate::document::{SequenceState, field};

/// How many days of counters a document keeps (today included).
pub const KEPT_DAYS: i64 = 8;

/// The field holding the per-day counters.
const ISSUED: &str = field::ISSUED;

fn today(now: Timestamp) -> Date {
    now.to_zoned(jiff::tz::TimeZone::UTC).date()
}

/// Adds `n` issued numbers to today's counter in `update` (its `$inc`); with `prune`, also
/// removes the counters of the [`KEPT_DAYS`] days before the oldest kept one (its `$unset`).
///
/// Callers prune on their first write of a day, not on every write: each update operator
/// costs the server time on the hot path (measured: the `$unset` alone was about 6 % of an
/// uncontended draw), and a counter left a day longer changes no forecast (the rate only
/// reads the kept days).
pub(crate) fn tally(update: &mut Document, n: i64, now: Timestamp, prune: bool) {
    if n == 0 {
        return;
    }
    let day = today(now);
    let key = format!("{ISSUED}.{day}");
    match update.get_mut("$inc") {
        Some(Bson::Document(inc)) => {
            inc.insert(key, n);
        }
        _ => {
            update.insert("$inc", doc! { key: n });
        }
    }
    if !prune {
        return;
    }
    for back in KEPT_DAYS..2 * KEPT_DAYS {
        let Ok(old) = day.checked_sub(jiff::Span::new().days(back)) else {
            break;
        };
        let stale = format!("{ISSUED}.{old}");
        match update.get_mut("$unset") {
            Some(Bson::Document(unset)) => {
                unset.insert(stale, "");
            }
            _ => {
                update.insert("$unset", doc! { stale: "" });
            }
        }
    }
}

/// How long a handle may keep issued numbers out of the document's counters (and its
/// `updated_at` behind its last draw).
pub(crate) const CARRY_EVERY: Duration = Duration::from_secs(1);

/// The numbers one handle issued that the document's counters do not show yet.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    count: i64,
    /// When a write last carried the count; `None`: the next write carries it.
    carried_at: Option<Instant>,
}

impl Pending {
    /// Before a write that issues `n` numbers: the count that write carries (everything
    /// pending, `n` included) when a carry is due, else `None` (`n` stays pending).
    pub(crate) fn carry(&mut self, n: i64, now: Instant) -> Option<i64> {
        self.count = self.count.saturating_add(n);
        let due = self
            .carried_at
            .is_none_or(|t| now.saturating_duration_since(t) >= CARRY_EVERY);
        if !due {
            return None;
        }
        self.carried_at = Some(now);
        Some(std::mem::take(&mut self.count))
    }

    /// The write prepared by [`Pending::carry`] did not happen (a lost race, a filter that
    /// did not match): its `n` numbers were not issued, and what it carried is pending again,
    /// due on the next write.
    pub(crate) fn unsent(&mut self, n: i64, carried: Option<i64>) {
        self.count = self
            .count
            .saturating_add(carried.unwrap_or(0))
            .saturating_sub(n);
        if carried.is_some() {
            self.carried_at = None;
        }
    }

    /// Everything pending, for a last write of its own (the handle is going away).
    pub(crate) fn take(&mut self) -> i64 {
        std::mem::take(&mut self.count)
    }
}

/// The UTC day of `now`, as a number (for "first write of the day").
pub(crate) fn day_number(now: Timestamp) -> i64 {
    now.as_second().div_euclid(86_400)
}

/// Where a sequence stands and where it is going.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// let usage = d.peek("orders").await?.usage(jiff::Timestamp::now());
/// if let Some(left) = usage.exhausted_in {
///     println!("{:.1}% used; runs out in {} days", usage.fraction_used * 100.0, left.as_secs() / 86_400);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Usage {
    /// The share of the sequence's numbers (from its start, or its lower bound, to its far
    /// bound) already issued, 0.0–1.0; for a cyclic sequence, of the current cycle.
    pub fraction_used: f64,
    /// Numbers left before the bound (or the wrap).
    pub remaining: u64,
    /// Numbers issued per second over the counted days (up to [`KEPT_DAYS`]), if any were
    /// counted.
    pub rate_per_sec: Option<f64>,
    /// For a non-cyclic sequence with a rate: when it runs out at that rate.
    pub exhausted_in: Option<Duration>,
    /// For a cyclic sequence with a rate: how many times a day it wraps.
    pub wraps_per_day: Option<f64>,
    /// How long the rate was observed over: from the start of the oldest counted day (or the
    /// creation, if later) to `now`. A rate seen over seconds is a burst, not a trend:
    /// `dispenser check` forecasts only from a history of at least `--min-history` (1 h by
    /// default).
    pub history: Option<Duration>,
}

impl SequenceState {
    /// Usage and forecast at `now` (see [`Usage`]).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let usage = d.peek("orders").await?.usage(jiff::Timestamp::now());
    /// println!("{} left", usage.remaining);
    /// # Ok(()) }
    /// ```
    pub fn usage(&self, now: Timestamp) -> Usage {
        let spec = self.spec();
        let remaining = arith::remaining(&spec, self.value);
        // The whole range: from the first number (start, or the near bound) to the far bound.
        let near = if self.cycle { None } else { self.start }.unwrap_or(if self.step > 0 {
            self.min
        } else {
            self.max
        });
        let total = arith::remaining(&spec, near.saturating_sub(self.step)).max(1);
        let fraction_used = (1.0 - remaining as f64 / total as f64).clamp(0.0, 1.0);
        let history = self.history(now);
        let rate_per_sec = history.and_then(|h| self.rate(h));
        let exhausted_in = match (self.cycle, rate_per_sec) {
            (false, Some(r)) if r > 0.0 => {
                Some(Duration::from_secs_f64((remaining as f64 / r).min(1e15)))
            }
            _ => None,
        };
        let wraps_per_day = match (self.cycle, rate_per_sec) {
            (true, Some(r)) => Some(r * 86_400.0 / total as f64),
            _ => None,
        };
        Usage {
            fraction_used,
            remaining,
            rate_per_sec,
            exhausted_in,
            wraps_per_day,
            history,
        }
    }

    /// The time the counters cover: from the start of the oldest counted day (or the
    /// creation, if later) to `now`; `None` when nothing was counted.
    fn history(&self, now: Timestamp) -> Option<Duration> {
        let (first_day, _) = *self.issued_by_day.first()?;
        let day_start = first_day
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp();
        let created = Timestamp::from_millisecond(self.created_at.timestamp_millis()).ok()?;
        let from = day_start.max(created);
        Duration::try_from(now.duration_since(from)).ok()
    }

    /// Numbers per second over the counted days: their sum over `history`.
    fn rate(&self, history: Duration) -> Option<f64> {
        let total: i64 = self.issued_by_day.iter().map(|(_, n)| n).sum();
        let secs = history.as_secs_f64();
        (secs > 0.0).then(|| total.max(0) as f64 / secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_counts_are_carried_first_then_at_most_once_a_second() {
        let t0 = Instant::now();
        let mut p = Pending::default();
        assert_eq!(p.carry(3, t0), Some(3), "the first write carries");
        assert_eq!(p.carry(2, t0 + Duration::from_millis(10)), None);
        assert_eq!(p.carry(4, t0 + Duration::from_millis(500)), None);
        assert_eq!(
            p.carry(1, t0 + CARRY_EVERY),
            Some(7),
            "a second later everything pending goes out"
        );
        // A write that carried and lost: its own number is not issued, the rest is due again.
        let t1 = t0 + CARRY_EVERY + Duration::from_millis(1);
        assert_eq!(p.carry(5, t1), None);
        let carried = p.carry(6, t1 + CARRY_EVERY);
        assert_eq!(carried, Some(11));
        p.unsent(6, carried);
        assert_eq!(
            p.carry(2, t1 + CARRY_EVERY),
            Some(7),
            "due at once after a lost carry"
        );
        // A lost write that carried nothing just forgets its numbers.
        assert_eq!(p.carry(8, t1 + CARRY_EVERY), None);
        p.unsent(8, None);
        assert_eq!(p.take(), 0);
        assert_eq!(p.carry(1, t1 + 3 * CARRY_EVERY), Some(1));
    }

    #[test]
    fn tally_adds_today_and_prunes_only_when_asked() {
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let mut u = doc! { "$inc": { "version": 1_i64 } };
        tally(&mut u, 5, now, true);
        assert_eq!(
            u,
            doc! {
                "$inc": { "version": 1_i64, "issued.2026-11-22": 5_i64 },
                "$unset": {
                    "issued.2026-11-14": "", "issued.2026-11-13": "", "issued.2026-11-12": "",
                    "issued.2026-11-11": "", "issued.2026-11-10": "", "issued.2026-11-09": "",
                    "issued.2026-11-08": "", "issued.2026-11-07": "",
                },
            }
        );
        let mut hot = doc! { "$inc": { "version": 1_i64 } };
        tally(&mut hot, 5, now, false);
        assert_eq!(
            hot,
            doc! { "$inc": { "version": 1_i64, "issued.2026-11-22": 5_i64 } }
        );
        let mut none = doc! {};
        tally(&mut none, 0, now, true);
        assert!(none.is_empty());
        assert_eq!(
            day_number(now),
            day_number("2026-11-22T23:59:59Z".parse().unwrap())
        );
        assert_eq!(
            day_number(now) + 1,
            day_number("2026-11-23T00:00:00Z".parse().unwrap())
        );
    }

    fn state(
        days: Vec<(&str, i64)>,
        value: i64,
        max: i64,
        cycle: bool,
        created: &str,
    ) -> SequenceState {
        let created: Timestamp = created.parse().unwrap();
        SequenceState {
            name: "s".into(),
            value,
            step: 1,
            min: 0,
            max,
            cycle,
            version: 1,
            cycles: 0,
            created_at: bson::DateTime::from_millis(created.as_millisecond()),
            updated_at: bson::DateTime::from_millis(created.as_millisecond()),
            format: None,
            start: Some(1),
            stripe: None,
            incarnation: None,
            issued_by_day: days
                .into_iter()
                .map(|(d, n)| (d.parse().unwrap(), n))
                .collect(),
        }
    }

    #[test]
    fn a_known_rate_is_forecast_within_one_percent() {
        // 172 800 numbers over exactly two days: 1 per second; 10 000 left.
        let s = state(
            vec![("2026-11-20", 86_400), ("2026-11-21", 86_400)],
            172_800,
            182_800,
            false,
            "2026-11-01T00:00:00Z",
        );
        let now: Timestamp = "2026-11-22T00:00:00Z".parse().unwrap();
        let u = s.usage(now);
        let rate = u.rate_per_sec.unwrap();
        assert!((rate - 1.0).abs() < 0.01, "{rate}");
        let left = u.exhausted_in.unwrap().as_secs_f64();
        assert!((left - 10_000.0).abs() < 100.0, "{left}");
        assert!((u.fraction_used - 172_800.0 / 182_800.0).abs() < 1e-9);
        // Created half-way through the first counted day: the rate counts from creation.
        let s = state(
            vec![("2026-11-21", 43_200)],
            43_200,
            1_000_000,
            false,
            "2026-11-21T12:00:00Z",
        );
        let r = s.usage(now).rate_per_sec.unwrap();
        assert!((r - 1.0).abs() < 0.01, "{r}");
    }

    #[test]
    fn cyclic_sequences_never_run_out_and_report_wraps() {
        let s = state(
            vec![("2026-11-21", 86_400)],
            5,
            99,
            true,
            "2026-11-01T00:00:00Z",
        );
        let u = s.usage("2026-11-22T00:00:00Z".parse().unwrap());
        assert_eq!(u.exhausted_in, None);
        let wraps = u.wraps_per_day.unwrap();
        assert!((wraps - 864.0).abs() < 1.0, "{wraps}"); // 86 400 a day over 100 values
        // No counters: no rate, no forecast.
        let s = state(vec![], 5, 99, false, "2026-11-01T00:00:00Z");
        let u = s.usage("2026-11-22T00:00:00Z".parse().unwrap());
        assert_eq!((u.rate_per_sec, u.exhausted_in), (None, None));
    }

    #[test]
    fn counters_decode_and_bad_entries_are_ignored() {
        let d = doc! { "issued": { "2026-11-21": 3_i64, "2026-11-20": 2_i32, "x": 1_i64, "2026-11-22": "no" } };
        let days = crate::document::decode_issued(&d);
        assert_eq!(days.len(), 2);
        assert_eq!(days[0].1, 2);
    }
}
