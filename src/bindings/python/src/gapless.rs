//! `Gapless`: gap-free numbers whose business write is the app's own Python code (PyMongo,
//! its `AsyncMongoClient`, an ODM's save, anything that raises on failure).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use dispenser::gapless::{Gapless, GaplessAlter};
use dispenser::mongodb::bson::doc;

use pyo3::types::PyDict;

use crate::convert::{Json, seconds};
use crate::errors::{Failure, Outcome, Raised, to_py_err};
use crate::flavor::flavors;
use crate::handles::stats_json;
use crate::runtime::{Job, JobSender, Writes, block, run, run_read, running_loop};

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

/// The last duplicate key a business write of one `issue` raised: what the core reports as
/// the driver's error is raised with it as its `__cause__` (a `DuplicateKeyError` on
/// another unique key than the number fails the issue).
type Duplicate = Arc<Mutex<Option<PyErr>>>;

/// A Python exception of a business write, as the core sees it: a duplicate key (the
/// driver's own error, so the core moves past a number some document carries; the
/// exception kept in `duplicate`) or a failure that releases the number.
fn reported(py: Python<'_>, e: PyErr, duplicate: &Duplicate) -> WriteError {
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
            *duplicate.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            return Box::new(dispenser::mongodb::error::Error::from(kind));
        }
    }
    Box::new(Raised::new(py, e))
}

/// `contextvars.copy_context`, looked up once.
static COPY_CONTEXT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `dispenser._bridge.start`, looked up once.
static START: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Where a business write runs: on the thread blocked in a sync `issue` (the caller's own
/// thread, sent there as a job), or on the caller's event loop, in a copy of the caller's
/// `contextvars` context.
#[derive(Clone)]
enum Writer {
    Caller(JobSender),
    Loop {
        event_loop: Arc<Py<PyAny>>,
        context: Arc<Py<PyAny>>,
    },
}

/// Runs the business write `write(n)` where `writer` says, and hands its outcome back.
async fn business(
    write: Arc<Py<PyAny>>,
    writer: Writer,
    duplicate: Duplicate,
    n: i64,
) -> Result<Py<PyAny>, WriteError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    match writer {
        Writer::Caller(jobs) => {
            let job: Job = Box::new(move |py| {
                let out = write
                    .bind(py)
                    .call1((n,))
                    .map(Bound::unbind)
                    .map_err(|e| reported(py, e, &duplicate));
                let _ = tx.send(out);
            });
            if jobs.send(job).is_err() {
                return Err(
                    "the calling thread stopped waiting before the business write ran".into(),
                );
            }
        }
        Writer::Loop {
            event_loop,
            context,
        } => {
            let scheduled = Python::attach(|py| -> PyResult<()> {
                let start = START.get_or_try_init(py, || -> PyResult<_> {
                    Ok(py.import("dispenser._bridge")?.getattr("start")?.unbind())
                })?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("context", context.bind(py))?;
                let deliver = Deliver {
                    tx: Mutex::new(Some(tx)),
                    duplicate: duplicate.clone(),
                };
                event_loop.bind(py).call_method(
                    "call_soon_threadsafe",
                    (start.bind(py), write.bind(py), n, deliver),
                    Some(&kwargs),
                )?;
                Ok(())
            });
            if let Err(e) = scheduled {
                return Err(Python::attach(|py| reported(py, e, &duplicate)));
            }
        }
    }
    rx.await
        .unwrap_or_else(|_| Err("the business write was dropped before it ended".into()))
}

/// Where the outcome of a business write scheduled on the event loop goes.
type Delivery = tokio::sync::oneshot::Sender<Result<Py<PyAny>, WriteError>>;

/// Hands the outcome of a business write scheduled on the event loop back to the core.
#[pyclass(frozen)]
struct Deliver {
    tx: Mutex<Option<Delivery>>,
    duplicate: Duplicate,
}

#[pymethods]
impl Deliver {
    fn __call__(&self, py: Python<'_>, done: &Bound<'_, PyAny>) {
        let outcome = done
            .call_method0("result")
            .map(Bound::unbind)
            .map_err(|e| reported(py, e, &self.duplicate));
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
        Ok(self.live().view(py)?.name().to_owned())
    }

    /// The settings the `ensure` that opened this handle found changed since by an alter,
    /// each `{setting, stored, asked}`: the stored value is kept, the asked one not applied.
    /// Empty for a handle from `create` or `open`, or when everything matched.
    #[getter]
    fn altered(&self, py: Python<'_>) -> PyResult<Json> {
        Ok(crate::convert::altered(self.live().view(py)?.altered()))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let g = self.live().view(py)?;
        Ok(format!("Gapless({:?}, collection={:?}, field={:?})", g.name(), g.options().collection, g.options().field))
    }

    /// Takes the next number, runs `write(n)` with it and returns an `Issued` once `write`
    /// succeeded. `write` raising releases the number for the next caller
    /// (`BusinessWriteError`, the exception as its `__cause__`); a duplicate key on the
    /// number (a void, or a stalled holder's write) moves on and calls `write` again with
    /// the next number. A sync `write` runs on the calling thread (which waits meanwhile);
    /// with `dispenser.aio`, `write` may be a coroutine function (PyMongo's
    /// `AsyncMongoClient`, Beanie, Motor): it runs on the caller's event loop, in a copy of
    /// the caller's `contextvars` context.
    fn issue(&self, py: Python<'_>, write: Py<PyAny>) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        let write = Arc::new(write);
        let issued = move |writer: Writer| async move {
            let duplicate = Duplicate::default();
            let issued = g
                .issue(|n| business(write.clone(), writer.clone(), duplicate.clone(), n))
                .await
                .map_err(|e| {
                    let raised = duplicate.lock().unwrap_or_else(|p| p.into_inner()).take();
                    match raised {
                        Some(cause) => Failure::Caused(e, cause),
                        None => Failure::Core(e),
                    }
                })?;
            Outcome::Ok(Issued {
                number: issued.number,
                value: issued.value,
                skipped: issued.skipped,
            })
        };
        if Self::ASYNC {
            let Some(event_loop) = running_loop(py)? else {
                // `run` says there is no running loop.
                return run(py, true, async { Outcome::Ok(()) });
            };
            let context = COPY_CONTEXT
                .get_or_try_init(py, || -> PyResult<_> {
                    Ok(py.import("contextvars")?.getattr("copy_context")?.unbind())
                })?
                .bind(py)
                .call0()?;
            let writer = Writer::Loop {
                event_loop: Arc::new(event_loop.unbind()),
                context: Arc::new(context.unbind()),
            };
            run(py, true, issued(writer))
        } else {
            let (tx, jobs) = tokio::sync::mpsc::unbounded_channel();
            block(py, issued(Writer::Caller(tx)), Some(jobs), Writes::Maybe)
        }
    }

    /// Who changed it, when, how: a list of entry dicts, oldest first (at most `limit`, 100
    /// by default; `since` an aware `datetime`; `after` the `cursor` of the last entry of
    /// the previous page).
    #[pyo3(signature = (*, since=None, after=None, limit=None))]
    fn history(&self, py: Python<'_>, since: Option<&Bound<'_, PyAny>>, after: Option<String>, limit: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let h = self.live().get(py)?.history();
        crate::dispenser::history_read(py, Self::ASYNC, h, since, after, limit)
    }

    /// The sequence's state (next number, lease, voids), as a dict.
    fn peek(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        run_read(py, Self::ASYNC, async move { Outcome::Ok(Json(g.peek().await?.to_json())) })
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
    /// written, else moves past the run written. Returns what every surface answers:
    /// `{"outcome": "voided", "number": n}` or `{"outcome": "used", "first": n, "last": m}`.
    #[pyo3(signature = (number, reason, *, force=false))]
    fn release(&self, py: Python<'_>, number: i64, reason: String, force: bool) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            Outcome::Ok(Json(g.release(number, reason).force(force).await?.to_json()))
        })
    }

    /// Deletes this gap-free sequence (its state; the business collection and its documents
    /// stay); refused (`ConflictError`, code `lease_held`) while a holder's lease runs,
    /// unless `force=True` (recorded in the history).
    #[pyo3(signature = (*, force=false))]
    fn delete(&self, py: Python<'_>, force: bool) -> PyResult<Py<PyAny>> {
        let g = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(g.delete().force(force).await?) })
    }

    /// What it did so far, as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Json(stats_json(&self.live().view(py)?.stats())).into_pyobject(py)?.unbind())
    }
}
