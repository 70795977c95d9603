//! `Sequence`: a handle on one sequence (draws and its admin operations), and `Run`, several
//! numbers from one write.

use dispenser::Format;
use dispenser::sequence::{Alter, Stats};
use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi::bindgen_prelude::i64n;
use napi_derive::napi;
use serde_json::{Value, json};

use crate::convert::{ForceOptions, Int, Json, count, forced, int, js, opt_int};
use crate::dispenser::history_read;
use crate::promise::promise;

/// A handle on one sequence. Any number of concurrent calls may share it: their draws are
/// coalesced into shared writes.
#[napi]
pub struct Sequence {
    inner: dispenser::Sequence,
}

impl From<dispenser::Sequence> for Sequence {
    fn from(inner: dispenser::Sequence) -> Self {
        Sequence { inner }
    }
}

/// A contiguous run of numbers reserved by one write: `first`, then `count − 1` more,
/// `step` apart, to `last`.
#[napi]
pub struct Run {
    inner: dispenser::Run,
}

#[napi]
impl Run {
    /// The first number.
    #[napi(getter)]
    pub fn first(&self) -> i64n {
        i64n(self.inner.first())
    }

    /// The last number.
    #[napi(getter)]
    pub fn last(&self) -> i64n {
        i64n(self.inner.last())
    }

    /// How many numbers.
    #[napi(getter)]
    pub fn count(&self) -> u64 {
        self.inner.count()
    }

    /// The distance between two numbers of the run.
    #[napi(getter)]
    pub fn step(&self) -> i64n {
        i64n(self.inner.step())
    }

    /// Every number of the run, in order.
    #[napi]
    pub fn to_array(&self) -> Vec<i64n> {
        self.inner.into_iter().map(i64n).collect()
    }
}

/// What `Sequence.alter` changes; fields left out stay as they are.
#[napi(object)]
pub struct AlterInput {
    /// The new step.
    pub step: Option<Int>,
    /// The new lower bound.
    pub min: Option<Int>,
    /// The new upper bound.
    pub max: Option<Int>,
    /// Whether to wrap.
    pub cycle: Option<bool>,
    /// The new serial format; `null` removes it.
    pub format: Option<Option<String>>,
}

/// A handle's counters as a JavaScript object (`bigint`s).
pub fn stats_json(s: &Stats) -> Value {
    json!({
        "issued": s.issued, "writes": s.writes, "conflicts": s.conflicts, "retries": s.retries,
        "round_trips": s.round_trips, "fallbacks": s.fallbacks,
        "optimistic_writes": s.optimistic_writes, "pessimistic_writes": s.pessimistic_writes,
        "block_refills": s.block_refills, "waits": s.waits, "batches": s.batches,
        "batched_calls": s.batched_calls, "coalesced_calls": s.coalesced_calls,
        "max_batch": s.max_batch,
    })
}

/// A format from its source (`INV-{n:06}`), or the core's refusal.
pub fn format(source: &str) -> napi::Result<Format> {
    Format::parse(source).map_err(js)
}

impl Sequence {
    /// The core's handle.
    pub fn core(&self) -> &dispenser::Sequence {
        &self.inner
    }
}

#[napi]
impl Sequence {
    /// The sequence's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// The settings the `ensure` that opened this handle found changed since by an alter,
    /// each `{ setting, stored, asked }`: the stored value is kept, the asked one not applied.
    /// Empty for a handle from `create` or `open`, or when everything matched.
    #[napi(getter, ts_return_type = "Array<Altered>")]
    pub fn altered(&self) -> crate::convert::Json {
        crate::convert::altered(self.inner.altered())
    }

    /// Issues the next number.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, i64n>> {
        promise!(env, self.inner, |inner| Ok(i64n(inner.next().await?)))
    }

    /// Issues a contiguous run of `n` numbers in one write (with `cycle`, fewer near the wrap).
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn next_n<'env>(&self, env: &'env Env, n: Int) -> napi::Result<PromiseRaw<'env, Run>> {
        promise!(env, self.inner, |inner| {
            let n = count("count", n)?;
            let inner = inner.next_n(n).await?;
            Ok(Run { inner })
        })
    }

    /// Who changed it, when, how: the recorded operations, oldest first (`options`: `since`,
    /// `after`, `limit`).
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<HistoryEntry>>")]
    pub fn history<'env>(
        &self,
        env: &'env Env,
        options: Option<crate::dispenser::HistoryOptions>,
    ) -> napi::Result<PromiseRaw<'env, crate::convert::JsonList>> {
        promise!(env, self.inner, |inner| history_read(
            inner.history(),
            options
        )
        .await)
    }

    /// Reads the sequence's state now.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<SequenceState>")]
    pub fn peek<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            Ok(Json(inner.peek().await?.to_json()))
        })
    }

    /// Moves the sequence past `n` (never backwards).
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<SequenceState>")]
    pub fn advance_to<'env>(&self, env: &'env Env, n: Int) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let n = int("advance-to value", n)?;
            Ok(Json(inner.advance_to(n).await?.to_json()))
        })
    }

    /// Sets the number issued next; backwards only with `force`.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<SequenceState>")]
    pub fn reset<'env>(
        &self,
        env: &'env Env,
        next: Int,
        options: Option<ForceOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let next = int("reset value", next)?;
            let r = inner.reset(next).force(forced(options)).await;
            Ok(Json(r?.to_json()))
        })
    }

    /// Changes the sequence's shape or format while it is in use.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<SequenceState>")]
    pub fn alter<'env>(
        &self,
        env: &'env Env,
        change: AlterInput,
        options: Option<ForceOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            let a = alter(change)?;
            let r = inner.alter(a).force(forced(options)).await;
            Ok(Json(r?.to_json()))
        })
    }

    /// Deletes the sequence.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        promise!(env, self.inner, |inner| Ok(inner.delete().await?))
    }

    /// What this handle did so far.
    #[napi(ts_return_type = "Stats")]
    pub fn stats(&self) -> Json {
        Json(stats_json(&self.inner.stats()))
    }

    /// How many numbers are left before the wrap or the bound, as last seen by this handle.
    #[napi]
    pub fn remaining_hint(&self) -> u64 {
        self.inner.remaining_hint()
    }
}

/// The core's `Alter` from its JavaScript form.
pub fn alter(change: AlterInput) -> napi::Result<Alter> {
    let mut a = Alter::default();
    if let Some(v) = opt_int("step", change.step)? {
        a = a.with_step(v);
    }
    if let Some(v) = opt_int("min", change.min)? {
        a = a.with_min(v);
    }
    if let Some(v) = opt_int("max", change.max)? {
        a = a.with_max(v);
    }
    if let Some(v) = change.cycle {
        a = a.with_cycle(v);
    }
    if let Some(f) = change.format {
        a = a.with_format(f.as_deref().map(format).transpose()?);
    }
    Ok(a)
}
