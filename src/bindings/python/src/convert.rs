//! Values between Python and the core: the core's JSON renderings of its states as dicts,
//! runs as `range`s, seconds as durations, dicts as BSON documents.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};

use dispenser::block::BlockOptions;
use dispenser::mongodb::bson::Document;
use dispenser::{Error, sequence::Run};

use crate::errors::invalid;

/// A JSON value the core rendered (a state, a ticket, a report), as Python data: the same
/// fields the command line's `--json` and the HTTP service show.
pub(crate) struct Json(pub(crate) serde_json::Value);

impl<'py> IntoPyObject<'py> for Json {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.0)
    }
}

/// The settings an `ensure` found changed since by an alter, as a list of dicts `{setting,
/// stored, asked}` (what a handle's `altered` answers).
pub(crate) fn altered(a: &[dispenser::sequence::Altered]) -> Json {
    Json(serde_json::Value::Array(
        a.iter()
            .map(|a| serde_json::json!({ "setting": a.setting, "stored": a.stored, "asked": a.asked }))
            .collect(),
    ))
}

fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, json_to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Each item of a listing: its rendering, or the error in its place (a document that does
/// not decode is an exception object in the list, not raised, so one bad document does not
/// hide the rest).
pub(crate) struct Listing(pub(crate) Vec<Result<serde_json::Value, Error>>);

impl<'py> IntoPyObject<'py> for Listing {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = PyList::empty(py);
        for item in self.0 {
            match item {
                Ok(v) => list.append(json_to_py(py, &v)?)?,
                Err(e) => list.append(crate::errors::to_py_err(py, &e).into_value(py))?,
            }
        }
        Ok(list.into_any())
    }
}

/// `builtins.range`, looked up once.
static RANGE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A run of numbers as a Python `range` (first, last, step: a run is an arithmetic
/// progression).
pub(crate) struct Numbers(pub(crate) Run);

impl<'py> IntoPyObject<'py> for Numbers {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let range = RANGE.get_or_try_init(py, || {
            py.import("builtins")?.getattr("range").map(Bound::unbind)
        })?;
        let run = self.0;
        let stop = i128::from(run.last()) + i128::from(run.step());
        range.bind(py).call1((run.first(), stop, run.step()))
    }
}

/// Seconds (an int or a float) as a duration, refused unless finite and positive.
pub(crate) fn seconds(what: &str, s: f64) -> Result<Duration, Error> {
    dispenser::translate::seconds(what, s)
}

/// `json.dumps`, looked up once.
static DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A dict of JSON-like values (str, int, float, bool, None, lists, dicts) as a BSON
/// document.
pub(crate) fn document(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Result<Document, Error>> {
    let py = value.py();
    let dumps = DUMPS.get_or_try_init(py, || {
        py.import("json")?.getattr("dumps").map(Bound::unbind)
    })?;
    let text: String = match dumps.bind(py).call1((value,)) {
        Ok(t) => t.extract()?,
        Err(e) => return Ok(Err(invalid(what, format!("not JSON-like data: {e}")))),
    };
    let json: serde_json::Value = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(e) => return Ok(Err(invalid(what, e.to_string()))),
    };
    Ok(match dispenser::mongodb::bson::to_document(&json) {
        Ok(d) => Ok(d),
        Err(_) => Err(invalid(what, "give a dict (a document's fields)")),
    })
}

/// A day given as a `datetime.date` or `YYYY-MM-DD` text, as text.
pub(crate) fn day(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = value.extract::<String>() {
        return Ok(s);
    }
    value.call_method0("isoformat")?.extract()
}

/// Block options from the keywords given; the others keep the core's defaults.
pub(crate) fn block_options(
    size: Option<u64>,
    prefetch: Option<f64>,
    grow_to: Option<u64>,
    range_share: Option<f64>,
) -> BlockOptions {
    let mut o = BlockOptions::default();
    if let Some(v) = size {
        o = o.with_size(v);
    }
    if let Some(v) = prefetch {
        o = o.with_prefetch(Some(v));
    }
    if let Some(v) = grow_to {
        o = o.with_grow_to(Some(v));
    }
    if let Some(v) = range_share {
        o = o.with_range_share(Some(v));
    }
    o
}

/// The time zone of an IANA name.
pub(crate) fn time_zone_named(name: &str) -> Result<dispenser::jiff::tz::TimeZone, Error> {
    dispenser::translate::time_zone("time zone", name)
}

/// A count or a size (`n`, `count`, `size`, `limit`, `stripes`, …) of at most `max`: an
/// int of another sign or past `max` is the core's invalid input naming the argument and
/// its value (an `InvalidInputError`, also a `ValueError`), not an `OverflowError`; a value
/// that is no int at all stays a `TypeError`.
pub(crate) fn count(what: &str, value: &Bound<'_, PyAny>, max: u64) -> PyResult<u64> {
    let py = value.py();
    let refused = |reason: String| Err(crate::errors::to_py_err(py, &invalid(what, reason)));
    match value.extract::<u64>() {
        Ok(n) if n <= max => Ok(n),
        Ok(n) => refused(format!("{n}: at most {max}")),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
            let shown = value.str()?.to_string();
            if value.lt(0)? {
                refused(format!("{shown}: a count cannot be negative"))
            } else {
                refused(format!("{shown}: at most {max}"))
            }
        }
        Err(e) => Err(e),
    }
}

/// [`count`] of an optional argument.
pub(crate) fn count_opt(
    what: &str,
    value: Option<&Bound<'_, PyAny>>,
    max: u64,
) -> PyResult<Option<u64>> {
    value.map(|v| count(what, v, max)).transpose()
}

/// The largest `u32`, as a count's bound.
pub(crate) const U32: u64 = u32::MAX as u64;

/// The largest `usize` (on every platform Python runs on, at least `u32::MAX`), as a count's
/// bound.
pub(crate) const USIZE: u64 = if usize::BITS >= 64 {
    u64::MAX
} else {
    u32::MAX as u64
};
