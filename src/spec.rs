//! What a sequence is: its name and its spec (start, step, bounds, cycle), validated before
//! anything is written.
//!
//! Validation lives here, in one place, so the library and the CLI reject the same inputs
//! with the same messages.

use std::fmt;

use crate::error::{Error, Result};

/// The longest sequence name accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 200;

/// The shape of a sequence: where it starts, how it moves and where it stops or wraps.
///
/// # Default
///
/// `start 1, step 1, min 0, max i64::MAX, cycle false`: an ordinary counter 1, 2, 3, …
///
/// # Example
///
/// A queue-ticket dispenser that issues 1, 2, …, 99, 0, 1, …:
///
/// ```
/// use dispenser::Spec;
///
/// let tickets = Spec::default().with_max(99).with_cycle(true);
/// tickets.validate("tickets")?;
/// assert_eq!((tickets.start, tickets.min, tickets.max), (1, 0, 99));
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Spec {
    /// The first number issued. Defaults to 1.
    pub start: i64,
    /// The distance between consecutive numbers; negative for a descending sequence.
    /// Defaults to 1. Must not be 0.
    pub step: i64,
    /// The lowest number the sequence may issue. Defaults to 0.
    pub min: i64,
    /// The highest number the sequence may issue. Defaults to `i64::MAX`.
    pub max: i64,
    /// Whether to wrap to `min` (to `max` when descending) past the far bound instead of
    /// failing with [`Error::Exhausted`]. Defaults to false.
    pub cycle: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            start: 1,
            step: 1,
            min: 0,
            max: i64::MAX,
            cycle: false,
        }
    }
}

impl Spec {
    /// Sets the first number issued. Defaults to 1.
    #[must_use]
    pub const fn with_start(mut self, start: i64) -> Self {
        self.start = start;
        self
    }

    /// Sets the step. Defaults to 1.
    #[must_use]
    pub const fn with_step(mut self, step: i64) -> Self {
        self.step = step;
        self
    }

    /// Sets the lower bound. Defaults to 0.
    #[must_use]
    pub const fn with_min(mut self, min: i64) -> Self {
        self.min = min;
        self
    }

    /// Sets the upper bound. Defaults to `i64::MAX`.
    #[must_use]
    pub const fn with_max(mut self, max: i64) -> Self {
        self.max = max;
        self
    }

    /// Sets whether the sequence wraps at its bound. Defaults to false.
    #[must_use]
    pub const fn with_cycle(mut self, cycle: bool) -> Self {
        self.cycle = cycle;
        self
    }

    /// Checks the spec for the sequence `name` (the name is only used in the message).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSpec`] when the step is 0, `min >= max`, `start` lies outside
    /// `[min, max]`, or `start - step` (the stored value of a sequence that has issued
    /// nothing yet) does not fit in an `i64`.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::Spec;
    ///
    /// let err = Spec::default().with_min(10).with_max(5).validate("x").unwrap_err();
    /// assert!(err.to_string().contains("min (10) must be below max (5)"));
    /// ```
    pub fn validate(&self, name: &str) -> Result<()> {
        let fail = |reason: String| {
            Err(Error::InvalidSpec {
                name: name.to_owned(),
                reason,
            })
        };
        if self.step == 0 {
            return fail("step must not be 0".into());
        }
        if self.min >= self.max {
            return fail(format!(
                "min ({}) must be below max ({})",
                self.min, self.max
            ));
        }
        if self.start < self.min || self.start > self.max {
            return fail(format!(
                "start ({}) must lie within min..=max ({}..={})",
                self.start, self.min, self.max
            ));
        }
        if self.start.checked_sub(self.step).is_none() {
            return fail(format!(
                "start - step ({} - {}) must fit in a 64-bit integer (it is stored as the value before the first number)",
                self.start, self.step
            ));
        }
        Ok(())
    }

    /// Whether two specs describe the same numbers from now on (the start only matters at
    /// creation, so it is not compared).
    pub(crate) fn same_shape(&self, other: &Spec) -> bool {
        self.step == other.step
            && self.min == other.min
            && self.max == other.max
            && self.cycle == other.cycle
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{step {}, min {}, max {}, cycle {}}}",
            self.step, self.min, self.max, self.cycle
        )
    }
}

/// Checks a sequence name: non-empty, at most [`MAX_NAME_BYTES`] bytes, no NUL, not
/// starting with `$`.
///
/// # Errors
///
/// [`Error::InvalidName`] saying which rule the name breaks.
///
/// # Example
///
/// ```
/// assert!(dispenser::validate_name("orders").is_ok());
/// assert!(dispenser::validate_name("$where").is_err());
/// ```
pub fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "must not be empty".to_owned()
    } else if name.len() > MAX_NAME_BYTES {
        format!(
            "is {} bytes long; at most {MAX_NAME_BYTES} are allowed",
            name.len()
        )
    } else if name.contains('\0') {
        "must not contain a NUL character".to_owned()
    } else if name.starts_with('$') {
        "must not start with '$'".to_owned()
    } else {
        return Ok(());
    };
    let shown: String = name.chars().take(64).collect();
    Err(Error::InvalidName {
        name: shown,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_spec_is_valid() {
        assert!(Spec::default().validate("a").is_ok());
    }

    #[test]
    fn invalid_specs_are_rejected_with_the_field_named() {
        let cases = [
            (Spec::default().with_step(0), "step must not be 0"),
            (
                Spec::default().with_min(5).with_max(5),
                "min (5) must be below max (5)",
            ),
            (Spec::default().with_start(-1), "start (-1) must lie within"),
            (
                Spec::default().with_max(10).with_start(11),
                "start (11) must lie within",
            ),
            (
                Spec::default().with_min(i64::MIN).with_start(i64::MIN),
                "start - step",
            ),
            (
                Spec::default().with_step(-1).with_start(i64::MAX),
                "start - step",
            ),
        ];
        for (spec, needle) in cases {
            let err = spec.validate("s").unwrap_err();
            assert!(matches!(err, Error::InvalidSpec { .. }), "{spec}");
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("tickets-2026/01").is_ok());
        assert!(validate_name(&"x".repeat(MAX_NAME_BYTES)).is_ok());
        for (bad, needle) in [("", "empty"), ("a\0b", "NUL"), ("$x", "'$'")] {
            let err = validate_name(bad).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
        let long = "é".repeat(101);
        assert!(
            validate_name(&long)
                .unwrap_err()
                .to_string()
                .contains("202 bytes")
        );
    }

    #[test]
    fn same_shape_ignores_start() {
        let a = Spec::default().with_max(99);
        assert!(a.same_shape(&a.with_start(5)));
        assert!(!a.same_shape(&a.with_cycle(true)));
    }
}
