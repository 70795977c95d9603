//! The lock-free hand-out window: an atomic ticket over (a part of) the current block.
//!
//! The current block's numbers are handed out without the lock: a caller claims index `i` of
//! the window with a compare-and-set on one word that holds the window's *generation* and its
//! next index, and returns `first + i * step`. The lock is taken only at block switches, for
//! a prefetch, and by the other operations (close, held, stats...): taking it *retires* the
//! window (the generation becomes odd, so no claim succeeds any more, and the number of claims
//! made is folded into the block's `used`); releasing it *publishes* a new window over what is
//! left of the current block. So under the lock the state is exact, and outside it numbers
//! are claimed in one atomic step, which is also the step that returns the number (cancel
//! safety is kept: a claim is never abandoned).
//!
//! It is a seqlock whose readers commit with a compare-and-set: a reader loads the word
//! (acquire), reads the window's parameters (relaxed), issues an acquire fence and then
//! compare-and-sets the word from what it loaded to the next index. The writer (under the
//! lock) swaps the word to an odd generation, issues a release fence, and only then rewrites
//! the parameters, and finally stores the next even generation (release). If a reader saw
//! any parameter of a later window, the fences synchronize, the writer's swap happens before
//! the reader's compare-and-set, and that compare-and-set fails (the generation moved on);
//! if it succeeds, the parameters it read are those of the window it claimed from.
//! Generations have 40 bits: for the compare-and-set to succeed on a stale word, a reader
//! would have to sleep between its load and its compare-and-set through 2^39 lock sections.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicI64, AtomicU64, fence};

const INDEX_BITS: u32 = 24;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// The most numbers one window covers; a larger block is handed out in several windows.
pub(super) const MAX_WINDOW: u64 = INDEX_MASK;
/// `prefetch_at` when no claim needs to look at the prefetch.
pub(super) const NO_PREFETCH_CHECK: u64 = u64::MAX;

/// What a published window covers: `count` numbers from `first`, `step` apart; the claim of
/// index `prefetch_at` (if below `count`) takes the lock to see whether a prefetch is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Params {
    pub(super) first: i64,
    pub(super) step: i64,
    pub(super) count: u64,
    pub(super) prefetch_at: u64,
}

/// The window. Its generation is also kept under the lock (`State::generation`), where only
/// the lock holder changes it.
#[derive(Debug)]
pub(super) struct Window {
    /// `generation << INDEX_BITS | next index`; an odd generation is retired (no window).
    word: AtomicU64,
    first: AtomicI64,
    step: AtomicI64,
    count: AtomicU64,
    prefetch_at: AtomicU64,
}

/// The generation a new window starts from (odd: nothing published).
pub(super) const FIRST_GENERATION: u64 = 1;

impl Window {
    pub(super) fn new() -> Self {
        Window {
            word: AtomicU64::new(FIRST_GENERATION << INDEX_BITS),
            first: AtomicI64::new(0),
            step: AtomicI64::new(0),
            count: AtomicU64::new(0),
            prefetch_at: AtomicU64::new(NO_PREFETCH_CHECK),
        }
    }

    /// Claims the next number of the published window, without the lock: the number, and
    /// whether this claim should look at the prefetch. `None` when no window is published or
    /// it is used up (the caller takes the lock).
    #[inline]
    pub(super) fn claim(&self) -> Option<(i64, bool)> {
        loop {
            let w = self.word.load(Acquire);
            if (w >> INDEX_BITS) & 1 == 1 {
                return None;
            }
            let i = w & INDEX_MASK;
            let count = self.count.load(Relaxed);
            let first = self.first.load(Relaxed);
            let step = self.step.load(Relaxed);
            let prefetch_at = self.prefetch_at.load(Relaxed);
            fence(Acquire);
            if i >= count {
                // Used up (or the parameters are already a later window's: the lock sorts
                // it out either way).
                return None;
            }
            if self
                .word
                .compare_exchange_weak(w, w + 1, Relaxed, Relaxed)
                .is_ok()
            {
                // In range: `i < count` and the window lies inside a run whose numbers all
                // fit in an i64.
                let n = first.wrapping_add((i as i64).wrapping_mul(step));
                return Some((n, i == prefetch_at));
            }
            std::hint::spin_loop();
        }
    }

    /// Under the lock: stops the published window, if any, and returns how many numbers were
    /// claimed from it. `generation` is the lock-protected copy.
    pub(super) fn retire(&self, generation: &mut u64) -> u64 {
        if *generation & 1 == 1 {
            return 0;
        }
        *generation += 1;
        let old = self.word.swap(*generation << INDEX_BITS, AcqRel);
        // The parameters of the next window must not be seen before this swap.
        fence(Release);
        old & INDEX_MASK
    }

    /// Under the lock, after [`Window::retire`]: publishes a window with `params`
    /// (`count` at most [`MAX_WINDOW`], at least 1).
    pub(super) fn publish(&self, generation: &mut u64, params: Params) {
        debug_assert!(*generation & 1 == 1, "retire before publishing");
        debug_assert!(params.count > 0 && params.count <= MAX_WINDOW);
        self.first.store(params.first, Relaxed);
        self.step.store(params.step, Relaxed);
        self.count.store(params.count, Relaxed);
        self.prefetch_at.store(params.prefetch_at, Relaxed);
        *generation = (*generation + 1) & (u64::MAX >> INDEX_BITS);
        self.word.store(*generation << INDEX_BITS, Release);
    }

    /// With exclusive access (on drop): how many numbers were claimed from the published
    /// window, if any.
    pub(super) fn claimed(&mut self) -> u64 {
        let w = *self.word.get_mut();
        if (w >> INDEX_BITS) & 1 == 1 {
            0
        } else {
            w & INDEX_MASK
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(first: i64, step: i64, count: u64) -> Params {
        Params {
            first,
            step,
            count,
            prefetch_at: 1,
        }
    }

    #[test]
    fn claims_follow_the_window_and_stop_when_retired() {
        let w = Window::new();
        let mut generation = FIRST_GENERATION;
        assert_eq!(w.claim(), None, "nothing published");
        w.publish(&mut generation, params(10, -3, 3));
        assert_eq!(w.claim(), Some((10, false)));
        assert_eq!(w.claim(), Some((7, true)), "index 1 looks at the prefetch");
        assert_eq!(w.retire(&mut generation), 2);
        assert_eq!(w.claim(), None, "retired");
        assert_eq!(
            w.retire(&mut generation),
            0,
            "retiring twice claims nothing"
        );
        w.publish(&mut generation, params(4, -3, 1));
        assert_eq!(w.claim(), Some((4, false)));
        assert_eq!(w.claim(), None, "used up");
        assert_eq!(w.retire(&mut generation), 1);
    }

    /// Threads claim while another keeps retiring and republishing the rest of one run:
    /// every number of the run is claimed exactly once, each thread's in increasing order.
    #[test]
    fn concurrent_claims_and_switches_hand_out_each_number_once() {
        use std::sync::Mutex;
        let total: u64 = 200_000;
        let w = Window::new();
        // (generation, used so far) — what `State` keeps under the lock.
        let lock = Mutex::new((FIRST_GENERATION, 0u64));
        let republish = |st: &mut (u64, u64)| {
            let used = st.1;
            if used < total {
                let count = (total - used).min(97);
                w.publish(
                    &mut st.0,
                    params(i64::try_from(used).unwrap() * 2, 2, count),
                );
            }
        };
        republish(&mut lock.lock().unwrap());
        let lists: Vec<Vec<i64>> = std::thread::scope(|s| {
            let claimers: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        let mut got = Vec::new();
                        loop {
                            if let Some((n, _)) = w.claim() {
                                got.push(n);
                                continue;
                            }
                            let mut st = lock.lock().unwrap();
                            let claimed = w.retire(&mut st.0);
                            st.1 += claimed;
                            if st.1 == total {
                                return got;
                            }
                            republish(&mut st);
                        }
                    })
                })
                .collect();
            // A switcher that retires and republishes all the time.
            s.spawn(|| {
                loop {
                    let mut st = lock.lock().unwrap();
                    let claimed = w.retire(&mut st.0);
                    st.1 += claimed;
                    if st.1 == total {
                        return;
                    }
                    republish(&mut st);
                    drop(st);
                    std::thread::yield_now();
                }
            });
            claimers.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for l in &lists {
            assert!(
                l.windows(2).all(|p| p[0] < p[1]),
                "a thread's numbers decreased"
            );
        }
        let mut all = lists.concat();
        all.sort_unstable();
        let expected: Vec<i64> = (0..i64::try_from(total).unwrap()).map(|i| i * 2).collect();
        assert_eq!(all, expected, "every number exactly once");
    }
}
