//! The history of the queue operations that change a queue — create, alter, cancel, delete
//! (see [`crate::history`]): each records its intent before its write and its outcome after
//! it, with the queue's state before and after. Takes, calls, recalls and finishes are the
//! queue's daily work and are not recorded.

use bson::{Bson, Document, doc};

use super::state::{Done, State};
use super::status::QueueState;
use super::store::QueueStore;
use super::{Inner, Queue};
use crate::dispenser::Dispenser;
use crate::error::{Error, Result};
use crate::history::subject::Target;
use crate::options::check_caller;
use crate::retry::RetryBudget;

/// A queue's range, format, day settings and counters, as the history keeps them (what an
/// admin operation changes, not the live counters).
fn queue_state(s: &QueueState) -> Document {
    doc! {
        "min": s.min,
        "max": s.max,
        "format": s.label_format.clone().map_or(Bson::Null, Bson::String),
        "time_zone": &s.time_zone,
        "daily": s.daily,
        "taken": i64::try_from(s.taken).unwrap_or(i64::MAX),
        "served": i64::try_from(s.served).unwrap_or(i64::MAX),
        "waiting": i64::try_from(s.waiting).unwrap_or(i64::MAX),
        "cancelled": i64::try_from(s.cancelled).unwrap_or(i64::MAX),
        "next_ticket": s.next_ticket.map_or(Bson::Null, Bson::Int64),
        "version": s.version,
    }
}

/// The state `s` of queue `name` as the history keeps it.
fn shown(name: &str, s: &State, now: i64) -> Document {
    queue_state(&QueueState::new(name.to_owned(), s, now))
}

/// Creates the queue `name` in state `fresh` (`Ok(false)` when the name is taken), recorded:
/// a name already taken is refused without a record.
pub(super) async fn insert(
    d: &Dispenser,
    queues: &QueueStore,
    name: &str,
    fresh: &State,
) -> Result<bool> {
    if queues.load(name).await?.is_some() {
        return Ok(false);
    }
    let spec = &fresh.spec;
    let params = bson::doc! {
        "min": spec.min, "max": spec.max, "time_zone": &spec.time_zone, "daily": spec.daily,
        "format": spec.format.as_ref().map(|f| f.as_str().to_owned()),
    };
    let recorder = d.recorder();
    let entry = recorder
        .begin(&Target::queue(name), "create", params, None)
        .await?;
    let inserted = queues.insert(name, fresh).await;
    let recorded = match &inserted {
        Ok(true) => Ok(()),
        // Another client created it between the look and the insert.
        Ok(false) => Err(Error::AlreadyExists {
            kind: crate::Kind::Queue,
            name: name.to_owned(),
        }),
        Err(e) => Err(e.clone()),
    };
    let after = inserted
        .as_ref()
        .is_ok_and(|made| *made)
        .then(|| shown(name, fresh, fresh.created_at));
    entry.end(&recorded, after).await;
    inserted
}

/// Deletes the queue `name` (`Ok(false)` when there is none), recorded with `force`: a queue
/// that does not exist is refused without a record. Unless `force`, a queue whose tickets are
/// held (waiting, or shown by a desk) is refused ([`Error::QueueInUse`]), and so is one whose
/// document does not decode (who holds its tickets cannot be read); forced, the latter is
/// deleted, its state not recorded.
pub(super) async fn delete(
    d: &Dispenser,
    queues: &QueueStore,
    name: &str,
    force: bool,
) -> Result<bool> {
    let read = match queues.load(name).await {
        Ok(Some(s)) => Some(s),
        Ok(None) => return Ok(false),
        Err(Error::CorruptDocument {
            what,
            name,
            field,
            problem,
        }) if !force => {
            return Err(Error::CorruptDocument {
                what,
                name,
                field,
                problem: format!(
                    "{problem} (who holds its tickets cannot be read, so it is deleted only with force)"
                ),
            });
        }
        Err(Error::CorruptDocument { .. }) => None,
        Err(e) => return Err(e),
    };
    let now = queues.now().await?;
    let before = read.as_ref().map(|s| shown(name, s, now));
    let recorder = d.recorder();
    let entry = recorder
        .begin(
            &Target::queue(name),
            "delete",
            bson::doc! { "force": force },
            before,
        )
        .await?;
    let deleted = match read {
        Some(s) => delete_unheld(d, queues, name, s, now, force).await,
        None => queues.delete(name).await,
    };
    let recorded = match &deleted {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::NotFound {
            kind: crate::Kind::Queue,
            name: name.to_owned(),
        }),
        Err(e) => Err(e.clone()),
    };
    entry.end(&recorded, None).await;
    deleted
}

/// Deletes queue `name`, read in state `s` at `now`, unless tickets are held and not `force`:
/// the delete is pinned to the state it checked, so a take (or call) landing between the check
/// and the delete makes it match nothing — it reads again and checks again, within the retry
/// budget. A take computed before the delete and written after it matches nothing either (the
/// queue is gone, or another incarnation): it fails with [`Error::NotFound`].
async fn delete_unheld(
    d: &Dispenser,
    queues: &QueueStore,
    name: &str,
    mut s: State,
    mut now: i64,
    force: bool,
) -> Result<bool> {
    let mut budget = RetryBudget::new(&d.options().backoff);
    loop {
        let (waiting, shown) = s.held_at(now);
        if !force && (waiting > 0 || shown > 0) {
            return Err(Error::QueueInUse {
                name: name.to_owned(),
                waiting,
                shown,
            });
        }
        budget.attempted();
        if queues.delete_unchanged(name, &s).await? {
            return Ok(true);
        }
        // Changed since it was read, or gone: read it again after the back-off.
        let delay = budget.after_conflict(name)?;
        tracing::debug!(queue = %name, version = s.version, ?delay, "the queue changed while being deleted; checking again");
        tokio::time::sleep(delay).await;
        let Some(fresh) = queues.load(name).await? else {
            return Ok(false);
        };
        s = fresh;
        now = queues.now().await?;
    }
}

impl Queue {
    /// Runs the admin operation `run` (a write of this queue) with its history: the state
    /// before is read first, the state after is the one `run` wrote.
    pub(super) async fn recorded(
        &self,
        op: &str,
        params: Document,
        run: impl Future<Output = Result<(std::sync::Arc<State>, Done, i64)>>,
    ) -> Result<(std::sync::Arc<State>, Done, i64)> {
        let inner = &self.inner;
        let before = inner.read().await?;
        let before = shown(&inner.name, &before, inner.now().await?);
        inner
            .history
            .run(
                &Target::queue(&inner.name),
                op,
                params,
                Some(before),
                run,
                |(s, _, now)| Some(shown(&inner.name, s, *now)),
            )
            .await
    }

    /// The same queue acting as `caller` (see [`Options::caller`](crate::Options::caller)):
    /// its admin operations recorded as done by `caller`, and its takes' request ids
    /// `caller`'s.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] unless `caller` is 1 to 128 printable ASCII characters.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(lobby: dispenser::queue::Queue) -> dispenser::Result<()> {
    /// lobby.with_caller("desk-3")?.cancel().serial(17).await?; // recorded as done by desk-3
    /// # Ok(()) }
    /// ```
    pub fn with_caller(&self, caller: &str) -> Result<Queue> {
        check_caller(caller)?;
        let i = &self.inner;
        Ok(Queue {
            inner: std::sync::Arc::new(Inner {
                name: i.name.clone(),
                store: i.store.clone(),
                backoff: i.backoff,
                clock: i.clock.clone(),
                caller: Some(caller.to_owned()),
                remembered: std::sync::Mutex::new(i.remembered()),
                history: i.history.as_caller(caller),
                dispenser: i.dispenser.with_caller(caller)?,
                combiner: super::combine::Combiner::default(),
            }),
            altered: self.altered.clone(),
        })
    }
}
