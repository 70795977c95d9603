//! The service's shared state: per-sequence slots, the era lock (draws shared, admin
//! operations exclusive) and retiring a sequence's clients under it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dispenser::stripe::stripe_name;
use dispenser::{
    Dispenser, Error, Sequence,
    block::{BlockSequence, Pool},
    sequence::{SequenceState, Stats},
};
use tokio::sync::{OnceCell, RwLock};

use super::errors::ApiError;
use super::metrics::{Issued, Metrics};
use super::queue_state::Queues;
use super::tokens::{TokenRule, Tokens};

/// What the service knows of one sequence between two of its admin operations (its block
/// client is in the [`Pool`], retired by every admin operation).
#[derive(Default)]
pub(super) struct Era {
    /// What the name stands for, read by the era's first draw.
    pub(super) target: OnceCell<Target>,
    /// A direct handle, for large counts of non-cyclic sequences.
    pub(super) direct: OnceCell<Sequence>,
    /// Set when the service drew a scope `name@KEY` of this sequence: it is a template, and
    /// drawing it is refused from then on (besides what the era's first draw found).
    pub(super) scoped: AtomicBool,
    /// The block client draws use: the pool's, kept here so that a draw neither looks it up
    /// in the pool nor clones it. Taken when the idle release closes it.
    pub(super) blocks: OnceCell<BlockSequence>,
}

/// What a name drawn from stands for.
pub(super) enum Target {
    /// A sequence document of its own (a plain sequence, a scope, a stripe).
    Plain(Shape),
    /// A striped sequence: the names of its stripes, in order.
    Striped(Vec<String>),
}

/// What the service needs to know of a sequence to answer draws.
pub(super) struct Shape {
    pub(super) step: i64,
    /// For a cyclic sequence, how many numbers one cycle holds.
    pub(super) cycle: Option<u64>,
    /// A scope template (it has scopes, or its format uses `{scope}`): not drawn itself.
    pub(super) template: bool,
}

/// How many numbers one cycle of a cyclic sequence holds (`None` when it does not wrap).
pub(super) fn cycle_len(s: &SequenceState) -> Option<u64> {
    if !s.cycle {
        return None;
    }
    let span = (i128::from(s.max) - i128::from(s.min)).checked_div(i128::from(s.step).abs())?;
    Some(u64::try_from(span.saturating_add(1)).unwrap_or(u64::MAX))
}

/// Per sequence: draws hold `era` shared, the service's admin operations exclusively.
#[derive(Default)]
pub(super) struct Slot {
    pub(super) era: RwLock<Era>,
    /// Draws of a cyclic sequence one at a time, so that the numbers of one response follow
    /// each other in the block client (and so repeat nothing when there are at most a cycle).
    pub(super) serial: tokio::sync::Mutex<()>,
    /// The count of the numbers handed out from this sequence (kept by the metrics, which
    /// outlive the slot), found on the slot's first draw.
    pub(super) issued: std::sync::OnceLock<Arc<Issued>>,
    /// When a draw last used the block client (ms since the service started): the idle
    /// release looks at it. Written only when it changes.
    last_draw: AtomicU64,
}

impl Slot {
    /// Notes that a draw uses the block client now (`now`: ms since the service started).
    pub(super) fn touch(&self, now: u64) {
        if self.last_draw.load(Ordering::Relaxed) != now {
            self.last_draw.store(now, Ordering::Relaxed);
        }
    }

    /// Whether no draw used the block client for `idle` (`now`: ms since the service started).
    fn idle_for(&self, now: u64, idle: Duration) -> bool {
        let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        now.saturating_sub(self.last_draw.load(Ordering::Relaxed)) >= idle_ms
    }

    /// Counts `n` numbers handed out from this slot's sequence `name`: without a lock or a
    /// lookup once the slot has its count.
    pub(super) fn issued(&self, metrics: &Metrics, name: &str, n: u64) {
        self.issued
            .get_or_init(|| metrics.issued_counter(name))
            .add(n);
    }
}

/// The service's shared state.
pub(super) struct AppState {
    pub(super) dispenser: Dispenser,
    /// The database URI, only to scrub its password from error messages.
    pub(super) uri: String,
    /// The tokens in use (a reload of the tokens file replaces them).
    pub(super) tokens: Tokens,
    /// The block clients, one per sequence; used only under the sequence's era lock.
    pub(super) pool: Pool,
    pub(super) max_count: u64,
    /// How long a request may take (`--request-timeout`).
    pub(super) request_timeout: Duration,
    /// One slot per sequence name used so far (looked up on every draw: foldhash, randomly
    /// seeded per process, several times cheaper than SipHash for short names).
    pub(super) slots: Mutex<HashMap<String, Arc<Slot>, foldhash::fast::RandomState>>,
    /// Stats of direct handles already dropped (admin operations), by sequence.
    pub(super) retired: Mutex<HashMap<String, Stats>>,
    pub(super) metrics: Metrics,
    /// The most sequences with series of their own on `/metrics`.
    pub(super) metrics_max_sequences: usize,
    /// The queues' handles and the boards watching them.
    pub(super) queues: Queues,
    /// When the service started: the origin of the slots' `last_draw`.
    pub(super) born: std::time::Instant,
    /// The ticket links' limits and the takes they answered.
    pub(super) links: super::links::Links,
    /// The service's address as phones reach it (for the ticket links' QR codes).
    pub(super) origin: Origin,
}

/// Where people's phones reach the service: `--public-url`, else the `Host` of the request
/// asking (with the service's scheme), else the address it listens on.
#[derive(Clone, Debug, Default)]
pub(super) struct Origin {
    /// `--public-url`, without a final `/`.
    pub(super) public: Option<String>,
    /// `https` with TLS, else `http`.
    pub(super) scheme: &'static str,
    /// The address the service listens on (`HOST:PORT`), once a [`Service`](crate::Service)
    /// bound it (a mounted router has none: a request without a usable `Host` is linked to
    /// `localhost`).
    pub(super) local: std::sync::OnceLock<String>,
}

pub(super) type Shared = Arc<AppState>;

impl AppState {
    /// `text` without the URI's password or any token.
    pub(super) fn scrub(&self, text: &str) -> String {
        let mut out = dispenser::error::redact::scrub(text, &self.uri);
        for rule in self.tokens.current().iter() {
            if out.contains(&rule.secret) {
                out = out.replace(&rule.secret, "***");
            }
        }
        out
    }

    /// The service's dispenser acting as the token `rule` (its name is who the history of
    /// admin operations records).
    pub(super) fn acting(&self, rule: &Arc<TokenRule>) -> Result<Dispenser, ApiError> {
        Ok(self.dispenser.with_caller(&rule.name)?)
    }

    /// The slot of `name` (made on first use).
    pub(super) fn slot(&self, name: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up first: the name is copied only for a new slot.
        if let Some(slot) = slots.get(name) {
            return Arc::clone(slot);
        }
        Arc::clone(slots.entry(name.to_owned()).or_default())
    }

    pub(super) fn all_slots(&self) -> Vec<(String, Arc<Slot>)> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// What `name` stands for in this era, found by the era's first draw: its own document
    /// (a plain sequence, a stripe, a scope), a scope `T@KEY` that does not exist yet (made
    /// now from its template `T`, as `next --scope` does, when `may_make_scope(T, KEY,
    /// already)` allows it, `already` saying whether `T` is a template already; it returns
    /// the dispenser that makes it, acting as the token, whose name the scope's `create`
    /// record names), or a striped sequence.
    ///
    /// A scope's template is marked as one only once the scope exists: a draw that makes
    /// nothing changes nothing about the template.
    pub(super) async fn target<'e>(
        &self,
        era: &'e Era,
        name: &str,
        may_make_scope: impl FnOnce(&str, &str, bool) -> Result<Dispenser, ApiError>,
    ) -> Result<&'e Target, ApiError> {
        era.target
            .get_or_try_init(|| async {
                let scope = scope_of(name);
                let state = match self.dispenser.peek(name).await {
                    Ok(state) => state,
                    Err(Error::NotFound { .. }) if scope.is_some() => {
                        let (template, key) = scope.unwrap_or_default();
                        let already = match self.dispenser.peek(template).await {
                            Ok(t) => self.is_template(&t).await?,
                            Err(Error::NotFound { .. }) => false,
                            Err(e) => return Err(e.into()),
                        };
                        let maker = may_make_scope(template, key, already)?;
                        maker.ensure_scope(template, key).await?;
                        self.dispenser.peek(name).await?
                    }
                    Err(e @ Error::NotFound { .. }) => {
                        return match self.dispenser.open_striped(name).await {
                            Ok(ids) => Ok(Target::Striped(
                                (0..ids.stripes()).map(|i| stripe_name(name, i)).collect(),
                            )),
                            Err(_) => Err(e.into()),
                        };
                    }
                    Err(e) => return Err(e.into()),
                };
                if let Some((template, _)) = scope {
                    self.mark_template(template);
                }
                let template = self.is_template(&state).await?;
                Ok(Target::Plain(Shape {
                    step: state.step,
                    cycle: cycle_len(&state),
                    template,
                }))
            })
            .await
    }

    /// Whether `state` is a scope template: a plain name whose format uses `{scope}` or that
    /// has a scope already.
    async fn is_template(&self, state: &SequenceState) -> Result<bool, Error> {
        if dispenser::sequence::validate_plain_name(&state.name).is_err() {
            return Ok(false);
        }
        if state.format.as_ref().is_some_and(|f| f.uses_scope()) {
            return Ok(true);
        }
        Ok(!self
            .dispenser
            .list()
            .scopes_of(state.name.as_str())
            .limit(1)
            .await?
            .is_empty())
    }

    /// Notes that `template` has scopes (when its era is not being replaced right now; the
    /// next era's first draw looks at the scopes itself). Called only once a scope exists.
    fn mark_template(&self, template: &str) {
        if let Ok(era) = self.slot(template).era.try_read() {
            era.scoped.store(true, Ordering::SeqCst);
        }
    }

    /// Runs the admin operation `op` on `name` with the draws of `name` shut out: first the
    /// sequence's clients are retired (what they hold given back), then `op` runs, then draws
    /// open fresh clients.
    pub(super) async fn exclusive<T, F>(&self, name: &str, op: F) -> Result<T, Error>
    where
        F: Future<Output = Result<T, Error>>,
    {
        let slot = self.slot(name);
        let mut era = slot.era.write().await;
        let old = std::mem::take(&mut *era);
        self.retire(name, old).await;
        let out = op.await;
        drop(era);
        // The next draw finds out afresh what the name stands for (if it still exists).
        self.forget_if_unused(name, slot);
        out
    }

    /// Drops the slot of `name` when nothing holds it and its era knows nothing yet (a name
    /// that did not resolve, or whose era an admin operation just ended): the service keeps
    /// nothing for names that do not exist. A later use makes a fresh slot.
    pub(super) fn forget_if_unused(&self, name: &str, slot: Arc<Slot>) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let Some(kept) = slots.get(name) else {
            return;
        };
        // The map's reference and `slot`: nobody else is using it.
        if !Arc::ptr_eq(kept, &slot) || Arc::strong_count(&slot) != 2 {
            return;
        }
        let unused = slot
            .era
            .try_read()
            .is_ok_and(|era| era.target.get().is_none() && era.direct.get().is_none());
        if unused {
            slots.remove(name);
        }
    }

    /// After a scope of `template` was deleted: the template's era ends, so its next draw
    /// looks at the scopes that exist (it is drawable again once it has none).
    pub(super) async fn rescan_template(&self, template: &str) {
        let known = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(template)
            .cloned();
        if let Some(slot) = known {
            let mut era = slot.era.write().await;
            let old = std::mem::take(&mut *era);
            self.retire(template, old).await;
            drop(era);
            self.forget_if_unused(template, slot);
        }
    }

    /// Retires the clients of an era: the block client from the pool (closed, what is safe
    /// given back), the direct handle (its stats kept).
    /// [`AppState::exclusive`] over several sequences at once (the stripes of a striped
    /// sequence): their era locks are taken in name order (no deadlock between two such
    /// calls), every client retired, then `op` runs.
    pub(super) async fn exclusive_all<T, F>(&self, names: &[String], op: F) -> Result<T, Error>
    where
        F: Future<Output = Result<T, Error>>,
    {
        let mut sorted: Vec<&String> = names.iter().collect();
        sorted.sort();
        sorted.dedup();
        let slots: Vec<Arc<Slot>> = sorted.iter().map(|n| self.slot(n)).collect();
        let mut guards = Vec::with_capacity(slots.len());
        for slot in &slots {
            guards.push(slot.era.write().await);
        }
        for (name, era) in sorted.iter().zip(guards.iter_mut()) {
            let old = std::mem::take(&mut **era);
            self.retire(name, old).await;
        }
        op.await
    }

    pub(super) async fn retire(&self, name: &str, era: Era) {
        if let Err(e) = self.pool.retire(name).await {
            tracing::warn!("closing the block client of {name:?}: {e}");
        }
        if let Some(s) = era.direct.into_inner() {
            *self
                .retired
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(name.to_owned())
                .or_default() += s.stats();
        }
    }

    /// Milliseconds since the service started: the clock of the slots' `last_draw`.
    pub(super) fn now_ms(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The block client of `name` for a draw under `era`: the one the era keeps (no lookup,
    /// no clone), else the pool's (opened if need be), which the era keeps from then on.
    pub(super) async fn blocks<'e>(
        &self,
        era: &'e Era,
        name: &str,
    ) -> Result<&'e BlockSequence, Error> {
        era.blocks.get_or_try_init(|| self.pool.get(name)).await
    }

    /// Closes the block clients that no draw used for `idle`.
    pub(super) async fn release_idle(&self, idle: Duration) {
        let now = self.now_ms();
        let idle_slots: Vec<(String, Arc<Slot>)> = self
            .all_slots()
            .into_iter()
            .filter(|(_, slot)| slot.idle_for(now, idle))
            .collect();
        for (name, slot) in idle_slots {
            self.release_if_idle(&name, &slot, idle).await;
        }
    }

    /// Closes the block client of `name` when it is still idle (no draw for `idle`) and no
    /// draw of it is in flight: under the era lock, taken only if free, so a draw never waits
    /// for this and never holds a client closed under it. The era (what the name stands for)
    /// stays; the next draw opens a fresh client.
    async fn release_if_idle(&self, name: &str, slot: &Slot, idle: Duration) {
        let Ok(mut era) = slot.era.try_write() else {
            return;
        };
        if era.blocks.get().is_none() || !slot.idle_for(self.now_ms(), idle) {
            return;
        }
        era.blocks.take();
        match self.pool.retire(name).await {
            Ok(r) => tracing::debug!(
                "released the idle block client of {name:?}: {} given back, {} lost",
                r.given_back,
                r.lost
            ),
            Err(e) => tracing::warn!("closing the idle block client of {name:?}: {e}"),
        }
    }

    /// What the service's clients of each sequence did so far (block clients, direct
    /// handles, live and retired), by name.
    pub(super) async fn stats_by_sequence(&self) -> BTreeMap<String, Stats> {
        let mut out: BTreeMap<String, Stats> = self
            .retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(n, s)| (n.clone(), *s))
            .collect();
        for (name, slot) in self.all_slots() {
            let era = slot.era.read().await;
            if let Some(s) = era.direct.get() {
                *out.entry(name).or_default() += s.stats();
            }
        }
        for (name, s) in self.pool.stats_by_sequence() {
            *out.entry(name).or_default() += s;
        }
        out
    }
}

/// The template and key of `name` when it names a scope (`T@KEY`, with `T` a plain name and
/// `KEY` a valid scope key), else `None`.
pub(super) fn scope_of(name: &str) -> Option<(&str, &str)> {
    let (template, key) = name.split_once(dispenser::scope::SCOPE_SEPARATOR)?;
    (dispenser::scope::scoped_name(template, key).ok()? == name).then_some((template, key))
}
