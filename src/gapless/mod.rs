//! Gap-free numbers for invoices: a number is *used* exactly when the business write that
//! carries it succeeds, or *voided* on purpose — never both, never twice, none left out.
//!
//! Every other sequence in this crate (and PostgreSQL's, Oracle's, Leaf's) burns a number
//! when the write that was to carry it fails or its process dies. A gap-free sequence hands
//! the number and the business write together: [`Gapless::issue`] takes the next number
//! under a **lease**, runs the caller's write with it, and only then moves the sequence on.
//!
//! How the guarantees hold, with single-document atomic writes only (no transactions):
//!
//! - **Never twice, never both used and voided**: the business collection has a plain
//!   unique index on the number field ([`Dispenser::ensure_gapless`] creates or verifies it,
//!   and refuses a partial, sparse or collated one). A business write and a **void
//!   document** ([`Gapless::void`] inserts one into the business collection) carrying the
//!   same number meet there: the later one fails with a duplicate key. A caller whose write
//!   meets the index moves on to the next number. The operations that write make sure the
//!   index is still there (creating it again when it was dropped) before they rely on it.
//! - **Leases end**: a sequence stores its longest lease (no lease counts for longer), and
//!   [`Gapless::release`] ends a dead holder's lease at once.
//! - **No gaps**: the state document's `next` only moves past a number once a document
//!   carries it, read back with majority read concern when the writer is not the one moving
//!   it. A write that fails, a closure that panics or returns an error, releases the lease at
//!   once; a holder that dies leaves it to run out, and the next caller first looks the number
//!   up.
//! - **In order**: one holder at a time per sequence — n + 1 is not handed out before n is
//!   used, voided, released or its lease ran out — so business writes succeed in number
//!   order; calls through one handle (and its clones) are served in call order.
//! - **Clocks**: leases are timed by the **server's** clock (`$currentDate` when taken,
//!   `$$NOW` when judged), so a client whose clock is wrong neither blocks others longer nor
//!   takes or voids a live holder's number.
//!
//! How it stays cheap: a call that finds the lease free takes it in one write, runs the
//! business write, and returns; the handle keeps the lease, and its next calls that follow
//! within a few milliseconds run just their business writes under it (in call order — the
//! calls of a handle and its clones queue in the process). The numbers are confirmed (`next`
//! moved past them) in the write that renews the lease, every 32 numbers or 5 ms, sent along
//! with a business write; when the calls stop, a background task confirms them about a
//! millisecond later ([`Gapless::flush`] does it at once). One round trip per number when
//! calls follow each other, three when they come one at a time. A caller elsewhere that waits
//! says so on the lease, and the holder lets it in at its next renewal; a caller that finds a
//! live lease over used numbers for 50 ms (a process that exited before confirming) moves
//! past them.

mod audit;
mod delete;
mod index;
mod issue;
mod lease;
mod options;
mod path;
mod state;
mod void;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{Document, doc};
use mongodb::Collection;
use mongodb::options::{CollectionOptions, ReadPreference, SelectionCriteria};

use crate::dispenser::Dispenser;
use crate::error::{Aftermath, Differs, Error, Kind, Result};
use crate::history::record::Recorder;
use crate::history::subject::Target;
use crate::spec::validate_name;
use crate::stats::Stats;
use crate::store::is_duplicate_key;
use index::{ensure_unique_index, has_unique_index};
use state::gapless_state;

pub use audit::{AUDIT_LIST_LIMIT, Audit, AuditOptions, audit};
pub use delete::DeleteGapless;
pub use options::{GaplessAlter, GaplessOptions};
pub use path::set_field;
pub use state::{GaplessState, Lease, Voided};
pub use void::{ReleaseLease, Released};

/// A gap-free sequence (see the [module](self) docs). Cheap to clone; clones share one
/// queue — concurrent calls through them take turns in call order without asking the
/// database — and the confirmation of the last number used.
///
/// # Example
///
/// ```no_run
/// use dispenser::{Dispenser, Options, gapless::GaplessOptions};
/// use dispenser::mongodb::bson::{doc, Document};
///
/// # async fn f() -> dispenser::Result<()> {
/// let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
/// let invoices = d.ensure_gapless("invoices", GaplessOptions::new("invoices", "number")).await?;
/// let coll = invoices.business(); // a reference: each attempt's future copies it, no clone
/// let issued = invoices
///     .issue(|n| async move { coll.insert_one(doc! { "number": n, "total": 120 }).await })
///     .await?;
/// println!("invoice {} written", issued.number);
/// invoices.flush().await?; // before the process exits
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Gapless {
    inner: Arc<Inner>,
    /// What the `ensure` that opened it found changed by an `alter` (see [`Gapless::altered`]).
    altered: Arc<[crate::error::Altered]>,
}

impl std::fmt::Debug for Gapless {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gapless")
            .field("name", &self.inner.name)
            .field("collection", &self.inner.options.collection)
            .field("field", &self.inner.options.field)
            .finish_non_exhaustive()
    }
}

/// What the clones of a handle share.
struct Inner {
    name: String,
    state: Collection<Document>,
    business: Collection<Document>,
    options: GaplessOptions,
    /// The dispenser's operation timeout, for each database operation.
    timeout: Duration,
    /// The turn to take a number: held by one call at a time, in call order.
    baton: Arc<tokio::sync::Mutex<Baton>>,
    counters: Counters,
    /// Where its admin operations are recorded.
    history: Recorder,
}

#[derive(Default)]
struct Counters {
    issued: AtomicU64,
    writes: AtomicU64,
    round_trips: AtomicU64,
    conflicts: AtomicU64,
    retries: AtomicU64,
    waits: AtomicU64,
}

/// What a handle knows between calls.
#[derive(Default)]
struct Baton {
    /// The run of numbers this handle used last, still under its lease: its next call
    /// writes the next number under the same lease, or confirms the run in the write that
    /// takes the next lease; else the flusher or [`Gapless::flush`] confirms it.
    pending: Option<Held>,
    /// Leases that cancelled or failed calls may have left; settled at the next chance.
    owed: Vec<Owed>,
    /// The flusher, while it runs.
    flusher: Option<tokio::task::JoinHandle<()>>,
}

/// Used numbers whose lease is still held: `next` (the state's) to `last`, all used.
#[derive(Clone, Copy, Debug)]
struct Held {
    holder: ObjectId,
    next: i64,
    last: i64,
    /// When the lease was taken (this machine's monotonic clock; only to renew it in time).
    since: std::time::Instant,
}

impl Held {
    /// Which run this is, and how far: every number a call leaves pending changes it (a
    /// new lease, or one more number under the same), so the flusher sees calls follow
    /// each other.
    fn mark(self) -> (ObjectId, i64) {
        (self.holder, self.last)
    }

    /// Confirms the run: `next` to `last + 1`.
    fn confirm(self) -> Owed {
        Owed::Settle {
            holder: self.holder,
            number: self.next,
            to: self.last.saturating_add(1),
        }
    }
}

/// A lease to end.
#[derive(Clone, Copy, Debug)]
enum Owed {
    /// Free `holder`'s lease, wherever `next` is.
    Release(ObjectId),
    /// While `holder` holds `number`, set `next` to `to` and free the lease.
    Settle {
        holder: ObjectId,
        number: i64,
        to: i64,
    },
}

/// What [`Gapless::issue`] returns: the number used and what the business write returned.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Issued<T> {
    /// The number the successful business write carries.
    pub number: i64,
    /// What the business write returned.
    pub value: T,
    /// Numbers this call found already used or voided (a holder that died or stalled after
    /// its write, a void) and moved past.
    pub skipped: u32,
}

/// A listing of gap-free sequences ([`Dispenser::list_gapless`]): every one by name, unless
/// narrowed. `.await` it for their states (each as [`Gapless::peek`] reads it), by name; one
/// whose document does not decode is its [`Error::CorruptDocument`] in its place, one deleted
/// since its name was read is left out. The options are those of a listing of
/// sequences ([`ListSequences`](crate::sequence::ListSequences)).
///
/// # Errors
///
/// [`Error::InvalidArgument`] when the limit is 0; [`Error::Database`] or
/// [`Error::Timeout`] when the collection cannot be read.
#[must_use = "a listing does nothing until it is awaited"]
#[derive(Debug)]
pub struct ListGapless<'a> {
    dispenser: &'a Dispenser,
    page: crate::listing::Page,
}

impl<'a> ListGapless<'a> {
    crate::listing::page_setters!("gap-free sequences");
}

impl<'a> std::future::IntoFuture for ListGapless<'a> {
    type Output = Result<Vec<Result<GaplessState>>>;
    type IntoFuture = crate::action::Action<'a, Vec<Result<GaplessState>>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let d = self.dispenser;
            let names = d.list_gapless_now(self.page).await?;
            let mut states = Vec::with_capacity(names.len());
            for name in names {
                match async { d.open_gapless(&name).await?.peek().await }.await {
                    // Deleted since the names were read: no longer one to list.
                    Err(Error::NotFound { .. }) => {}
                    // The database failing fails the listing, as reading the names does.
                    Err(e) if e.kind() == crate::error::ErrorKind::Unavailable => return Err(e),
                    state => states.push(state),
                }
            }
            Ok(states)
        })
    }
}

impl Dispenser {
    /// Makes the gap-free sequence `name` if it does not exist, or opens it if it exists with
    /// the same settings (see the guide's [vocabulary](crate::guide::glossary#create-ensure-open)). Its numbers are
    /// carried by `options.field` of the documents of `options.collection` (in this
    /// dispenser's database). Its state lives in the collection `<collection>_gapless` next
    /// to the sequences (for the default `dispensers`: `dispensers_gapless`).
    ///
    /// It makes sure the business collection has a **plain unique index** on the field —
    /// the arbiter against duplicates and between voids and late writes: an existing one on
    /// exactly that field (either direction, simple collation) is used; a unique index on
    /// the field that is partial, sparse or collated is refused, naming it (two documents
    /// outside a partial filter could carry one number); otherwise `{field: 1}` unique is
    /// created. When that fails (the collection already holds a number twice, or another
    /// index of the same name exists) the error says so and nothing else is written.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::InvalidArgument`] (options, a weak unique index),
    /// [`Error::SpecConflict`] (nothing written) when `name` exists with another start (as
    /// recorded at creation), collection, field, void settings or longest lease — everything
    /// a create writes —, naming each that differs, [`Error::Database`] (among them the index that cannot be created),
    /// [`Error::CorruptDocument`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: every step is idempotent; ensure again.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::gapless::GaplessOptions;
    /// let invoices = d.ensure_gapless("invoices-2026", GaplessOptions::new("invoices", "number")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ensure_gapless(&self, name: &str, options: GaplessOptions) -> Result<Gapless> {
        self.make_gapless(name, options, false).await
    }

    /// Makes the gap-free sequence `name`, as [`Dispenser::ensure_gapless`] does, but fails if
    /// it exists already (whatever its settings), writing nothing.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] when it exists; otherwise those of
    /// [`Dispenser::ensure_gapless`].
    ///
    /// # Cancel safety
    ///
    /// As [`Dispenser::ensure_gapless`]: dropped part way, the sequence may have been made (and
    /// its creation recorded); a second `create_gapless` then fails with
    /// [`Error::AlreadyExists`], and [`Dispenser::open_gapless`] opens it.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::gapless::GaplessOptions;
    /// let options = GaplessOptions::new("invoices", "number");
    /// let invoices = d.create_gapless("invoices-2027", options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_gapless(&self, name: &str, options: GaplessOptions) -> Result<Gapless> {
        self.make_gapless(name, options, true).await
    }

    /// [`Dispenser::ensure_gapless`], or with `new_only` [`Dispenser::create_gapless`].
    async fn make_gapless(
        &self,
        name: &str,
        options: GaplessOptions,
        new_only: bool,
    ) -> Result<Gapless> {
        validate_name(name).map_err(|e| e.for_kind(crate::error::Kind::Gapless))?;
        options.validate()?;
        let business = self.gapless_collection(&options.collection);
        let mut g = self.gapless(name, business, options);
        // An existing sequence is compared first: a refused open writes nothing (not even
        // the index on a field the sequence does not number).
        let exists = match g.inner.read_raw().await {
            Ok(_) if new_only => {
                return Err(Error::AlreadyExists {
                    kind: crate::error::Kind::Gapless,
                    name: name.to_owned(),
                });
            }
            Ok(d) => {
                g.altered = g.inner.check_stored(&d)?.into();
                true
            }
            Err(Error::NotFound { .. }) => false,
            Err(e) => return Err(e),
        };
        g.inner.index_bounded().await?;
        if exists {
            return Ok(g);
        }
        // A creation is recorded; opening an existing sequence is not.
        let o = &g.inner.options;
        let params = doc! {
            "gapless": true, "collection": &o.collection, "field": &o.field, "start": o.start,
            "max_lease_seconds": o.max_lease.as_secs_f64(),
        };
        let entry = g
            .inner
            .history
            .begin(&Target::gapless(name), "create", params, None)
            .await?;
        let fresh = state::fresh(name, &g.inner.options);
        let made = match g
            .inner
            .bounded(
                "creating it",
                Aftermath::Admin,
                g.inner.state.insert_one(fresh),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(Error::Database { source, .. }) if is_duplicate_key(&source) && new_only => {
                Err(Error::AlreadyExists {
                    kind: crate::error::Kind::Gapless,
                    name: name.to_owned(),
                })
            }
            Err(Error::Database { source, .. }) if is_duplicate_key(&source) => {
                match g.inner.read_raw().await {
                    Ok(d) => g.inner.check_stored(&d).map(|altered| {
                        g.altered = altered.into();
                        false
                    }),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        let (recorded, after) = match &made {
            Ok(true) => (
                Ok(()),
                g.inner.read_state().await.ok().map(|s| gapless_state(&s)),
            ),
            // Another client created it between the look and the insert.
            Ok(false) => (
                Err(Error::AlreadyExists {
                    kind: crate::error::Kind::Gapless,
                    name: name.to_owned(),
                }),
                None,
            ),
            Err(e) => (Err(e.clone()), None),
        };
        entry.end(&recorded, after).await;
        made.map(|_| g)
    }

    /// Opens the existing gap-free sequence `name`, never writing, with the collection, field
    /// and void settings it was created with (and the default lease and wait, the lease at most the
    /// sequence's longest lease), without touching the business collection's indexes: for
    /// status, voids, releases and audits. (Its operations that write make sure the unique
    /// index is there before they rely on it.)
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`], [`Error::NotFound`], [`Error::CorruptDocument`],
    /// [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let s = d.open_gapless("invoices-2026").await?.peek().await?;
    /// println!("next invoice: {}", s.next);
    /// # Ok(()) }
    /// ```
    pub async fn open_gapless(&self, name: &str) -> Result<Gapless> {
        validate_name(name).map_err(|e| e.for_kind(crate::error::Kind::Gapless))?;
        let probe = self.gapless(
            name,
            self.gapless_collection("unknown"),
            GaplessOptions::new("unknown", "unknown"),
        );
        let d = probe.inner.read_raw().await?;
        let s = state::stored(name, &d)?;
        let mut options = GaplessOptions::new(s.collection, s.field)
            .with_void_field(s.void_field)
            .with_void_extra(s.void_extra)
            .with_max_lease(s.max_lease);
        options.start = s.start.unwrap_or(options.start);
        options.lease = options.lease.min(s.max_lease);
        Ok(self.gapless(name, self.gapless_collection(&options.collection), options))
    }

    /// Lists the gap-free sequences: every one, by name, or a page of them — see
    /// [`ListGapless`] for its options (`.matching(patterns)`, `.after(cursor)`,
    /// `.limit(n)`, `.named(names)`) — each with its state, as [`Gapless::peek`] reads it
    /// (as [`Dispenser::list_queues`] answers the queues' states): one query on the `_id`
    /// index of `<collection>_gapless` for the page's names, then each one's state.
    ///
    /// # Errors
    ///
    /// See [`ListGapless`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// for s in d.list_gapless().matching(["invoices-*"]).limit(50).await? {
    ///     let s = s?;
    ///     println!("{}: next {}", s.name, s.next);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn list_gapless(&self) -> ListGapless<'_> {
        ListGapless {
            dispenser: self,
            page: crate::listing::Page::default(),
        }
    }

    /// [`Dispenser::list_gapless`] once its options are set.
    async fn list_gapless_now(&self, page: crate::listing::Page) -> Result<Vec<String>> {
        let limit = page.find_limit(
            "limit of a page of gap-free sequences",
            "gap-free sequences",
        )?;
        if page.is_none() {
            return Ok(Vec::new());
        }
        let store = self
            .store()
            .sibling(&format!("{}_gapless", self.options().collection));
        let mut opts = mongodb::options::FindOptions::builder()
            .projection(bson::doc! { "_id": 1 })
            .sort(bson::doc! { "_id": 1 })
            .build();
        opts.limit = limit;
        let filter = page.filter();
        let docs: Vec<bson::Document> = store
            .bounded_read(|| "listing the gap-free sequences".to_owned(), async {
                futures::TryStreamExt::try_collect(
                    store.collection().find(filter).with_options(opts).await?,
                )
                .await
            })
            .await?;
        Ok(docs
            .iter()
            .filter_map(|d| d.get_str("_id").ok().map(str::to_owned))
            .collect())
    }

    fn gapless(
        &self,
        name: &str,
        business: Collection<Document>,
        options: GaplessOptions,
    ) -> Gapless {
        Gapless {
            inner: Arc::new(Inner {
                name: name.to_owned(),
                state: self.gapless_collection(&format!("{}_gapless", self.options().collection)),
                business,
                options,
                timeout: self.store().timeout(),
                baton: Arc::default(),
                counters: Counters::default(),
                history: self.recorder(),
            }),
            altered: Arc::default(),
        }
    }

    /// A collection of this dispenser's database with its write concern (majority and
    /// journaled by default) and primary reads.
    fn gapless_collection(&self, name: &str) -> Collection<Document> {
        let o = self.options();
        self.store()
            .collection()
            .client()
            .database(&o.database)
            .collection_with_options(
                name,
                CollectionOptions::builder()
                    .write_concern(o.write_concern.clone())
                    .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
                    .build(),
            )
    }
}

impl Inner {
    /// The state document as stored.
    async fn read_raw(&self) -> Result<Document> {
        self.bounded(
            "reading the state",
            Aftermath::Read,
            self.state.find_one(doc! { "_id": &self.name }),
        )
        .await?
        .ok_or_else(|| Error::NotFound {
            kind: crate::error::Kind::Gapless,
            name: self.name.clone(),
        })
    }

    /// Refuses options that do not fit the stored sequence `d`: another start (when recorded),
    /// collection, field or void settings ([`Error::SpecConflict`]), or a lease longer than
    /// its longest lease. Another longest lease (what `alter` changes) is kept and returned.
    fn check_stored(&self, d: &Document) -> Result<Vec<crate::error::Altered>> {
        let s = state::stored(&self.name, d)?;
        let o = &self.options;
        let mut differs = Differs::default();
        if let Some(start) = s.start {
            differs.field("start", start, o.start);
        }
        differs
            .field(
                "collection",
                format!("{:?}", s.collection),
                format!("{:?}", o.collection),
            )
            .field("field", format!("{:?}", s.field), format!("{:?}", o.field))
            .field(
                "void field",
                format!("{:?}", s.void_field),
                format!("{:?}", o.void_field),
            )
            .field("void extra", &s.void_extra, &o.void_extra)
            .alterable(
                "max lease",
                format!("{:?}", s.max_lease),
                format!("{:?}", o.max_lease),
            );
        let altered = differs.check(Kind::Gapless, &self.name)?;
        options::check_lease(o.lease, s.max_lease)?;
        Ok(altered)
    }

    /// Makes sure the business collection still has the unique index (creating it again
    /// when it was dropped), its look-up and creation together bounded by the operation
    /// timeout.
    async fn check_index(&self) -> Result<()> {
        self.counters.round_trips.fetch_add(1, Relaxed);
        self.index_bounded().await
    }

    /// [`Inner::check_index`], not counted (opening a sequence is not one of its calls).
    async fn index_bounded(&self) -> Result<()> {
        tokio::time::timeout(
            self.timeout,
            ensure_unique_index(&self.business, &self.options),
        )
        .await
        .unwrap_or_else(|_| {
            Err(Error::timeout(
                format!(
                    "checking the unique index of gap-free sequence {:?}",
                    self.name
                ),
                self.timeout,
                Aftermath::Setup,
            ))
        })
    }

    fn exhausted(&self, value: i64) -> Error {
        Error::Exhausted {
            name: self.name.clone(),
            value,
            requested: 1,
            remaining: 0,
            min: i64::MIN,
            max: i64::MAX - 1,
            step: 1,
        }
    }

    /// Settles everything the handle still owes: the pending confirmation and what
    /// cancelled calls left. The first error is returned (the rest are logged).
    async fn settle_all(&self, baton: &mut Baton) -> Result<()> {
        let mut first = None;
        if let Some(p) = baton.pending.take()
            && let Err(e) = self
                .settle(
                    Some(p.holder),
                    p.next,
                    p.last.saturating_add(1),
                    "confirming used numbers",
                    Aftermath::Lease,
                )
                .await
        {
            first = Some(e);
        }
        for owed in std::mem::take(&mut baton.owed) {
            self.pay(owed).await;
        }
        first.map_or(Ok(()), Err)
    }
}

impl Gapless {
    /// The settings the [`Dispenser::ensure_gapless`] that opened this handle found changed
    /// since by an `alter` (its longest lease): each with its stored value, which is kept (and
    /// governs every lease), and the value asked, which is not applied. Empty for a handle
    /// from `create_gapless` or `open_gapless`, or when everything matched.
    pub fn altered(&self) -> &[crate::error::Altered] {
        &self.altered
    }

    /// Runs the admin operation `run` with its history (`op`, `params`, the state `before`
    /// and the state read after it).
    pub(super) async fn recorded<T>(
        &self,
        op: &str,
        params: Document,
        before: &GaplessState,
        run: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let inner = &self.inner;
        let entry = inner
            .history
            .begin(
                &Target::gapless(&inner.name),
                op,
                params,
                Some(gapless_state(before)),
            )
            .await?;
        let result = run.await;
        let after = match &result {
            Ok(_) => inner.read_state().await.ok().map(|s| gapless_state(&s)),
            Err(_) => None,
        };
        entry.end(&result, after).await;
        result
    }

    /// The sequence's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The history of the gap-free sequence: its creation, voids, releases, changes of the
    /// longest lease and its delete, oldest first — see
    /// [`History`](crate::history::History) for the options.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(invoices: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// let voids = invoices.history().limit(20).await?;
    /// # Ok(()) }
    /// ```
    pub fn history(&self) -> crate::history::History {
        self.inner
            .history
            .history(crate::history::Subject::Gapless, &self.inner.name)
    }

    /// The business collection, with the dispenser's write concern (majority and journaled
    /// by default) — a handle to write the business documents with.
    pub fn business(&self) -> &Collection<Document> {
        &self.inner.business
    }

    /// The options it was opened with.
    pub fn options(&self) -> &GaplessOptions {
        &self.inner.options
    }

    /// What this handle (and its clones) did since it was opened: `issued`, `writes`
    /// (state writes plus one per run of the business write), `round_trips` (every database
    /// operation, the business write counted as one), `conflicts` (lease writes that found
    /// the lease held), `retries` (times a call found its number used or voided and went on
    /// to the next; [`Issued::skipped`] counts the numbers) and `waits`
    /// (pauses while another caller held the lease).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) {
    /// let s = g.stats();
    /// println!("{:.1} round trips per number", s.round_trips as f64 / s.issued.max(1) as f64);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        Stats {
            issued: c.issued.load(Relaxed),
            writes: c.writes.load(Relaxed),
            round_trips: c.round_trips.load(Relaxed),
            conflicts: c.conflicts.load(Relaxed),
            retries: c.retries.load(Relaxed),
            waits: c.waits.load(Relaxed),
            ..Stats::default()
        }
    }

    /// The state: the next number, the lease (timed by the server's clock, which is read
    /// with it), the longest lease, whether the unique index is there, and the voided
    /// numbers (from their void documents in the business collection). This handle's own used numbers are confirmed first (waiting for a call of
    /// the handle that is running, at most the operation timeout), so `next` is past every
    /// number it returned; a holder elsewhere may hold `next` while its numbers from `next` on
    /// are already used and not yet confirmed.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when it was deleted, [`Error::CorruptDocument`],
    /// [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// let s = g.peek().await?;
    /// println!("next {} ({} voided)", s.next, s.voided.len());
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self) -> Result<GaplessState> {
        self.settle_own().await;
        let mut s = self.inner.read_state().await?;
        let inner = &self.inner;
        s.unique_index = tokio::time::timeout(
            inner.timeout,
            has_unique_index(&inner.business, &inner.options),
        )
        .await
        .unwrap_or_else(|_| {
            Err(Error::timeout(
                format!(
                    "listing the indexes of collection {:?}",
                    inner.options.collection
                ),
                inner.timeout,
                Aftermath::Read,
            ))
        })?;
        let (field, void) = (&self.inner.options.field, &self.inner.options.void_field);
        for d in self.inner.read_voids().await? {
            let number = path::at_path(&d, field).and_then(|v| match v {
                bson::Bson::Int64(i) => Some(*i),
                bson::Bson::Int32(i) => Some(i64::from(*i)),
                _ => None,
            });
            let info = path::at_path(&d, void).and_then(bson::Bson::as_document);
            if let (Some(number), Some(info)) = (number, info)
                && let Ok(reason) = info.get_str("reason")
            {
                s.voided.push(Voided {
                    number,
                    reason: reason.to_owned(),
                    at: info
                        .get_datetime("at")
                        .copied()
                        .unwrap_or(bson::DateTime::MIN),
                });
            }
        }
        Ok(s)
    }

    /// Confirms at once the last number this handle used. A number is confirmed — the
    /// sequence's `next` moved past it — by the write with which the handle's next call
    /// takes the next lease, or about a millisecond after the call returned, in the
    /// background. Call this before the process exits: a number left unconfirmed keeps its
    /// lease, and a caller elsewhere finds it used only after a poll or two (or, when it
    /// does not wait, after the lease ran out). Nothing is lost either way.
    ///
    /// # Errors
    ///
    /// [`Error::Database`], [`Error::Timeout`]: the confirmation is then left to the next
    /// caller (it finds the number used and moves past it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one conditional write; dropped, the confirmation is left to the next
    /// caller.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// g.flush().await?;
    /// # Ok(()) }
    /// ```
    pub async fn flush(&self) -> Result<()> {
        let mut baton = self.inner.baton.clone().lock_owned().await;
        self.inner.settle_all(&mut baton).await
    }

    /// Changes the sequence's settings (see [`GaplessAlter`]); returns the state afterwards.
    /// Recorded in the history as `alter`, with the state before and after.
    ///
    /// The **longest lease**: from now on no lease counts for longer, by the server's
    /// judgement — the leases already taken included. So a holder that died with a long lease
    /// blocks the others for at most the new longest lease from when it took the lease (to
    /// end it at once, see [`Gapless::release`]). A live holder whose lease is cut short loses
    /// nothing: if another caller takes its number over, the unique index decides between
    /// their writes, and the one that comes later moves on to the next number. Handles opened
    /// afterwards with a longer `lease` are refused.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an alter that changes nothing or a longest lease under
    /// 1 ms or over a day (nothing written), [`Error::NotFound`], [`Error::Database`],
    /// [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one write; dropped, it happened or not ([`Gapless::peek`] shows which).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(g: dispenser::gapless::Gapless) -> dispenser::Result<()> {
    /// use std::time::Duration;
    /// use dispenser::gapless::GaplessAlter;
    /// let s = g.alter(GaplessAlter::default().with_max_lease(Duration::from_secs(60))).await?;
    /// assert_eq!(s.max_lease, Duration::from_secs(60));
    /// # Ok(()) }
    /// ```
    pub async fn alter(&self, change: GaplessAlter) -> Result<GaplessState> {
        let max_lease = change.validate(&self.inner.name)?;
        let before = self.inner.read_state().await?;
        self.recorded(
            "alter",
            doc! { "max_lease_seconds": max_lease.as_secs_f64() },
            &before,
            self.set_max_lease_now(max_lease),
        )
        .await?;
        let name = &self.inner.name;
        self.peek()
            .await
            .map_err(|e| e.after_write(&format!("gap-free sequence {name:?} altered")))
    }

    /// [`Gapless::alter`]'s write of the longest lease, without its history.
    async fn set_max_lease_now(&self, max_lease: Duration) -> Result<()> {
        let inner = &self.inner;
        let r = inner
            .bounded(
                "setting the longest lease",
                Aftermath::Admin,
                inner.state.update_one(
                    doc! { "_id": &inner.name },
                    state::max_lease_update(max_lease),
                ),
            )
            .await?;
        if r.matched_count == 0 {
            return Err(Error::NotFound {
                kind: crate::error::Kind::Gapless,
                name: inner.name.clone(),
            });
        }
        Ok(())
    }
}
