//! What every request passes on its way to the router, in one service per connection
//! ([`Guarded`], made by [`PerConnection`] as each connection is accepted, for a
//! [`Service`](crate::Service)), or in a middleware of the router a Rust app mounts
//! ([`mounted`], without a connection of its own: no connection clock), from the outside in:
//! - its connection is told a request is being served, and whether it carried a valid token
//!   (which gives the connection the longer idle timeout and keeps it from eviction);
//! - a request on a queue (`/v1/queues/…`, `/ui/queues/…`) carries its client's address
//!   ([`ClientAddr`]), which the ticket links' limits count by (mounted: from axum's
//!   `ConnectInfo`, else 0.0.0.0 for every client, and a warning once);
//! - a request carries the prefix the router is mounted under ([`Prefix`], from axum's
//!   `OriginalUri`; empty for a `Service`), which the pages, the ticket links and the OpenAPI
//!   document put before their paths;
//! - its body is limited to [`MAX_BODY`] bytes: one that declares more is never read, and
//!   the endpoint's read of it fails at once (413) — after the endpoint checked the token, so
//!   a request without a valid token gets 401 whatever its size;
//! - it is cut at `--request-timeout`: 408 when its body had not arrived, else 503;
//! - the request is counted and timed, and its error answers become the JSON error body,
//!   scrubbed (`observe`).
//!
//! One hand-written service rather than layers on the router: axum puts a layer around each
//! route, so every layer cost a clone of a boxed service and a boxed future per request, and
//! the connection's clock had to travel in the request's extensions. Here the clock is held by
//! the connection's service, and a request costs one boxed future.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{ConnectInfo, OriginalUri, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::IncomingStream;
use tower_service::Service;

use super::conn::{self, Capped, Clock};
use super::errors::timed_out;
use super::json::{MAX_BODY, ReadingBody};
use super::observe::observe;
use super::state::Shared;

/// Makes the service of each accepted connection.
#[derive(Clone)]
pub(super) struct PerConnection {
    router: Router,
    state: Shared,
}

impl PerConnection {
    pub(super) fn new(router: Router, state: Shared) -> Self {
        PerConnection { router, state }
    }
}

impl Service<IncomingStream<'_, Capped>> for PerConnection {
    type Response = Guarded;
    type Error = Infallible;
    type Future = Ready<Result<Guarded, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'_, Capped>) -> Self::Future {
        ready(Ok(Guarded(Arc::new(Connection {
            router: Mutex::new(self.router.clone()),
            state: Arc::clone(&self.state),
            clock: stream.io().clock(),
            peer: stream.remote_addr().ip(),
        }))))
    }
}

/// The service of one connection: the router behind [`guard`]. hyper clones it for every
/// request, and so does its `call`: only the connection's own reference count moves, not
/// those of the router and the state, which every connection shares (on two cores, a count
/// that both move is passed to and fro).
#[derive(Clone)]
pub(super) struct Guarded(Arc<Connection>);

struct Connection {
    /// The connection's own handle on the router (`Service::call` takes it `&mut`; one
    /// request at a time on an HTTP/1.1 connection, so the lock is never waited for).
    router: Mutex<Router>,
    state: Shared,
    clock: Arc<Clock>,
    /// The client's address.
    peer: IpAddr,
}

/// The address of the client a request came from (on requests on a queue: see the module
/// documentation). Behind a proxy, the proxy's.
#[derive(Clone, Copy, Debug)]
pub(super) struct ClientAddr(pub(super) IpAddr);

impl Service<Request> for Guarded {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let connection = Arc::clone(&self.0);
        Box::pin(async move { Ok(connection_guard(connection, req).await) })
    }
}

/// The path prefix a mounted router is reached under (`/numbers`), empty at the root (a
/// request without one, as a `Service`'s, is at the root).
#[derive(Clone, Debug, Default)]
pub(crate) struct Prefix(pub(crate) Arc<str>);

/// The guard of a mounted router (`Server::router`): as [`guard`], without a connection of
/// its own; the client's address from `ConnectInfo`, the prefix from `OriginalUri`.
pub(crate) async fn mounted(State(st): State<Shared>, mut req: Request, next: Next) -> Response {
    let peer = match req.extensions().get::<ConnectInfo<SocketAddr>>() {
        Some(ConnectInfo(addr)) => addr.ip(),
        None => {
            static TOLD: std::sync::Once = std::sync::Once::new();
            TOLD.call_once(|| {
                tracing::warn!(
                    "the client's address is unknown (serve the app with into_make_service_with_connect_info::<SocketAddr>()): the per-address limits of the ticket streams and links count every client as one address"
                );
            });
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        }
    };
    let prefix = req
        .extensions()
        .get::<OriginalUri>()
        .and_then(|o| o.path().strip_suffix(req.uri().path()).map(str::to_owned))
        .map(|p| p.trim_end_matches('/').to_owned())
        .unwrap_or_default();
    req.extensions_mut().insert(Prefix(prefix.into()));
    guard(&st, None, peer, req, |req| async move {
        Ok::<_, Infallible>(next.run(req).await)
    })
    .await
}

/// One request of a connection, as the module documentation says.
async fn connection_guard(c: Arc<Connection>, req: Request) -> Response {
    let call = |req| {
        let mut router = c.router.lock().unwrap_or_else(PoisonError::into_inner);
        Service::call(&mut *router, req)
    };
    guard(&c.state, Some(&c.clock), c.peer, req, call).await
}

/// One request, as the module documentation says: `call` is the router's.
async fn guard<F>(
    st: &Shared,
    clock: Option<&Arc<Clock>>,
    peer: IpAddr,
    mut req: Request,
    call: impl FnOnce(Request) -> F,
) -> Response
where
    F: Future<Output = Result<Response, Infallible>>,
{
    let path = req.uri().path();
    if path.starts_with("/v1/queues/") || path.starts_with("/ui/queues/") {
        req.extensions_mut().insert(ClientAddr(peer));
    }
    let started = Instant::now();
    if let Some(clock) = clock {
        conn::started(clock, || st.authenticate(req.headers()).is_ok());
    }
    let (req, reading) = limit_body(req);
    let call = call(req);
    let mut call = std::pin::pin!(call);
    // Most requests are answered when first polled (a draw from memory): the request
    // timeout's timer is set, in a box of its own, only for those that wait.
    let resp = match std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await {
        Poll::Ready(Ok(resp)) => resp,
        Poll::Ready(Err(never)) => match never {},
        Poll::Pending => match Box::pin(tokio::time::timeout(st.request_timeout, call)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(never)) => match never {},
            Err(_) => timed_out(reading.is_some_and(|r| r.now()), st.request_timeout),
        },
    };
    let (resp, done) = observe(st, started, resp).await;
    match clock {
        Some(clock) => conn::answered(clock, resp, done),
        None => resp,
    }
}

/// The request with its body limited to [`MAX_BODY`] bytes, and the flag its body's reader
/// raises while it waits for the body (none when the request has no body). A request that
/// declares a longer body gets a body whose first read fails as too large (413): the bytes
/// sent are never read, and the endpoint answers 401 first when the token is not valid, as
/// for any other request (the 413 used to come before the token was looked at).
fn limit_body(req: Request) -> (Request, Option<ReadingBody>) {
    if req.body().is_end_stream() {
        return (req, None);
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        // A limit of 0 over one byte: the first read is the limit's error, which the body
        // extractors answer 413 (`json.rs`).
        let too_large = http_body_util::Limited::new(
            http_body_util::Full::new(axum::body::Bytes::from_static(b" ")),
            0,
        );
        return (req.map(|_| Body::new(too_large)), None);
    }
    let reading = ReadingBody::default();
    let mut req = req.map(|body| Body::new(http_body_util::Limited::new(body, MAX_BODY)));
    req.extensions_mut().insert(reading.clone());
    (req, Some(reading))
}
