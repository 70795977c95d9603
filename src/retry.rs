//! The retry layer: how long to wait between compare-and-set attempts, and when to give up.
//!
//! The decision of *what* is retried is deliberately small: only a lost compare-and-set race
//! (the write matched no document because another writer moved the version first) is retried.
//! Nothing else is. A driver error or a timeout on a write leaves its outcome unknown, so it is
//! returned to the caller and the numbers that write may have reserved become a gap; retrying
//! it as a fresh write could only ever skip numbers, and returning the error keeps the
//! accounting honest.
//!
//! Delays follow "decorrelated jitter" (AWS Architecture Blog, "Exponential Backoff And
//! Jitter"): `sleep = min(cap, random_between(base, previous_sleep * 3))`. Unlike a schedule
//! that only grows, a call that has lost many races may still draw a short delay, so under
//! contention between processes the losers are not pushed ever further back while fresh
//! callers win (no starvation), and the writers' retries spread out instead of colliding in
//! step. Without jitter, [`backon`]'s plain exponential schedule is used.

use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

use crate::error::{Error, Result};

/// Backoff between compare-and-set attempts after a lost race.
///
/// # Default
///
/// | field | default |
/// |---|---|
/// | `initial_delay` | 1 ms |
/// | `multiplier` | 2.0 |
/// | `max_delay` | 100 ms |
/// | `jitter` | true (decorrelated jitter: each delay random between `initial_delay` and 3 × the previous one, capped at `max_delay`) |
/// | `max_attempts` | 100 writes |
/// | `max_elapsed` | 10 s |
///
/// When either budget runs out the call fails with [`Error::Contention`]. (A queue's operations
/// use the delays only: they retry until [`Options::operation_timeout`](crate::Options::operation_timeout),
/// whatever the attempts, so that a crowd's takes wait their turn.) With the defaults
/// the delays of a whole budget (99 × at most 100 ms) fit in `max_elapsed`, so the attempt
/// budget, not the clock, ends a call that keeps losing.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser::sequence::Backoff;
///
/// let patient = Backoff::default()
///     .with_max_attempts(1000)
///     .with_max_elapsed(Duration::from_secs(60));
/// patient.validate()?;
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Backoff {
    /// The first delay. Defaults to 1 ms.
    pub initial_delay: Duration,
    /// Without jitter, each delay is the previous one times this factor (≥ 1). With jitter
    /// (decorrelated), each delay is random up to 3 × the previous one and this factor is
    /// not used. Defaults to 2.0.
    pub multiplier: f32,
    /// The longest delay. Defaults to 100 ms.
    pub max_delay: Duration,
    /// Whether delays are random (decorrelated jitter: between `initial_delay` and 3 × the
    /// previous delay, capped at `max_delay`) or a plain exponential schedule. Defaults to
    /// true.
    pub jitter: bool,
    /// The most writes one call may try (≥ 1). Defaults to 100.
    pub max_attempts: u32,
    /// The longest one call may keep trying. Defaults to 10 s.
    pub max_elapsed: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial_delay: Duration::from_millis(1),
            multiplier: 2.0,
            max_delay: Duration::from_millis(100),
            jitter: true,
            max_attempts: 100,
            max_elapsed: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// Sets the first delay. Defaults to 1 ms.
    #[must_use]
    pub const fn with_initial_delay(mut self, d: Duration) -> Self {
        self.initial_delay = d;
        self
    }

    /// Sets the growth factor of the schedule without jitter. Defaults to 2.0.
    #[must_use]
    pub const fn with_multiplier(mut self, m: f32) -> Self {
        self.multiplier = m;
        self
    }

    /// Sets the longest delay. Defaults to 100 ms.
    #[must_use]
    pub const fn with_max_delay(mut self, d: Duration) -> Self {
        self.max_delay = d;
        self
    }

    /// Turns jitter on (decorrelated jitter) or off (a plain exponential schedule).
    ///
    /// # Default
    ///
    /// On.
    #[must_use]
    pub const fn with_jitter(mut self, jitter: bool) -> Self {
        self.jitter = jitter;
        self
    }

    /// Sets the most writes one call may try. Defaults to 100.
    #[must_use]
    pub const fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Sets the longest one call may keep trying. Defaults to 10 s.
    #[must_use]
    pub const fn with_max_elapsed(mut self, d: Duration) -> Self {
        self.max_elapsed = d;
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the multiplier is below 1 or not finite,
    /// `max_attempts` is 0, or `initial_delay > max_delay`.
    pub fn validate(&self) -> Result<()> {
        if !self.multiplier.is_finite() || self.multiplier < 1.0 {
            return Err(Error::invalid_argument(
                "backoff multiplier",
                format!("{} must be a finite number ≥ 1", self.multiplier),
            ));
        }
        if self.max_attempts == 0 {
            return Err(Error::invalid_argument(
                "backoff max_attempts",
                "must be at least 1",
            ));
        }
        if self.initial_delay > self.max_delay {
            return Err(Error::invalid_argument(
                "backoff initial_delay",
                format!(
                    "{:?} is longer than max_delay {:?}",
                    self.initial_delay, self.max_delay
                ),
            ));
        }
        Ok(())
    }

    fn delays(&self) -> Delays {
        // A different seed per call: `RandomState` keys differ per instance.
        let seed = RandomState::new().hash_one(Instant::now());
        self.delays_seeded(seed)
    }

    fn delays_seeded(&self, seed: u64) -> Delays {
        if self.jitter {
            return Delays::Decorrelated {
                base: self.initial_delay,
                cap: self.max_delay,
                previous: self.initial_delay,
                // Spread the seed (splitmix64); xorshift64 needs a non-zero state.
                rng: splitmix64(seed) | 1,
            };
        }
        Delays::Exponential(
            ExponentialBuilder::new()
                .with_min_delay(self.initial_delay)
                .with_max_delay(self.max_delay)
                .with_factor(self.multiplier)
                .without_max_times()
                .build(),
        )
    }
}

/// The delays of one call, endless (the budget decides when to stop).
enum Delays {
    /// Without jitter: `initial_delay × multiplierⁿ`, capped.
    Exponential(ExponentialBackoff),
    /// Decorrelated jitter: `min(cap, random_between(base, previous × 3))`.
    Decorrelated {
        base: Duration,
        cap: Duration,
        previous: Duration,
        rng: u64,
    },
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        match self {
            Delays::Exponential(e) => e.next(),
            Delays::Decorrelated {
                base,
                cap,
                previous,
                rng,
            } => {
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                let low = nanos(*base);
                let high = nanos(*previous).saturating_mul(3).max(low);
                let span = high - low;
                let pick = low
                    + if span == u64::MAX {
                        *rng
                    } else {
                        *rng % (span + 1)
                    };
                let delay = Duration::from_nanos(pick).min(*cap);
                *previous = delay;
                Some(delay)
            }
        }
    }
}

fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One call's retry budget: counts attempts, hands out the next delay, and says when to
/// stop.
pub(crate) struct RetryBudget {
    delays: Delays,
    max_attempts: u32,
    max_elapsed: Duration,
    started: Instant,
    attempts: u32,
}

impl RetryBudget {
    pub(crate) fn new(policy: &Backoff) -> Self {
        RetryBudget {
            delays: policy.delays(),
            max_attempts: policy.max_attempts,
            max_elapsed: policy.max_elapsed,
            started: Instant::now(),
            attempts: 0,
        }
    }

    /// A budget of time only, for the operations that must not give up after a number of lost
    /// races (a queue's take or call waits its turn): any number of attempts, until `limit`
    /// after `started` (when the caller began, which may be before this budget was made).
    pub(crate) fn until(policy: &Backoff, started: Instant, limit: Duration) -> Self {
        RetryBudget {
            delays: policy.delays(),
            max_attempts: u32::MAX,
            max_elapsed: limit,
            started,
            attempts: 0,
        }
    }

    /// Records one write attempt.
    pub(crate) fn attempted(&mut self) {
        self.attempts += 1;
    }

    /// After a lost race: the delay before the next attempt, or the [`Error::Contention`] to
    /// return when the budget is spent.
    pub(crate) fn after_conflict(&mut self, name: &str) -> Result<Duration> {
        let elapsed = self.started.elapsed();
        let delay = self.delays.next().unwrap_or(Duration::ZERO);
        if self.attempts >= self.max_attempts || elapsed + delay > self.max_elapsed {
            return Err(Error::Contention {
                name: name.to_owned(),
                attempts: self.attempts,
                elapsed,
            });
        }
        Ok(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_settings_are_named() {
        assert!(Backoff::default().validate().is_ok());
        let e = Backoff::default()
            .with_multiplier(0.5)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("multiplier"));
        let e = Backoff::default()
            .with_max_attempts(0)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("max_attempts"));
        let e = Backoff::default()
            .with_initial_delay(Duration::from_secs(1))
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("initial_delay"));
    }

    #[test]
    fn delays_grow_and_stay_capped() {
        let policy = Backoff::default()
            .with_jitter(false)
            .with_max_delay(Duration::from_millis(8));
        let got: Vec<_> = policy.delays().take(6).map(|d| d.as_millis()).collect();
        assert_eq!(got, vec![1, 2, 4, 8, 8, 8]);
    }

    #[test]
    fn jitter_stays_between_the_first_delay_and_the_cap() {
        let policy = Backoff::default();
        for seed in 0..20 {
            let mut previous = policy.initial_delay;
            for d in policy.delays_seeded(seed).take(200) {
                assert!(d >= policy.initial_delay && d <= policy.max_delay, "{d:?}");
                assert!(d <= previous * 3, "{d:?} after {previous:?}");
                previous = d;
            }
        }
    }

    #[test]
    fn jittered_delays_vary_and_come_back_down() {
        let policy = Backoff::default();
        let delays: Vec<_> = policy.delays_seeded(42).take(100).collect();
        let mut distinct = delays.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() > 50, "{delays:?}");
        // Not a schedule that only grows: a call that has lost many races still draws
        // short delays now and then, so it is not starved by fresh callers.
        let reached_the_cap = delays.iter().position(|d| *d == policy.max_delay);
        let later_short = reached_the_cap.map(|i| {
            delays[i..]
                .iter()
                .filter(|d| **d < policy.max_delay / 2)
                .count()
        });
        assert!(later_short.is_some_and(|n| n >= 5), "{delays:?}");
        // Two calls do not back off in step.
        let other: Vec<_> = policy.delays_seeded(43).take(100).collect();
        assert_ne!(delays, other);
    }

    #[test]
    fn a_whole_budget_of_delays_fits_the_time_budget() {
        let policy = Backoff::default();
        for seed in 0..20 {
            let total: Duration = policy
                .delays_seeded(seed)
                .take(policy.max_attempts as usize - 1)
                .sum();
            assert!(total <= policy.max_elapsed, "{total:?}");
        }
        // The budget gives every one of the attempts its delay, then stops on attempts.
        let mut budget = RetryBudget::new(&policy);
        for _ in 1..policy.max_attempts {
            budget.attempted();
            assert!(budget.after_conflict("s").is_ok());
        }
        budget.attempted();
        assert!(matches!(
            budget.after_conflict("s"),
            Err(Error::Contention { attempts: 100, .. })
        ));
    }

    #[test]
    fn the_budget_counts_attempts() {
        let policy = Backoff::default().with_max_attempts(3);
        let mut budget = RetryBudget::new(&policy);
        for _ in 0..2 {
            budget.attempted();
            assert!(budget.after_conflict("s").is_ok());
        }
        budget.attempted();
        let err = budget.after_conflict("s").unwrap_err();
        assert!(
            matches!(err, Error::Contention { attempts: 3, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("3 attempt(s)"));
    }

    #[test]
    fn the_budget_counts_time() {
        let policy = Backoff::default().with_max_elapsed(Duration::ZERO);
        let mut budget = RetryBudget::new(&policy);
        budget.attempted();
        assert!(matches!(
            budget.after_conflict("s"),
            Err(Error::Contention { .. })
        ));
    }
}
