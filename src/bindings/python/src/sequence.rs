//! The handles numbers are drawn from: `Sequence`, `BlockSequence`, `StripedSequence`,
//! `DailySequence`.

use pyo3::prelude::*;

use dispenser::Format;
use dispenser::block::BlockSequence;
use dispenser::scope::DailySequence;
use dispenser::sequence::Alter;
use dispenser::stripe::StripedSequence;

use crate::convert::{Json, Numbers, block_options, day};
use crate::errors::{Outcome, to_py_err};
use crate::flavor::flavors;
use crate::handles::{self, close_json, stats_json};
use crate::runtime::run;

/// An alter from the keywords given (`None`: unchanged).
fn alter(
    step: Option<i64>,
    min: Option<i64>,
    max: Option<i64>,
    cycle: Option<bool>,
    format: Option<&str>,
    no_format: bool,
) -> Result<Alter, dispenser::Error> {
    let mut a = Alter::default();
    if let Some(v) = step {
        a = a.with_step(v);
    }
    if let Some(v) = min {
        a = a.with_min(v);
    }
    if let Some(v) = max {
        a = a.with_max(v);
    }
    if let Some(v) = cycle {
        a = a.with_cycle(v);
    }
    if let Some(f) = format {
        a = a.with_format(Some(Format::parse(f)?));
    } else if no_format {
        a = a.with_format(None);
    }
    Ok(a)
}

/// States as a list of dicts.
fn state_list(states: Vec<dispenser::sequence::SequenceState>) -> Vec<Json> {
    states.iter().map(|s| Json(s.to_json())).collect()
}

flavors! {
    /// A handle on one sequence: draws numbers. Share it between threads (or tasks):
    /// concurrent draws on one handle share writes.
    "Sequence", SyncSequence, AsyncSequence, dispenser::Sequence;

    /// The sequence's name.
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.live().get(py)?.name().to_owned())
    }

    /// The settings the `ensure` that opened this handle found changed since by an alter,
    /// each `{setting, stored, asked}`: the stored value is kept, the asked one not applied.
    /// Empty for a handle from `create` or `open`, or when everything matched.
    #[getter]
    fn altered(&self, py: Python<'_>) -> PyResult<Json> {
        Ok(crate::convert::altered(self.live().get(py)?.altered()))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Sequence({:?})", self.live().get(py)?.name()))
    }

    /// Issues the next number.
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(s.next().await?) })
    }

    /// Issues a contiguous run of `n` numbers in one write, as a `range`. With `cycle` a
    /// run stops at the wrap (fewer than `n` numbers: call again for the rest).
    fn next_n(&self, py: Python<'_>, n: u64) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(Numbers(s.next_n(n).await?)) })
    }

    /// What this handle did so far (issued, writes, round trips, lost races, …), as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Json(stats_json(&self.live().get(py)?.stats())).into_pyobject(py)?.unbind())
    }

    /// How many numbers are left before the wrap or the bound, as last seen by this handle.
    fn remaining_hint(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.live().get(py)?.remaining_hint())
    }

    /// Who changed it, when, how: a list of entry dicts, oldest first (at most `limit`, 100
    /// by default; `since` an aware `datetime`; `after` the `cursor` of the last entry of
    /// the previous page).
    #[pyo3(signature = (*, since=None, after=None, limit=None))]
    fn history(&self, py: Python<'_>, since: Option<&Bound<'_, PyAny>>, after: Option<String>, limit: Option<usize>) -> PyResult<Py<PyAny>> {
        let h = self.live().get(py)?.history();
        crate::dispenser::history_read(py, Self::ASYNC, h, since, after, limit)
    }

    /// Reads the sequence's state now, as a dict.
    fn peek(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(Json(s.peek().await?.to_json())) })
    }

    /// Moves the sequence past `n` (never backwards); returns the state afterwards.
    fn advance_to(&self, py: Python<'_>, n: i64) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(Json(s.advance_to(n).await?.to_json())) })
    }

    /// Sets the number issued next; moving backwards needs `force=True`.
    #[pyo3(signature = (next, *, force=false))]
    fn reset(&self, py: Python<'_>, next: i64, force: bool) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            Outcome::Ok(Json(s.reset(next).force(force).await?.to_json()))
        })
    }

    /// Changes the shape of the live sequence (keywords left out stay as they are);
    /// returns the state afterwards. `force=True` allows a bound that strands the last
    /// number issued and turning `cycle` on.
    #[pyo3(signature = (*, step=None, min=None, max=None, cycle=None, format=None, no_format=false, force=false))]
    #[allow(clippy::too_many_arguments)]
    fn alter(&self, py: Python<'_>, step: Option<i64>, min: Option<i64>, max: Option<i64>, cycle: Option<bool>, format: Option<&str>, no_format: bool, force: bool) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        let change = alter(step, min, max, cycle, format, no_format).map_err(|e| to_py_err(py, &e))?;
        run(py, Self::ASYNC, async move { Outcome::Ok(Json(s.alter(change).force(force).await?.to_json())) })
    }

    /// Deletes the sequence.
    fn delete(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(s.delete().await?) })
    }

    /// A block client over this sequence (no I/O until its first draw).
    #[allow(clippy::wrong_self_convention)] // Python's handle stays usable: it is shared
    #[pyo3(signature = (*, size=None, prefetch=None, grow_to=None, range_share=None))]
    fn into_blocks(&self, py: Python<'_>, size: Option<u64>, prefetch: Option<f64>, grow_to: Option<u64>, range_share: Option<f64>) -> PyResult<Py<PyAny>> {
        let o = block_options(size, prefetch, grow_to, range_share);
        let b = self.live().get(py)?.into_blocks(o).map_err(|e| to_py_err(py, &e))?;
        Ok(handles::blocks_of(self.live(), b, o, Self::ASYNC).into_pyobject(py)?.unbind())
    }
}

flavors! {
    /// A block client: one write reserves a block of numbers, handed out from memory.
    /// Close it (`close()`) to give back what it did not hand out.
    "BlockSequence", SyncBlockSequence, AsyncBlockSequence, BlockSequence;

    /// The sequence's name.
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.live().get(py)?.name().to_owned())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("BlockSequence({:?})", self.live().get(py)?.name()))
    }

    /// The next number: from the current block, else after reserving the next one.
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let b = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(b.next().await?) })
    }

    /// A number from memory if one is ready, else `None` (never waits).
    fn try_next(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        self.live().get(py)?.try_next().map_err(|e| to_py_err(py, &e))
    }

    /// Waits until no reservation is in flight.
    fn settle(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let b = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            b.settle().await;
            Outcome::Ok(())
        })
    }

    /// How many reserved numbers it holds, not yet handed out.
    fn held(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.live().get(py)?.held())
    }

    /// The size of its current block.
    fn block_size(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.live().get(py)?.block_size())
    }

    /// Whether it was closed.
    fn is_closed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.live().get(py)?.is_closed())
    }

    /// Stops it and gives back the numbers it holds when that is safe: a dict with
    /// `given_back` and `lost`.
    fn close(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let b = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(Json(close_json(&b.close().await?))) })
    }

    /// What it did so far, as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Json(stats_json(&self.live().get(py)?.stats())).into_pyobject(py)?.unbind())
    }
}

flavors! {
    /// A sequence spread over several documents (stripes), each a disjoint residue class.
    "StripedSequence", SyncStripedSequence, AsyncStripedSequence, StripedSequence;

    /// The striped sequence's name.
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.live().get(py)?.name().to_owned())
    }

    /// The settings the `ensure` that opened this handle found changed since by an alter,
    /// each `{setting, stored, asked}`: the stored value is kept, the asked one not applied.
    /// Empty for a handle from `create` or `open`, or when everything matched.
    #[getter]
    fn altered(&self, py: Python<'_>) -> PyResult<Json> {
        Ok(crate::convert::altered(&self.live().get(py)?.altered()))
    }

    /// How many stripes it has.
    #[getter]
    fn stripes(&self, py: Python<'_>) -> PyResult<u32> {
        Ok(self.live().get(py)?.stripes())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let s = self.live().get(py)?;
        Ok(format!("StripedSequence({:?}, stripes={})", s.name(), s.stripes()))
    }

    /// The next number, from one of the stripes.
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(s.next().await?) })
    }

    /// Who changed it, when, how: a list of entry dicts, oldest first (at most `limit`, 100
    /// by default; `since` an aware `datetime`; `after` the `cursor` of the last entry of
    /// the previous page).
    #[pyo3(signature = (*, since=None, after=None, limit=None))]
    fn history(&self, py: Python<'_>, since: Option<&Bound<'_, PyAny>>, after: Option<String>, limit: Option<usize>) -> PyResult<Py<PyAny>> {
        let h = self.live().get(py)?.history();
        crate::dispenser::history_read(py, Self::ASYNC, h, since, after, limit)
    }

    /// Every stripe's state, as a list of dicts.
    fn peek(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(state_list(s.peek().await?)) })
    }

    /// Moves every stripe past `n`.
    fn advance_to(&self, py: Python<'_>, n: i64) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(state_list(s.advance_to(n).await?)) })
    }

    /// Resets every stripe so that the numbers issued next start at `next`.
    #[pyo3(signature = (next, *, force=false))]
    fn reset(&self, py: Python<'_>, next: i64, force: bool) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            Outcome::Ok(state_list(s.reset(next).force(force).await?))
        })
    }

    /// Changes the bounds (or format) of every stripe.
    #[pyo3(signature = (*, min=None, max=None, format=None, force=false))]
    fn alter(&self, py: Python<'_>, min: Option<i64>, max: Option<i64>, format: Option<&str>, force: bool) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        let change = alter(None, min, max, None, format, false).map_err(|e| to_py_err(py, &e))?;
        run(py, Self::ASYNC, async move { Outcome::Ok(state_list(s.alter(change).force(force).await?)) })
    }

    /// Deletes every stripe; returns how many.
    fn delete(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(s.delete().await?) })
    }

    /// The same stripes drawn through a block client each.
    #[pyo3(signature = (*, size=None, prefetch=None, grow_to=None, range_share=None))]
    fn with_blocks(&self, py: Python<'_>, size: Option<u64>, prefetch: Option<f64>, grow_to: Option<u64>, range_share: Option<f64>) -> PyResult<Py<PyAny>> {
        let o = block_options(size, prefetch, grow_to, range_share);
        let parent = self.live().clone();
        let made = parent.get(py)?.with_blocks(o).map_err(|e| to_py_err(py, &e))?;
        let remake = Box::new(move |py: Python<'_>| {
            parent.get(py)?.with_blocks(o).map_err(|e| to_py_err(py, &e))
        });
        let out = crate::flavor::Out(crate::flavor::Handle {
            live: std::sync::Arc::new(crate::runtime::Live::new(made, remake)),
            asynchronous: Self::ASYNC,
        });
        Ok(out.into_pyobject(py)?.unbind())
    }

    /// Closes its block clients (if any), giving back what they hold: a dict.
    fn close(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(Json(close_json(&s.close().await?))) })
    }

    /// What it did so far, as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Json(stats_json(&self.live().get(py)?.stats())).into_pyobject(py)?.unbind())
    }
}

flavors! {
    /// A sequence whose numbering restarts every day (in its time zone): `next()` returns
    /// `(day, number)`, the day as `YYYY-MM-DD`.
    "DailySequence", SyncDailySequence, AsyncDailySequence, DailySequence;

    /// The template whose shape every day's sequence takes.
    #[getter]
    fn template(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.live().get(py)?.template().to_owned())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("DailySequence({:?})", self.live().get(py)?.template()))
    }

    /// The next number of today's sequence: `(day, number)`.
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            let n = s.next().await?;
            Outcome::Ok((n.scope, n.number))
        })
    }

    /// Today in the sequence's time zone, as `YYYY-MM-DD`.
    fn today(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.live().get(py)?.today().to_string())
    }

    /// Deletes the days before `before` (a `datetime.date` or `YYYY-MM-DD`); returns how
    /// many. Today and later are refused.
    fn delete_scopes_before(&self, py: Python<'_>, before: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let s = self.live().get(py)?;
        let text = day(before)?;
        let date = text.parse::<dispenser::jiff::civil::Date>().map_err(|e| {
            to_py_err(py, &crate::errors::invalid("day", format!("{text:?}: {e}")))
        })?;
        run(py, Self::ASYNC, async move { Outcome::Ok(s.delete_scopes_before(date).await?) })
    }

    /// What it did so far, as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Json(stats_json(&self.live().get(py)?.stats())).into_pyobject(py)?.unbind())
    }
}
