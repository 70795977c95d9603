//! The metrics the service keeps for its whole life (numbers issued per sequence, requests
//! by status, request latency) and the label types of every series; `scrape.rs` builds the
//! `/metrics` answer from them.
//!
//! Label values are escaped as the exposition format says (`\\`, `\"`, `\n`), so any name a
//! sequence may have keeps the scrape readable (`prometheus-client` writes them as given).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dispenser::queue::CallEntry;
use prometheus_client::encoding::{
    EncodeLabelValue, EncodeMetric, LabelValueEncoder, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};

/// A label value, escaped when written: `\` as `\\`, `"` as `\"`, a line feed as `\n`.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(super) struct Escaped(pub(super) String);

impl EncodeLabelValue for Escaped {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// A metric's labels: `sequence` (and for some, `cycle`), or `status`.
pub(super) type Labels = Vec<(&'static str, Escaped)>;

/// A float gauge.
pub(super) type FGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The request latency histogram's buckets, in seconds.
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// How many hours of numbers issued per hour the service keeps, per sequence.
pub(super) const HOURS_KEPT: u64 = 24;

/// Numbers handed out from one sequence: in all, and in each of the last [`HOURS_KEPT`]
/// hours (by hour since the Unix epoch; hours without any are not kept). A draw counts
/// without a lock: the current hour and its count share one word, so that a count never
/// lands in another hour; the lock is taken once an hour, to move the hour before to `past`.
#[derive(Debug, Default)]
pub(super) struct Issued {
    total: AtomicU64,
    /// The current hour (above [`COUNT_BITS`]) and its count (the low [`COUNT_BITS`] bits).
    current: AtomicU64,
    /// The hours before, with their counts, oldest first (an hour may be listed more than
    /// once when its count passed [`COUNT_BITS`] bits).
    past: Mutex<VecDeque<(u64, u64)>>,
}

/// The bits of [`Issued::current`] that count (the hours since the epoch fit in the other
/// 24 until the year 3800).
const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

impl Issued {
    /// Counts `n` numbers handed out now.
    pub(super) fn add(&self, n: u64) {
        self.add_at(hour_now(), n);
    }

    fn add_at(&self, hour: u64, n: u64) {
        self.total.fetch_add(n, Ordering::Relaxed);
        let fits = |word: u64| {
            // An earlier hour than the word's (the clock went back) counts in the word's.
            word >> COUNT_BITS >= hour && (word & COUNT_MASK) + n <= COUNT_MASK
        };
        let mut word = self.current.load(Ordering::Relaxed);
        while fits(word) {
            match self.current.compare_exchange_weak(
                word,
                word + n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => word = now,
            }
        }
        // A new hour (or a full count): the word moves to `past`, under the lock.
        let mut past = self.past.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let word = self.current.load(Ordering::Relaxed);
            let fresh = if fits(word) {
                word + n
            } else {
                (hour.max(word >> COUNT_BITS) << COUNT_BITS) | n.min(COUNT_MASK)
            };
            if self
                .current
                .compare_exchange(word, fresh, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            if !fits(word) && word & COUNT_MASK > 0 {
                past.push_back((word >> COUNT_BITS, word & COUNT_MASK));
            }
            while past.front().is_some_and(|(h, _)| h + HOURS_KEPT <= hour) {
                past.pop_front();
            }
            return;
        }
    }

    fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The counts of the hours from `first` to `last`, each hour listed (0 when none).
    fn per_hour(&self, first: u64, last: u64) -> Vec<(u64, u64)> {
        let past = self.past.lock().unwrap_or_else(|p| p.into_inner());
        let word = self.current.load(Ordering::Relaxed);
        let current = [(word >> COUNT_BITS, word & COUNT_MASK)];
        (first..=last)
            .map(|h| {
                let n = past
                    .iter()
                    .chain(&current)
                    .filter(|(k, _)| *k == h)
                    .map(|(_, n)| n)
                    .sum();
                (h, n)
            })
            .collect()
    }
}

/// How long requests take, as a Prometheus histogram that a request adds to without a lock
/// (prometheus-client's `Histogram` takes a write lock per observation, which every request
/// of both cores met on): one counter per bucket and the sum in nanoseconds.
#[derive(Clone, Debug, Default)]
pub(super) struct Latency(Arc<LatencyInner>);

#[derive(Debug, Default)]
struct LatencyInner {
    /// Observations per bucket of [`BUCKETS`], and past the last (`+Inf`).
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Latency {
    pub(super) fn observe(&self, took: std::time::Duration) {
        let secs = took.as_secs_f64();
        let i = BUCKETS.partition_point(|b| *b < secs);
        self.0.buckets[i].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.0.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

impl TypedMetric for Latency {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let counts: Vec<u64> = self
            .0
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let bounds = BUCKETS.iter().copied().chain([f64::MAX]);
        let buckets: Vec<(f64, u64)> = bounds.zip(counts.iter().copied()).collect();
        let sum = self.0.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, counts.iter().sum(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The current hour, counted from the Unix epoch.
fn hour_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 3600)
}

/// The buckets of the queues' wait histogram, in seconds (30 s to 2 h).
const WAIT_BUCKETS: [f64; 11] = [
    30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0, 7200.0,
];

fn wait_histogram() -> Histogram {
    Histogram::new(WAIT_BUCKETS)
}

/// The metrics kept for the life of the service (each a handle onto shared atomics).
pub(super) struct Metrics {
    /// How long each ticket called waited, by queue (observed from the queue documents at
    /// each scrape: every call made since the service started, by any client).
    pub(super) queue_waits: Family<Labels, Histogram, fn() -> Histogram>,
    /// By queue: the time (ms since the epoch) of the newest call already observed.
    queue_seen: Mutex<HashMap<String, i64>>,
    /// When the service started (ms since the epoch): older calls are not observed.
    started_ms: i64,
    /// Numbers handed out, by sequence document.
    issued: Mutex<HashMap<String, Arc<Issued>, foldhash::fast::RandomState>>,
    pub(super) requests: Family<Labels, Counter>,
    /// The series of `requests` for status 200, held so that counting one needs no lookup.
    ok: Counter,
    pub(super) duration: Latency,
}

/// The labels of a queue's series.
pub(super) fn queue(name: &str) -> Labels {
    vec![("queue", Escaped(name.to_owned()))]
}

fn status(code: u16) -> Labels {
    vec![("status", Escaped(code.to_string()))]
}

pub(super) fn sequence(name: &str) -> Labels {
    vec![("sequence", Escaped(name.to_owned()))]
}

impl Metrics {
    pub(super) fn new() -> Self {
        let requests = Family::<Labels, Counter>::default();
        let ok = requests.get_or_create(&status(200)).clone();
        Metrics {
            queue_waits: Family::new_with_constructor(wait_histogram),
            queue_seen: Mutex::new(HashMap::new()),
            started_ms: dispenser::mongodb::bson::DateTime::now().timestamp_millis(),
            issued: Mutex::new(HashMap::default()),
            requests,
            ok,
            duration: Latency::default(),
        }
    }

    /// The count of numbers handed out from sequence `name` (made on first use), for a
    /// caller that counts many times (a slot keeps it).
    pub(super) fn issued_counter(&self, name: &str) -> Arc<Issued> {
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(counter) = issued.get(name) {
            return Arc::clone(counter);
        }
        Arc::clone(issued.entry(name.to_owned()).or_default())
    }

    /// Counts `n` numbers handed out from sequence `name`.
    pub(super) fn issued(&self, name: &str, n: u64) {
        self.issued_counter(name).add(n);
    }

    /// The numbers handed out from each sequence so far, by name.
    pub(super) fn issued_by_sequence(&self) -> Vec<(String, u64)> {
        let issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<(String, u64)> =
            issued.iter().map(|(k, v)| (k.clone(), v.total())).collect();
        out.sort_unstable();
        out
    }

    /// The numbers handed out from `name` in each of the last [`HOURS_KEPT`] hours, oldest
    /// first: `(hour since the Unix epoch, numbers)`, every hour listed (0 when none).
    pub(super) fn issued_per_hour(&self, name: &str) -> Vec<(u64, u64)> {
        let now = hour_now();
        let first = now + 1 - HOURS_KEPT;
        let counter = self
            .issued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        match counter {
            Some(c) => c.per_hour(first, now),
            None => (first..=now).map(|h| (h, 0)).collect(),
        }
    }

    /// Observes the waits of the calls of queue `name` not observed yet (`calls` newest
    /// first, as a queue's status lists them; recalls are not calls).
    pub(super) fn observe_queue_calls(&self, name: &str, calls: &[CallEntry]) {
        let mut seen = self.queue_seen.lock().unwrap_or_else(|p| p.into_inner());
        let last = seen.get(name).copied().unwrap_or(self.started_ms);
        let mut newest = last;
        let histogram = self.queue_waits.get_or_create(&queue(name));
        for call in calls.iter().filter(|c| !c.recall) {
            let at = call.at.timestamp_millis();
            if at <= last {
                continue;
            }
            newest = newest.max(at);
            if let Some(wait) = call.wait {
                histogram.observe(wait.as_secs_f64());
            }
        }
        seen.insert(name.to_owned(), newest);
    }

    /// Forgets the queues not in `kept` (deleted): their series go.
    pub(super) fn keep_queues(&self, kept: &HashSet<String>) {
        let mut seen = self.queue_seen.lock().unwrap_or_else(|p| p.into_inner());
        let gone: Vec<String> = seen
            .keys()
            .filter(|n| !kept.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            seen.remove(&name);
            self.queue_waits.remove(&queue(&name));
        }
    }

    pub(super) fn observe(&self, code: u16, took: std::time::Duration) {
        if code == 200 {
            self.ok.inc();
        } else {
            self.requests.get_or_create(&status(code)).inc();
        }
        self.duration.observe(took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    #[test]
    fn label_values_are_escaped_as_the_exposition_format_says() {
        let family = Family::<Labels, Counter>::default();
        family.get_or_create(&sequence("a\\b\"c\nd")).inc();
        let mut r = Registry::default();
        r.register("x", "x", family);
        let mut out = String::new();
        encode(&mut out, &r).unwrap();
        assert!(out.contains(r#"x_total{sequence="a\\b\"c\nd"} 1"#), "{out}");
    }

    /// Counts from many threads over several hours, one hour's count past 40 bits, and a
    /// clock that went back: every number is counted once, in its hour (a late one in the
    /// hour the count is at), and hours older than a day are dropped.
    #[test]
    fn issued_counts_are_exact_across_hours_and_threads() {
        let c = Issued::default();
        std::thread::scope(|s| {
            for t in 0..4_u64 {
                let c = &c;
                s.spawn(move || {
                    for hour in 100..103 {
                        for _ in 0..1000 {
                            c.add_at(hour, t + 1);
                        }
                    }
                });
            }
        });
        // Each hour: 1000 × (1 + 2 + 3 + 4), though the threads reach the hours at
        // different times (a count for an hour already past goes to the current hour).
        assert_eq!(c.total(), 3 * 10_000);
        let hours = c.per_hour(100, 102);
        assert_eq!(hours.iter().map(|(_, n)| n).sum::<u64>(), 30_000);
        assert_eq!(hours[2].0, 102);
        // A count past 40 bits in one hour starts a second word for the same hour.
        c.add_at(102, COUNT_MASK - 5);
        c.add_at(102, 10);
        assert_eq!(c.per_hour(102, 102)[0].1, hours[2].1 + COUNT_MASK - 5 + 10);
        // The clock went back: counted in the hour the count is at.
        c.add_at(101, 1);
        assert_eq!(c.per_hour(102, 102)[0].1, hours[2].1 + COUNT_MASK + 6);
        // A day later the old hours are gone.
        c.add_at(102 + HOURS_KEPT, 7);
        assert_eq!(c.per_hour(100, 102).iter().map(|(_, n)| n).sum::<u64>(), 0);
        assert_eq!(c.per_hour(102 + HOURS_KEPT, 102 + HOURS_KEPT)[0].1, 7);
        assert_eq!(c.total(), 30_000 + COUNT_MASK - 5 + 10 + 1 + 7);
    }

    /// The latency histogram encodes as prometheus-client's own does for the same
    /// observations (same buckets, count and sum).
    #[test]
    fn the_latency_histogram_encodes_as_the_library_histogram() {
        use std::time::Duration;
        let ours = Latency::default();
        let theirs = Histogram::new(BUCKETS);
        for us in [50, 100, 101, 900, 1000, 30_000, 20_000_000] {
            let d = Duration::from_micros(us);
            ours.observe(d);
            theirs.observe(d.as_secs_f64());
        }
        let text = |r: &Registry| {
            let mut out = String::new();
            encode(&mut out, r).unwrap();
            out
        };
        let (mut a, mut b) = (Registry::default(), Registry::default());
        a.register("d", "d", ours);
        b.register("d", "d", theirs);
        let (a, b) = (text(&a), text(&b));
        let without_sum = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| !l.starts_with("d_sum"))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(without_sum(&a), without_sum(&b), "{a}\n{b}");
        let sum = |t: &str| -> f64 {
            t.lines()
                .find_map(|l| l.strip_prefix("d_sum "))
                .unwrap()
                .parse()
                .unwrap()
        };
        assert!((sum(&a) - sum(&b)).abs() < 1e-9, "{a}\n{b}");
    }

    #[test]
    fn hourly_counts_keep_the_current_hour_and_list_every_hour() {
        let m = Metrics::new();
        m.issued("orders", 3);
        m.issued("orders", 4);
        let hours = m.issued_per_hour("orders");
        assert_eq!(hours.len() as u64, HOURS_KEPT);
        assert_eq!(hours.iter().map(|(_, n)| n).sum::<u64>(), 7);
        assert!(hours.windows(2).all(|w| w[0].0 + 1 == w[1].0));
        assert_eq!(
            m.issued_per_hour("other")
                .iter()
                .map(|(_, n)| n)
                .sum::<u64>(),
            0
        );
        assert_eq!(m.issued_by_sequence(), vec![("orders".to_owned(), 7)]);
    }
}
