//! `alter`: change the shape of a live sequence (step, bounds, cycle) and its format while other
//! processes draw from it.
//!
//! The change is one compare-and-set on the exact state it was computed from (incarnation,
//! version, value and shape), through the draws' own loop. Every other writer's filter
//! carries the shape it computed with, so after `alter` returns no write computed from the
//! old shape can match: every path re-reads, and every number reserved from then on follows
//! the new shape. Numbers already reserved in blocks before the alter are still handed out
//! by their block clients (they were valid when reserved).

use crate::arith;
use crate::dispenser::{Dispenser, Sequence};
use crate::document::{SequenceState, Stored};
use crate::error::{Error, Result};
use crate::format::Format;
use crate::history::record::sequence_state;
use crate::history::subject::Target;
use crate::spec::{Spec, validate_name};
use crate::store::ShapeChange;
use crate::strategy::{Decision, Drawer};

/// What [`Sequence::alter`](crate::Sequence::alter) changes; fields left `None` stay as they are.
///
/// # Example
///
/// ```
/// use dispenser::sequence::Alter;
///
/// let wider = Alter::default().with_max(9_999).with_cycle(true);
/// assert_eq!((wider.max, wider.cycle, wider.step), (Some(9_999), Some(true), None));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Alter {
    /// The new step (not 0). A stripe's step cannot change (it would leave its class).
    pub step: Option<i64>,
    /// The new lower bound.
    pub min: Option<i64>,
    /// The new upper bound.
    pub max: Option<i64>,
    /// Whether to wrap at the bound. A stripe cannot cycle.
    pub cycle: Option<bool>,
    /// `Some(Some(f))` sets the serial format, `Some(None)` removes it.
    pub format: Option<Option<Format>>,
    /// Set by [`AlterSequence::force`](crate::sequence::AlterSequence::force) (the force is
    /// the operation's option, not part of the change).
    pub(crate) force: bool,
}

impl Alter {
    /// Sets the new step.
    #[must_use]
    pub fn with_step(mut self, step: i64) -> Self {
        self.step = Some(step);
        self
    }
    /// Sets the new lower bound.
    #[must_use]
    pub fn with_min(mut self, min: i64) -> Self {
        self.min = Some(min);
        self
    }
    /// Sets the new upper bound.
    #[must_use]
    pub fn with_max(mut self, max: i64) -> Self {
        self.max = Some(max);
        self
    }
    /// Sets whether the sequence wraps.
    #[must_use]
    pub fn with_cycle(mut self, cycle: bool) -> Self {
        self.cycle = Some(cycle);
        self
    }
    /// Sets (`Some`) or removes (`None`) the serial format.
    #[must_use]
    pub fn with_format(mut self, format: Option<Format>) -> Self {
        self.format = Some(format);
        self
    }
    #[cfg(test)]
    fn with_force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.step.is_none()
            && self.min.is_none()
            && self.max.is_none()
            && self.cycle.is_none()
            && self.format.is_none()
    }
}

/// The new value and shape for `stored`, or why the change is refused.
fn plan(name: &str, stored: &Stored, change: &Alter) -> Result<(i64, Spec)> {
    let old = stored.spec;
    let spec = Spec::default()
        .with_step(change.step.unwrap_or(old.step))
        .with_min(change.min.unwrap_or(old.min))
        .with_max(change.max.unwrap_or(old.max))
        .with_cycle(change.cycle.unwrap_or(old.cycle));
    let invalid = |reason: String| Error::InvalidSpec {
        name: name.to_owned(),
        reason,
    };
    if spec.step == 0 {
        return Err(invalid("step must not be 0".into()));
    }
    if spec.min >= spec.max {
        return Err(invalid(format!(
            "min ({}) must be below max ({})",
            spec.min, spec.max
        )));
    }
    if let Some(stripe) = stored.origin.stripe {
        if spec.step != old.step {
            return Err(invalid(format!(
                "it is stripe {} of {}: a new step would move it out of its residue class \
                 and onto another stripe's numbers",
                stripe.index, stripe.count
            )));
        }
        if spec.cycle {
            return Err(invalid(
                "it is a stripe: a stripe that wraps leaves its residue class".into(),
            ));
        }
    }
    if spec.step.signum() != old.step.signum() {
        // Every number on the other side of the value was issued (or skipped): going back
        // over them can never keep the promise, force or not.
        return Err(invalid(format!(
            "a step of {} turns it from {} to {}: it would issue again the numbers it \
             already issued; force does not allow this — create a new sequence instead",
            spec.step,
            direction(old.step),
            direction(spec.step)
        )));
    }
    if spec.cycle && !old.cycle && !change.force {
        let (far, back_to) = if spec.step > 0 {
            (spec.max, spec.min)
        } else {
            (spec.min, spec.max)
        };
        return Err(invalid(format!(
            "turning cycle on makes it wrap after {far} and issue {back_to}, {}, … again: \
             numbers it issued before will repeat after the wrap; give force to accept that, \
             or create a new cyclic sequence",
            i128::from(back_to) + i128::from(spec.step)
        )));
    }
    let value = stored.value;
    let behind = arith::is_behind(&spec, value);
    let beyond = arith::is_beyond(&spec, value);
    let new_value = if behind {
        // The sequence has not reached the new start: it moves forward to it (a gap, never
        // a repeat).
        if stored.origin.stripe.is_some() {
            return Err(invalid(format!(
                "its value {value} lies before the new bound; moving a stripe would leave its \
                 residue class: advance the striped sequence as a whole first (StripedSequence::advance_to, or `dispenser advance`)"
            )));
        }
        arith::value_before_first(&spec).map_err(|floor| {
            invalid(format!(
                "the value before the first number ({floor}) does not fit in 64 bits"
            ))
        })?
    } else {
        // Beyond the new bound (only with force, unless it already was beyond the old one):
        // the value stays where it is, so the sequence is exhausted (or wraps next) and a
        // bound raised later continues after the last issued number — never a repeat.
        if beyond && !change.force && !arith::is_beyond(&old, value) {
            let far = if spec.step > 0 { spec.max } else { spec.min };
            return Err(invalid(format!(
                "the last issued number {value} lies beyond the new bound {far}; {}",
                if spec.cycle {
                    "with force the next number wraps (this cycle ends early)".to_owned()
                } else {
                    format!(
                        "with force the sequence is exhausted at once (a bound raised again \
                         later continues after {value})"
                    )
                }
            )));
        }
        value
    };
    debug_assert!(arith::value_is_plausible(&spec, new_value));
    Ok((new_value, spec))
}

fn direction(step: i64) -> &'static str {
    if step > 0 { "ascending" } else { "descending" }
}

impl Sequence {
    /// [`Sequence::alter`] once its options are set.
    pub(crate) async fn alter_now(&self, change: Alter) -> Result<SequenceState> {
        self.dispenser()
            .alter_through(self.drawer(), self.name(), change)
            .await
    }
}

/// An alter that changes nothing is refused.
fn refuse_empty(name: &str, change: &Alter) -> Result<()> {
    if change.is_empty() {
        return Err(Error::InvalidArgument {
            what: "alter".to_owned(),
            reason: format!(
                "nothing to change for sequence {name:?}: give a step, min, max, cycle or format"
            ),
        });
    }
    Ok(())
}

impl Dispenser {
    /// [`Sequence::alter`](crate::Sequence::alter) by name, through a handle opened for it.
    pub(crate) async fn alter(&self, name: &str, change: Alter) -> Result<SequenceState> {
        validate_name(name)?;
        refuse_empty(name, &change)?;
        let handle = self.open(name).await?;
        self.alter_through(handle.drawer(), name, change).await
    }

    /// [`Sequence::alter`](crate::Sequence::alter) through the handle that asks: its write
    /// is the handle's, so the handle remembers the state it wrote and draws by the new shape
    /// at once, without a lost race and a read.
    async fn alter_through(
        &self,
        drawer: &Drawer,
        name: &str,
        change: Alter,
    ) -> Result<SequenceState> {
        refuse_empty(name, &change)?;
        // A change the state refuses is refused before anything is written, history included.
        let before = self.peek(name).await?;
        check(&before, &change)?;
        self.recorder()
            .run(
                &Target::sequence(name),
                "alter",
                params(&change),
                Some(sequence_state(&before)),
                self.alter_now(drawer, name, change),
                |s| Some(sequence_state(s)),
            )
            .await
    }

    /// [`Sequence::alter`](crate::Sequence::alter) without its history.
    async fn alter_now(&self, drawer: &Drawer, name: &str, change: Alter) -> Result<SequenceState> {
        let (_, written) = drawer
            .update(true, None, |stored, _| {
                let (value, spec) = plan(name, stored, &change)?;
                Ok(Decision::Write {
                    value,
                    wrapped: false,
                    shape: Some(ShapeChange {
                        spec,
                        format: change.format.clone(),
                    }),
                    issued: 0,
                    then: (),
                })
            })
            .await?;
        let read = self.peek(name).await;
        match written {
            Some(_) => read.map_err(|e| e.after_write(&format!("sequence {name:?} altered"))),
            None => read,
        }
    }
}

/// Whether `change` applies to the sequence in state `st` (what [`Sequence::alter`](crate::Sequence::alter) would
/// refuse, without writing).
pub(crate) fn check(st: &SequenceState, change: &Alter) -> Result<()> {
    plan(&st.name, &st.stored(), change).map(|_| ())
}

/// `change` as the history records its parameters.
fn params(change: &Alter) -> bson::Document {
    let mut d = bson::Document::new();
    if let Some(step) = change.step {
        d.insert("step", step);
    }
    if let Some(min) = change.min {
        d.insert("min", min);
    }
    if let Some(max) = change.max {
        d.insert("max", max);
    }
    if let Some(cycle) = change.cycle {
        d.insert("cycle", cycle);
    }
    match &change.format {
        Some(Some(f)) => {
            d.insert("format", f.as_str());
        }
        Some(None) => {
            d.insert("format", bson::Bson::Null);
        }
        None => {}
    }
    d.insert("force", change.force);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Origin;

    fn stored(spec: Spec, value: i64) -> Stored {
        Stored {
            spec,
            value,
            version: 3,
            cycles: 0,
            incarnation: None,
            origin: Origin::default(),
        }
    }

    #[test]
    fn plans_keep_the_value_move_forward_or_refuse() {
        let s = stored(Spec::default().with_max(99), 60);
        assert_eq!(
            plan("s", &s, &Alter::default().with_max(200)).unwrap().0,
            60
        );
        let err = plan("s", &s, &Alter::default().with_max(50)).unwrap_err();
        assert!(err.to_string().contains("beyond the new bound 50"), "{err}");
        // Forced, the value stays beyond the bound: exhausted now, and a bound raised again
        // later continues after 60 (never a repeat).
        let forced = Alter::default().with_max(50).with_force(true);
        let (value, spec) = plan("s", &s, &forced).unwrap();
        assert_eq!((value, spec.max), (60, 50));
        let exhausted = stored(spec, value);
        assert_eq!(
            plan("s", &exhausted, &Alter::default().with_step(2))
                .unwrap()
                .0,
            60,
            "already beyond: no force needed to change something else"
        );
        assert_eq!(
            plan("s", &exhausted, &Alter::default().with_max(100))
                .unwrap()
                .0,
            60
        );
        // A raised min moves the sequence forward to it.
        assert_eq!(plan("s", &s, &Alter::default().with_min(80)).unwrap().0, 79);
        for bad in [
            Alter::default().with_step(0),
            Alter::default().with_min(99),
            Alter::default().with_max(0),
        ] {
            assert!(matches!(
                plan("s", &s, &bad),
                Err(Error::InvalidSpec { .. })
            ));
        }
    }

    #[test]
    fn a_step_of_the_other_sign_is_refused_even_with_force() {
        let up = stored(Spec::default(), 5);
        let down = stored(
            Spec::default()
                .with_step(-1)
                .with_min(-100)
                .with_max(0)
                .with_start(0),
            -5,
        );
        for (s, step) in [(&up, -1), (&up, -7), (&down, 1), (&down, 3)] {
            for force in [false, true] {
                let change = Alter::default().with_step(step).with_force(force);
                let err = plan("s", s, &change).unwrap_err();
                assert!(matches!(err, Error::InvalidSpec { .. }), "{err}");
                let text = err.to_string();
                assert!(
                    text.contains(&format!("step of {step}")) && text.contains("new sequence"),
                    "{text}"
                );
            }
        }
        // The same sign, any size, is fine.
        assert!(plan("s", &up, &Alter::default().with_step(9)).is_ok());
        assert!(plan("s", &down, &Alter::default().with_step(-9)).is_ok());
    }

    #[test]
    fn turning_cycle_on_needs_force_and_says_numbers_repeat() {
        let s = stored(Spec::default().with_max(99), 60);
        let err = plan("s", &s, &Alter::default().with_cycle(true)).unwrap_err();
        assert!(matches!(err, Error::InvalidSpec { .. }), "{err}");
        assert!(err.to_string().contains("repeat after the wrap"), "{err}");
        let forced = Alter::default().with_cycle(true).with_force(true);
        let (value, spec) = plan("s", &s, &forced).unwrap();
        assert!(spec.cycle && value == 60);
        // Already cyclic: nothing to force; turning it off never needs force.
        let cyclic = stored(Spec::default().with_max(99).with_cycle(true), 60);
        assert!(plan("s", &cyclic, &Alter::default().with_cycle(true)).is_ok());
        assert!(plan("s", &cyclic, &Alter::default().with_cycle(false)).is_ok());
    }

    #[test]
    fn stripes_keep_their_step_and_never_cycle() {
        let mut s = stored(Spec::default().with_step(4), 9);
        s.origin.stripe = Some(crate::document::StripeId::new(1, 4));
        assert!(plan("s~1", &s, &Alter::default().with_step(8)).is_err());
        assert!(plan("s~1", &s, &Alter::default().with_cycle(true)).is_err());
        assert!(plan("s~1", &s, &Alter::default().with_max(1000)).is_ok());
    }
}
