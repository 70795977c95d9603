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
//! Connections are capped and timed (`conn.rs`: `--max-connections`, `--header-timeout`,
//! `--idle-timeout`), requests cut at `--request-timeout` (408 for a body that does not
//! arrive, 503 otherwise), and every error answer is JSON, hyper's own included.
//!
//! The service's own admin operations (create, advance, reset, delete) are ordered with the
//! draws of the same sequence: draws hold the sequence's [`Slot`] lock shared, admin operations
//! exclusively; under it they retire the sequence's clients (the block client from the [`Pool`],
//! giving back what it holds), write, and only then let draws open fresh clients. So nothing is served, after an admin operation
//! returned, from a block reserved before it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use dispenser::{
    Dispenser, Error,
    block::{BlockOptions, Pool},
};

use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::cli::ServeArgs;
use auth::load_tokens;
use conn::{Capped, ConnInfo, Limits, track};
use draw::next;
use errors::{fallback, timed_out};
use handlers::{advance, alter, create, delete, healthz, list, peek, reset};
use json::ReadingBody;
use metrics::{Metrics, metrics, observe};
use state::{AppState, Shared};

mod auth;
mod conn;
mod draw;
mod errors;
mod gapless;
mod handlers;
mod json;
mod metrics;
mod names;
mod openapi;
mod overview;
mod queues;
mod state;
#[cfg(test)]
mod tests;
mod ui;

/// The largest request body accepted (bodies are small JSON objects); larger is 413.
pub(super) const MAX_BODY: usize = 64 * 1024;

fn router(state: Shared) -> Router {
    Router::new()
        .route("/v1/sequences", get(list).post(create))
        .route("/v1/sequences/{name}", get(peek).delete(delete))
        .route("/v1/sequences/{name}/next", post(next))
        .route("/v1/sequences/{name}/advance", post(advance))
        .route("/v1/sequences/{name}/alter", post(alter))
        .route("/v1/sequences/{name}/reset", post(reset))
        .route("/v1/gapless/{name}", get(gapless::status))
        .route("/v1/gapless/{name}/void", post(gapless::void))
        .route("/v1/queues", post(queues::create))
        .route("/v1/queues/{name}", get(queues::status))
        .route("/v1/queues/{name}/take", post(queues::take))
        .route("/v1/queues/{name}/call", post(queues::call))
        .route("/v1/overview", get(overview::overview))
        .merge(ui::routes())
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi::openapi))
        .fallback(fallback)
        // Innermost first: the body limit and the request timeout answer errors, which
        // `observe` turns into JSON error bodies (and counts); `track` tells the connection
        // a request is being served; the trace span covers it all.
        .layer(RequestBodyLimitLayer::new(MAX_BODY))
        .layer(middleware::from_fn_with_state(state.clone(), deadline))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(middleware::from_fn(track))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Cuts a request at `--request-timeout`: 408 when its body had not arrived, else 503.
async fn deadline(State(st): State<Shared>, mut req: Request, next: Next) -> Response {
    let reading = ReadingBody::default();
    req.extensions_mut().insert(reading.clone());
    match tokio::time::timeout(st.request_timeout, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => timed_out(reading.now(), st.request_timeout),
    }
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
    let limits = Limits {
        header: Duration::from_secs_f64(args.header_timeout),
        idle: Duration::from_secs_f64(args.idle_timeout),
        max_connections: conn::max_connections(args.max_connections)?,
    };
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
        request_timeout: Duration::from_secs_f64(args.request_timeout),
        slots: Mutex::new(HashMap::new()),
        retired: Mutex::new(HashMap::new()),
        metrics: Metrics::new(),
        queues: Default::default(),
    });
    println!("listening on http://{local}");
    tracing::info!("dispenser serve listening on {local}");
    tracing::info!(
        "connections: at most {}, header timeout {:?}, idle timeout {:?}",
        limits.max_connections,
        limits.header,
        limits.idle
    );
    let served = axum::serve(
        Capped::new(listener, limits),
        router(state.clone()).into_make_service_with_connect_info::<ConnInfo>(),
    )
    .with_graceful_shutdown({
        let state = Arc::clone(&state);
        async move {
            shutdown_signal().await;
            // The boards' event streams end, so their connections close.
            state.queues.events.stop();
        }
    })
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
    // A loss is named only when there is one ("0 lost (a gap)" read as if something were).
    let lost = if lost > 0 {
        format!(", {lost} number(s) lost (a gap: reserved, never issued)")
    } else {
        String::new()
    };
    eprintln!("dispenser: stopped; {given_back} unused number(s) given back{lost}");
    served.map_err(|e| Error::InvalidArgument {
        what: "--listen".into(),
        reason: format!("the server failed: {e}"),
    })
}
