//! What a run measured: latencies and numbers ([`Sample`]), and the figures reported
//! ([`Report`]: percentiles, rates, duplicates).

use dispenser::sequence::Stats;
use serde::{Deserialize, Serialize};

use super::args::BenchArgs;
use super::sources::Kind;

/// What a process measured (also the worker's JSON report).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Sample {
    pub(super) numbers: Vec<i64>,
    /// The latencies of the timed calls: every call, or a sample (see `workers::draw`).
    pub(super) latencies_ns: Vec<u64>,
    /// Calls that returned a number smaller than one returned before they began (checked
    /// within one process, for runs where every call is a round trip; `None` otherwise).
    #[serde(default)]
    pub(super) order_violations: Option<u64>,
    pub(super) elapsed_s: f64,
    /// Whether the source counted its writes, conflicts and round trips (a queue does not).
    #[serde(default)]
    pub(super) counted: bool,
    #[serde(default)]
    pub(super) writes: u64,
    pub(super) round_trips: u64,
    pub(super) conflicts: u64,
    pub(super) retries: u64,
    pub(super) refills: u64,
    pub(super) waits: u64,
    pub(super) errors: u64,
}

impl Sample {
    /// Takes the counters of an in-process source (they cover every round).
    pub(super) fn set_stats(&mut self, stats: Option<Stats>) {
        if let Some(st) = stats {
            self.counted = true;
            self.writes = st.writes;
            self.round_trips = st.round_trips;
            self.conflicts = st.conflicts;
            self.retries = st.retries;
            self.refills = st.block_refills;
            self.waits = st.waits;
        }
    }

    /// Adds a later round: the elapsed times add up.
    pub(super) fn append_round(&mut self, other: Sample) {
        let elapsed = self.elapsed_s + other.elapsed_s;
        self.merge(other);
        self.elapsed_s = elapsed;
    }

    /// Adds a sample taken at the same time (another process): the longer time counts.
    pub(super) fn merge(&mut self, other: Sample) {
        self.numbers.extend(other.numbers);
        self.latencies_ns.extend(other.latencies_ns);
        self.order_violations = match (self.order_violations, other.order_violations) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        self.counted |= other.counted;
        self.writes += other.writes;
        self.round_trips += other.round_trips;
        self.conflicts += other.conflicts;
        self.retries += other.retries;
        self.refills += other.refills;
        self.waits += other.waits;
        self.errors += other.errors;
    }
}

/// The figures of one run; its JSON keys are [`RUN_KEYS`].
#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub(super) run: String,
    /// Whether this run draws as an application with `Options::default()` does.
    #[serde(rename = "default")]
    pub(super) is_default: bool,
    /// Whether concurrent calls shared writes (`--coalesce`; raw runs: false).
    pub(super) coalesce: bool,
    pub(super) processes: u32,
    pub(super) tasks: u32,
    pub(super) numbers: usize,
    pub(super) seconds: f64,
    pub(super) numbers_per_s: f64,
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    pub(super) max_us: f64,
    /// How many calls the percentiles come from (every call, or a sample with blocks).
    pub(super) timed_calls: usize,
    /// Database writes per number (`null` where not counted: a queue's take).
    pub(super) writes_per_number: Option<f64>,
    /// Database round trips per number (`null` where not counted).
    pub(super) round_trips_per_number: Option<f64>,
    /// Writes that lost a race, per number (`null` where not counted).
    pub(super) conflicts_per_number: Option<f64>,
    pub(super) retries_per_number: Option<f64>,
    pub(super) block_refills: u64,
    pub(super) block_waits: u64,
    pub(super) errors: u64,
    pub(super) duplicates: usize,
    /// Linearizability check (runs without blocks; `null` with blocks): calls that returned
    /// a number smaller than one another call of the same process returned before they began.
    pub(super) order_violations: Option<u64>,
    /// Ratios to the raw call of the same run this run is compared with (its
    /// [`Kind::baseline`]): numbers per second, p50, p99.
    pub(super) throughput_vs_raw: Option<f64>,
    pub(super) p50_vs_raw: Option<f64>,
    pub(super) p99_vs_raw: Option<f64>,
    /// What this run is compared with (`null` when that raw call did not run).
    pub(super) compared_with: Option<String>,
    /// The round trip the database was put at with `--rtt` (milliseconds asked; `null`
    /// without it).
    pub(super) rtt_ms: Option<f64>,
}

/// The keys of one run in `bench --json` (`runs[]`), as documented in the guide's benchmarks chapter (the tests
/// hold [`Report`]'s JSON to them).
#[cfg(test)]
pub(super) const RUN_KEYS: &[&str] = &[
    "run",
    "default",
    "coalesce",
    "processes",
    "tasks",
    "numbers",
    "seconds",
    "numbers_per_s",
    "p50_us",
    "p99_us",
    "max_us",
    "timed_calls",
    "writes_per_number",
    "round_trips_per_number",
    "conflicts_per_number",
    "retries_per_number",
    "block_refills",
    "block_waits",
    "errors",
    "duplicates",
    "order_violations",
    "throughput_vs_raw",
    "p50_vs_raw",
    "p99_vs_raw",
    "compared_with",
    "rtt_ms",
];

pub(super) fn percentile(sorted: &[u64], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = (sorted.len() * p / 100).min(sorted.len() - 1);
    sorted[i] as f64 / 1000.0
}

pub(super) fn report(kind: &Kind, args: &BenchArgs, mut s: Sample) -> Report {
    s.latencies_ns.sort_unstable();
    s.numbers.sort_unstable();
    let duplicates = s.numbers.windows(2).filter(|w| w[0] == w[1]).count();
    let n = s.numbers.len();
    // The raw calls are one write and one round trip per number, and never conflict.
    if matches!(kind, Kind::Raw | Kind::RawShaped | Kind::RawInsert) {
        s.counted = true;
        s.writes = n as u64;
        s.round_trips = n as u64;
    }
    let per = |x: u64| {
        s.counted
            .then(|| if n == 0 { 0.0 } else { x as f64 / n as f64 })
    };
    Report {
        run: kind.label(),
        is_default: kind.is_library_default(),
        coalesce: kind.coalesce(),
        processes: args.processes,
        tasks: args.tasks,
        numbers: n,
        seconds: s.elapsed_s,
        numbers_per_s: if s.elapsed_s > 0.0 {
            n as f64 / s.elapsed_s
        } else {
            0.0
        },
        p50_us: percentile(&s.latencies_ns, 50),
        p99_us: percentile(&s.latencies_ns, 99),
        max_us: s.latencies_ns.last().map_or(0.0, |v| *v as f64 / 1000.0),
        timed_calls: s.latencies_ns.len(),
        writes_per_number: per(s.writes),
        round_trips_per_number: per(s.round_trips),
        conflicts_per_number: per(s.conflicts),
        retries_per_number: per(s.retries),
        block_refills: s.refills,
        block_waits: s.waits,
        errors: s.errors,
        duplicates,
        order_violations: s.order_violations,
        throughput_vs_raw: None,
        p50_vs_raw: None,
        p99_vs_raw: None,
        compared_with: None,
        rtt_ms: args.rtt,
    }
}

/// Sets each report's ratios to the raw call it is compared with, when that ran too.
pub(super) fn set_ratios(kinds: &[Kind], reports: &mut [Report]) {
    let figures: Vec<(String, f64, f64, f64)> = reports
        .iter()
        .map(|r| (r.run.clone(), r.numbers_per_s, r.p50_us, r.p99_us))
        .collect();
    for (kind, r) in kinds.iter().zip(reports) {
        let base = kind.baseline().label();
        let Some((_, thr, p50, p99)) = figures.iter().find(|f| f.0 == base) else {
            continue;
        };
        r.compared_with = Some(base);
        r.throughput_vs_raw = (*thr > 0.0).then(|| r.numbers_per_s / thr);
        r.p50_vs_raw = (*p50 > 0.0).then(|| r.p50_us / p50);
        r.p99_vs_raw = (*p99 > 0.0).then(|| r.p99_us / p99);
    }
}

/// One call of a run without blocks: when it began and returned (ns since the run's start, in
/// this process) and the number it returned.
#[derive(Clone, Copy, Debug)]
pub(super) struct Call {
    pub(super) invoked_ns: u64,
    pub(super) returned_ns: u64,
    pub(super) number: i64,
}

/// Counts the calls that returned a number smaller than one returned by a call that had
/// already returned when they began: for an ascending sequence, each is a linearizability
/// violation (real-time order broken). Calls that overlap may return in any order.
pub(super) fn order_violations(calls: &[Call]) -> u64 {
    let mut by_invoke: Vec<&Call> = calls.iter().collect();
    by_invoke.sort_unstable_by_key(|c| c.invoked_ns);
    let mut by_return: Vec<&Call> = calls.iter().collect();
    by_return.sort_unstable_by_key(|c| c.returned_ns);
    let mut returned = by_return.iter().peekable();
    let mut highest_returned = i64::MIN;
    let mut violations = 0;
    for call in by_invoke {
        while let Some(done) = returned.next_if(|d| d.returned_ns < call.invoked_ns) {
            highest_returned = highest_returned.max(done.number);
        }
        if call.number < highest_returned {
            violations += 1;
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(invoked_ns: u64, returned_ns: u64, number: i64) -> Call {
        Call {
            invoked_ns,
            returned_ns,
            number,
        }
    }

    #[test]
    fn overlapping_calls_may_return_in_any_order() {
        // 0..10 and 5..15 overlap: either may hold the smaller number.
        let calls = [call(0, 10, 2), call(5, 15, 1), call(20, 30, 3)];
        assert_eq!(order_violations(&calls), 0);
    }

    #[test]
    fn a_smaller_number_after_a_return_is_a_violation() {
        // The second call began after the first returned 5, and got 4.
        let calls = [
            call(0, 10, 5),
            call(11, 20, 4),
            call(21, 30, 6),
            call(31, 40, 1),
        ];
        assert_eq!(order_violations(&calls), 2);
        assert_eq!(order_violations(&[]), 0);
    }

    #[test]
    fn rounds_and_processes_add_their_violations() {
        let mut total = Sample::default();
        total.merge(Sample {
            order_violations: Some(1),
            ..Sample::default()
        });
        total.append_round(Sample {
            order_violations: Some(2),
            ..Sample::default()
        });
        total.merge(Sample::default());
        assert_eq!(total.order_violations, Some(3));
    }
}
