//! The hand-out state behind a block client's lock: the current block, the reserved next
//! one, the reservation in flight. Pure (no I/O, no await): each method is one step taken
//! under the lock.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::options::BlockOptions;
use super::window::{MAX_WINDOW, NO_PREFETCH_CHECK, Params};
use crate::arith::Run;
use crate::document::Stamp;
use crate::error::{Error, Result};

/// A reserved block and how much of it was handed out.
#[derive(Clone, Copy, Debug)]
pub(super) struct Block {
    pub(super) run: Run,
    /// How many numbers of `run` were handed out.
    pub(super) used: u64,
    /// The document version (and incarnation) written by the reservation.
    pub(super) version: Stamp,
    /// When the block became the current one.
    pub(super) started: Instant,
    /// Whether its lifetime was fed to the adaptive size already.
    pub(super) measured: bool,
    /// A reservation made while this was the current block failed: no more prefetch from
    /// it; the call that finds it empty reserves afresh.
    pub(super) prefetch_failed: bool,
}

impl Block {
    pub(super) fn new(run: Run, version: Stamp) -> Self {
        Block {
            run,
            used: 0,
            version,
            started: Instant::now(),
            measured: false,
            prefetch_failed: false,
        }
    }

    pub(super) fn left(&self) -> u64 {
        self.run.count() - self.used
    }
}

/// One reservation (a block being reserved), shared by the callers that wait on it.
#[derive(Debug, Default)]
pub(super) struct Reservation {
    /// Set (under the state lock, before `inflight` is cleared) when it finished: `Ok` when
    /// its block is in `next` (or was handed out already), else its error, which every
    /// caller that waited on it gets. Never set when it was dropped unfinished.
    pub(super) outcome: OnceLock<Result<()>>,
    /// A caller found the current block used up while this (a prefetch) was still in
    /// flight: it came too late, and the blocks now keep further ahead (counted once).
    pub(super) late: std::sync::atomic::AtomicBool,
}

impl Reservation {
    /// The error it failed with, for a caller that waited on it.
    pub(super) fn error(&self) -> Option<Error> {
        match self.outcome.get() {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }
}

/// Everything behind the lock.
#[derive(Debug)]
pub(super) struct State {
    /// The block numbers are handed out from.
    pub(super) current: Option<Block>,
    /// A reserved block waiting for `current` to run out.
    pub(super) next: Option<Block>,
    /// The reservation running, if any; when it finishes it fills `next` (or records its
    /// error in its outcome), clears this and wakes everyone waiting on `done`.
    pub(super) inflight: Option<Arc<Reservation>>,
    /// The size of the next reservation.
    pub(super) size: u64,
    /// Closed: nothing more is issued or reserved.
    pub(super) closed: bool,
    /// The lock-free window's generation (see `window`): only the lock holder changes it.
    pub(super) generation: u64,
    /// When the reservation in flight was started.
    pub(super) reservation_started: Option<Instant>,
    /// How long reservations take: the latest one's round trip, or (decaying) an earlier
    /// slower one's.
    pub(super) latency: Option<Duration>,
    /// The slowest reservation this client has seen, decaying far more slowly than
    /// `latency` (by a sixty-fourth per reservation): how long a reservation can take here —
    /// a pause of the server, callers that keep the cores busy — remembered long after the
    /// round trips are back to normal.
    pub(super) tail: Option<Duration>,
    /// Numbers per second at which the latest used-up block was handed out.
    pub(super) rate: Option<f64>,
    /// How much further ahead than [`KEEP_AHEAD`] and [`LEAD`] say the blocks are kept: 1 at
    /// first, doubled (up to [`MAX_AHEAD`]) each time a prefetch came too late, so a
    /// client whose round trips vary more than the measured latency shows stops waiting.
    pub(super) ahead: f64,
}

/// The most [`State::ahead`] grows to.
const MAX_AHEAD: f64 = 16.0;

/// How many reservation latencies the part of a block after its prefetch point should last
/// (see `keep_ahead_size`).
const KEEP_AHEAD: f64 = 16.0;

/// How many reservation latencies ahead of the end of a block its prefetch starts, at the
/// least (see [`State::prefetch_point`]).
const LEAD: f64 = 4.0;

/// How many times the slowest reservation seen ([`State::tail`]) a growing block's prefetch
/// starts before its end, and the part of a block after its prefetch point lasts, at the
/// least: a stall seen once (a pause of the server) is expected again.
const TAIL_MARGIN: f64 = 2.0;

/// The fewest numbers of a block handed out before its pace is taken as the caller's rate.
const MIN_PACE_SAMPLE: u64 = 64;

/// How many numbers of a block of `count` are handed out when its prefetch is due.
fn threshold(share: f64, count: u64) -> u64 {
    // `as` saturates; the share is in (0, 1].
    ((share * count as f64).ceil() as u64).clamp(1, count)
}

impl State {
    /// A fresh state: nothing reserved yet.
    pub(super) fn new(size: u64) -> Self {
        State {
            current: None,
            next: None,
            inflight: None,
            size,
            closed: false,
            generation: super::window::FIRST_GENERATION,
            reservation_started: None,
            latency: None,
            tail: None,
            rate: None,
            ahead: 1.0,
        }
    }

    /// Hands out the next number of the current block, switching to the reserved next block
    /// when the current one is used up. `None` when no reserved number is left.
    pub(super) fn take_number(&mut self, options: &BlockOptions, now: Instant) -> Option<i64> {
        loop {
            if let Some(b) = self.current.as_mut() {
                if b.used < b.run.count() {
                    let n = b.run.nth_number(b.used);
                    b.used += 1;
                    return Some(n);
                }
                if !b.measured {
                    b.measured = true;
                    let lasted = now.saturating_duration_since(b.started).as_secs_f64();
                    if lasted > 0.0 {
                        self.rate = Some(b.run.count() as f64 / lasted);
                    }
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
    pub(super) fn prefetch_due(
        &mut self,
        options: &BlockOptions,
    ) -> Option<(Arc<Reservation>, u64)> {
        let share = options.prefetch?;
        if self.inflight.is_some() || self.next.is_some() || self.closed {
            return None;
        }
        let b = self.current.as_ref()?;
        if b.prefetch_failed {
            return None;
        }
        if b.used < self.prefetch_point(options, share, b) {
            return None;
        }
        let size = self.keep_ahead_size(options, b, share, Instant::now());
        Some((self.begin(), size))
    }

    /// How long ahead the blocks plan for, in seconds: `round_trips` times the reservation
    /// latency (times [`State::ahead`]), and at least [`TAIL_MARGIN`] times the slowest
    /// reservation seen. `None` before a reservation was measured.
    fn lead_time(&self, round_trips: f64) -> Option<f64> {
        let latency = self.latency?.as_secs_f64();
        let tail = self.tail.map_or(0.0, |t| t.as_secs_f64());
        Some((round_trips * self.ahead * latency).max(TAIL_MARGIN * tail))
    }

    /// The size of a prefetch, so that the *next* block's part left after its own prefetch
    /// point lasts [`KEEP_AHEAD`] times the reservation latency (and at least
    /// [`TAIL_MARGIN`] times the slowest reservation seen) at the rate the current block is
    /// being used — or the previous one was, when the current one is too young to tell (a
    /// prefetch due at its first numbers), whichever is faster: at least `size`, at most
    /// `grow_to` (`size` when `grow_to` is `None`, or nothing was measured yet).
    fn keep_ahead_size(&self, options: &BlockOptions, b: &Block, share: f64, now: Instant) -> u64 {
        let (Some(cap), Some(lasting)) = (options.grow_to, self.lead_time(KEEP_AHEAD)) else {
            return self.size;
        };
        let elapsed = now.saturating_duration_since(b.started).as_secs_f64();
        let current = (elapsed > 0.0 && b.used >= MIN_PACE_SAMPLE).then(|| b.used as f64 / elapsed);
        let rate = match (current, self.rate) {
            (Some(c), Some(p)) => c.max(p),
            (Some(r), None) | (None, Some(r)) => r,
            (None, None) => return self.size,
        };
        let after_prefetch = (1.0 - share).max(0.1);
        // `as` saturates.
        let needed = (lasting * rate / after_prefetch).ceil() as u64;
        needed.clamp(self.size, cap.max(self.size))
    }

    /// How many numbers of `b` are handed out when its prefetch starts: at the share of the
    /// block, or — with growing blocks (`grow_to`), the default — earlier when the rest would
    /// not last [`LEAD`] times the reservation latency (and at least [`TAIL_MARGIN`] times the
    /// slowest reservation seen) at the rate the previous block was used (so a fast caller
    /// does not wait at the block boundary while the blocks are still growing, or after a slow
    /// round trip). Fixed-size blocks keep exactly the share.
    fn prefetch_point(&self, options: &BlockOptions, share: f64, b: &Block) -> u64 {
        let at_share = threshold(share, b.run.count());
        let (Some(_), Some(ahead), Some(rate)) = (options.grow_to, self.lead_time(LEAD), self.rate)
        else {
            return at_share;
        };
        // `as` saturates.
        let lead = (ahead * rate).ceil() as u64;
        at_share.min(b.run.count().saturating_sub(lead))
    }

    /// A caller found no number while `r` is in flight. When a block was in use (so `r` is a
    /// prefetch that has not arrived in time, not the first reservation), the blocks keep
    /// further ahead from now on: [`State::ahead`] doubles, once per late reservation.
    pub(super) fn waiting_on(&mut self, r: &Reservation) {
        if self.current.is_some() && !r.late.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.ahead = (self.ahead * 2.0).min(MAX_AHEAD);
            tracing::debug!(
                in_flight = ?self.reservation_started.map(|t| t.elapsed()),
                latency = ?self.latency,
                slowest = ?self.tail,
                rate = ?self.rate,
                ahead = self.ahead,
                "a prefetch came too late: the blocks keep further ahead"
            );
        }
    }

    /// Marks a new reservation in flight and returns it.
    pub(super) fn begin(&mut self) -> Arc<Reservation> {
        debug_assert!(self.inflight.is_none(), "one reservation at a time");
        let r = Arc::new(Reservation::default());
        self.inflight = Some(Arc::clone(&r));
        self.reservation_started = Some(Instant::now());
        r
    }

    /// Records how long the reservation that just finished took.
    pub(super) fn measured(&mut self, now: Instant) {
        if let Some(started) = self.reservation_started.take() {
            let took = now.saturating_duration_since(started);
            // A slow round trip is remembered for a while (it decays by an eighth per
            // reservation): a single fast one must not shrink the blocks back at once.
            self.latency = Some(self.latency.map_or(took, |l| took.max(l * 7 / 8)));
            self.tail = Some(self.tail.map_or(took, |t| took.max(t * 63 / 64)));
        }
    }

    /// What the lock-free window should cover once the lock is released: the rest of the
    /// current block (at most [`MAX_WINDOW`] of it), with the claim that reaches the prefetch
    /// point marked. `None` when closed or nothing is left.
    pub(super) fn window(&self, options: &BlockOptions) -> Option<Params> {
        if self.closed {
            return None;
        }
        let b = self.current.as_ref()?;
        let left = b.left();
        if left == 0 {
            return None;
        }
        let prefetch_at = match options.prefetch {
            Some(share) if self.inflight.is_none() && self.next.is_none() && !b.prefetch_failed => {
                // The claim after which `used` reaches the prefetch point.
                self.prefetch_point(options, share, b)
                    .saturating_sub(b.used)
                    .saturating_sub(1)
            }
            _ => NO_PREFETCH_CHECK,
        };
        Some(Params {
            first: b.run.nth_number(b.used),
            step: b.run.step(),
            count: left.min(MAX_WINDOW),
            prefetch_at,
        })
    }

    /// Clears `inflight` if it is `r`.
    pub(super) fn end(&mut self, r: &Arc<Reservation>) {
        if self.inflight.as_ref().is_some_and(|i| Arc::ptr_eq(i, r)) {
            self.inflight = None;
        }
    }

    pub(super) fn held(&self) -> u64 {
        self.current.map_or(0, |b| b.left()) + self.next.map_or(0, |b| b.left())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::AdaptiveBlocks;

    fn stamp(version: i64) -> Stamp {
        Stamp {
            version,
            incarnation: None,
        }
    }

    #[test]
    fn blocks_hand_out_in_order_and_prefetch_at_the_share() {
        let options = BlockOptions::default()
            .with_size(4)
            .with_prefetch(Some(0.5));
        let mut st = State::new(4);
        st.next = Some(Block::new(Run::new(1, 4, 1), stamp(1)));
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
        st.next = Some(Block::new(Run::new(9, 2, 1), stamp(3)));
        assert_eq!(st.held(), 2);
        assert_eq!(st.take_number(&options, now), Some(9));
        assert_eq!(st.held(), 1);
    }

    /// A used-up block's pace is measured once, when it runs out: the numbers it held over
    /// the time it lasted from when it came into use (not from when it was reserved); a block
    /// used up at the instant it came into use says nothing (no rate, not an infinite one);
    /// an adaptive size adapts once per block. (Found by cargo-mutants: a rate not measured,
    /// or measured as numbers times seconds, went unnoticed.)
    #[test]
    fn a_used_up_blocks_pace_is_measured_once_from_when_it_came_into_use() {
        let adaptive = AdaptiveBlocks::default()
            .with_min_size(4)
            .with_max_size(64)
            .with_target_interval(Duration::from_secs(10));
        let options = BlockOptions::default()
            .with_size(8)
            .with_adaptive(Some(adaptive));
        let mut st = State::new(8);
        // Reserved long before it came into use: the time before does not count.
        let mut b = Block::new(Run::new(1, 4, 1), stamp(1));
        let t0 = Instant::now() + Duration::from_secs(60);
        b.started = t0 - Duration::from_secs(50);
        st.next = Some(b);
        for n in 1..=4 {
            assert_eq!(st.take_number(&options, t0), Some(n));
        }
        assert_eq!(st.rate, None, "not used up yet");
        // Used up 2 s after it came into use: 4 numbers in 2 s. Faster than the 10 s
        // target: the next blocks are twice the size.
        assert_eq!(st.take_number(&options, t0 + Duration::from_secs(2)), None);
        assert_eq!(st.rate, Some(2.0));
        assert_eq!(st.size, 16);
        // Asked again, the same used-up block is not measured again.
        assert_eq!(st.take_number(&options, t0 + Duration::from_secs(6)), None);
        assert_eq!((st.rate, st.size), (Some(2.0), 16));
        // A block used up at the instant it came into use: no rate from it.
        let mut st = State::new(8);
        st.next = Some(Block::new(Run::new(1, 2, 1), stamp(1)));
        for n in [Some(1), Some(2), None] {
            assert_eq!(st.take_number(&options, t0), n);
        }
        assert_eq!(st.rate, None);
    }

    /// What is held is what is left of the current and the next block; a failed
    /// reservation hands its error to every caller that waited on it, a good one none.
    #[test]
    fn held_numbers_and_a_reservations_error() {
        let mut st = State::new(8);
        assert_eq!(st.held(), 0);
        st.next = Some(Block::new(Run::new(10, 5, 2), stamp(1)));
        assert_eq!(st.held(), 5);
        assert_eq!(
            st.take_number(&BlockOptions::default(), Instant::now()),
            Some(10)
        );
        st.next = Some(Block::new(Run::new(20, 3, 1), stamp(2)));
        assert_eq!(st.held(), 4 + 3);
        let failed = Reservation::default();
        assert!(failed.error().is_none(), "unfinished");
        let e = Error::Closed {
            name: "orders".to_owned(),
        };
        failed.outcome.set(Err(e)).unwrap();
        assert!(matches!(failed.error(), Some(Error::Closed { name }) if name == "orders"));
        let good = Reservation::default();
        good.outcome.set(Ok(())).unwrap();
        assert!(good.error().is_none());
    }

    /// One reservation at a time: no prefetch while one is in flight, while the next block
    /// is reserved already, or once the blocks are closed.
    #[test]
    fn no_prefetch_while_one_is_in_flight_or_reserved_or_once_closed() {
        let options = BlockOptions::default()
            .with_size(4)
            .with_prefetch(Some(0.25));
        let fresh = || {
            let mut st = State::new(4);
            st.next = Some(Block::new(Run::new(1, 4, 1), stamp(1)));
            assert_eq!(st.take_number(&options, Instant::now()), Some(1));
            st
        };
        assert!(fresh().prefetch_due(&options).is_some(), "due at a quarter");
        let mut st = fresh();
        st.begin();
        assert!(st.prefetch_due(&options).is_none(), "in flight");
        let mut st = fresh();
        st.next = Some(Block::new(Run::new(5, 4, 1), stamp(2)));
        assert!(st.prefetch_due(&options).is_none(), "reserved");
        let mut st = fresh();
        st.closed = true;
        assert!(st.prefetch_due(&options).is_none(), "closed");
    }

    /// The lock-free window covers the rest of the current block (at most `MAX_WINDOW` of
    /// it) and marks the claim that reaches the prefetch point only when a prefetch may start
    /// — not while one is in flight, the next block is held or the last one failed (found by
    /// cargo-mutants: the window, its mark and each of its conditions were never checked).
    #[test]
    fn the_window_covers_the_rest_of_the_block_and_marks_the_prefetch_point_only_when_due() {
        let options = BlockOptions::default()
            .with_size(8)
            .with_prefetch(Some(0.25))
            .with_grow_to(None);
        // Numbers 10, 13, …, 31; one handed out; the prefetch due when two are (a quarter):
        // the window's first claim reaches it.
        let fresh = || {
            let mut st = State::new(8);
            let mut b = Block::new(Run::new(10, 8, 3), stamp(1));
            b.used = 1;
            st.current = Some(b);
            st
        };
        let due = Params {
            first: 13,
            step: 3,
            count: 7,
            prefetch_at: 0,
        };
        assert_eq!(fresh().window(&options), Some(due));
        let unmarked = Params {
            prefetch_at: NO_PREFETCH_CHECK,
            ..due
        };
        let mut st = fresh();
        let _inflight = st.begin();
        assert_eq!(st.window(&options), Some(unmarked), "in flight");
        let mut st = fresh();
        st.next = Some(Block::new(Run::new(40, 8, 3), stamp(2)));
        assert_eq!(st.window(&options), Some(unmarked), "held");
        let mut st = fresh();
        if let Some(b) = st.current.as_mut() {
            b.prefetch_failed = true;
        }
        assert_eq!(st.window(&options), Some(unmarked), "failed");
        let fixed = options.with_prefetch(None);
        assert_eq!(fresh().window(&fixed), Some(unmarked), "no prefetch");
        // A huge block: the window covers MAX_WINDOW of it.
        let mut st = State::new(8);
        st.current = Some(Block::new(Run::new(1, MAX_WINDOW * 4, 1), stamp(1)));
        let w = st.window(&options).expect("a window");
        assert_eq!((w.first, w.count), (1, MAX_WINDOW));
        // None once closed, used up, or before the first block.
        let mut st = fresh();
        st.closed = true;
        assert_eq!(st.window(&options), None, "closed");
        let mut st = fresh();
        if let Some(b) = st.current.as_mut() {
            b.used = 8;
        }
        assert_eq!(st.window(&options), None, "used up");
        assert_eq!(State::new(8).window(&options), None, "nothing reserved");
    }

    #[test]
    fn a_fast_caller_prefetches_early_enough_to_cover_the_round_trip() {
        let options = BlockOptions::default()
            .with_size(1000)
            .with_prefetch(Some(0.5));
        let mut st = State::new(1000);
        let b = Block::new(Run::new(1, 1000, 1), stamp(1));
        // Nothing measured: at the share.
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 500);
        // 10 ms round trips at 20 000 numbers/s: the last 4 × 10 ms (800 numbers) must be
        // ahead.
        st.latency = Some(Duration::from_millis(10));
        st.rate = Some(20_000.0);
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 200);
        // 200 µs round trips at 40 000 numbers/s: 4 round trips are 32 numbers: the share
        // is earlier.
        st.latency = Some(Duration::from_micros(200));
        st.rate = Some(40_000.0);
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 500);
        // 1 M numbers/s: 4 round trips are 800 numbers.
        st.rate = Some(1e6);
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 200);
        // A reservation once took 10 ms (a pause of the server): twice that, 20 ms, are kept
        // ahead, more than the block: the next one is reserved as soon as this one is in use.
        st.tail = Some(Duration::from_millis(10));
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 0);
        st.tail = None;
        // A slow caller keeps the share.
        st.rate = Some(100.0);
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 500);
        // Faster than one block per lead: at once.
        st.rate = Some(1e9);
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 0);
        st.next = Some(b);
        assert_eq!(st.take_number(&options, Instant::now()), Some(1));
        assert!(
            st.prefetch_due(&options).is_some(),
            "due at the first number"
        );
    }

    /// The lead comes from what was measured: the round trips of the reservations, and the
    /// slowest of them, remembered long after (no fixed time). A block is sized so that its
    /// part after the prefetch point lasts 16 reservation latencies at the caller's rate.
    #[test]
    fn the_lead_and_the_size_follow_the_measured_reservations() {
        let options = BlockOptions::default()
            .with_size(1000)
            .with_prefetch(Some(0.5));
        let mut st = State::new(1000);
        let now = Instant::now();
        let b = Block::new(Run::new(1, 1000, 1), stamp(1));
        // Nothing measured: the size and the share.
        assert_eq!(st.keep_ahead_size(&options, &b, 0.5, now), 1000);
        // Round trips of 2 ms (a network): 16 of them at 1 M numbers/s after the prefetch
        // point of a block half used: 64 000 numbers.
        for _ in 0..3 {
            st.reservation_started = Some(now);
            st.measured(now + Duration::from_millis(2));
        }
        assert_eq!(st.latency, Some(Duration::from_millis(2)));
        assert_eq!(st.tail, Some(Duration::from_millis(2)));
        st.rate = Some(1e6);
        assert_eq!(st.keep_ahead_size(&options, &b, 0.5, now), 64_000);
        // The current block goes faster (1000 numbers in 0.5 ms: 2 M/s) than the last one
        // did: its own pace sizes the next block. With fewer than MIN_PACE_SAMPLE numbers
        // used, too few to tell, the last block's pace does.
        let mut fast = Block::new(Run::new(1, 1000, 1), stamp(1));
        fast.used = 1000;
        let later = fast.started + Duration::from_micros(500);
        assert_eq!(st.keep_ahead_size(&options, &fast, 0.5, later), 128_000);
        // No time measured since it started (a clock that did not move): no pace of its own.
        assert_eq!(
            st.keep_ahead_size(&options, &fast, 0.5, fast.started),
            64_000
        );
        fast.used = MIN_PACE_SAMPLE - 1;
        assert_eq!(st.keep_ahead_size(&options, &fast, 0.5, later), 64_000);
        // 4 round trips at 1 M/s: 8 000 numbers, more than the block: at once.
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 0);
        st.rate = Some(100_000.0);
        // 800 numbers before the end of a block of 1000.
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 200);
        // One reservation stalls 30 ms; the next ones are back to 2 ms. The latency forgets
        // the stall within a few dozen reservations, the tail remembers it far longer: the
        // lead stays twice the stall.
        st.reservation_started = Some(now);
        st.measured(now + Duration::from_millis(30));
        // One fast reservation after it: the stall decays by an eighth, not at once.
        st.reservation_started = Some(now);
        st.measured(now + Duration::from_millis(2));
        assert_eq!(st.latency, Some(Duration::from_micros(26_250)));
        for _ in 0..39 {
            st.reservation_started = Some(now);
            st.measured(now + Duration::from_millis(2));
        }
        assert_eq!(st.latency, Some(Duration::from_millis(2)));
        let tail = st.tail.expect("measured");
        assert!(tail > Duration::from_millis(15), "{tail:?}");
        let lead = st.lead_time(LEAD).expect("measured");
        assert!((lead - 2.0 * tail.as_secs_f64()).abs() < 1e-9, "{lead}");
        st.rate = Some(20_000.0);
        let before_end = 1000 - st.prefetch_point(&options, 0.5, &b);
        assert_eq!(before_end, (lead * 20_000.0).ceil() as u64);
        assert!(before_end > 600, "{before_end}");
    }

    #[test]
    fn a_late_prefetch_makes_the_blocks_keep_further_ahead_once_per_reservation() {
        let options = BlockOptions::default()
            .with_size(1000)
            .with_prefetch(Some(0.5));
        let mut st = State::new(1000);
        // 4 round trips of 10 ms at 20 000 numbers/s: 800 numbers ahead.
        st.latency = Some(Duration::from_millis(10));
        st.rate = Some(20_000.0);
        // The first reservation: nobody is late yet.
        let first = st.begin();
        st.waiting_on(&first);
        assert_eq!(st.ahead, 1.0);
        st.end(&first);
        let b = Block::new(Run::new(1, 1000, 1), stamp(1));
        st.next = Some(b);
        assert_eq!(st.take_number(&options, Instant::now()), Some(1));
        assert_eq!(st.prefetch_point(&options, 0.5, &b), 200);
        // A prefetch that has not come when the block is used up: twice as far ahead.
        let late = st.begin();
        st.waiting_on(&late);
        st.waiting_on(&late);
        assert_eq!(st.ahead, 2.0, "counted once per reservation");
        assert_eq!(
            st.prefetch_point(&options, 0.5, &b),
            0,
            "4 × 2 × 10 ms × 20 000/s ≥ 1000 − 200"
        );
        st.end(&late);
        for _ in 0..10 {
            let r = st.begin();
            st.waiting_on(&r);
            st.end(&r);
        }
        assert_eq!(st.ahead, MAX_AHEAD);
    }
}
