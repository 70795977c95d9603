//! The core's errors as Python exceptions: one class per `ErrorKind` (defined in
//! `dispenser/_errors.py`), each carrying the core's stable `code`, its kind, message and what
//! the failed call wrote (`Error::written`).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use dispenser::{Error, error::ErrorKind};

/// Why a call failed: an error of the core, or a Python exception (an argument that does
/// not convert, a business write that raised).
pub(crate) enum Failure {
    Core(Error),
    Python(PyErr),
    /// A core error whose cause is a Python exception the core saw as the driver's (a
    /// business write's duplicate key): raised with it as its `__cause__`, unless the core's
    /// error carries a cause of its own.
    Caused(Error, PyErr),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Python(e)
    }
}

/// The result type of the futures the bindings run.
pub(crate) type Outcome<T> = Result<T, Failure>;

/// `dispenser._errors`, looked up once.
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The exception class of `kind` (a kind the binding does not know yet is the base class,
/// `DispenserError`). Its name is the core's, `ErrorKind::as_str`, on every surface.
fn class_of(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidInput => "InvalidInputError",
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::AlreadyExists => "AlreadyExistsError",
        ErrorKind::Conflict => "ConflictError",
        ErrorKind::Exhausted => "ExhaustedError",
        ErrorKind::QueueRefused => "QueueRefusedError",
        ErrorKind::Contention => "ContentionError",
        ErrorKind::Unavailable => "UnavailableError",
        ErrorKind::Corrupt => "CorruptError",
        ErrorKind::BusinessWrite => "BusinessWriteError",
        // `ErrorKind` is non-exhaustive: a kind added to the core reaches Python as the base
        // class until it gets its own.
        _ => "DispenserError",
    }
}

/// The Python exception for a core error: `cls(message, code, kind, written)`; a failed business
/// write's own Python exception is its `__cause__`.
pub(crate) fn to_py_err(py: Python<'_>, e: &Error) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let module =
            ERRORS.get_or_try_init(py, || py.import("dispenser._errors").map(Bound::unbind))?;
        let (class, kind) = (class_of(e.kind()), e.kind().as_str());
        let exc = module.bind(py).getattr(class)?.call1((
            e.to_string(),
            e.code(),
            kind,
            e.written().as_str(),
        ))?;
        let err = PyErr::from_value(exc);
        if let Error::BusinessWrite {
            source: Some(source),
            ..
        } = e
            && let Some(raised) = source.downcast_ref::<Raised>()
        {
            let cause = raised.0.clone_ref(py);
            // A business write stopped by Ctrl-C (or a SystemExit) raises that again once
            // its number was released: not an exception an `except Exception` swallows.
            if !cause.is_instance_of::<pyo3::exceptions::PyException>(py) {
                let _ = cause.value(py).setattr("written", e.written().as_str());
                return Ok(cause);
            }
            err.set_cause(py, Some(cause));
        }
        Ok(err)
    };
    make().unwrap_or_else(|failed| failed)
}

impl Failure {
    pub(crate) fn into_py_err(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Core(e) => to_py_err(py, &e),
            Failure::Python(e) => e,
            Failure::Caused(e, cause) => {
                let err = to_py_err(py, &e);
                if err
                    .value(py)
                    .getattr("__cause__")
                    .is_ok_and(|c| c.is_none())
                {
                    err.set_cause(py, Some(cause));
                }
                err
            }
        }
    }
}

/// The exception a business write raised, handed to the core as the write's error: the
/// core reports the failure (and releases the number), and the binding makes it the
/// `__cause__` of the `BusinessWriteError`.
#[derive(Debug)]
pub(crate) struct Raised(pub(crate) PyErr, String);

impl Raised {
    /// The exception and its one-line text (`ValueError: total missing`).
    pub(crate) fn new(py: Python<'_>, err: PyErr) -> Self {
        let value = err.value(py);
        let name = value
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "exception".to_owned());
        let text = match value.str() {
            Ok(s) if !s.to_string().is_empty() => format!("{name}: {s}"),
            _ => name,
        };
        Raised(err, text)
    }
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.1)
    }
}

impl std::error::Error for Raised {}

/// An argument the core would call invalid, refused by the binding while translating it (a
/// negative duration, a time zone that does not exist): the core's own error kind.
pub(crate) fn invalid(what: &str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        what: what.to_owned(),
        reason: reason.into(),
    }
}
