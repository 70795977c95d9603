//! `dispenser serve`: an HTTP dispensing service, so that clients in any language can draw
//! numbers and only the service needs database rights.
//!
//! Numbers are drawn through block clients with prefetch (one per sequence, shared by all
//! requests), so most requests need no database round trip; on shutdown the unused block
//! tails are given back. Every endpoint except `/healthz` and `/metrics` needs a bearer token;
//! each token is allowed a set of sequence names (globs) and operations. Tokens are compared
//! in constant time (over a fixed length) and never logged; the token is checked before the
//! request body is read.
//!
//! The service's own admin operations (create, advance, reset, delete) are ordered with the
//! draws of the same sequence: draws hold the sequence's [`Slot`] lock shared, admin operations
//! exclusively; under it they retire the sequence's clients (the block client from the [`Pool`],
//! giving back what it holds), write, and only then let draws open fresh clients. So nothing is served, after an admin operation
//! returned, from a block reserved before it.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use dispenser::{
    Dispenser, Error, Format, Sequence, SequenceState, Spec, Stats,
    block::{BlockOptions, Pool},
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio::sync::{OnceCell, RwLock};
use wildmatch::WildMatch;

use crate::cli::ServeArgs;

/// Counts up to this many are answered as a list of numbers drawn from the block client;
/// larger counts as contiguous runs reserved directly (`{first, last, step, count}`).
const LIST_LIMIT: u64 = 1000;
/// The shortest token accepted.
const MIN_TOKEN_LEN: usize = 16;
/// The longest token accepted: every comparison covers this many bytes, whatever the lengths.
const MAX_TOKEN_LEN: usize = 256;

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
    token: PaddedToken,
    /// The token itself, only to scrub it from error messages.
    secret: String,
    sequences: Vec<WildMatch>,
    operations: HashSet<Op>,
}

impl TokenRule {
    fn allows_name(&self, name: &str) -> bool {
        self.sequences.iter().any(|g| g.matches(name))
    }
}

/// A token as compared: zero-padded to [`MAX_TOKEN_LEN`] bytes, with its length beside it, so
/// that a comparison takes the same time whatever the lengths of the two tokens.
struct PaddedToken {
    bytes: [u8; MAX_TOKEN_LEN],
    len: u64,
}

impl PaddedToken {
    /// `token` padded; a token longer than [`MAX_TOKEN_LEN`] keeps its real length, so it
    /// equals no configured token.
    fn new(token: &[u8]) -> Self {
        let mut bytes = [0; MAX_TOKEN_LEN];
        let n = token.len().min(MAX_TOKEN_LEN);
        bytes[..n].copy_from_slice(&token[..n]);
        PaddedToken {
            bytes,
            len: token.len() as u64,
        }
    }

    /// Constant-time equality (contents and length).
    fn matches(&self, other: &PaddedToken) -> bool {
        bool::from(self.bytes.ct_eq(&other.bytes) & self.len.ct_eq(&other.len))
    }
}

/// The token of an `Authorization` header value: the scheme `Bearer` (any case), whitespace,
/// the token.
fn bearer_token(value: &HeaderValue) -> Option<&str> {
    let value = value.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once([' ', '\t'])?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
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
        if t.token.len() > MAX_TOKEN_LEN {
            return Err(config_error(format!(
                "token {:?} is longer than {MAX_TOKEN_LEN} bytes",
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
            token: PaddedToken::new(t.token.as_bytes()),
            secret: t.token,
            sequences: t.sequences.iter().map(|p| WildMatch::new(p)).collect(),
            operations,
        });
    }
    Ok(rules)
}

/// A JSON error reply: `{"error": {"kind", "message"}}`. The `observe` middleware scrubs
/// its message of secrets (the URI's password, the tokens) before it is sent.
#[derive(Clone, Debug)]
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

    fn invalid_input(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": { "kind": self.kind, "message": self.message } }));
        let mut resp = (self.status, body).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        // For the middleware, which renders it again with the message scrubbed.
        resp.extensions_mut().insert(self);
        resp
    }
}

/// The status and kind an error is answered with.
fn classify(e: &Error) -> (StatusCode, &'static str) {
    match e {
        Error::InvalidName { .. } | Error::InvalidSpec { .. } | Error::InvalidArgument { .. } => {
            (StatusCode::BAD_REQUEST, "invalid_input")
        }
        Error::NoSuchSequence { .. } => (StatusCode::NOT_FOUND, "no_such_sequence"),
        Error::Exhausted { .. } => (StatusCode::CONFLICT, "exhausted"),
        Error::AlreadyExists { .. } => (StatusCode::CONFLICT, "already_exists"),
        Error::SpecConflict { .. } => (StatusCode::CONFLICT, "spec_conflict"),
        Error::WouldGoBackwards { .. } => (StatusCode::CONFLICT, "would_go_backwards"),
        Error::Contention { .. } => (StatusCode::SERVICE_UNAVAILABLE, "contention"),
        // A block client closed under a request; the service's own admin operations wait for
        // draws, so only a client closed by shutdown gets here: try again.
        Error::Closed { .. } => (StatusCode::SERVICE_UNAVAILABLE, "closed"),
        Error::CorruptDocument { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "corrupt_document"),
        Error::Database { .. } | Error::Timeout { .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "database")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let (status, kind) = classify(&e);
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

/// The JSON body of `req`, read only now (after the token was checked).
async fn json_body<T: DeserializeOwned>(req: Request) -> Result<T, ApiError> {
    let Json(body) = Json::<T>::from_request(req, &()).await.map_err(bad_json)?;
    Ok(body)
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

/// What the service knows of one sequence between two of its admin operations (its block
/// client is in the [`Pool`], retired by every admin operation).
#[derive(Default)]
struct Era {
    /// The sequence's shape, read by the era's first draw.
    shape: OnceCell<Shape>,
    /// A direct handle, for large counts of non-cyclic sequences.
    direct: OnceCell<Sequence>,
}

/// What the service needs to know of a sequence to answer draws.
struct Shape {
    step: i64,
    /// For a cyclic sequence, how many numbers one cycle holds.
    cycle: Option<u64>,
}

/// How many numbers one cycle of a cyclic sequence holds (`None` when it does not wrap).
fn cycle_len(s: &SequenceState) -> Option<u64> {
    if !s.cycle {
        return None;
    }
    let span = (i128::from(s.max) - i128::from(s.min)).checked_div(i128::from(s.step).abs())?;
    Some(u64::try_from(span.saturating_add(1)).unwrap_or(u64::MAX))
}

/// Per sequence: draws hold `era` shared, the service's admin operations exclusively.
#[derive(Default)]
struct Slot {
    era: RwLock<Era>,
    /// Draws of a cyclic sequence one at a time, so that the numbers of one response follow
    /// each other in the block client (and so repeat nothing when there are at most a cycle).
    serial: tokio::sync::Mutex<()>,
}

/// The service's shared state.
struct AppState {
    dispenser: Dispenser,
    /// The database URI, only to scrub its password from error messages.
    uri: String,
    tokens: Vec<TokenRule>,
    /// The block clients, one per sequence; used only under the sequence's era lock.
    pool: Pool,
    max_count: u64,
    /// One slot per sequence name used so far.
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Stats of direct handles already dropped (admin operations).
    retired: Mutex<Stats>,
    metrics: Metrics,
}

type Shared = Arc<AppState>;

impl AppState {
    /// The token of the request (401 when missing, malformed or unknown).
    fn authenticate(&self, headers: &HeaderMap) -> Result<&TokenRule, ApiError> {
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?;
        let presented = bearer_token(value).ok_or_else(|| {
            unauthorized("malformed Authorization header: expected Bearer <token>")
        })?;
        let presented = PaddedToken::new(presented.as_bytes());
        // Compare against every token, without stopping early.
        let mut found = None;
        for rule in &self.tokens {
            if rule.token.matches(&presented) {
                found = Some(rule);
            }
        }
        found.ok_or_else(|| unauthorized("unknown token"))
    }

    /// Whether `rule` may do `op` (on `name`, when given): 403 if not.
    fn permit(rule: &TokenRule, op: Op, name: Option<&str>) -> Result<(), ApiError> {
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
        Ok(())
    }

    /// The token of the request, if it may do `op` (on `name`, when given).
    fn authorize(
        &self,
        headers: &HeaderMap,
        op: Op,
        name: Option<&str>,
    ) -> Result<&TokenRule, ApiError> {
        let rule = self.authenticate(headers)?;
        AppState::permit(rule, op, name)?;
        Ok(rule)
    }

    /// `text` without the URI's password or any token.
    fn scrub(&self, text: &str) -> String {
        let mut out = dispenser::scrub(text, &self.uri);
        for rule in &self.tokens {
            if out.contains(&rule.secret) {
                out = out.replace(&rule.secret, "***");
            }
        }
        out
    }

    /// The slot of `name` (made on first use).
    fn slot(&self, name: &str) -> Arc<Slot> {
        Arc::clone(
            self.slots
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(name.to_owned())
                .or_default(),
        )
    }

    fn all_slots(&self) -> Vec<(String, Arc<Slot>)> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// The era's shape of `name`, read by the first draw of the era.
    async fn shape<'e>(&self, era: &'e Era, name: &str) -> Result<&'e Shape, Error> {
        era.shape
            .get_or_try_init(|| async {
                let state = self.dispenser.peek(name).await?;
                Ok(Shape {
                    step: state.step,
                    cycle: cycle_len(&state),
                })
            })
            .await
    }

    /// Runs the admin operation `op` on `name` with the draws of `name` shut out: first the
    /// sequence's clients are retired (what they hold given back), then `op` runs, then draws
    /// open fresh clients.
    async fn exclusive<T, F>(&self, name: &str, op: F) -> Result<T, Error>
    where
        F: Future<Output = Result<T, Error>>,
    {
        let slot = self.slot(name);
        let mut era = slot.era.write().await;
        let old = std::mem::take(&mut *era);
        self.retire(name, old).await;
        op.await
    }

    /// Retires the clients of an era: the block client from the pool (closed, what is safe
    /// given back), the direct handle (its stats kept).
    async fn retire(&self, name: &str, era: Era) {
        if let Err(e) = self.pool.retire(name).await {
            tracing::warn!("closing the block client of {name:?}: {e}");
        }
        if let Some(s) = era.direct.into_inner() {
            *self.retired.lock().unwrap_or_else(|p| p.into_inner()) += s.stats();
        }
    }

    async fn totals(&self) -> Stats {
        let mut total = *self.retired.lock().unwrap_or_else(|p| p.into_inner());
        for (_, slot) in self.all_slots() {
            let era = slot.era.read().await;
            if let Some(s) = era.direct.get() {
                total += s.stats();
            }
        }
        total += self.pool.stats();
        total
    }
}

/// Runs of consecutive numbers (`step` apart) as `{first, last, step, count}`.
fn as_runs(numbers: &[i64], step: i64) -> Vec<Value> {
    let mut runs: Vec<(i64, i64, u64)> = Vec::new();
    for &n in numbers {
        match runs.last_mut() {
            Some((_, last, count)) if i128::from(*last) + i128::from(step) == i128::from(n) => {
                *last = n;
                *count += 1;
            }
            _ => runs.push((n, n, 1)),
        }
    }
    runs.into_iter()
        .map(|(first, last, count)| {
            json!({ "first": first, "last": last, "step": step, "count": count })
        })
        .collect()
}

async fn next(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    st.authorize(&headers, Op::Next, Some(&name))?;
    if let Some(unknown) = query.keys().find(|k| k.as_str() != "count") {
        return Err(ApiError::invalid_input(format!(
            "unknown query parameter {unknown:?} (known: count)"
        )));
    }
    let count = match query.get("count") {
        None => 1,
        Some(c) => c
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=st.max_count).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_input(format!(
                    "count {c:?} must be a whole number from 1 to {}",
                    st.max_count
                ))
            })?,
    };
    dispenser::validate_name(&name)?;
    let slot = st.slot(&name);
    // Shared: an admin operation of the service waits for this draw, or this draw for it.
    let era = slot.era.read().await;
    let shape = st.shape(&era, &name).await?;
    let blocks = st.pool.get(&name).await?;
    if let Some(cycle) = shape.cycle {
        if count > cycle {
            return Err(ApiError::invalid_input(format!(
                "count {count} is more than one cycle of sequence {name:?} holds: ask for at most {cycle}"
            )));
        }
        let _serial = slot.serial.lock().await;
        let mut numbers = Vec::new();
        let mut seen = HashSet::new();
        for _ in 0..count {
            let n = blocks.next().await?;
            if !seen.insert(n) {
                // Other clients of the sequence drew a whole cycle while this request drew.
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "contention",
                    format!(
                        "other clients drew a whole cycle of sequence {name:?} during this request, so {n} came round again; the numbers drawn are a gap; try again"
                    ),
                ));
            }
            numbers.push(n);
        }
        st.metrics.issued.fetch_add(count, Relaxed);
        if count <= LIST_LIMIT {
            return Ok(Json(json!({ "numbers": numbers })));
        }
        let runs = as_runs(&numbers, shape.step);
        return Ok(Json(json!({ "count": count, "runs": runs })));
    }
    if count <= LIST_LIMIT {
        let mut numbers = Vec::new();
        for _ in 0..count {
            numbers.push(blocks.next().await?);
        }
        st.metrics.issued.fetch_add(count, Relaxed);
        return Ok(Json(json!({ "numbers": numbers })));
    }
    let seq = era
        .direct
        .get_or_try_init(|| st.dispenser.open(&name))
        .await?;
    let mut runs = Vec::new();
    let mut left = count;
    while left > 0 {
        let run = seq.next_n(left).await?;
        st.metrics.issued.fetch_add(run.count(), Relaxed);
        runs.push(json!({
            "first": run.first(), "last": run.last(), "step": run.step(), "count": run.count(),
        }));
        left = left.saturating_sub(run.count());
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

/// The answer of `create`: the state, with `"created"` saying whether this request made it.
fn created_reply(state: &SequenceState, created: bool) -> (StatusCode, Json<Value>) {
    let mut body = SequenceState::to_json(state);
    if let Some(o) = body.as_object_mut() {
        o.insert("created".into(), Value::Bool(created));
    }
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, Json(body))
}

/// `if_not_exists` found `state`: it must have the requested shape (the start and format only
/// apply at creation); nothing is written.
fn existing(state: &SequenceState, spec: &Spec) -> Result<(StatusCode, Json<Value>), ApiError> {
    let stored = Spec::default()
        .with_start(spec.start)
        .with_step(state.step)
        .with_min(state.min)
        .with_max(state.max)
        .with_cycle(state.cycle);
    if (stored.step, stored.min, stored.max, stored.cycle)
        != (spec.step, spec.min, spec.max, spec.cycle)
    {
        return Err(Error::SpecConflict {
            name: state.name.clone(),
            stored: stored.to_string(),
            requested: spec.to_string(),
        }
        .into());
    }
    Ok(created_reply(state, false))
}

async fn create(
    State(st): State<Shared>,
    req: Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let rule = st.authenticate(req.headers())?;
    AppState::permit(rule, Op::Create, None)?;
    let b: CreateBody = json_body(req).await?;
    AppState::permit(rule, Op::Create, Some(&b.name))?;
    let d = Spec::default();
    let spec = d
        .with_start(b.start.unwrap_or(d.start))
        .with_step(b.step.unwrap_or(d.step))
        .with_min(b.min.unwrap_or(d.min))
        .with_max(b.max.unwrap_or(d.max))
        .with_cycle(b.cycle);
    dispenser::validate_name(&b.name)?;
    spec.validate(&b.name)?;
    let format = b.format.as_deref().map(Format::parse).transpose()?;
    if b.if_not_exists {
        match st.dispenser.peek(&b.name).await {
            Ok(state) => return existing(&state, &spec),
            Err(Error::NoSuchSequence { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let made = st
        .exclusive(&b.name, async {
            match st.dispenser.create(&b.name, spec).await {
                Ok(_) => {}
                Err(Error::AlreadyExists { .. }) if b.if_not_exists => return Ok(None),
                Err(e) => return Err(e),
            }
            if let Some(f) = &format {
                st.dispenser.set_format(&b.name, Some(f)).await?;
            }
            st.dispenser.peek(&b.name).await.map(Some)
        })
        .await?;
    match made {
        Some(state) => Ok(created_reply(&state, true)),
        // Another client created it between our look and our insert.
        None => existing(&st.dispenser.peek(&b.name).await?, &spec),
    }
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
            // In its place, as the library and the CLI report it.
            Err(e) => {
                let name = match &e {
                    Error::CorruptDocument { name, .. } => name.as_str(),
                    _ => "?",
                };
                if rule.allows_name(name) {
                    let (_, kind) = classify(&e);
                    out.push(json!({
                        "name": name,
                        "error": { "kind": kind, "message": st.scrub(&e.to_string()) },
                    }));
                }
            }
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
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    st.authorize(req.headers(), Op::Advance, Some(&name))?;
    let b: AdvanceBody = json_body(req).await?;
    dispenser::validate_name(&name)?;
    let state = st
        .exclusive(&name, st.dispenser.advance_to(&name, b.to))
        .await?;
    Ok(Json(SequenceState::to_json(&state)))
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
    Path(name): Path<String>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    st.authorize(req.headers(), Op::Reset, Some(&name))?;
    let b: ResetBody = json_body(req).await?;
    dispenser::validate_name(&name)?;
    let state = st
        .exclusive(&name, st.dispenser.reset(&name, b.value, b.force))
        .await?;
    Ok(Json(SequenceState::to_json(&state)))
}

async fn delete(
    State(st): State<Shared>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    st.authorize(&headers, Op::Delete, Some(&name))?;
    dispenser::validate_name(&name)?;
    st.exclusive(&name, st.dispenser.delete(&name)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn healthz(State(st): State<Shared>) -> Result<Json<Value>, ApiError> {
    st.dispenser.ping().await?;
    Ok(Json(json!({ "status": "ok" })))
}

async fn metrics(State(st): State<Shared>) -> impl IntoResponse {
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

async fn observe(State(st): State<Shared>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let resp = as_json_error(&st, next.run(req).await).await;
    st.metrics
        .observe(resp.status().as_u16(), started.elapsed());
    resp
}

/// Every error answer leaves here as the JSON error body, its message scrubbed of the URI's
/// password and the tokens. Errors that axum answers itself (a path or query that does not
/// decode, a wrong method) come as plain text: they get the same body, keeping their headers
/// (such as `Allow`).
async fn as_json_error(st: &AppState, resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let mut error = match parts.extensions.remove::<ApiError>() {
        Some(e) => e,
        None => {
            let text = match axum::body::to_bytes(body, 64 * 1024).await {
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
            ApiError::new(status, kind, message)
        }
    };
    error.message = st.scrub(&error.message);
    let mut fresh = error.into_response();
    fresh.extensions_mut().remove::<ApiError>();
    for (k, v) in &parts.headers {
        if k != header::CONTENT_TYPE
            && k != header::CONTENT_LENGTH
            && !fresh.headers().contains_key(k)
        {
            fresh.headers_mut().insert(k.clone(), v.clone());
        }
    }
    fresh
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
///
/// `uri` is the database URI the dispenser was connected with, only to scrub its password
/// from error answers.
pub async fn run(dispenser: Dispenser, args: ServeArgs, uri: &str) -> dispenser::Result<()> {
    let tokens = load_tokens(args.tokens.as_ref())?;
    let block_options = BlockOptions::default()
        .with_size(args.block)
        .with_prefetch(Some(args.prefetch));
    let pool = Pool::new(dispenser.clone(), block_options)?;
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
        uri: uri.to_owned(),
        tokens,
        pool,
        max_count: args.max_count,
        slots: Mutex::new(HashMap::new()),
        retired: Mutex::new(Stats::default()),
        metrics: Metrics::new(),
    });
    println!("listening on http://{local}");
    tracing::info!("dispenser serve listening on {local}");
    let served = axum::serve(listener, router(state.clone()))
        .with_graceful_shutdown(shutdown_signal())
        .await;
    // Give back what the block clients still hold (each under its era lock, as an admin
    // operation: no draw of it is in flight).
    let (mut given_back, mut lost) = (0, 0);
    for (name, slot) in state.all_slots() {
        let era = slot.era.write().await;
        let outcome = state.pool.retire(&name).await;
        drop(era);
        match outcome {
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
        let dispenser = Dispenser::connect("mongodb://127.0.0.1:1", dispenser::Options::default())
            .await
            .unwrap();
        AppState {
            dispenser: dispenser.clone(),
            uri: "mongodb://app:pa55word-in-uri@127.0.0.1:1/".into(),
            tokens: tokens(),
            pool: Pool::new(dispenser.clone(), BlockOptions::default()).unwrap(),
            max_count: 10,
            slots: Mutex::new(HashMap::new()),
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

    #[tokio::test]
    async fn the_bearer_scheme_is_case_insensitive() {
        let st = state().await;
        for good in [
            "Bearer orders-token-0123456789",
            "bearer orders-token-0123456789",
            "BEARER orders-token-0123456789",
            "Bearer \t orders-token-0123456789 ",
        ] {
            let rule = st.authenticate(&bearer(good)).map_err(|e| e.message);
            assert_eq!(rule.map(|r| r.name.as_str()), Ok("orders"), "{good:?}");
        }
        for bad in [
            "Bearerorders-token-0123456789",
            "Bearer",
            "Token orders-token-0123456789",
        ] {
            assert!(st.authenticate(&bearer(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tokens_compare_over_a_fixed_length() {
        let real = PaddedToken::new(b"orders-token-0123456789");
        assert!(real.matches(&PaddedToken::new(b"orders-token-0123456789")));
        for other in [
            &b"orders-token-012345678"[..],
            b"orders-token-01234567890",
            b"orders-token-0123456789\0",
            b"",
            &[b'o'; MAX_TOKEN_LEN + 10],
        ] {
            assert!(!real.matches(&PaddedToken::new(other)), "{other:?}");
        }
        // Longer than the limit: never equal to a shorter prefix of it.
        let long = [b'x'; MAX_TOKEN_LEN + 1];
        assert!(!PaddedToken::new(&long[..MAX_TOKEN_LEN]).matches(&PaddedToken::new(&long)));
        let e = parse_tokens(&format!(
            r#"{{"tokens": [{{"name": "a", "token": "{}", "sequences": ["*"], "operations": []}}]}}"#,
            "y".repeat(MAX_TOKEN_LEN + 1)
        ))
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("longer than 256"), "{e}");
    }

    #[tokio::test]
    async fn error_messages_are_scrubbed_of_the_password_and_tokens() {
        let st = state().await;
        let out = st.scrub("sequence \"pa55word-in-uri\" and admin-token-0123456789 here");
        assert_eq!(out, "sequence \"***\" and *** here");
    }

    #[test]
    fn lists_of_numbers_become_runs() {
        let runs = as_runs(&[8, 9, 0, 1, 2, 7], 1);
        assert_eq!(
            runs,
            vec![
                json!({"first": 8, "last": 9, "step": 1, "count": 2}),
                json!({"first": 0, "last": 2, "step": 1, "count": 3}),
                json!({"first": 7, "last": 7, "step": 1, "count": 1}),
            ]
        );
        assert_eq!(
            as_runs(&[i64::MIN + 1, i64::MIN], -1),
            vec![json!({"first": i64::MIN + 1, "last": i64::MIN, "step": -1, "count": 2})]
        );
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
