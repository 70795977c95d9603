//! Block (hi-lo) allocation: one write reserves a block of numbers, which are then handed out
//! from memory.
//!
//! A block reservation **is** a draw of `size` numbers through the configured strategy
//! ([`Drawer::draw_versioned`]), so it uses the same arithmetic, store and retry code as
//! [`Sequence::next_n`]: with `cycle` a block never crosses the wrap (it ends at the bound and
//! the next block starts at `min`); without `cycle`, near the bound the block is cut to what is
//! left.
//!
//! Numbers are handed out under a short [`std::sync::Mutex`] (never held across an `.await`),
//! so every task and thread of a process can share one [`BlockSequence`]. At most one
//! reservation is in flight per block client: with prefetch it runs in the background
//! (`tokio::spawn`) once a share of the current block is used; callers that drain the block
//! before it returns wait for that same reservation. Every caller waiting on a reservation
//! gets its outcome: its numbers (as far as they go; the rest wait for the next reservation),
//! or its error — all of them, at once. The error is kept only for those waiters: a caller
//! that comes later starts a fresh reservation, so a prefetch that failed while the database
//! was away is retried by the call that needs the next block, never reported to it.
//!
//! Cancel safety: a number is taken from a block only in the synchronous step that returns
//! it, so a `next()` dropped before it completes never consumes one; a reservation runs as its
//! own task, so a caller dropped while waiting leaves it to the others and to the block.
//!
//! [`Sequence::next_n`]: crate::Sequence::next_n

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::arith::Run;
use crate::dispenser::{Dispenser, Sequence};
use crate::error::{Error, Result};
use crate::spec::validate_name;
use crate::stats::{Stats, add, bump};
use crate::strategy::Drawer;

/// The default block size.
///
/// # Example
///
/// ```
/// assert_eq!(dispenser::BlockOptions::default().size, dispenser::DEFAULT_BLOCK_SIZE);
/// ```
pub const DEFAULT_BLOCK_SIZE: u64 = 100;

/// The default prefetch share: the next block is reserved once half of the current one is
/// used.
///
/// # Example
///
/// ```
/// use dispenser::{BlockOptions, DEFAULT_PREFETCH};
/// assert_eq!(BlockOptions::default().prefetch, Some(DEFAULT_PREFETCH));
/// ```
pub const DEFAULT_PREFETCH: f64 = 0.5;

/// How a [`BlockSequence`] reserves numbers.
///
/// # Default
///
/// | field | default |
/// |---|---|
/// | `size` | [`DEFAULT_BLOCK_SIZE`] (100) |
/// | `prefetch` | `Some(`[`DEFAULT_PREFETCH`]`)` (0.5) |
/// | `adaptive` | `None` (fixed size) |
///
/// Half a block is a good trigger: the reservation has the time it takes to hand out the
/// other half to come back, while a client holds at most about 1.5 blocks on average (what a
/// crash loses).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser::{AdaptiveBlocks, BlockOptions};
///
/// let options = BlockOptions::default()
///     .with_size(500)
///     .with_prefetch(Some(0.25))
///     .with_adaptive(Some(
///         AdaptiveBlocks::default().with_target_interval(Duration::from_millis(500)),
///     ));
/// options.validate()?;
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct BlockOptions {
    /// How many numbers one reservation asks for (the starting size when adaptive; it is
    /// then clamped into `[min_size, max_size]`). At least 1. Defaults to 100.
    pub size: u64,
    /// The share of the current block, in `(0, 1]`, that, once handed out, starts reserving
    /// the next block in the background. `None` reserves only when a block is empty (the
    /// caller that finds it empty waits). Defaults to `Some(0.5)`.
    pub prefetch: Option<f64>,
    /// Adapts the size to the consumption rate. Defaults to `None` (fixed size).
    pub adaptive: Option<AdaptiveBlocks>,
}

impl Default for BlockOptions {
    fn default() -> Self {
        BlockOptions {
            size: DEFAULT_BLOCK_SIZE,
            prefetch: Some(DEFAULT_PREFETCH),
            adaptive: None,
        }
    }
}

impl BlockOptions {
    /// Sets how many numbers one reservation asks for. Defaults to 100.
    #[must_use]
    pub const fn with_size(mut self, size: u64) -> Self {
        self.size = size;
        self
    }

    /// Sets the prefetch share (`None`: no prefetch). Defaults to `Some(0.5)`.
    #[must_use]
    pub const fn with_prefetch(mut self, prefetch: Option<f64>) -> Self {
        self.prefetch = prefetch;
        self
    }

    /// Sets the adaptive sizing (`None`: fixed size). Defaults to `None`.
    #[must_use]
    pub const fn with_adaptive(mut self, adaptive: Option<AdaptiveBlocks>) -> Self {
        self.adaptive = adaptive;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the setting: a size of 0, a prefetch share outside
    /// `(0, 1]` (or NaN), an adaptive `min_size` of 0, a `max_size` below `min_size`, or a
    /// zero `target_interval`.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::BlockOptions;
    ///
    /// let err = BlockOptions::default().with_size(0).validate().unwrap_err();
    /// assert!(err.to_string().contains("block size"));
    /// ```
    pub fn validate(&self) -> Result<()> {
        if self.size == 0 {
            return Err(Error::invalid_argument(
                "block size",
                "0 numbers per block; ask for at least 1",
            ));
        }
        if let Some(p) = self.prefetch
            && !(p > 0.0 && p <= 1.0)
        {
            return Err(Error::invalid_argument(
                "block prefetch",
                format!(
                    "{p} must be more than 0 and at most 1 (the share of a block handed out \
                     before the next one is reserved); use None for no prefetch"
                ),
            ));
        }
        if let Some(a) = self.adaptive {
            a.validate()?;
        }
        Ok(())
    }

    /// The size of the first reservation.
    fn initial_size(&self) -> u64 {
        match self.adaptive {
            Some(a) => self.size.clamp(a.min_size, a.max_size),
            None => self.size,
        }
    }
}

/// Adaptive block sizes: a block that was used up faster than `target_interval` doubles the
/// size of later reservations, one that lasted longer halves it, always within
/// `[min_size, max_size]`.
///
/// A block's lifetime runs from when its first number is handed out to when a call finds it
/// empty. So a busy client makes fewer, larger reservations (about one per target interval)
/// and a quiet one holds (and, on a crash, loses) few numbers.
///
/// # Default
///
/// | field | default |
/// |---|---|
/// | `min_size` | 10 |
/// | `max_size` | 100 000 |
/// | `target_interval` | 1 s |
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser::AdaptiveBlocks;
///
/// let adaptive = AdaptiveBlocks::default()
///     .with_min_size(50)
///     .with_max_size(5_000)
///     .with_target_interval(Duration::from_secs(2));
/// adaptive.validate()?;
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdaptiveBlocks {
    /// The smallest block (at least 1). Defaults to 10.
    pub min_size: u64,
    /// The largest block (at least `min_size`). Defaults to 100 000.
    pub max_size: u64,
    /// How long a block should last. Defaults to 1 s.
    pub target_interval: Duration,
}

impl Default for AdaptiveBlocks {
    fn default() -> Self {
        AdaptiveBlocks {
            min_size: 10,
            max_size: 100_000,
            target_interval: Duration::from_secs(1),
        }
    }
}

impl AdaptiveBlocks {
    /// Sets the smallest block. Defaults to 10.
    #[must_use]
    pub const fn with_min_size(mut self, min_size: u64) -> Self {
        self.min_size = min_size;
        self
    }

    /// Sets the largest block. Defaults to 100 000.
    #[must_use]
    pub const fn with_max_size(mut self, max_size: u64) -> Self {
        self.max_size = max_size;
        self
    }

    /// Sets how long a block should last. Defaults to 1 s.
    #[must_use]
    pub const fn with_target_interval(mut self, target_interval: Duration) -> Self {
        self.target_interval = target_interval;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the setting: a `min_size` of 0, a `max_size` below
    /// `min_size`, or a zero `target_interval`.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::AdaptiveBlocks;
    ///
    /// let err = AdaptiveBlocks::default().with_max_size(1).validate().unwrap_err();
    /// assert!(err.to_string().contains("max_size"));
    /// ```
    pub fn validate(&self) -> Result<()> {
        if self.min_size == 0 {
            return Err(Error::invalid_argument(
                "adaptive min_size",
                "must be at least 1",
            ));
        }
        if self.max_size < self.min_size {
            return Err(Error::invalid_argument(
                "adaptive max_size",
                format!(
                    "{} must not be below min_size ({})",
                    self.max_size, self.min_size
                ),
            ));
        }
        if self.target_interval.is_zero() {
            return Err(Error::invalid_argument(
                "adaptive target_interval",
                "must be longer than 0",
            ));
        }
        Ok(())
    }

    /// The next size after a block of any size lasted `elapsed`.
    fn adapt(&self, size: u64, elapsed: Duration) -> u64 {
        let next = if elapsed < self.target_interval {
            size.saturating_mul(2)
        } else if elapsed > self.target_interval {
            size / 2
        } else {
            size
        };
        next.clamp(self.min_size, self.max_size)
    }
}

/// What [`BlockSequence::close`] did with the numbers the client still held.
///
/// # Example
///
/// ```no_run
/// # async fn f(blocks: dispenser::BlockSequence) -> dispenser::Result<()> {
/// let report = blocks.close().await?;
/// println!("{} given back, {} lost (a gap)", report.given_back, report.lost);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloseReport {
    /// Reserved but unused numbers returned to the sequence: the next draw issues them.
    pub given_back: u64,
    /// Reserved but unused numbers that stay a gap (another client wrote after our last
    /// reservation, so they could not be returned safely).
    pub lost: u64,
}

/// A reserved block and how much of it was handed out.
#[derive(Clone, Copy, Debug)]
struct Block {
    run: Run,
    /// How many numbers of `run` were handed out.
    used: u64,
    /// The document version written by the reservation.
    version: i64,
    /// When the block became the current one.
    started: Instant,
    /// Whether its lifetime was fed to the adaptive size already.
    measured: bool,
    /// A reservation made while this was the current block failed: no more prefetch from
    /// it; the call that finds it empty reserves afresh.
    prefetch_failed: bool,
}

impl Block {
    fn new(run: Run, version: i64) -> Self {
        Block {
            run,
            used: 0,
            version,
            started: Instant::now(),
            measured: false,
            prefetch_failed: false,
        }
    }

    fn left(&self) -> u64 {
        self.run.count() - self.used
    }
}

/// Everything behind the lock.
#[derive(Debug)]
struct State {
    /// The block numbers are handed out from.
    current: Option<Block>,
    /// A reserved block waiting for `current` to run out.
    next: Option<Block>,
    /// The reservation running, if any; when it finishes it fills `next` (or records its
    /// error in its outcome), clears this and wakes everyone waiting on `done`.
    inflight: Option<Arc<Reservation>>,
    /// The size of the next reservation.
    size: u64,
    /// Closed: nothing more is issued or reserved.
    closed: bool,
}

impl State {
    /// Hands out the next number of the current block, switching to the reserved next block
    /// when the current one is used up. `None` when no reserved number is left.
    /// The next number of the current block, if it has one left.
    fn take_ready(&mut self) -> Option<i64> {
        let b = self.current.as_mut()?;
        if b.used < b.run.count() {
            let n = b.run.nth_number(b.used);
            b.used += 1;
            Some(n)
        } else {
            None
        }
    }

    fn take_number(&mut self, options: &BlockOptions, now: Instant) -> Option<i64> {
        loop {
            if let Some(b) = self.current.as_mut() {
                if b.used < b.run.count() {
                    let n = b.run.nth_number(b.used);
                    b.used += 1;
                    return Some(n);
                }
                if !b.measured {
                    b.measured = true;
                    if let Some(a) = options.adaptive {
                        self.size = a.adapt(self.size, now.saturating_duration_since(b.started));
                    }
                }
            }
            let mut b = self.next.take()?;
            b.started = now;
            self.current = Some(b);
        }
    }

    /// Whether a prefetch should start now; if so marks it in flight and returns it and its
    /// size.
    fn prefetch_due(&mut self, options: &BlockOptions) -> Option<(Arc<Reservation>, u64)> {
        let share = options.prefetch?;
        if self.inflight.is_some() || self.next.is_some() || self.closed {
            return None;
        }
        let b = self.current.as_ref()?;
        if b.prefetch_failed {
            return None;
        }
        let count = b.run.count();
        // `as` saturates; the share is in (0, 1].
        let threshold = ((share * count as f64).ceil() as u64).clamp(1, count);
        if b.used < threshold {
            return None;
        }
        Some((self.begin(), self.size))
    }

    /// Marks a new reservation in flight and returns it.
    fn begin(&mut self) -> Arc<Reservation> {
        debug_assert!(self.inflight.is_none(), "one reservation at a time");
        let r = Arc::new(Reservation::default());
        self.inflight = Some(Arc::clone(&r));
        r
    }

    /// Clears `inflight` if it is `r`.
    fn end(&mut self, r: &Arc<Reservation>) {
        if self.inflight.as_ref().is_some_and(|i| Arc::ptr_eq(i, r)) {
            self.inflight = None;
        }
    }

    fn held(&self) -> u64 {
        self.current.map_or(0, |b| b.left()) + self.next.map_or(0, |b| b.left())
    }
}

/// One reservation (a block being reserved), shared by the callers that wait on it.
#[derive(Debug, Default)]
struct Reservation {
    /// Set (under the state lock, before `inflight` is cleared) when it finished: `Ok` when
    /// its block is in `next` (or was handed out already), else its error, which every
    /// caller that waited on it gets. Never set when it was dropped unfinished.
    outcome: OnceLock<Result<()>>,
}

impl Reservation {
    /// The error it failed with, for a caller that waited on it.
    fn error(&self) -> Option<Error> {
        match self.outcome.get() {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }
}

/// The shared inside of a [`BlockSequence`].
struct Shared {
    drawer: Arc<Drawer>,
    options: BlockOptions,
    state: Mutex<State>,
    /// Notified (all waiters) when a reservation finishes and when the client closes.
    done: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn closed_error(&self) -> Error {
        Error::Closed {
            name: self.drawer.name.clone(),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let held = st.held();
        if !st.closed && held > 0 {
            tracing::debug!(
                sequence = %self.drawer.name,
                lost = held,
                "block client dropped without close: its unused numbers are a gap"
            );
        }
    }
}

/// A reservation marked in flight, owned by the future that runs it: dropped before it
/// finished (never started because no runtime could run it, its runtime shut down, or the
/// caller running it inline was cancelled), it clears `inflight` and wakes the waiters, who
/// then start another; whatever it may have reserved is a gap.
struct InflightGuard {
    shared: Arc<Shared>,
    reservation: Arc<Reservation>,
    armed: bool,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.armed {
            self.shared.lock().end(&self.reservation);
            self.shared.done.notify_waiters();
        }
    }
}

/// Runs one reservation: draws a block and leaves it in `next`, or its error in its outcome
/// for the callers that waited on it.
async fn reserve(mut guard: InflightGuard, size: u64) {
    let result = reserve_run(&guard.shared.drawer, size).await;
    let shared = &guard.shared;
    {
        let mut st = shared.lock();
        st.end(&guard.reservation);
        let outcome = match result {
            Ok((run, version)) => {
                bump(&shared.drawer.stats.block_refills);
                debug_assert!(st.next.is_none(), "one reservation at a time");
                st.next = Some(Block::new(run, version));
                Ok(())
            }
            Err(e) => {
                tracing::debug!(
                    sequence = %shared.drawer.name,
                    error = %e,
                    "block reservation failed: its waiters get the error, the next call reserves afresh"
                );
                if let Some(b) = st.current.as_mut() {
                    b.prefetch_failed = true;
                }
                Err(e)
            }
        };
        // Only this task sets it, once.
        let _ = guard.reservation.outcome.set(outcome);
    }
    guard.armed = false;
    shared.done.notify_waiters();
}

/// Draws a block of `size`; near the bound of a non-cyclic sequence, what is left.
async fn reserve_run(drawer: &Drawer, size: u64) -> Result<(Run, i64)> {
    match drawer.draw_versioned(size).await {
        Err(Error::Exhausted { remaining, .. }) if remaining > 0 && remaining < size => {
            drawer.draw_versioned(remaining).await
        }
        other => other,
    }
}

/// Starts reservation `r` (already marked in flight) in the background on the current tokio
/// runtime. Outside any runtime nothing can be spawned: returns it to be run inline by a
/// caller that waits for it anyway, or dropped (which clears `inflight`).
fn start(
    shared: &Arc<Shared>,
    r: Arc<Reservation>,
    size: u64,
) -> Option<impl Future<Output = ()> + use<>> {
    let run = reserve(
        InflightGuard {
            shared: Arc::clone(shared),
            reservation: r,
            armed: true,
        },
        size,
    );
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            drop(handle.spawn(run));
            None
        }
        Err(_) => Some(run),
    }
}

/// What a call decided under the lock.
enum Step {
    Issued(i64, Option<(Arc<Reservation>, u64)>),
    Failed(Error),
    Wait(Option<(Arc<Reservation>, u64)>),
}

/// A block client: hands out numbers from blocks reserved with one write each.
///
/// Cheap to clone; clones share the blocks, so one `BlockSequence` serves every task and
/// thread of a process. Numbers handed out by one block client are strictly increasing in
/// the sequence's direction (except across a wrap), but **clients interleave**: two block
/// clients of the same sequence hand out numbers from different blocks, so across clients
/// the numbers are unique but not in global order.
///
/// Numbers reserved but never handed out are a gap: a crashed client loses the rest of its
/// block. [`BlockSequence::close`] gives the unused tail back when that is safe.
///
/// # Example
///
/// ```no_run
/// use dispenser::{BlockOptions, Dispenser, Options, Spec};
///
/// # async fn f() -> dispenser::Result<()> {
/// let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
/// d.ensure("orders", Spec::default()).await?;
/// let orders = d.open_blocks("orders", BlockOptions::default().with_size(1000)).await?;
/// let id = orders.next().await?; // one write per 1000 numbers
/// orders.close().await?; // give the unused rest back if no one wrote since
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct BlockSequence {
    shared: Arc<Shared>,
}

impl fmt::Debug for BlockSequence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("BlockSequence")
            .field("name", &self.shared.drawer.name)
            .field("options", &self.shared.options)
            .field("size", &st.size)
            .field("held", &st.held())
            .field("closed", &st.closed)
            .finish_non_exhaustive()
    }
}

impl BlockSequence {
    fn new(drawer: Arc<Drawer>, options: BlockOptions) -> Result<Self> {
        options.validate()?;
        Ok(BlockSequence {
            shared: Arc::new(Shared {
                drawer,
                state: Mutex::new(State {
                    current: None,
                    next: None,
                    inflight: None,
                    size: options.initial_size(),
                    closed: false,
                }),
                options,
                done: Notify::new(),
            }),
        })
    }

    /// The sequence's name.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let blocks = d.open_blocks("orders", dispenser::BlockOptions::default()).await?;
    /// assert_eq!(blocks.name(), "orders");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.shared.drawer.name
    }

    /// The options this client was opened with.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::BlockOptions;
    /// let blocks = d.open_blocks("orders", BlockOptions::default().with_size(10)).await?;
    /// assert_eq!(blocks.options().size, 10);
    /// # Ok(()) }
    /// ```
    pub fn options(&self) -> &BlockOptions {
        &self.shared.options
    }

    /// Hands out the next number: from memory when the current block has one (no I/O), else
    /// from the block being reserved (waiting for it), else by reserving a block.
    ///
    /// Every caller waiting on a reservation gets its outcome: its numbers, as far as they
    /// go (the others wait for the next reservation), or its error — all of them, at once.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] after [`BlockSequence::close`]. When the reservation this call waited
    /// on failed, its error (those of [`Sequence::next_n`], e.g. [`Error::Database`] or
    /// [`Error::Timeout`]) — every call waiting on that reservation gets it; a later call
    /// starts a fresh reservation. [`Error::Exhausted`] once a non-cyclic sequence has
    /// nothing left.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: if the future is dropped before it completes, no number was taken (a
    /// number leaves the block only in the step that returns it). A reservation the call was
    /// waiting for, or started, runs on as its own task and its block serves later calls;
    /// outside a tokio runtime, where it cannot be spawned, the caller runs it inline, and
    /// dropping it then leaves whatever it reserved as a gap (never issued twice).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::BlockSequence) -> dispenser::Result<()> {
    /// let a = blocks.next().await?;
    /// let b = blocks.next().await?;
    /// assert!(b > a); // one client: increasing (ascending sequence, no wrap between)
    /// # Ok(()) }
    /// ```
    pub async fn next(&self) -> Result<i64> {
        let shared = &self.shared;
        // Served from memory, this call never waits on a tokio resource, so a busy caller
        // would never yield: spend the task's cooperative budget, so that now and then the
        // runtime runs other tasks on this thread — among them the prefetch. Before a number
        // is taken: a call dropped while it yields here has consumed nothing.
        tokio::task::consume_budget().await;
        // The hot path: a number left in the current block. One short lock, no clock read,
        // no waiter registration, and no `.await` from taking the number to returning it.
        let ready = {
            let mut st = shared.lock();
            if st.closed {
                None
            } else {
                st.take_ready()
                    .map(|n| (n, st.prefetch_due(&shared.options)))
            }
        };
        if let Some((n, prefetch)) = ready {
            Self::prefetch(shared, prefetch);
            add(&shared.drawer.stats.issued, 1);
            return Ok(n);
        }
        let mut waited = false;
        // The reservation this call waits on: its outcome is this call's.
        let mut waiting_on: Option<Arc<Reservation>> = None;
        loop {
            let notified = shared.done.notified();
            let step = {
                let mut st = shared.lock();
                if st.closed {
                    return Err(shared.closed_error());
                }
                if let Some(n) = st.take_number(&shared.options, Instant::now()) {
                    Step::Issued(n, st.prefetch_due(&shared.options))
                } else if let Some(e) = waiting_on.as_ref().and_then(|r| r.error()) {
                    Step::Failed(e)
                } else if let Some(r) = &st.inflight {
                    // The one in flight (the same again, or a newer one when ours delivered
                    // numbers others took first, or was dropped unfinished).
                    waiting_on = Some(Arc::clone(r));
                    Step::Wait(None)
                } else {
                    let r = st.begin();
                    waiting_on = Some(Arc::clone(&r));
                    Step::Wait(Some((r, st.size)))
                }
            };
            match step {
                Step::Issued(n, prefetch) => {
                    Self::prefetch(shared, prefetch);
                    if waited {
                        bump(&shared.drawer.stats.waits);
                    }
                    add(&shared.drawer.stats.issued, 1);
                    return Ok(n);
                }
                Step::Failed(e) => {
                    if waited {
                        bump(&shared.drawer.stats.waits);
                    }
                    return Err(e);
                }
                Step::Wait(reserve) => {
                    waited = true;
                    if let Some((r, size)) = reserve
                        && let Some(inline) = start(shared, r, size)
                    {
                        inline.await;
                        continue;
                    }
                    notified.await;
                }
            }
        }
    }

    /// Starts a prefetch decided under the lock, without waiting for it (outside a tokio
    /// runtime it cannot run in the background, so it is dropped: the call that finds the
    /// block empty reserves).
    fn prefetch(shared: &Arc<Shared>, due: Option<(Arc<Reservation>, u64)>) {
        if let Some((r, size)) = due {
            drop(start(shared, r, size));
        }
    }

    /// Stops the client and gives back the numbers it reserved but did not hand out, when
    /// that is safe: only if no one wrote the sequence after this client's last
    /// reservation (a compare-and-set on `version` and `value`). The sequence's value then
    /// moves back to just before the first unused number, and the next draw, by anyone,
    /// issues it. Otherwise they stay a gap (`lost`).
    ///
    /// A reserved but unused prefetched block counts too: both it and the tail of the
    /// current block are given back when they are contiguous and were reserved by
    /// consecutive writes; otherwise only the prefetched block (the latest write) is.
    ///
    /// Closing affects every clone: afterwards they all fail with [`Error::Closed`]. Waits
    /// for a reservation in flight (its block is counted). Closing twice reports nothing the
    /// second time.
    ///
    /// # Errors
    ///
    /// [`Error::Database`] or [`Error::Timeout`] when the give-back write failed: its outcome
    /// is unknown, so the numbers are either given back or a gap — never issued twice.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, though never at the cost of uniqueness: once polled, the client is
    /// closed. Dropped while it waits for a reservation in flight, or before its give-back
    /// write completed, the numbers the client held are given back (if that write went
    /// through) or a gap — never issued twice — and no report says which.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::BlockOptions;
    /// let blocks = d.open_blocks("orders", BlockOptions::default().with_prefetch(None)).await?;
    /// let first = blocks.next().await?;
    /// let report = blocks.close().await?;
    /// assert_eq!(report.given_back, 99); // no one else wrote meanwhile
    /// assert_eq!(d.open("orders").await?.next().await?, first + 1);
    /// # Ok(()) }
    /// ```
    pub async fn close(self) -> Result<CloseReport> {
        let shared = &self.shared;
        {
            let mut st = shared.lock();
            if st.closed {
                return Ok(CloseReport::default());
            }
            st.closed = true;
        }
        // Wake callers waiting for a reservation: they now fail with `Closed`.
        shared.done.notify_waiters();
        loop {
            let notified = shared.done.notified();
            if shared.lock().inflight.is_none() {
                break;
            }
            notified.await;
        }
        let (tail, prefetched) = {
            let mut st = shared.lock();
            (
                st.current.take().filter(|b| b.left() > 0),
                st.next.take().filter(|b| b.left() > 0),
            )
        };
        self.give_back(tail, prefetched).await
    }

    async fn give_back(&self, tail: Option<Block>, fetched: Option<Block>) -> Result<CloseReport> {
        let held = tail.map_or(0, |b| b.left()) + fetched.map_or(0, |b| b.left());
        // Only the latest write can be undone: the prefetched block if there is one.
        let (version, last, first_unused, count) = match (tail, fetched) {
            (None, None) => return Ok(CloseReport::default()),
            (Some(b), None) | (None, Some(b)) => {
                (b.version, b.run.last(), b.run.nth_number(b.used), b.left())
            }
            (Some(t), Some(p)) => {
                let contiguous = p.version == t.version + 1
                    && i128::from(p.run.first())
                        == i128::from(t.run.last()) + i128::from(t.run.step());
                if contiguous {
                    (
                        p.version,
                        p.run.last(),
                        t.run.nth_number(t.used),
                        t.left() + p.left(),
                    )
                } else {
                    (p.version, p.run.last(), p.run.first(), p.left())
                }
            }
        };
        let drawer = &self.shared.drawer;
        let spec = drawer.spec();
        let lost_all = CloseReport {
            given_back: 0,
            lost: held,
        };
        let Some(new_value) = first_unused.checked_sub(spec.step) else {
            return Ok(lost_all);
        };
        bump(&drawer.stats.round_trips);
        bump(&drawer.stats.writes);
        let given = drawer
            .store
            .give_back(&drawer.name, &spec, version, last, new_value)
            .await?;
        Ok(if given {
            CloseReport {
                given_back: count,
                lost: held - count,
            }
        } else {
            lost_all
        })
    }

    /// Waits until no reservation is in flight (a prefetch or a refill), for example to let a
    /// prefetch land before a latency-sensitive burst. Reserves nothing itself; a failed
    /// reservation's error is not reported here (the next call that needs numbers reserves
    /// afresh).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits; dropping it changes nothing.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::BlockSequence) -> dispenser::Result<()> {
    /// blocks.next().await?;
    /// blocks.settle().await;
    /// # Ok(()) }
    /// ```
    pub async fn settle(&self) {
        loop {
            let notified = self.shared.done.notified();
            if self.shared.lock().inflight.is_none() {
                return;
            }
            notified.await;
        }
    }

    /// How many reserved numbers this client holds and has not handed out yet (the rest of
    /// the current block plus a prefetched block): what a crash now would lose.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::BlockOptions;
    /// let blocks = d.open_blocks("orders", BlockOptions::default().with_prefetch(None)).await?;
    /// blocks.next().await?;
    /// assert_eq!(blocks.buffered(), 99);
    /// # Ok(()) }
    /// ```
    pub fn buffered(&self) -> u64 {
        self.shared.lock().held()
    }

    /// The size of the next reservation (changes over time with adaptive sizing).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::BlockSequence) {
    /// println!("next block: {} numbers", blocks.block_size());
    /// # }
    /// ```
    pub fn block_size(&self) -> u64 {
        self.shared.lock().size
    }

    /// Whether `other` is the same block client (a clone of this handle, or the same handle
    /// returned twice by [`Dispenser::shared_blocks`]).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::BlockSequence) {
    /// assert!(blocks.same_as(&blocks.clone()));
    /// # }
    /// ```
    pub fn same_as(&self, other: &BlockSequence) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Whether [`BlockSequence::close`] was called (on this handle or a clone).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::BlockSequence) -> dispenser::Result<()> {
    /// let other = blocks.clone();
    /// blocks.close().await?;
    /// assert!(other.is_closed());
    /// # Ok(()) }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }

    /// What this client did so far: `issued` counts numbers handed out, `block_refills` the
    /// blocks reserved, `waits` the calls that had to wait for the database. Shared with the
    /// [`Sequence`] handle it was made from, if any.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::BlockSequence) -> dispenser::Result<()> {
    /// let s = blocks.stats();
    /// println!("{} numbers from {} blocks, {} waits", s.issued, s.block_refills, s.waits);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared.drawer.stats.snapshot()
    }
}

impl Sequence {
    /// Turns this handle into a block client (see [`BlockSequence`]). The block client
    /// shares this handle's remembered state and [`Stats`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for invalid options (see [`BlockOptions::validate`]).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let blocks = d
    ///     .ensure("orders", dispenser::Spec::default())
    ///     .await?
    ///     .into_blocks(dispenser::BlockOptions::default())?;
    /// let id = blocks.next().await?;
    /// # Ok(()) }
    /// ```
    pub fn into_blocks(self, options: BlockOptions) -> Result<BlockSequence> {
        BlockSequence::new(Arc::clone(self.drawer()), options)
    }
}

impl Dispenser {
    /// Opens an existing sequence as a new block client (see [`BlockSequence`]). Every call
    /// makes a new, independent client; use [`Dispenser::shared_blocks`] for one per process.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for invalid options, plus those of [`Dispenser::open`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads the sequence; dropped before it completes, no client was
    /// made and nothing was reserved.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let blocks = d.open_blocks("orders", dispenser::BlockOptions::default()).await?;
    /// let id = blocks.next().await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_blocks(&self, name: &str, options: BlockOptions) -> Result<BlockSequence> {
        options.validate()?;
        self.open(name).await?.into_blocks(options)
    }

    /// The block client of sequence `name` for this dispenser and its clones: the first call
    /// opens it, later calls return the same client (see [`BlockSequence::same_as`]) as long
    /// as it is alive (some handle to it exists) and not closed. One block client per process
    /// wastes the fewest numbers: create one `Dispenser` per process and share it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (`block options`) when the live client was opened with
    /// different options (nothing is changed: close it first), plus those of
    /// [`Dispenser::open_blocks`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it completes, nothing was reserved, and no client was
    /// registered (or the one registered meanwhile by another caller stays).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::BlockOptions;
    /// let a = d.shared_blocks("orders", BlockOptions::default()).await?;
    /// let b = d.clone().shared_blocks("orders", BlockOptions::default()).await?;
    /// assert!(a.same_as(&b));
    /// # Ok(()) }
    /// ```
    pub async fn shared_blocks(&self, name: &str, options: BlockOptions) -> Result<BlockSequence> {
        validate_name(name)?;
        options.validate()?;
        if let Some(live) = self.registry().live(name, &options)? {
            return Ok(live);
        }
        let fresh = self.open_blocks(name, options).await?;
        self.registry().insert(name, fresh)
    }
}

/// The live shared block clients of a [`Dispenser`] and its clones, by sequence name (a
/// dispenser is one database and collection).
#[derive(Clone, Default)]
pub(crate) struct Registry(Arc<Mutex<HashMap<String, Weak<Shared>>>>);

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.lock().len();
        f.debug_struct("Registry").field("entries", &n).finish()
    }
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Weak<Shared>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live, open client of `name` in `map`, if any (dead or closed entries are removed).
    fn find(
        map: &mut HashMap<String, Weak<Shared>>,
        name: &str,
        options: &BlockOptions,
    ) -> Result<Option<BlockSequence>> {
        let Some(shared) = map.get(name).and_then(Weak::upgrade) else {
            map.remove(name);
            return Ok(None);
        };
        if shared.lock().closed {
            map.remove(name);
            return Ok(None);
        }
        if shared.options != *options {
            return Err(Error::invalid_argument(
                "block options",
                format!(
                    "sequence {name:?} already has a shared block client with {:?}, not {options:?}; \
                     close it first or ask with the same options",
                    shared.options
                ),
            ));
        }
        Ok(Some(BlockSequence { shared }))
    }

    fn live(&self, name: &str, options: &BlockOptions) -> Result<Option<BlockSequence>> {
        Self::find(&mut self.lock(), name, options)
    }

    /// Registers `fresh` unless another task registered a client meanwhile (then that one is
    /// returned and `fresh`, which holds no numbers, is dropped).
    fn insert(&self, name: &str, fresh: BlockSequence) -> Result<BlockSequence> {
        let mut map = self.lock();
        if let Some(live) = Self::find(&mut map, name, &fresh.shared.options)? {
            return Ok(live);
        }
        map.insert(name.to_owned(), Arc::downgrade(&fresh.shared));
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert!(BlockOptions::default().validate().is_ok());
        assert!(AdaptiveBlocks::default().validate().is_ok());
        assert_eq!(BlockOptions::default().size, DEFAULT_BLOCK_SIZE);
    }

    #[test]
    fn bad_options_name_the_field() {
        let cases = [
            (BlockOptions::default().with_size(0), "block size"),
            (
                BlockOptions::default().with_prefetch(Some(0.0)),
                "block prefetch",
            ),
            (
                BlockOptions::default().with_prefetch(Some(1.5)),
                "block prefetch",
            ),
            (
                BlockOptions::default().with_prefetch(Some(f64::NAN)),
                "block prefetch",
            ),
            (
                BlockOptions::default()
                    .with_adaptive(Some(AdaptiveBlocks::default().with_min_size(0))),
                "min_size",
            ),
            (
                BlockOptions::default().with_adaptive(Some(
                    AdaptiveBlocks::default().with_min_size(10).with_max_size(5),
                )),
                "max_size",
            ),
            (
                BlockOptions::default().with_adaptive(Some(
                    AdaptiveBlocks::default().with_target_interval(Duration::ZERO),
                )),
                "target_interval",
            ),
        ];
        for (o, needle) in cases {
            let err = o.validate().unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { .. }), "{o:?}");
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        }
        assert!(
            BlockOptions::default()
                .with_prefetch(Some(1.0))
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn adaptive_grows_fast_blocks_and_shrinks_slow_ones() {
        let a = AdaptiveBlocks::default()
            .with_min_size(4)
            .with_max_size(64)
            .with_target_interval(Duration::from_millis(100));
        let fast = Duration::from_millis(10);
        let slow = Duration::from_secs(1);
        assert_eq!(a.adapt(16, fast), 32);
        assert_eq!(a.adapt(48, fast), 64);
        assert_eq!(a.adapt(16, slow), 8);
        assert_eq!(a.adapt(5, slow), 4);
        assert_eq!(a.adapt(16, a.target_interval), 16);
        assert_eq!(a.adapt(u64::MAX, fast), 64);
        let o = BlockOptions::default()
            .with_size(1000)
            .with_adaptive(Some(a));
        assert_eq!(o.initial_size(), 64);
    }

    #[test]
    fn blocks_hand_out_in_order_and_prefetch_at_the_share() {
        let options = BlockOptions::default()
            .with_size(4)
            .with_prefetch(Some(0.5));
        let mut st = State {
            current: None,
            next: Some(Block::new(Run::new(1, 4, 1), 1)),
            inflight: None,
            size: 4,
            closed: false,
        };
        let now = Instant::now();
        assert_eq!(st.take_number(&options, now), Some(1));
        assert!(st.prefetch_due(&options).is_none());
        assert_eq!(st.take_number(&options, now), Some(2));
        let (r, size) = st.prefetch_due(&options).expect("due at half the block");
        assert_eq!(size, 4);
        assert!(st.inflight.as_ref().is_some_and(|i| Arc::ptr_eq(i, &r)));
        assert!(
            st.prefetch_due(&options).is_none(),
            "one reservation at a time"
        );
        assert_eq!(st.take_number(&options, now), Some(3));
        assert_eq!(st.take_number(&options, now), Some(4));
        assert_eq!(st.take_number(&options, now), None);
        st.end(&r);
        assert!(st.inflight.is_none());
        st.next = Some(Block::new(Run::new(9, 2, 1), 3));
        assert_eq!(st.held(), 2);
        assert_eq!(st.take_number(&options, now), Some(9));
        assert_eq!(st.held(), 1);
    }
}
