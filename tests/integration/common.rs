//! Shared test setup: the server under test, per-test isolation, and the server gate.
//!
//! Every test calls [`ready`] first. The first call runs the server gate (see `gate.rs`)
//! once for the whole binary; if the server is not linearizable for the operations the
//! library uses, every test fails with the gate's message instead of a confusing duplicate.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dispenser::mongodb::options::ClientOptions;
use dispenser::mongodb::{Client, Collection, bson::Document};
use dispenser::{Dispenser, Options};

/// The database every test writes into (each test has its own collection).
pub const DB: &str = "dispenser_test";

/// The server under test.
pub fn uri() -> String {
    std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017".to_owned())
}

/// A driver client for the server under test.
pub async fn client() -> Client {
    let mut opts = ClientOptions::parse(uri())
        .await
        .expect("MONGODB_URI parses");
    opts.server_selection_timeout = Some(Duration::from_secs(10));
    Client::with_options(opts).expect("client")
}

/// A collection name no other test (or earlier run) uses: never drop, always fresh.
pub fn unique(test: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{test}_{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Waits for the server gate; panics with its message if it failed.
pub fn ready() {
    static GATE: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = GATE.get_or_init(|| {
        std::thread::spawn(|| {
            tokio::runtime::Runtime::new()
                .expect("runtime")
                .block_on(crate::gate::check())
        })
        .join()
        .unwrap_or_else(|_| Err("the server gate panicked".to_owned()))
    });
    if let Err(msg) = outcome {
        panic!("server gate failed: {msg}");
    }
}

/// A test's own sequences collection and a dispenser over it.
pub struct Fixture {
    pub client: Client,
    pub collection: String,
}

impl Fixture {
    pub async fn new(test: &str) -> Self {
        ready();
        Fixture {
            client: client().await,
            collection: unique(test),
        }
    }

    pub fn options(&self) -> Options {
        Options::default()
            .with_database(DB)
            .with_collection(self.collection.as_str())
    }

    pub fn dispenser(&self, options: Options) -> Dispenser {
        Dispenser::new(&self.client, options).expect("valid options")
    }

    pub fn raw(&self) -> Collection<Document> {
        self.client.database(DB).collection(&self.collection)
    }
}

/// Asserts that `numbers` holds each of `expected` exactly `times` times and nothing else.
pub fn assert_each_exactly(
    mut numbers: Vec<i64>,
    expected: impl IntoIterator<Item = i64>,
    times: usize,
) {
    numbers.sort_unstable();
    let mut want: Vec<i64> = expected
        .into_iter()
        .flat_map(|n| std::iter::repeat_n(n, times))
        .collect();
    want.sort_unstable();
    if numbers != want {
        let mut dupes = numbers.clone();
        dupes.dedup();
        panic!(
            "got {} numbers ({} distinct), want {} ({} distinct); first got {:?}",
            numbers.len(),
            dupes.len(),
            want.len(),
            want.len() / times.max(1),
            &numbers[..numbers.len().min(20)]
        );
    }
}

/// The audit of `field` in the collection `business` of `d`'s database, from `from`, voids
/// marked by the default void field (`dispenser::gapless::audit` with its default options).
pub async fn audit(
    d: &Dispenser,
    business: &str,
    field: &str,
    from: Option<i64>,
) -> dispenser::Result<dispenser::gapless::Audit> {
    let coll = d
        .client()
        .database(&d.options().database)
        .collection::<Document>(business);
    let mut options = dispenser::gapless::AuditOptions::default();
    options.from = from;
    dispenser::gapless::audit(&coll, field, &options).await
}

/// The audit of a gap-free sequence's own collection and field, from `from`, voids marked by
/// its own void field.
pub async fn audit_of(
    g: &dispenser::gapless::Gapless,
    from: Option<i64>,
) -> dispenser::Result<dispenser::gapless::Audit> {
    let o = g.options();
    let mut options = dispenser::gapless::AuditOptions::default().with_void_field(&o.void_field);
    options.from = from;
    dispenser::gapless::audit(g.business(), &o.field, &options).await
}

/// The seed of a seeded test: `$var` when set (to replay a run), else one from the clock.
pub fn seed(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

/// Issues the next number of `g` the plainest way: a business document `{<field>: n}`
/// inserted into its collection. The number issued.
pub async fn issue_next(g: &dispenser::gapless::Gapless) -> dispenser::Result<i64> {
    let coll = g.business().clone();
    let field = g.options().field.clone();
    g.issue(|n| {
        let (coll, field) = (coll.clone(), field.clone());
        async move {
            let mut d = Document::new();
            d.insert(field, n);
            coll.insert_one(d).await
        }
    })
    .await
    .map(|issued| issued.number)
}

/// A client that records every `command` (`find`, `findAndModify`, `update`, …) it sends on
/// `collection`: what the library reads or writes, and how (filter, projection, read
/// concern).
pub async fn client_recording(
    command: &str,
    collection: &str,
) -> (Client, std::sync::Arc<std::sync::Mutex<Vec<Document>>>) {
    use dispenser::mongodb::event::EventHandler;
    use dispenser::mongodb::event::command::CommandEvent;
    use dispenser::mongodb::options::ClientOptions;

    let finds: std::sync::Arc<std::sync::Mutex<Vec<Document>>> = Default::default();
    let mut o = ClientOptions::parse(uri()).await.expect("uri");
    let (sink, name, watched) = (finds.clone(), command.to_owned(), collection.to_owned());
    o.command_event_handler = Some(EventHandler::callback(move |ev: CommandEvent| {
        if let CommandEvent::Started(s) = ev
            && s.command_name == name
            && s.command.get_str(&name) == Ok(watched.as_str())
        {
            sink.lock().expect("finds").push(s.command);
        }
    }));
    (Client::with_options(o).expect("client"), finds)
}
