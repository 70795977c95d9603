//! `bench --http`: the service's draws over HTTP beside the floor of its HTTP stack.
//!
//! Two targets answer `POST /v1/sequences/{name}/next`:
//! - **the service**: `dispenser serve` started in this process on `127.0.0.1:0` with its
//!   defaults and a token of its own (or the service at `--url`, with `--token`; an
//!   `https://` one with `--tls-ca`), drawing a fresh plain sequence `bench-http-…` created
//!   for the run; with `--tls-cert`/`--tls-key`, a second service started here serves it over
//!   HTTPS with that certificate (which the load's client pins), measured beside the plain
//!   one;
//! - **the floor**: the same HTTP stack (axum's `serve` over hyper's HTTP/1.1 server, the same
//!   versions, in the same process) answering `{"numbers":[n]}` from an atomic counter, with
//!   no authentication, no middleware and no database: what any service on this stack costs.
//!
//! Both are driven by the same load: `--connections` keep-alive HTTP/1.1 connections (hyper's
//! client), each sending one request at a time, every request timed; the runs alternate in
//! `--rounds` after a `--warmup`, so that both see the same noise. The load runs in the same
//! process as the servers, on the same cores. Every number answered is kept and checked for
//! duplicates (the service's and the floor's alike).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{Request, StatusCode, Uri, header};
use axum::routing::post;
use dispenser::queue::QueueSpec;
use dispenser::{Dispenser, Error, Options, Spec};
use http_body_util::BodyExt;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::rustls::pki_types::ServerName;

use super::args::BenchArgs;
use super::rtt::{DelayProxy, RttLabel};
use super::samples::percentile;
use crate::exit::Outcome;
use crate::serve::ServeArgs;

/// The request body: none.
type Body = http_body_util::Empty<axum::body::Bytes>;

/// One target's figures; its JSON keys are [`HTTP_RUN_KEYS`].
#[derive(Debug, Serialize)]
pub(super) struct HttpReport {
    pub(super) run: String,
    pub(super) url: String,
    pub(super) connections: u32,
    pub(super) requests: usize,
    pub(super) numbers: usize,
    pub(super) seconds: f64,
    pub(super) requests_per_s: f64,
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
    pub(super) max_us: f64,
    pub(super) errors: u64,
    pub(super) duplicates: usize,
    pub(super) throughput_vs_floor: Option<f64>,
    pub(super) p50_vs_floor: Option<f64>,
    pub(super) p99_vs_floor: Option<f64>,
    /// With `--rtt`: the round trip the service's database was put at (milliseconds asked;
    /// 0 for its twin whose database is not delayed, `null` for the floor and without it).
    pub(super) database_rtt_ms: Option<f64>,
    /// With `--rtt`: the delayed service's requests/s and p99 as ratios to its twin's, whose
    /// database is not delayed (same run).
    pub(super) throughput_vs_direct: Option<f64>,
    pub(super) p99_vs_direct: Option<f64>,
}

/// The keys of one run in `bench --http --json` (`runs[]`), as the guide's benchmarks
/// chapter documents them.
#[cfg(test)]
pub(super) const HTTP_RUN_KEYS: &[&str] = &[
    "run",
    "url",
    "connections",
    "requests",
    "numbers",
    "seconds",
    "requests_per_s",
    "p50_us",
    "p99_us",
    "max_us",
    "errors",
    "duplicates",
    "throughput_vs_floor",
    "p50_vs_floor",
    "p99_vs_floor",
    "database_rtt_ms",
    "throughput_vs_direct",
    "p99_vs_direct",
];

/// What the requests to one target measured.
#[derive(Default)]
struct HttpSample {
    numbers: Vec<i64>,
    latencies_ns: Vec<u64>,
    requests: usize,
    elapsed_s: f64,
    errors: u64,
}

impl HttpSample {
    /// Adds a sample taken at the same time (another connection): the longer time counts.
    fn merge(&mut self, other: HttpSample) {
        self.numbers.extend(other.numbers);
        self.latencies_ns.extend(other.latencies_ns);
        self.requests += other.requests;
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        self.errors += other.errors;
    }
}

/// A target: where it listens, the path drawn, the token sent (if any), and for HTTPS the
/// client's configuration and the server name it asks for.
struct Target {
    label: String,
    /// The round trip of its database (`--rtt`; 0 for the twin reached directly), if any.
    database_rtt_ms: Option<f64>,
    addr: String,
    authority: String,
    path: String,
    bearer: Option<String>,
    tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
}

/// The answer of a draw (its `numbers`) or of a queue's take (its ticket's `serial`), as
/// the load reads it.
#[derive(Deserialize)]
struct Drawn {
    #[serde(default)]
    numbers: Vec<i64>,
    serial: Option<i64>,
}

/// Runs `bench --http`; `Ok(false)` when a duplicate was found. The service's database
/// connections go to `through` (the delay proxy's address with `--rtt`, else `uri`); with
/// `--rtt` a twin service whose database is reached directly runs beside it.
pub(super) async fn run(
    uri: &str,
    through: &str,
    options: Options,
    args: &BenchArgs,
    proxy: Option<&DelayProxy>,
) -> dispenser::Result<bool> {
    let d = Dispenser::connect(through, options.clone()).await?;
    let direct = match proxy {
        Some(_) => Some(Dispenser::connect(uri, options).await?),
        None => None,
    };
    let stamp = format!(
        "bench-http-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|t| t.as_millis())
            .unwrap_or_default()
    );
    let twin = format!("{stamp}-direct");
    d.create(&stamp, Spec::default()).await?;
    let queue = format!("{stamp}-queue");
    if args.queue {
        // Its range never fills: every take is a ticket.
        d.create_queue(&queue, QueueSpec::default().with_max(1 << 62))
            .await?;
    }
    if let Some(direct) = &direct {
        direct.create(&twin, Spec::default()).await?;
    }
    let outcome = measure(&d, direct.as_ref(), uri, args, (&stamp, &twin)).await;
    // The bench leaves nothing behind.
    let _ = d.delete(&stamp).await;
    if args.queue {
        let _ = d.delete_queue(&queue).force(true).await;
    }
    if let Some(direct) = &direct {
        let _ = direct.delete(&twin).await;
    }
    let reports = outcome?;
    print(args, proxy.map(DelayProxy::label), &reports);
    Ok(reports.iter().all(|r| r.duplicates == 0))
}

/// A service started in this process: how to stop it, its task, and the target it is.
type Started = (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<dispenser::Result<Outcome>>,
    Target,
);

/// How a service started here is reached: its extra arguments (`--tls-cert`, `--tls-key`),
/// and for HTTPS the client's configuration and the server name it asks for.
type Variant = (
    Vec<std::path::PathBuf>,
    Option<(Arc<ClientConfig>, ServerName<'static>)>,
);

/// Starts `dispenser serve` with its defaults (and `extra` arguments) on a free loopback port
/// over `d`, drawing `name` with `token`.
async fn start_service(
    d: &Dispenser,
    uri: &str,
    (token, tokens): (&str, &str),
    name: &str,
    (label, database_rtt_ms): (&str, Option<f64>),
    (extra, tls): Variant,
) -> dispenser::Result<Started> {
    let serve_args = serve_defaults(&extra)?;
    let service = crate::serve::bind(d.clone(), &serve_args, uri, Some(tokens)).await?;
    let local = service.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let served = service
            .serve(async move {
                let _ = stopped.await;
            })
            .await;
        Ok(crate::serve::told(served))
    });
    let target = Target {
        label: label.into(),
        database_rtt_ms,
        addr: local.to_string(),
        authority: local.to_string(),
        path: format!("/v1/sequences/{name}/next"),
        bearer: Some(token.to_owned()),
        tls,
    };
    Ok((stop, task, target))
}

async fn measure(
    d: &Dispenser,
    direct: Option<&Dispenser>,
    uri: &str,
    args: &BenchArgs,
    (name, twin): (&str, &str),
) -> dispenser::Result<Vec<HttpReport>> {
    let path = format!("/v1/sequences/{name}/next");
    // The services: at --url, or started here with a token of its own (twice with
    // --tls-cert: over HTTPS and plain HTTP; with --rtt, a twin whose database is direct).
    let mut started = Vec::new();
    let mut targets = Vec::new();
    match &args.url {
        Some(url) => {
            let token = args.token.clone().ok_or_else(|| Error::InvalidArgument {
                what: "--token".into(),
                reason: "bench --http --url needs the bearer token of the service (--token or DISPENSER_TOKEN) that may draw bench-http-*".into(),
            })?;
            let (addr, authority, tls) = address_of(url, args.tls_ca.as_deref())?;
            targets.push(Target {
                label: format!("service at {}", authority),
                database_rtt_ms: None,
                addr,
                authority,
                path: path.clone(),
                bearer: Some(token),
                tls,
            });
        }
        None => {
            let token = fresh_token();
            let tokens = json!({ "tokens": [{
                "name": "bench", "token": token, "sequences": ["bench-http-*"], "operations": ["next", "take"],
            }]})
            .to_string();
            let mut variants: Vec<(String, Variant)> = Vec::new();
            let rtt = args.rtt;
            let at = |label: &str| match rtt {
                Some(ms) => format!("{label}, database +{ms} ms"),
                None => label.to_owned(),
            };
            if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
                let client = super::tls::pinned(cert)?;
                let extra = vec![
                    "--tls-cert".into(),
                    cert.clone(),
                    "--tls-key".into(),
                    key.clone(),
                ];
                variants.push((
                    at("service over HTTPS (TLS)"),
                    (extra, Some((client, super::tls::server_name("127.0.0.1")?))),
                ));
            }
            let label = match (variants.is_empty(), rtt) {
                (false, _) => "service over HTTP",
                (true, Some(_)) => "service",
                (true, None) => "service (dispenser serve)",
            };
            variants.push((at(label), (Vec::new(), None)));
            for (label, variant) in variants {
                let (stop, task, target) =
                    start_service(d, uri, (&token, &tokens), name, (&label, rtt), variant).await?;
                started.push((stop, task));
                targets.push(target);
            }
            if args.queue
                && let Some(service) = targets.last()
            {
                // The same service taking tickets of a queue (its one handle per queue
                // coalesces the takes of every connection).
                let queue = Target {
                    label: at("queue take, service"),
                    database_rtt_ms: service.database_rtt_ms,
                    addr: service.addr.clone(),
                    authority: service.authority.clone(),
                    path: format!("/v1/queues/{name}-queue/take"),
                    bearer: service.bearer.clone(),
                    tls: service.tls.clone(),
                };
                targets.push(queue);
            }
            if let Some(direct) = direct {
                let (stop, task, target) = start_service(
                    direct,
                    uri,
                    (&token, &tokens),
                    twin,
                    ("service, database direct", Some(0.0)),
                    (Vec::new(), None),
                )
                .await?;
                started.push((stop, task));
                targets.push(target);
            }
        }
    }
    let (stop_floor, floor_task, floor) = start_floor(&path).await?;
    targets.push(floor);
    let outcome = drive(&targets, args).await;
    // Stop them all (the services give back what their block clients hold).
    let _ = stop_floor.send(());
    let _ = floor_task.await;
    for (stop, task) in started {
        let _ = stop.send(());
        match task.await {
            Ok(Err(e)) => tracing::warn!("the benchmarked service failed: {e}"),
            Err(e) => tracing::warn!("the benchmarked service failed: {e}"),
            Ok(Ok(_)) => {}
        }
    }
    outcome
}

/// `dispenser serve`'s defaults, listening on a free port of the loopback, with `extra`
/// arguments.
fn serve_defaults(extra: &[std::path::PathBuf]) -> dispenser::Result<ServeArgs> {
    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }
    let argv = ["serve", "--listen", "127.0.0.1:0"]
        .into_iter()
        .map(std::ffi::OsString::from)
        .chain(extra.iter().map(|p| p.clone().into_os_string()));
    <Serve as clap::Parser>::try_parse_from(argv)
        .map(|s| s.args)
        .map_err(|e| Error::InvalidArgument {
            what: "bench --http".into(),
            reason: format!("the service's default arguments: {e}"),
        })
}

/// A token no one else knows (for the service started here only): 32 hexadecimal digits
/// from the process's random hasher keys, the time and the process id.
fn fresh_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::new();
    for i in 0..2_u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|t| t.as_nanos())
                .unwrap_or_default(),
        );
        h.write_u32(std::process::id());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// What the load needs of a target's URL.
type Address = (
    String,
    String,
    Option<(Arc<ClientConfig>, ServerName<'static>)>,
);

/// The socket address (`host:port`) and authority of an `http://` URL, or of an `https://`
/// one (with the client of `ca`, the authorities its certificate must chain to).
fn address_of(url: &str, ca: Option<&std::path::Path>) -> dispenser::Result<Address> {
    let bad = |why: &str| Error::InvalidArgument {
        what: "--url".into(),
        reason: format!("{url:?} {why}: give one such as http://127.0.0.1:8080"),
    };
    let parsed: Uri = url.parse().map_err(|_| bad("is not a URL"))?;
    let https = match parsed.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(bad("is not an http:// or https:// URL")),
    };
    let authority = parsed
        .authority()
        .ok_or_else(|| bad("has no host"))?
        .to_string();
    let host = parsed.host().ok_or_else(|| bad("has no host"))?;
    let port = parsed.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tls = match (https, ca) {
        (false, _) => None,
        (true, Some(ca)) => Some((super::tls::trusting(ca)?, super::tls::server_name(host)?)),
        (true, None) => {
            return Err(bad(
                "is an https:// URL: give the authorities its certificate chains to with --tls-ca",
            ));
        }
    };
    Ok((format!("{host}:{port}"), authority, tls))
}

/// The floor: axum's `serve` over hyper's HTTP/1.1 server (as the service), answering
/// `{"numbers":[n]}` from an atomic counter on the service's draw path.
async fn start_floor(
    path: &str,
) -> dispenser::Result<(
    oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
    Target,
)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::InvalidArgument {
            what: "bench --http".into(),
            reason: format!("cannot listen for the floor on the loopback: {e}"),
        })?;
    let local: SocketAddr = listener.local_addr().map_err(|e| Error::InvalidArgument {
        what: "bench --http".into(),
        reason: e.to_string(),
    })?;
    async fn constant(State(counter): State<Arc<AtomicI64>>) -> Json<Value> {
        Json(json!({ "numbers": [counter.fetch_add(1, Ordering::Relaxed)] }))
    }
    let router = Router::new()
        .route("/v1/sequences/{name}/next", post(constant))
        .with_state(Arc::new(AtomicI64::new(1)));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    let target = Target {
        label: "floor (same stack, constant)".into(),
        database_rtt_ms: None,
        addr: local.to_string(),
        authority: local.to_string(),
        path: path.to_owned(),
        bearer: None,
        tls: None,
    };
    Ok((stop, task, target))
}

/// Warms both targets up, then measures them in alternating rounds, each over the same
/// number of kept-alive connections (opened once per target, before the warm-up).
async fn drive(targets: &[Target], args: &BenchArgs) -> dispenser::Result<Vec<HttpReport>> {
    let mut pools = Vec::new();
    for target in targets {
        let mut senders = Vec::new();
        for _ in 0..args.connections {
            senders.push(connect(target).await?);
        }
        pools.push(senders);
    }
    let rounds = u64::from(args.rounds);
    let slice = args
        .duration
        .map(|d| Duration::from_secs_f64(d) / args.rounds);
    let mut totals: Vec<HttpSample> = targets.iter().map(|_| HttpSample::default()).collect();
    // Warm-up numbers are checked for duplicates too, but not measured.
    let mut warm: Vec<Vec<i64>> = targets.iter().map(|_| Vec::new()).collect();
    for ((target, pool), warm) in targets.iter().zip(&mut pools).zip(&mut warm) {
        if args.warmup > 0 {
            let (sample, back) = round(target, std::mem::take(pool), args.warmup, None).await;
            *pool = back;
            warm.extend(sample.numbers);
        }
    }
    let cap = args.count_cap();
    for r in 0..rounds {
        let quota = cap.map_or(u64::MAX, |c| c / rounds + u64::from(r < c % rounds));
        for ((target, pool), total) in targets.iter().zip(&mut pools).zip(&mut totals) {
            if quota == 0 {
                continue;
            }
            let (sample, back) = round(target, std::mem::take(pool), quota, slice).await;
            *pool = back;
            let elapsed = total.elapsed_s + sample.elapsed_s;
            total.merge(sample);
            total.elapsed_s = elapsed;
        }
    }
    let mut reports: Vec<HttpReport> = targets
        .iter()
        .zip(totals)
        .zip(warm)
        .map(|((target, sample), warm)| report(target, args.connections, sample, warm))
        .collect();
    if let Some(floor) = reports.last() {
        let (thr, p50, p99) = (floor.requests_per_s, floor.p50_us, floor.p99_us);
        for r in &mut reports {
            r.throughput_vs_floor = (thr > 0.0).then(|| r.requests_per_s / thr);
            r.p50_vs_floor = (p50 > 0.0).then(|| r.p50_us / p50);
            r.p99_vs_floor = (p99 > 0.0).then(|| r.p99_us / p99);
        }
    }
    // The delayed service beside its twin whose database is not delayed.
    let twin = reports
        .iter()
        .find(|r| r.database_rtt_ms == Some(0.0))
        .map(|r| (r.requests_per_s, r.p99_us));
    if let Some((thr, p99)) = twin {
        for r in reports
            .iter_mut()
            .filter(|r| r.database_rtt_ms.is_some_and(|ms| ms > 0.0))
        {
            r.throughput_vs_direct = (thr > 0.0).then(|| r.requests_per_s / thr);
            r.p99_vs_direct = (p99 > 0.0).then(|| r.p99_us / p99);
        }
    }
    Ok(reports)
}

/// Opens one kept-alive HTTP/1.1 connection to `target`.
async fn connect(target: &Target) -> dispenser::Result<SendRequest<Body>> {
    let failed = |e: String| Error::InvalidArgument {
        what: "bench --http".into(),
        reason: format!("cannot connect to {} ({}): {e}", target.label, target.addr),
    };
    let stream = TcpStream::connect(&target.addr)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let _ = stream.set_nodelay(true);
    let Some((config, name)) = &target.tls else {
        return handshake(stream).await.map_err(failed);
    };
    let tls = TlsConnector::from(Arc::clone(config))
        .connect(name.clone(), stream)
        .await
        .map_err(|e| failed(format!("TLS: {e}")))?;
    handshake(tls).await.map_err(failed)
}

/// HTTP/1.1 over `io`, its connection driven by a task of its own.
async fn handshake<T>(io: T) -> Result<SendRequest<Body>, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("bench connection closed: {e}");
        }
    });
    Ok(sender)
}

/// One round on `target`: each connection sends requests one at a time until the round's
/// `quota` of requests (shared out) or its time is up, whichever comes first. Gives the connections back (a broken
/// one replaced by a fresh one when possible).
async fn round(
    target: &Target,
    pool: Vec<SendRequest<Body>>,
    quota: u64,
    slice: Option<Duration>,
) -> (HttpSample, Vec<SendRequest<Body>>) {
    let started = Instant::now();
    let deadline = slice.map(|s| started + s);
    let connections = pool.len() as u64;
    let mut handles = Vec::new();
    for (c, mut sender) in pool.into_iter().enumerate() {
        let c = c as u64;
        let share = if quota == u64::MAX {
            u64::MAX
        } else {
            quota / connections + u64::from(c < quota % connections)
        };
        let request = request_template(target);
        handles.push(tokio::spawn(async move {
            let mut s = HttpSample::default();
            let mut sent = 0;
            loop {
                let done = sent >= share || deadline.is_some_and(|d| Instant::now() >= d);
                if done || sender.is_closed() {
                    break;
                }
                sent += 1;
                let t0 = Instant::now();
                match exchange(&mut sender, request.clone()).await {
                    Ok(numbers) => {
                        s.latencies_ns
                            .push(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
                        s.numbers.extend(numbers);
                    }
                    Err(e) => {
                        s.errors += 1;
                        if s.errors <= 3 {
                            tracing::warn!("bench --http request failed: {e}");
                        }
                    }
                }
                s.requests += 1;
            }
            s.elapsed_s = started.elapsed().as_secs_f64();
            (s, sender)
        }));
    }
    let mut total = HttpSample::default();
    let mut back = Vec::new();
    for h in handles {
        match h.await {
            Ok((s, sender)) => {
                total.merge(s);
                if sender.is_closed() {
                    match connect(target).await {
                        Ok(fresh) => back.push(fresh),
                        Err(e) => tracing::warn!("{e}"),
                    }
                } else {
                    back.push(sender);
                }
            }
            Err(_) => total.errors += 1,
        }
    }
    (total, back)
}

/// The request every connection sends to `target` (cloned per request: its head only).
fn request_template(target: &Target) -> Request<()> {
    let mut builder = Request::post(target.path.as_str())
        .header(header::HOST, target.authority.as_str())
        .header(header::CONTENT_LENGTH, "0");
    if let Some(token) = &target.bearer {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    builder.body(()).unwrap_or_default()
}

/// Sends one request and reads the numbers of its answer.
async fn exchange(
    sender: &mut SendRequest<Body>,
    template: Request<()>,
) -> Result<Vec<i64>, String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let (parts, ()) = template.into_parts();
    let resp = sender
        .send_request(Request::from_parts(parts, Body::new()))
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if status != StatusCode::OK {
        return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
    }
    serde_json::from_slice::<Drawn>(&body)
        .map(|d| match d.serial {
            Some(serial) => vec![serial],
            None => d.numbers,
        })
        .map_err(|e| {
            format!(
                "an answer without numbers ({e}): {}",
                String::from_utf8_lossy(&body)
            )
        })
}

/// The figures of one target (its duplicates counted over the measured and the warm-up
/// numbers).
fn report(target: &Target, connections: u32, mut s: HttpSample, warm: Vec<i64>) -> HttpReport {
    s.latencies_ns.sort_unstable();
    let numbers = s.numbers.len();
    let mut all = s.numbers;
    all.extend(warm);
    all.sort_unstable();
    let duplicates = all.windows(2).filter(|w| w[0] == w[1]).count();
    HttpReport {
        run: target.label.clone(),
        url: format!(
            "{}://{}{}",
            if target.tls.is_some() {
                "https"
            } else {
                "http"
            },
            target.authority,
            target.path
        ),
        connections,
        requests: s.requests,
        numbers,
        seconds: s.elapsed_s,
        requests_per_s: if s.elapsed_s > 0.0 {
            s.latencies_ns.len() as f64 / s.elapsed_s
        } else {
            0.0
        },
        p50_us: percentile(&s.latencies_ns, 50),
        p99_us: percentile(&s.latencies_ns, 99),
        max_us: s.latencies_ns.last().map_or(0.0, |v| *v as f64 / 1000.0),
        errors: s.errors,
        duplicates,
        throughput_vs_floor: None,
        p50_vs_floor: None,
        p99_vs_floor: None,
        database_rtt_ms: target.database_rtt_ms,
        throughput_vs_direct: None,
        p99_vs_direct: None,
    }
}

/// The table's columns: header and width (the first left-aligned).
const COLUMNS: &[(&str, usize)] = &[
    ("run", 30),
    ("requests", 9),
    ("requests/s", 11),
    ("p50 us", 8),
    ("p99 us", 8),
    ("max us", 9),
    ("errors", 6),
    ("dups", 5),
    ("x floor/s", 9),
    ("x p50", 6),
    ("x p99", 6),
    ("x direct/s", 10),
    ("x dir p99", 9),
];

fn cells(r: &HttpReport) -> Vec<String> {
    let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    vec![
        r.run.clone(),
        r.requests.to_string(),
        format!("{:.0}", r.requests_per_s),
        format!("{:.1}", r.p50_us),
        format!("{:.1}", r.p99_us),
        format!("{:.1}", r.max_us),
        r.errors.to_string(),
        r.duplicates.to_string(),
        ratio(r.throughput_vs_floor),
        ratio(r.p50_vs_floor),
        ratio(r.p99_vs_floor),
        ratio(r.throughput_vs_direct),
        ratio(r.p99_vs_direct),
    ]
}

fn table(reports: &[HttpReport]) -> Vec<String> {
    let header: Vec<String> = COLUMNS.iter().map(|(h, _)| (*h).to_owned()).collect();
    std::iter::once(header)
        .chain(reports.iter().map(cells))
        .map(|row| {
            let mut line = String::new();
            for (i, (cell, (_, width))) in row.iter().zip(COLUMNS).enumerate() {
                if i == 0 {
                    line.push_str(&format!("{cell:<width$}"));
                } else {
                    line.push_str(&format!(" {cell:>width$}"));
                }
            }
            line
        })
        .collect()
}

/// The JSON report: `{"connections", "rounds", "rtt", "runs": [..]}`, each run with
/// [`HTTP_RUN_KEYS`] (`rtt` as in `bench --json`).
fn as_json(args: &BenchArgs, rtt: Option<RttLabel>, reports: &[HttpReport]) -> Value {
    json!({
        "connections": args.connections,
        "rounds": args.rounds,
        "rtt": rtt.map(|r| json!({ "asked_ms": r.asked_ms, "applied_ms": r.applied_ms })),
        "runs": reports,
    })
}

fn print(args: &BenchArgs, rtt: Option<RttLabel>, reports: &[HttpReport]) {
    if args.json {
        println!("{}", as_json(args, rtt, reports));
        return;
    }
    println!(
        "dispenser bench --http: {} keep-alive connection(s), {} round(s); the load runs in this process, on the same cores as the servers{}",
        args.connections,
        args.rounds,
        rtt.map_or_else(String::new, |r| format!("; the service's {}", r.describe()))
    );
    for line in table(reports) {
        println!("{line}");
    }
    for r in reports.iter().filter(|r| r.errors > 0) {
        println!("{}: {} request(s) failed (see the log)", r.run, r.errors);
    }
    if let Some(q) = reports.iter().find(|r| r.url.contains("/v1/queues/")) {
        // The sequence drawn through the same service: the run just before the queue's.
        let draws = reports
            .iter()
            .take_while(|r| !r.url.contains("/v1/queues/"))
            .last();
        if let Some(s) = draws.filter(|s| s.requests_per_s > 0.0) {
            println!(
                "{}: {:.2}x the draws of a sequence through the same service ({:.0} tickets/s, {:.0} numbers/s); {} take(s) gave up",
                q.run,
                q.requests_per_s / s.requests_per_s,
                q.requests_per_s,
                s.requests_per_s,
                q.errors
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> HttpReport {
        report(
            &Target {
                label: "floor".into(),
                database_rtt_ms: None,
                addr: "127.0.0.1:1".into(),
                authority: "127.0.0.1:1".into(),
                path: "/v1/sequences/s/next".into(),
                bearer: None,
                tls: None,
            },
            4,
            HttpSample {
                numbers: vec![1, 2, 3],
                latencies_ns: vec![3000, 1000, 2000],
                requests: 3,
                elapsed_s: 1.0,
                errors: 0,
            },
            vec![3],
        )
    }

    #[test]
    fn a_number_answered_twice_is_a_duplicate_warm_up_included() {
        let r = sample();
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.numbers, 3);
        assert_eq!(r.max_us, 3.0);
        assert_eq!(r.requests_per_s, 3.0);
    }

    #[test]
    fn the_json_and_the_table_have_the_documented_columns() {
        let value = serde_json::to_value(sample()).unwrap();
        let mut keys: Vec<_> = value.as_object().unwrap().keys().cloned().collect();
        let mut want: Vec<_> = HTTP_RUN_KEYS.iter().map(|k| (*k).to_owned()).collect();
        keys.sort();
        want.sort();
        assert_eq!(keys, want);
        let lines = table(&[sample()]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].chars().count(), lines[1].chars().count());
    }

    #[test]
    fn urls_are_read_as_host_port_and_authority() {
        let (addr, authority, tls) = address_of("http://127.0.0.1:8080", None).unwrap();
        assert_eq!(
            (addr.as_str(), authority.as_str()),
            ("127.0.0.1:8080", "127.0.0.1:8080")
        );
        assert!(tls.is_none());
        assert_eq!(
            address_of("http://localhost/", None).unwrap().0,
            "localhost:80".to_owned()
        );
        // https needs the authorities to trust.
        let e = address_of("https://h:1", None).unwrap_err();
        assert!(e.to_string().contains("--tls-ca"), "{e}");
        assert!(address_of("ftp://h:1", None).is_err());
        assert!(address_of("nonsense", None).is_err());
    }
}
