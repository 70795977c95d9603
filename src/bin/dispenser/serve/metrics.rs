//! The metrics the service keeps for its whole life (numbers issued per sequence, requests
//! by status, request latency) and the label types of every series; `scrape.rs` builds the
//! `/metrics` answer from them.
//!
//! Label values are escaped as the exposition format says (`\\`, `\"`, `\n`), so any name a
//! sequence may have keeps the scrape readable (`prometheus-client` writes them as given).

use std::collections::BTreeMap;
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

/// The metrics kept for the life of the service (each a handle onto shared atomics).
pub(super) struct Metrics {
    /// Numbers handed out, by sequence document.
    issued: Mutex<BTreeMap<String, u64>>,
    pub(super) requests: Family<Labels, Counter>,
    /// The series of `requests` for status 200, held so that counting one needs no lookup.
    ok: Counter,
    pub(super) duration: Histogram,
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
            issued: Mutex::new(BTreeMap::new()),
            requests,
            ok,
            duration: Histogram::new(BUCKETS),
        }
    }

    /// Counts `n` numbers handed out from sequence `name`.
    pub(super) fn issued(&self, name: &str, n: u64) {
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        match issued.get_mut(name) {
            Some(v) => *v += n,
            None => {
                issued.insert(name.to_owned(), n);
            }
        }
    }

    pub(super) fn issued_by_sequence(&self) -> Vec<(String, u64)> {
        let issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        issued.iter().map(|(k, v)| (k.clone(), *v)).collect()
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

/// A counter family with one series per sequence, set from `values`.
pub(super) fn counters(values: &[(String, u64)]) -> Family<Labels, Counter> {
    let family = Family::<Labels, Counter>::default();
    for (name, v) in values {
        family.get_or_create(&sequence(name)).inc_by(*v);
    }
    family
}
