//! `Gapless`: gap-free numbers whose business write is the app's own Python code (pymongo,
//! Motor, anything that raises on failure).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use dispenser::gapless::{Gapless, GaplessAlter, Released};
use dispenser::mongodb::bson::doc;

use crate::convert::{Json, seconds};
use crate::errors::{Outcome, Raised, to_py_err};
use crate::flavor::flavors;
use crate::handles::stats_json;
use crate::runtime::{run, running_loop};

/// The error a business write is reported to the core with.
type WriteError = Box<dyn std::error::Error + Send + Sync>;

/// MongoDB's duplicate key code: what pymongo's `DuplicateKeyError` (and Motor's) carry.
const DUPLICATE_KEY: i64 = 11000;

/// A number used by a successful business write: `number`, the write's return `value`,
/// and how many numbers the call found used or voided and moved past (`skipped`).
#[pyclass(frozen, module = "dispenser")]
pub(crate) struct Issued {
    /// The number the business write carries.
    #[pyo3(get)]
    number: i64,
    /// What the business write returned.
    #[pyo3(get)]
    value: Py<PyAny>,
    /// Numbers found used or voided and moved past.
    #[pyo3(get)]
    skipped: u32,
}

#[pymethods]
impl Issued {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Issued(number={}, value={}, skipped={})",
            self.number,
            self.value.bind(py).repr()?,
            self.skipped
        ))
    }
}

/// A Python exception of a business write, as the core sees it: a duplicate key (the
/// driver's own error, so the core moves past a number some document carries) or a
/// failure that releases the number.
fn reported(py: Python<'_>, e: PyErr) -> WriteError {
    let value = e.value(py);
    let code = value
        .getattr("code")
        .ok()
        .and_then(|c| c.extract::<i64>().ok());
    if code == Some(DUPLICATE_KEY) {
        let text = value.str().map(|s| s.to_string()).unwrap_or_default();
        let parsed = dispenser::mongodb::bson::from_document::<dispenser::mongodb::error::WriteError>(
            doc! { "code": 11000, "errmsg": text },
        );
        if let Ok(w) = parsed {
            let kind = dispenser::mongodb::error::ErrorKind::Write(
                dispenser::mongodb::error::WriteFailure::WriteError(w),
            );
            return Box::new(dispenser::mongodb::error::Error::from(kind));
        }
    }
    Box::new(Raised::new(py, e))
}

/// `dispenser._bridge.call` and `asyncio.run_coroutine_threadsafe`, looked up once.
static CALL: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// Runs the business write `write(n)`: a sync handle's in a thread of the runtime's
/// blocking pool (holding the GIL while it runs); an asyncio handle's on its event loop
/// (awaited when it returns an awaitable, as a Motor or Beanie write does).
async fn business(
    write: Arc<Py<PyAny>>,
    event_loop: Option<Arc<Py<PyAny>>>,
    n: i64,
) -> Result<Py<PyAny>, WriteError> {
    let Some(event_loop) = event_loop else {
        let joined = tokio::task::spawn_blocking(move || {
            Python::attach(|py| {
                write
                    .bind(py)
                    .call1((n,))
                    .map(Bound::unbind)
                    .map_err(|e| reported(py, e))
            })
        })
        .await;
        return joined.unwrap_or_else(|e| Err(format!("its thread failed: {e}").into()));
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let scheduled = Python::attach(|py| -> PyResult<()> {
        let (call, schedule) = CALL.get_or_try_init(py, || -> PyResult<_> {
            Ok((
                py.import("dispenser._bridge")?.getattr("call")?.unbind(),
                py.import("asyncio")?
                    .getattr("run_coroutine_threadsafe")?
                    .unbind(),
            ))
        })?;
        let coroutine = call.bind(py).call1((write.bind(py), n))?;
        let done = schedule.bind(py).call1((coroutine, event_loop.bind(py)))?;
        done.call_method1(
            "add_done_callback",
            (Deliver {
                tx: Mutex::new(Some(tx)),
            },),
        )?;
        Ok(())
    });
    if let Err(e) = scheduled {
        return Err(Python::attach(|py| reported(py, e)));
    }
    rx.await
        .unwrap_or_else(|_| Err("the event loop dropped it before it ended".into()))
}

/// Where the outcome of a business write scheduled on the event loop goes.
type Delivery = tokio::sync::oneshot::Sender<Result<Py<PyAny>, WriteError>>;

/// Hands the outcome of a business write scheduled on the event loop back to the core.
#[pyclass(frozen)]
struct Deliver {
    tx: Mutex<Option<Delivery>>,
}

#[pymethods]
impl Deliver {
    fn __call__(&self, py: Python<'_>, done: &Bound<'_, PyAny>) {
        let outcome = done
            .call_method0("result")
            .map(Bound::unbind)
            .map_err(|e| reported(py, e));
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(tx) = tx {
            let _ = tx.send(outcome);
        }
    }
}

flavors! {
    /// A gap-free sequence: `issue(write)` takes the next number and runs `write(n)`, the
    /// business write that carries it; the number is used exactly when `write` succeeds.
    "Gapless", SyncGapless, AsyncGapless, Gapless;

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
        let g = self.live().get(py)?;
        Ok(format!("Gapless({:?}, collection={:?}, field={:?})", g.name(), g.options().collection, g.options().field))
    }

    /// Takes the next number, runs `write(n)` with it and returns an `Issued` once `write`
    /// succeeded. `write` raising releases the number for the next caller
    /// (`BusinessWriteError`, the exception as its `__cause__`); a duplicate key on the
    /// number (a void, or a stalled holder's write) moves on and calls `write` again with
    /// the next number. With `dispenser.aio`, `write` may be a coroutine function (Motor,
    /// Beanie): it runs on the caller's event loop.
    fn issue(&self, py: Python<'_>, write: Py<PyAny>) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        let event_loop = if Self::ASYNC {
            running_loop(py)?.map(|l| Arc::new(l.unbind()))
        } else {
            None
        };
        let write = Arc::new(write);
        run(py, Self::ASYNC, async move {
            let issued = g
                .issue(|n| business(write.clone(), event_loop.clone(), n))
                .await?;
            Outcome::Ok(Issued {
                number: issued.number,
                value: issued.value,
                skipped: issued.skipped,
            })
        })
    }

    /// Who changed it, when, how: a list of entry dicts, oldest first (at most `limit`, 100
    /// by default; `since` an aware `datetime`; `after` the `cursor` of the last entry of
    /// the previous page).
    #[pyo3(signature = (*, since=None, after=None, limit=None))]
    fn history(&self, py: Python<'_>, since: Option<&Bound<'_, PyAny>>, after: Option<String>, limit: Option<usize>) -> PyResult<Py<PyAny>> {
        let h = self.live().get(py)?.history();
        crate::dispenser::history_read(py, Self::ASYNC, h, since, after, limit)
    }

    /// The sequence's state (next number, lease, voids), as a dict.
    fn peek(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(Json(g.peek().await?.to_json())) })
    }

    /// Confirms at once the numbers this handle used (call it before the process exits).
    fn flush(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(g.flush().await?) })
    }

    /// Changes the sequence's settings: `max_lease` (seconds), the longest lease. Returns the
    /// state afterwards, as a dict.
    #[pyo3(signature = (*, max_lease=None))]
    fn alter(&self, py: Python<'_>, max_lease: Option<f64>) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        let mut change = GaplessAlter::default();
        if let Some(s) = max_lease {
            change = change.with_max_lease(seconds("max_lease", s).map_err(|e| to_py_err(py, &e))?);
        }
        run(py, Self::ASYNC, async move { Outcome::Ok(Json(g.alter(change).await?.to_json())) })
    }

    /// Voids `number` (the next one, or one a dead holder left) with a `reason`: a void
    /// document carries it, so the audit accounts for it.
    fn void(&self, py: Python<'_>, number: i64, reason: String) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(g.void(number, &reason).await?) })
    }

    /// Ends the lease on `number` at once (a holder that died): voids it if it was not
    /// written, else moves past the run written. Returns `{"voided": n}` or
    /// `{"used": [first, last]}`.
    #[pyo3(signature = (number, reason, *, force=false))]
    fn release(&self, py: Python<'_>, number: i64, reason: String, force: bool) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            let r = g.release(number, reason).force(force).await?;
            Outcome::Ok(Json(match r {
                Released::Voided(n) => serde_json::json!({ "voided": n }),
                Released::Used { first, last } => serde_json::json!({ "used": [first, last] }),
                other => serde_json::json!({ "released": format!("{other:?}") }),
            }))
        })
    }

    /// What it did so far, as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Json(stats_json(&self.live().get(py)?.stats())).into_pyobject(py)?.unbind())
    }
}
