//! What a queue is, computed: its ticket range, the ticket a counter shows, and what a take
//! or a call does to the counters. No database here.
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

use crate::error::{Error, Result};

/// The ticket range of a queue: tickets `min+1 … max`, then `min`, round again.
///
/// # Default
///
/// `min 0, max 99`: tickets 1 … 99, 0, 1 …, at most 100 people waiting.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueSpec {
    /// The lowest ticket (shown last in a round). Defaults to 0.
    pub min: i64,
    /// The highest ticket. Defaults to 99.
    pub max: i64,
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec { min: 0, max: 99 }
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

/// What a write does to a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Take the next `n` tickets (a family, consecutive): `taken + n`, `n ≥ 1`.
    Take(u64),
    /// Call the oldest waiting ticket: `served + 1`.
    Call,
}

/// The two counters of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counters {
    /// Tickets taken since the queue was created.
    pub taken: i64,
    /// Tickets called since the queue was created (`0 ≤ served ≤ taken`).
    pub served: i64,
}

impl Counters {
    /// How many tickets wait: `taken - served`.
    pub(crate) fn waiting(&self) -> i64 {
        self.taken - self.served
    }

    /// How many tickets are held: those waiting, and the one shown as now serving (the last
    /// called, once one was).
    pub(crate) fn held(&self) -> u64 {
        u64::try_from(self.waiting()).unwrap_or(0) + u64::from(self.served > 0)
    }
}

/// Why an operation cannot be done from a state (nothing is written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The tickets asked for do not fit beside those held (waiting, and shown).
    Full {
        waiting: u64,
        capacity: u64,
        requested: u64,
        shown: bool,
    },
    /// Nobody waits.
    Nobody { called: u64 },
    /// `taken` reached 2⁶³ − 1 (at a million tickets a second, after 292 000 years).
    Overflow,
}

impl Refusal {
    pub(crate) fn into_error(self, name: &str, spec: &QueueSpec, c: Counters) -> Error {
        match self {
            Refusal::Full {
                waiting,
                capacity,
                requested,
                shown,
            } => Error::QueueFull {
                name: name.to_owned(),
                waiting,
                shown: shown.then(|| spec.ticket(u64::try_from(c.served).unwrap_or(0))),
                requested,
                capacity,
            },
            Refusal::Nobody { called } => Error::NobodyWaiting {
                name: name.to_owned(),
                called,
            },
            Refusal::Overflow => Error::Exhausted {
                name: name.to_owned(),
                value: c.taken,
                requested: 1,
                remaining: 0,
                min: spec.min,
                max: spec.max,
                step: 1,
            },
        }
    }
}

/// The counters after `op` from `c`, or why it is refused.
pub(crate) fn apply(spec: &QueueSpec, c: Counters, op: Op) -> Result<Counters, Refusal> {
    let waiting = u64::try_from(c.waiting()).unwrap_or(0);
    match op {
        Op::Take(n) => {
            let capacity = spec.capacity();
            if c.held().saturating_add(n) > capacity {
                return Err(Refusal::Full {
                    waiting,
                    capacity,
                    requested: n,
                    shown: c.served > 0,
                });
            }
            let taken = i64::try_from(n)
                .ok()
                .and_then(|n| c.taken.checked_add(n))
                .ok_or(Refusal::Overflow)?;
            Ok(Counters { taken, ..c })
        }
        Op::Call => {
            if waiting == 0 {
                return Err(Refusal::Nobody {
                    called: u64::try_from(c.served).unwrap_or(0),
                });
            }
            Ok(Counters {
                served: c.served + 1,
                ..c
            })
        }
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
            assert!(e.is_invalid_input(), "{e}");
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
            assert!(e.to_string().contains("\"lobby\""), "{e}");
        }
    }

    /// Against a plain model (a list of waiting tickets and the ticket shown as now serving):
    /// every admitted take (of a family of 1 to 3) adds consecutive tickets that no one
    /// waiting holds and that the board does not show; calls come out in take order;
    /// refusals exactly when the family does not fit or nobody waits.
    #[test]
    fn the_counters_agree_with_a_list_of_waiting_tickets() {
        let spec = QueueSpec::default().with_min(3).with_max(6); // capacity 4
        let mut c = Counters {
            taken: 0,
            served: 0,
        };
        let mut waiting: std::collections::VecDeque<i64> = Default::default();
        let mut shown: Option<i64> = None;
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let op = if x % 5 < 3 {
                Op::Take(1 + (x >> 8) % 3)
            } else {
                Op::Call
            };
            match (op, apply(&spec, c, op)) {
                (Op::Take(n), Ok(next)) => {
                    assert_eq!(next.taken, c.taken + n as i64);
                    for serial in c.taken + 1..=next.taken {
                        let t = spec.ticket(serial as u64);
                        assert!(!waiting.contains(&t), "{t} handed out while waiting");
                        assert_ne!(Some(t), shown, "{t} handed out while shown");
                        waiting.push_back(t);
                    }
                    c = next;
                }
                (Op::Call, Ok(next)) => {
                    let called = spec.ticket(next.served as u64);
                    assert_eq!(Some(called), waiting.pop_front());
                    shown = Some(called);
                    c = next;
                }
                (
                    Op::Take(n),
                    Err(Refusal::Full {
                        waiting: w,
                        capacity,
                        ..
                    }),
                ) => {
                    assert_eq!((w, capacity), (waiting.len() as u64, 4));
                    let held = waiting.len() as u64 + u64::from(shown.is_some());
                    assert!(
                        held + n > 4,
                        "a family of {n} fitted ({held} held) but was refused"
                    );
                }
                (Op::Call, Err(Refusal::Nobody { called })) => {
                    assert!(waiting.is_empty());
                    assert_eq!(called, c.taken as u64);
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(c.waiting() as usize, waiting.len());
        }
    }

    /// The reproduction: tickets 1, 2, 0; call → 1 is shown; a take would hand out 1 again.
    #[test]
    fn the_ticket_shown_is_not_taken_again_and_a_fresh_queue_takes_its_whole_range() {
        let spec = QueueSpec::default().with_max(2); // 1, 2, 0
        let mut c = Counters {
            taken: 0,
            served: 0,
        };
        for _ in 0..3 {
            c = apply(&spec, c, Op::Take(1)).unwrap();
        }
        assert!(matches!(
            apply(&spec, c, Op::Take(1)),
            Err(Refusal::Full { .. })
        ));
        c = apply(&spec, c, Op::Call).unwrap();
        assert_eq!(spec.ticket(c.served as u64), 1);
        assert!(
            matches!(apply(&spec, c, Op::Take(1)), Err(Refusal::Full { .. })),
            "ticket 1 is on the board"
        );
        c = apply(&spec, c, Op::Call).unwrap(); // 2 shown, 0 waits
        let next = apply(&spec, c, Op::Take(1)).unwrap();
        assert_eq!(spec.ticket(next.taken as u64), 1);
        // A family of 2 does not fit beside 0 waiting and 2 shown: nothing taken.
        assert!(matches!(
            apply(&spec, c, Op::Take(2)),
            Err(Refusal::Full { .. })
        ));
        let ten = QueueSpec::default().with_max(9);
        let fresh = Counters {
            taken: 0,
            served: 0,
        };
        assert_eq!(apply(&ten, fresh, Op::Take(10)).unwrap().taken, 10);
        assert!(apply(&ten, fresh, Op::Take(11)).is_err());
    }

    #[test]
    fn taken_never_overflows() {
        let spec = QueueSpec::default();
        let c = Counters {
            taken: i64::MAX,
            served: i64::MAX,
        };
        assert_eq!(apply(&spec, c, Op::Take(1)), Err(Refusal::Overflow));
        let e = Refusal::Overflow.into_error("q", &spec, c);
        assert!(e.is_exhausted(), "{e}");
    }
}
