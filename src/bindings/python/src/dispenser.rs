//! `Dispenser`: one collection of sequences; creates, opens and administers them.

use std::sync::Arc;

use pyo3::prelude::*;

use dispenser::gapless::GaplessOptions;
use dispenser::queue::QueueSpec;
use dispenser::sequence::Strategy;
use dispenser::{Dispenser, Error, Format, Options, Spec};

use crate::closing::Closer;
use crate::convert::{
    Json, Listing, U32, USIZE, block_options, count, count_opt, day, document, seconds,
    time_zone_named,
};
use crate::errors::{Outcome, invalid};
use crate::flavor::{Out, flavors};
use crate::handles;
use crate::runtime::{Live, run, run_read, wait};

/// A listing builder (`list`, `list_queues`, `list_gapless`) with the options given.
macro_rules! page {
    ($list:expr, $matching:expr, $after:expr, $limit:expr, $named:expr) => {{
        let mut list = $list;
        if let Some(p) = $matching {
            list = list.matching(p);
        }
        if let Some(a) = $after {
            list = list.after(a);
        }
        if let Some(n) = $limit {
            list = list.limit(n);
        }
        if let Some(n) = $named {
            list = list.named(n);
        }
        list
    }};
}

/// A spec from the keywords given; the others keep the core's defaults.
pub(crate) fn spec(
    start: Option<i64>,
    step: Option<i64>,
    min: Option<i64>,
    max: Option<i64>,
    cycle: Option<bool>,
) -> Spec {
    dispenser::translate::spec(start, step, min, max, cycle)
}

fn strategy(name: &str) -> Result<Strategy, Error> {
    match name {
        "inc" => Ok(Strategy::ConditionalIncrement),
        "cas" => Ok(Strategy::Cas),
        other => Err(invalid(
            "strategy",
            format!("{other:?}: use \"inc\" (the conditional increment) or \"cas\""),
        )),
    }
}

/// A queue spec from the keywords given; the others keep the core's defaults.
fn queue_spec(
    min: Option<i64>,
    max: Option<i64>,
    format: Option<&str>,
    time_zone: Option<&str>,
    daily: Option<bool>,
) -> Result<QueueSpec, Error> {
    let zone = time_zone.map(|z| ("time_zone", z));
    dispenser::translate::queue_spec(min, max, format, zone, daily)
}

/// Gap-free options from the keywords given; the others keep the core's defaults.
#[allow(clippy::too_many_arguments)]
fn gapless_options(
    collection: &str,
    field: &str,
    start: Option<i64>,
    lease: Option<f64>,
    max_lease: Option<f64>,
    wait: Option<f64>,
    void_field: Option<&str>,
    void_extra: Option<&Bound<'_, PyAny>>,
) -> PyResult<Result<GaplessOptions, Error>> {
    let extra = match void_extra.map(|x| document("void_extra", x)).transpose()? {
        Some(Err(e)) => return Ok(Err(e)),
        Some(Ok(d)) => Some(d),
        None => None,
    };
    let durations = dispenser::translate::GaplessSeconds {
        lease: lease.map(|s| ("lease", s)),
        max_lease: max_lease.map(|s| ("max_lease", s)),
        wait: wait.map(|s| ("wait", s)),
    };
    Ok(dispenser::translate::gapless_options(
        collection, field, start, durations, void_field, extra,
    ))
}

/// A `Live` dispenser that a child after fork connects again with the same URI and options,
/// with the closer of its connection pool.
fn connected(uri: String, options: Options, d: Dispenser) -> Arc<Live<Dispenser>> {
    let closer = Closer::new(&options.database, &options.collection);
    Arc::new(Live::new(
        d,
        Box::new(move |py| {
            let (uri, options) = (uri.clone(), options.clone());
            wait(py, async move { Dispenser::connect(&uri, options).await })
        }),
        closer,
    ))
}

/// The page size of a listing, checked.
fn limit_of(limit: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    Ok(count_opt("limit", limit, USIZE)?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
}

/// A count of at most `u32::MAX`, checked.
fn count_u32(what: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    Ok(count_opt(what, value, U32)?.map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
}

flavors! {
    /// One collection of sequences on one MongoDB deployment: creates, opens and
    /// administers sequences, gap-free sequences and queues. Connect once per process and
    /// share it; every handle it opens is safe to use from any number of threads (or tasks).
    "Dispenser", SyncDispenser, AsyncDispenser, Dispenser;
    sync {
        fn __enter__(slf: Py<Self>) -> Py<Self> {
            slf
        }

        /// Closes it (see `close`).
        #[pyo3(signature = (*_exc))]
        fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
            self.close(py)?;
            Ok(false)
        }
    }
    aio {
        fn __aenter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
            run(py, true, async move { Outcome::Ok(slf) })
        }

        /// Closes it (see `close`).
        #[pyo3(signature = (*_exc))]
        fn __aexit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<Py<PyAny>> {
            let closing = self.live().closer().close(self.live().current());
            run(py, true, async move {
                if let Some(c) = closing {
                    c.await;
                }
                Outcome::Ok(false)
            })
        }

        /// `close()`, by the name asyncio's resources use.
        fn aclose(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
            self.close(py)
        }
    }

    /// Closes it: every block client it (or a `with_caller` dispenser of the same pool)
    /// opened gives back the numbers it holds, every gap-free handle confirms the numbers it
    /// used, the connection pool is shut down, and every later call on it or on a handle it
    /// opened raises `UnavailableError` (code `closed`). Returns `{"given_back", "lost"}`
    /// summed over its block clients; closing again does nothing (zeros).
    fn close(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let closing = self.live().closer().close(self.live().current());
        run(py, Self::ASYNC, async move {
            let (given_back, lost) = match closing {
                Some(c) => c.await,
                None => (0, 0),
            };
            Outcome::Ok(Json(serde_json::json!({ "given_back": given_back, "lost": lost })))
        })
    }

    /// Whether it was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.live().closer().is_closed()
    }

    /// Moves the sequence `name` past every number `source` issued (an `AdoptSource`):
    /// the switch-over from mongoengine's `SequenceField`, mongoose-sequence, a counter of
    /// one's own, or documents numbered already, so that no number they carry is handed out
    /// again. Never backwards; recorded in the history as `adopt`. A scoped source adopts
    /// into each scope of the template `name`. Returns a list of `Adopted` dicts (`name`,
    /// `highest`: the last number the source issued or `None`, `moved`, `state`).
    fn adopt(&self, py: Python<'_>, name: String, source: PyRef<'_, crate::adopt::PyAdoptSource>) -> PyResult<Py<PyAny>> {
        let source = source.0.clone();
        let d = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            let done = d.adopt(&name, source).await?;
            Outcome::Ok(done.iter().map(|a| Json(handles::adopted_json(a))).collect::<Vec<_>>())
        })
    }

    /// Connects to `uri` (nothing is sent until the first call). `database` and
    /// `collection` say where the sequence documents live (default `dispenser.dispensers`),
    /// `caller` who is acting (queue request ids are scoped to it), `timeout` the longest
    /// one database operation may take (seconds, default 10), `strategy` how numbers are
    /// drawn (`"inc"`, the default, or `"cas"`) and `coalesce` whether concurrent draws on
    /// one handle share writes (default true).
    #[staticmethod]
    #[pyo3(signature = (uri, *, database=None, collection=None, caller=None, timeout=None, strategy=None, coalesce=None))]
    #[allow(clippy::too_many_arguments)]
    fn connect(
        py: Python<'_>,
        uri: String,
        database: Option<String>,
        collection: Option<String>,
        caller: Option<String>,
        timeout: Option<f64>,
        strategy: Option<String>,
        coalesce: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let asynchronous = Self::ASYNC;
        run(py, asynchronous, async move {
            let mut options = Options::default();
            if let Some(v) = database {
                options = options.with_database(v);
            }
            if let Some(v) = collection {
                options = options.with_collection(v);
            }
            if let Some(v) = caller {
                options = options.with_caller(v);
            }
            if let Some(s) = timeout {
                options = options.with_operation_timeout(seconds("timeout", s)?);
            }
            if let Some(s) = strategy {
                options = options.with_strategy(self::strategy(&s)?);
            }
            if let Some(v) = coalesce {
                options = options.with_coalesce(v);
            }
            let d = Dispenser::connect(&uri, options.clone()).await?;
            Outcome::Ok(Out(crate::flavor::Handle { live: connected(uri, options, d), asynchronous }))
        })
    }

    /// The same dispenser (the same connection pool) acting as `caller`.
    fn with_caller(&self, py: Python<'_>, caller: String) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        let made = d.with_caller(&caller).map_err(|e| crate::errors::to_py_err(py, &e))?;
        let parent = self.live().clone();
        let closer = parent.closer().clone();
        let live = Arc::new(Live::new(
            made,
            Box::new(move |py| {
                parent
                    .get(py)?
                    .with_caller(&caller)
                    .map_err(|e| crate::errors::to_py_err(py, &e))
            }),
            closer,
        ));
        Ok(Out(crate::flavor::Handle { live, asynchronous: Self::ASYNC }).into_pyobject(py)?.unbind())
    }

    /// Who this dispenser acts as (`None` for the unnamed caller).
    #[getter]
    fn caller(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.live().view(py)?.caller().map(str::to_owned))
    }

    /// The database holding the sequence documents.
    #[getter]
    fn database(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.live().view(py)?.options().database.clone())
    }

    /// The collection holding the sequence documents.
    #[getter]
    fn collection(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.live().view(py)?.options().collection.clone())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let d = self.live().view(py)?;
        let o = d.options();
        Ok(format!("Dispenser(database={:?}, collection={:?})", o.database, o.collection))
    }

    /// Creates a new sequence (`AlreadyExistsError` when the name is taken), with the
    /// serial `format` (`"INV-{n:06}"`) written in the same insert. Unset keywords keep the
    /// defaults: start 1, step 1, min 0, max 2**63-1, no cycle, no format.
    #[pyo3(signature = (name, *, start=None, step=None, min=None, max=None, cycle=None, format=None))]
    #[allow(clippy::too_many_arguments)]
    fn create(&self, py: Python<'_>, name: String, start: Option<i64>, step: Option<i64>, min: Option<i64>, max: Option<i64>, cycle: Option<bool>, format: Option<String>) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let spec = spec(start, step, min, max, cycle);
        run(py, a, async move {
            let format = format.as_deref().map(Format::parse).transpose()?;
            Outcome::Ok(handles::sequence(&dl, &d, d.create(&name, spec).format(format).await?, a))
        })
    }

    /// Creates the sequence, or opens it if everything a create writes is equal: start,
    /// step, bounds, cycle and `format` (none given and one stored differs); otherwise
    /// `ConflictError`, naming what differs. Safe when many processes race.
    #[pyo3(signature = (name, *, start=None, step=None, min=None, max=None, cycle=None, format=None))]
    #[allow(clippy::too_many_arguments)]
    fn ensure(&self, py: Python<'_>, name: String, start: Option<i64>, step: Option<i64>, min: Option<i64>, max: Option<i64>, cycle: Option<bool>, format: Option<String>) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let spec = spec(start, step, min, max, cycle);
        run(py, a, async move {
            let format = format.as_deref().map(Format::parse).transpose()?;
            Outcome::Ok(handles::sequence(&dl, &d, d.ensure(&name, spec).format(format).await?, a))
        })
    }

    /// Opens an existing sequence (`NotFoundError` otherwise).
    fn open(&self, py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        run(py, a, async move { Outcome::Ok(handles::sequence(&dl, &d, d.open(&name).await?, a)) })
    }

    /// The stored state of a sequence, as a dict (the fields `dispenser peek --json` shows).
    fn peek(&self, py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        run_read(py, Self::ASYNC, async move { Outcome::Ok(Json(d.peek(&name).await?.to_json())) })
    }

    /// Every sequence, by name, or a page of them: a list of state dicts, with a
    /// `CorruptError` object in the place of a document that does not decode. `matching`:
    /// name patterns (`*` any run of characters, `?` one); `after`: names after this one
    /// (byte order); `limit`: at most this many; `named`: only these names; `scopes_of`: the
    /// scopes of this template.
    #[pyo3(signature = (*, matching=None, after=None, limit=None, named=None, scopes_of=None))]
    fn list(&self, py: Python<'_>, matching: Option<Vec<String>>, after: Option<String>, limit: Option<&Bound<'_, PyAny>>, named: Option<Vec<String>>, scopes_of: Option<String>) -> PyResult<Py<PyAny>> {
        let limit = limit_of(limit)?;
        let d = self.live().get(py)?;
        run_read(py, Self::ASYNC, async move {
            let mut list = page!(d.list(), matching, after, limit, named);
            if let Some(t) = scopes_of {
                list = list.scopes_of(t);
            }
            Outcome::Ok(states(list.await?))
        })
    }

    /// Deletes the sequence `name` (its numbers may be issued again if it is created anew).
    fn delete(&self, py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(d.delete(&name).await?) })
    }

    /// Checks that the server answers (a `ping`), within the operation timeout.
    fn ping(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        run_read(py, Self::ASYNC, async move { Outcome::Ok(d.ping().await?) })
    }

    /// Who created, altered, reset or deleted `name`, when, with the states before and
    /// after: a list of dicts, oldest first — also of one deleted (each handle has its own
    /// `history()`). `kind` is `"sequence"`, `"gapless"` or `"queue"`; `since` an aware
    /// `datetime`; `after` the `cursor` of the last entry of the previous page.
    #[pyo3(signature = (name, *, kind="sequence", since=None, after=None, limit=None))]
    fn history(&self, py: Python<'_>, name: String, kind: &str, since: Option<&Bound<'_, PyAny>>, after: Option<String>, limit: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        let kind = match kind {
            "sequence" => dispenser::error::Kind::Sequence,
            "queue" => dispenser::error::Kind::Queue,
            "gapless" => dispenser::error::Kind::Gapless,
            other => {
                let e = invalid("history kind", format!("{other:?}: use \"sequence\", \"gapless\" or \"queue\""));
                return Err(crate::errors::to_py_err(py, &e));
            }
        };
        history_read(py, Self::ASYNC, d.history(kind, &name), since, after, limit)
    }

    /// Examines the server (a few seconds of probes in a scratch collection): the report
    /// as a dict; `report["fit"]` says whether it keeps the guarantees. `tasks` write at once
    /// (2 to 64, default 8), each sending `increments` conditional increments (default 200)
    /// and collecting `swaps` compare-and-set wins (default 100), within `time_limit`
    /// seconds in all (default 10).
    #[pyo3(signature = (*, tasks=None, increments=None, swaps=None, time_limit=None))]
    fn doctor(&self, py: Python<'_>, tasks: Option<&Bound<'_, PyAny>>, increments: Option<&Bound<'_, PyAny>>, swaps: Option<&Bound<'_, PyAny>>, time_limit: Option<f64>) -> PyResult<Py<PyAny>> {
        let mut o = dispenser::doctor::DoctorOptions::default();
        if let Some(v) = count_u32("tasks", tasks)? {
            o = o.with_tasks(v);
        }
        if let Some(v) = count_u32("increments", increments)? {
            o = o.with_increments(v);
        }
        if let Some(v) = count_u32("swaps", swaps)? {
            o = o.with_swaps(v);
        }
        if let Some(s) = time_limit {
            o = o.with_time_limit(seconds("time_limit", s).map_err(|e| crate::errors::to_py_err(py, &e))?);
        }
        let d = self.live().get(py)?;
        run(py, Self::ASYNC, async move {
            Outcome::Ok(Json(d.doctor().options(o).await?.to_json()))
        })
    }

    // --- blocks

    /// A block client of the existing sequence `name`: one write reserves `size` numbers,
    /// handed out from memory. Unset keywords keep the core's defaults.
    #[pyo3(signature = (name, *, size=None, prefetch=None, grow_to=None, range_share=None))]
    fn open_blocks(&self, py: Python<'_>, name: String, size: Option<&Bound<'_, PyAny>>, prefetch: Option<f64>, grow_to: Option<&Bound<'_, PyAny>>, range_share: Option<f64>) -> PyResult<Py<PyAny>> {
        let size = count_opt("size", size, u64::MAX)?;
        let grow_to = count_opt("grow_to", grow_to, u64::MAX)?;
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let o = block_options(size, prefetch, grow_to, range_share);
        run(py, a, async move { Outcome::Ok(handles::blocks(&dl, d.open_blocks(&name).options(o).await?, o, a)) })
    }

    // --- striped sequences

    /// Creates a striped sequence of `stripes` documents (`AlreadyExistsError` if taken).
    #[pyo3(signature = (name, stripes, *, start=None, step=None, min=None, max=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_striped(&self, py: Python<'_>, name: String, stripes: &Bound<'_, PyAny>, start: Option<i64>, step: Option<i64>, min: Option<i64>, max: Option<i64>) -> PyResult<Py<PyAny>> {
        let stripes = u32::try_from(count("stripes", stripes, U32)?).unwrap_or(u32::MAX);
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let spec = spec(start, step, min, max, None);
        run(py, a, async move { Outcome::Ok(handles::striped(&dl, d.create_striped(&name, stripes, spec).await?, None, a)) })
    }

    /// Creates the striped sequence, or opens it if it exists with the same layout.
    #[pyo3(signature = (name, stripes, *, start=None, step=None, min=None, max=None))]
    #[allow(clippy::too_many_arguments)]
    fn ensure_striped(&self, py: Python<'_>, name: String, stripes: &Bound<'_, PyAny>, start: Option<i64>, step: Option<i64>, min: Option<i64>, max: Option<i64>) -> PyResult<Py<PyAny>> {
        let stripes = u32::try_from(count("stripes", stripes, U32)?).unwrap_or(u32::MAX);
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let spec = spec(start, step, min, max, None);
        run(py, a, async move { Outcome::Ok(handles::striped(&dl, d.ensure_striped(&name, stripes, spec).await?, None, a)) })
    }

    /// Opens an existing striped sequence.
    fn open_striped(&self, py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        run(py, a, async move { Outcome::Ok(handles::striped(&dl, d.open_striped(&name).await?, None, a)) })
    }

    /// Deletes every stripe of the striped sequence `name`; returns how many.
    fn delete_striped(&self, py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(d.delete_striped(&name).await?) })
    }

    // --- scopes and daily sequences

    /// The sequence of `template` for `scope` (`orders@acme`), created from the template's
    /// shape if needed.
    fn ensure_scope(&self, py: Python<'_>, template: String, scope: String) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        run(py, a, async move { Outcome::Ok(handles::sequence(&dl, &d, d.ensure_scope(&template, &scope).await?, a)) })
    }

    /// Creates the sequence of `template` for `scope` (`AlreadyExistsError` if it exists).
    fn create_scope(&self, py: Python<'_>, template: String, scope: String) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        run(py, a, async move { Outcome::Ok(handles::sequence(&dl, &d, d.create_scope(&template, &scope).await?, a)) })
    }

    /// Opens the existing sequence of `template` for `scope`.
    fn open_scope(&self, py: Python<'_>, template: String, scope: String) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        run(py, a, async move { Outcome::Ok(handles::sequence(&dl, &d, d.open_scope(&template, &scope).await?, a)) })
    }

    /// Deletes the scopes of `template` that sort before `before` (a `datetime.date` or
    /// text); returns how many.
    fn delete_scopes_before(&self, py: Python<'_>, template: String, before: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        let before = day(before)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(d.delete_scopes_before(&template, &before).await?) })
    }

    /// A sequence of `template` whose numbering restarts every day in `time_zone` (an IANA
    /// name, default UTC). Its `next()` returns `(day, number)`.
    #[pyo3(signature = (template, time_zone="UTC"))]
    fn open_daily(&self, py: Python<'_>, template: String, time_zone: &str) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let daily = time_zone_named(time_zone)
            .and_then(|tz| d.open_daily(&template, tz))
            .map_err(|e| crate::errors::to_py_err(py, &e))?;
        Ok(handles::daily(&dl, daily, template, time_zone.to_owned(), a).into_pyobject(py)?.unbind())
    }

    // --- gap-free sequences

    /// Makes the gap-free sequence `name` if needed, or opens it if it exists with the same
    /// settings: its numbers are carried by `field` of the documents of `collection` (in
    /// this dispenser's database), which gets a unique index on it. `lease`, `max_lease`
    /// and `wait` are seconds.
    #[pyo3(signature = (name, *, collection, field, start=None, lease=None, max_lease=None, wait=None, void_field=None, void_extra=None))]
    #[allow(clippy::too_many_arguments)]
    fn ensure_gapless(&self, py: Python<'_>, name: String, collection: &str, field: &str, start: Option<i64>, lease: Option<f64>, max_lease: Option<f64>, wait: Option<f64>, void_field: Option<&str>, void_extra: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let o = gapless_options(collection, field, start, lease, max_lease, wait, void_field, void_extra)?;
        run(py, a, async move {
            let o = o?;
            Outcome::Ok(handles::gapless(&dl, d.ensure_gapless(&name, o.clone()).await?, Some(o), a))
        })
    }

    /// As `ensure_gapless`, but fails (`AlreadyExistsError`) if it exists.
    #[pyo3(signature = (name, *, collection, field, start=None, lease=None, max_lease=None, wait=None, void_field=None, void_extra=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_gapless(&self, py: Python<'_>, name: String, collection: &str, field: &str, start: Option<i64>, lease: Option<f64>, max_lease: Option<f64>, wait: Option<f64>, void_field: Option<&str>, void_extra: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let o = gapless_options(collection, field, start, lease, max_lease, wait, void_field, void_extra)?;
        run(py, a, async move {
            let o = o?;
            Outcome::Ok(handles::gapless(&dl, d.create_gapless(&name, o.clone()).await?, Some(o), a))
        })
    }

    /// Opens the existing gap-free sequence `name` with the settings it was created with.
    fn open_gapless(&self, py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        run(py, a, async move { Outcome::Ok(handles::gapless(&dl, d.open_gapless(&name).await?, None, a)) })
    }

    /// Deletes the gap-free sequence `name` (its state; the business collection and its
    /// documents stay); refused (`ConflictError`, code `lease_held`) while a holder's lease
    /// runs, unless `force=True` (recorded in the history).
    #[pyo3(signature = (name, *, force=false))]
    fn delete_gapless(&self, py: Python<'_>, name: String, force: bool) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(d.delete_gapless(&name).force(force).await?) })
    }

    /// Every gap-free sequence, by name, or a page of them (the options of `list`), as state
    /// dicts (one whose document cannot be read is its exception, in its place).
    #[pyo3(signature = (*, matching=None, after=None, limit=None, named=None))]
    fn list_gapless(&self, py: Python<'_>, matching: Option<Vec<String>>, after: Option<String>, limit: Option<&Bound<'_, PyAny>>, named: Option<Vec<String>>) -> PyResult<Py<PyAny>> {
        let limit = limit_of(limit)?;
        let d = self.live().get(py)?;
        run_read(py, Self::ASYNC, async move {
            let page = page!(d.list_gapless(), matching, after, limit, named).await?;
            Outcome::Ok(Listing(page.into_iter().map(|g| g.map(|g| g.to_json())).collect()))
        })
    }

    /// Reads `collection` and accounts for every number in `field`: a dict with `numbers`,
    /// `missing`, `gaps`, `duplicated`, `voided`, … and `clean`. `from_` is the first
    /// number expected (default: the smallest found; `from` with Python's trailing `_`).
    /// `start`, its name before, is refused naming `from_`.
    #[pyo3(signature = (collection, field, *, from_=None, void_field=None, start=None))]
    fn audit(&self, py: Python<'_>, collection: String, field: String, from_: Option<i64>, void_field: Option<String>, start: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        if start.is_some() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "audit() got an unexpected keyword argument 'start': it was renamed from_ (the audit's first number is `from` on every surface); write audit(collection, field, from_=N)",
            ));
        }
        let d = self.live().get(py)?;
        run_read(py, Self::ASYNC, async move {
            let mut o = dispenser::gapless::AuditOptions::default();
            if let Some(v) = from_ {
                o = o.with_from(v);
            }
            if let Some(v) = void_field {
                o = o.with_void_field(v);
            }
            let business = d
                .client()
                .database(&d.options().database)
                .collection::<dispenser::mongodb::bson::Document>(&collection);
            let a = dispenser::gapless::audit(&business, &field, &o).await?;
            Outcome::Ok(Json(crate::handles::audit_json(&a)))
        })
    }

    // --- queues

    /// Creates a ticket queue (`AlreadyExistsError` if it exists). Unset keywords keep the
    /// defaults: tickets 0..=99, shown as numbers, UTC, not daily.
    #[pyo3(signature = (name, *, min=None, max=None, format=None, time_zone=None, daily=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_queue(&self, py: Python<'_>, name: String, min: Option<i64>, max: Option<i64>, format: Option<&str>, time_zone: Option<&str>, daily: Option<bool>) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let spec = queue_spec(min, max, format, time_zone, daily);
        run(py, a, async move { Outcome::Ok(handles::queue(&dl, d.create_queue(&name, spec?).await?, a)) })
    }

    /// Creates the queue, or opens it if it exists with the same spec.
    #[pyo3(signature = (name, *, min=None, max=None, format=None, time_zone=None, daily=None))]
    #[allow(clippy::too_many_arguments)]
    fn ensure_queue(&self, py: Python<'_>, name: String, min: Option<i64>, max: Option<i64>, format: Option<&str>, time_zone: Option<&str>, daily: Option<bool>) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        let spec = queue_spec(min, max, format, time_zone, daily);
        run(py, a, async move { Outcome::Ok(handles::queue(&dl, d.ensure_queue(&name, spec?).await?, a)) })
    }

    /// Opens an existing queue.
    fn open_queue(&self, py: Python<'_>, name: String) -> PyResult<Py<PyAny>> {
        let (d, dl, a) = (self.live().get(py)?, self.live().clone(), Self::ASYNC);
        run(py, a, async move { Outcome::Ok(handles::queue(&dl, d.open_queue(&name).await?, a)) })
    }

    /// Every queue, by name, or a page of them (the options of `list`), as status dicts.
    #[pyo3(signature = (*, matching=None, after=None, limit=None, named=None))]
    fn list_queues(&self, py: Python<'_>, matching: Option<Vec<String>>, after: Option<String>, limit: Option<&Bound<'_, PyAny>>, named: Option<Vec<String>>) -> PyResult<Py<PyAny>> {
        let limit = limit_of(limit)?;
        let d = self.live().get(py)?;
        run_read(py, Self::ASYNC, async move {
            let page = page!(d.list_queues(), matching, after, limit, named).await?;
            Outcome::Ok(Listing(page.into_iter().map(|q| q.map(|q| q.to_json())).collect()))
        })
    }

    /// Deletes the queue `name`; refused (`ConflictError`, code `queue_in_use`) while
    /// people wait, unless `force=True` (recorded in the history).
    #[pyo3(signature = (name, *, force=false))]
    fn delete_queue(&self, py: Python<'_>, name: String, force: bool) -> PyResult<Py<PyAny>> {
        let d = self.live().get(py)?;
        run(py, Self::ASYNC, async move { Outcome::Ok(d.delete_queue(&name).force(force).await?) })
    }
}

/// Sequence states as a listing.
fn states(items: Vec<Result<dispenser::sequence::SequenceState, Error>>) -> Listing {
    Listing(items.into_iter().map(|s| s.map(|s| s.to_json())).collect())
}

/// A history read with the options given (`since` an aware `datetime`), run as `asynchronous`
/// says: a list of entry dicts, oldest first. Every handle's `history()` and
/// `Dispenser.history()` answer through it.
pub(crate) fn history_read(
    py: Python<'_>,
    asynchronous: bool,
    mut h: dispenser::history::History,
    since: Option<&Bound<'_, PyAny>>,
    after: Option<String>,
    limit: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let limit = limit_of(limit)?;
    if let Some(t) = since {
        let secs: f64 = t.call_method0("timestamp")?.extract()?;
        let ts = dispenser::jiff::Timestamp::from_microsecond((secs * 1e6) as i64)
            .map_err(|e| crate::errors::to_py_err(py, &invalid("since", e.to_string())))?;
        h = h.since(ts);
    }
    if let Some(c) = after {
        h = h.after(c);
    }
    if let Some(l) = limit {
        h = h.limit(l);
    }
    run_read(py, asynchronous, async move {
        let entries = h.await?;
        Outcome::Ok(
            entries
                .iter()
                .map(|e| Json(e.to_json()))
                .collect::<Vec<_>>(),
        )
    })
}
