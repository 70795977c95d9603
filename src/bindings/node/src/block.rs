//! Blocks: numbers reserved in one write and handed out from memory by one client.

use dispenser::block::{BlockOptions, CloseReport};
use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi::bindgen_prelude::i64n;
use napi_derive::napi;
use serde_json::{Value, json};

use crate::abort::{Signal, SignalOptions};
use crate::convert::{Int, Json, count, js};
use crate::dispenser::Dispenser;
use crate::promise::promise;
use crate::sequence::{Sequence, stats_json};

/// How a block client reserves (`Dispenser.openBlocks`' options).
#[napi(object)]
pub struct BlockOptionsInput {
    /// How many numbers one reservation asks for. Defaults to 100.
    pub size: Option<Int>,
    /// The share of a block that, once handed out, starts reserving the next one in the
    /// background; `null` reserves only when a block is empty. Defaults to 0.5.
    pub prefetch: Option<Option<f64>>,
    /// The largest a prefetched block may grow to keep ahead of fast callers; `null` keeps
    /// blocks at their size. Defaults to 1 000 000.
    pub grow_to: Option<Option<Int>>,
    /// The most of what is left one reservation takes, in (0, 1]; `null`: no such bound.
    /// Defaults to 0.01.
    pub range_share: Option<Option<f64>>,
    /// Aborts the call (`openBlocks` only: see `SignalOptions`).
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<Signal>,
}

/// The core's block options from their JavaScript form.
pub fn block_options(input: Option<BlockOptionsInput>) -> napi::Result<BlockOptions> {
    let mut o = BlockOptions::default();
    let Some(i) = input else { return Ok(o) };
    if let Some(v) = i.size {
        o = o.with_size(count("block size", v)?);
    }
    if let Some(v) = i.prefetch {
        o = o.with_prefetch(v);
    }
    if let Some(v) = i.grow_to {
        o = o.with_grow_to(v.map(|g| count("growTo", g)).transpose()?);
    }
    if let Some(v) = i.range_share {
        o = o.with_range_share(v);
    }
    Ok(o)
}

/// What a block client's close did with the numbers it held.
pub fn close_json(r: &CloseReport) -> Value {
    json!({ "given_back": r.given_back, "lost": r.lost })
}

#[napi]
impl Dispenser {
    /// A block client on the existing sequence `name`.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn open_blocks<'env>(
        &self,
        env: &'env Env,
        name: String,
        options: Option<BlockOptionsInput>,
    ) -> napi::Result<PromiseRaw<'env, BlockSequence>> {
        promise!(env, self.inner, |inner| {
            let o = block_options(options)?;
            let inner = inner.open_blocks(&name).options(o).await?;
            Ok(BlockSequence { inner })
        })
    }
}

#[napi]
impl Sequence {
    /// A block client on this sequence (the handle stays usable: the core's `into_blocks`
    /// takes a clone of it).
    #[allow(clippy::wrong_self_convention)] // the core's verb, `into_blocks`
    #[napi]
    pub fn into_blocks(&self, options: Option<BlockOptionsInput>) -> napi::Result<BlockSequence> {
        let o = block_options(options)?;
        let inner = self.core().clone().into_blocks(o).map_err(js)?;
        Ok(BlockSequence { inner })
    }
}

/// A block client: numbers from blocks reserved in one write each, handed out from memory.
/// Close it to give back what it reserved and did not hand out.
#[napi]
pub struct BlockSequence {
    inner: dispenser::block::BlockSequence,
}

#[napi]
impl BlockSequence {
    /// The sequence's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// The next number (from memory, or after a reservation).
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi]
    pub fn next<'env>(
        &self,
        env: &'env Env,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, i64n>> {
        promise!(env, self.inner, |inner| Ok(i64n(inner.next().await?)))
    }

    /// The next number if one is in memory now, else `null` (never waits).
    #[napi]
    pub fn try_next(&self) -> napi::Result<Option<i64n>> {
        self.inner.try_next().map(|n| n.map(i64n)).map_err(js)
    }

    /// Waits until no reservation is in flight.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn settle<'env>(
        &self,
        env: &'env Env,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        promise!(env, self.inner, |inner| {
            inner.settle().await;
            Ok(())
        })
    }

    /// How many reserved numbers it holds, not yet handed out.
    #[napi]
    pub fn held(&self) -> u64 {
        self.inner.held()
    }

    /// The size of its next reservation.
    #[napi]
    pub fn block_size(&self) -> u64 {
        self.inner.block_size()
    }

    /// Whether it was closed.
    #[napi]
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Stops it and gives back what it reserved and did not hand out, when that is safe.
    ///
    /// # Cancel safety
    ///
    /// The core's call runs to its end unless the call's `signal` aborts it, which drops it
    /// where it waits, as a worker or process that exits meanwhile does: that leaves what
    /// dropping the core's call leaves.
    #[napi(ts_return_type = "Promise<CloseReport>")]
    pub fn close<'env>(
        &self,
        env: &'env Env,
        _options: Option<SignalOptions>,
    ) -> napi::Result<PromiseRaw<'env, Json>> {
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
