//! Block (hi-lo) allocation: one write reserves a block of numbers, which are then handed out
//! from memory.
//!
//! A block reservation **is** a draw of `size` numbers through the configured strategy
//! (`Drawer::draw_versioned`), so it uses the same arithmetic, store and retry code as
//! [`Sequence::next_n`]: with `cycle` a block never crosses the wrap (it ends at the bound and
//! the next block starts at `min`); without `cycle`, near the bound the block is cut to what is
//! left.
//!
//! Numbers of the current block are handed out without a lock, by a compare-and-set on an
//! atomic ticket (see `window`); a short [`std::sync::Mutex`] (never held across an `.await`)
//! is taken only at block switches, for the prefetch and by the other operations, so every
//! task and thread of a process can share one [`BlockSequence`]. At most one
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

mod close;
mod open;
mod options;
mod pool;
mod reservation;
mod state;
mod window;

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

pub use close::CloseReport;
pub use open::OpenBlocks;
pub use options::{
    AdaptiveBlocks, BlockOptions, DEFAULT_BLOCK_SIZE, DEFAULT_GROW_TO, DEFAULT_PREFETCH,
    DEFAULT_RANGE_SHARE,
};
pub use pool::Pool;
use reservation::start;
use state::Reservation;
use state::State;
use window::Window;

use crate::dispenser::Sequence;
use crate::error::{Error, Result};
use crate::stats::{Stats, add, bump};
use crate::strategy::Drawer;

/// How many draws of a thread spend one unit of tokio's cooperative budget (see
/// [`BlockSequence::next`]): a caller that only draws from memory yields once in
/// `128 × BUDGET_EVERY` calls (tokio's budget is 128 units), about every 100 µs at 20 M
/// numbers a second — often enough for the prefetch to start on a single-threaded runtime.
const BUDGET_EVERY: u32 = 16;

thread_local! {
    /// The draws of this thread, counted for [`BUDGET_EVERY`].
    static BUDGET_CALLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The shared inside of a [`BlockSequence`].
struct Shared {
    drawer: Arc<Drawer>,
    options: BlockOptions,
    state: Mutex<State>,
    /// The lock-free hand-out window over the current block; retired while the lock is held.
    window: Window,
    /// Notified (all waiters) when a reservation finishes and when the client closes.
    done: Notify,
    /// Whether a reservation is in flight (set when it starts, cleared when it ends): callers
    /// then spend their cooperative budget on every call, so that on a single-threaded
    /// runtime the reservation's task runs soon (see [`BlockSequence::next`]).
    reserving: AtomicBool,
}

/// The state, locked: taking the lock retires the lock-free window (folding what was claimed
/// from it into the current block), releasing it publishes a new one over the rest of the
/// current block. So the state is exact while locked.
struct Locked<'a> {
    shared: &'a Shared,
    st: MutexGuard<'a, State>,
}

impl Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.st
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let st = &mut *self.st;
        if let Some(params) = st.window(&self.shared.options) {
            self.shared.window.publish(&mut st.generation, params);
        }
    }
}

impl Shared {
    fn lock(&self) -> Locked<'_> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let claimed = self.window.retire(&mut st.generation);
        if claimed > 0 {
            if let Some(b) = st.current.as_mut() {
                b.used += claimed;
            }
            add(&self.drawer.stats.issued, claimed);
        }
        Locked { shared: self, st }
    }

    fn closed_error(&self) -> Error {
        Error::Closed {
            name: self.drawer.name.clone(),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let claimed = self.window.claimed();
        let st = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let held = st.held().saturating_sub(claimed);
        if !st.closed && held > 0 {
            tracing::debug!(
                sequence = %self.drawer.name,
                lost = held,
                "block client dropped without close: its unused numbers are a gap"
            );
        }
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
/// use dispenser::{Dispenser, Options, Spec, block::BlockOptions};
///
/// # async fn f() -> dispenser::Result<()> {
/// let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
/// d.ensure("orders", Spec::default()).await?;
/// let options = BlockOptions::default().with_size(1000);
/// let orders = d.open_blocks("orders").options(options).await?;
/// let id = orders.next().await?; // one write per 1000 numbers
/// orders.close().await?; // give the unused rest back if no one wrote since
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use = "a block client holds reserved numbers: close() gives the unused ones back"]
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
    /// A new client. With prefetch, its first block is reserved at once, in the background
    /// (as Leaf does when it starts): a client made ahead of its first call does not make
    /// that call wait for a round trip.
    fn new(drawer: Arc<Drawer>, options: BlockOptions) -> Result<Self> {
        options.validate()?;
        let shared = Arc::new(Shared {
            drawer,
            state: Mutex::new(State::new(options.initial_size())),
            window: Window::new(),
            options,
            done: Notify::new(),
            reserving: AtomicBool::new(false),
        });
        if options.prefetch.is_some() {
            let first = {
                let mut st = shared.lock();
                let r = st.begin();
                (r, st.size)
            };
            Self::prefetch(&shared, Some(first));
        }
        Ok(BlockSequence { shared })
    }

    /// The sequence's name.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let blocks = d.open_blocks("orders").await?;
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
    /// use dispenser::block::BlockOptions;
    /// let options = BlockOptions::default().with_size(10);
    /// let blocks = d.open_blocks("orders").options(options).await?;
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
    /// # async fn f(blocks: dispenser::block::BlockSequence) -> dispenser::Result<()> {
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
        // While a reservation is in flight every call spends a unit, so that its task gets
        // the thread within tokio's budget (128 calls) on a single-threaded runtime; else one
        // call in [`BUDGET_EVERY`] of this thread does (each yield re-queues the task, and on
        // a multi-threaded runtime wakes an idle worker to steal it: a context switch that
        // cost a fifth of a fast caller's time when every call spent a unit).
        if shared.reserving.load(Relaxed)
            || BUDGET_CALLS.with(|calls| {
                let n = calls.get().wrapping_add(1);
                calls.set(n);
                n % BUDGET_EVERY == 0
            })
        {
            tokio::task::consume_budget().await;
        }
        // The hot path: a number ready in the current block (or the prefetched one), taken
        // in this synchronous step.
        if let Some(n) = self.try_next()? {
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
                } else if let Some(r) = st.inflight.clone() {
                    // The one in flight (the same again, or a newer one when ours delivered
                    // numbers others took first, or was dropped unfinished).
                    st.waiting_on(&r);
                    waiting_on = Some(r);
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

    /// Hands out the next number if one is ready, without waiting: from the current block
    /// (lock-free, one atomic compare-and-set), or from the prefetched block (switching to
    /// it under the lock). Starts the prefetch when it is due, and a reservation when no
    /// number is ready and none is in flight — in the background, never waiting for it.
    /// `Ok(None)`: no reserved number is ready; one is being reserved (call again later, or
    /// call [`BlockSequence::next`], which waits for it and reports its failure).
    ///
    /// Numbers come in the same order and with the same guarantees as from
    /// [`BlockSequence::next`] (which calls this first); unlike it, this does not spend the
    /// tokio cooperative budget, so a task that only calls `try_next` in a loop should yield
    /// now and then for the prefetch to run on its thread.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] after [`BlockSequence::close`]. The failure of a reservation is never
    /// reported here: the call that waits for numbers gets it.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::block::BlockSequence) -> dispenser::Result<()> {
    /// let id = match blocks.try_next()? {
    ///     Some(id) => id,                // from memory, no await
    ///     None => blocks.next().await?,  // at a block switch: wait for the reservation
    /// };
    /// # Ok(()) }
    /// ```
    pub fn try_next(&self) -> Result<Option<i64>> {
        let shared = &self.shared;
        if let Some((n, check)) = shared.window.claim() {
            if check {
                let due = shared.lock().prefetch_due(&shared.options);
                Self::prefetch(shared, due);
            }
            return Ok(Some(n));
        }
        let (n, start) = {
            let mut st = shared.lock();
            if st.closed {
                return Err(shared.closed_error());
            }
            match st.take_number(&shared.options, Instant::now()) {
                Some(n) => (Some(n), st.prefetch_due(&shared.options)),
                None if st.inflight.is_none() => {
                    let r = st.begin();
                    let size = st.size;
                    (None, Some((r, size)))
                }
                None => (None, None),
            }
        };
        Self::prefetch(shared, start);
        if n.is_some() {
            add(&shared.drawer.stats.issued, 1);
        }
        Ok(n)
    }

    /// Starts a prefetch decided under the lock, without waiting for it (outside a tokio
    /// runtime it cannot run in the background, so it is dropped: the call that finds the
    /// block empty reserves).
    fn prefetch(shared: &Arc<Shared>, due: Option<(Arc<Reservation>, u64)>) {
        if let Some((r, size)) = due {
            drop(start(shared, r, size));
        }
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
    /// # async fn f(blocks: dispenser::block::BlockSequence) -> dispenser::Result<()> {
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
    /// use dispenser::block::BlockOptions;
    /// let options = BlockOptions::default().with_prefetch(None);
    /// let blocks = d.open_blocks("orders").options(options).await?;
    /// blocks.next().await?;
    /// assert_eq!(blocks.held(), 99);
    /// # Ok(()) }
    /// ```
    pub fn held(&self) -> u64 {
        self.shared.lock().held()
    }

    /// The size of the next reservation (changes over time with adaptive sizing).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::block::BlockSequence) {
    /// println!("next block: {} numbers", blocks.block_size());
    /// # }
    /// ```
    pub fn block_size(&self) -> u64 {
        self.shared.lock().size
    }

    /// Whether `other` is the same block client (a clone of this handle, or the same handle
    /// returned twice by [`Pool::get`]).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(blocks: dispenser::block::BlockSequence) {
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
    /// # async fn f(blocks: dispenser::block::BlockSequence) -> dispenser::Result<()> {
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
    /// # async fn f(blocks: dispenser::block::BlockSequence) -> dispenser::Result<()> {
    /// let s = blocks.stats();
    /// println!("{} numbers from {} blocks, {} waits", s.issued, s.block_refills, s.waits);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> Stats {
        // Numbers claimed lock-free are counted when the window is retired: take the lock.
        drop(self.shared.lock());
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
    ///     .into_blocks(dispenser::block::BlockOptions::default())?;
    /// let id = blocks.next().await?;
    /// # Ok(()) }
    /// ```
    pub fn into_blocks(self, options: BlockOptions) -> Result<BlockSequence> {
        BlockSequence::new(Arc::clone(self.drawer()), options)
    }
}
