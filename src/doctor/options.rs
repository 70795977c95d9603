//! How hard [`Dispenser::doctor`](crate::Dispenser::doctor) probes, validated before anything
//! is sent.

use std::time::Duration;

use crate::error::{Error, Result};

/// How [`Dispenser::doctor`](crate::Dispenser::doctor) probes the server.
///
/// # Default
///
/// | field | default |
/// |---|---|
/// | `tasks` | 8 (concurrent tasks of the probe; 2 – 64) |
/// | `increments` | 200 (conditional increments per task: 1 600 in all) |
/// | `swaps` | 100 (compare-and-set wins per task: 800 in all) |
/// | `time_limit` | 10 s (everything, the removal of the scratch collection included) |
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser::doctor::DoctorOptions;
///
/// let o = DoctorOptions::default()
///     .with_tasks(16)
///     .with_time_limit(Duration::from_secs(30));
/// o.validate()?;
/// assert_eq!(o.increments, 200);
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DoctorOptions {
    /// How many tasks write to the probe's documents at once (2 – 64). Defaults to 8.
    pub tasks: u32,
    /// How many conditional increments each task sends (1 – 100 000). Defaults to 200.
    pub increments: u32,
    /// How many compare-and-set wins each task collects (1 – 100 000). Defaults to 100.
    pub swaps: u32,
    /// The longest the whole examination may take, removing its scratch collection
    /// included (more than 0, at most an hour). Defaults to 10 s.
    pub time_limit: Duration,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        DoctorOptions {
            tasks: 8,
            increments: 200,
            swaps: 100,
            time_limit: Duration::from_secs(10),
        }
    }
}

impl DoctorOptions {
    /// The most concurrent tasks the probe runs ([`DoctorOptions::tasks`]).
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::doctor::DoctorOptions;
    /// let o = DoctorOptions::default().with_tasks(DoctorOptions::MAX_TASKS);
    /// assert!(o.validate().is_ok());
    /// assert!(o.with_tasks(DoctorOptions::MAX_TASKS + 1).validate().is_err());
    /// ```
    pub const MAX_TASKS: u32 = 64;

    /// The most operations of one kind each task of the probe sends
    /// ([`DoctorOptions::increments`], [`DoctorOptions::swaps`]).
    pub const MAX_PER_TASK: u32 = 100_000;

    /// The longest time limit accepted ([`DoctorOptions::time_limit`]).
    pub const MAX_TIME_LIMIT: Duration = Duration::from_secs(3600);

    /// Sets how many tasks write at once. Defaults to 8.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(dispenser::doctor::DoctorOptions::default().with_tasks(4).tasks, 4);
    /// ```
    #[must_use]
    pub fn with_tasks(mut self, tasks: u32) -> Self {
        self.tasks = tasks;
        self
    }

    /// Sets how many conditional increments each task sends. Defaults to 200.
    ///
    /// # Example
    ///
    /// ```
    /// let o = dispenser::doctor::DoctorOptions::default().with_increments(500);
    /// assert_eq!(o.increments, 500);
    /// ```
    #[must_use]
    pub fn with_increments(mut self, increments: u32) -> Self {
        self.increments = increments;
        self
    }

    /// Sets how many compare-and-set wins each task collects. Defaults to 100.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(dispenser::doctor::DoctorOptions::default().with_swaps(10).swaps, 10);
    /// ```
    #[must_use]
    pub fn with_swaps(mut self, swaps: u32) -> Self {
        self.swaps = swaps;
        self
    }

    /// Sets the time limit of the whole examination. Defaults to 10 s.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = dispenser::doctor::DoctorOptions::default().with_time_limit(Duration::from_secs(60));
    /// assert_eq!(o.time_limit, Duration::from_secs(60));
    /// ```
    #[must_use]
    pub fn with_time_limit(mut self, time_limit: Duration) -> Self {
        self.time_limit = time_limit;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the setting and its value: `tasks` outside 2 – 64
    /// (one task cannot race anyone), `increments` or `swaps` outside 1 – 100 000, a
    /// `time_limit` of 0 or over an hour.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::doctor::DoctorOptions;
    /// let e = DoctorOptions::default().with_tasks(1).validate().unwrap_err();
    /// assert!(e.to_string().contains("tasks"));
    /// ```
    pub fn validate(&self) -> Result<()> {
        if !(2..=Self::MAX_TASKS).contains(&self.tasks) {
            return Err(Error::invalid_argument(
                "doctor tasks",
                format!(
                    "{} is not allowed: must be between 2 and {} (one task races no one)",
                    self.tasks,
                    Self::MAX_TASKS
                ),
            ));
        }
        for (what, n) in [
            ("doctor increments", self.increments),
            ("doctor swaps", self.swaps),
        ] {
            if !(1..=Self::MAX_PER_TASK).contains(&n) {
                return Err(Error::invalid_argument(
                    what,
                    format!(
                        "{n} is not allowed: must be between 1 and {} per task",
                        Self::MAX_PER_TASK
                    ),
                ));
            }
        }
        if self.time_limit.is_zero() || self.time_limit > Self::MAX_TIME_LIMIT {
            return Err(Error::invalid_argument(
                "doctor time limit",
                format!(
                    "{:?} is not allowed: must be more than 0 and at most {} s",
                    self.time_limit,
                    Self::MAX_TIME_LIMIT.as_secs()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_bad_settings_are_named() {
        let d = DoctorOptions::default();
        assert!(d.validate().is_ok());
        assert_eq!(
            (d.tasks, d.increments, d.swaps, d.time_limit),
            (8, 200, 100, Duration::from_secs(10))
        );
        for (o, named) in [
            (DoctorOptions::default().with_tasks(1), "tasks"),
            (DoctorOptions::default().with_tasks(65), "tasks"),
            (DoctorOptions::default().with_increments(0), "increments"),
            (DoctorOptions::default().with_swaps(100_001), "swaps"),
            (
                DoctorOptions::default().with_time_limit(Duration::ZERO),
                "time limit",
            ),
            (
                DoctorOptions::default().with_time_limit(Duration::from_secs(3601)),
                "time limit",
            ),
        ] {
            let e = o.validate().expect_err("invalid");
            assert!(e.kind() == crate::error::ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains(named), "{e}");
        }
    }
}
