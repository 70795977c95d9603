//! Counters a caller can read: what a sequence handle did, not a logging side effect.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The mode the compare-and-set used most recently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CasModeUsed {
    /// No compare-and-set has run yet.
    #[default]
    None,
    /// Wrote from the remembered state.
    Optimistic,
    /// Read, then wrote.
    Pessimistic,
}

/// A snapshot of a sequence handle's counters (since it was opened).
///
/// # Example
///
/// ```no_run
/// # async fn f(seq: dispenser::Sequence) -> dispenser::Result<()> {
/// seq.next().await?;
/// let s = seq.stats();
/// println!("{} issued in {} round trips, {} lost races", s.issued, s.round_trips, s.conflicts);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Numbers handed out.
    pub issued: u64,
    /// Writes sent (successful or not).
    pub writes: u64,
    /// Compare-and-set writes that lost the race (matched no document), the pinned writes
    /// of the conditional increment strategy included.
    pub conflicts: u64,
    /// Attempts made after a lost race.
    pub retries: u64,
    /// Database round trips (reads and writes).
    pub round_trips: u64,
    /// Conditional increments that fell back to the compare-and-set (wrap or bound).
    pub fallbacks: u64,
    /// Compare-and-set writes made from the remembered state (with the conditional
    /// increment strategy: its pinned writes, tried while the handle writes alone).
    pub optimistic_writes: u64,
    /// Compare-and-set writes made after a fresh read.
    pub pessimistic_writes: u64,
    /// Blocks reserved (block allocation only).
    pub block_refills: u64,
    /// Calls that had to wait for the database because no reserved number was ready
    /// (block allocation only).
    pub waits: u64,
    /// Draws sent on behalf of callers (coalesced draws: one per batch of queued calls).
    pub batches: u64,
    /// Calls those draws served; `batched_calls / batches` is the mean batch size.
    pub batched_calls: u64,
    /// Calls served by a write shared with at least one other call.
    pub coalesced_calls: u64,
    /// The most calls one write served.
    pub max_batch: u64,
    /// The mode of the latest compare-and-set.
    pub cas_mode: CasModeUsed,
}

impl std::ops::AddAssign for Stats {
    /// Adds another handle's counters (for totals over stripes, services, processes); the
    /// mode is the other's when it ran one.
    fn add_assign(&mut self, s: Stats) {
        self.issued += s.issued;
        self.writes += s.writes;
        self.conflicts += s.conflicts;
        self.retries += s.retries;
        self.round_trips += s.round_trips;
        self.fallbacks += s.fallbacks;
        self.optimistic_writes += s.optimistic_writes;
        self.pessimistic_writes += s.pessimistic_writes;
        self.block_refills += s.block_refills;
        self.waits += s.waits;
        self.batches += s.batches;
        self.batched_calls += s.batched_calls;
        self.coalesced_calls += s.coalesced_calls;
        self.max_batch = self.max_batch.max(s.max_batch);
        if s.cas_mode != CasModeUsed::None {
            self.cas_mode = s.cas_mode;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_add_up() {
        let mut a = Stats {
            issued: 1,
            round_trips: 2,
            ..Stats::default()
        };
        a += Stats {
            issued: 10,
            waits: 3,
            cas_mode: CasModeUsed::Pessimistic,
            ..Stats::default()
        };
        assert_eq!((a.issued, a.round_trips, a.waits), (11, 2, 3));
        assert_eq!(a.cas_mode, CasModeUsed::Pessimistic);
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub issued: AtomicU64,
    pub writes: AtomicU64,
    pub conflicts: AtomicU64,
    pub retries: AtomicU64,
    pub round_trips: AtomicU64,
    pub fallbacks: AtomicU64,
    pub optimistic_writes: AtomicU64,
    pub pessimistic_writes: AtomicU64,
    pub block_refills: AtomicU64,
    pub waits: AtomicU64,
    pub batches: AtomicU64,
    pub batched_calls: AtomicU64,
    pub coalesced_calls: AtomicU64,
    pub max_batch: AtomicU64,
    /// 0 none, 1 optimistic, 2 pessimistic.
    pub last_mode: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Relaxed);
}

impl Counters {
    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            issued: self.issued.load(Relaxed),
            writes: self.writes.load(Relaxed),
            conflicts: self.conflicts.load(Relaxed),
            retries: self.retries.load(Relaxed),
            round_trips: self.round_trips.load(Relaxed),
            fallbacks: self.fallbacks.load(Relaxed),
            optimistic_writes: self.optimistic_writes.load(Relaxed),
            pessimistic_writes: self.pessimistic_writes.load(Relaxed),
            block_refills: self.block_refills.load(Relaxed),
            waits: self.waits.load(Relaxed),
            batches: self.batches.load(Relaxed),
            batched_calls: self.batched_calls.load(Relaxed),
            coalesced_calls: self.coalesced_calls.load(Relaxed),
            max_batch: self.max_batch.load(Relaxed),
            cas_mode: match self.last_mode.load(Relaxed) {
                1 => CasModeUsed::Optimistic,
                2 => CasModeUsed::Pessimistic,
                _ => CasModeUsed::None,
            },
        }
    }
}
