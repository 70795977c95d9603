//! `dispenser serve`: an HTTP dispensing service, so that clients in any language can draw
//! numbers and only the service needs database rights.
//!
//! Numbers are drawn through block clients with prefetch (one per sequence, shared by all
//! requests), so most requests need no database round trip; on shutdown the unused block
//! tails are given back. Every endpoint except `/healthz` and `/metrics` (which takes its own
//! `--metrics-token` when given one) needs a bearer token;
//! each token is allowed a set of sequence names (globs) and operations. Tokens are compared
//! in constant time (over a fixed length) and never logged; the token is checked before the
//! request body is read.
//!
//! Connections are capped and timed (`conn.rs`: `--max-connections`, `--header-timeout`,
//! `--idle-timeout`, `--unauthenticated-idle-timeout`; at the cap a waiting connection that
//! never sent a valid token makes room for a new one), the boards' event streams capped
//! (`--max-streams-per-token`, `--max-streams-per-queue`, half of the connections in all),
//! requests cut at `--request-timeout` (408 for a body that does not arrive, 503 otherwise),
//! and every error answer is JSON, hyper's own included.
//!
//! The service's own admin operations (create, advance, reset, delete) are ordered with the
//! draws of the same sequence: draws hold the sequence's [`Slot`] lock shared, admin operations
//! exclusively; under it they retire the sequence's clients (the block client from the [`Pool`],
//! giving back what it holds), write, and only then let draws open fresh clients. So nothing is served, after an admin operation
//! returned, from a block reserved before it.
//!
//! The files, each using only files named after it: `mod.rs` (router, startup, shutdown);
//! `openapi.rs`; the endpoints `draw.rs`, `handlers.rs`, `gapless.rs`, `queues.rs`,
//! `overview.rs`, `history.rs` (the history of admin operations), `scrape.rs` (`/metrics`)
//! and `ui/`; `tls.rs` (HTTPS) and `reload.rs` (SIGHUP); `guard.rs` (what every request passes
//! before the router: one service per connection) and `observe.rs` (counting, timing and the
//! JSON error answers); `auth.rs` (who may do what), `classify.rs` (library error to status),
//! `names.rs`, `json.rs` (request bodies), `errors.rs` (`ApiError`), `make.rs` (the one
//! create/ensure path of the creating endpoints); the state: `state.rs`
//! over `tokens.rs`, `metrics.rs` and `queue_state.rs`; `answers.rs` (the answers: the types
//! the endpoints return, whose schemas the document derives) and `conn.rs` (connections).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::middleware;
use axum::routing::{get, post};
use axum::{Extension, Router};
use dispenser::{
    Dispenser, Error,
    block::{BlockOptions, Pool},
};

use tower_http::trace::TraceLayer;

use crate::args::{MAX_BLOCK, MAX_COUNT, parse_share, parse_timeout, whole};
use crate::exit::Outcome;
use conn::{Capped, Limits};
use draw::next;
use errors::fallback;
use guard::PerConnection;
use handlers::{advance, alter, create, delete, healthz, hourly, list, peek, reset};
use metrics::Metrics;
use queue_state::{
    Queues, STREAMS_PER_QUEUE, STREAMS_PER_TOKEN, StreamLimits, TICKET_STREAMS_PER_ADDRESS,
    TICKET_STREAMS_PER_QUEUE,
};
use scrape::{MetricsToken, metrics, require_token};
use state::{AppState, Shared};
use tokens::load_tokens;

mod answers;
mod auth;
mod classify;
mod conn;
mod draw;
mod errors;
mod feed;
mod gapless;
mod guard;
mod handlers;
mod history;
mod json;
mod links;
mod make;
mod metrics;
mod names;
mod observe;
mod openapi;
mod overview;
mod qr;
mod queue_state;
mod queues;
mod reload;
mod scrape;
mod state;
#[cfg(test)]
mod tests;
mod ticket;
mod tls;
mod tokens;
mod ui;

/// `dispenser serve`.
#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the first line on stdout says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// JSON file with the tokens (else the environment variable DISPENSER_TOKENS holds the
    /// JSON): {"tokens": [{"name", "token", "sequences": [globs], "operations": [...]}]}.
    /// SIGHUP reads the file again (tokens in DISPENSER_TOKENS cannot change).
    #[arg(long)]
    pub tokens: Option<std::path::PathBuf>,
    /// The starting block size of the block client each sequence is served through (blocks
    /// grow to keep ahead of fast callers, up to --max-block).
    #[arg(long, default_value_t = 1000, value_parser = whole::<u64>(1, MAX_BLOCK), allow_negative_numbers = true)]
    pub block: u64,
    /// The largest block a sequence's client may reserve (what a crash of the service can
    /// burn, twice: the current block and the prefetched one); at least --block.
    #[arg(long, default_value_t = 100_000, value_parser = whole::<u64>(1, MAX_BLOCK), allow_negative_numbers = true)]
    pub max_block: u64,
    /// The largest share of the numbers left before a sequence's bound (of one cycle, for a
    /// cyclic sequence) that one block may hold (0 < share ≤ 1; at least one number).
    #[arg(long, default_value_t = 0.01, value_parser = parse_share, allow_negative_numbers = true)]
    pub block_share: f64,
    /// Reserve the next block in the background once this share of the current one is used.
    #[arg(long, default_value_t = 0.5, value_parser = parse_share, allow_negative_numbers = true)]
    pub prefetch: f64,
    /// Seconds a sequence's block client may go without a draw before the service closes
    /// it and gives back the numbers it holds (0: never). The next draw opens a fresh one.
    #[arg(long, default_value_t = 300.0, value_parser = parse_idle_release, allow_negative_numbers = true)]
    pub block_idle_release: f64,
    /// The largest count one request may ask for.
    #[arg(long, default_value_t = 100_000, value_parser = whole::<u64>(1, MAX_COUNT), allow_negative_numbers = true)]
    pub max_count: u64,
    /// Seconds a request may take before it is answered 503 `timeout` (a draw cut short is a
    /// gap, never a duplicate), or 408 `request_timeout` when its body had not arrived.
    #[arg(long, default_value_t = 30.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub request_timeout: f64,
    /// Seconds a request head may take to arrive: on a new connection from its start, on a
    /// kept-alive one from the request's first byte. A connection past it is closed.
    #[arg(long, default_value_t = 10.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub header_timeout: f64,
    /// Seconds a kept-alive connection may wait for its next request before it is closed,
    /// once a request on it carried a valid token.
    #[arg(long, default_value_t = 60.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub idle_timeout: f64,
    /// Seconds a connection may wait for a request until one of its requests carried a valid
    /// token (a new connection's first byte included); at most --idle-timeout.
    #[arg(long, default_value_t = 5.0, value_parser = parse_timeout, allow_negative_numbers = true)]
    pub unauthenticated_idle_timeout: f64,
    /// Connections open at once [default: 10000, or what the open-file limit allows less
    /// 128]. At the cap, a connection waiting for a request is closed to make room for a new
    /// one (first those that never sent a valid token, the longest waiting first); new ones
    /// wait only while every connection is serving a request or stream.
    #[arg(long, value_parser = whole::<u64>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_connections: Option<u64>,
    /// Board event streams (GET /ui/queues/{name}/events) one token may hold open at once;
    /// one more is answered 429 `too_many_streams`.
    #[arg(long, default_value_t = STREAMS_PER_TOKEN, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_streams_per_token: usize,
    /// Board event streams open at once on one queue; one more is answered 503
    /// `too_many_streams` (as is one past half of --max-connections, the most streams take).
    #[arg(long, default_value_t = STREAMS_PER_QUEUE, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_streams_per_queue: usize,
    /// Ticket streams (GET /ui/queues/{name}/tickets/{serial}/events: the phones following
    /// their tickets) open at once from one client address; one more is answered 429
    /// `too_many_streams` (the page then looks every few seconds instead).
    #[arg(long, default_value_t = TICKET_STREAMS_PER_ADDRESS, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_ticket_streams_per_address: usize,
    /// Ticket streams open at once on one queue; one more is answered 503 `too_many_streams`
    /// (as is one past a quarter of --max-connections, the most ticket streams take: apart
    /// from the boards' half).
    #[arg(long, default_value_t = TICKET_STREAMS_PER_QUEUE, value_parser = whole::<usize>(1, 1_000_000), allow_negative_numbers = true)]
    pub max_ticket_streams_per_queue: usize,
    /// The service's address as people's phones reach it (`https://tickets.example.org`): the
    /// start of the ticket links the board and the kiosk show as QR codes. Default: the
    /// address the board or kiosk itself reached the service at.
    #[arg(long, value_name = "URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// The most sequences with series of their own on /metrics: those this service drew
    /// from, the most used first (0: none; the totals always count every sequence).
    #[arg(long, default_value_t = 1000, value_parser = whole::<usize>(0, 1_000_000), allow_negative_numbers = true)]
    pub metrics_max_sequences: usize,
    /// A token /metrics then requires (`Authorization: Bearer <it>`, 16 to 256 bytes, not an
    /// API token); without it /metrics needs none. Prefer the environment variable: a
    /// command line is visible to other users.
    #[arg(long, env = "DISPENSER_METRICS_TOKEN", hide_env_values = true, value_parser = secret)]
    pub metrics_token: Option<Secret>,
    /// Serve HTTPS only, with this certificate chain (PEM, the server's certificate first);
    /// needs --tls-key. SIGHUP reads it again for new connections.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM). SIGHUP reads it again.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require a client certificate issued by one of these authorities (PEM), in addition
    /// to a token; needs --tls-cert. SIGHUP reads it again.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<std::path::PathBuf>,
}

/// `--block-idle-release`: 0 (never) or a number of seconds up to a day.
fn parse_idle_release(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(v.is_finite() && (0.0..=86_400.0).contains(&v)) {
        return Err(format!(
            "{s} must be 0 (never) or a number of seconds up to 86400"
        ));
    }
    Ok(v)
}

/// `--public-url`: `http://` or `https://`, a host, maybe a port and a path; no query or
/// fragment; at most 200 characters. The final `/` is dropped.
fn parse_public_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or_else(|| format!("{s:?} must start with https:// or http://"))?;
    let host = rest.split('/').next().unwrap_or("");
    if s.len() > 200 {
        return Err(format!("{s:?} is longer than 200 characters"));
    }
    if host.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'?' | b'#' | b'"' | b'<' | b'>'))
    {
        return Err(format!(
            "{s:?} must be a URL such as https://tickets.example.org (a host, maybe a port and a path; no spaces, query or fragment)"
        ));
    }
    Ok(s.trim_end_matches('/').to_owned())
}

/// Closes the block clients no draw used for `idle` (checked every quarter of it, at least
/// every second), each under its sequence's era lock like an admin operation, so that what
/// they hold is given back. A sequence being drawn right now is not idle and is skipped.
async fn release_idle_blocks(state: Shared, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        state.release_idle(idle).await;
    }
}

/// A secret from the command line or the environment, never shown (`Debug` hides it).
#[derive(Clone)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Never fails: a secret is checked after parsing, where the error cannot echo it.
fn secret(s: &str) -> Result<Secret, String> {
    Ok(Secret(s.to_owned()))
}

fn router(state: Shared, metrics_token: MetricsToken) -> Router {
    let router = Router::new()
        .route("/v1/sequences", get(list).post(create))
        .route("/v1/sequences/{name}", get(peek).delete(delete))
        .route("/v1/sequences/{name}/next", post(next))
        .route("/v1/sequences/{name}/hourly", get(hourly))
        .route("/v1/sequences/{name}/advance-to", post(advance))
        .route("/v1/sequences/{name}/alter", post(alter))
        .route("/v1/sequences/{name}/reset", post(reset))
        .merge(gapless::routes())
        .merge(history::routes())
        .route("/v1/queues", post(queues::create).get(queues::list))
        .route(
            "/v1/queues/{name}",
            get(queues::peek).delete(queues::delete),
        )
        .route("/v1/queues/{name}/take", post(queues::take))
        .route("/v1/queues/{name}/call", post(queues::call))
        .route("/v1/queues/{name}/recall", post(queues::recall))
        .route("/v1/queues/{name}/finish", post(queues::finish))
        .route("/v1/queues/{name}/cancel", post(queues::cancel))
        .route("/v1/queues/{name}/give-up", post(ticket::give_up))
        .route("/v1/queues/{name}/tickets/{serial}", get(ticket::view))
        .route("/v1/queues/{name}/ticket-link", get(ticket::ticket_link))
        .route("/v1/queues/{name}/alter", post(queues::alter))
        .route("/v1/overview", get(overview::overview))
        .merge(ui::routes())
        .route("/healthz", get(healthz))
        .route(
            "/metrics",
            get(metrics).route_layer(middleware::from_fn_with_state(
                metrics_token.clone(),
                require_token,
            )),
        )
        .route(
            "/openapi.json",
            get(openapi::openapi).layer(Extension(metrics_token)),
        )
        .fallback(fallback);
    // What every request passes before the router is `guard.rs`, around the whole router;
    // the trace span (when asked for) covers the router.
    let router = if observe::traced() {
        router.layer(TraceLayer::new_for_http())
    } else {
        router
    };
    router.with_state(state)
}

/// The stop signals (SIGTERM, SIGINT), registered when this is called — before the service
/// says it listens — so a signal sent as soon as the address is printed stops it gracefully
/// instead of taking the signal's default action (the process killed, its block clients'
/// numbers lost as a gap). The future ends at the first of them.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let interrupt = signal(SignalKind::interrupt()).ok();
        let wait = |s: Option<Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        async move {
            tokio::select! {
                () = wait(term) => {},
                () = wait(interrupt) => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Entry point of `dispenser serve`.
///
/// `uri` is the database URI the dispenser was connected with, only to scrub its password
/// from error answers.
pub async fn run(dispenser: Dispenser, args: ServeArgs, uri: &str) -> dispenser::Result<Outcome> {
    let service = Service::bind(dispenser, &args, uri, None).await?;
    #[cfg(unix)]
    let reloads = reload::listen().map(|hangups| {
        tokio::spawn(reload::on_hangup(
            hangups,
            reload::Reloadable {
                tls: service.tls.clone(),
                state: Arc::clone(&service.state),
                tokens: args.tokens.clone(),
                metrics_token: service.metrics_token.clone(),
            },
        ))
    });
    let stop = shutdown_signal();
    println!("listening on {}", service.url());
    let outcome = service.serve(stop).await;
    #[cfg(unix)]
    if let Some(task) = reloads {
        task.abort();
    }
    outcome
}

/// A service bound to its address, not yet serving (`dispenser serve`, and `bench --http`,
/// which starts one in its own process).
pub struct Service {
    listener: tokio::net::TcpListener,
    /// The address it listens on.
    pub local: SocketAddr,
    limits: Limits,
    state: Shared,
    metrics_token: MetricsToken,
    /// `--block-idle-release`, when not 0.
    idle_release: Option<Duration>,
    /// `--tls-cert`: every connection speaks TLS.
    tls: Option<Arc<tls::Tls>>,
}

impl Service {
    /// Checks the arguments, binds `--listen` and builds the service's state. `tokens` is
    /// the tokens document itself, or `None` to read it as `dispenser serve` does (`--tokens`,
    /// else `DISPENSER_TOKENS`).
    pub async fn bind(
        dispenser: Dispenser,
        args: &ServeArgs,
        uri: &str,
        tokens: Option<&str>,
    ) -> dispenser::Result<Service> {
        let mut warnings = Vec::new();
        let tokens = match tokens {
            Some(text) => tokens::parse_tokens(text)?,
            None => {
                let rules = load_tokens(args.tokens.as_ref())?;
                warnings.extend(tokens::tokens_warnings(args.tokens.as_ref()));
                rules
            }
        };
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => {
                let (tls, said) = tls::Tls::load(tls::TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: args.tls_client_ca.clone(),
                })?;
                warnings.extend(said);
                Some(Arc::new(tls))
            }
            _ => None,
        };
        // Served all the same, but said at once (as ssh says of a key open to others).
        for w in warnings {
            eprintln!("dispenser: warning: {w}");
        }
        let metrics_token =
            MetricsToken::new(args.metrics_token.as_ref().map(|s| s.0.as_str()), &tokens)?;
        if args.max_block < args.block {
            return Err(Error::InvalidArgument {
                what: "--max-block".into(),
                reason: format!(
                    "{} is below --block {}: the largest block must be at least the starting one",
                    args.max_block, args.block
                ),
            });
        }
        let block_options = BlockOptions::default()
            .with_size(args.block)
            .with_grow_to(Some(args.max_block))
            .with_range_share(Some(args.block_share))
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
        let idle = Duration::from_secs_f64(args.idle_timeout);
        let limits = Limits {
            header: Duration::from_secs_f64(args.header_timeout),
            idle,
            untrusted_idle: Duration::from_secs_f64(args.unauthenticated_idle_timeout).min(idle),
            max_connections: conn::max_connections(args.max_connections)?,
        };
        let streams = StreamLimits::new(
            args.max_streams_per_token,
            args.max_streams_per_queue,
            limits.max_connections,
        )
        .with_tickets(
            args.max_ticket_streams_per_address,
            args.max_ticket_streams_per_queue,
        );
        let local = listener.local_addr().map_err(|e| Error::InvalidArgument {
            what: "--listen".into(),
            reason: format!("the address bound on {addr} cannot be read: {e}"),
        })?;
        let state = Arc::new(AppState {
            dispenser,
            uri: uri.to_owned(),
            tokens: tokens::Tokens::new(tokens),
            pool,
            max_count: args.max_count,
            request_timeout: Duration::from_secs_f64(args.request_timeout),
            slots: Mutex::new(HashMap::default()),
            retired: Mutex::new(HashMap::new()),
            metrics: Metrics::new(),
            metrics_max_sequences: args.metrics_max_sequences,
            queues: Queues::new(streams),
            born: std::time::Instant::now(),
            links: links::Links::default(),
            origin: state::Origin {
                public: args.public_url.clone(),
                scheme: if tls.is_some() { "https" } else { "http" },
                local: local.to_string(),
            },
        });
        match &tls {
            Some(t) => tracing::info!(
                "dispenser serve listening on {local} (TLS: {})",
                t.describe()
            ),
            None => tracing::info!("dispenser serve listening on {local}"),
        }
        tracing::info!(
            "connections: at most {}, header timeout {:?}, idle timeout {:?} ({:?} before a valid token); event streams: at most {} per token, {} per queue, {} in all; ticket streams: at most {} per address, {} per queue, {} in all; /metrics {}",
            limits.max_connections,
            limits.header,
            limits.idle,
            limits.untrusted_idle,
            streams.per_token,
            streams.per_queue,
            streams.total,
            streams.tickets_per_address,
            streams.tickets_per_queue,
            streams.tickets_total,
            if metrics_token.is_set() {
                "needs the metrics token"
            } else {
                "needs no token"
            }
        );
        Ok(Service {
            listener,
            local,
            limits,
            state,
            metrics_token,
            idle_release: (args.block_idle_release > 0.0)
                .then(|| Duration::from_secs_f64(args.block_idle_release)),
            tls,
        })
    }

    /// The service's URL: `https://ADDRESS` with TLS, else `http://ADDRESS`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.local)
    }

    /// Serves until `shutdown` completes, then gives back what the block clients hold.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> dispenser::Result<Outcome> {
        let Service {
            listener,
            limits,
            state,
            metrics_token,
            idle_release,
            tls,
            ..
        } = self;
        let reaper =
            idle_release.map(|idle| tokio::spawn(release_idle_blocks(Arc::clone(&state), idle)));
        let served = axum::serve(
            Capped::new(listener, limits, tls),
            PerConnection::new(router(state.clone(), metrics_token), Arc::clone(&state)),
        )
        .with_graceful_shutdown({
            let state = Arc::clone(&state);
            async move {
                shutdown.await;
                // The boards' event streams end, so their connections close.
                state.queues.events.stop();
            }
        })
        .await;
        if let Some(reaper) = reaper {
            reaper.abort();
        }
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
        // A loss is named only when there is one ("0 lost (a gap)" read as if something were).
        let lost = if lost > 0 {
            format!(", {lost} number(s) lost (a gap: reserved, never issued)")
        } else {
            String::new()
        };
        eprintln!("dispenser: stopped; {given_back} unused number(s) given back{lost}");
        // A failure of the listener while serving is not the caller's input (exit 2): it is
        // told as it is, and the command exits 1 (unexpected).
        if let Err(e) = served {
            eprintln!("dispenser: the server stopped on an error of its listener: {e}");
            return Ok(Outcome::Exit(crate::exit::OTHER));
        }
        Ok(Outcome::Done)
    }
}
