//! What a run measured: latencies and numbers ([`Sample`]), and the figures reported
//! ([`Report`]: percentiles, rates, duplicates).

use dispenser::Stats;
use serde::{Deserialize, Serialize};

use super::sources::Kind;
use crate::cli::BenchArgs;

/// What a process measured (also the worker's JSON report).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Sample {
    pub(super) numbers: Vec<i64>,
    pub(super) latencies_ns: Vec<u64>,
    pub(super) elapsed_s: f64,
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
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        self.round_trips += other.round_trips;
        self.conflicts += other.conflicts;
        self.retries += other.retries;
        self.refills += other.refills;
        self.waits += other.waits;
        self.errors += other.errors;
    }
}

/// The figures of one run.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub(super) run: String,
    pub(super) processes: u32,
    pub(super) tasks: u32,
    pub(super) numbers: usize,
    pub(super) seconds: f64,
    pub(super) numbers_per_s: f64,
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    pub(super) max_us: f64,
    pub(super) round_trips_per_number: f64,
    pub(super) conflicts_per_number: f64,
    pub(super) retries_per_number: f64,
    pub(super) block_refills: u64,
    pub(super) block_waits: u64,
    pub(super) errors: u64,
    pub(super) duplicates: usize,
    pub(super) throughput_vs_raw: Option<f64>,
    pub(super) p50_vs_raw: Option<f64>,
}

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
    let per = |x: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    let round_trips = if matches!(kind, Kind::Raw | Kind::RawShaped) {
        n as u64
    } else {
        s.round_trips
    };
    Report {
        run: kind.label(),
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
        round_trips_per_number: per(round_trips),
        conflicts_per_number: per(s.conflicts),
        retries_per_number: per(s.retries),
        block_refills: s.refills,
        block_waits: s.waits,
        errors: s.errors,
        duplicates,
        throughput_vs_raw: None,
        p50_vs_raw: None,
    }
}
