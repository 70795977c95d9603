//! `dispenser serve`: an HTTP dispensing service, so that clients in any language can draw
//! numbers and only the service needs database rights.
//!
//! Numbers are drawn through block clients with prefetch (one per sequence, shared by all
//! requests), so most requests need no database round trip; on shutdown the unused block
//! tails are given back. Every endpoint except `/healthz` and `/metrics` needs a bearer token;
//! each token is allowed a set of sequence names (globs) and operations. Tokens are compared
//! in constant time and never logged.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use dispenser::{
    BlockOptions, BlockSequence, Dispenser, Error, Format, Sequence, SequenceState, Spec, Stats,
};
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use wildmatch::WildMatch;

use crate::cli::ServeArgs;

/// Counts up to this many are answered as a list of numbers drawn from the block client;
/// larger counts as contiguous runs reserved directly (`{first, last, step, count}`).
const LIST_LIMIT: u64 = 1000;
/// The shortest token accepted.
const MIN_TOKEN_LEN: usize = 16;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Next,
    Create,
    Peek,
    List,
    Advance,
    Reset,
    Delete,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "next" => Op::Next,
            "create" => Op::Create,
            "peek" => Op::Peek,
            "list" => Op::List,
            "advance" => Op::Advance,
            "reset" => Op::Reset,
            "delete" => Op::Delete,
            _ => return None,
        })
    }
}

/// The tokens file (or `DISPENSER_TOKENS`): `{"tokens": [{"name", "token", "sequences",
/// "operations"}]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    tokens: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    token: String,
    sequences: Vec<String>,
    operations: Vec<String>,
}

struct TokenRule {
    name: String,
    token: Vec<u8>,
    sequences: Vec<WildMatch>,
    operations: HashSet<Op>,
}

impl TokenRule {
    fn allows_name(&self, name: &str) -> bool {
        self.sequences.iter().any(|g| g.matches(name))
    }
}

fn config_error(reason: String) -> Error {
    Error::InvalidArgument {
        what: "tokens".into(),
        reason,
    }
}

/// Parses and checks the token configuration. Messages name tokens by their `name`, never
/// by their value.
fn parse_tokens(text: &str) -> Result<Vec<TokenRule>, Error> {
    let file: TokenFile = serde_json::from_str(text).map_err(|e| {
        // serde's message may quote a value: keep only where it failed.
        config_error(format!(
            "not a valid tokens document (line {}, column {}): expected {{\"tokens\": [{{\"name\", \"token\", \"sequences\", \"operations\"}}]}}",
            e.line(),
            e.column()
        ))
    })?;
    if file.tokens.is_empty() {
        return Err(config_error("no tokens configured".into()));
    }
    let mut rules = Vec::new();
    let mut seen = HashSet::new();
    for t in file.tokens {
        if t.token.len() < MIN_TOKEN_LEN {
            return Err(config_error(format!(
                "token {:?} is shorter than {MIN_TOKEN_LEN} characters",
                t.name
            )));
        }
        if !seen.insert(t.token.clone()) {
            return Err(config_error(format!(
                "token {:?} repeats another token",
                t.name
            )));
        }
        if t.sequences.is_empty() || t.sequences.iter().any(String::is_empty) {
            return Err(config_error(format!(
                "token {:?} needs non-empty sequence patterns",
                t.name
            )));
        }
        let mut operations = HashSet::new();
        for o in &t.operations {
            operations.insert(Op::parse(o).ok_or_else(|| {
                config_error(format!(
                    "token {:?} has an unknown operation {o:?} (known: next, create, peek, list, advance, reset, delete)",
                    t.name
                ))
            })?);
        }
        rules.push(TokenRule {
            name: t.name,
            token: t.token.into_bytes(),
            sequences: t.sequences.iter().map(|p| WildMatch::new(p)).collect(),
            operations,
        });
    }
    Ok(rules)
}

/// A JSON error reply: `{"error": {"kind", "message"}}`.
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": { "kind": self.kind, "message": self.message } }));
        let mut resp = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let (status, kind) = match &e {
            Error::InvalidName { .. }
            | Error::InvalidSpec { .. }
            | Error::InvalidArgument { .. } => (StatusCode::BAD_REQUEST, "invalid_input"),
            Error::NoSuchSequence { .. } => (StatusCode::NOT_FOUND, "no_such_sequence"),
            Error::Exhausted { .. } => (StatusCode::CONFLICT, "exhausted"),
            Error::AlreadyExists { .. } => (StatusCode::CONFLICT, "already_exists"),
            Error::SpecConflict { .. } => (StatusCode::CONFLICT, "spec_conflict"),
            Error::WouldGoBackwards { .. } => (StatusCode::CONFLICT, "would_go_backwards"),
            Error::Contention { .. } => (StatusCode::SERVICE_UNAVAILABLE, "contention"),
            // A request that raced a reset or delete of its sequence: try again.
            Error::Closed { .. } => (StatusCode::SERVICE_UNAVAILABLE, "closed"),
            Error::CorruptDocument { .. } => {
                (StatusCode::INTERNAL_SERVER_ERROR, "corrupt_document")
            }
            Error::Database { .. } | Error::Timeout { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "database")
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, kind, e.to_string())
    }
}

fn bad_json(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected Content-Type: application/json",
        ),
        other => ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", other.body_text()),
    }
}

/// Prometheus-style request latency histogram and counters.
struct Metrics {
    issued: AtomicU64,
    requests: Mutex<HashMap<u16, u64>>,
    bounds: Vec<f64>,
    buckets: Vec<AtomicU64>,
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Metrics {
    fn new() -> Self {
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

    fn observe(&self, status: u16, elapsed: Duration) {
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

/// The service's shared state.
struct AppState {
    dispenser: Dispenser,
    tokens: Vec<TokenRule>,
    block_options: BlockOptions,
    max_count: u64,
    /// One block client per sequence (shared by all requests).
    blocks: Mutex<HashMap<String, BlockSequence>>,
    /// One direct handle per sequence, for large counts.
    direct: Mutex<HashMap<String, Sequence>>,
    /// Stats of clients already closed (reset, delete).
    retired: Mutex<Stats>,
    metrics: Metrics,
}

type Shared = Arc<AppState>;

impl AppState {
    /// The token of the request, if it may do `op` (on `name`, when given).
    fn authorize(
        &self,
        headers: &HeaderMap,
        op: Op,
        name: Option<&str>,
    ) -> Result<&TokenRule, ApiError> {
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?;
        let presented = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                unauthorized("malformed Authorization header: expected Bearer <token>")
            })?;
        // Compare against every token, without stopping early.
        let mut found = None;
        for rule in &self.tokens {
            if bool::from(rule.token.as_slice().ct_eq(presented.as_bytes())) {
                found = Some(rule);
            }
        }
        let rule = found.ok_or_else(|| unauthorized("unknown token"))?;
        if !rule.operations.contains(&op) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("token {:?} may not {op:?}", rule.name).to_lowercase(),
            ));
        }
        if let Some(n) = name
            && !rule.allows_name(n)
        {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("token {:?} may not use sequence {n:?}", rule.name),
            ));
        }
        Ok(rule)
    }

    async fn block_client(&self, name: &str) -> Result<BlockSequence, Error> {
        let existing = self
            .blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .filter(|b| !b.is_closed())
            .cloned();
        if let Some(b) = existing {
            return Ok(b);
        }
        let b = self
            .dispenser
            .shared_blocks(name, self.block_options)
            .await?;
        self.blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), b.clone());
        Ok(b)
    }

    async fn direct(&self, name: &str) -> Result<Sequence, Error> {
        let existing = self
            .direct
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        if let Some(s) = existing {
            return Ok(s);
        }
        let s = self.dispenser.open(name).await?;
        self.direct
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_owned(), s.clone());
        Ok(s)
    }

    /// Closes the clients of `name` (before a reset or delete), giving back what is safe.
    async fn retire(&self, name: &str) {
        let block = self
            .blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        let direct = self
            .direct
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        let mut stats = Vec::new();
        if let Some(b) = block {
            stats.push(b.stats());
            if let Err(e) = b.close().await {
                tracing::warn!("closing the block client of {name:?}: {e}");
            }
        }
        if let Some(s) = direct {
            stats.push(s.stats());
        }
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        for s in stats {
            *retired += s;
        }
    }

    fn totals(&self) -> Stats {
        let mut total = *self.retired.lock().unwrap_or_else(|p| p.into_inner());
        for b in self
            .blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            total += b.stats();
        }
        for s in self
            .direct
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            total += s.stats();
        }
        total
    }
}

async fn next(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Next, Some(&name))?;
    if let Some(unknown) = query.keys().find(|k| k.as_str() != "count") {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            format!("unknown query parameter {unknown:?} (known: count)"),
        ));
    }
    let count = match query.get("count") {
        None => 1,
        Some(c) => c
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=st.max_count).contains(n))
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_input",
                    format!(
                        "count {c:?} must be a whole number from 1 to {}",
                        st.max_count
                    ),
                )
            })?,
    };
    dispenser::validate_name(&name)?;
    if count <= LIST_LIMIT {
        let blocks = st.block_client(&name).await?;
        let mut numbers = Vec::with_capacity(count as usize);
        for _ in 0..count {
            numbers.push(blocks.next().await?);
        }
        st.metrics.issued.fetch_add(count, Relaxed);
        return Ok(Json(json!({ "numbers": numbers })));
    }
    let seq = st.direct(&name).await?;
    let mut runs = Vec::new();
    let mut left = count;
    while left > 0 {
        let run = seq.next_n(left).await?;
        st.metrics.issued.fetch_add(run.count(), Relaxed);
        runs.push(json!({
            "first": run.first(), "last": run.last(), "step": run.step(), "count": run.count(),
        }));
        left -= run.count();
    }
    Ok(Json(json!({ "count": count, "runs": runs })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    #[serde(default)]
    start: Option<i64>,
    #[serde(default)]
    step: Option<i64>,
    #[serde(default)]
    min: Option<i64>,
    #[serde(default)]
    max: Option<i64>,
    #[serde(default)]
    cycle: bool,
    #[serde(default)]
    if_not_exists: bool,
    #[serde(default)]
    format: Option<String>,
}

async fn create(
    State(st): State<Shared>,
    headers: HeaderMap,
    body: Result<Json<CreateBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(b) = body.map_err(bad_json)?;
    st.authorize(&headers, Op::Create, Some(&b.name))?;
    let d = Spec::default();
    let spec = d
        .with_start(b.start.unwrap_or(d.start))
        .with_step(b.step.unwrap_or(d.step))
        .with_min(b.min.unwrap_or(d.min))
        .with_max(b.max.unwrap_or(d.max))
        .with_cycle(b.cycle);
    let format = b.format.as_deref().map(Format::parse).transpose()?;
    if b.if_not_exists {
        st.dispenser.ensure(&b.name, spec).await?;
    } else {
        st.dispenser.create(&b.name, spec).await?;
    }
    if let Some(f) = &format {
        st.dispenser.set_format(&b.name, Some(f)).await?;
    }
    let state = st.dispenser.peek(&b.name).await?;
    Ok((StatusCode::CREATED, Json(SequenceState::to_json(&state))))
}

async fn peek(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Peek, Some(&name))?;
    Ok(Json(SequenceState::to_json(
        &st.dispenser.peek(&name).await?,
    )))
}

async fn list(State(st): State<Shared>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    let rule = st.authorize(&headers, Op::List, None)?;
    let mut out = Vec::new();
    for item in st.dispenser.list().await? {
        match item {
            Ok(s) if rule.allows_name(&s.name) => out.push(SequenceState::to_json(&s)),
            Ok(_) => {}
            Err(e) => tracing::warn!("list: {e}"),
        }
    }
    Ok(Json(json!({ "sequences": out })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdvanceBody {
    to: i64,
}

async fn advance(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<AdvanceBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Advance, Some(&name))?;
    let Json(b) = body.map_err(bad_json)?;
    Ok(Json(SequenceState::to_json(
        &st.dispenser.advance_to(&name, b.to).await?,
    )))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    value: i64,
    #[serde(default)]
    force: bool,
}

async fn reset(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<ResetBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Reset, Some(&name))?;
    let Json(b) = body.map_err(bad_json)?;
    st.retire(&name).await;
    Ok(Json(SequenceState::to_json(
        &st.dispenser.reset(&name, b.value, b.force).await?,
    )))
}

async fn delete(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    st.authorize(&headers, Op::Delete, Some(&name))?;
    st.retire(&name).await;
    st.dispenser.delete(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn healthz(State(st): State<Shared>) -> Result<Json<Value>, ApiError> {
    st.dispenser.ping().await?;
    Ok(Json(json!({ "status": "ok" })))
}

async fn metrics(State(st): State<Shared>) -> impl IntoResponse {
    let m = &st.metrics;
    let t = st.totals();
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

async fn observe(State(st): State<Shared>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let resp = as_json_error(next.run(req).await).await;
    st.metrics
        .observe(resp.status().as_u16(), started.elapsed());
    resp
}

/// Errors that axum answers itself (a path or query that does not decode, a wrong method)
/// come as plain text: give them the same JSON error body as ours.
async fn as_json_error(resp: Response) -> Response {
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let text = match axum::body::to_bytes(resp.into_body(), 64 * 1024).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    };
    let kind = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        s if s.is_client_error() => "bad_request",
        _ => "internal",
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    ApiError::new(status, kind, message).into_response()
}

async fn fallback() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

fn router(state: Shared) -> Router {
    Router::new()
        .route("/v1/sequences", get(list).post(create))
        .route("/v1/sequences/{name}", get(peek).delete(delete))
        .route("/v1/sequences/{name}/next", post(next))
        .route("/v1/sequences/{name}/advance", post(advance))
        .route("/v1/sequences/{name}/reset", post(reset))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .fallback(fallback)
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

fn load_tokens(path: Option<&PathBuf>) -> Result<Vec<TokenRule>, Error> {
    let text = match path {
        Some(p) => std::fs::read_to_string(p).map_err(|e| Error::InvalidArgument {
            what: "--tokens".into(),
            reason: format!("cannot read {}: {e}", p.display()),
        })?,
        None => std::env::var("DISPENSER_TOKENS").map_err(|_| Error::InvalidArgument {
            what: "tokens".into(),
            reason: "no tokens configured: pass --tokens FILE or set DISPENSER_TOKENS (JSON)"
                .into(),
        })?,
    };
    parse_tokens(&text)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// Entry point of `dispenser serve`.
pub async fn run(dispenser: Dispenser, args: ServeArgs) -> dispenser::Result<()> {
    let tokens = load_tokens(args.tokens.as_ref())?;
    let block_options = BlockOptions::default()
        .with_size(args.block)
        .with_prefetch(Some(args.prefetch));
    block_options.validate()?;
    let addr: SocketAddr = args.listen.parse().map_err(|e| Error::InvalidArgument {
        what: "--listen".into(),
        reason: format!(
            "{:?} is not an address such as 127.0.0.1:8080: {e}",
            args.listen
        ),
    })?;
    let listener =
        tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::InvalidArgument {
                what: "--listen".into(),
                reason: format!("cannot listen on {addr}: {e}"),
            })?;
    let local = listener.local_addr().map_err(|e| Error::InvalidArgument {
        what: "--listen".into(),
        reason: e.to_string(),
    })?;
    let state = Arc::new(AppState {
        dispenser,
        tokens,
        block_options,
        max_count: args.max_count,
        blocks: Mutex::new(HashMap::new()),
        direct: Mutex::new(HashMap::new()),
        retired: Mutex::new(Stats::default()),
        metrics: Metrics::new(),
    });
    println!("listening on http://{local}");
    tracing::info!("dispenser serve listening on {local}");
    let served = axum::serve(listener, router(state.clone()))
        .with_graceful_shutdown(shutdown_signal())
        .await;
    // Give back what the block clients still hold.
    let clients: Vec<_> = state
        .blocks
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .collect();
    let (mut given_back, mut lost) = (0, 0);
    for (name, b) in clients {
        match b.close().await {
            Ok(r) => {
                given_back += r.given_back;
                lost += r.lost;
            }
            Err(e) => eprintln!("dispenser: closing the block client of {name:?}: {e}"),
        }
    }
    eprintln!("dispenser: stopped; {given_back} number(s) given back, {lost} lost (a gap)");
    served.map_err(|e| Error::InvalidArgument {
        what: "--listen".into(),
        reason: format!("the server failed: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Vec<TokenRule> {
        parse_tokens(
            r#"{"tokens": [
                {"name": "orders", "token": "orders-token-0123456789", "sequences": ["orders", "invoices@*"], "operations": ["next", "peek"]},
                {"name": "admin", "token": "admin-token-0123456789", "sequences": ["*"], "operations": ["next", "create", "peek", "list", "advance", "reset", "delete"]}
            ]}"#,
        )
        .unwrap()
    }

    async fn state() -> AppState {
        AppState {
            dispenser: Dispenser::connect("mongodb://127.0.0.1:1", dispenser::Options::default())
                .await
                .unwrap(),
            tokens: tokens(),
            block_options: BlockOptions::default(),
            max_count: 10,
            blocks: Mutex::new(HashMap::new()),
            direct: Mutex::new(HashMap::new()),
            retired: Mutex::new(Stats::default()),
            metrics: Metrics::new(),
        }
    }

    fn bearer(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, t.parse().unwrap());
        h
    }

    #[tokio::test]
    async fn permissions_by_token_sequence_and_operation() {
        let st = state().await;
        let orders = bearer("Bearer orders-token-0123456789");
        assert!(st.authorize(&orders, Op::Next, Some("orders")).is_ok());
        assert!(
            st.authorize(&orders, Op::Next, Some("invoices@acme"))
                .is_ok()
        );
        let e = st
            .authorize(&orders, Op::Next, Some("payroll"))
            .err()
            .unwrap();
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        let e = st
            .authorize(&orders, Op::Delete, Some("orders"))
            .err()
            .unwrap();
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        let admin = bearer("Bearer admin-token-0123456789");
        assert!(st.authorize(&admin, Op::Delete, Some("payroll")).is_ok());
        for bad in [
            "",
            "Bearer ",
            "Basic b3JkZXJz",
            "Bearer wrong-token-0123456789",
            "orders-token-0123456789",
        ] {
            let e = st
                .authorize(&bearer(bad), Op::Next, Some("orders"))
                .err()
                .unwrap();
            assert_eq!(e.status, StatusCode::UNAUTHORIZED, "{bad:?}");
            assert!(
                !e.message.contains("token-0123"),
                "a token leaked: {}",
                e.message
            );
        }
        let e = st
            .authorize(&HeaderMap::new(), Op::Next, None)
            .err()
            .unwrap();
        assert_eq!(e.status, StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn token_files_are_checked_without_echoing_tokens() {
        for (bad, needle) in [
            ("{", "not a valid tokens document"),
            (r#"{"tokens": []}"#, "no tokens"),
            (
                r#"{"tokens": [{"name": "a", "token": "short", "sequences": ["*"], "operations": []}]}"#,
                "shorter than 16",
            ),
            (
                r#"{"tokens": [{"name": "a", "token": "0123456789abcdefg", "sequences": [], "operations": []}]}"#,
                "sequence patterns",
            ),
            (
                r#"{"tokens": [{"name": "a", "token": "0123456789abcdefg", "sequences": ["*"], "operations": ["fly"]}]}"#,
                "unknown operation \"fly\"",
            ),
            (
                r#"{"tokens": [{"name": "a", "token": "0123456789abcdefg", "sequences": ["*"], "operations": [], "extra": 1}]}"#,
                "not a valid tokens document",
            ),
        ] {
            let err = parse_tokens(bad).err().unwrap().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
            assert!(!err.contains("0123456789abcdefg"), "{err}");
        }
    }

    #[test]
    fn the_histogram_counts_cumulatively() {
        let m = Metrics::new();
        m.observe(200, Duration::from_micros(300));
        m.observe(404, Duration::from_secs(20));
        assert_eq!(m.buckets[0].load(Relaxed), 0);
        assert_eq!(m.buckets[2].load(Relaxed), 1);
        assert_eq!(m.buckets.last().unwrap().load(Relaxed), 1);
        assert_eq!(m.count.load(Relaxed), 2);
    }
}
