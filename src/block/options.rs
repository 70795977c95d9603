//! How a block client reserves: block size, prefetch share, adaptive sizing.

use std::time::Duration;

use crate::error::{Error, Result};

/// The default block size.
///
/// # Example
///
/// ```
/// assert_eq!(dispenser::block::BlockOptions::default().size, dispenser::block::DEFAULT_BLOCK_SIZE);
/// ```
pub const DEFAULT_BLOCK_SIZE: u64 = 100;

/// The default prefetch share: the next block is reserved once half of the current one is
/// used.
///
/// # Example
///
/// ```
/// use dispenser::{block::{BlockOptions, DEFAULT_PREFETCH}};
/// assert_eq!(BlockOptions::default().prefetch, Some(DEFAULT_PREFETCH));
/// ```
pub const DEFAULT_PREFETCH: f64 = 0.5;

/// The default largest block a prefetch may reserve to keep ahead of fast callers (see
/// [`BlockOptions::grow_to`]).
///
/// # Example
///
/// ```
/// use dispenser::block::{BlockOptions, DEFAULT_GROW_TO};
/// assert_eq!(BlockOptions::default().grow_to, Some(DEFAULT_GROW_TO));
/// ```
pub const DEFAULT_GROW_TO: u64 = 1_000_000;

/// The default share of the numbers left that one block may hold (see
/// [`BlockOptions::range_share`]): 1 %.
///
/// # Example
///
/// ```
/// use dispenser::block::{BlockOptions, DEFAULT_RANGE_SHARE};
/// assert_eq!(BlockOptions::default().range_share, Some(DEFAULT_RANGE_SHARE));
/// ```
pub const DEFAULT_RANGE_SHARE: f64 = 0.01;

/// How a [`BlockSequence`](crate::block::BlockSequence) reserves numbers.
///
/// # Default
///
/// | field | default |
/// |---|---|
/// | `size` | [`DEFAULT_BLOCK_SIZE`] (100) |
/// | `prefetch` | `Some(`[`DEFAULT_PREFETCH`]`)` (0.5) |
/// | `adaptive` | `None` (fixed size) |
/// | `grow_to` | `Some(`[`DEFAULT_GROW_TO`]`)` (1 000 000) |
/// | `range_share` | `Some(`[`DEFAULT_RANGE_SHARE`]`)` (1 %) |
///
/// Half a block is a good trigger: the reservation has the time it takes to hand out the
/// other half to come back, while a client holds at most about 1.5 blocks on average (what a
/// crash loses).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser::{block::{AdaptiveBlocks, BlockOptions}};
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
    /// the next block in the background; with prefetch the first block, too, is reserved in
    /// the background as soon as the client is made. `None` reserves only when a block is
    /// empty (the caller that finds it empty waits). Defaults to `Some(0.5)`.
    pub prefetch: Option<f64>,
    /// Adapts the size to the consumption rate. Defaults to `None` (fixed size).
    pub adaptive: Option<AdaptiveBlocks>,
    /// Keeps the prefetch ahead of fast callers: a prefetched block is made large enough
    /// that, at the rate the current block is being used, the part of it left after its
    /// prefetch point lasts sixteen times the measured reservation latency — so callers do not wait
    /// at block boundaries — but never larger than this (and never smaller than `size`, or
    /// the adaptive size). Only with prefetch. `None`: blocks keep their size. Defaults to
    /// `Some(1_000_000)`; at most that many numbers (1.5 times, with the prefetched block)
    /// are what a crash of a very busy client loses.
    pub grow_to: Option<u64>,
    /// Bounds every block by what is left: a reservation takes at most this share, in
    /// `(0, 1]`, of the numbers left before the bound (of one whole cycle for a cyclic
    /// sequence), rounded down but at least one number — whatever `size`, the adaptive size
    /// or `grow_to` ask for. So a crash burns at most that share of what is left, and a burst
    /// of fast callers cannot exhaust a bounded sequence in one reservation; near the bound
    /// blocks shrink to single numbers. The limit is checked against the state the
    /// reservation is written on (in the write's filter), not a remembered one. `None`: no
    /// such bound. Defaults to `Some(0.01)`.
    pub range_share: Option<f64>,
}

impl Default for BlockOptions {
    fn default() -> Self {
        BlockOptions {
            size: DEFAULT_BLOCK_SIZE,
            prefetch: Some(DEFAULT_PREFETCH),
            adaptive: None,
            grow_to: Some(DEFAULT_GROW_TO),
            range_share: Some(DEFAULT_RANGE_SHARE),
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

    /// Sets the largest block a prefetch may reserve to keep ahead of fast callers (`None`:
    /// blocks keep their size). Defaults to `Some(1_000_000)`.
    #[must_use]
    pub const fn with_grow_to(mut self, grow_to: Option<u64>) -> Self {
        self.grow_to = grow_to;
        self
    }

    /// Sets the largest share of the numbers left that one block may hold (`None`: no such
    /// bound). Defaults to `Some(0.01)`.
    #[must_use]
    pub const fn with_range_share(mut self, range_share: Option<f64>) -> Self {
        self.range_share = range_share;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the setting: a size of 0, a `grow_to` of 0, a
    /// prefetch share or range share outside `(0, 1]` (or NaN), an adaptive `min_size` of 0,
    /// a `max_size` below `min_size`, or a zero `target_interval`.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::block::BlockOptions;
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
        if self.grow_to == Some(0) {
            return Err(Error::invalid_argument(
                "block grow_to",
                "0 numbers; use None to keep blocks at their size",
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
        if let Some(r) = self.range_share
            && !(r > 0.0 && r <= 1.0)
        {
            return Err(Error::invalid_argument(
                "block range_share",
                format!(
                    "{r} must be more than 0 and at most 1 (the share of the numbers left that \
                     one block may hold); use None for no such bound"
                ),
            ));
        }
        if let Some(a) = self.adaptive {
            a.validate()?;
        }
        Ok(())
    }

    /// The size of the first reservation.
    pub(super) fn initial_size(&self) -> u64 {
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
/// use dispenser::block::AdaptiveBlocks;
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
    /// use dispenser::block::AdaptiveBlocks;
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
    pub(super) fn adapt(&self, size: u64, elapsed: Duration) -> u64 {
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
            (BlockOptions::default().with_grow_to(Some(0)), "grow_to"),
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
                BlockOptions::default().with_range_share(Some(0.0)),
                "range_share",
            ),
            (
                BlockOptions::default().with_range_share(Some(1.01)),
                "range_share",
            ),
            (
                BlockOptions::default().with_range_share(Some(f64::NAN)),
                "range_share",
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
}
