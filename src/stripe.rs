//! Striped sequences: unique (but not ordered) numbers at high rates, spread over several
//! documents so that writers do not all contend for one.
//!
//! A sequence `name` with `S` stripes is `S` ordinary sequence documents `name~0` …
//! `name~{S-1}`. Stripe `i` starts at `start + i·step` and moves by `S·step`, so it issues
//! exactly the numbers of its residue class: the stripes are disjoint by construction, and
//! no coordination between them is needed.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use futures::future::try_join_all;

use crate::alter::{self, Alter};
use crate::arith;
use crate::block::{BlockOptions, BlockSequence, CloseReport};
use crate::dispenser::{Dispenser, Sequence};
use crate::document::SequenceState;
pub use crate::document::StripeId;
use crate::error::{Differs, Error, Kind, Result};
use crate::history::subject::Target;
pub use crate::spec::stripe_name;
use crate::spec::{Reset, Spec, validate_name, validate_plain_name};
use crate::stats::Stats;

/// The most stripes one striped sequence may have.
///
/// # Example
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) {
/// let err = d.ensure_striped("ids", dispenser::stripe::MAX_STRIPES + 1, Default::default()).await;
/// assert!(err.is_err());
/// # }
/// ```
pub const MAX_STRIPES: u32 = 1024;

/// The spec of stripe `i` of `stripes`, or why there is none.
fn stripe_spec(name: &str, spec: &Spec, stripes: u32, i: u32) -> Result<Spec> {
    let invalid = |reason: String| Error::InvalidSpec {
        name: name.to_owned(),
        reason,
    };
    let step = spec.step.checked_mul(i64::from(stripes)).ok_or_else(|| {
        invalid(format!(
            "step ({}) × stripes ({stripes}) does not fit in a 64-bit integer",
            spec.step
        ))
    })?;
    let start = i128::from(spec.start) + i128::from(i) * i128::from(spec.step);
    let start = i64::try_from(start)
        .ok()
        .filter(|s| (spec.min..=spec.max).contains(s))
        .ok_or_else(|| {
            invalid(format!(
                "stripe {i} would start at {start}, outside the bounds {}..={}; use fewer \
                 stripes or wider bounds",
                spec.min, spec.max
            ))
        })?;
    let s = spec.with_start(start).with_step(step);
    s.validate(&stripe_name(name, i))?;
    Ok(s)
}

/// One stripe: a plain handle or a block client.
#[derive(Clone, Debug)]
enum Stripe {
    Plain(Sequence),
    Blocks(BlockSequence),
}

impl Stripe {
    async fn next(&self) -> Result<i64> {
        match self {
            Stripe::Plain(s) => s.next().await,
            Stripe::Blocks(b) => b.next().await,
        }
    }

    fn stats(&self) -> Stats {
        match self {
            Stripe::Plain(s) => s.stats(),
            Stripe::Blocks(b) => b.stats(),
        }
    }
}

#[derive(Debug)]
struct Inner {
    dispenser: Dispenser,
    name: String,
    plain: Vec<Sequence>,
    stripes: Vec<Stripe>,
    cursor: AtomicUsize,
}

/// A sequence opened by name, plain or striped ([`Dispenser::open_either`]): a closed choice,
/// so a `match` needs no other arm.
#[derive(Clone, Debug)]
pub enum Either {
    /// A plain sequence: a document of its own.
    Plain(Sequence),
    /// A striped sequence: its stripes `name~0 …`.
    Striped(StripedSequence),
}

/// A striped sequence: unique numbers from `S` disjoint stripes, for rates one document
/// cannot sustain. **Not in global order**: each call takes the next stripe round robin
/// (from a random stripe per handle), so numbers interleave across stripes.
///
/// Cheap to clone; clones share the stripes and the round-robin cursor.
///
/// # Example: uniqueness without global order
///
/// With the default spec (1, 2, 3, …) and 4 stripes, stripe `i` issues `1 + i`, `5 + i`,
/// `9 + i`, …; consecutive calls hit consecutive stripes:
///
/// ```no_run
/// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
/// use dispenser::Spec;
/// let ids = d.ensure_striped("ids", 4, Spec::default()).await?;
/// let got: Vec<i64> = vec![ids.next().await?, ids.next().await?, ids.next().await?];
/// // e.g. [3, 4, 1]: all distinct, but 1 came after 4 — there is no global order.
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct StripedSequence {
    inner: Arc<Inner>,
}

/// The stored state of every stripe of the striped sequence `name`, stripe 0 first.
async fn layout(dispenser: &Dispenser, name: &str) -> Result<Vec<SequenceState>> {
    validate_name(name)?;
    // Without its stripe 0 there is no striped sequence of that name.
    let first = match dispenser.peek(&stripe_name(name, 0)).await {
        Err(Error::NotFound { .. }) => {
            return Err(Error::NotFound {
                kind: Kind::Striped,
                name: name.to_owned(),
            });
        }
        other => other?,
    };
    let count = match first.stripe {
        Some(st) if st.index == 0 => st.count,
        _ => return Err(not_striped(name, &first)),
    };
    let mut states = vec![first];
    for i in 1..count {
        let st = dispenser.peek(&stripe_name(name, i)).await?;
        if st.stripe != Some(StripeId::new(i, count)) {
            return Err(not_striped(name, &st));
        }
        states.push(st);
    }
    Ok(states)
}

fn not_striped(name: &str, st: &SequenceState) -> Error {
    let stored = match st.stripe {
        Some(s) => format!("{} is stripe {} of {}", st.name, s.index, s.count),
        None => format!(
            "{} records no stripe (plain, or written by an earlier version)",
            st.name
        ),
    };
    Error::SpecConflict {
        kind: Kind::Striped,
        name: name.to_owned(),
        differs: format!("layout {stored} (asked striped)"),
    }
}

/// A stripe's [`Error::SpecConflict`] as the striped sequence `name`'s, naming the stripe.
fn of_striped(name: &str, e: Error) -> Error {
    match e {
        Error::SpecConflict {
            name: stripe,
            differs,
            ..
        } => Error::SpecConflict {
            kind: Kind::Striped,
            name: name.to_owned(),
            differs: format!("{stripe}: {differs}"),
        },
        other => other,
    }
}

/// A random starting stripe, so that processes do not all start on stripe 0.
fn random_start() -> usize {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    // Truncation is fine: any value will do.
    h.finish() as usize
}

impl StripedSequence {
    /// [`Dispenser::ensure_striped`].
    pub(crate) async fn ensure(
        dispenser: &Dispenser,
        name: &str,
        stripes: u32,
        spec: Spec,
    ) -> Result<StripedSequence> {
        StripedSequence::make(dispenser, name, stripes, spec, false).await
    }

    /// [`Dispenser::create_striped`].
    pub(crate) async fn create(
        dispenser: &Dispenser,
        name: &str,
        stripes: u32,
        spec: Spec,
    ) -> Result<StripedSequence> {
        StripedSequence::make(dispenser, name, stripes, spec, true).await
    }

    /// [`Dispenser::ensure_striped`], or with `new_only` [`Dispenser::create_striped`].
    async fn make(
        dispenser: &Dispenser,
        name: &str,
        stripes: u32,
        spec: Spec,
        new_only: bool,
    ) -> Result<StripedSequence> {
        if !(1..=MAX_STRIPES).contains(&stripes) {
            return Err(Error::invalid_argument(
                "stripes",
                format!("{stripes} stripes requested for {name:?}; use 1 to {MAX_STRIPES}"),
            ));
        }
        validate_plain_name(name)?;
        validate_name(&stripe_name(name, stripes - 1))?;
        spec.validate(name)?;
        if spec.cycle {
            return Err(Error::InvalidSpec {
                name: name.to_owned(),
                reason: "a striped sequence cannot cycle: a stripe wrapping to its bound would \
                         leave its residue class and repeat another stripe's numbers"
                    .to_owned(),
            });
        }
        let specs = (0..stripes)
            .map(|i| stripe_spec(name, &spec, stripes, i))
            .collect::<Result<Vec<_>>>()?;
        // A plain sequence of the same name would issue the same numbers.
        if dispenser.store().load(name).await?.is_some() {
            let mut d = Differs::default();
            d.field("layout", "plain", "striped");
            d.check(Kind::Striped, name)?;
        }
        let count = stripes;
        let ensure = |(s, i): (Spec, u32)| async move {
            dispenser
                .ensure_as(
                    &stripe_name(name, i),
                    s,
                    Some(StripeId::new(i, count)),
                    true,
                )
                .await
                .map_err(|e| of_striped(name, e))
        };
        let mut specs = specs.into_iter().zip(0..);
        // Stripe 0 first: it records the layout, so another layout over the same name is
        // refused before any other stripe is written.
        let Some(zero) = specs.next() else {
            return Err(Error::invalid_argument("stripes", "0 stripes requested"));
        };
        // A creation is recorded (stripe 0 absent), a striped sequence opened is not.
        let zero_name = stripe_name(name, 0);
        let creating = dispenser.store().load(&zero_name).await?.is_none();
        if new_only && !creating {
            return Err(Error::AlreadyExists {
                kind: crate::Kind::Striped,
                name: name.to_owned(),
            });
        }
        let make = async {
            let first = if new_only {
                // Stripe 0 inserted by this call, or another creation won the race.
                match dispenser
                    .insert_or_load(
                        &zero_name,
                        zero.0,
                        None,
                        Some(StripeId::new(0, count)),
                        true,
                    )
                    .await?
                {
                    (sequence, true) => sequence,
                    (_, false) => {
                        return Err(Error::AlreadyExists {
                            kind: crate::Kind::Striped,
                            name: name.to_owned(),
                        });
                    }
                }
            } else {
                ensure(zero).await?
            };
            let mut plain = vec![first];
            plain.extend(try_join_all(specs.map(ensure)).await?);
            Ok(plain)
        };
        let plain =
            if creating {
                let params = bson::doc! {
                    "stripes": i64::from(stripes), "start": spec.start, "step": spec.step,
                    "min": spec.min, "max": spec.max,
                };
                dispenser
                .recorder()
                .run(&Target::sequence(name), "create", params, None, make, |p: &Vec<Sequence>| {
                    Some(bson::doc! { "stripes": i64::try_from(p.len()).unwrap_or(i64::MAX) })
                })
                .await?
            } else {
                make.await?
            };
        Ok(StripedSequence::from_plain(dispenser, name, plain))
    }

    /// [`Dispenser::open_striped`].
    pub(crate) async fn open(dispenser: &Dispenser, name: &str) -> Result<StripedSequence> {
        let states = layout(dispenser, name).await?;
        let plain = try_join_all(states.iter().map(|st| dispenser.open(&st.name))).await?;
        Ok(StripedSequence::from_plain(dispenser, name, plain))
    }

    /// The stored state of every stripe, stripe 0 first, read now.
    ///
    /// # Errors
    ///
    /// As [`Dispenser::open_striped`] (the stripes may have been deleted since).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// for stripe in ids.peek().await? {
    ///     println!("{}: next {:?}", stripe.name, stripe.next_number());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn peek(&self) -> Result<Vec<SequenceState>> {
        layout(&self.inner.dispenser, &self.inner.name).await
    }

    /// Moves every stripe past `n` (see [`Sequence::advance_to`](crate::Sequence::advance_to)): each stripe's next number
    /// is the first of its own residue class beyond `n`, so the stripes stay disjoint.
    /// Stripes already past `n` are left alone. Returns the stripes' states.
    ///
    /// # Errors
    ///
    /// Those of [`StripedSequence::peek`] and [`Sequence::advance_to`](crate::Sequence::advance_to); on an error after
    /// some stripes moved, calling it again completes the move.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave some stripes advanced and others not (see
    /// [`StripedSequence::peek`]) and the history entry of the stripe being advanced `pending`
    /// (see [`history`](crate::history)); it issues no number. Call it again to complete the
    /// move.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// ids.advance_to(1_000_000).await?; // imported ids used ..=1000000
    /// # Ok(()) }
    /// ```
    pub async fn advance_to(&self, n: i64) -> Result<Vec<SequenceState>> {
        let states = self.peek().await?;
        let mut out = Vec::with_capacity(states.len());
        for st in states {
            out.push(self.inner.dispenser.advance_to(&st.name, n).await?);
        }
        Ok(out)
    }

    /// [`StripedSequence::reset`] once its options are set.
    pub(crate) async fn reset_now(&self, reset: Reset) -> Result<Vec<SequenceState>> {
        let Reset { next, force } = reset;
        let states = self.peek().await?;
        let mut targets = Vec::with_capacity(states.len());
        for st in &states {
            let target = arith::class_at_or_beyond(st.step, st.value, next)
                .filter(|t| (st.min..=st.max).contains(t))
                .ok_or_else(|| {
                    Error::invalid_argument(
                        "reset value",
                        format!(
                            "stripe {:?} has no number of its class from {next} within its \
                             bounds {}..={}",
                            st.name, st.min, st.max
                        ),
                    )
                })?;
            targets.push((st.name.clone(), target));
        }
        let mut out = Vec::with_capacity(targets.len());
        for (stripe, target) in targets {
            out.push(
                self.inner
                    .dispenser
                    .reset(
                        &stripe,
                        Reset {
                            next: target,
                            force,
                        },
                    )
                    .await?,
            );
        }
        Ok(out)
    }

    /// Deletes every stripe; returns how many documents were deleted. Like
    /// [`Dispenser::delete`], the numbers may be issued again if the striped sequence is
    /// created anew. This handle (and its clones) then fail with [`Error::NotFound`].
    /// The same as [`Dispenser::delete_striped`] with this handle's name: it also
    /// finishes a delete that was interrupted.
    ///
    /// # Errors
    ///
    /// Those of [`Dispenser::delete_striped`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave the highest stripes deleted and the others not
    /// (stripe 0, which records the layout, goes last), and the history entry of the stripe
    /// being deleted `pending` (see [`history`](crate::history)). Calling it again (or
    /// [`Dispenser::delete_striped`], or `dispenser delete NAME`) deletes the rest.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// let n = ids.delete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<u32> {
        self.inner.dispenser.delete_striped(&self.inner.name).await
    }

    /// [`Dispenser::delete_striped`].
    pub(crate) async fn delete_named(dispenser: &Dispenser, name: &str) -> Result<u32> {
        validate_name(name)?;
        let first = dispenser.peek(&stripe_name(name, 0)).await?;
        let count = match first.stripe {
            Some(st) if st.index == 0 => st.count,
            _ => return Err(not_striped(name, &first)),
        };
        let mut n = 0;
        for i in (1..count).rev() {
            let stripe = stripe_name(name, i);
            match dispenser.peek(&stripe).await {
                // Deleted by an earlier, interrupted delete.
                Err(Error::NotFound { .. }) => continue,
                Err(e) => return Err(e),
                Ok(st) if st.stripe != Some(StripeId::new(i, count)) => {
                    return Err(not_striped(name, &st));
                }
                Ok(_) => {}
            }
            match dispenser.delete(&stripe).await {
                Ok(()) => n += 1,
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        dispenser.delete(&first.name).await?;
        Ok(n + 1)
    }

    /// [`StripedSequence::alter`] once its options are set.
    pub(crate) async fn alter_now(&self, change: Alter) -> Result<Vec<SequenceState>> {
        let name = &self.inner.name;
        if change.is_empty() {
            return Err(Error::InvalidArgument {
                what: "alter".to_owned(),
                reason: format!(
                    "nothing to change for striped sequence {name:?}: give a min or max"
                ),
            });
        }
        if change.format.is_some() {
            return Err(Error::InvalidArgument {
                what: "format".to_owned(),
                reason: format!(
                    "{name:?} is a striped sequence, which has no format (its numbers are not in \
                     order)"
                ),
            });
        }
        let states = self.peek().await?;
        for st in &states {
            alter::check(st, &change)?;
        }
        for st in &states {
            self.inner.dispenser.alter(&st.name, change.clone()).await?;
        }
        self.peek().await
    }

    fn from_plain(dispenser: &Dispenser, name: &str, plain: Vec<Sequence>) -> Self {
        let stripes = plain.iter().cloned().map(Stripe::Plain).collect();
        StripedSequence {
            inner: Arc::new(Inner {
                dispenser: dispenser.clone(),
                name: name.to_owned(),
                plain,
                stripes,
                cursor: AtomicUsize::new(random_start()),
            }),
        }
    }

    /// The striped sequence's name (its stripes are `name~0`, `name~1`, …).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let ids = d.ensure_striped("ids", 4, dispenser::Spec::default()).await?;
    /// assert_eq!(ids.name(), "ids");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The settings the [`Dispenser::ensure_striped`] that opened this handle found changed
    /// since by an `alter` (the bounds), each once: its stored value, which is kept, and the
    /// value asked, which is not applied. The layout (stripe count, each stripe's start and
    /// step) is never an alteration: another layout is refused. Empty for a handle from
    /// `create_striped` or `open_striped`, or when everything matched.
    pub fn altered(&self) -> Vec<crate::error::Altered> {
        let mut out: Vec<crate::error::Altered> = Vec::new();
        for a in self.inner.plain.iter().flat_map(Sequence::altered) {
            if !out.iter().any(|o| o.setting == a.setting) {
                out.push(a.clone());
            }
        }
        out
    }

    /// The history of the striped sequence: its creation and every stripe's changes, oldest
    /// first — see [`History`](crate::history::History) for the options.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// let changes = ids.history().limit(20).await?;
    /// # Ok(()) }
    /// ```
    pub fn history(&self) -> crate::history::History {
        self.inner
            .dispenser
            .history(crate::Kind::Sequence, &self.inner.name)
    }

    /// How many stripes there are.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// let ids = d.ensure_striped("ids", 4, dispenser::Spec::default()).await?;
    /// assert_eq!(ids.stripes(), 4);
    /// # Ok(()) }
    /// ```
    pub fn stripes(&self) -> u32 {
        // At most MAX_STRIPES by construction.
        u32::try_from(self.inner.stripes.len()).unwrap_or(MAX_STRIPES)
    }

    /// A new handle on the same stripes whose stripes each hand out numbers from blocks
    /// (one [`BlockSequence`] per stripe; see [`BlockOptions`]). This handle keeps drawing
    /// one number per write.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for invalid options.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// let fast = ids.with_blocks(dispenser::block::BlockOptions::default().with_size(1000))?;
    /// let id = fast.next().await?;
    /// fast.close().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_blocks(&self, options: BlockOptions) -> Result<StripedSequence> {
        options.validate()?;
        let stripes = self
            .inner
            .plain
            .iter()
            .map(|s| s.clone().into_blocks(options).map(Stripe::Blocks))
            .collect::<Result<Vec<_>>>()?;
        Ok(StripedSequence {
            inner: Arc::new(Inner {
                dispenser: self.inner.dispenser.clone(),
                name: self.inner.name.clone(),
                plain: self.inner.plain.clone(),
                stripes,
                cursor: AtomicUsize::new(random_start()),
            }),
        })
    }

    /// Issues a number from the next stripe (round robin). A stripe that is exhausted is
    /// skipped; [`Error::Exhausted`] only when every stripe is.
    ///
    /// # Errors
    ///
    /// Those of [`Sequence::next`] (or [`BlockSequence::next`] with blocks).
    ///
    /// # Cancel safety
    ///
    /// As the stripe's own `next`: with blocks, cancel safe as [`BlockSequence::next`];
    /// without, as [`Sequence::next`] (a write that was sent may have reserved a number, which
    /// is then a gap, never issued to anyone).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// let (a, b) = (ids.next().await?, ids.next().await?);
    /// assert_ne!(a, b); // unique, in no particular order
    /// # Ok(()) }
    /// ```
    pub async fn next(&self) -> Result<i64> {
        let stripes = &self.inner.stripes;
        let first = self.inner.cursor.fetch_add(1, Relaxed);
        let mut exhausted = None;
        for k in 0..stripes.len() {
            let stripe = &stripes[first.wrapping_add(k) % stripes.len()];
            match stripe.next().await {
                Err(e) if e.is_exhausted() => exhausted = Some(e),
                other => return other,
            }
        }
        Err(exhausted.unwrap_or_else(|| Error::NotFound {
            kind: crate::Kind::Striped,
            name: self.inner.name.clone(),
        }))
    }

    /// Closes the block client of every stripe (see [`BlockSequence::close`]) and adds up
    /// what they gave back and lost. Without blocks there is nothing to close.
    ///
    /// # Errors
    ///
    /// The first error of a stripe's close (the others are still closed).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, though never at the cost of uniqueness: the stripes are closed one
    /// after another, so dropped midway, those closed stay closed, the one being closed is left
    /// as a dropped [`BlockSequence::close`] leaves it (what it held given back or a gap, never
    /// issued twice), and the others stay open. No report says which.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) -> dispenser::Result<()> {
    /// let report = ids.close().await?;
    /// println!("{} given back, {} lost", report.given_back, report.lost);
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> Result<CloseReport> {
        let mut total = CloseReport::default();
        let mut first_error = None;
        for stripe in &self.inner.stripes {
            if let Stripe::Blocks(b) = stripe {
                match b.clone().close().await {
                    Ok(r) => {
                        total.given_back += r.given_back;
                        total.lost += r.lost;
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }

    /// The counters of all stripes, added up.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(ids: dispenser::stripe::StripedSequence) {
    /// println!("{} issued", ids.stats().issued);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        let mut t = Stats::default();
        for s in self.inner.stripes.iter().map(Stripe::stats) {
            t += s;
        }
        t
    }
}

impl Dispenser {
    /// Creates (or opens, if they exist with the same shape) the `stripes` documents of the
    /// striped sequence `name`: `name~0` … `name~{stripes-1}`, where stripe `i` starts at
    /// `spec.start + i·spec.step` and moves by `stripes·spec.step`. Every number the striped
    /// sequence issues is one the plain sequence `spec` would issue, and no two stripes share
    /// one; the order across stripes is lost.
    ///
    /// `cycle` is refused: a stripe that wraps restarts at `min` (or `max`), which lies in
    /// stripe 0's residue class rather than its own, so it would issue numbers another stripe
    /// also issues.
    ///
    /// Each stripe document records which stripe it is (`stripe_index`, `stripe_count`) and
    /// its start, so asking again with another stripe count, start or step is a
    /// [`Error::SpecConflict`] rather than a second layout over the same documents.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (`stripes`) unless `1 ≤ stripes ≤ 1024`;
    /// [`Error::InvalidName`] (also when `name~{stripes-1}` is too long);
    /// [`Error::InvalidSpec`] for an invalid spec, `cycle`, a stripe whose start falls
    /// outside the bounds, or `step × stripes` overflowing; [`Error::SpecConflict`] when a
    /// stripe exists with another shape (for example another stripe count) or a plain
    /// sequence has the name; plus [`Error::Database`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future part way may leave some stripes created and others not and, if a
    /// creation had begun, its history entry `pending` (see [`history`](crate::history)); it
    /// issues no number. Call it again with the same arguments: it creates the missing stripes
    /// and opens the others.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::{Spec, block::BlockOptions, stripe::StripedSequence};
    /// let ids = d.ensure_striped("ids", 8, Spec::default())
    ///     .await?
    ///     .with_blocks(BlockOptions::default())?; // optional: blocks per stripe
    /// let id = ids.next().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ensure_striped(
        &self,
        name: &str,
        stripes: u32,
        spec: Spec,
    ) -> Result<StripedSequence> {
        StripedSequence::ensure(self, name, stripes, spec).await
    }

    /// Makes the striped sequence `name`, as [`Dispenser::ensure_striped`] does, but fails if
    /// it exists already (its stripe 0, which records the layout).
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] when it exists; otherwise those of
    /// [`Dispenser::ensure_striped`].
    ///
    /// # Cancel safety
    ///
    /// As [`Dispenser::ensure_striped`]: dropped part way, some stripes may exist; a second
    /// `create` then fails with [`Error::AlreadyExists`], and [`Dispenser::ensure_striped`] with
    /// the same arguments makes the rest.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::{Spec, stripe::StripedSequence};
    /// let ids = d.create_striped("ids", 8, Spec::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_striped(
        &self,
        name: &str,
        stripes: u32,
        spec: Spec,
    ) -> Result<StripedSequence> {
        StripedSequence::create(self, name, stripes, spec).await
    }

    /// Opens an existing striped sequence: reads how many stripes it has from `name~0` and
    /// opens each (checking that each is the stripe it should be).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when `name~0` does not exist, [`Error::SpecConflict`] when a
    /// stripe is missing its record or records another stripe (for example a stripe written
    /// by a version that did not record stripes: open it with [`Dispenser::ensure_striped`]
    /// and its spec instead), plus those of [`Dispenser::open`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::stripe::StripedSequence;
    /// d.ensure_striped("ids", 4, dispenser::Spec::default()).await?;
    /// let ids = d.open_striped("ids").await?;
    /// assert_eq!(ids.stripes(), 4);
    /// # Ok(()) }
    /// ```
    pub async fn open_striped(&self, name: &str) -> Result<StripedSequence> {
        StripedSequence::open(self, name).await
    }

    /// Opens the sequence `name`, plain or striped: the one answer to "is this name a plain
    /// sequence or a striped one?" that the command line's admin commands take. A plain
    /// sequence (a document of its own) is looked up first; without one, a striped sequence of
    /// that name (its stripe `name~0`). Names with `~` or `@` are never striped sequences, so
    /// the two never both exist.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] naming `name` when it is neither (a striped layout that
    /// cannot be opened — a delete interrupted part way, which [`Dispenser::delete_striped`]
    /// finishes — counts as none); [`Error::InvalidName`], [`Error::CorruptDocument`],
    /// [`Error::Database`], [`Error::Timeout`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::stripe::Either;
    /// let states = match d.open_either("ids").await? {
    ///     Either::Plain(s) => vec![s.peek().await?],
    ///     Either::Striped(ids) => ids.peek().await?,
    /// };
    /// # Ok(()) }
    /// ```
    pub async fn open_either(&self, name: &str) -> Result<Either> {
        match self.open(name).await {
            Err(plain @ Error::NotFound { .. }) => match self.open_striped(name).await {
                Ok(ids) => Ok(Either::Striped(ids)),
                Err(e) if e.kind() == crate::error::ErrorKind::Unavailable => Err(e),
                Err(_) => Err(plain),
            },
            other => other.map(Either::Plain),
        }
    }

    /// Deletes the stripes of the striped sequence `name` that exist, highest first and
    /// stripe 0 (which records how many there are) last; returns how many documents were
    /// deleted. Unlike [`Dispenser::open_striped`], it needs only stripe 0: a delete that was
    /// interrupted (a process killed part way leaves the highest stripes deleted, and the
    /// layout can no longer be opened) is finished by calling it again.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when stripe 0 does not exist (never created, or deleted
    /// already); [`Error::SpecConflict`] when a document of a stripe's name is not that
    /// stripe of this layout (nothing more is deleted); those of [`Dispenser::delete`].
    ///
    /// # Cancel safety
    ///
    /// As [`StripedSequence::delete`]: call it again to delete the rest.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn f(d: dispenser::Dispenser) -> dispenser::Result<()> {
    /// use dispenser::stripe::StripedSequence;
    /// let n = d.delete_striped("ids").await?;
    /// println!("deleted {n} stripe(s)");
    /// # Ok(()) }
    /// ```
    pub async fn delete_striped(&self, name: &str) -> Result<u32> {
        StripedSequence::delete_named(self, name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_partition_the_residue_classes() {
        let spec = Spec::default().with_start(5).with_step(3);
        let stripes = 4;
        let specs: Vec<Spec> = (0..stripes)
            .map(|i| stripe_spec("s", &spec, stripes, i).unwrap())
            .collect();
        let mut all: Vec<i64> = specs
            .iter()
            .flat_map(|s| (0..10).map(move |k| s.start + k * s.step))
            .collect();
        all.sort_unstable();
        let plain: Vec<i64> = (0..40).map(|k| 5 + 3 * k).collect();
        assert_eq!(all, plain);
    }

    #[test]
    fn impossible_stripes_are_invalid_specs() {
        let small = Spec::default().with_max(2);
        assert!(matches!(
            stripe_spec("s", &small, 4, 3),
            Err(Error::InvalidSpec { .. })
        ));
        let big = Spec::default().with_step(i64::MAX / 2);
        assert!(
            stripe_spec("s", &big, 4, 0)
                .unwrap_err()
                .to_string()
                .contains("stripes")
        );
    }
}
