//! The metrics the service keeps for its whole life (numbers issued per sequence, requests
//! by status, request latency) and the label types of every series; `scrape.rs` builds the
//! `/metrics` answer from them.
//!
//! Label values are escaped as the exposition format says (`\\`, `\"`, `\n`), so any name a
//! sequence may have keeps the scrape readable (`prometheus-client` writes them as given).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use dispenser::queue::CallEntry;
use std::fmt::Write as _;
use std::sync::Mutex;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

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
/// hours (by hour since the Unix epoch; hours without any are not kept).
#[derive(Default)]
struct Issued {
    total: u64,
    hours: VecDeque<(u64, u64)>,
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
    issued: Mutex<BTreeMap<String, Issued>>,
    pub(super) requests: Family<Labels, Counter>,
    /// The series of `requests` for status 200, held so that counting one needs no lookup.
    ok: Counter,
    pub(super) duration: Histogram,
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
            issued: Mutex::new(BTreeMap::new()),
            requests,
            ok,
            duration: Histogram::new(BUCKETS),
        }
    }

    /// Counts `n` numbers handed out from sequence `name`.
    pub(super) fn issued(&self, name: &str, n: u64) {
        let hour = hour_now();
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        let entry = match issued.get_mut(name) {
            Some(v) => v,
            None => issued.entry(name.to_owned()).or_default(),
        };
        entry.total += n;
        match entry.hours.back_mut() {
            Some((h, count)) if *h == hour => *count += n,
            _ => entry.hours.push_back((hour, n)),
        }
        while entry
            .hours
            .front()
            .is_some_and(|(h, _)| h + HOURS_KEPT <= hour)
        {
            entry.hours.pop_front();
        }
    }

    pub(super) fn issued_by_sequence(&self) -> Vec<(String, u64)> {
        let issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        issued.iter().map(|(k, v)| (k.clone(), v.total)).collect()
    }

    /// The numbers handed out from `name` in each of the last [`HOURS_KEPT`] hours, oldest
    /// first: `(hour since the Unix epoch, numbers)`, every hour listed (0 when none).
    pub(super) fn issued_per_hour(&self, name: &str) -> Vec<(u64, u64)> {
        let now = hour_now();
        let first = now + 1 - HOURS_KEPT;
        let issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        let kept = issued.get(name).map(|v| &v.hours);
        (first..=now)
            .map(|h| {
                let n = kept
                    .and_then(|hours| hours.iter().find(|(k, _)| *k == h))
                    .map_or(0, |(_, n)| *n);
                (h, n)
            })
            .collect()
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

    pub(super) fn observe(&self, code: u16, secs: f64) {
        if code == 200 {
            self.ok.inc();
        } else {
            self.requests.get_or_create(&status(code)).inc();
        }
        self.duration.observe(secs);
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
