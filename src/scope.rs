//! Scoped sequences: one independent sequence per scope key, made from a template on first
//! use — per day (numbering restarts every day without anyone resetting it), per tenant, per
//! any string.
//!
//! The template is an ordinary sequence document (create it once, and do not draw from it):
//! each scope `KEY` of template `T` is the sequence `T@KEY`, created on first use with the
//! template's step, bounds and cycle, starting at the template's next number. Racing first
//! uses create it exactly once (it is an `ensure`). Because scope names share the prefix
//! `T@`, listing and cleaning up scopes are range queries on `_id`.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;

use crate::dispenser::{Dispenser, Sequence};
use crate::document::SequenceState;
use crate::error::{Error, Result};
use crate::history::record::{Entry, sequence_state};
use crate::history::subject::Target;
use crate::spec::{Spec, validate_name, validate_plain_name};
use crate::stats::Stats;

/// Separates a template's name from the scope key: scope `2026-11-21` of `tickets` is the
/// sequence `tickets@2026-11-21`.
pub const SCOPE_SEPARATOR: char = '@';

/// The sequence name of scope `scope` of template `template`.
///
/// # Errors
///
/// [`Error::InvalidName`] when the template name is not a plain name (see
/// [`validate_plain_name`](crate::sequence::validate_plain_name()): no [`SCOPE_SEPARATOR`], no `~`),
/// when the scope is empty or contains a control character, or when the result is longer
/// than a name may be.
///
/// # Example
///
/// ```
/// assert_eq!(dispenser::scope::scoped_name("tickets", "2026-11-21")?, "tickets@2026-11-21");
/// assert!(dispenser::scope::scoped_name("tickets", "").is_err());
/// # Ok::<(), dispenser::Error>(())
/// ```
pub fn scoped_name(template: &str, scope: &str) -> Result<String> {
    validate_plain_name(template)?;
    if scope.is_empty() || scope.contains(char::is_control) {
        return Err(Error::InvalidName {
            kind: crate::error::Kind::Sequence,
            name: scope.to_owned(),
            reason: "a scope key must be non-empty and without a control character".to_owned(),
        });
    }
    let name = format!("{template}{SCOPE_SEPARATOR}{scope}");
    validate_name(&name)?;
    Ok(name)
}

/// The `[from, to)` range of `_id`s holding the scopes of `template`.
pub(crate) fn scope_range(template: &str) -> Result<(String, String)> {
    scoped_name(template, "x")?;
    // '@' + 1 = 'A': every name that starts with "T@" sorts in ["T@", "TA").
    let after = char::from_u32(SCOPE_SEPARATOR as u32 + 1).unwrap_or('A');
    Ok((
        format!("{template}{SCOPE_SEPARATOR}"),
        format!("{template}{after}"),
    ))
}

impl Dispenser {
    /// Makes scope `scope` of template `template` on first use, from the template's spec
    /// (the scope starts at the template's next number), or opens it if it exists with the
    /// template's shape (see the [vocabulary](crate::guide::glossary#create-ensure-open)).
    /// That is what it compares: the step, bounds and cycle — not the start (where the
    /// template stood when the scope was made) and not a format (a scope's numbers are shown
    /// with its template's format, `{scope}` its key).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when the template does not exist, [`Error::InvalidName`]
    /// (see [`scoped_name`]), [`Error::SpecConflict`] when the scope exists with another shape,
    /// [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the scope created or not, and its `create`
    /// entry in the [history](crate::history) `pending`; it issues no number. Call it again:
    /// it opens what was created.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::Spec;
    /// d.ensure("invoices", Spec::default()).await?; // the template
    /// let acme = d.ensure_scope("invoices", "acme").await?;
    /// let globex = d.ensure_scope("invoices", "globex").await?;
    /// assert_eq!((acme.next().await?, globex.next().await?), (1, 1)); // independent
    /// # Ok(()) }
    /// ```
    pub async fn ensure_scope(&self, template: &str, scope: &str) -> Result<Sequence> {
        let (name, spec) = self.scope_spec(template, scope).await?;
        // A scope starts where its template stands when it is first used: compare the shape.
        self.ensure_recorded(&name, spec, None, false, false).await
    }

    /// Makes scope `scope` of template `template`, as [`Dispenser::ensure_scope`] does, but
    /// fails if it exists already.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] when it exists; otherwise those of
    /// [`Dispenser::ensure_scope`].
    ///
    /// # Cancel safety
    ///
    /// Dropped part way, the scope may have been made (its `create` entry in the
    /// [history](crate::history) `pending`); a second `create_scope` then fails with
    /// [`Error::AlreadyExists`] and [`Dispenser::open_scope`] opens it. It issues no number.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let acme = d.create_scope("invoices", "acme").await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_scope(&self, template: &str, scope: &str) -> Result<Sequence> {
        let (name, spec) = self.scope_spec(template, scope).await?;
        self.ensure_recorded(&name, spec, None, false, true).await
    }

    /// Opens the existing scope `scope` of template `template`, never writing (the same as
    /// [`Dispenser::open`] of [`scoped_name`]`(template, scope)`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when the scope does not exist, [`Error::InvalidName`],
    /// [`Error::CorruptDocument`], [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let acme = d.open_scope("invoices", "acme").await?; // fails if acme never drew
    /// let n = acme.next().await?;
    /// # Ok(()) }
    /// ```
    pub async fn open_scope(&self, template: &str, scope: &str) -> Result<Sequence> {
        self.open(&scoped_name(template, scope)?).await
    }

    /// The name and spec of scope `scope` of `template`, as the template stands now.
    async fn scope_spec(&self, template: &str, scope: &str) -> Result<(String, Spec)> {
        let name = scoped_name(template, scope)?;
        let t = self.peek(template).await?;
        let start = t
            .next_number()
            .unwrap_or(if t.step > 0 { t.min } else { t.max });
        let spec = Spec::default()
            .with_step(t.step)
            .with_min(t.min)
            .with_max(t.max)
            .with_cycle(t.cycle)
            .with_start(start);
        spec.validate(&name)?;
        Ok((name, spec))
    }

    /// Deletes the scopes of `template` whose key sorts before `before` (byte order; for
    /// daily scopes, `YYYY-MM-DD` keys sort by date). Returns how many were deleted. The
    /// template itself is kept.
    ///
    /// A daily scope that may still be in use is never deleted: deleting it would let the
    /// next draw create it again from the template's start and issue that day's numbers a
    /// second time. This function does not know the time zone of the daily sequences drawing
    /// from `template`, so it protects every date key that is today (or later) anywhere on
    /// Earth — on or after today's date at UTC−12, the last zone to leave a day.
    /// [`DailySequence::delete_scopes_before`] knows its zone and protects exactly today and
    /// later there. Only the scopes listed when the call starts are deleted, so a scope
    /// created meanwhile is never removed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when a scope to be deleted is a date that may be today
    /// (nothing is deleted; the message names it and the cut-off), [`Error::InvalidName`] for
    /// a bad template or an empty `before`, [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave some of the listed old scopes deleted and others
    /// not, and its history entry `pending` (see [`history`](crate::history)); call it again. A
    /// scope that may be in use is never deleted either way.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let gone = d.delete_scopes_before("tickets", "2026-01-01").await?;
    /// println!("{gone} old days deleted");
    /// # Ok(()) }
    /// ```
    pub async fn delete_scopes_before(&self, template: &str, before: &str) -> Result<u64> {
        let earliest = TimeZone::fixed(jiff::tz::offset(-12));
        let today = Timestamp::now().to_zoned(earliest).date().to_string();
        self.delete_scopes_before_day(template, before, &today, "UTC-12 (the earliest zone)")
            .await
    }

    /// Deletes the scopes of `template` before `before`, refusing any date key on or after
    /// `today` (the current day in `zone`, named in the message).
    async fn delete_scopes_before_day(
        &self,
        template: &str,
        before: &str,
        today: &str,
        zone: &str,
    ) -> Result<u64> {
        let upper = scoped_name(template, before)?;
        let (from, _) = scope_range(template)?;
        // Each scope with its state (none for a document that does not decode).
        let mut scopes: Vec<(String, Option<SequenceState>)> = Vec::new();
        for listed in self.store().list_range(&from, &upper).await? {
            scopes.push(match listed {
                Ok(s) => (s.name.clone(), Some(s)),
                Err(Error::CorruptDocument { name, .. }) => (name, None),
                Err(e) => return Err(e),
            });
        }
        for (id, _) in &scopes {
            let key = &id[from.len()..];
            if is_date_key(key) && key >= today {
                return Err(Error::invalid_argument(
                    "scopes-before",
                    format!(
                        "scope {id:?} is today or later in {zone} (today is {today} there): \
                         deleting it would let its numbers be issued again; delete only \
                         days before {today}"
                    ),
                ));
            }
        }
        let ids: Vec<String> = scopes.iter().map(|(id, _)| id.clone()).collect();
        let (Some(first), Some(last)) = (ids.first(), ids.last()) else {
            return Ok(0);
        };
        let params = bson::doc! {
            "before": before, "scopes": i64::try_from(ids.len()).unwrap_or(i64::MAX),
            "first": first, "last": last,
        };
        // The template's record, and one of each scope deleted (its history ends with it).
        let recorder = self.recorder();
        let entry = recorder
            .begin(&Target::sequence(template), "delete-scopes", params, None)
            .await?;
        let each = scopes
            .iter()
            .map(|(id, state)| {
                (
                    Target::sequence(id),
                    bson::doc! { "scopes_before": before },
                    state.as_ref().map(sequence_state),
                )
            })
            .collect();
        let deleted = match recorder.begin_many("delete", each).await {
            Ok(entries) => {
                let deleted = self.store().delete_ids(&ids).await;
                Entry::end_many(entries, &deleted).await;
                deleted
            }
            Err(e) => Err(e),
        };
        let after = deleted
            .as_ref()
            .ok()
            .map(|n| bson::doc! { "deleted": i64::try_from(*n).unwrap_or(i64::MAX) });
        entry.end(&deleted, after).await;
        deleted
    }

    /// A daily sequence: scope `YYYY-MM-DD` of `template`, the date taken in `time_zone`, so
    /// numbering restarts every day. The handle is lazy: nothing is read or written before
    /// its first draw.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a bad template.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::{Spec, jiff::tz::TimeZone};
    /// d.ensure("tickets", Spec::default().with_max(999)).await?;
    /// let paris = TimeZone::get("Europe/Paris").expect("a known zone");
    /// let today = d.open_daily("tickets", paris)?;
    /// let ticket = today.next().await?; // e.g. ScopedNumber { scope: "2026-11-21", number: 1 }
    /// println!("{}-{:03}", ticket.scope, ticket.number);
    /// # Ok(()) }
    /// ```
    pub fn open_daily(&self, template: &str, time_zone: TimeZone) -> Result<DailySequence> {
        scoped_name(template, "2000-01-01")?;
        let tz = time_zone;
        Ok(DailySequence {
            dispenser: self.clone(),
            template: template.to_owned(),
            tz,
            clock: Arc::new(Timestamp::now),
            current: Arc::new(Mutex::new(None)),
            past: Arc::default(),
        })
    }
}

/// A number and the scope it was drawn in.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScopedNumber {
    /// The scope key (for a daily sequence, the date `YYYY-MM-DD`).
    pub scope: String,
    /// The number, unique within its scope.
    pub number: i64,
}

/// The clock a [`DailySequence`] reads: returns the current instant.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// A sequence whose numbering restarts every day (see [`Dispenser::open_daily`]). Cheap to
/// clone; clones share the current day's handle.
#[derive(Clone)]
pub struct DailySequence {
    dispenser: Dispenser,
    template: String,
    tz: TimeZone,
    clock: Clock,
    current: Arc<Mutex<Option<(String, Sequence)>>>,
    /// The counters of the days this sequence has moved past.
    past: Arc<Mutex<Stats>>,
}

impl std::fmt::Debug for DailySequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DailySequence")
            .field("template", &self.template)
            .field("time_zone", &self.tz.iana_name())
            .finish_non_exhaustive()
    }
}

impl DailySequence {
    /// Replaces the clock (for tests and simulations). Defaults to the system clock.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use std::sync::Arc;
    /// let fixed = d
    ///     .open_daily("tickets", dispenser::jiff::tz::TimeZone::UTC)?
    ///     .with_clock(Arc::new(|| "2026-11-21T23:59:59Z".parse().expect("a timestamp")));
    /// assert_eq!(fixed.today(), dispenser::jiff::civil::date(2026, 11, 21));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self.current = Arc::new(Mutex::new(None));
        self.past = Arc::default();
        self
    }

    /// The template's name.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// assert_eq!(d.open_daily("tickets", dispenser::jiff::tz::TimeZone::UTC)?.template(), "tickets");
    /// # Ok(()) }
    /// ```
    pub fn template(&self) -> &str {
        &self.template
    }

    /// What this daily sequence (and its clones) did so far, over every day it drew from.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let today = d.open_daily("tickets", dispenser::jiff::tz::TimeZone::UTC)?;
    /// today.next().await?;
    /// assert_eq!(today.stats().issued, 1);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> Stats {
        let mut total = *self.past.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, seq)) = &*self.current.lock().unwrap_or_else(|p| p.into_inner()) {
            total += seq.stats();
        }
        total
    }

    /// Today in the sequence's time zone: its scope key is `today().to_string()`
    /// (`YYYY-MM-DD`).
    pub fn today(&self) -> Date {
        (self.clock)().to_zoned(self.tz.clone()).date()
    }

    /// Deletes the scopes of this daily sequence's template dated before `before`, refusing
    /// today and later in this sequence's time zone (see [`Dispenser::delete_scopes_before`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `before` would take today's scope or a later one
    /// (nothing is deleted), plus those of [`Dispenser::delete_scopes_before`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave some of the listed old scopes deleted and others not;
    /// call it again.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::jiff::{civil::date, tz::TimeZone};
    /// let daily = d.open_daily("tickets", TimeZone::get("Europe/Paris").expect("a known zone"))?;
    /// let gone = daily.delete_scopes_before(date(2026, 11, 1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_scopes_before(&self, before: Date) -> Result<u64> {
        let before = before.to_string();
        let today = self.today().to_string();
        let zone = self
            .tz
            .iana_name()
            .unwrap_or("the configured zone")
            .to_owned();
        self.dispenser
            .delete_scopes_before_day(&self.template, &before, &today, &zone)
            .await
    }

    /// Issues the next number of today's scope (creating the scope on first use).
    ///
    /// # Errors
    ///
    /// Those of [`Dispenser::ensure_scope`] and [`Sequence::next`].
    ///
    /// # Cancel safety
    ///
    /// As [`Dispenser::ensure_scope`] and then [`Sequence::next`]: dropped while today's scope is
    /// being created, the scope may exist or not; dropped after the draw's write was sent, the
    /// number it may have reserved is a gap, never issued to anyone.
    pub async fn next(&self) -> Result<ScopedNumber> {
        let scope = self.today().to_string();
        let cached = {
            let guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
            guard
                .as_ref()
                .filter(|(s, _)| *s == scope)
                .map(|(_, seq)| seq.clone())
        };
        let seq = match cached {
            Some(seq) => seq,
            None => {
                let seq = self.dispenser.ensure_scope(&self.template, &scope).await?;
                let old = self
                    .current
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .replace((scope.clone(), seq.clone()));
                if let Some((_, old)) = old {
                    *self.past.lock().unwrap_or_else(|p| p.into_inner()) += old.stats();
                }
                seq
            }
        };
        Ok(ScopedNumber {
            number: seq.next().await?,
            scope,
        })
    }
}

/// Whether a scope key is a date `YYYY-MM-DD` (the keys of daily sequences).
fn is_date_key(key: &str) -> bool {
    key.len() == 10 && key.parse::<jiff::civil::Date>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_keys_are_recognised() {
        assert!(is_date_key("2026-11-22"));
        for not in ["acme", "2026-11", "2026-13-01", "2026-11-22x", "20261122"] {
            assert!(!is_date_key(not), "{not}");
        }
    }

    #[test]
    fn scoped_names_are_checked() {
        assert_eq!(scoped_name("t", "acme").unwrap(), "t@acme");
        assert!(scoped_name("a@b", "c").is_err());
        assert!(scoped_name("t", "").is_err());
        assert!(scoped_name("t", "a\0").is_err());
        assert!(scoped_name("$t", "a").is_err());
        assert!(scoped_name(&"t".repeat(150), &"s".repeat(50)).is_err());
    }

    #[test]
    fn scope_ranges_hold_exactly_the_scopes() {
        let (from, to) = scope_range("tickets").unwrap();
        for inside in ["tickets@", "tickets@2026-01-01", "tickets@\u{10FFFF}"] {
            assert!(from.as_str() <= inside && inside < to.as_str(), "{inside}");
        }
        for outside in ["tickets", "tickets2", "ticketsA", "tickets?", "ticket"] {
            assert!(
                !(from.as_str() <= outside && outside < to.as_str()),
                "{outside}"
            );
        }
    }
}
