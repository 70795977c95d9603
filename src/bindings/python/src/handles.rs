//! How each handle is made for Python, with the way a child after fork opens it again, and
//! the renderings of the core's plain structs (stats, close reports, audits) as dicts.

use std::sync::Arc;

use serde_json::{Value, json};

use dispenser::block::{BlockOptions, BlockSequence, CloseReport};
use dispenser::gapless::{Audit, Gapless, GaplessOptions};
use dispenser::queue::Queue;
use dispenser::scope::DailySequence;
use dispenser::sequence::Stats;
use dispenser::stripe::StripedSequence;
use dispenser::{Dispenser, Sequence};

use crate::closing::Closer;
use crate::flavor::{Handle, Out};
use crate::runtime::{Live, wait};

fn out<T: Clone + Send + 'static>(
    value: T,
    remake: crate::runtime::Remake<T>,
    closer: &Arc<Closer>,
    asynchronous: bool,
) -> Out<T> {
    Out(Handle {
        live: Arc::new(Live::new(value, remake, closer.clone())),
        asynchronous,
    })
}

/// A sequence handle with the dispenser it was opened from (a scope's formatted draw reads
/// its template's format through it). Derefs to the core's [`Sequence`].
#[derive(Clone)]
pub(crate) struct SequenceOf {
    pub(crate) sequence: Sequence,
    pub(crate) dispenser: Dispenser,
}

impl std::ops::Deref for SequenceOf {
    type Target = Sequence;

    fn deref(&self) -> &Sequence {
        &self.sequence
    }
}

/// A sequence handle; a child opens the same document again.
pub(crate) fn sequence(
    d: &Arc<Live<Dispenser>>,
    made: &Dispenser,
    s: Sequence,
    asynchronous: bool,
) -> Out<SequenceOf> {
    let closer = d.closer().clone();
    let (d, name) = (d.clone(), s.name().to_owned());
    let made = made.clone();
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        let (disp, name) = (d.get(py)?, name.clone());
        let reopened = disp.clone();
        let sequence = wait(py, async move { disp.open(&name).await })?;
        Ok(SequenceOf {
            sequence,
            dispenser: reopened,
        })
    });
    let handle = SequenceOf {
        sequence: s,
        dispenser: made,
    };
    out(handle, remake, &closer, asynchronous)
}

/// A block client; a child opens a new one (the parent's blocks stay the parent's).
pub(crate) fn blocks(
    d: &Arc<Live<Dispenser>>,
    b: BlockSequence,
    options: BlockOptions,
    asynchronous: bool,
) -> Out<BlockSequence> {
    let closer = d.closer().clone();
    let (d, name) = (d.clone(), b.name().to_owned());
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        let (disp, name, o) = (d.get(py)?, name.clone(), options);
        wait(py, async move { disp.open_blocks(&name).options(o).await })
    });
    let o = out(b, remake, &closer, asynchronous);
    closer.keep_blocks(&o.0.live);
    o
}

/// A block client made from a sequence handle (`Sequence.into_blocks`).
pub(crate) fn blocks_of(
    s: &Arc<Live<SequenceOf>>,
    b: BlockSequence,
    options: BlockOptions,
    asynchronous: bool,
) -> Out<BlockSequence> {
    let closer = s.closer().clone();
    let s = s.clone();
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        s.get(py)?
            .sequence
            .into_blocks(options)
            .map_err(|e| crate::errors::to_py_err(py, &e))
    });
    let o = out(b, remake, &closer, asynchronous);
    closer.keep_blocks(&o.0.live);
    o
}

/// A striped sequence; with `blocks`, the block clients per stripe of `with_blocks`.
pub(crate) fn striped(
    d: &Arc<Live<Dispenser>>,
    s: StripedSequence,
    blocks: Option<BlockOptions>,
    asynchronous: bool,
) -> Out<StripedSequence> {
    let closer = d.closer().clone();
    let (d, name) = (d.clone(), s.name().to_owned());
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        let (disp, name) = (d.get(py)?, name.clone());
        let s = wait(py, async move { disp.open_striped(&name).await })?;
        match &blocks {
            Some(o) => s
                .with_blocks(*o)
                .map_err(|e| crate::errors::to_py_err(py, &e)),
            None => Ok(s),
        }
    });
    out(s, remake, &closer, asynchronous)
}

/// A striped sequence drawn through block clients (`StripedSequence.with_blocks`), closed
/// with its dispenser.
pub(crate) fn striped_blocks(
    parent: &Arc<Live<StripedSequence>>,
    made: StripedSequence,
    options: BlockOptions,
    asynchronous: bool,
) -> Out<StripedSequence> {
    let closer = parent.closer().clone();
    let parent = parent.clone();
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        parent
            .get(py)?
            .with_blocks(options)
            .map_err(|e| crate::errors::to_py_err(py, &e))
    });
    let o = out(made, remake, &closer, asynchronous);
    closer.keep_striped(&o.0.live);
    o
}

/// A daily sequence.
pub(crate) fn daily(
    d: &Arc<Live<Dispenser>>,
    s: DailySequence,
    template: String,
    time_zone: String,
    asynchronous: bool,
) -> Out<DailySequence> {
    let closer = d.closer().clone();
    let d = d.clone();
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        let disp = d.get(py)?;
        crate::convert::time_zone_named(&time_zone)
            .and_then(|tz| disp.open_daily(&template, tz))
            .map_err(|e| crate::errors::to_py_err(py, &e))
    });
    out(s, remake, &closer, asynchronous)
}

/// A gap-free sequence; a child ensures it again with the same options (or opens it, when
/// it was opened).
pub(crate) fn gapless(
    d: &Arc<Live<Dispenser>>,
    g: Gapless,
    options: Option<GaplessOptions>,
    asynchronous: bool,
) -> Out<Gapless> {
    let closer = d.closer().clone();
    let (d, name) = (d.clone(), g.name().to_owned());
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        let (disp, name, o) = (d.get(py)?, name.clone(), options.clone());
        wait(py, async move {
            match o {
                Some(o) => disp.ensure_gapless(&name, o).await,
                None => disp.open_gapless(&name).await,
            }
        })
    });
    let o = out(g, remake, &closer, asynchronous);
    closer.keep_gapless(&o.0.live);
    o
}

/// A queue.
pub(crate) fn queue(d: &Arc<Live<Dispenser>>, q: Queue, asynchronous: bool) -> Out<Queue> {
    let closer = d.closer().clone();
    let (d, name) = (d.clone(), q.name().to_owned());
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        let (disp, name) = (d.get(py)?, name.clone());
        wait(py, async move { disp.open_queue(&name).await })
    });
    out(q, remake, &closer, asynchronous)
}

/// A queue acting as another caller (`Queue.with_caller`).
pub(crate) fn queue_as(
    q: &Arc<Live<Queue>>,
    made: Queue,
    caller: String,
    asynchronous: bool,
) -> Out<Queue> {
    let closer = q.closer().clone();
    let q = q.clone();
    let remake = Box::new(move |py: pyo3::Python<'_>| {
        q.get(py)?
            .with_caller(&caller)
            .map_err(|e| crate::errors::to_py_err(py, &e))
    });
    out(made, remake, &closer, asynchronous)
}

/// A handle's counters, as a dict.
pub(crate) fn stats_json(s: &Stats) -> Value {
    json!({
        "issued": s.issued,
        "writes": s.writes,
        "conflicts": s.conflicts,
        "retries": s.retries,
        "round_trips": s.round_trips,
        "fallbacks": s.fallbacks,
        "optimistic_writes": s.optimistic_writes,
        "pessimistic_writes": s.pessimistic_writes,
        "block_refills": s.block_refills,
        "waits": s.waits,
        "batches": s.batches,
        "batched_calls": s.batched_calls,
        "coalesced_calls": s.coalesced_calls,
        "max_batch": s.max_batch,
        "cas_mode": format!("{:?}", s.cas_mode).to_lowercase(),
    })
}

/// What closing a block client did, as a dict.
pub(crate) fn close_json(r: &CloseReport) -> Value {
    json!({ "given_back": r.given_back, "lost": r.lost })
}

/// An audit, as a dict (`clean` is `Audit::is_clean`).
pub(crate) fn audit_json(a: &Audit) -> Value {
    json!({
        "clean": a.is_clean(),
        "numbers": a.numbers,
        "first": a.first,
        "last": a.last,
        "missing": a.missing,
        "gaps": a.gaps,
        "duplicated": a.duplicated,
        "duplicates": a.duplicates,
        "not_integer": a.not_integer,
        "voided": a.voided,
        "voids": a.voids,
        "malformed": a.malformed,
        "malformed_docs": a.malformed_docs,
    })
}

/// What an adopt did to one sequence, as a dict.
pub(crate) fn adopted_json(a: &dispenser::sequence::Adopted) -> Value {
    json!({
        "name": a.name,
        "highest": a.highest,
        "moved": a.moved,
        "state": a.state.to_json(),
    })
}
