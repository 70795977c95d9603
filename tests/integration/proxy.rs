//! A fault-injecting TCP proxy between the driver and the test server. Loopback only; it
//! stops, with every connection, when dropped.
//!
//! The proxy understands just enough of the wire protocol to work on whole messages: every
//! MongoDB message starts with its total length as a 4-byte little-endian integer. It reads
//! one request from the client, decides its fate, and (usually) forwards it and then its
//! reply. The faults, each with its own probability, drawn from a seeded xorshift:
//!
//! * **reset** before forwarding: the request never reaches the server, the client sees a
//!   connection reset (a failure whose outcome is known: nothing was written);
//! * **drop the reply**: the request is forwarded and executed, its reply is swallowed and
//!   the connection is then either reset or stalled (kept open, silent, until the client
//!   gives up). This is the lost acknowledgement: the write happened, the client never
//!   learns it;
//! * **latency**: each forwarded reply is delayed by a random 0..=max.
//!
//! It can also answer a PLAIN `saslStart` itself and accept any login, so that a URI with a
//! password works against the (auth-less) test server; and, for one command on one collection,
//! hold the next such request until a test opens its [`Gate`] (an interleaving forced between
//! two steps of an operation) or answer it itself with a reply the test gives (an error a
//! server configured otherwise would send, such as a validator's).
//!
//! The connection handshake and monitoring commands (`hello`, `isMaster`, and anything that is
//! not an `OP_MSG`) are spared by default, so that faults land on the operations under test
//! rather than on server discovery.
//!
//! A **script** ([`Proxy::script`]) instead gives one chosen request one [`Fault`] and forwards
//! everything else: the requests are counted in the order they arrive (connection handshakes
//! and the driver's monitoring excepted, an application's own `hello` included), and the
//! `at`-th gets the fault. [`Proxy::seen`] lists what was counted, so a test can first run an
//! operation untouched to learn its requests, then fault each in turn.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dispenser::mongodb::bson::{Binary, Document, doc, spec::BinarySubtype};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};

/// Largest message accepted (MongoDB's maxMessageSizeBytes is 48 MB).
const MAX_MESSAGE: usize = 48_000_000;
pub const OP_MSG: i32 = 2013;
/// OP_MSG flag: the sender will not wait for a reply.
const MORE_TO_COME: u32 = 1 << 1;

/// A tiny xorshift64 generator: reproducible faults from a seed, without a dependency.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // Never zero (a zero state stays zero); mix the seed a little.
        XorShift((seed ^ 0x9E37_79B9_7F4A_7C15).max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A uniform number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1_u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// A uniform number in `[0, n)` (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

/// What the proxy does to the requests it sees (probabilities per request).
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Forward the request, swallow its reply.
    pub drop_reply: f64,
    /// Of the dropped replies, the share after which the connection stalls (stays open and
    /// silent) instead of being reset.
    pub stall_share: f64,
    /// Reset the connection instead of forwarding the request.
    pub reset: f64,
    /// Each forwarded reply is delayed by a random duration up to this.
    pub max_latency: Duration,
    /// Also apply faults to `hello` / `isMaster` and non-`OP_MSG` messages.
    pub include_handshakes: bool,
}

/// What the proxy did.
#[derive(Debug, Default)]
struct Counters {
    connections: AtomicU64,
    requests: AtomicU64,
    targeted: AtomicU64,
    forwarded: AtomicU64,
    replies: AtomicU64,
    reset_before: AtomicU64,
    dropped_then_reset: AtomicU64,
    dropped_then_stalled: AtomicU64,
    delayed: AtomicU64,
}

/// A snapshot of the proxy's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub connections: u64,
    pub requests: u64,
    /// Requests subject to faults (not handshakes, unless included).
    pub targeted: u64,
    /// Requests forwarded to the server.
    pub forwarded: u64,
    /// Replies delivered to the client.
    pub replies: u64,
    pub reset_before: u64,
    pub dropped_then_reset: u64,
    pub dropped_then_stalled: u64,
    pub delayed: u64,
}

impl Counts {
    /// Replies the server sent that the client never saw: writes with a lost acknowledgement.
    pub fn dropped(&self) -> u64 {
        self.dropped_then_reset + self.dropped_then_stalled
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "proxy: {} conns, {} requests ({} targeted), {} forwarded, {} replies, {} resets before forwarding, {} replies dropped ({} then reset, {} then stalled), {} delayed",
            self.connections,
            self.requests,
            self.targeted,
            self.forwarded,
            self.replies,
            self.reset_before,
            self.dropped(),
            self.dropped_then_reset,
            self.dropped_then_stalled,
            self.delayed
        )
    }
}

/// What a script does to the one request it picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward it, swallow the reply, and keep the connection open and silent: a reply lost
    /// (the write happened; the client learns nothing until it gives up).
    DropReply,
    /// Forward it, swallow the reply, and reset the connection: a connection cut after the
    /// write.
    ResetAfter,
    /// Never forward it and never answer, keeping the connection open: a server that hangs.
    NeverAnswer,
}

/// One counted request: its command and the collection (or the value of the command's
/// field) it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub command: String,
    pub target: String,
}

impl Seen {
    /// Whether the command writes (an insert, update, delete, findAndModify, index creation).
    pub fn writes(&self) -> bool {
        matches!(
            self.command.as_str(),
            "insert" | "update" | "delete" | "findAndModify" | "createIndexes"
        )
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.command, self.target)
    }
}

/// The scripted fault and what the script counted.
#[derive(Default)]
struct Scripted {
    fault: Option<(usize, Fault)>,
    seen: Vec<Seen>,
}

struct Shared {
    upstream: SocketAddr,
    script: Mutex<Option<Scripted>>,
    faults: Mutex<Faults>,
    rng: Mutex<XorShift>,
    counters: Counters,
    fake_plain_auth: AtomicBool,
    /// One-shot interceptions: (command, collection, what to do with the next such request).
    intercepts: Mutex<Vec<(String, String, Intercept)>>,
}

enum Intercept {
    /// Hold the request after letting this many such requests pass.
    Hold(Arc<Gate>, usize),
    Answer(Document),
}

/// A request the proxy holds before forwarding it ([`Proxy::hold_next`]).
#[derive(Default)]
pub struct Gate {
    arrived: Notify,
    open: Notify,
}

impl Gate {
    /// Waits until the request has reached the proxy (it is not forwarded yet).
    pub async fn arrived(&self) {
        self.arrived.notified().await;
    }

    /// Lets the request go on to the server.
    pub fn open(&self) {
        self.open.notify_one();
    }
}

/// The proxy. Listens on `127.0.0.1:0`; stops (with every connection) when dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every connection task.
        self.task.abort();
    }
}

impl Proxy {
    /// A proxy in front of `upstream` (must be a loopback address).
    pub async fn start(upstream: SocketAddr, faults: Faults, seed: u64) -> Proxy {
        assert!(upstream.ip().is_loopback(), "loopback only: {upstream}");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let shared = Arc::new(Shared {
            upstream,
            script: Mutex::new(None),
            faults: Mutex::new(faults),
            rng: Mutex::new(XorShift::new(seed)),
            counters: Counters::default(),
            fake_plain_auth: AtomicBool::new(false),
            intercepts: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let task = tokio::spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                s.counters.connections.fetch_add(1, Relaxed);
                conns.spawn(serve(client, s.clone()));
                // Reap finished connection tasks so the set stays small.
                while conns.try_join_next().is_some() {}
            }
        });
        Proxy { addr, shared, task }
    }

    /// A proxy in front of the test server.
    pub async fn to_test_server(faults: Faults, seed: u64) -> Proxy {
        Proxy::start(upstream_addr(&crate::common::uri()), faults, seed).await
    }

    /// A connection string for the proxy (`extra` is appended to the query).
    pub fn uri(&self, extra: &str) -> String {
        format!("mongodb://{}/?directConnection=true{extra}", self.addr)
    }

    /// From now on counts the requests (see the module's docs) and gives the `at`-th (from
    /// 0) `fault`; `None` only counts. The probabilistic [`Faults`] no longer apply.
    pub fn script(&self, fault: Option<(usize, Fault)>) {
        *self.shared.script.lock().expect("script") = Some(Scripted {
            fault,
            seen: Vec::new(),
        });
    }

    /// The requests the script counted, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared
            .script
            .lock()
            .expect("script")
            .as_ref()
            .map(|s| s.seen.clone())
            .unwrap_or_default()
    }

    /// Answers PLAIN `saslStart` itself, accepting any user and password.
    pub fn accept_any_plain_login(&self) {
        self.shared.fake_plain_auth.store(true, Relaxed);
    }

    /// Changes what the proxy does to the requests that follow, on every connection (for
    /// example `reset: 1.0` with `include_handshakes` to make the server unreachable, then
    /// `Faults::default()` to make it reachable again).
    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock().expect("faults") = faults;
    }

    /// Holds the next `command` on `collection` (on any connection) before forwarding it,
    /// until the returned gate is opened.
    pub fn hold_next(&self, command: &str, collection: &str) -> Arc<Gate> {
        self.hold_after(command, collection, 0)
    }

    /// As [`Proxy::hold_next`], after letting `pass` such requests go through untouched.
    pub fn hold_after(&self, command: &str, collection: &str, pass: usize) -> Arc<Gate> {
        let gate = Arc::new(Gate::default());
        self.intercept(command, collection, Intercept::Hold(gate.clone(), pass));
        gate
    }

    /// Answers the next `command` on `collection` itself with `reply`, without forwarding it:
    /// what a server configured otherwise would answer (for example a validator's write error).
    pub fn answer_next(&self, command: &str, collection: &str, reply: Document) {
        self.intercept(command, collection, Intercept::Answer(reply));
    }

    fn intercept(&self, command: &str, collection: &str, what: Intercept) {
        self.shared.intercepts.lock().expect("intercepts").push((
            command.to_owned(),
            collection.to_owned(),
            what,
        ));
    }

    pub fn counts(&self) -> Counts {
        let c = &self.shared.counters;
        Counts {
            connections: c.connections.load(Relaxed),
            requests: c.requests.load(Relaxed),
            targeted: c.targeted.load(Relaxed),
            forwarded: c.forwarded.load(Relaxed),
            replies: c.replies.load(Relaxed),
            reset_before: c.reset_before.load(Relaxed),
            dropped_then_reset: c.dropped_then_reset.load(Relaxed),
            dropped_then_stalled: c.dropped_then_stalled.load(Relaxed),
            delayed: c.delayed.load(Relaxed),
        }
    }
}

/// `host:port` of the first host in a `mongodb://` URI, resolved (loopback expected).
pub fn upstream_addr(uri: &str) -> SocketAddr {
    let rest = uri.split_once("://").map_or(uri, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let first = hosts.split(',').next().unwrap_or(hosts);
    let first = if first.contains(':') {
        first.to_owned()
    } else {
        format!("{first}:27017")
    };
    let first = first.replace("localhost", "127.0.0.1");
    first
        .parse()
        .unwrap_or_else(|e| panic!("cannot parse {first:?} from MONGODB_URI as ip:port: {e}"))
}

/// Reads one whole wire message (header included). `None` on a clean EOF before it starts.
pub async fn read_message(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0_u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let total = i32::from_le_bytes(len);
    let total = usize::try_from(total)
        .ok()
        .filter(|t| (16..=MAX_MESSAGE).contains(t))
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad length {total}"),
            )
        })?;
    let mut msg = vec![0_u8; total];
    msg[..4].copy_from_slice(&len);
    stream.read_exact(&mut msg[4..]).await?;
    Ok(Some(msg))
}

fn op_code(msg: &[u8]) -> i32 {
    i32::from_le_bytes([msg[12], msg[13], msg[14], msg[15]])
}

/// The command name of an `OP_MSG` (the first key of its body section), if it has one.
pub fn command_name(msg: &[u8]) -> Option<String> {
    if op_code(msg) != OP_MSG || msg.len() < 27 || msg[20] != 0 {
        return None;
    }
    // header (16) + flags (4) + section kind (1) + document length (4) + element type (1)
    let key = &msg[26..];
    let end = key.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&key[..end]).into_owned())
}

/// The interception registered for `request`'s command and collection, taken (one-shot).
fn take_intercept(shared: &Shared, request: &[u8]) -> Option<Intercept> {
    let mut intercepts = shared.intercepts.lock().expect("intercepts");
    if intercepts.is_empty() {
        return None;
    }
    let name = command_name(request)?;
    // The body section: header (16) + flags (4) + section kind (1), then the document.
    let body = Document::from_reader(request.get(21..)?).ok()?;
    let collection = body.get_str(&name).ok()?;
    let i = intercepts
        .iter()
        .position(|(c, coll, _)| *c == name && coll == collection)?;
    if let Intercept::Hold(_, pass) = &mut intercepts[i].2
        && *pass > 0
    {
        *pass -= 1;
        return None;
    }
    Some(intercepts.remove(i).2)
}

/// An `OP_MSG` reply to `request` saying the SASL conversation is done.
fn sasl_done_reply(request: &[u8]) -> Vec<u8> {
    reply_to(
        request,
        &doc! {
            "conversationId": 1,
            "done": true,
            "payload": Binary { subtype: BinarySubtype::Generic, bytes: Vec::new() },
            "ok": 1.0,
        },
    )
}

/// An `OP_MSG` reply to `request` with `body`.
fn reply_to(request: &[u8], body: &Document) -> Vec<u8> {
    let mut bson = Vec::new();
    body.to_writer(&mut bson).expect("serialize");
    let total = i32::try_from(16 + 4 + 1 + bson.len()).expect("small");
    let mut msg = Vec::new();
    msg.extend_from_slice(&total.to_le_bytes());
    msg.extend_from_slice(&0_i32.to_le_bytes()); // requestID
    msg.extend_from_slice(&request[4..8]); // responseTo: the request's requestID
    msg.extend_from_slice(&OP_MSG.to_le_bytes());
    msg.extend_from_slice(&0_u32.to_le_bytes()); // flags
    msg.push(0); // section kind: body
    msg.extend_from_slice(&bson);
    msg
}

fn more_to_come(msg: &[u8]) -> bool {
    op_code(msg) == OP_MSG
        && msg.len() >= 20
        && u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]) & MORE_TO_COME != 0
}

fn is_handshake(msg: &[u8]) -> bool {
    match command_name(msg) {
        Some(name) => {
            let name = name.to_ascii_lowercase();
            name == "hello" || name == "ismaster"
        }
        None => true,
    }
}

enum Fate {
    Reset,
    DropThenReset,
    DropThenStall,
    Forward(Duration),
    /// Held forever, never forwarded.
    Hang,
}

/// The command and its target of an `OP_MSG` request, for a script's count.
fn seen(request: &[u8]) -> Option<Seen> {
    let command = command_name(request)?;
    let body = Document::from_reader(request.get(21..)?).ok()?;
    let target = match body.get(&command) {
        Some(dispenser::mongodb::bson::Bson::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    // The driver's monitoring: an awaited `hello` (streaming) says so.
    let lower = command.to_ascii_lowercase();
    if (lower == "hello" || lower == "ismaster")
        && (body.contains_key("topologyVersion") || body.contains_key("maxAwaitTimeMS"))
    {
        return None;
    }
    Some(Seen { command, target })
}

/// The fate of `msg` under a script (`first`: the first message of its connection, the
/// handshake, never counted), `None` when no script runs.
fn scripted(shared: &Shared, msg: &[u8], first: bool) -> Option<Fate> {
    let mut script = shared.script.lock().expect("script");
    let script = script.as_mut()?;
    let counted = if first { None } else { seen(msg) };
    let Some(s) = counted else {
        return Some(Fate::Forward(Duration::ZERO));
    };
    let at = script.seen.len();
    script.seen.push(s);
    Some(match script.fault {
        Some((k, fault)) if k == at => {
            shared.counters.targeted.fetch_add(1, Relaxed);
            match fault {
                Fault::DropReply => Fate::DropThenStall,
                Fault::ResetAfter => Fate::DropThenReset,
                Fault::NeverAnswer => Fate::Hang,
            }
        }
        _ => Fate::Forward(Duration::ZERO),
    })
}

fn decide(shared: &Shared, msg: &[u8]) -> Fate {
    let faults = *shared.faults.lock().expect("faults");
    if !faults.include_handshakes && is_handshake(msg) {
        return Fate::Forward(Duration::ZERO);
    }
    shared.counters.targeted.fetch_add(1, Relaxed);
    let mut rng = shared.rng.lock().expect("rng");
    if rng.chance(faults.reset) {
        return Fate::Reset;
    }
    if rng.chance(faults.drop_reply) {
        return if rng.chance(faults.stall_share) {
            Fate::DropThenStall
        } else {
            Fate::DropThenReset
        };
    }
    let max = u64::try_from(faults.max_latency.as_micros()).unwrap_or(u64::MAX);
    Fate::Forward(Duration::from_micros(rng.below(max.saturating_add(1))))
}

/// Closes with a TCP reset (SO_LINGER 0) rather than a clean FIN.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

async fn serve(mut client: TcpStream, shared: Arc<Shared>) {
    let Ok(mut server) = TcpStream::connect(shared.upstream).await else {
        reset(client);
        return;
    };
    let c = &shared.counters;
    let mut first = true;
    loop {
        let Ok(Some(request)) = read_message(&mut client).await else {
            return;
        };
        let handshake = std::mem::take(&mut first);
        c.requests.fetch_add(1, Relaxed);
        if shared.fake_plain_auth.load(Relaxed)
            && command_name(&request).as_deref() == Some("saslStart")
        {
            if client.write_all(&sasl_done_reply(&request)).await.is_err() {
                return;
            }
            continue;
        }
        match take_intercept(&shared, &request) {
            Some(Intercept::Hold(gate, _)) => {
                gate.arrived.notify_one();
                gate.open.notified().await;
            }
            Some(Intercept::Answer(body)) => {
                if client.write_all(&reply_to(&request, &body)).await.is_err() {
                    return;
                }
                continue;
            }
            None => {}
        }
        let fate =
            scripted(&shared, &request, handshake).unwrap_or_else(|| decide(&shared, &request));
        if let Fate::Hang = fate {
            // Silent until the client gives up and closes (or the proxy is dropped).
            let mut sink = [0_u8; 4096];
            while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {}
            return;
        }
        if let Fate::Reset = fate {
            c.reset_before.fetch_add(1, Relaxed);
            reset(client);
            return;
        }
        if server.write_all(&request).await.is_err() {
            reset(client);
            return;
        }
        c.forwarded.fetch_add(1, Relaxed);
        if more_to_come(&request) {
            continue;
        }
        let Ok(Some(reply)) = read_message(&mut server).await else {
            reset(client);
            return;
        };
        match fate {
            Fate::Reset | Fate::Hang => unreachable!("handled above"),
            Fate::DropThenReset => {
                c.dropped_then_reset.fetch_add(1, Relaxed);
                reset(client);
                return;
            }
            Fate::DropThenStall => {
                c.dropped_then_stalled.fetch_add(1, Relaxed);
                // Silent until the client gives up and closes (or the proxy is dropped).
                let mut sink = [0_u8; 4096];
                while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            Fate::Forward(delay) => {
                if !delay.is_zero() {
                    c.delayed.fetch_add(1, Relaxed);
                    tokio::time::sleep(delay).await;
                }
                if client.write_all(&reply).await.is_err() {
                    return;
                }
                c.replies.fetch_add(1, Relaxed);
            }
        }
    }
}

#[test]
fn xorshift_is_seeded_and_roughly_uniform() {
    let a: Vec<u64> = {
        let mut r = XorShift::new(7);
        (0..5).map(|_| r.next_u64()).collect()
    };
    let b: Vec<u64> = {
        let mut r = XorShift::new(7);
        (0..5).map(|_| r.next_u64()).collect()
    };
    assert_eq!(a, b);
    let mut r = XorShift::new(42);
    let hits = (0..10_000).filter(|_| r.chance(0.1)).count();
    assert!((800..1200).contains(&hits), "{hits}");
    assert!((0..1000).all(|_| r.below(10) < 10));
}

#[test]
fn the_uri_parser_finds_the_first_host() {
    for (uri, want) in [
        (
            "mongodb://127.0.0.1:34803/?directConnection=true",
            "127.0.0.1:34803",
        ),
        ("mongodb://u:p@127.0.0.1:5,other:6/db", "127.0.0.1:5"),
        ("mongodb://localhost", "127.0.0.1:27017"),
    ] {
        assert_eq!(upstream_addr(uri).to_string(), want);
    }
}
