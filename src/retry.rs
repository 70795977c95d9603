//! The retry layer: how long to wait between compare-and-set attempts, and when to give up.
//!
//! The decision of *what* is retried is deliberately small: only a lost compare-and-set race
//! (the write matched no document because another writer moved the version first) is retried.
//! Nothing else is. A driver error or a timeout on a write leaves its outcome unknown, so it is
//! returned to the caller and the numbers that write may have reserved become a gap; retrying
//! it as a fresh write could only ever skip numbers, and returning the error keeps the
//! accounting honest. Delays come from [`backon`]'s exponential backoff (with jitter).

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
/// | `jitter` | true (each delay is stretched by a random 0–100 %) |
/// | `max_attempts` | 100 writes |
/// | `max_elapsed` | 10 s |
///
/// When either budget runs out the call fails with [`Error::Contention`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser::Backoff;
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
    /// Each delay is the previous one times this factor (≥ 1). Defaults to 2.0.
    pub multiplier: f32,
    /// The longest delay. Defaults to 100 ms.
    pub max_delay: Duration,
    /// Whether to add random jitter (0–100 % of the delay). Defaults to true.
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

    /// Sets the growth factor. Defaults to 2.0.
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

    /// Turns jitter on or off. Defaults to on.
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

    fn delays(&self) -> ExponentialBackoff {
        let b = ExponentialBuilder::new()
            .with_min_delay(self.initial_delay)
            .with_max_delay(self.max_delay)
            .with_factor(self.multiplier)
            .without_max_times();
        if self.jitter {
            b.with_jitter().build()
        } else {
            b.build()
        }
    }
}

/// One call's retry budget: counts attempts, hands out the next delay, and says when to
/// stop.
pub(crate) struct RetryBudget {
    delays: ExponentialBackoff,
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
    fn jitter_stays_within_double() {
        let policy = Backoff::default().with_max_delay(Duration::from_millis(4));
        for d in policy.delays().take(50) {
            assert!(
                d >= Duration::from_millis(1) && d <= Duration::from_millis(8),
                "{d:?}"
            );
        }
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
