//! `bench --rtt MS`: the database made MS milliseconds of round trip away.
//!
//! A TCP proxy in this process stands between the benchmark's database connections and the
//! server: every byte read from one side is written to the other `MS/2` after it was read,
//! in each direction — a delay line, not a queue: messages in flight at once are all held
//! the same time, so the delay adds latency without limiting throughput. The connection
//! string is rewritten to reach the server's first host through the proxy, directly
//! (`directConnection=true`).
//!
//! Why threads and not tokio: tokio's timer has a resolution of one millisecond (a sleep of
//! 0.25 ms lasts up to 1.25 ms), too coarse for the half millisecond of a fast network. Each
//! direction of each connection has a reader thread (which stamps what it reads) and a writer
//! thread (which sleeps until the stamp plus the delay, with a timer slack of 1 ns, and
//! corrects its sleeps by how late it woke on average). The proxy measures what it applied:
//! [`DelayProxy::held`] is the median time a chunk of bytes spent in it, each way (a median,
//! so that a thread that waited for a core now and then on a loaded machine does not move it).
//!
//! It is for benchmarks on one machine (the local server, a staging host): a replica set's
//! other members are not reached through it, and TLS to a host name would not verify against
//! the proxy's address.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dispenser::Error;

/// The stack of each proxy thread (its buffer is on the heap).
const STACK: usize = 128 * 1024;
/// The most one read takes from a socket.
const CHUNK: usize = 64 * 1024;
/// The longest round trip `--rtt` accepts, in milliseconds.
pub(crate) const MAX_RTT_MS: f64 = 10_000.0;

/// `--rtt`: a round trip in milliseconds, 0 or more (0: through the proxy, no delay).
pub(crate) fn parse_rtt(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds"))?;
    if !(v.is_finite() && (0.0..=MAX_RTT_MS).contains(&v)) {
        return Err(format!(
            "{s} must be at least 0 and at most {MAX_RTT_MS} milliseconds"
        ));
    }
    Ok(v)
}

fn rtt_error(reason: String) -> Error {
    Error::InvalidArgument {
        what: "--rtt".into(),
        reason,
    }
}

/// The width of a bucket of [`Held`], in nanoseconds.
const BUCKET_NS: u64 = 10_000;
/// The buckets of [`Held`]: 10 µs each up to 1 s (longer holds count in the last).
const BUCKETS: usize = 100_000;

/// What the writers measured: how long the chunks they wrote were held, counted in buckets
/// of 10 µs, and the longest.
struct Held {
    buckets: Box<[AtomicU64]>,
    max_ns: AtomicU64,
}

impl Default for Held {
    fn default() -> Self {
        Held {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max_ns: AtomicU64::new(0),
        }
    }
}

impl Held {
    fn record(&self, ns: u64) {
        let i = usize::try_from(ns / BUCKET_NS).map_or(BUCKETS - 1, |i| i.min(BUCKETS - 1));
        self.buckets[i].fetch_add(1, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
    }

    /// The median hold (the middle of its bucket); zero before any.
    fn median(&self) -> Duration {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return Duration::ZERO;
        }
        let mut seen = 0;
        for (i, c) in (0_u64..).zip(&counts) {
            seen += c;
            if 2 * seen >= total {
                return Duration::from_nanos(i * BUCKET_NS + BUCKET_NS / 2);
            }
        }
        Duration::ZERO
    }
}

struct Shared {
    upstream: SocketAddr,
    one_way: Duration,
    stop: AtomicBool,
    held: Held,
    /// How late the writers' sleeps end, on average, in nanoseconds: shared, so that a new
    /// connection's writer starts from what the others learned (see [`Lateness`]).
    late_ns: AtomicU64,
    /// Both sockets of every connection, to shut them down when the proxy stops.
    sockets: Mutex<Vec<TcpStream>>,
}

/// The proxy: listens on `127.0.0.1:0`; stops (shutting every connection down) when dropped.
pub(crate) struct DelayProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    /// The round trip asked for, in milliseconds.
    rtt_ms: f64,
}

/// The round trip a run was made at, for its report: what was asked and what the proxy
/// applied (twice the median time a chunk of bytes spent in it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RttLabel {
    pub(crate) asked_ms: f64,
    pub(crate) applied_ms: f64,
}

impl RttLabel {
    /// `+2 ms round trip (applied: 2.01 ms)`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "database +{} ms round trip away (proxy applied {:.3} ms)",
            self.asked_ms, self.applied_ms
        )
    }
}

impl DelayProxy {
    /// A proxy in front of the first host of `uri`, holding each direction `rtt_ms / 2`.
    pub(crate) fn start(uri: &str, rtt_ms: f64) -> Result<Self, Error> {
        let host = first_host(uri)?;
        let upstream = host
            .to_socket_addrs()
            .map_err(|e| rtt_error(format!("cannot resolve {host}: {e}")))?
            .next()
            .ok_or_else(|| rtt_error(format!("{host} resolves to no address")))?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| rtt_error(format!("cannot listen on the loopback: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| rtt_error(e.to_string()))?;
        let shared = Arc::new(Shared {
            upstream,
            one_way: Duration::from_secs_f64(rtt_ms / 2000.0),
            stop: AtomicBool::new(false),
            held: Held::default(),
            late_ns: AtomicU64::new(0),
            sockets: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("rtt-accept".into())
            .stack_size(STACK)
            .spawn(move || accept_loop(&listener, &s))
            .map_err(|e| rtt_error(format!("cannot start the proxy: {e}")))?;
        Ok(DelayProxy {
            addr,
            shared,
            accept: Some(accept),
            rtt_ms,
        })
    }

    /// `uri` made to reach the server through this proxy.
    pub(crate) fn uri(&self, uri: &str) -> Result<String, Error> {
        proxied_uri(uri, self.addr)
    }

    /// The median time a chunk of bytes spent in the proxy, each way, so far (to 10 µs; zero
    /// before any).
    pub(crate) fn held(&self) -> Duration {
        self.shared.held.median()
    }

    /// The longest a chunk was held so far.
    #[cfg(test)]
    pub(crate) fn held_max(&self) -> Duration {
        Duration::from_nanos(self.shared.held.max_ns.load(Relaxed))
    }

    /// What a report says of the round trip.
    pub(crate) fn label(&self) -> RttLabel {
        RttLabel {
            asked_ms: self.rtt_ms,
            applied_ms: 2.0 * self.held().as_secs_f64() * 1000.0,
        }
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        // Wake the accept loop with a connection of our own.
        drop(TcpStream::connect(self.addr));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let sockets = std::mem::take(
            &mut *self
                .shared
                .sockets
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for s in sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stop.load(Relaxed) {
            return;
        }
        let Ok(client) = client else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if let Err(e) = connect(client, shared) {
            tracing::warn!("bench --rtt: a connection through the proxy failed: {e}");
        }
    }
}

/// Joins `client` to a fresh connection to the server: two pumps, one each way.
fn connect(client: TcpStream, shared: &Arc<Shared>) -> std::io::Result<()> {
    let server = TcpStream::connect(shared.upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    {
        let mut sockets = shared
            .sockets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sockets.retain(|s| s.peer_addr().is_ok());
        sockets.push(client.try_clone()?);
        sockets.push(server.try_clone()?);
    }
    pump(client.try_clone()?, server.try_clone()?, shared)?;
    pump(server, client, shared)
}

/// One direction: a reader thread stamps what it reads from `from`, a writer thread writes it
/// to `to` once it has been held the delay.
fn pump(from: TcpStream, to: TcpStream, shared: &Arc<Shared>) -> std::io::Result<()> {
    let (tx, rx) = channel();
    std::thread::Builder::new()
        .name("rtt-read".into())
        .stack_size(STACK)
        .spawn(move || read_side(from, &tx))?;
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name("rtt-write".into())
        .stack_size(STACK)
        .spawn(move || write_side(to, &rx, &s))?;
    Ok(())
}

fn read_side(mut from: TcpStream, tx: &Sender<(Instant, Vec<u8>)>) {
    let mut buf = vec![0_u8; CHUNK];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return, // the channel closes: the writer shuts its side down
            Ok(n) => {
                if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        }
    }
}

fn write_side(mut to: TcpStream, rx: &Receiver<(Instant, Vec<u8>)>, shared: &Shared) {
    // Sleeps end within microseconds of their deadline, not the default 50 µs later.
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    let late = Lateness(&shared.late_ns);
    for (read_at, bytes) in rx {
        late.sleep_until(read_at + shared.one_way);
        if to.write_all(&bytes).is_err() {
            break;
        }
        let held = u64::try_from(read_at.elapsed().as_nanos()).unwrap_or(u64::MAX);
        shared.held.record(held);
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// How late the proxy's sleeps end, on average (an exponentially weighted mean over every
/// writer's sleeps, so that a connection that sends few messages is corrected as well as a
/// busy one): each sleep aims that much before its deadline, so that on average it ends at
/// the deadline. Each sample counts for at most [`MOST_LATE`]: a thread that waited
/// milliseconds for a core on a loaded machine says nothing of the next sleep, and counted in
/// full it would make every sleep after it end that much early.
struct Lateness<'a>(&'a AtomicU64);

/// The most one sleep's lateness counts for in [`Lateness`]: a timer's wake-up, not a wait
/// for a core.
const MOST_LATE: Duration = Duration::from_micros(200);

impl Lateness<'_> {
    fn sleep_until(&self, deadline: Instant) {
        let now = Instant::now();
        if deadline <= now {
            return;
        }
        let mean_ns = self.0.load(Relaxed) as f64;
        let early = Duration::from_nanos(mean_ns as u64).min(deadline - now);
        let target = deadline - early;
        let now = Instant::now();
        if target > now {
            std::thread::sleep(target - now);
        }
        let woke = Instant::now();
        let late = woke
            .saturating_duration_since(target)
            .min(MOST_LATE)
            .as_nanos() as f64;
        // Racing writers may lose an update: the mean stays a mean of recent sleeps.
        self.0
            .store((mean_ns + (late - mean_ns) / 8.0) as u64, Relaxed);
    }
}

/// `host:port` of the first host of a `mongodb://` URI (port 27017 when none is given).
fn first_host(uri: &str) -> Result<String, Error> {
    let (_, hosts, _) = split_uri(uri)?;
    let first = hosts.split(',').next().unwrap_or(hosts);
    let has_port = match first.rfind(']') {
        Some(close) => first[close..].contains(':'),
        None => first.contains(':'),
    };
    Ok(if has_port {
        first.to_owned()
    } else {
        format!("{first}:27017")
    })
}

/// A `mongodb://` URI cut in three: up to and including the user info's `@` (or the
/// scheme), the hosts, and the rest (the path and the options).
fn split_uri(uri: &str) -> Result<(&str, &str, &str), Error> {
    dispenser::error::redact::check_credentials(uri)?;
    let Some(rest) = uri.strip_prefix("mongodb://") else {
        return Err(rtt_error(format!(
            "{} is not a mongodb:// URI: the proxy fronts one host given by address \
             (a mongodb+srv:// URI names its hosts in DNS)",
            dispenser::error::redact::redact_uri(uri)
        )));
    };
    let scheme = uri.len() - rest.len();
    // The driver cuts the options off at the first '?', and the user info ends at the last
    // '@' before them.
    let before_options = rest.find('?').unwrap_or(rest.len());
    let hosts_from = rest[..before_options].rfind('@').map_or(0, |at| at + 1);
    let hosts_len = rest[hosts_from..before_options]
        .find('/')
        .unwrap_or(before_options - hosts_from);
    let start = scheme + hosts_from;
    let end = start + hosts_len;
    if hosts_len == 0 {
        return Err(rtt_error(format!(
            "{} names no host",
            dispenser::error::redact::redact_uri(uri)
        )));
    }
    Ok((&uri[..start], &uri[start..end], &uri[end..]))
}

/// `uri` with its hosts replaced by `addr` and `directConnection=true` among its options
/// (replacing any `directConnection` it had).
fn proxied_uri(uri: &str, addr: SocketAddr) -> Result<String, Error> {
    let (head, _, rest) = split_uri(uri)?;
    let (path, options) = match rest.split_once('?') {
        Some((p, o)) => (p, o),
        None => (rest, ""),
    };
    let path = if path.is_empty() { "/" } else { path };
    let mut kept: Vec<&str> = options
        .split('&')
        .filter(|o| !o.is_empty() && !o.to_ascii_lowercase().starts_with("directconnection="))
        .collect();
    kept.push("directConnection=true");
    Ok(format!("{head}{addr}{path}?{}", kept.join("&")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_pointed_at_the_proxy() {
        let addr: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        for (uri, want) in [
            (
                "mongodb://127.0.0.1:27017",
                "mongodb://127.0.0.1:4000/?directConnection=true",
            ),
            (
                "mongodb://u:p%40ss@db1:27018,db2/app?w=majority&directConnection=false",
                "mongodb://u:p%40ss@127.0.0.1:4000/app?w=majority&directConnection=true",
            ),
            (
                "mongodb://h/?appName=a@b",
                "mongodb://127.0.0.1:4000/?appName=a@b&directConnection=true",
            ),
        ] {
            assert_eq!(proxied_uri(uri, addr).unwrap(), want, "{uri}");
        }
        assert_eq!(
            first_host("mongodb://u:p@db1:27018,db2/").unwrap(),
            "db1:27018"
        );
        assert_eq!(first_host("mongodb://db1").unwrap(), "db1:27017");
        assert_eq!(first_host("mongodb://[::1]/").unwrap(), "[::1]:27017");
        assert_eq!(first_host("mongodb://[::1]:5/").unwrap(), "[::1]:5");
        let srv = proxied_uri("mongodb+srv://cluster.example.com/", addr).unwrap_err();
        assert!(srv.to_string().contains("mongodb+srv"), "{srv}");
        assert!(proxied_uri("mongodb:///db", addr).is_err());
        // A password is never quoted.
        let bad = proxied_uri("mongodb+srv://u:hunter2@h/", addr).unwrap_err();
        assert!(!bad.to_string().contains("hunter2"), "{bad}");
    }

    #[test]
    fn the_hold_is_the_median_not_pulled_by_a_late_wake() {
        let h = Held::default();
        assert_eq!(h.median(), Duration::ZERO);
        for _ in 0..9 {
            h.record(1_000_000);
        }
        // A writer that waited 900 ms for a core moves a mean by 90 ms, the median not at all.
        h.record(900_000_000);
        h.record(u64::MAX);
        assert_eq!(h.median(), Duration::from_micros(1005));
    }

    #[test]
    fn round_trips_are_checked() {
        assert_eq!(parse_rtt("0"), Ok(0.0));
        assert_eq!(parse_rtt("0.5"), Ok(0.5));
        assert!(parse_rtt("-1").is_err());
        assert!(parse_rtt("nan").is_err());
        assert!(parse_rtt("1e9").is_err());
    }

    /// An echo server behind the proxy: a message and its echo cross the proxy twice each
    /// (there and back), so a round trip through it takes the asked round trip more than
    /// one without it. A loaded machine only adds time (a thread waiting for a core): the
    /// bounds are 10 % below — half a round trip (one direction held) is far out — and 75 %
    /// above, which a proxy holding each direction a whole round trip (twice the time) is
    /// not within. (It failed by chance at "within 10 %" both ways: 2.383 ms more for 2 ms
    /// asked, beside a mutation run at a load of 5 on 2 cores.)
    #[test]
    fn a_round_trip_through_the_proxy_takes_the_asked_time_more() {
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let echo_addr = echo.local_addr().unwrap();
        std::thread::spawn(move || {
            for conn in echo.incoming() {
                let Ok(mut conn) = conn else { return };
                std::thread::spawn(move || {
                    let mut buf = [0_u8; 64];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 || conn.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let ping = |addr: SocketAddr| -> Duration {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_nodelay(true).unwrap();
            let mut times = Vec::new();
            let mut buf = [0_u8; 8];
            for i in 0..41_u64 {
                let t0 = Instant::now();
                c.write_all(&i.to_le_bytes()).unwrap();
                c.read_exact(&mut buf).unwrap();
                times.push(t0.elapsed());
                assert_eq!(u64::from_le_bytes(buf), i);
            }
            times.sort_unstable();
            times[times.len() / 2]
        };
        let direct = ping(echo_addr);
        for rtt_ms in [2.0, 10.0] {
            let proxy = DelayProxy::start(&format!("mongodb://{echo_addr}"), rtt_ms).unwrap();
            let through = ping(proxy.addr);
            let added = through.saturating_sub(direct).as_secs_f64() * 1000.0;
            let within = |ms: f64| (rtt_ms * 0.9..rtt_ms * 1.75).contains(&ms);
            assert!(
                within(added),
                "asked {rtt_ms} ms, a round trip took {added:.3} ms more through the proxy"
            );
            let applied = proxy.label().applied_ms;
            assert!(
                within(applied),
                "asked {rtt_ms} ms, the proxy says it applied {applied:.3} ms"
            );
            assert!(proxy.held_max() >= Duration::from_secs_f64(rtt_ms / 2000.0) / 2);
        }
    }
}
