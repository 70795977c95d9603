//! `/metrics`: request latency histogram, counters, and the Prometheus text rendering.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::errors::as_json_error;
use super::state::Shared;

/// Prometheus-style request latency histogram and counters.
pub(super) struct Metrics {
    pub(super) issued: AtomicU64,
    pub(super) requests: Mutex<HashMap<u16, u64>>,
    pub(super) bounds: Vec<f64>,
    pub(super) buckets: Vec<AtomicU64>,
    pub(super) sum_micros: AtomicU64,
    pub(super) count: AtomicU64,
}

impl Metrics {
    pub(super) fn new() -> Self {
        let bounds = vec![
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0,
        ];
        let buckets = bounds.iter().map(|_| AtomicU64::new(0)).collect();
        Metrics {
            issued: AtomicU64::new(0),
            requests: Mutex::new(HashMap::new()),
            bounds,
            buckets,
            sum_micros: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    pub(super) fn observe(&self, status: u16, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        for (b, bound) in self.buckets.iter().zip(&self.bounds) {
            if secs <= *bound {
                b.fetch_add(1, Relaxed);
            }
        }
        self.sum_micros
            .fetch_add(elapsed.as_micros() as u64, Relaxed);
        self.count.fetch_add(1, Relaxed);
        *self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(status)
            .or_default() += 1;
    }
}

pub(super) async fn metrics(State(st): State<Shared>) -> impl IntoResponse {
    let m = &st.metrics;
    let t = st.totals().await;
    let mut out = String::new();
    let mut counter = |name: &str, help: &str, v: u64| {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}\n"
        ));
    };
    counter(
        "dispenser_numbers_issued_total",
        "Numbers handed out to clients.",
        m.issued.load(Relaxed),
    );
    counter(
        "dispenser_writes_total",
        "Writes sent to the database.",
        t.writes,
    );
    counter(
        "dispenser_conflicts_total",
        "Compare-and-set races lost.",
        t.conflicts,
    );
    counter(
        "dispenser_retries_total",
        "Attempts after a lost race.",
        t.retries,
    );
    counter(
        "dispenser_block_refills_total",
        "Blocks reserved.",
        t.block_refills,
    );
    counter(
        "dispenser_round_trips_total",
        "Database round trips.",
        t.round_trips,
    );
    out.push_str("# HELP dispenser_requests_total HTTP requests by status.\n# TYPE dispenser_requests_total counter\n");
    let mut by_status: Vec<_> = m
        .requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(k, v)| (*k, *v))
        .collect();
    by_status.sort_unstable();
    for (status, n) in by_status {
        out.push_str(&format!(
            "dispenser_requests_total{{status=\"{status}\"}} {n}\n"
        ));
    }
    out.push_str("# HELP dispenser_request_duration_seconds HTTP request latency.\n# TYPE dispenser_request_duration_seconds histogram\n");
    for (b, bound) in m.buckets.iter().zip(&m.bounds) {
        out.push_str(&format!(
            "dispenser_request_duration_seconds_bucket{{le=\"{bound}\"}} {}\n",
            b.load(Relaxed)
        ));
    }
    let count = m.count.load(Relaxed);
    out.push_str(&format!(
        "dispenser_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}\n"
    ));
    out.push_str(&format!(
        "dispenser_request_duration_seconds_sum {}\n",
        m.sum_micros.load(Relaxed) as f64 / 1e6
    ));
    out.push_str(&format!(
        "dispenser_request_duration_seconds_count {count}\n"
    ));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}

pub(super) async fn observe(State(st): State<Shared>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let resp = as_json_error(&st, next.run(req).await).await;
    st.metrics
        .observe(resp.status().as_u16(), started.elapsed());
    resp
}
