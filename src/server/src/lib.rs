//! # dispenser-server
//!
//! The HTTP service of [`dispenser`]: clients in any language draw numbers, and only the
//! service needs database rights. Two ways to run it:
//!
//! - **mounted in your own axum app**: [`Server::new`] with a [`Config`], then
//!   [`Server::router`], nested under a prefix of your choosing (`Router::nest("/numbers",
//!   …)`): the API, the pages, `/metrics` and `/openapi.json` all answer under it, and the
//!   pages, the ticket links and their QR codes point under it;
//! - **as a service of its own** (what `dispenser serve` runs): [`Service::bind`], then
//!   [`Service::serve`], which adds the connection handling (caps, timeouts, TLS) and gives
//!   back the block tails on a graceful shutdown.
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use axum::{Router, routing::get};
//! use dispenser::{Dispenser, Options};
//! use dispenser_server::{Config, Server};
//!
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let dispenser = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
//! let server = Server::new(dispenser, Config::default().with_tokens_file("tokens.json"))?;
//! let app = Router::new()
//!     .route("/", get(|| async { "my app" }))
//!     .nest("/numbers", server.router());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // The client's address (the ticket links' per-address limits) comes from `ConnectInfo`.
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! server.shutdown().await; // gives back what the block clients hold
//! # Ok(()) }
//! ```
//!
//! What follows is how the service works inside.
//!
//! Numbers are drawn through block clients with prefetch (one per sequence, shared by all
//! requests), so most requests need no database round trip; on shutdown the unused block
//! tails are given back. Every endpoint except `/healthz` and `/metrics` (which takes its own
//! `metrics_token` when given one) needs a bearer token;
//! each token is allowed a set of sequence names (globs) and operations. Tokens are compared
//! in constant time (over a fixed length) and never logged; the token is checked before the
//! request body is read.
//!
//! Connections are capped and timed (`conn.rs`: `max_connections`, `header_timeout`,
//! `idle_timeout`, `unauthenticated_idle_timeout`; at the cap a waiting connection that
//! never sent a valid token makes room for a new one), the boards' event streams capped
//! (`max_streams_per_token`, `max_streams_per_queue`, half of the connections in all),
//! requests cut at `request_timeout` (408 for a body that does not arrive, 503 otherwise),
//! and every error answer is JSON, hyper's own included.
//!
//! The service's own admin operations (create, advance, reset, delete) are ordered with the
//! draws of the same sequence: draws hold the sequence's `Slot` lock shared, admin operations
//! exclusively; under it they retire the sequence's clients (the block client from the `Pool`,
//! giving back what it holds), write, and only then let draws open fresh clients. So nothing is served, after an admin operation
//! returned, from a block reserved before it.
//!
//! The files, each using only files named after it: `lib.rs` (router, startup, shutdown),
//! `config.rs` (the settings);
//! `openapi.rs`; the endpoints `draw.rs`, `handlers.rs`, `gapless.rs`, `queues.rs`,
//! `overview.rs`, `history.rs` (the history of admin operations), `scrape.rs` (`/metrics`)
//! and `ui/`; `tls.rs` (HTTPS) and `reload.rs` (reading the tokens and TLS files again); `guard.rs` (what every request passes
//! before the router: one service per connection) and `observe.rs` (counting, timing and the
//! JSON error answers); `auth.rs` (who may do what), `classify.rs` (library error to status),
//! `names.rs`, `json.rs` (request bodies), `errors.rs` (`ApiError`), `make.rs` (the one
//! create/ensure path of the creating endpoints); the state: `state.rs`
//! over `tokens.rs`, `metrics.rs` and `queue_state.rs`; `answers.rs` (the answers: the types
//! the endpoints return, whose schemas the document derives) and `conn.rs` (connections).

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

pub use config::{Config, MAX_BLOCK, MAX_COUNT, check_public_url};

use config::TokenSource;
use conn::{Capped, Limits};
use draw::next;
use errors::fallback;
use guard::PerConnection;
use handlers::{adopt, advance, alter, create, delete, healthz, hourly, list, peek, reset};
use metrics::Metrics;
use queue_state::{Queues, StreamLimits};
use scrape::{MetricsToken, metrics, require_token};
use state::{AppState, Shared};

mod answers;
mod auth;
mod classify;
mod config;
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
mod status;
#[cfg(test)]
mod tests;
mod ticket;
mod tls;
mod tokens;
mod ui;

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

/// The routes, over the shared state (no guard: [`Server::router`] adds one per request,
/// [`Service`] one per connection).
fn routes(state: Shared, metrics_token: MetricsToken) -> Router {
    let router = Router::new()
        .route("/v1/sequences", get(list).post(create))
        .route("/v1/sequences/{name}", get(peek).delete(delete))
        .route("/v1/sequences/{name}/next", post(next))
        .route("/v1/sequences/{name}/hourly", get(hourly))
        .route("/v1/sequences/{name}/advance-to", post(advance))
        .route("/v1/sequences/{name}/adopt", post(adopt))
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

/// The service's state and routes, made from a [`Config`]: mount [`Server::router`] in an
/// app, or serve it with a [`Service`].
pub struct Server {
    state: Shared,
    metrics_token: MetricsToken,
    config: Config,
    /// The settings' TLS, loaded.
    tls: Option<Arc<tls::Tls>>,
    /// Closes the idle block clients (`block_idle_release`).
    reaper: Option<tokio::task::AbortHandle>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Checks `config`, reads the tokens (and the TLS files) and builds the service's state
    /// over `dispenser`. Starts the task that closes idle block clients, so it must be called
    /// within a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the setting at fault (`tokens`, `tokens_file`,
    /// `max_block`, `metrics_token`, `tls_cert`, …, `runtime` outside a Tokio runtime).
    pub fn new(dispenser: Dispenser, config: Config) -> dispenser::Result<Server> {
        config.check()?;
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| Error::InvalidArgument {
                what: "runtime".into(),
                reason: "Server::new must be called within a Tokio runtime".into(),
            })?;
        let mut warnings = Vec::new();
        let tokens = match &config.tokens {
            Some(TokenSource::Json(text)) => tokens::parse_tokens(text)?,
            Some(TokenSource::File(path)) => {
                let rules = tokens::load_tokens(path)?;
                warnings.extend(tokens::tokens_warnings(Some(path)));
                rules
            }
            None => {
                return Err(Error::InvalidArgument {
                    what: "tokens".into(),
                    reason: "no tokens configured: give a tokens file or the tokens' JSON".into(),
                });
            }
        };
        let tls = match &config.tls {
            Some((cert, key, client_ca)) => {
                let (tls, said) = tls::Tls::load(tls::TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: client_ca.clone(),
                })?;
                warnings.extend(said);
                Some(Arc::new(tls))
            }
            None => None,
        };
        let metrics_token = MetricsToken::new(config.metrics_token.as_deref(), &tokens)?;
        let block_options = BlockOptions::default()
            .with_size(config.block)
            .with_grow_to(Some(config.max_block))
            .with_range_share(Some(config.block_share))
            .with_prefetch(Some(config.prefetch));
        let pool = Pool::new(dispenser.clone(), block_options)?;
        let max_connections = conn::max_connections(config.max_connections)?;
        let streams = StreamLimits::new(
            config.max_streams_per_token,
            config.max_streams_per_queue,
            max_connections,
        )
        .with_tickets(
            config.max_ticket_streams_per_address,
            config.max_ticket_streams_per_queue,
        );
        let state = Arc::new(AppState {
            dispenser,
            uri: config.database_uri.clone(),
            tokens: tokens::Tokens::new(tokens),
            pool,
            max_count: config.max_count,
            request_timeout: config.request_timeout,
            slots: Mutex::new(std::collections::HashMap::default()),
            retired: Mutex::new(std::collections::HashMap::new()),
            metrics: Metrics::new(),
            metrics_max_sequences: config.metrics_max_sequences,
            queues: Queues::new(streams),
            born: std::time::Instant::now(),
            links: links::Links::default(),
            origin: state::Origin {
                public: config.public_url.clone(),
                scheme: if tls.is_some() { "https" } else { "http" },
                local: std::sync::OnceLock::new(),
            },
        });
        tracing::info!(
            "event streams: at most {} per token, {} per queue, {} in all; ticket streams: at most {} per address, {} per queue, {} in all; /metrics {}",
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
        let reaper = config.block_idle_release.map(|idle| {
            runtime
                .spawn(release_idle_blocks(Arc::clone(&state), idle))
                .abort_handle()
        });
        Ok(Server {
            state,
            metrics_token,
            config,
            tls,
            reaper,
            warnings,
        })
    }

    /// What loaded but looks wrong, one line each: a tokens or key file other users may
    /// read, a certificate expired or not valid yet. Served all the same.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The service as a router to mount in an app's own axum router, under a prefix
    /// (`Router::nest("/numbers", server.router())`) or at its root (`merge`).
    ///
    /// Every request passes what [`Service`] makes it pass (the token, the body limit, the
    /// request timeout, the counting on `/metrics`, error answers as JSON), except the
    /// connection handling, which is the app's server's (its connection caps and timeouts).
    /// Under a prefix, the pages load their files and call the API under it, the ticket links
    /// and their QR codes point under it, and `/openapi.json` names it as its server (the
    /// prefix is read from axum's `OriginalUri`, which `Router::nest` keeps).
    ///
    /// The client's address, which the ticket streams and ticket links count by, is read
    /// from axum's `ConnectInfo<SocketAddr>`: serve the app with
    /// `into_make_service_with_connect_info::<SocketAddr>()`. Without it the address is
    /// unknown, and every client is counted as one address (0.0.0.0): the per-address limits
    /// then hold for all clients together (a warning is logged once). Behind a proxy, the
    /// address is the proxy's either way.
    pub fn router(&self) -> Router {
        let state = Arc::clone(&self.state);
        routes(Arc::clone(&self.state), self.metrics_token.clone())
            .layer(middleware::from_fn_with_state(state, guard::mounted))
    }

    /// Stops the service's work: the boards' and tickets' event streams end, the task that
    /// closes idle block clients stops, and every block client is closed, giving back the
    /// numbers it holds (each under its sequence's lock, as an admin operation). Call it
    /// once the app stopped serving; draws after it open fresh block clients.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, though never at the cost of uniqueness: dropped part way, the block
    /// clients not closed yet keep what they hold (a later `shutdown` gives it back), and one
    /// dropped in the middle of its give-back gave it back or left a gap.
    pub async fn shutdown(&self) -> Returned {
        self.state.queues.events.stop();
        if let Some(reaper) = &self.reaper {
            reaper.abort();
        }
        let mut returned = Returned::default();
        for (name, slot) in self.state.all_slots() {
            let era = slot.era.write().await;
            let outcome = self.state.pool.retire(&name).await;
            drop(era);
            match outcome {
                Ok(r) => {
                    returned.given_back += r.given_back;
                    returned.lost += r.lost;
                }
                Err(e) => returned
                    .failures
                    .push(format!("closing the block client of {name:?}: {e}")),
            }
        }
        returned
    }
}

/// What [`Server::shutdown`] gave back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Returned {
    /// Numbers the block clients held and gave back to their sequences.
    pub given_back: u64,
    /// Numbers reserved and never issued that could not be given back (a gap).
    pub lost: u64,
    /// The block clients that failed to close, one line each.
    pub failures: Vec<String>,
}

/// How a [`Service`] ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct Served {
    /// What the block clients gave back.
    pub returned: Returned,
    /// The error the listener stopped on, if it did not stop for the shutdown.
    pub listener_error: Option<std::io::Error>,
}

/// Reads the tokens file and the TLS files again ([`Service::reloader`]), as `dispenser
/// serve` does on SIGHUP.
pub struct Reloader(reload::Reloadable);

impl Reloader {
    /// Reads them again: each is put in use only if it loads; the answer says, one line
    /// each, what happened (reloaded, kept and why, warnings).
    pub fn reload(&self) -> Vec<String> {
        reload::reload(&self.0, &|e| e)
    }

    /// As [`reload`](Reloader::reload), each error that says why a file was not reloaded
    /// first passed through `rename` (`dispenser serve` names the settings by its flags).
    pub fn reload_with(&self, rename: impl Fn(Error) -> Error) -> Vec<String> {
        reload::reload(&self.0, &rename)
    }
}

/// A [`Server`] bound to its address, not yet serving: the service `dispenser serve` runs,
/// with its connection handling (the cap, the header and idle timeouts, eviction of idle
/// connections at the cap, TLS).
pub struct Service {
    listener: tokio::net::TcpListener,
    local: SocketAddr,
    limits: Limits,
    server: Server,
}

impl Service {
    /// Binds the settings' `listen` address.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming `listen` when it cannot be bound, or
    /// `max_connections` when the open-file limit leaves no room.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped, the address is not bound.
    pub async fn bind(server: Server) -> dispenser::Result<Service> {
        let config = &server.config;
        let addr = config.listen;
        let listener =
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| Error::InvalidArgument {
                    what: "listen".into(),
                    reason: format!("cannot listen on {addr}: {e}"),
                })?;
        let idle = config.idle_timeout;
        let limits = Limits {
            header: config.header_timeout,
            idle,
            untrusted_idle: config.unauthenticated_idle_timeout.min(idle),
            max_connections: conn::max_connections(config.max_connections)?,
        };
        let local = listener.local_addr().map_err(|e| Error::InvalidArgument {
            what: "listen".into(),
            reason: format!("the address bound on {addr} cannot be read: {e}"),
        })?;
        let _ = server.state.origin.local.set(local.to_string());
        match &server.tls {
            Some(t) => tracing::info!(
                "dispenser serve listening on {local} (TLS: {})",
                t.describe()
            ),
            None => tracing::info!("dispenser serve listening on {local}"),
        }
        tracing::info!(
            "connections: at most {}, header timeout {:?}, idle timeout {:?} ({:?} before a valid token)",
            limits.max_connections,
            limits.header,
            limits.idle,
            limits.untrusted_idle,
        );
        Ok(Service {
            listener,
            local,
            limits,
            server,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The service's URL: `https://ADDRESS` with TLS, else `http://ADDRESS`.
    pub fn url(&self) -> String {
        let scheme = if self.server.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.local)
    }

    /// What reads the tokens file and the TLS files again while it serves.
    pub fn reloader(&self) -> Reloader {
        Reloader(reload::Reloadable {
            tls: self.server.tls.clone(),
            state: Arc::clone(&self.server.state),
            tokens: match &self.server.config.tokens {
                Some(TokenSource::File(path)) => Some(path.clone()),
                _ => None,
            },
            metrics_token: self.server.metrics_token.clone(),
        })
    }

    /// Serves until `shutdown` completes, then ends the event streams, waits for the
    /// requests in flight and gives back what the block clients hold
    /// ([`Server::shutdown`]).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, though never at the cost of uniqueness: dropped, it stops serving
    /// without giving back what the block clients hold (a gap) — complete `shutdown` instead.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Served {
        let Service {
            listener,
            limits,
            server,
            ..
        } = self;
        let state = Arc::clone(&server.state);
        let served = axum::serve(
            Capped::new(listener, limits, server.tls.clone()),
            PerConnection::new(
                routes(Arc::clone(&state), server.metrics_token.clone()),
                Arc::clone(&state),
            ),
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
        let returned = server.shutdown().await;
        Served {
            returned,
            listener_error: served.err(),
        }
    }
}
