//! What a queue is: its ticket range, how tickets are labelled, its time zone, and the
//! ticket a serial shows. No database here (what operations do is in `state`).
//!
//! A queue counts the tickets **taken** and **served** since it was created. Both counters
//! only grow and never wrap; the ticket a person holds is derived from them and the range,
//! like a cyclic sequence: tickets `min+1 … max`, then `min`, and round again. The `k`-th
//! ticket taken (`k` from 1) shows `min + k mod capacity`, where `capacity = max - min + 1`
//! is the number of distinct tickets. The tickets waiting are those of `served+1 ..= taken`,
//! and once a ticket was called, the last one called (`served`) is shown as "now serving".
//! A take is allowed only while the tickets held — those waiting, and the one shown — stay
//! within `capacity`, so they are at most `capacity` consecutive ones and never show the same
//! number twice: no one is handed the ticket on the board. A fresh queue (nothing called)
//! takes its whole range.

use jiff::tz::TimeZone;

use crate::error::{Error, Result};
use crate::format::Format;

/// The ticket range of a queue: tickets `min+1 … max`, then `min`, round again.
///
/// Beside the range: an optional label [`Format`] (`A-{n:03}` shows ticket 7 as `A-007`; the
/// numbers stay integers), the time zone of the queue's local day and hours (today's counters,
/// the hourly activity), and whether the queue is **daily**: each local day it starts again at
/// its first ticket, never handing out a number still held by someone waiting from the day
/// before.
///
/// # Default
///
/// `min 0, max 99`: tickets 1 … 99, 0, 1 …, at most 100 people waiting; no format, UTC, not
/// daily.
///
/// # Example
///
/// ```
/// use dispenser::queue::QueueSpec;
///
/// let ten = QueueSpec::default().with_max(9); // tickets 1 … 9, 0
/// ten.validate("lobby")?;
/// assert_eq!(ten.capacity(), 10);
/// assert_eq!(ten.ticket(1), 1);
/// assert_eq!(ten.ticket(10), 0);
/// assert_eq!(ten.ticket(11), 1);
/// # Ok::<(), dispenser::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueSpec {
    /// The lowest ticket (shown last in a round). Defaults to 0.
    pub min: i64,
    /// The highest ticket. Defaults to 99.
    pub max: i64,
    /// How tickets are shown (`label` in the answers); `None` shows the number.
    pub format: Option<Format>,
    /// The IANA time zone of the queue's local day and hours. Defaults to `UTC`.
    pub time_zone: String,
    /// Whether each local day starts again at the first ticket. Defaults to false.
    pub daily: bool,
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec {
            min: 0,
            max: 99,
            format: None,
            time_zone: "UTC".to_owned(),
            daily: false,
        }
    }
}

/// What [`Queue::alter`](crate::queue::Queue::alter) changes; fields left `None` stay as
/// they are.
///
/// # Example
///
/// ```
/// use dispenser::queue::QueueAlter;
/// let bigger = QueueAlter::default().with_max(199);
/// assert_eq!(bigger.max, Some(199));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueAlter {
    /// The highest ticket.
    pub max: Option<i64>,
}

impl QueueAlter {
    /// Sets the highest ticket.
    #[must_use]
    pub fn with_max(mut self, max: i64) -> Self {
        self.max = Some(max);
        self
    }
}

impl QueueSpec {
    /// Sets the lowest ticket. Defaults to 0.
    #[must_use]
    pub const fn with_min(mut self, min: i64) -> Self {
        self.min = min;
        self
    }

    /// Sets the highest ticket. Defaults to 99.
    #[must_use]
    pub const fn with_max(mut self, max: i64) -> Self {
        self.max = max;
        self
    }

    /// Sets the label format (see [`Format`]; `{scope}` is not allowed in a queue's).
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::{Format, queue::QueueSpec};
    /// let spec = QueueSpec::default().with_format(Format::parse("A-{n:03}")?);
    /// assert_eq!(spec.label(7), "A-007");
    /// # Ok::<(), dispenser::Error>(())
    /// ```
    #[must_use]
    pub fn with_format(mut self, format: Format) -> Self {
        self.format = Some(format);
        self
    }

    /// Sets the time zone of the local day and hours. The queue stores it by its IANA name,
    /// so it must have one ([`TimeZone::get`], not a fixed offset; checked by
    /// [`QueueSpec::validate`]).
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::{jiff::tz::TimeZone, queue::QueueSpec};
    /// let paris = TimeZone::get("Europe/Paris").expect("a known zone");
    /// assert_eq!(QueueSpec::default().with_time_zone(&paris).time_zone, "Europe/Paris");
    /// let fixed = TimeZone::fixed(dispenser::jiff::tz::offset(2));
    /// assert!(QueueSpec::default().with_time_zone(&fixed).validate("lobby").is_err());
    /// ```
    #[must_use]
    pub fn with_time_zone(mut self, time_zone: &TimeZone) -> Self {
        self.time_zone = time_zone.iana_name().unwrap_or_default().to_owned();
        self
    }

    /// Makes the queue daily: each local day (in its time zone) starts again at the first
    /// ticket.
    #[must_use]
    pub fn with_daily(mut self, daily: bool) -> Self {
        self.daily = daily;
        self
    }

    /// The ticket as people see it: the format applied, or the number.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::queue::QueueSpec;
    /// assert_eq!(QueueSpec::default().label(7), "7");
    /// ```
    pub fn label(&self, ticket: i64) -> String {
        match &self.format {
            Some(f) => f.render(ticket, None),
            None => ticket.to_string(),
        }
    }

    /// The time zone, `None` when the name is not a known zone.
    pub(crate) fn zone(&self) -> Option<TimeZone> {
        TimeZone::get(&self.time_zone).ok()
    }

    /// Checks the range for the queue `name` (the name is only used in the message).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `min >= max`, or when the range holds more than
    /// 2⁶³ − 1 tickets (`max - min + 1` must fit in a 64-bit integer).
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::queue::QueueSpec;
    ///
    /// let err = QueueSpec::default().with_min(10).with_max(5).validate("lobby").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid range of queue \"lobby\": min (10) must be below max (5)"
    /// );
    /// ```
    pub fn validate(&self, name: &str) -> Result<()> {
        let fail = |reason: String| {
            Err(Error::invalid_argument(
                format!("range of queue {name:?}"),
                reason,
            ))
        };
        if self.min >= self.max {
            return fail(format!(
                "min ({}) must be below max ({})",
                self.min, self.max
            ));
        }
        if self.capacity_wide() > i128::from(i64::MAX) {
            return fail(format!(
                "{}..={} holds {} tickets; at most 2^63-1 (9223372036854775807) fit",
                self.min,
                self.max,
                self.capacity_wide()
            ));
        }
        if let Some(f) = &self.format
            && f.uses_scope()
        {
            return Err(Error::invalid_argument(
                format!("format of queue {name:?}"),
                format!(
                    "{:?} has {{scope}}, which a queue has not; use {{n}} with text around it, such as A-{{n:03}}",
                    f.as_str()
                ),
            ));
        }
        if self.zone().is_none() {
            return Err(Error::invalid_argument(
                format!("time zone of queue {name:?}"),
                if self.time_zone.is_empty() {
                    "the zone has no IANA name, and a queue stores its zone by name: use \
                     TimeZone::get with a name such as UTC or Europe/Paris"
                        .to_owned()
                } else {
                    format!(
                        "{:?} is not a known IANA time zone (such as UTC or Europe/Paris)",
                        self.time_zone
                    )
                },
            ));
        }
        Ok(())
    }

    fn capacity_wide(&self) -> i128 {
        i128::from(self.max) - i128::from(self.min) + 1
    }

    /// How many distinct tickets the range holds: `max - min + 1`, the most people that may
    /// wait at once. Saturates at `u64::MAX` for a range [`QueueSpec::validate`] refuses.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::queue::QueueSpec;
    /// assert_eq!(QueueSpec::default().capacity(), 100);
    /// assert_eq!(QueueSpec::default().with_min(1).with_max(3).capacity(), 3);
    /// ```
    pub fn capacity(&self) -> u64 {
        u64::try_from(self.capacity_wide().max(0)).unwrap_or(u64::MAX)
    }

    /// The ticket the `serial`-th ticket taken shows (`serial` from 1): `min + serial mod
    /// capacity` — `min+1` first, `max` at `capacity - 1`, `min` at `capacity`, and round
    /// again.
    ///
    /// # Example
    ///
    /// ```
    /// use dispenser::queue::QueueSpec;
    /// let s = QueueSpec::default(); // 1 … 99, 0
    /// assert_eq!((s.ticket(1), s.ticket(99), s.ticket(100), s.ticket(101)), (1, 99, 0, 1));
    /// ```
    pub fn ticket(&self, serial: u64) -> i64 {
        let capacity = self.capacity_wide().max(1);
        let offset = i128::from(serial) % capacity;
        // Within min..=max by construction.
        i64::try_from(i128::from(self.min) + offset).unwrap_or(self.min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_go_round_like_a_cyclic_sequence() {
        let s = QueueSpec::default().with_max(9);
        let shown: Vec<i64> = (1..=21).map(|k| s.ticket(k)).collect();
        assert_eq!(
            shown,
            [
                1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1
            ]
        );
        let neg = QueueSpec::default().with_min(-2).with_max(1);
        assert_eq!(
            (1..=5).map(|k| neg.ticket(k)).collect::<Vec<_>>(),
            [-1, 0, 1, -2, -1]
        );
        // The widest range: 2^63-1 tickets; u64::MAX = 2·(2^63-1) + 1 takes end one past min.
        let wide = QueueSpec::default().with_min(i64::MIN + 2).with_max(0);
        assert!(wide.validate("q").is_ok());
        assert_eq!(wide.capacity(), i64::MAX as u64);
        assert_eq!(wide.ticket(u64::MAX), i64::MIN + 3);
        assert_eq!(wide.ticket(i64::MAX as u64), i64::MIN + 2);
        assert!(wide.with_min(i64::MIN + 1).validate("q").is_err());
    }

    #[test]
    fn bad_ranges_are_named() {
        for (spec, needle) in [
            (
                QueueSpec::default().with_min(5).with_max(5),
                "min (5) must be below max (5)",
            ),
            (
                QueueSpec::default().with_min(9).with_max(1),
                "min (9) must be below max (1)",
            ),
            (
                QueueSpec::default().with_min(i64::MIN).with_max(0),
                "holds 9223372036854775809 tickets",
            ),
            (
                QueueSpec::default().with_min(-1).with_max(i64::MAX),
                "holds 9223372036854775809 tickets",
            ),
        ] {
            let e = spec.validate("lobby").unwrap_err();
            assert!(e.kind() == crate::error::ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
            assert!(e.to_string().contains("\"lobby\""), "{e}");
        }
    }
}
