//! A pool of block clients: one live [`BlockSequence`] per sequence name, opened on first
//! use, retired (closed, its tail given back) on demand.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{BlockOptions, BlockSequence, CloseReport};
use crate::dispenser::Dispenser;
use crate::error::Result;
use crate::spec::validate_name;
use crate::stats::Stats;

/// One block client per sequence name, in the style of a connection pool: [`Pool::get`]
/// opens a sequence's client on first use and hands the same one to every later caller;
/// [`Pool::retire`] closes it (giving back what it holds) and forgets it, so the next `get`
/// opens a fresh one; [`Pool::close_all`] does that for every sequence, on shutdown.
///
/// One block client per process wastes the fewest numbers: make one pool per process (it is
/// cheap to clone; clones share the clients) and draw through it. Every client is opened with
/// the pool's [`BlockOptions`].
///
/// `get` and `retire` of the same name are ordered: a `get` that starts after a `retire`
/// returned never returns the retired client, and a `get` that races a `retire` waits until
/// the retired client is closed before it opens a fresh one. A client handed out before the
/// `retire` fails with [`Error::Closed`](crate::Error::Closed) afterwards (it never serves a
/// number after it was closed). The pool remembers every name it was asked for (a few bytes
/// each).
///
/// # Example
///
/// ```no_run
/// use dispenser::{Dispenser, Options, block::{BlockOptions, Pool}};
///
/// # async fn f() -> dispenser::Result<()> {
/// let d = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
/// let pool = Pool::new(d, BlockOptions::default().with_size(1000))?;
/// let a = pool.get("orders").await?;
/// let b = pool.clone().get("orders").await?;
/// assert!(a.same_as(&b));
/// let id = a.next().await?;
/// let report = pool.retire("orders").await?; // closed, the rest given back
/// assert!(!pool.get("orders").await?.same_as(&a));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    dispenser: Dispenser,
    /// When the pool was made: the origin of the entries' `last_get`.
    born: Instant,
    options: BlockOptions,
    /// One entry per name asked for so far (never removed, so that a `get` waiting on an
    /// entry's gate always stores into the entry the others see).
    /// Looked up on every `get`: hashed with foldhash (randomly seeded per process), which is
    /// several times cheaper than SipHash for short names.
    entries: Mutex<HashMap<String, Arc<Entry>, foldhash::fast::RandomState>>,
}

/// One sequence's place in the pool.
#[derive(Default)]
struct Entry {
    /// Held while a client is opened or retired: those of one name run one at a time.
    gate: tokio::sync::Mutex<()>,
    /// The live client, if any (a short lock, never held across an `.await`).
    client: Mutex<Option<BlockSequence>>,
    /// The counters of this sequence's clients already retired (or found closed and
    /// replaced).
    retired: Mutex<Stats>,
    /// When [`Pool::get`] last handed out this name's client, in milliseconds since the
    /// pool was made.
    last_get: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Entry {
    /// The live, open client, if any.
    fn live(&self) -> Option<BlockSequence> {
        lock(&self.client).clone().filter(|c| !c.is_closed())
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("options", &self.inner.options)
            .field("live", &self.live().len())
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool that opens block clients of `dispenser`'s sequences with `options`. Opens
    /// nothing yet.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for invalid options (see
    /// [`BlockOptions::validate`]).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::block::{BlockOptions, Pool};
    /// let pool = Pool::new(d, BlockOptions::default())?;
    /// # Ok(()) }
    /// ```
    pub fn new(dispenser: Dispenser, options: BlockOptions) -> Result<Pool> {
        options.validate()?;
        Ok(Pool {
            inner: Arc::new(Inner {
                dispenser,
                born: Instant::now(),
                options,
                entries: Mutex::new(HashMap::default()),
            }),
        })
    }

    /// The options every client of this pool is opened with.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn f(pool: dispenser::block::Pool) {
    /// println!("blocks of {}", pool.options().size);
    /// # }
    /// ```
    pub fn options(&self) -> &BlockOptions {
        &self.inner.options
    }

    /// Milliseconds since the pool was made.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.inner.born.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn entry(&self, name: &str) -> Arc<Entry> {
        let mut entries = lock(&self.inner.entries);
        // Looked up first: the name is copied only for a new entry.
        if let Some(entry) = entries.get(name) {
            return Arc::clone(entry);
        }
        Arc::clone(entries.entry(name.to_owned()).or_default())
    }

    /// The block client of sequence `name`: the live one, or (on first use, after a
    /// [`Pool::retire`], or when someone closed it) a fresh one, opened with
    /// [`Dispenser::open_blocks`]. Every caller gets the same client until it is retired.
    ///
    /// # Errors
    ///
    /// Those of [`Dispenser::open_blocks`]: [`Error::InvalidName`](crate::Error::InvalidName),
    /// [`Error::NotFound`](crate::Error::NotFound),
    /// [`Error::Database`](crate::Error::Database), …
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it completes, no client was stored (or the one another
    /// caller stored meanwhile stays) and nothing was reserved.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(pool: dispenser::block::Pool) -> dispenser::Result<()> {
    /// let id = pool.get("orders").await?.next().await?;
    /// # Ok(()) }
    /// ```
    pub async fn get(&self, name: &str) -> Result<BlockSequence> {
        validate_name(name)?;
        let entry = self.entry(name);
        // Written only when it changes (once a millisecond at most): callers on other threads
        // then share the cache line rather than pass it to and fro on every `get`.
        let now = self.now_ms();
        if entry.last_get.load(Ordering::Relaxed) != now {
            entry.last_get.store(now, Ordering::Relaxed);
        }
        if let Some(live) = entry.live() {
            return Ok(live);
        }
        // Boxed: opening a client reads the database, and that future held inline would make
        // every `get` future as large, for a path taken once per client.
        Box::pin(self.open(name, &entry)).await
    }

    /// [`Pool::get`] when `name` has no live client: opens one, one caller at a time.
    async fn open(&self, name: &str, entry: &Entry) -> Result<BlockSequence> {
        let _gate = entry.gate.lock().await;
        // Opened (or retired) by another caller while this one waited.
        if let Some(live) = entry.live() {
            return Ok(live);
        }
        let fresh = self
            .inner
            .dispenser
            .open_blocks(name)
            .options(self.inner.options)
            .await?;
        // Lock order everywhere: `entries`, an entry's `retired`, its `client`.
        let mut retired = lock(&entry.retired);
        if let Some(closed) = lock(&entry.client).replace(fresh.clone()) {
            // Closed by someone else (or by a retire dropped midway): still counted.
            *retired += closed.stats();
        }
        Ok(fresh)
    }

    /// Closes the client of sequence `name` (see [`BlockSequence::close`]: the numbers it
    /// holds are given back when that is safe) and forgets it, so that the next
    /// [`Pool::get`] opens a fresh one. Waits for a `get` that is opening a client of `name`;
    /// a `get` that starts meanwhile waits for this. Without a client, reports nothing.
    ///
    /// # Errors
    ///
    /// Those of [`BlockSequence::close`] ([`Error::Database`](crate::Error::Database),
    /// [`Error::Timeout`](crate::Error::Timeout)): the client is closed and forgotten all
    /// the same, and what it held is either given back or a gap — never issued twice.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, though never at the cost of uniqueness (as [`BlockSequence::close`]):
    /// dropped while it waits for the sequence's turn, nothing changed; dropped once the close
    /// started, the client is closed (the next `get` opens a fresh one) and what it held was
    /// given back or is a gap, and no report says which.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(pool: dispenser::block::Pool) -> dispenser::Result<()> {
    /// let report = pool.retire("orders").await?;
    /// println!("{} given back, {} lost", report.given_back, report.lost);
    /// # Ok(()) }
    /// ```
    pub async fn retire(&self, name: &str) -> Result<CloseReport> {
        let Some(entry) = lock(&self.inner.entries).get(name).map(Arc::clone) else {
            return Ok(CloseReport::default());
        };
        let _gate = entry.gate.lock().await;
        // It stays in its entry while it closes (closed, `get` no longer hands it out), so
        // that its counters are always counted once.
        let Some(client) = lock(&entry.client).clone() else {
            return Ok(CloseReport::default());
        };
        let closed = client.close().await;
        let mut retired = lock(&entry.retired);
        if let Some(client) = lock(&entry.client).take() {
            *retired += client.stats();
        }
        closed
    }

    /// The names of the sequences whose live client no [`Pool::get`] asked for during the
    /// last `for_at_least`, sorted: what a long-running process can retire to give their
    /// numbers back (see [`Pool::retire_idle`]).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn f(pool: dispenser::block::Pool) {
    /// use std::time::Duration;
    /// println!("idle: {:?}", pool.idle(Duration::from_secs(300)));
    /// # }
    /// ```
    pub fn idle(&self, for_at_least: Duration) -> Vec<String> {
        let now = self.now_ms();
        let idle_ms = u64::try_from(for_at_least.as_millis()).unwrap_or(u64::MAX);
        let mut names: Vec<String> = lock(&self.inner.entries)
            .iter()
            .filter(|(_, e)| {
                now.saturating_sub(e.last_get.load(Ordering::Relaxed)) >= idle_ms
                    && e.live().is_some()
            })
            .map(|(n, _)| n.clone())
            .collect();
        names.sort_unstable();
        names
    }

    /// Retires (see [`Pool::retire`]) the clients that are [`Pool::idle`] for `for_at_least`,
    /// giving back what they hold: one outcome per sequence, by name. Meant for callers that
    /// `get` the client for each use rather than keep it: a client kept from before fails
    /// with [`Error::Closed`](crate::Error::Closed) once retired (never a duplicate).
    ///
    /// # Cancel safety
    ///
    /// As [`Pool::retire`]: dropped midway, the idle clients not yet retired stay, and the one
    /// being closed gave back what it held or left it a gap (never issued twice).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(pool: dispenser::block::Pool) {
    /// use std::time::Duration;
    /// for (name, outcome) in pool.retire_idle(Duration::from_secs(300)).await {
    ///     if let Ok(r) = outcome {
    ///         println!("{name}: idle, {} given back", r.given_back);
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn retire_idle(&self, for_at_least: Duration) -> Vec<(String, Result<CloseReport>)> {
        let mut out = Vec::new();
        for name in self.idle(for_at_least) {
            let outcome = self.retire(&name).await;
            out.push((name, outcome));
        }
        out
    }

    /// Retires every client (see [`Pool::retire`]), for example on shutdown: one outcome per
    /// sequence that had one, by name.
    ///
    /// # Cancel safety
    ///
    /// As [`Pool::retire`]: dropped midway, the clients not yet retired stay, and the one
    /// being closed gave back what it held or left it a gap.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(pool: dispenser::block::Pool) {
    /// for (name, outcome) in pool.close_all().await {
    ///     match outcome {
    ///         Ok(r) => println!("{name}: {} given back", r.given_back),
    ///         Err(e) => eprintln!("{name}: {e}"),
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn close_all(&self) -> Vec<(String, Result<CloseReport>)> {
        let mut names: Vec<String> = lock(&self.inner.entries)
            .iter()
            .filter(|(_, e)| lock(&e.client).is_some())
            .map(|(n, _)| n.clone())
            .collect();
        names.sort_unstable();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let outcome = self.retire(&name).await;
            out.push((name, outcome));
        }
        out
    }

    /// The live clients.
    fn live(&self) -> Vec<BlockSequence> {
        lock(&self.inner.entries)
            .values()
            .filter_map(|e| e.live())
            .collect()
    }

    /// The names of the sequences that have a live client now.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn f(pool: dispenser::block::Pool) {
    /// println!("clients: {:?}", pool.names());
    /// # }
    /// ```
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.live().iter().map(|c| c.name().to_owned()).collect();
        names.sort_unstable();
        names
    }

    /// How many reserved numbers the live clients hold and have not handed out yet (see
    /// [`BlockSequence::held`]): what a crash now would lose.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn f(pool: dispenser::block::Pool) {
    /// println!("{} numbers held", pool.held());
    /// # }
    /// ```
    pub fn held(&self) -> u64 {
        self.live().iter().map(BlockSequence::held).sum()
    }

    /// What the pool's clients did so far, the live ones and those already retired, added up
    /// (see [`BlockSequence::stats`]).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn f(pool: dispenser::block::Pool) {
    /// let s = pool.stats();
    /// println!("{} numbers from {} blocks", s.issued, s.block_refills);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        let mut total = Stats::default();
        for (_, s) in self.stats_by_sequence() {
            total += s;
        }
        total
    }

    /// [`Pool::stats`] for each sequence the pool was asked for, by name (sorted): what its
    /// live client and those already retired did, added up.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn f(pool: dispenser::block::Pool) {
    /// for (name, s) in pool.stats_by_sequence() {
    ///     println!("{name}: {} numbers from {} blocks", s.issued, s.block_refills);
    /// }
    /// # }
    /// ```
    pub fn stats_by_sequence(&self) -> Vec<(String, Stats)> {
        let entries: Vec<(String, Arc<Entry>)> = lock(&self.inner.entries)
            .iter()
            .map(|(n, e)| (n.clone(), Arc::clone(e)))
            .collect();
        let mut out: Vec<(String, Stats)> = entries
            .into_iter()
            .map(|(name, e)| {
                let retired = lock(&e.retired);
                let mut total = *retired;
                if let Some(c) = lock(&e.client).as_ref() {
                    total += c.stats();
                }
                (name, total)
            })
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// [`Pool::held`] for each sequence that has a live client now, by name (sorted).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn f(pool: dispenser::block::Pool) {
    /// for (name, held) in pool.held_by_sequence() {
    ///     println!("{name}: {held} numbers reserved, not yet handed out");
    /// }
    /// # }
    /// ```
    pub fn held_by_sequence(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .live()
            .iter()
            .map(|c| (c.name().to_owned(), c.held()))
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    fn future_size<'a, T: 'a + ?Sized, F: Future>(_: impl FnOnce(&'a T) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    fn future_size2<'a, T: 'a + ?Sized, U: 'a + ?Sized, F: Future>(
        _: impl FnOnce(&'a T, &'a U) -> F,
    ) -> usize {
        std::mem::size_of::<F>()
    }

    /// A draw from memory is the hot path of every caller, and callers move its future and
    /// frameworks box it on every call: the rare paths (a database read or write) are boxed,
    /// so the futures stay small. Before, `next` held its reservation inline (about 7 KB) and
    /// `get` its opening read (about 2.5 KB).
    #[test]
    fn the_futures_of_a_draw_from_memory_stay_small() {
        let next = future_size(BlockSequence::next);
        assert!(next <= 512, "BlockSequence::next's future is {next} bytes");
        let get = future_size2(Pool::get);
        assert!(get <= 256, "Pool::get's future is {get} bytes");
    }
}
