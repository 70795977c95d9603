//! Pure sequence arithmetic: where every number is computed. No I/O.
//!
//! Both strategies, the block allocator and the admin operations call these functions, so the
//! rules (next = value + step, wrap at the bound with `cycle`, `Exhausted` otherwise, never an
//! integer overflow) are written exactly once and tested without a server. All intermediate
//! arithmetic is done in `i128`, so no input can overflow.

use crate::spec::Spec;

/// A contiguous run of numbers issued by one write: `first`, `first + step`, …, `last`.
///
/// # Example
///
/// ```
/// use dispenser::sequence::Run;
///
/// let run = Run::new(5, 3, 2);
/// assert_eq!(run.last(), 9);
/// assert_eq!(run.into_iter().collect::<Vec<_>>(), vec![5, 7, 9]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a run holds numbers already issued: dropping it leaves them a gap"]
pub struct Run {
    first: i64,
    count: u64,
    step: i64,
}

impl Run {
    /// A run of `count` numbers starting at `first`, `step` apart.
    ///
    /// # Panics
    ///
    /// Panics if `count` is 0 or if the last number does not fit in an `i64`; runs returned by
    /// the library always satisfy both.
    pub fn new(first: i64, count: u64, step: i64) -> Self {
        assert!(count > 0, "a run has at least one number");
        let last = i128::from(first) + (i128::from(count) - 1) * i128::from(step);
        assert!(
            i64::try_from(last).is_ok(),
            "the last number of a run must fit in i64"
        );
        Run { first, count, step }
    }

    /// The first number of the run.
    pub fn first(&self) -> i64 {
        self.first
    }

    /// The last number of the run.
    pub fn last(&self) -> i64 {
        self.nth_number(self.count - 1)
    }

    /// How many numbers the run holds (at least 1).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The distance between consecutive numbers.
    pub fn step(&self) -> i64 {
        self.step
    }

    /// The `i`-th number of the run (0-based); `i` must be below [`Run::count`].
    pub(crate) fn nth_number(&self, i: u64) -> i64 {
        debug_assert!(i < self.count);
        let n = i128::from(self.first) + i128::from(i) * i128::from(self.step);
        // In range by construction (checked in `new`).
        n as i64
    }
}

impl IntoIterator for Run {
    type Item = i64;
    type IntoIter = RunIter;

    fn into_iter(self) -> RunIter {
        RunIter { run: self, next: 0 }
    }
}

/// Iterator over the numbers of a [`Run`].
#[derive(Clone, Debug)]
pub struct RunIter {
    run: Run,
    next: u64,
}

impl Iterator for RunIter {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        if self.next >= self.run.count {
            return None;
        }
        let n = self.run.nth_number(self.next);
        self.next += 1;
        Some(n)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.run.count - self.next).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

impl ExactSizeIterator for RunIter {}

/// The outcome of drawing numbers from a stored value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Draw {
    /// The numbers issued.
    pub run: Run,
    /// The value to store: the last number issued.
    pub new_value: i64,
    /// Whether the run starts after a wrap (then `cycles` goes up by one).
    pub wrapped: bool,
}

/// Not enough numbers left in a non-cyclic sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// How many numbers are left.
    pub remaining: u64,
}

/// The first number after `value`, wrapping with `cycle`; `None` when the sequence is
/// exhausted (the next number would pass the bound and `cycle` is off).
fn first_after(spec: &Spec, value: i64) -> Option<(i64, bool)> {
    let next = i128::from(value) + i128::from(spec.step);
    let within = if spec.step > 0 {
        next <= i128::from(spec.max)
    } else {
        next >= i128::from(spec.min)
    };
    if within {
        // Within [min, max] (for a plausible value), so it fits in i64.
        Some((next as i64, false))
    } else if spec.cycle {
        Some((if spec.step > 0 { spec.min } else { spec.max }, true))
    } else {
        None
    }
}

/// How many numbers there are from `first` (inclusive) to the far bound.
fn available_from(spec: &Spec, first: i64) -> u64 {
    let span = if spec.step > 0 {
        i128::from(spec.max) - i128::from(first)
    } else {
        i128::from(first) - i128::from(spec.min)
    };
    let n = span / i128::from(spec.step).abs() + 1;
    u64::try_from(n.max(0)).unwrap_or(u64::MAX)
}

/// Draws `n` (≥ 1) numbers after `value`.
///
/// Without `cycle` the whole request must fit before the bound, else [`Shortfall`]. With
/// `cycle` the run never crosses the wrap: it stops at the bound and may hold fewer than `n`.
pub(crate) fn draw(spec: &Spec, value: i64, n: u64) -> Result<Draw, Shortfall> {
    debug_assert!(n > 0);
    let Some((first, wrapped)) = first_after(spec, value) else {
        return Err(Shortfall { remaining: 0 });
    };
    let available = available_from(spec, first);
    let count = if n <= available {
        n
    } else if spec.cycle {
        available
    } else {
        return Err(Shortfall {
            remaining: available,
        });
    };
    let run = Run::new(first, count, spec.step);
    Ok(Draw {
        run,
        new_value: run.last(),
        wrapped,
    })
}

/// How many numbers are left before the sequence wraps (with `cycle`) or is exhausted.
pub(crate) fn remaining(spec: &Spec, value: i64) -> u64 {
    match first_after(spec, value) {
        Some((_, true)) | None => 0,
        Some((first, false)) => available_from(spec, first),
    }
}

/// Whether `value` is one a valid history can produce: one step before the first number of a
/// sequence that has issued nothing yet, within `[min, max]`, or beyond the far bound (a
/// forced `alter` that lowered the bound below the last issued number leaves the value there:
/// the sequence is exhausted, or wraps on its next number).
pub(crate) fn value_is_plausible(spec: &Spec, value: i64) -> bool {
    !is_behind(spec, value)
}

/// Whether `value` lies before the value that precedes the first number (`min - step`
/// ascending, `max - step` descending): a sequence standing there would issue numbers outside
/// its bounds.
pub(crate) fn is_behind(spec: &Spec, value: i64) -> bool {
    let v = i128::from(value);
    let floor = floor(spec);
    if spec.step > 0 { v < floor } else { v > floor }
}

/// Whether `value` lies beyond the far bound (above `max` ascending, below `min`
/// descending).
pub(crate) fn is_beyond(spec: &Spec, value: i64) -> bool {
    if spec.step > 0 {
        value > spec.max
    } else {
        value < spec.min
    }
}

/// The value one step before the first number (`min - step` ascending, `max - step`
/// descending), which may not fit in 64 bits.
fn floor(spec: &Spec) -> i128 {
    let near = if spec.step > 0 { spec.min } else { spec.max };
    i128::from(near) - i128::from(spec.step)
}

/// The stored value of a sequence that has issued nothing yet, from its near bound; `Err`
/// with that value when it does not fit in 64 bits.
pub(crate) fn value_before_first(spec: &Spec) -> Result<i64, i128> {
    let f = floor(spec);
    i64::try_from(f).map_err(|_| f)
}

/// The stored value that moves a sequence standing at `value` past `n` without leaving its
/// residue class (the numbers `value + k·step`): the value from which the next number is the
/// first of the class beyond `n` (above it when ascending, below when descending). For step
/// ±1 that is `n` itself. The result lies between `n` and `n ∓ (|step| - 1)`, so within the
/// bounds whenever `n` is.
pub(crate) fn advance_value(step: i64, value: i64, n: i64) -> i64 {
    let s = i128::from(step).abs();
    let (v, n) = (i128::from(value), i128::from(n));
    let out = if step > 0 {
        n - (n - v).rem_euclid(s)
    } else {
        n + (v - n).rem_euclid(s)
    };
    // Between n - (|step| - 1) and n + (|step| - 1): fits when n does, except at the very
    // edge of the 64-bit range, where clamping stays in the class's bounds anyway.
    i64::try_from(out).unwrap_or(if step > 0 { i64::MIN } else { i64::MAX })
}

/// Whether `number` lies in the residue class of a sequence standing at `value`: whether
/// `number = value + k·step` for some integer `k`.
pub(crate) fn in_class(step: i64, value: i64, number: i64) -> bool {
    (i128::from(number) - i128::from(value)).rem_euclid(i128::from(step).abs()) == 0
}

/// The first number of the class of a sequence standing at `value` at or beyond `n` (at or
/// above `n` ascending, at or below descending), if it fits in 64 bits.
pub(crate) fn class_at_or_beyond(step: i64, value: i64, n: i64) -> Option<i64> {
    let s = i128::from(step).abs();
    let (v, n) = (i128::from(value), i128::from(n));
    let out = if step > 0 {
        n + (v - n).rem_euclid(s)
    } else {
        n - (n - v).rem_euclid(s)
    };
    i64::try_from(out).ok()
}

/// The most numbers one block may reserve from a sequence standing at `value`: `share` of
/// the numbers left before the bound (non-cyclic), or of one whole cycle (cyclic: its numbers
/// come back after the wrap), rounded down, but at least 1. So a crash of a block client burns
/// at most that share of what is left, and a burst of fast callers cannot exhaust a bounded
/// sequence in one reservation.
pub(crate) fn block_limit(spec: &Spec, value: i64, share: f64) -> u64 {
    let room = if spec.cycle {
        let near = if spec.step > 0 { spec.min } else { spec.max };
        available_from(spec, near)
    } else {
        remaining(spec, value)
    };
    share_of(room, share)
}

/// `share` of `room`, rounded down, at least 1 (`as` saturates).
fn share_of(room: u64, share: f64) -> u64 {
    ((share * room as f64).floor() as u64).max(1)
}

/// The conditional increment of a block of `n` under a [`block_limit`] of `share`: how many
/// numbers it asks for, and how many must be left before the bound for that to be within the
/// limit (the increment's filter admits only values with that many left). `None` when no
/// such count fits in 64 bits (the compare-and-set then decides from a read).
pub(crate) fn limited_increment(spec: &Spec, n: u64, share: f64) -> Option<(u64, u64)> {
    if spec.cycle {
        // The limit does not depend on the value: ask for no more than it.
        let n = n.min(block_limit(spec, 0, share));
        return Some((n, n));
    }
    if n <= 1 {
        return Some((n, n));
    }
    // The fewest numbers left with share_of(left) >= n.
    let guess = (n as f64 / share).ceil();
    // Also refuses NaN (the share is validated, but be sure).
    if guess.partial_cmp(&(u64::MAX as f64)) != Some(std::cmp::Ordering::Less) {
        return None;
    }
    let mut left = (guess as u64).max(n);
    while share_of(left, share) < n {
        left = left.checked_add(1)?;
    }
    // Rounding may have put the guess past the fewest (`3 / 0.1` is 30.000000000000004):
    // step back to it.
    while left > n && share_of(left - 1, share) >= n {
        left -= 1;
    }
    Some((n, left))
}

/// The stored values from which `n` numbers can be issued by a plain increment of
/// `n * step`, without a wrap and without passing the bound: `Some((low, high))`, inclusive.
///
/// This is the filter of the one-round-trip conditional increment: for every value in the
/// range, `value + n * step` is exactly what [`draw`] would store.
pub(crate) fn increment_window(spec: &Spec, n: u64) -> Option<(i64, i64)> {
    let step = i128::from(spec.step);
    let delta = i128::from(n) * step;
    let (low, high) = if spec.step > 0 {
        (i128::from(spec.min) - step, i128::from(spec.max) - delta)
    } else {
        (i128::from(spec.min) - delta, i128::from(spec.max) - step)
    };
    let low = low.max(i128::from(i64::MIN));
    let high = high.min(i128::from(i64::MAX));
    if low > high {
        return None;
    }
    Some((low as i64, high as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run says its step, numbers and last number for steps other than ±1, and its
    /// iterator knows exactly how many numbers are left (found by cargo-mutants: `step()`,
    /// `nth_number`'s product and `size_hint` were never checked).
    #[test]
    fn a_run_knows_its_step_numbers_and_how_many_are_left() {
        let up = Run::new(10, 4, 3);
        assert_eq!(
            (up.first(), up.last(), up.count(), up.step()),
            (10, 19, 4, 3)
        );
        assert_eq!(up.into_iter().collect::<Vec<_>>(), [10, 13, 16, 19]);
        let down = Run::new(-5, 3, -2);
        assert_eq!((down.last(), down.step()), (-9, -2));
        assert_eq!(down.into_iter().collect::<Vec<_>>(), [-5, -7, -9]);
        let mut it = up.into_iter();
        for left in (0..=4_usize).rev() {
            assert_eq!(it.size_hint(), (left, Some(left)));
            assert_eq!(it.len(), left);
            assert_eq!(it.next().is_some(), left > 0);
        }
        // The extremes: a run ending at i64::MAX, one at i64::MIN.
        let top = Run::new(i64::MAX - 4, 3, 2);
        assert_eq!(top.last(), i64::MAX);
        let bottom = Run::new(i64::MIN + 2, 2, -2);
        assert_eq!(
            bottom.into_iter().collect::<Vec<_>>(),
            [i64::MIN + 2, i64::MIN]
        );
    }

    #[test]
    fn advancing_keeps_the_residue_class() {
        // Odd numbers 1, 3, 5, …: past 10 the next is 11; past 9 it is 11 too.
        assert_eq!(advance_value(2, 1, 10) + 2, 11);
        assert_eq!(advance_value(2, 1, 9) + 2, 11);
        // Step 1: the old rule, value = n.
        assert_eq!(advance_value(1, 3, 100), 100);
        // Descending by 2 from 11 (next 9, 7, …): past 4 the next is 3.
        assert_eq!(advance_value(-2, 11, 4) - 2, 3);
        // Four stripes of step 4 all advanced to 100 stay disjoint.
        let nexts: Vec<i64> = (1..=4)
            .map(|s0| advance_value(4, s0 - 4, 100) + 4)
            .collect();
        assert_eq!(nexts, vec![101, 102, 103, 104]);
        assert!(in_class(4, -3, 101) && !in_class(4, -3, 102));
        assert_eq!(class_at_or_beyond(4, -2, 100), Some(102));
        assert_eq!(class_at_or_beyond(-3, 10, 5), Some(4));
    }

    /// Against a model, for steps other than ±1 both ways (found by cargo-mutants: the
    /// descending `class_at_or_beyond` and the ascending `advance_value` were checked on one
    /// example each, and the clamping at the edges of 64 bits never): `advance_value` is the
    /// class member at or behind `n` whose next number is beyond `n`, `class_at_or_beyond`
    /// the first class member at or beyond `n`.
    #[test]
    fn advancing_agrees_with_a_model_of_the_residue_class() {
        for step in [1_i64, 2, 3, 7, -1, -2, -3, -7] {
            for value in -20..=20 {
                for n in -30..=30 {
                    let members = (-200..=200).filter(|&w| in_class(step, value, w));
                    let (behind, beyond) = if step > 0 {
                        (
                            members.clone().filter(|&w| w <= n).max(),
                            members.filter(|&w| w >= n).min(),
                        )
                    } else {
                        (
                            members.clone().filter(|&w| w >= n).min(),
                            members.filter(|&w| w <= n).max(),
                        )
                    };
                    let at = format!("step {step}, value {value}, n {n}");
                    assert_eq!(Some(advance_value(step, value, n)), behind, "{at}");
                    assert_eq!(class_at_or_beyond(step, value, n), beyond, "{at}");
                }
            }
        }
        // At the edges of 64 bits: the member behind does not fit, the bound stands in; the
        // member beyond does not fit: none.
        assert_eq!(advance_value(3, i64::MIN + 1, i64::MIN), i64::MIN);
        assert_eq!(advance_value(-3, i64::MAX - 1, i64::MAX), i64::MAX);
        assert_eq!(class_at_or_beyond(3, i64::MAX - 1, i64::MAX), None);
        assert_eq!(class_at_or_beyond(-3, i64::MIN + 1, i64::MIN), None);
    }

    fn numbers(spec: &Spec, mut value: i64, calls: usize) -> Vec<i64> {
        let mut out = Vec::new();
        for _ in 0..calls {
            let d = draw(spec, value, 1).expect("draw");
            out.push(d.run.first());
            value = d.new_value;
        }
        out
    }

    #[test]
    fn default_counts_from_one() {
        let spec = Spec::default();
        assert_eq!(numbers(&spec, spec.start - spec.step, 3), vec![1, 2, 3]);
    }

    #[test]
    fn cyclic_tickets_wrap_to_min() {
        let spec = Spec::default().with_max(3).with_cycle(true);
        assert_eq!(numbers(&spec, 0, 7), vec![1, 2, 3, 0, 1, 2, 3]);
        let d = draw(&spec, 3, 1).unwrap();
        assert!(d.wrapped);
        assert!(!draw(&spec, 2, 1).unwrap().wrapped);
    }

    #[test]
    fn descending_wraps_to_max() {
        let spec = Spec::default()
            .with_step(-2)
            .with_min(-3)
            .with_max(4)
            .with_start(4)
            .with_cycle(true);
        assert_eq!(numbers(&spec, 6, 6), vec![4, 2, 0, -2, 4, 2]);
    }

    #[test]
    fn non_cyclic_exhausts_without_overflow() {
        let spec = Spec::default();
        assert_eq!(draw(&spec, i64::MAX, 1), Err(Shortfall { remaining: 0 }));
        let d = draw(&spec, i64::MAX - 1, 1).unwrap();
        assert_eq!(d.run.first(), i64::MAX);
        assert_eq!(
            draw(&spec, i64::MAX - 3, 4),
            Err(Shortfall { remaining: 3 })
        );
        let down = Spec::default()
            .with_step(-7)
            .with_min(i64::MIN)
            .with_max(0)
            .with_start(0);
        assert_eq!(
            draw(&down, i64::MIN + 3, 1),
            Err(Shortfall { remaining: 0 })
        );
        let huge_step = Spec::default().with_step(i64::MAX);
        assert_eq!(numbers(&huge_step, 1 - i64::MAX, 1), vec![1]);
        assert_eq!(draw(&huge_step, 1, 1), Err(Shortfall { remaining: 0 }));
    }

    #[test]
    fn cyclic_runs_stop_at_the_bound() {
        let spec = Spec::default().with_max(99).with_cycle(true);
        let d = draw(&spec, 95, 10).unwrap();
        assert_eq!((d.run.first(), d.run.last(), d.run.count()), (96, 99, 4));
        let d = draw(&spec, 99, 10).unwrap();
        assert_eq!((d.run.first(), d.run.last(), d.wrapped), (0, 9, true));
        let d = draw(&spec, 99, 1000).unwrap();
        assert_eq!(d.run.count(), 100);
    }

    #[test]
    fn remaining_counts_to_the_bound() {
        let spec = Spec::default().with_max(10).with_step(3);
        assert_eq!(remaining(&spec, -2), 4); // 1, 4, 7, 10
        assert_eq!(remaining(&spec, 10), 0);
        assert_eq!(remaining(&Spec::default(), 0), i64::MAX as u64);
        let cyc = spec.with_cycle(true);
        assert_eq!(remaining(&cyc, 10), 0);
    }

    #[test]
    fn plausibility_allows_one_step_before_start() {
        let spec = Spec::default()
            .with_min(10)
            .with_max(20)
            .with_start(10)
            .with_step(5);
        assert!(value_is_plausible(&spec, 5));
        assert!(!value_is_plausible(&spec, 4));
        assert!(value_is_plausible(&spec, 20));
        // Beyond the far bound: left there by a forced alter (exhausted, or wraps next).
        assert!(value_is_plausible(&spec, 21) && is_beyond(&spec, 21));
        assert!(!is_beyond(&spec, 20));
        let down = spec.with_step(-5).with_start(20);
        assert!(value_is_plausible(&down, 25));
        assert!(!value_is_plausible(&down, 26));
        assert!(value_is_plausible(&down, 9) && is_beyond(&down, 9));
        assert!(!is_beyond(&down, 10));
        // Nothing left beyond the bound; a cyclic one wraps.
        assert_eq!(draw(&spec, 21, 1), Err(Shortfall { remaining: 0 }));
        assert_eq!(remaining(&spec, 21), 0);
        let d = draw(&spec.with_cycle(true), 21, 1).unwrap();
        assert_eq!((d.run.first(), d.wrapped), (10, true));
        assert_eq!(value_before_first(&spec), Ok(5));
        assert_eq!(
            value_before_first(&Spec::default().with_min(i64::MIN)),
            Err(i128::from(i64::MIN) - 1)
        );
    }

    #[test]
    fn increment_window_agrees_with_draw() {
        let specs = [
            Spec::default().with_max(30).with_cycle(true),
            Spec::default().with_max(30).with_step(4),
            Spec::default()
                .with_min(-10)
                .with_max(30)
                .with_step(-3)
                .with_start(30),
            Spec::default()
                .with_min(-10)
                .with_max(30)
                .with_step(-3)
                .with_start(30)
                .with_cycle(true),
        ];
        for spec in specs {
            for n in 1..40u64 {
                let window = increment_window(&spec, n);
                for value in -20..=40 {
                    if !value_is_plausible(&spec, value) {
                        continue;
                    }
                    let inside = window.is_some_and(|(lo, hi)| lo <= value && value <= hi);
                    if inside {
                        let d = draw(&spec, value, n).expect("inside the window a draw succeeds");
                        assert!(!d.wrapped);
                        assert_eq!(d.run.count(), n);
                        assert_eq!(
                            d.new_value,
                            value + n as i64 * spec.step,
                            "{spec} {value} {n}"
                        );
                    } else {
                        // Outside the window a plain increment would be wrong: the draw wraps,
                        // falls short, or is exhausted.
                        if let Ok(d) = draw(&spec, value, n) {
                            assert!(d.wrapped || d.run.count() < n, "{spec} {value} {n}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn extreme_windows_do_not_overflow() {
        let spec = Spec::default()
            .with_min(i64::MIN + 1)
            .with_start(i64::MIN + 1);
        // The whole range, MIN + 1 ..= MAX, is u64::MAX numbers: only a fresh sequence has them.
        assert_eq!(
            increment_window(&spec, u64::MAX),
            Some((i64::MIN, i64::MIN))
        );
        assert_eq!(
            draw(&spec, i64::MIN, u64::MAX).map(|d| d.new_value),
            Ok(i64::MAX)
        );
        assert_eq!(increment_window(&spec, 1), Some((i64::MIN, i64::MAX - 1)));
        assert_eq!(increment_window(&Spec::default(), u64::MAX), None);
        assert_eq!(
            increment_window(&Spec::default(), 1),
            Some((-1, i64::MAX - 1))
        );
    }

    #[test]
    fn block_limits_take_a_share_of_what_is_left() {
        let spec = Spec::default().with_max(1000);
        assert_eq!(block_limit(&spec, 0, 0.01), 10);
        assert_eq!(block_limit(&spec, 900, 0.01), 1);
        assert_eq!(
            block_limit(&spec, 1000, 0.01),
            1,
            "exhausted: the draw says so"
        );
        assert_eq!(block_limit(&spec, 0, 1.0), 1000);
        // Cyclic: a share of one cycle, wherever the value stands.
        let cyc = spec.with_cycle(true);
        assert_eq!(block_limit(&cyc, 995, 0.1), 100);
        // The default range: no practical limit.
        assert!(block_limit(&Spec::default(), 0, 0.01) > 1 << 56);
        // The increment's filter: exactly the values whose limit admits n.
        for share in [0.01, 0.013, 0.5, 1.0] {
            for n in 1..60u64 {
                let (asked, left) = limited_increment(&spec, n, share).unwrap();
                assert_eq!(asked, n);
                let window = increment_window(&spec, left);
                for value in -1..=1000 {
                    let admitted = window.is_some_and(|(_, high)| value <= high);
                    let within =
                        block_limit(&spec, value, share) >= n && remaining(&spec, value) >= n;
                    assert_eq!(admitted, within, "share {share} n {n} value {value}");
                }
            }
        }
        assert_eq!(limited_increment(&cyc, 500, 0.01), Some((10, 10)));
        // The fewest numbers left, also where the float guess misses it by rounding: below
        // (27 / 0.009 is 3000, where 0.009 · 3000 is 26.999…) and above (3 / 0.1 is 30.000…04).
        let wide = Spec::default().with_max(1 << 40);
        assert_eq!(limited_increment(&wide, 27, 0.009), Some((27, 3001)));
        assert_eq!(limited_increment(&wide, 3, 0.1), Some((3, 30)));
        for share in [0.009, 0.1, 0.3, 0.7, 0.999] {
            for n in 2..400u64 {
                let (_, left) = limited_increment(&wide, n, share).unwrap();
                assert!(share_of(left, share) >= n, "share {share} n {n}: {left}");
                assert!(
                    left == n || share_of(left - 1, share) < n,
                    "share {share} n {n}: {left} is not the fewest"
                );
            }
        }
        // A block of 2^40 numbers: found at once, not counted up to.
        assert_eq!(
            limited_increment(&Spec::default(), 1 << 40, 0.25),
            Some((1 << 40, 1 << 42))
        );
        assert_eq!(limited_increment(&Spec::default(), u64::MAX, 0.01), None);
    }

    #[test]
    fn run_iterates() {
        let run = Run::new(i64::MAX - 2, 3, 1);
        assert_eq!(
            run.into_iter().collect::<Vec<_>>(),
            vec![i64::MAX - 2, i64::MAX - 1, i64::MAX]
        );
        assert_eq!(run.into_iter().size_hint(), (3, Some(3)));
    }
}
