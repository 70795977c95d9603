//! The options of a gap-free sequence, validated before anything is written.

use std::time::Duration;

use crate::error::{Error, Result};

/// How a gap-free sequence is opened (see [`Dispenser::open_gapless`]).
///
/// | field | default |
/// |---|---|
/// | `collection` | — (the business collection, in the dispenser's database) |
/// | `field` | — (the number field of its documents) |
/// | `start` | 1 (the first number, when the sequence is created) |
/// | `lease` | 10 s (how long a holder may take for its business write before the number can go to another caller) |
/// | `wait` | 30 s (how long [`Gapless::issue`] waits for other holders before [`Error::Contention`]) |
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser::gapless::GaplessOptions;
///
/// let o = GaplessOptions::new("invoices", "number").with_lease(Duration::from_secs(5));
/// o.validate()?;
/// # Ok::<(), dispenser::Error>(())
/// ```
///
/// [`Dispenser::open_gapless`]: crate::Dispenser::open_gapless
/// [`Gapless::issue`]: super::Gapless::issue
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GaplessOptions {
    /// The business collection whose documents carry the numbers.
    pub collection: String,
    /// The field of those documents that holds the number (a unique index on it is the
    /// arbiter against duplicates).
    pub field: String,
    /// The first number of a new sequence. Defaults to 1.
    pub start: i64,
    /// How long a holder may keep a number before it can go to another caller. Defaults to
    /// 10 s.
    pub lease: Duration,
    /// How long a call waits for other holders before giving up. Defaults to 30 s.
    pub wait: Duration,
}

impl GaplessOptions {
    /// Options for numbers kept in `field` of the documents of `collection`.
    ///
    /// # Example
    ///
    /// ```
    /// let o = dispenser::gapless::GaplessOptions::new("invoices", "number");
    /// assert_eq!(o.start, 1);
    /// ```
    pub fn new(collection: impl Into<String>, field: impl Into<String>) -> Self {
        GaplessOptions {
            collection: collection.into(),
            field: field.into(),
            start: 1,
            lease: Duration::from_secs(10),
            wait: Duration::from_secs(30),
        }
    }

    /// Sets the first number (used only when the sequence is created). Defaults to 1.
    #[must_use]
    pub fn with_start(mut self, start: i64) -> Self {
        self.start = start;
        self
    }

    /// Sets the lease. Defaults to 10 s.
    #[must_use]
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets how long a call waits for other holders. Defaults to 30 s.
    #[must_use]
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Checks the options.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the option: an empty collection or one in the
    /// `system.` namespace, an empty field or one starting with `$` or containing an empty
    /// path segment, a lease or wait of zero or over a day.
    pub fn validate(&self) -> Result<()> {
        crate::options::check_collection_name("gap-free collection", &self.collection)?;
        let f = &self.field;
        if f.is_empty() || f.starts_with('$') || f.split('.').any(str::is_empty) || f.contains('\0')
        {
            return Err(Error::invalid_argument(
                "gap-free field",
                format!("{f:?} is not a field path (such as `number` or `meta.number`)"),
            ));
        }
        for (what, d) in [("gap-free lease", self.lease), ("gap-free wait", self.wait)] {
            if d.is_zero() || d > Duration::from_secs(86_400) {
                return Err(Error::invalid_argument(
                    what,
                    format!("{d:?} must be more than 0 and at most a day"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_name_what_is_wrong() {
        let ok = GaplessOptions::new("invoices", "meta.number");
        ok.validate().unwrap();
        for (o, needle) in [
            (GaplessOptions::new("", "n"), "collection"),
            (GaplessOptions::new("system.x", "n"), "collection"),
            (GaplessOptions::new("inv", ""), "field"),
            (GaplessOptions::new("inv", "$n"), "field"),
            (GaplessOptions::new("inv", "a..b"), "field"),
            (ok.clone().with_lease(Duration::ZERO), "lease"),
            (ok.clone().with_wait(Duration::from_secs(90_000)), "wait"),
        ] {
            let e = o.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }
}
