//! Two flavours of every handle from one list of methods: `dispenser.X` (each call blocks
//! and returns its value) and `dispenser.aio.X` (each core call returns an awaitable). A
//! method is written once; [`crate::runtime::run`] waits or hands back an awaitable by the
//! class's `ASYNC`.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::runtime::Live;

/// A core handle on its way to Python, as a sync or an asyncio handle.
pub(crate) struct Handle<T> {
    pub(crate) live: Arc<Live<T>>,
    pub(crate) asynchronous: bool,
}

/// Makes the Python object of a [`Handle`] (implemented by [`flavors!`] for each class).
pub(crate) trait Wrap {
    fn wrap(self, py: Python<'_>) -> PyResult<Py<PyAny>>;
}

/// A handle whose class pair [`flavors!`] made converts to its Python object.
pub(crate) struct Out<T>(pub(crate) Handle<T>);

impl<'py, T> IntoPyObject<'py> for Out<T>
where
    Handle<T>: Wrap,
{
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.0.wrap(py).map(|o| o.into_bound(py))
    }
}

/// Declares the sync and the asyncio class of one kind of handle, over `Live<$core>`, with
/// the same methods, plus those of `sync { … }` on the sync class only and of `aio { … }` on
/// the asyncio class only (`with` and `async with`).
macro_rules! flavors {
    (
        $(#[doc = $doc:literal])*
        $name:literal, $Sync:ident, $Async:ident, $core:ty;
        sync { $($sync:tt)* } aio { $($aio:tt)* }
        $($body:tt)*
    ) => {
        crate::flavor::flavors! {
            @both $(#[doc = $doc])* $name, $Sync, $Async, $core;
            { $($sync)* } { $($aio)* }
            $($body)*
        }
    };
    (
        @both
        $(#[doc = $doc:literal])*
        $name:literal, $Sync:ident, $Async:ident, $core:ty;
        { $($sync:tt)* } { $($aio:tt)* }
        $($body:tt)*
    ) => {
        $(#[doc = $doc])*
        #[pyclass(frozen, name = $name, module = "dispenser")]
        pub(crate) struct $Sync(pub(crate) std::sync::Arc<crate::runtime::Live<$core>>);

        $(#[doc = $doc])*
        #[pyclass(frozen, name = $name, module = "dispenser.aio")]
        pub(crate) struct $Async(pub(crate) std::sync::Arc<crate::runtime::Live<$core>>);

        impl $Sync {
            const ASYNC: bool = false;
            fn live(&self) -> &std::sync::Arc<crate::runtime::Live<$core>> {
                &self.0
            }
        }

        impl $Async {
            const ASYNC: bool = true;
            fn live(&self) -> &std::sync::Arc<crate::runtime::Live<$core>> {
                &self.0
            }
        }

        impl crate::flavor::Wrap for crate::flavor::Handle<$core> {
            fn wrap(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                if self.asynchronous {
                    Py::new(py, $Async(self.live)).map(Py::into_any)
                } else {
                    Py::new(py, $Sync(self.live)).map(Py::into_any)
                }
            }
        }

        #[pymethods]
        impl $Sync {
            $($body)*
            $($sync)*
        }

        #[pymethods]
        impl $Async {
            $($body)*
            $($aio)*
        }
    };
    (
        $(#[doc = $doc:literal])*
        $name:literal, $Sync:ident, $Async:ident, $core:ty;
        $($body:tt)*
    ) => {
        crate::flavor::flavors! {
            @both $(#[doc = $doc])* $name, $Sync, $Async, $core;
            {} {}
            $($body)*
        }
    };
}

pub(crate) use flavors;
