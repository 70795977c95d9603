//! Striped sequences: `S` disjoint stripes of one sequence, each its own document.

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi::bindgen_prelude::i64n;
use napi_derive::napi;

use crate::block::{BlockOptionsInput, block_options, close_json};
use crate::convert::{ForceOptions, Int, Json, JsonList, forced, int, js};
use crate::dispenser::history_read;
use crate::dispenser::{Dispenser, SpecInput};
use crate::promise::promise;
use crate::sequence::{AlterInput, alter, stats_json};

fn states(v: Vec<dispenser::sequence::SequenceState>) -> JsonList {
    JsonList(v.iter().map(|s| s.to_json()).collect())
}

#[napi]
impl Dispenser {
    /// Creates the striped sequence `name` of `stripes` stripes, or opens it when it exists
    /// with the same layout and spec.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn ensure_striped<'env>(
        &self,
        env: &'env Env,
        name: String,
        stripes: u32,
        spec: Option<SpecInput>,
    ) -> napi::Result<PromiseRaw<'env, StripedSequence>> {
        promise!(env, self.inner, |inner| {
            let s = striped_spec(spec)?;
            let inner = inner.ensure_striped(&name, stripes, s).await?;
            Ok(StripedSequence { inner })
        })
    }

    /// Creates the striped sequence `name`; fails `AlreadyExists` when it exists.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn create_striped<'env>(
        &self,
        env: &'env Env,
        name: String,
        stripes: u32,
        spec: Option<SpecInput>,
    ) -> napi::Result<PromiseRaw<'env, StripedSequence>> {
        promise!(env, self.inner, |inner| {
            let s = striped_spec(spec)?;
            let inner = inner.create_striped(&name, stripes, s).await?;
            Ok(StripedSequence { inner })
        })
    }

    /// Opens the existing striped sequence `name`.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn open_striped<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> napi::Result<PromiseRaw<'env, StripedSequence>> {
        promise!(env, self.inner, |inner| {
            let inner = inner.open_striped(&name).await?;
            Ok(StripedSequence { inner })
        })
    }

    /// Deletes every stripe of `name`; returns how many.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn delete_striped<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> napi::Result<PromiseRaw<'env, u32>> {
        promise!(env, self.inner, |inner| {
            Ok(inner.delete_striped(&name).await?)
        })
    }
}

/// A striped sequence: draws spread over its stripes, each number unique.
#[napi]
pub struct StripedSequence {
    inner: dispenser::stripe::StripedSequence,
}

#[napi]
impl StripedSequence {
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
        crate::convert::altered(&self.inner.altered())
    }

    /// How many stripes.
    #[napi(getter)]
    pub fn stripes(&self) -> u32 {
        self.inner.stripes()
    }

    /// The same sequence drawn through block clients, one per stripe.
    #[napi]
    pub fn with_blocks(&self, options: Option<BlockOptionsInput>) -> napi::Result<StripedSequence> {
        let inner = self
            .inner
            .with_blocks(block_options(options)?)
            .map_err(js)?;
        Ok(StripedSequence { inner })
    }

    /// Issues the next number from one of the stripes.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, i64n>> {
        promise!(env, self.inner, |inner| Ok(i64n(inner.next().await?)))
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

    /// Every stripe's state.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<SequenceState>>")]
    pub fn peek<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| Ok(states(inner.peek().await?)))
    }

    /// Moves every stripe past `n`.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<SequenceState>>")]
    pub fn advance_to<'env>(
        &self,
        env: &'env Env,
        n: Int,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| {
            let n = int("advance-to value", n)?;
            Ok(states(inner.advance_to(n).await?))
        })
    }

    /// Sets the number issued next, each stripe within its own class.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<SequenceState>>")]
    pub fn reset<'env>(
        &self,
        env: &'env Env,
        next: Int,
        options: Option<ForceOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| {
            let next = int("reset value", next)?;
            let r = inner.reset(next).force(forced(options)).await;
            Ok(states(r?))
        })
    }

    /// Changes every stripe's shape or format.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<Array<SequenceState>>")]
    pub fn alter<'env>(
        &self,
        env: &'env Env,
        change: AlterInput,
        options: Option<ForceOptions>,
    ) -> napi::Result<PromiseRaw<'env, JsonList>> {
        promise!(env, self.inner, |inner| {
            let a = alter(change)?;
            let r = inner.alter(a).force(forced(options)).await;
            Ok(states(r?))
        })
    }

    /// Deletes every stripe; returns how many.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi]
    pub fn delete<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, u32>> {
        promise!(env, self.inner, |inner| Ok(inner.delete().await?))
    }

    /// Closes its block clients (when it draws through blocks), giving back what they held.
    ///
    /// # Cancel safety
    ///
    /// A Promise is never cancelled: the core's call runs to its end. A worker or process that
    /// exits meanwhile drops it, which leaves what dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<CloseReport>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Json>> {
        promise!(env, self.inner, |inner| {
            Ok(Json(close_json(&inner.close().await?)))
        })
    }

    /// What it did so far.
    #[napi(ts_return_type = "Stats")]
    pub fn stats(&self) -> Json {
        Json(stats_json(&self.inner.stats()))
    }
}

/// The spec of a striped sequence, which has no format (its numbers are not in order).
fn striped_spec(spec: Option<SpecInput>) -> napi::Result<dispenser::Spec> {
    if crate::dispenser::format(spec.as_ref())?.is_some() {
        return Err(js(dispenser::Error::InvalidArgument {
            what: "format".into(),
            reason: "a striped sequence has no format (its numbers are not in order)".into(),
        }));
    }
    crate::dispenser::spec(spec)
}
