//! `/metrics`: the service's metrics in the OpenMetrics text format (which Prometheus
//! scrapes), built with `prometheus-client`.
//!
//! Its cost stays flat however many sequences the collection holds: per-sequence series
//! exist only for the sequences this service drew from (at most `--metrics-max-sequences`,
//! default 1000, the most used first; the others are in the `_all` totals and counted by
//! `dispenser_sequences_without_series`). Long-lived: numbers issued per sequence, requests
//! by status, request latency. Gathered at each scrape: the counters of the service's
//! clients per sequence (writes, conflicts, retries, round trips, block refills), the numbers
//! its block clients hold, and, from one read of those sequences' documents (one query with
//! `$in`), each one's remaining capacity, fraction used, rate and forecast. The series of a
//! sequence whose document is gone are left out (so a deleted sequence's series go away,
//! counters included, and nothing is stale). Sequences no service draws from are watched by
//! `dispenser check` (a cron job), which reads every document.
//!
//! With `--metrics-token` (or `DISPENSER_METRICS_TOKEN`) the endpoint needs `Authorization:
//! Bearer <it>` ([`require_token`]; 401 otherwise, the API's tokens included): a token of its
//! own, so a scraper's credential allows nothing else. Compared in constant time like the
//! API's tokens, and never printed or logged.

use std::collections::{BTreeMap, HashSet};

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dispenser::{Error, sequence::Stats};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::auth::bearer_token;
use super::errors::ApiError;
use super::metrics::{Escaped, FGauge, Labels, queue, sequence};
use super::state::Shared;
use super::tokens::{MAX_TOKEN_LEN, MIN_TOKEN_LEN, PaddedToken, TokenRule};

/// The token `/metrics` requires, when the service has one (`--metrics-token`).
#[derive(Clone, Default)]
pub(super) struct MetricsToken(Option<Arc<PaddedToken>>);

impl MetricsToken {
    /// The token given to the service, checked like the API's tokens: 16 to 256 bytes, no
    /// whitespace or control character, none of the API's `tokens`. The error never shows it.
    pub(super) fn new(given: Option<&str>, tokens: &[TokenRule]) -> Result<MetricsToken, Error> {
        let Some(token) = given else {
            return Ok(MetricsToken(None));
        };
        let refuse = |reason: String| Error::InvalidArgument {
            what: "metrics_token".into(),
            reason,
        };
        if !(MIN_TOKEN_LEN..=MAX_TOKEN_LEN).contains(&token.len()) {
            return Err(refuse(format!(
                "the token is {} bytes long; a token has {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} bytes",
                token.len()
            )));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(refuse(
                "the token contains whitespace or a control character".into(),
            ));
        }
        let padded = PaddedToken::new(token.as_bytes());
        if let Some(rule) = tokens.iter().find(|r| r.token.matches(&padded)) {
            return Err(refuse(format!(
                "it is also the API token {:?}: give /metrics a token of its own",
                rule.name
            )));
        }
        Ok(MetricsToken(Some(Arc::new(padded))))
    }

    /// The name of the API token among `tokens` that is also the metrics token, if one is
    /// (a reloaded tokens file is refused then).
    pub(super) fn shared_with<'t>(&self, tokens: &'t [TokenRule]) -> Option<&'t str> {
        let expected = self.0.as_ref()?;
        tokens
            .iter()
            .find(|r| r.token.matches(expected))
            .map(|r| r.name.as_str())
    }

    /// Whether `/metrics` needs a token.
    pub(super) fn is_set(&self) -> bool {
        self.0.is_some()
    }
}

/// Middleware of `/metrics`: with a metrics token, a request without it is answered 401.
pub(super) async fn require_token(
    State(token): State<MetricsToken>,
    req: Request,
    next: Next,
) -> Response {
    let Some(expected) = &token.0 else {
        return next.run(req).await;
    };
    let refused = match req.headers().get(header::AUTHORIZATION) {
        None => Some("/metrics needs Authorization: Bearer <the service's metrics token>"),
        Some(value) => match bearer_token(value) {
            None => Some("malformed Authorization header: expected Bearer <token>"),
            Some(presented) if expected.matches(&PaddedToken::new(presented.as_bytes())) => None,
            Some(_) => Some("not the service's metrics token"),
        },
    };
    match refused {
        Some(message) => {
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response()
        }
        None => next.run(req).await,
    }
}

/// What one scrape reads from the database: the usage of the documents of the sequences
/// that have series.
struct Documents {
    /// The names of the documents read.
    names: HashSet<String>,
    remaining: Family<Labels, FGauge>,
    fraction_used: Family<Labels, FGauge>,
    rate: Family<Labels, FGauge>,
    exhausted_in: Family<Labels, FGauge>,
    corrupt: Family<Labels, Gauge>,
}

/// Reads the documents of `shown` (one query, whatever the size of the collection).
async fn read_documents(st: &Shared, shown: &[String]) -> Result<Documents, Error> {
    let mut docs = Documents {
        names: HashSet::new(),
        remaining: Family::default(),
        fraction_used: Family::default(),
        rate: Family::default(),
        exhausted_in: Family::default(),
        corrupt: Family::default(),
    };
    let now = jiff::Timestamp::now();
    for entry in st
        .dispenser
        .list()
        .named(shown.iter().map(String::as_str))
        .await?
    {
        match entry {
            Ok(state) => {
                docs.names.insert(state.name.clone());
                let usage = state.usage(now);
                let labels = vec![
                    ("sequence", Escaped(state.name.clone())),
                    ("cycle", Escaped(state.cycle.to_string())),
                ];
                docs.remaining
                    .get_or_create(&labels)
                    .set(usage.remaining as f64);
                docs.fraction_used
                    .get_or_create(&labels)
                    .set(usage.fraction_used);
                if let Some(r) = usage.rate_per_sec {
                    docs.rate.get_or_create(&sequence(&state.name)).set(r);
                }
                if let Some(left) = usage.exhausted_in {
                    docs.exhausted_in
                        .get_or_create(&sequence(&state.name))
                        .set(left.as_secs_f64());
                }
            }
            Err(Error::CorruptDocument { name, .. }) => {
                docs.names.insert(name.clone());
                docs.corrupt.get_or_create(&sequence(&name)).set(1);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(docs)
}

/// The sequences that get series of their own: of those this service drew from (or keeps a
/// client of), the `cap` with the most numbers issued through it (ties by name), by name.
/// The others are only in the totals.
fn shown_sequences(
    issued: &BTreeMap<String, u64>,
    stats: &BTreeMap<String, Stats>,
    held: &BTreeMap<String, u64>,
    cap: usize,
) -> (Vec<String>, usize) {
    let mut known: Vec<(&String, u64)> = issued
        .keys()
        .chain(stats.keys())
        .chain(held.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|n| (n, issued.get(n).copied().unwrap_or(0)))
        .collect();
    let all = known.len();
    if all > cap {
        // Most issued first; `sort_by` is stable, so ties stay in name order.
        known.sort_by_key(|k| std::cmp::Reverse(k.1));
        known.truncate(cap);
    }
    let mut shown: Vec<String> = known.into_iter().map(|(n, _)| n.clone()).collect();
    shown.sort_unstable();
    let left_out = all - shown.len();
    (shown, left_out)
}

/// A counter family with one series per shown sequence.
fn per_sequence(shown: &[String], value: impl Fn(&str) -> u64) -> Family<Labels, Counter> {
    let family = Family::<Labels, Counter>::default();
    for name in shown {
        family.get_or_create(&sequence(name)).inc_by(value(name));
    }
    family
}

/// The most queues with series of their own (by name).
const QUEUES_WITH_SERIES: usize = 1000;

/// The queues' series: waiting, taken, served and cancelled tickets from each queue
/// document (one query, through a projection of the counters and the last calls, so a scrape
/// does not read the queues' histories), and the wait histogram the service keeps from the
/// calls it sees.
async fn queue_series(st: &Shared, r: &mut Registry) {
    let queues = match st
        .dispenser
        .list_queues()
        .limit(QUEUES_WITH_SERIES)
        .counters()
        .await
    {
        Ok(q) => q,
        Err(e) => {
            tracing::warn!("/metrics: reading the queues: {}", st.scrub(&e.to_string()));
            return;
        }
    };
    let waiting = Family::<Labels, Gauge>::default();
    let taken = Family::<Labels, Counter>::default();
    let served = Family::<Labels, Counter>::default();
    let cancelled = Family::<Labels, Counter>::default();
    let mut names = HashSet::new();
    for q in queues.iter().flatten() {
        let labels = queue(&q.name);
        waiting
            .get_or_create(&labels)
            .set(i64::try_from(q.waiting).unwrap_or(i64::MAX));
        taken.get_or_create(&labels).inc_by(q.taken);
        served.get_or_create(&labels).inc_by(q.served);
        cancelled.get_or_create(&labels).inc_by(q.cancelled);
        st.metrics.observe_queue_calls(&q.name, &q.recent_calls);
        names.insert(q.name.clone());
    }
    st.metrics.keep_queues(&names);
    r.register(
        "dispenser_queue_waiting",
        "Tickets waiting in the queue",
        waiting,
    );
    r.register(
        "dispenser_queue_taken",
        "Tickets taken since the queue was created",
        taken,
    );
    r.register(
        "dispenser_queue_served",
        "Tickets called since the queue was created",
        served,
    );
    r.register(
        "dispenser_queue_cancelled",
        "Tickets cancelled since the queue was created",
        cancelled,
    );
    r.register(
        "dispenser_queue_wait_seconds",
        "How long each called ticket waited, from its take to its call (every call since the service started, by any client, seen in the queue document at a scrape; at most the last 20 calls between two scrapes)",
        st.metrics.queue_waits.clone(),
    );
}

/// The registry of one scrape.
async fn registry(st: &Shared) -> Registry {
    let m = &st.metrics;
    let mut r = Registry::default();
    // What the service knows before the documents are read: a sequence among them without a
    // document is gone (deleted), and its series are left out. A sequence first used while
    // the documents are read has its series from the next scrape on.
    let issued: BTreeMap<String, u64> = m.issued_by_sequence().into_iter().collect();
    let by_sequence: BTreeMap<String, Stats> = st.stats_by_sequence().await;
    let held: BTreeMap<String, u64> = st.pool.held_by_sequence().into_iter().collect();
    let (candidates, left_out) =
        shown_sequences(&issued, &by_sequence, &held, st.metrics_max_sequences);
    let read = read_documents(st, &candidates).await;
    // Without the documents, nothing is known to be gone.
    let shown: Vec<String> = match &read {
        Ok(docs) => candidates
            .into_iter()
            .filter(|n| docs.names.contains(n))
            .collect(),
        Err(_) => candidates,
    };
    let total = Counter::<u64>::default();
    total.inc_by(issued.values().sum());
    r.register(
        "dispenser_numbers_issued_all",
        "Numbers handed out to clients of the service, all sequences together (those without series of their own included)",
        total,
    );
    let without = Gauge::<i64>::default();
    without.set(i64::try_from(left_out).unwrap_or(i64::MAX));
    r.register(
        "dispenser_sequences_without_series",
        "Sequences this service drew from that have no per-sequence series (beyond --metrics-max-sequences, the most used first); they are counted in dispenser_numbers_issued_all",
        without,
    );
    r.register(
        "dispenser_numbers_issued",
        "Numbers handed out to clients of the service, by sequence",
        per_sequence(&shown, |n| issued.get(n).copied().unwrap_or(0)),
    );
    let stat = |f: fn(&Stats) -> u64| per_sequence(&shown, |n| by_sequence.get(n).map_or(0, f));
    r.register(
        "dispenser_writes",
        "Writes the service sent to the database, by sequence",
        stat(|s| s.writes),
    );
    r.register(
        "dispenser_conflicts",
        "Compare-and-set races the service lost, by sequence",
        stat(|s| s.conflicts),
    );
    r.register(
        "dispenser_retries",
        "Attempts after a lost race, by sequence",
        stat(|s| s.retries),
    );
    r.register(
        "dispenser_round_trips",
        "Database round trips of the service, by sequence",
        stat(|s| s.round_trips),
    );
    r.register(
        "dispenser_block_refills",
        "Blocks the service reserved, by sequence",
        stat(|s| s.block_refills),
    );
    let held_family = Family::<Labels, Gauge>::default();
    for name in &shown {
        if let Some(n) = held.get(name) {
            held_family
                .get_or_create(&sequence(name))
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }
    r.register(
        "dispenser_numbers_held",
        "Numbers reserved in the service's blocks and not handed out yet (a crash now loses them; an alter does not apply to them), by sequence",
        held_family,
    );
    let held_all = Gauge::<i64>::default();
    held_all.set(i64::try_from(held.values().sum::<u64>()).unwrap_or(i64::MAX));
    r.register(
        "dispenser_numbers_held_all",
        "Numbers reserved in the service's blocks and not handed out yet, all sequences together",
        held_all,
    );
    let up = Gauge::<i64>::default();
    match read {
        Ok(docs) => {
            up.set(1);
            r.register(
                "dispenser_sequence_remaining",
                "Numbers left before the sequence's bound (before the wrap for a cyclic one)",
                docs.remaining,
            );
            r.register(
                "dispenser_sequence_fraction_used",
                "Share of the sequence's numbers issued, 0 to 1 (of the current cycle for a cyclic one)",
                docs.fraction_used,
            );
            r.register(
                "dispenser_sequence_rate_per_second",
                "Numbers issued per second over the days the document counts",
                docs.rate,
            );
            r.register(
                "dispenser_sequence_exhausted_in_seconds",
                "For a non-cyclic sequence with a rate: seconds until it runs out at that rate",
                docs.exhausted_in,
            );
            r.register(
                "dispenser_sequence_corrupt",
                "1 for a sequence whose document cannot be read (see `dispenser check`)",
                docs.corrupt,
            );
        }
        Err(e) => {
            tracing::warn!(
                "/metrics: reading the sequences: {}",
                st.scrub(&e.to_string())
            );
        }
    }
    queue_series(st, &mut r).await;
    r.register(
        "dispenser_database_up",
        "1 when this scrape read the sequence documents, 0 when it could not (the sequence_* series are then missing)",
        up,
    );
    r.register(
        "dispenser_requests",
        "HTTP requests answered, by status",
        m.requests.clone(),
    );
    r.register(
        "dispenser_request_duration_seconds",
        "HTTP request latency",
        m.duration.clone(),
    );
    r
}

pub(super) async fn metrics(State(st): State<Shared>) -> Response {
    let r = registry(&st).await;
    let mut out = String::new();
    if let Err(e) = encode(&mut out, &r) {
        tracing::error!("/metrics: encoding failed: {e}");
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        out,
    )
        .into_response()
}
