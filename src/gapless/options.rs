//! The options of a gap-free sequence, validated before anything is written.

use std::time::Duration;

use bson::Document;

use crate::error::{Error, Result};

/// How a gap-free sequence is opened (see [`Dispenser::ensure_gapless`]).
///
/// | field | default |
/// |---|---|
/// | `collection` | — (the business collection, in the dispenser's database) |
/// | `field` | — (the number field of its documents) |
/// | `start` | 1 (the first number, when the sequence is created) |
/// | `lease` | 10 s (how long a holder may take for its business write before the number can go to another caller; timed by the server's clock; at most the sequence's longest lease) |
/// | `max_lease` | 5 min (the **longest lease** stored with a new sequence: no holder's lease counts for longer, whatever it asked; change it later with [`Gapless::alter`]) |
/// | `wait` | 30 s (how long [`Gapless::issue`] waits for other holders before [`Error::Contention`]) |
/// | `void_field` | `voided` (the field of a void document that holds `{reason, at, sequence}`) |
/// | `void_extra` | `{}` (more fields written into every void document, for example `{status: "void"}`) |
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
/// [`Dispenser::ensure_gapless`]: crate::Dispenser::ensure_gapless
/// [`Gapless::issue`]: super::Gapless::issue
/// [`Gapless::alter`]: super::Gapless::alter
#[derive(Clone, Debug, PartialEq)]
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
    /// 10 s. At most the sequence's longest lease: [`validate`](Self::validate) refuses a
    /// longer one than [`max_lease`](Self::max_lease), and opening an existing sequence one
    /// longer than its stored longest lease.
    pub lease: Duration,
    /// The longest lease of a **new** sequence, stored with it (change it with
    /// [`Gapless::alter`](super::Gapless::alter)); `ensure_gapless` compares it with the
    /// stored one, as every setting it writes.
    /// Every lease is judged by the server as lasting at most the longest lease stored at
    /// that moment, so a holder that dies blocks the sequence for at most that long.
    /// Defaults to 5 minutes.
    pub max_lease: Duration,
    /// How long a call waits for other holders before giving up. Defaults to 30 s.
    pub wait: Duration,
    /// The field (a dotted path) of a **void document** that says why its number was
    /// voided: [`Gapless::void`](super::Gapless::void) inserts `{<field>: n, <void_field>: {reason, at, sequence}}`
    /// (plus [`void_extra`](Self::void_extra)) into the business collection, so that the
    /// unique index decides between a void and a late business write of the same number.
    /// The audit counts such documents as voided. Defaults to `voided`.
    pub void_field: String,
    /// Fields written into every void document besides the number and the void field —
    /// whatever the business collection's readers or validators need to recognise it (for
    /// example `{status: "void"}`). Top-level keys only, none of them the number's or the
    /// void field's, no `$` and no `.` in keys. Defaults to none.
    pub void_extra: Document,
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
            max_lease: DEFAULT_MAX_LEASE,
            wait: Duration::from_secs(30),
            void_field: "voided".to_owned(),
            void_extra: Document::new(),
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

    /// Sets the longest lease stored with a new sequence. Defaults to 5 minutes.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use dispenser::gapless::GaplessOptions;
    /// let o = GaplessOptions::new("invoices", "number").with_max_lease(Duration::from_secs(60));
    /// o.validate()?;
    /// assert!(o.with_lease(Duration::from_secs(61)).validate().is_err());
    /// # Ok::<(), dispenser::Error>(())
    /// ```
    #[must_use]
    pub fn with_max_lease(mut self, max_lease: Duration) -> Self {
        self.max_lease = max_lease;
        self
    }

    /// Sets how long a call waits for other holders. Defaults to 30 s.
    #[must_use]
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Sets the field that marks a void document. Defaults to `voided`.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::gapless::GaplessOptions;
    /// let o = GaplessOptions::new("invoices", "number").with_void_field("cancellation.void");
    /// o.validate()?;
    /// # Ok::<(), dispenser::Error>(())
    /// ```
    #[must_use]
    pub fn with_void_field(mut self, field: impl Into<String>) -> Self {
        self.void_field = field.into();
        self
    }

    /// Sets the fields written into every void document besides the number and the void
    /// field. Defaults to none.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::gapless::GaplessOptions;
    /// use dispenser::mongodb::bson::doc;
    /// let o = GaplessOptions::new("invoices", "number")
    ///     .with_void_extra(doc! { "status": "VOID", "total": 0 });
    /// o.validate()?;
    /// # Ok::<(), dispenser::Error>(())
    /// ```
    #[must_use]
    pub fn with_void_extra(mut self, extra: Document) -> Self {
        self.void_extra = extra;
        self
    }

    /// Checks the options.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the option: an empty collection or one in the
    /// `system.` namespace; a field or void field that is empty, starts with `$` or has an
    /// empty path segment, or that is the other or inside it; `void_extra` keys that are
    /// empty, hold `$` or `.`, or are the number's or the void field's top-level key, or
    /// `void_extra` over 16 KiB; a lease or longest lease under 1 ms or a wait of zero; any
    /// of them over a day; a lease longer than the longest lease.
    pub fn validate(&self) -> Result<()> {
        crate::options::check_collection_name("gap-free collection", &self.collection)?;
        check_path("gap-free field", &self.field)?;
        check_path("gap-free void field", &self.void_field)?;
        let (f, v) = (&self.field, &self.void_field);
        if f == v || v.starts_with(&format!("{f}.")) || f.starts_with(&format!("{v}.")) {
            return Err(Error::invalid_argument(
                "gap-free void field",
                format!("{v:?} must be a field apart from the number field {f:?}"),
            ));
        }
        let tops = [top(f), top(v)];
        for k in self.void_extra.keys() {
            if k.is_empty() || k.starts_with('$') || k.contains('.') || k.contains('\0') {
                return Err(Error::invalid_argument(
                    "gap-free void extra",
                    format!("{k:?} is not a plain top-level field name"),
                ));
            }
            if tops.contains(&k.as_str()) {
                return Err(Error::invalid_argument(
                    "gap-free void extra",
                    format!("{k:?} is where the number or the void's reason goes; leave it out"),
                ));
            }
        }
        let size = bson::to_vec(&self.void_extra).map_or(usize::MAX, |b| b.len());
        if size > 16 * 1024 {
            return Err(Error::invalid_argument(
                "gap-free void extra",
                format!("{size} bytes; keep it under 16 KiB"),
            ));
        }
        for (what, d, min) in [
            ("gap-free lease", self.lease, Duration::from_millis(1)),
            (
                "gap-free longest lease",
                self.max_lease,
                Duration::from_millis(1),
            ),
            ("gap-free wait", self.wait, Duration::from_nanos(1)),
        ] {
            if d < min || d > Duration::from_secs(86_400) {
                return Err(Error::invalid_argument(
                    what,
                    format!("{d:?} must be at least {min:?} and at most a day"),
                ));
            }
        }
        check_lease(self.lease, self.max_lease)
    }
}

/// What [`Gapless::alter`](super::Gapless::alter) changes; fields left `None` stay as they
/// are. An alter that changes nothing is refused.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dispenser::gapless::GaplessAlter;
///
/// let shorter = GaplessAlter::default().with_max_lease(Duration::from_secs(60));
/// assert_eq!(shorter.max_lease, Some(Duration::from_secs(60)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GaplessAlter {
    /// The longest lease (1 ms to a day): from then on no holder's lease counts for longer,
    /// the leases already taken included.
    pub max_lease: Option<Duration>,
}

impl GaplessAlter {
    /// Sets the longest lease (1 ms to a day).
    #[must_use]
    pub fn with_max_lease(mut self, max_lease: Duration) -> Self {
        self.max_lease = Some(max_lease);
        self
    }

    /// Refuses an alter that changes nothing and a longest lease out of range, naming the
    /// sequence.
    pub(super) fn validate(&self, name: &str) -> Result<Duration> {
        let Some(max_lease) = self.max_lease else {
            return Err(Error::invalid_argument(
                "alter",
                format!("nothing to change for gap-free sequence {name:?}: give a longest lease"),
            ));
        };
        check_max_lease(max_lease)?;
        Ok(max_lease)
    }
}

/// The longest lease of a new sequence when none is given.
pub(super) const DEFAULT_MAX_LEASE: Duration = Duration::from_secs(300);

/// Checks a longest lease (1 ms to a day).
pub(super) fn check_max_lease(max_lease: Duration) -> Result<()> {
    if max_lease < Duration::from_millis(1) || max_lease > Duration::from_secs(86_400) {
        return Err(Error::invalid_argument(
            "gap-free longest lease",
            format!("{max_lease:?} must be at least 1ms and at most a day"),
        ));
    }
    Ok(())
}

/// Refuses a lease longer than the sequence's longest lease.
pub(super) fn check_lease(lease: Duration, max_lease: Duration) -> Result<()> {
    if lease > max_lease {
        return Err(Error::invalid_argument(
            "gap-free lease",
            format!(
                "{lease:?} is longer than the sequence's longest lease, {max_lease:?}: no holder may keep a number longer (a holder that dies would block every other caller that long); ask for a shorter lease, or raise the longest lease (`Gapless::alter`, `dispenser gapless alter --max-lease`)"
            ),
        ));
    }
    Ok(())
}

/// The first segment of a dotted path.
fn top(path: &str) -> &str {
    path.split('.').next().unwrap_or(path)
}

fn check_path(what: &str, f: &str) -> Result<()> {
    if f.is_empty() || f.starts_with('$') || f.split('.').any(str::is_empty) || f.contains('\0') {
        return Err(Error::invalid_argument(
            what,
            format!("{f:?} is not a field path (such as `number` or `meta.number`)"),
        ));
    }
    Ok(())
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
            (ok.clone().with_lease(Duration::from_micros(500)), "lease"),
            (
                ok.clone().with_lease(Duration::from_secs(301)),
                "longest lease",
            ),
            (ok.clone().with_max_lease(Duration::ZERO), "longest lease"),
            (
                ok.clone().with_max_lease(Duration::from_secs(86_401)),
                "longest lease",
            ),
            (ok.clone().with_void_field("meta.number"), "void field"),
            (ok.clone().with_void_field("meta"), "void field"),
            (ok.clone().with_void_field("meta.number.x"), "void field"),
            (ok.clone().with_void_field("$v"), "void field"),
            (
                ok.clone().with_void_extra(bson::doc! { "meta": 1 }),
                "void extra",
            ),
            (
                ok.clone().with_void_extra(bson::doc! { "voided": 1 }),
                "void extra",
            ),
            (
                ok.clone().with_void_extra(bson::doc! { "a.b": 1 }),
                "void extra",
            ),
            (
                ok.clone()
                    .with_void_extra(bson::doc! { "big": "x".repeat(17_000) }),
                "void extra",
            ),
        ] {
            let e = o.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        GaplessOptions::new("inv", "number")
            .with_void_field("void.info")
            .with_void_extra(bson::doc! { "status": "void", "total": 0 })
            .validate()
            .unwrap();
    }
}
