//! Know your server: [`Dispenser::doctor`] finds out whether the library's promise — never a
//! duplicate — can hold on the server it talks to.
//!
//! Many servers speak MongoDB's wire protocol, and some of them lose concurrent updates (their
//! update reads the document, applies the operators and writes it back without a check). On
//! such a server the library issues numbers twice, silently. The doctor:
//!
//! 1. asks the server what it is (`buildInfo`, `hello`): version, wire versions, topology;
//! 2. writes with `w: "majority", j: true` and checks the acknowledgement, and whether the
//!    dispenser's own write concern is that safe;
//! 3. sends each operation the library sends, built by the same code (the conditional
//!    increment through `findAndModify` with a projection and `returnDocument: after`, the
//!    compare-and-set `updateOne` pinned on `_id`, `version` and incarnation, the insert of a
//!    new sequence answering duplicate key 11000 for an existing one, a unique index
//!    answering 11000), and checks the answers;
//! 4. runs a **concurrency probe**: K tasks × M conditional increments, and K tasks
//!    collecting compare-and-set wins, on documents of its own, counting acknowledged writes
//!    against distinct results, then K racing inserts of one `_id`. A lost update is a
//!    failure.
//!
//! It writes only in a scratch collection of its own (`dispenser_doctor_…` in the
//! dispenser's database), removes it at the end, and finishes within its time limit
//! ([`DoctorOptions::time_limit`], 10 s by default), the removal included. The test suite's
//! server gate is this same code.

mod operations;
mod options;
mod probe;
mod report;
mod scratch;
mod server;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::{Duration, Instant};

use bson::Document;
use mongodb::Collection;
use mongodb::options::{CollectionOptions, ReadPreference, SelectionCriteria, WriteConcern};

use crate::dispenser::Dispenser;
use crate::error::{Error, Result};
use crate::sequence::safe_write_concern;
use crate::store::Store;

pub use options::DoctorOptions;
pub use report::{
    CasProbe, IncrementProbe, InsertRace, OperationCheck, Probe, Problem, ProblemKind, Report,
    Scratch, ServerFacts, Topology, WriteConcernCheck,
};

/// An examination of the server ([`Dispenser::doctor`]): as hard as the default
/// [`DoctorOptions`] unless [`Doctor::options`]. `.await` it for the [`Report`].
///
/// Nothing is sent before the `.await`; a builder dropped unawaited does nothing.
#[must_use = "an examination does nothing until it is awaited"]
#[derive(Debug)]
pub struct Doctor<'a> {
    dispenser: &'a Dispenser,
    options: DoctorOptions,
}

impl<'a> Doctor<'a> {
    /// How hard and how long the examination probes (see [`DoctorOptions`]), checked at the
    /// `.await` before anything is sent. Defaults to [`DoctorOptions::default`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use std::time::Duration;
    /// use dispenser::doctor::DoctorOptions;
    /// let o = DoctorOptions::default().with_time_limit(Duration::from_secs(30));
    /// let report = d.doctor().options(o).await?;
    /// # Ok(()) }
    /// ```
    pub fn options(mut self, options: DoctorOptions) -> Self {
        self.options = options;
        self
    }
}

impl<'a> IntoFuture for Doctor<'a> {
    type Output = Result<Report>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Report>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(examine_server(self.dispenser, self.options))
    }
}

impl Dispenser {
    /// Examines the server this dispenser talks to and reports whether the library's
    /// promise can hold there (see the [module](crate::doctor) docs for what is checked),
    /// as hard as the default [`DoctorOptions`] unless [`Doctor::options`].
    /// Run it before going live on a server you have not used before, and after upgrades.
    ///
    /// It writes only in a scratch collection of its own in the dispenser's database
    /// (`dispenser_doctor_<process>_<time>`), which it drops at the end; it needs the
    /// privileges to create, write and drop that collection and to create an index on it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for invalid options (nothing is sent);
    /// [`Error::Database`] or [`Error::Timeout`] when the server cannot be reached or refuses
    /// the examination itself (for example for want of privileges). An unfit server is not an
    /// error: it is a [`Report`] whose [`problems`](Report::problems) say why.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the examination; its scratch collection is then left behind
    /// (named `dispenser_doctor_…`, safe to drop by hand). Nothing else is ever written.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dispenser::{Dispenser, Options};
    ///
    /// # async fn f() -> dispenser::Result<()> {
    /// let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
    /// let report = d.doctor().await?;
    /// match report.reason() {
    ///     None => println!("fit: the promise can hold on this server"),
    ///     Some(why) => eprintln!("unfit: {why}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn doctor(&self) -> Doctor<'_> {
        Doctor {
            dispenser: self,
            options: DoctorOptions::default(),
        }
    }
}

/// The examination [`Doctor`] runs.
async fn examine_server(d: &Dispenser, options: DoctorOptions) -> Result<Report> {
    options.validate()?;
    let clock = Clock::new(options.time_limit, d.options().operation_timeout);
    let client = d.store().collection().client().clone();
    let database = d.options().database.clone();
    let facts = server::facts(&client, &clock).await?;

    let collection = scratch::name();
    let scratch_options = d
        .options()
        .clone()
        .with_collection(collection.as_str())
        .with_operation_timeout(clock.op_timeout);
    let store = Store::new(&client, &scratch_options);
    let raw = with_write_concern(store.collection(), d.options().write_concern.clone());
    let safe = with_write_concern(store.collection(), safe_write_concern());

    let examined = examine(&clock, &store, &raw, &safe, d, options).await;
    let (removed, detail) = scratch::remove(&client.database(&database), &collection, &clock).await;
    let (write_concern, operations, probe) = examined?;

    let mut problems =
        server::write_concern_problems(&d.options().write_concern, &write_concern, &facts.topology);
    problems.extend(operations.iter().filter(|o| !o.ok).map(|o| Problem {
        kind: ProblemKind::Operation,
        message: format!(
            "{}: {}",
            o.name,
            o.detail.as_deref().unwrap_or("not as the library needs it")
        ),
    }));
    problems.extend(report::probe_problems(&probe));
    report::rank(&mut problems);
    Ok(Report {
        server: facts,
        write_concern,
        operations,
        probe,
        scratch: Scratch {
            database,
            collection,
            removed,
            detail,
        },
        problems,
        elapsed: clock.started.elapsed(),
        time_limit: options.time_limit,
    })
}

/// The checks that write, in the scratch collection.
async fn examine(
    clock: &Clock,
    store: &Store,
    raw: &Collection<Document>,
    safe: &Collection<Document>,
    d: &Dispenser,
    options: DoctorOptions,
) -> Result<(WriteConcernCheck, Vec<OperationCheck>, Probe)> {
    let wc = server::write_concern(safe, &d.options().write_concern, clock).await?;
    let operations = operations::check(store, raw, clock).await?;
    let increment_works = operations
        .iter()
        .any(|o| o.name == operations::INCREMENT && o.ok);
    let probe = probe::run(store, raw, clock, options, increment_works).await?;
    Ok((wc, operations, probe))
}

fn with_write_concern(coll: &Collection<Document>, wc: WriteConcern) -> Collection<Document> {
    let options = CollectionOptions::builder()
        .write_concern(wc)
        .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
        .build();
    coll.client()
        .database(coll.namespace().db.as_str())
        .collection_with_options(coll.name(), options)
}

/// The examination's clock: the work (checks and probe) ends a little before the time limit,
/// leaving the rest to remove the scratch collection; every operation is bounded by what is
/// left and by the operation timeout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    started: Instant,
    work_until: Instant,
    finish_until: Instant,
    end: Instant,
    op_timeout: Duration,
}

impl Clock {
    fn new(limit: Duration, op_timeout: Duration) -> Self {
        let started = Instant::now();
        // A fifth of the limit, at most 2 s, is kept for the removal.
        let reserve = (limit / 5).min(Duration::from_secs(2));
        Clock {
            started,
            work_until: started + (limit - reserve),
            finish_until: started + (limit - reserve / 2),
            end: started + limit,
            op_timeout: op_timeout.min(limit),
        }
    }

    /// Whether the time for checks and probe is up.
    pub(crate) fn work_over(&self) -> bool {
        Instant::now() >= self.work_until
    }

    /// Runs one operation of the checks or the probe, bounded by the time left for them.
    pub(crate) async fn work<T>(
        &self,
        context: impl FnOnce() -> String,
        op: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        bounded(self.work_until, self.op_timeout, context, op).await
    }

    /// Runs one driver operation of the checks or the probe, bounded the same way.
    pub(crate) async fn driver<T>(
        &self,
        context: impl FnOnce() -> String + Clone,
        op: impl std::future::IntoFuture<Output = mongodb::error::Result<T>>,
    ) -> Result<T> {
        let shown = context.clone();
        self.work(context, async move {
            op.await.map_err(|e| Error::database(shown(), e))
        })
        .await
    }

    /// Runs a closing read of the probe (a final value): it may use half the time kept for
    /// the removal, so that a probe cut short still reports it, and leaves the other half to
    /// the removal (on a slow server, closing reads that took all of it left the scratch
    /// collection behind).
    pub(crate) async fn finish<T>(
        &self,
        context: impl FnOnce() -> String,
        op: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        bounded(self.finish_until, self.op_timeout, context, op).await
    }

    /// Runs one operation of the clean-up, bounded by the time limit itself.
    pub(crate) async fn cleanup<T>(
        &self,
        context: impl FnOnce() -> String + Clone,
        op: impl std::future::IntoFuture<Output = mongodb::error::Result<T>>,
    ) -> Result<T> {
        let shown = context.clone();
        bounded(self.end, self.op_timeout, context, async move {
            op.await.map_err(|e| Error::database(shown(), e))
        })
        .await
    }
}

async fn bounded<T>(
    until: Instant,
    op_timeout: Duration,
    context: impl FnOnce() -> String,
    op: impl Future<Output = Result<T>>,
) -> Result<T> {
    let after = until
        .saturating_duration_since(Instant::now())
        .min(op_timeout);
    match tokio::time::timeout(after, op).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout {
            context: context(),
            after,
            written: crate::error::Written::Nothing,
        }),
    }
}
