//! Connections: a cap on how many are open at once, time limits for a request head and for
//! an idle connection, room made for new connections by closing ones that only wait, and
//! JSON bodies on the error answers hyper writes itself.
//!
//! hyper offers one connection timer, `http1::Builder::header_read_timeout`, which runs from
//! the moment a connection waits for a request to the end of its head: idle time and head
//! time in one budget, fixed per connection. The service needs what it cannot say — a short
//! wait for connections that never sent a valid token and the longer `--idle-timeout` for
//! those that did, the head timed from its first byte, and closing a waiting connection to
//! make room — so each connection ([`Conn`]) keeps its own clock ([`Clock`]):
//!
//! - **Idle**: waiting for a request's first byte, until `--unauthenticated-idle-timeout` (a
//!   new connection, or one on which no request carried a valid token yet) or `--idle-timeout`
//!   (once one did: the connection is *trusted*).
//! - **Head**: the first byte arrived; the head must be complete within `--header-timeout` of
//!   it (of the connection's start, for its first request).
//! - **Busy**: a request is being served (from its head to the end of its answer, an event
//!   stream's included); the router's request timeout applies instead, and an event stream
//!   ends at [`MAX_STREAM`] (the connection is closed then if the stream could not end by
//!   itself: its socket blocked, its body never polled again).
//!
//! In every phase, a connection whose writes make no progress for [`STALL`] (its client
//! stopped reading: the socket's buffers are full) is closed, so a board that stops reading
//! gives its place back.
//!
//! A connection past its deadline is closed. The listener ([`Capped`]) keeps at most
//! `--max-connections` open. At the cap it makes room for a new connection by closing one
//! that waits — first those that never sent a valid token, then trusted idle ones, then
//! trusted ones whose head is arriving, the longest waiting first — and only when every
//! connection is being served (a request, or an event stream: streams take at most half of
//! the places) does the new one wait, with those after it in the kernel's backlog, until one
//! closes. So idle or half-sent connections, with a token or without, cannot keep anyone out,
//! and the service never runs out of file descriptors.
//!
//! With `--tls-cert` every connection speaks TLS ([`Stream`]): its handshake is made by its
//! own task as it first reads, so a slow handshake never holds up the listener, and it falls
//! within the new connection's first deadline (a client that does not finish it within
//! `--unauthenticated-idle-timeout` is closed like one that sends nothing).
//!
//! hyper answers a request it cannot parse (400), a URI longer than 65 534 bytes (414) or a
//! head larger than its buffer (431) on its own, with an empty body and without calling the
//! router. [`Conn`] recognises such an answer as it is written (one of these statuses with
//! `content-length: 0`, which no answer of the router has: every error of the router has a
//! JSON body) and writes the JSON error body instead.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use axum::response::Response;
use axum::serve::Listener;
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_rustls::server::TlsStream;

use super::tls::Tls;

/// How connections are limited (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// How long a request head may take to arrive.
    pub(super) header: Duration,
    /// How long a trusted connection may wait for its next request.
    pub(super) idle: Duration,
    /// How long an untrusted connection may wait for a request (at most `idle`).
    pub(super) untrusted_idle: Duration,
    /// How many connections may be open at once.
    pub(super) max_connections: usize,
}

/// Open files the service keeps for itself (database connections, standard streams, the
/// listener) when it sizes its connection cap from the open-file limit.
pub(super) const RESERVED_FILES: u64 = 128;

/// The default connection cap when the open-file limit leaves room for it.
pub(super) const DEFAULT_MAX_CONNECTIONS: u64 = 10_000;

/// The process's soft limit on open files, when it has one.
fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The connection cap: `requested`, or by default [`DEFAULT_MAX_CONNECTIONS`] lowered to what
/// the open-file limit allows (less [`RESERVED_FILES`]). A requested cap above that is refused.
pub(super) fn max_connections(requested: Option<u64>) -> Result<usize, dispenser::Error> {
    let allowed = open_file_limit().map(|l| l.saturating_sub(RESERVED_FILES));
    let cap = match (requested, allowed) {
        (Some(n), Some(room)) if n > room => {
            return Err(dispenser::Error::InvalidArgument {
                what: "max_connections".into(),
                reason: format!(
                    "{n} connections do not fit in the open-file limit ({} files, `ulimit -n`, less {RESERVED_FILES} kept for the database and the service): raise the limit or ask for at most {room}",
                    room + RESERVED_FILES
                ),
            });
        }
        (Some(n), _) => n,
        (None, Some(room)) => DEFAULT_MAX_CONNECTIONS.min(room),
        (None, None) => DEFAULT_MAX_CONNECTIONS,
    };
    if cap == 0 {
        return Err(dispenser::Error::InvalidArgument {
            what: "max_connections".into(),
            reason: format!(
                "the open-file limit (`ulimit -n`) leaves no room for connections once {RESERVED_FILES} files are kept for the database and the service: raise it"
            ),
        });
    }
    Ok(usize::try_from(cap).unwrap_or(usize::MAX))
}

/// A TCP listener that keeps at most the cap of connections open, closing a waiting one to
/// make room for a new one.
pub(super) struct Capped {
    listener: TcpListener,
    permits: Arc<Semaphore>,
    open: Arc<Open>,
    limits: Limits,
    /// Every connection speaks TLS, with the configuration in use when it is accepted.
    tls: Option<Arc<Tls>>,
}

impl Capped {
    pub(super) fn new(listener: TcpListener, limits: Limits, tls: Option<Arc<Tls>>) -> Capped {
        Capped {
            tls,
            listener,
            permits: Arc::new(Semaphore::new(
                limits.max_connections.min(Semaphore::MAX_PERMITS),
            )),
            open: Arc::default(),
            limits,
        }
    }

    /// A place under the cap: a free one, or one made by closing a waiting connection; when
    /// every connection is being served, the first to close.
    async fn place(&self) -> OwnedSemaphorePermit {
        loop {
            if let Ok(p) = Arc::clone(&self.permits).try_acquire_owned() {
                return p;
            }
            self.open.evict_one();
            // The evicted connection's place comes back once its task dropped it; until then
            // (or while there is nothing to evict) look again every [`RETRY`].
            let wait = Arc::clone(&self.permits).acquire_owned();
            if let Ok(Ok(p)) = tokio::time::timeout(RETRY, wait).await {
                return p;
            }
        }
    }
}

/// How often the listener looks again for a connection to evict when it has none.
const RETRY: Duration = Duration::from_millis(50);

impl Listener for Capped {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        loop {
            match self.listener.accept().await {
                Ok((stream, addr)) => {
                    let permit = self.place().await;
                    let stream = match &self.tls {
                        Some(tls) => Stream::Handshake(Box::new(tls.acceptor().accept(stream))),
                        None => Stream::Plain(stream),
                    };
                    return (Conn::new(stream, permit, self.limits, &self.open), addr);
                }
                Err(e) => accept_error(e).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// A failed `accept`: a connection that went away is skipped; anything else (such as running
/// out of file descriptors) is logged and retried shortly, without spinning.
async fn accept_error(e: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!("accepting a connection: {e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The open connections' clocks, to pick one to evict.
#[derive(Default)]
struct Open {
    clocks: Mutex<HashMap<u64, Weak<Clock>>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Open {
    fn clocks(&self) -> MutexGuard<'_, HashMap<u64, Weak<Clock>>> {
        self.clocks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self, clock: &Arc<Clock>) -> u64 {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.clocks().insert(id, Arc::downgrade(clock));
        id
    }

    /// Closes the waiting connection that is the first to go (see [`Clock::eviction_rank`]),
    /// unless one evicted less than [`EVICTING`] ago is still closing.
    fn evict_one(&self) {
        let clocks: Vec<Arc<Clock>> = self.clocks().values().filter_map(Weak::upgrade).collect();
        let now = Instant::now();
        let mut first: Option<((u8, Instant), &Arc<Clock>)> = None;
        for clock in &clocks {
            let s = clock.state();
            if let Some(at) = s.evicted {
                if now.duration_since(at) < EVICTING {
                    return;
                }
                continue;
            }
            if let Some(rank) = Clock::eviction_rank(&s)
                && first.is_none_or(|(r, _)| rank < r)
            {
                first = Some((rank, clock));
            }
        }
        if let Some((_, clock)) = first {
            clock.evict(now);
        }
    }
}

/// How long an evicted connection has to close before another is evicted in its place.
const EVICTING: Duration = Duration::from_secs(1);

/// How long an event stream lasts: it ends by itself then (the page reconnects), and its
/// connection is closed [`STREAM_GRACE`] later if it could not.
pub(super) const MAX_STREAM: Duration = Duration::from_secs(600);

/// How long after [`MAX_STREAM`] a stream that could not end by itself (its socket blocked)
/// has its connection closed.
const STREAM_GRACE: Duration = Duration::from_secs(5);

/// How long a connection's writes may make no progress (its client reads nothing) before it
/// is closed.
pub(super) const STALL: Duration = Duration::from_secs(30);

/// Where a connection is between requests.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Waiting for the first byte of a request, until the instant.
    Idle(Instant),
    /// Waiting for the rest of a request head, until the instant.
    Head(Instant),
    /// A request is being served: the router's request timeout applies.
    Busy,
}

#[derive(Debug)]
struct ClockState {
    phase: Phase,
    /// Since when the connection waits (for a request, or the rest of its head).
    since: Instant,
    /// When a new connection's first head must be complete (until its first byte arrives).
    first_head: Option<Instant>,
    /// A request on it carried a valid token.
    trusted: bool,
    /// While an event stream is being answered: when its connection is closed at the latest.
    stream_ends: Option<Instant>,
    /// Closed to make room for a new connection, at that instant.
    evicted: Option<Instant>,
    /// The deadline the connection's timer is set for (it wakes the connection's task then,
    /// which sets it for the deadline of the phase it is in).
    armed: Instant,
    /// The connection's task, as last seen waiting to read: woken when a request is answered
    /// and the timer cannot take up the new idle deadline by itself (it already fired, or is
    /// set for later), and when the connection is evicted (hyper does not read again on its
    /// own).
    reader: Option<Waker>,
}

/// A connection's phase, shared by the connection, the requests served on it and the
/// listener (which may evict it).
#[derive(Debug)]
pub(super) struct Clock {
    state: Mutex<ClockState>,
    limits: Limits,
}

impl Clock {
    fn state(&self) -> MutexGuard<'_, ClockState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The first byte of a request arrived on an idle connection: its head is now timed.
    fn bytes_arrived(&self) {
        let mut s = self.state();
        if let Phase::Idle(_) = s.phase {
            let by = s
                .first_head
                .take()
                .unwrap_or_else(|| Instant::now() + self.limits.header);
            s.phase = Phase::Head(by);
        }
    }

    fn request_started(&self, trusted: impl FnOnce() -> bool) {
        let mut s = self.state();
        s.phase = Phase::Busy;
        if !s.trusted {
            s.trusted = trusted();
        }
    }

    /// `now`: when the answer was made (read once by the guard for the metrics and for this).
    fn request_answered(&self, now: Instant) {
        let mut s = self.state();
        let idle = if s.trusted {
            self.limits.idle
        } else {
            self.limits.untrusted_idle
        };
        let deadline = now + idle;
        s.phase = Phase::Idle(deadline);
        s.since = now;
        s.stream_ends = None;
        // Woken only when needed: a wake-up per request costs the connection's task one more
        // poll for every request.
        if (s.armed <= now || deadline < s.armed)
            && let Some(w) = s.reader.take()
        {
            w.wake();
        }
    }

    /// In which order waiting connections are closed to make room: those that never sent a
    /// valid token (idle, or with a head arriving), then trusted idle ones, then trusted ones
    /// with a head arriving; within each, the one waiting longest first. A connection being
    /// served is never closed.
    fn eviction_rank(s: &ClockState) -> Option<(u8, Instant)> {
        let class = match (s.trusted, s.phase) {
            (_, Phase::Busy) => return None,
            (false, _) => 0,
            (true, Phase::Idle(_)) => 1,
            (true, Phase::Head(_)) => 2,
        };
        Some((class, s.since))
    }

    fn evict(&self, now: Instant) {
        let mut s = self.state();
        s.evicted = Some(now);
        if let Some(w) = s.reader.take() {
            w.wake();
        }
    }

    /// An event stream's answer starts: it lasts [`MAX_STREAM`] at most.
    fn stream_started(&self, now: Instant) {
        self.state().stream_ends = Some(now + MAX_STREAM + STREAM_GRACE);
    }

    fn waiting_to_read(&self, waker: &Waker) {
        let mut s = self.state();
        if !s.reader.as_ref().is_some_and(|w| w.will_wake(waker)) {
            s.reader = Some(waker.clone());
        }
    }
}

/// A request's start (called by the service's guard, before the router): marks its
/// connection busy while it is served, and trusted from the first request with a valid token
/// (`trusted` is asked only while the connection is not trusted yet, so a kept-alive trusted
/// connection does not check its token twice per request).
pub(super) fn started(clock: &Clock, trusted: impl FnOnce() -> bool) {
    clock.request_started(trusted);
}

/// A request's answer: its connection is idle again — at once, or for an event stream
/// (`text/event-stream`, the boards' live feed) when its body ends, so that the connection
/// stays busy until then and neither the idle nor the header timeout cuts it.
pub(super) fn answered(c: &Arc<Clock>, resp: Response, now: std::time::Instant) -> Response {
    if is_event_stream(&resp) {
        c.stream_started(Instant::from_std(now));
        let answered = Answered(Arc::clone(c));
        let (parts, body) = resp.into_parts();
        let body = body.into_data_stream().map(move |chunk| {
            let _ = &answered;
            chunk
        });
        return Response::from_parts(parts, axum::body::Body::from_stream(body));
    }
    c.request_answered(Instant::from_std(now));
    resp
}

fn is_event_stream(resp: &Response) -> bool {
    resp.headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Marks its connection's request answered when dropped (with the body of a stream).
struct Answered(Arc<Clock>);

impl Drop for Answered {
    fn drop(&mut self) {
        self.0.request_answered(Instant::now());
    }
}

/// A connection's bytes: plain TCP, or TLS (its handshake first).
pub(super) enum Stream {
    Plain(TcpStream),
    Handshake(Box<tokio_rustls::Accept<TcpStream>>),
    Tls(Box<TlsStream<TcpStream>>),
    /// The handshake failed (its error was returned once).
    Failed,
}

impl Stream {
    /// Drives the handshake of a TLS connection: ready once there is a stream to read and
    /// write, an error if the handshake failed (a client speaking plain HTTP to a TLS port, a
    /// client certificate refused).
    fn poll_established(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Stream::Handshake(accept) = self {
            match ready!(Pin::new(accept.as_mut()).poll(cx)) {
                Ok(tls) => *self = Stream::Tls(Box::new(tls)),
                Err(e) => {
                    *self = Stream::Failed;
                    tracing::debug!("a TLS handshake failed: {e}");
                    return Poll::Ready(Err(e));
                }
            }
        }
        match self {
            Stream::Failed => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the TLS handshake failed",
            ))),
            _ => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_established(cx))?;
        match this {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Handshake(_) | Stream::Failed => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_established(cx))?;
        match this {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Handshake(_) | Stream::Failed => Poll::Ready(Ok(0)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_established(cx))?;
        match this {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Handshake(_) | Stream::Failed => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Handshake(_) | Stream::Failed => Poll::Ready(Ok(())),
        }
    }
}

/// One accepted connection: the stream, its clock, and its place under the cap (given back
/// when the connection is dropped).
pub(super) struct Conn {
    stream: Stream,
    clock: Arc<Clock>,
    /// Set for the clock's `armed` deadline.
    sleep: Pin<Box<Sleep>>,
    /// Since when a write waits for the socket (cleared by any progress).
    stalled_since: Option<Instant>,
    /// hyper's own error answer, rewritten as JSON, and how much of it was written.
    pending: Option<(Vec<u8>, usize)>,
    /// Where the connection is listed for eviction, and its id there.
    open: Arc<Open>,
    id: u64,
    _permit: OwnedSemaphorePermit,
}

impl Conn {
    fn new(stream: Stream, permit: OwnedSemaphorePermit, limits: Limits, open: &Arc<Open>) -> Conn {
        let now = Instant::now();
        let first_byte = now + limits.untrusted_idle.min(limits.header);
        let clock = Arc::new(Clock {
            state: Mutex::new(ClockState {
                phase: Phase::Idle(first_byte),
                since: now,
                first_head: Some(now + limits.header),
                trusted: false,
                stream_ends: None,
                evicted: None,
                armed: first_byte,
                reader: None,
            }),
            limits,
        });
        Conn {
            stream,
            id: open.add(&clock),
            open: Arc::clone(open),
            clock,
            sleep: Box::pin(tokio::time::sleep_until(first_byte)),
            stalled_since: None,
            pending: None,
            _permit: permit,
        }
    }

    /// Why the connection must close now, if it must (registering a wake-up for its deadline
    /// otherwise): evicted, or past its deadline — the phase's (see [`deadline`]), and for a
    /// write waiting on the socket since `stalled_since`, [`STALL`] after that.
    ///
    /// The timer is moved only to an earlier deadline. A later one — the idle deadline moves
    /// on with every request — is taken up when the armed one fires, so a kept-alive
    /// connection does not register its timer anew for every request.
    fn ended(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let (deadline, what) = {
            let mut s = self.clock.state();
            if s.evicted.is_some() {
                return Some(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "closed to make room for a new connection (the service is at --max-connections)",
                ));
            }
            let (deadline, what) = deadline(&s, self.stalled_since)?;
            if deadline < s.armed {
                self.sleep.as_mut().reset(deadline);
                s.armed = deadline;
            }
            (deadline, what)
        };
        loop {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return None;
            }
            if Instant::now() >= deadline {
                return Some(io::Error::new(io::ErrorKind::TimedOut, what));
            }
            // The armed deadline passed, but the connection's moved on since.
            self.sleep.as_mut().reset(deadline);
            self.clock.state().armed = deadline;
        }
    }

    /// Notes a write's outcome: a write that waits for the socket starts (or continues) a
    /// stall, one that made progress ends it.
    fn wrote<T>(&mut self, outcome: &Poll<io::Result<T>>) {
        match outcome {
            Poll::Pending => {
                self.stalled_since.get_or_insert_with(Instant::now);
            }
            Poll::Ready(_) => self.stalled_since = None,
        }
    }

    /// Writes what is left of the rewritten answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, at)) = self.pending.as_mut() {
            if *at >= bytes.len() {
                self.pending = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &bytes[*at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *at += n;
        }
        Poll::Ready(Ok(()))
    }
}

/// The deadline of a connection in state `s` whose writes wait for the socket since
/// `stalled_since`, and what it means when it passes; `None` when it has none (a request
/// being served, not a stream, writing freely).
fn deadline(s: &ClockState, stalled_since: Option<Instant>) -> Option<(Instant, &'static str)> {
    let phase = match s.phase {
        Phase::Idle(at) => Some((at, "an idle connection reached its idle timeout")),
        Phase::Head(at) => Some((
            at,
            "a request head did not arrive within the header timeout",
        )),
        Phase::Busy => s.stream_ends.map(|at| {
            (
                at,
                "an event stream reached its time limit and could not end",
            )
        }),
    };
    let stall = stalled_since.map(|since| {
        (
            since + STALL,
            "the client read nothing for 30 s (its writes made no progress)",
        )
    });
    match (phase, stall) {
        (Some(p), Some(w)) => Some(if w.0 < p.0 { w } else { p }),
        (p, w) => p.or(w),
    }
}

impl Conn {
    /// The connection's clock, for the service that serves its requests.
    pub(super) fn clock(&self) -> Arc<Clock> {
        Arc::clone(&self.clock)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.open.clocks().remove(&self.id);
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.clock.bytes_arrived();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match this.ended(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => {
                    this.clock.waiting_to_read(cx.waker());
                    Poll::Pending
                }
            },
            other => other,
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        let buf = match automatic_answer(buf) {
            // What comes before hyper's answer goes out as it is.
            Some((start, _)) if start > 0 => &buf[..start],
            Some((_, status)) => {
                this.pending = Some((json_answer(status), 0));
                // Written by the next calls (hyper flushes, then shuts the connection down)
                // if not all at once now; hyper's bytes are taken.
                if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                    return Poll::Ready(Err(e));
                }
                return Poll::Ready(Ok(buf.len()));
            }
            None => buf,
        };
        let outcome = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.wrote(&outcome);
        match outcome {
            Poll::Pending => match this.ended(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        let outcome = Pin::new(&mut this.stream).poll_flush(cx);
        this.wrote(&outcome);
        match outcome {
            Poll::Pending => match this.ended(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}

/// The statuses hyper answers on its own, without a body.
const AUTOMATIC: [u16; 3] = [400, 414, 431];

/// Where hyper's own error answer starts in `buf`, and its status: a response head that ends
/// `buf`, with one of the [`AUTOMATIC`] statuses and `content-length: 0`.
pub(super) fn automatic_answer(buf: &[u8]) -> Option<(usize, u16)> {
    if !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    // The last head in `buf` starts at the last status line.
    let start = buf
        .windows(9)
        .rposition(|w| w == b"HTTP/1.1 " || w == b"HTTP/1.0 ")?;
    let head = std::str::from_utf8(&buf[start..]).ok()?;
    let status: u16 = head.get(9..12)?.parse().ok()?;
    let empty = head
        .split("\r\n")
        .any(|line| line.eq_ignore_ascii_case("content-length: 0"));
    (AUTOMATIC.contains(&status) && empty).then_some((start, status))
}

/// The JSON answer that replaces hyper's answer with `status` (the connection is closed after).
pub(super) fn json_answer(status: u16) -> Vec<u8> {
    let (reason, code, message) = match status {
        414 => (
            "URI Too Long",
            "uri_too_long",
            "the request's URI is longer than 65534 bytes",
        ),
        431 => (
            "Request Header Fields Too Large",
            "headers_too_large",
            "the request's head (request line and headers) is too large",
        ),
        _ => (
            "Bad Request",
            "bad_request",
            "the request is not valid HTTP/1.1 (its request line or a header could not be parsed)",
        ),
    };
    let body = json!({ "error": {
        "code": code,
        "kind": dispenser::error::ErrorKind::InvalidInput.as_str(),
        "message": message,
        "written": dispenser::error::Written::Nothing.as_str(),
    } })
    .to_string();
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_own_bodyless_errors_are_rewritten() {
        let auto = b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(automatic_answer(auto), Some((0, 414)));
        // After the tail of an earlier answer in the same write.
        let mut both = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}".to_vec();
        let earlier = both.len();
        both.extend_from_slice(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(automatic_answer(&both), Some((earlier, 400)));
        for ours in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-length: 93\r\n\r\n"[..],
            b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 9\r\n\r\n{\"a\": 1}\n",
        ] {
            assert_eq!(
                automatic_answer(ours),
                None,
                "{}",
                String::from_utf8_lossy(ours)
            );
        }
        let answer = String::from_utf8(json_answer(431)).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (&body["error"]["code"], &body["error"]["kind"]),
            (&json!("headers_too_large"), &json!("invalid_input"))
        );
    }

    fn state(phase: Phase, stream_ends: Option<Instant>) -> ClockState {
        let now = Instant::now();
        ClockState {
            phase,
            since: now,
            first_head: None,
            trusted: true,
            stream_ends,
            evicted: None,
            armed: now,
            reader: None,
        }
    }

    /// A request being served has no deadline of its own; an event stream has its limit
    /// (issue 37, found 7: a blocked stream was never ended), and a write that makes no
    /// progress for [`STALL`] ends any connection, whichever comes first.
    #[test]
    fn streams_and_stalled_writes_have_deadlines() {
        let now = Instant::now();
        assert!(deadline(&state(Phase::Busy, None), None).is_none());
        let ends = now + MAX_STREAM;
        assert_eq!(
            deadline(&state(Phase::Busy, Some(ends)), None).map(|d| d.0),
            Some(ends)
        );
        let (at, what) = deadline(&state(Phase::Busy, Some(ends)), Some(now)).unwrap();
        assert_eq!(at, now + STALL);
        assert!(what.contains("read nothing"), "{what}");
        assert_eq!(
            deadline(&state(Phase::Busy, None), Some(now)).map(|d| d.0),
            Some(now + STALL)
        );
        let idle = now + Duration::from_secs(5);
        assert_eq!(
            deadline(&state(Phase::Idle(idle), None), Some(now)).map(|d| d.0),
            Some(idle)
        );
    }

    #[test]
    fn a_cap_above_the_open_file_limit_is_refused() {
        if let Some(limit) = open_file_limit() {
            let room = limit.saturating_sub(RESERVED_FILES);
            assert!(max_connections(Some(room + 1)).is_err());
            assert_eq!(
                max_connections(None).unwrap() as u64,
                DEFAULT_MAX_CONNECTIONS.min(room)
            );
        }
        assert_eq!(max_connections(Some(5)).unwrap(), 5);
    }
}
