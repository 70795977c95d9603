//! How a [`Dispenser`](crate::Dispenser) talks to MongoDB: where the documents live, which
//! strategy draws numbers, how it backs off, and what the server must acknowledge.
//!
//! The defaults are the safe ones: writes acknowledged by a majority and journaled, reads from
//! the primary, the one-round-trip conditional increment.

use std::time::Duration;

use mongodb::options::{Acknowledgment, WriteConcern};

use crate::error::{Error, Result};
pub use crate::retry::Backoff;

/// How numbers are drawn from a sequence document. Both issue exactly the same numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Strategy {
    /// One `findAndModify` that adds `n × step` to `value` (and 1 to `version`) only while the
    /// result stays within the bounds, reading the new value back through a projection. No
    /// retries in steady state; at a wrap or an exhausted bound it falls back to
    /// [`Strategy::Cas`]. The default.
    #[default]
    ConditionalIncrement,
    /// First writer wins: compute the next value from the last state seen and write it only if
    /// `version` is still the one read; on a lost race, back off and try again — with the
    /// conditional increment when the numbers fit before the bound (see
    /// [`Options::increment_retry`]), else by re-reading.
    Cas,
}

/// How the compare-and-set picks the state it writes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CasMode {
    /// Optimistic while it wins, pessimistic when the observed loss rate makes that cheaper,
    /// and optimistic again now and then to re-measure. The default.
    #[default]
    Adaptive,
    /// Write from the remembered state first: one round trip when it wins, three when it loses.
    Optimistic,
    /// Read, then write: always two round trips.
    Pessimistic,
}

/// Settings of a [`Dispenser`](crate::Dispenser), validated when it is built.
///
/// # Default
///
/// | field | default |
/// |---|---|
/// | `database` | `"dispenser"` |
/// | `collection` | `"dispensers"` |
/// | `strategy` | [`Strategy::ConditionalIncrement`] |
/// | `cas_mode` | [`CasMode::Adaptive`] |
/// | `increment_retry` | `true` |
/// | `coalesce` | `true` |
/// | `backoff` | [`Backoff::default()`] |
/// | `write_concern` | `w: "majority", j: true` |
/// | `operation_timeout` | 10 s per database operation |
/// | `caller` | none |
///
/// # Example
///
/// ```
/// use dispenser::{Options, sequence::Strategy};
///
/// let options = Options::default()
///     .with_database("shop")
///     .with_strategy(Strategy::Cas);
/// options.validate()?;
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The database holding the sequence documents. Defaults to `"dispenser"`.
    pub database: String,
    /// The collection holding the sequence documents. Defaults to `"dispensers"`.
    pub collection: String,
    /// How numbers are drawn. Defaults to [`Strategy::ConditionalIncrement`].
    pub strategy: Strategy,
    /// How the compare-and-set path chooses between optimistic and pessimistic writes.
    /// Defaults to [`CasMode::Adaptive`].
    pub cas_mode: CasMode,
    /// Backoff between compare-and-set attempts. Defaults to [`Backoff::default()`].
    pub backoff: Backoff,
    /// The write concern of every write. Defaults to majority + journaled.
    pub write_concern: WriteConcern,
    /// The longest one database operation may take before the call fails with
    /// [`Error::Timeout`]. Defaults to 10 s.
    pub operation_timeout: Duration,
    /// Whether concurrent calls on one [`Sequence`](crate::Sequence) handle (and its
    /// clones) share writes: while a draw is in flight, new callers queue and are drawn
    /// together in one write, in arrival order (see the guide's [coalesced draws](crate::guide::drawing)).
    /// Defaults to true.
    pub coalesce: bool,
    /// Whether a draw that lost a compare-and-set race retries with the conditional
    /// increment (when its numbers fit before the bound), which cannot lose to a writer that
    /// keeps writing from its remembered state: a loser waits one backoff and one round trip,
    /// not many. With `false` every retry re-reads and compares-and-sets, the loop of the
    /// source documents (every write filtered on `version`). Defaults to true.
    pub increment_retry: bool,
    /// Who is acting: the name request ids are scoped to (a queue take's request id belongs
    /// to its caller, so two callers that pick the same id never share a take) and the name
    /// the service and the command line act under. Set it per client (a kiosk, a process
    /// role), stable across restarts, so a retry from a restarted process still finds its
    /// request ids. 1 to 128 printable ASCII characters. Defaults to none (the unnamed
    /// caller). [`Dispenser::with_caller`](crate::Dispenser::with_caller) changes it for one
    /// handle.
    pub caller: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            database: "dispenser".into(),
            collection: "dispensers".into(),
            strategy: Strategy::default(),
            cas_mode: CasMode::default(),
            backoff: Backoff::default(),
            write_concern: safe_write_concern(),
            operation_timeout: Duration::from_secs(10),
            coalesce: true,
            increment_retry: true,
            caller: None,
        }
    }
}

/// `w: "majority", j: true`: a write acknowledged this way survives a primary failover, so
/// the numbers it reserved can never be issued again.
pub fn safe_write_concern() -> WriteConcern {
    WriteConcern::builder()
        .w(Acknowledgment::Majority)
        .journal(true)
        .build()
}

impl Options {
    /// Sets whether concurrent calls on one handle share writes. Defaults to true.
    ///
    /// # Example
    ///
    /// ```
    /// let one_write_per_call = dispenser::Options::default().with_coalesce(false);
    /// assert!(!one_write_per_call.coalesce);
    /// ```
    #[must_use]
    pub fn with_coalesce(mut self, coalesce: bool) -> Self {
        self.coalesce = coalesce;
        self
    }

    /// Sets whether a lost compare-and-set race of a draw is retried with the conditional
    /// increment (see [`Options::increment_retry`]). Defaults to true.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::{Options, sequence::Strategy};
    /// // Every write filtered on `version`, every retry a fresh read.
    /// let pure = Options::default().with_strategy(Strategy::Cas).with_increment_retry(false);
    /// assert!(!pure.increment_retry);
    /// ```
    #[must_use]
    pub fn with_increment_retry(mut self, increment_retry: bool) -> Self {
        self.increment_retry = increment_retry;
        self
    }

    /// Sets the database. Defaults to `"dispenser"`.
    #[must_use]
    pub fn with_database(mut self, database: impl Into<String>) -> Self {
        self.database = database.into();
        self
    }

    /// Sets the collection. Defaults to `"dispensers"`.
    #[must_use]
    pub fn with_collection(mut self, collection: impl Into<String>) -> Self {
        self.collection = collection.into();
        self
    }

    /// Sets the strategy. Defaults to [`Strategy::ConditionalIncrement`].
    #[must_use]
    pub fn with_strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Sets the compare-and-set mode. Defaults to [`CasMode::Adaptive`].
    #[must_use]
    pub fn with_cas_mode(mut self, mode: CasMode) -> Self {
        self.cas_mode = mode;
        self
    }

    /// Sets the backoff. Defaults to [`Backoff::default()`].
    #[must_use]
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets the write concern. Defaults to majority + journaled; weaker settings can lose
    /// acknowledged writes on failover and so issue numbers twice.
    #[must_use]
    pub fn with_write_concern(mut self, wc: WriteConcern) -> Self {
        self.write_concern = wc;
        self
    }

    /// Sets who is acting (see [`Options::caller`]). Defaults to none.
    ///
    /// # Example
    ///
    /// ```
    /// let kiosk = dispenser::Options::default().with_caller("kiosk-3");
    /// assert_eq!(kiosk.caller.as_deref(), Some("kiosk-3"));
    /// ```
    #[must_use]
    pub fn with_caller(mut self, caller: impl Into<String>) -> Self {
        self.caller = Some(caller.into());
        self
    }

    /// Sets the per-operation timeout. Defaults to 10 s.
    #[must_use]
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// Checks every setting.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming the setting: an empty database or collection name, a
    /// database name with `/\. "$` or NUL, a collection name with `$` or NUL or starting with
    /// `system.`, a zero timeout, or a bad backoff.
    pub fn validate(&self) -> Result<()> {
        let db = &self.database;
        if db.is_empty() || db.len() > 63 || db.contains(['/', '\\', '.', ' ', '"', '$', '\0']) {
            return Err(Error::invalid_argument(
                "database name",
                format!("{db:?} must be 1 to 63 bytes without / \\ . space \" $ or NUL"),
            ));
        }
        check_collection_name("collection name", &self.collection)?;
        if self.operation_timeout.is_zero() {
            return Err(Error::invalid_argument(
                "operation_timeout",
                "must be longer than 0",
            ));
        }
        if let Some(c) = &self.caller {
            check_caller(c)?;
        }
        self.backoff.validate()
    }
}

/// The longest caller name, in bytes.
pub const MAX_CALLER: usize = 128;

/// Checks a caller name: 1 to [`MAX_CALLER`] printable ASCII characters.
pub(crate) fn check_caller(caller: &str) -> Result<()> {
    if (1..=MAX_CALLER).contains(&caller.len())
        && caller.bytes().all(|b| (0x20..=0x7e).contains(&b))
    {
        Ok(())
    } else {
        Err(Error::invalid_argument(
            "caller",
            format!("{caller:?} is not 1 to {MAX_CALLER} printable ASCII characters"),
        ))
    }
}

/// Checks a collection name (the sequences', a gap-free sequence's business collection):
/// [`Error::InvalidArgument`] naming `what` unless it is non-empty, without `$` or NUL, and
/// outside the `system.` namespace.
pub(crate) fn check_collection_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.contains(['$', '\0']) || name.starts_with("system.") {
        return Err(Error::invalid_argument(
            what,
            format!("{name:?} must be non-empty, without $ or NUL, and not start with \"system.\""),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_safe() {
        let o = Options::default();
        assert!(o.validate().is_ok());
        assert_eq!(o.write_concern.w, Some(Acknowledgment::Majority));
        assert_eq!(o.write_concern.journal, Some(true));
        assert_eq!(o.strategy, Strategy::ConditionalIncrement);
    }

    #[test]
    fn bad_names_are_rejected() {
        for o in [
            Options::default().with_database(""),
            Options::default().with_database("a.b"),
            Options::default().with_collection("x$y"),
            Options::default().with_collection("system.users"),
            Options::default().with_operation_timeout(Duration::ZERO),
            Options::default().with_caller(""),
            Options::default().with_caller("a\nb"),
            Options::default().with_caller("x".repeat(129)),
        ] {
            assert!(
                matches!(o.validate(), Err(Error::InvalidArgument { .. })),
                "{o:?}"
            );
        }
    }
}
