//! The one tokio runtime of the process, how a call waits for a core future (sync: the
//! calling thread blocks with the GIL released; asyncio: an `asyncio.Future` resolved from
//! the runtime), and what a fork does to both.
//!
//! A runtime and a driver client belong to the process that made them: in a child after
//! `fork` their threads do not exist. So `os.register_at_fork` (see `dispenser/__init__.py`)
//! calls [`after_fork_in_child`], which starts a new *generation*: the next call makes a new
//! runtime, and every handle ([`Live`]) opens its core handle again in it. What belonged to
//! the parent is never used nor dropped in the child (dropping a block client would give
//! its numbers back to the sequence while the parent still hands them out): it is leaked.
//!
//! Every lock here is taken with the GIL held and released before the GIL is, so a fork
//! (which holds the GIL) never finds one held.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::BoundObject;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tokio::runtime::Runtime;

use crate::errors::Failure;

/// Which process generation this is: 0 in the process that imported the module, one more
/// after each fork.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The runtime of the current generation (leaked: a runtime is never dropped, in the
/// parent because it lives as long as the process, in a child because its threads are gone).
static RUNTIME: Mutex<Option<(u64, &'static Runtime)>> = Mutex::new(None);

fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Called by `os.register_at_fork(after_in_child=…)`: the child's next call makes a new
/// runtime and opens every handle again.
#[pyfunction]
pub(crate) fn _after_fork_in_child() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// The runtime of this process, made on first use.
pub(crate) fn runtime() -> PyResult<&'static Runtime> {
    let now = generation();
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((g, rt)) = *slot
        && g == now
    {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("dispenser")
        .build()
        .map_err(|e| {
            PyRuntimeError::new_err(format!("dispenser: cannot start its runtime: {e}"))
        })?;
    let rt: &'static Runtime = Box::leak(Box::new(rt));
    *slot = Some((now, rt));
    Ok(rt)
}

/// A value that belongs to one generation: dropped normally (inside the runtime, so a
/// block client can give its numbers back) in the process that made it, leaked in a child.
struct Gen<T> {
    generation: u64,
    value: ManuallyDrop<T>,
}

impl<T> Gen<T> {
    fn new(value: T) -> Self {
        Gen {
            generation: generation(),
            value: ManuallyDrop::new(value),
        }
    }
}

impl<T> Drop for Gen<T> {
    fn drop(&mut self) {
        if self.generation != generation() {
            return; // the parent's: leaked
        }
        let _inside = runtime().ok().map(Runtime::enter);
        // SAFETY: `value` is dropped once, here, and never read again.
        unsafe { ManuallyDrop::drop(&mut self.value) }
    }
}

/// How a handle is opened again in a child after fork.
pub(crate) type Remake<T> = Box<dyn Fn(Python<'_>) -> PyResult<T> + Send + Sync>;

/// A core handle (cheap to clone) that a fork makes open again: what every Python handle
/// holds.
pub(crate) struct Live<T> {
    slot: Mutex<Gen<T>>,
    remake: Remake<T>,
}

impl<T: Clone + Send + 'static> Live<T> {
    pub(crate) fn new(value: T, remake: Remake<T>) -> Self {
        Live {
            slot: Mutex::new(Gen::new(value)),
            remake,
        }
    }

    /// The core handle of this generation (opened again first after a fork).
    pub(crate) fn get(&self, py: Python<'_>) -> PyResult<T> {
        {
            let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
            if slot.generation == generation() {
                return Ok((*slot.value).clone());
            }
        }
        let fresh = (self.remake)(py)?;
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if slot.generation != generation() {
            // The old one is the parent's: `Gen`'s drop leaks it.
            *slot = Gen::new(fresh);
        }
        Ok((*slot.value).clone())
    }
}

/// Runs `fut` to its end on the runtime, the GIL released meanwhile: for opening a handle
/// again after a fork, whichever flavour asks.
pub(crate) fn wait<T: Send>(
    py: Python<'_>,
    fut: impl Future<Output = Result<T, dispenser::Error>> + Send,
) -> PyResult<T> {
    let rt = runtime()?;
    py.detach(|| rt.block_on(fut))
        .map_err(|e| Failure::from(e).into_py_err(py))
}

/// `asyncio._get_running_loop`, looked up once.
static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

pub(crate) fn running_loop<'py>(py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let f = GET_RUNNING_LOOP.get_or_try_init(py, || {
        py.import("asyncio")?
            .getattr("_get_running_loop")
            .map(Bound::unbind)
    })?;
    let l = f.bind(py).call0()?;
    Ok((!l.is_none()).then_some(l))
}

/// Runs a core call for a handle of either flavour: a sync handle blocks this thread (the
/// GIL released) and returns the value; an asyncio handle returns an awaitable at once.
pub(crate) fn run<T, F>(py: Python<'_>, asynchronous: bool, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    if asynchronous {
        spawn(py, fut)
    } else {
        block(py, fut)
    }
}

/// The sync flavour: refuses to block a running event loop, else waits with the GIL
/// released (so other Python threads run, and their draws coalesce with this one).
fn block<T, F>(py: Python<'_>, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<T, Failure>> + Send,
    T: for<'py> IntoPyObject<'py> + Send,
{
    if running_loop(py)?.is_some() {
        return Err(PyRuntimeError::new_err(
            "dispenser: a blocking call inside a running asyncio event loop would stall the loop; \
             use dispenser.aio (await the call) there, or run it in a thread \
             (await asyncio.to_thread(...))",
        ));
    }
    let rt = runtime()?;
    match py.detach(|| rt.block_on(fut)) {
        Ok(v) => v
            .into_pyobject(py)
            .map(|b| b.into_any().unbind())
            .map_err(Into::into),
        Err(f) => Err(f.into_py_err(py)),
    }
}

/// The asyncio flavour: an `asyncio.Future` of the running loop, resolved on the loop when the
/// core future ends (through the loop's [`Inbox`]); cancelling it drops the core future.
fn spawn<T, F>(py: Python<'_>, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    let Some(event_loop) = running_loop(py)? else {
        return Err(PyRuntimeError::new_err(
            "dispenser.aio: no running event loop in this thread; await the call from a \
             coroutine (asyncio.run(...)), or use the blocking API (import dispenser)",
        ));
    };
    let inbox = inbox_for(py, &event_loop)?;
    let future = event_loop.call_method0(pyo3::intern!(py, "create_future"))?;
    let future_ref = future.clone().unbind();
    let task = runtime()?.spawn(async move {
        let out = fut.await;
        Inbox::push(
            &inbox,
            Box::new(move |py| settle(py, future_ref.bind(py), out)),
        );
    });
    future.call_method1(
        pyo3::intern!(py, "add_done_callback"),
        (Canceller {
            task: task.abort_handle(),
        },),
    )?;
    Ok(future.unbind())
}

/// Sets the result (or the exception) of `future`, on its loop, unless it was cancelled.
fn settle<T>(py: Python<'_>, future: &Bound<'_, PyAny>, out: Result<T, Failure>) -> PyResult<()>
where
    T: for<'py> IntoPyObject<'py>,
{
    if future
        .call_method0(pyo3::intern!(py, "cancelled"))?
        .is_truthy()?
    {
        return Ok(());
    }
    let failed = match out {
        Ok(v) => match v.into_pyobject(py) {
            Ok(b) => {
                future.call_method1(
                    pyo3::intern!(py, "set_result"),
                    (b.into_bound().into_any(),),
                )?;
                return Ok(());
            }
            Err(e) => e.into(),
        },
        Err(f) => f.into_py_err(py),
    };
    future.call_method1(pyo3::intern!(py, "set_exception"), (failed.into_value(py),))?;
    Ok(())
}

/// What is left to do on the loop's thread for one finished call.
type Settle = Box<dyn FnOnce(Python<'_>) -> PyResult<()> + Send>;

/// The calls of one event loop that finished in the core, waiting to be settled on the loop:
/// the first to arrive schedules one `call_soon_threadsafe`, which settles every call that
/// arrived by then. So a write that served many calls at once (coalesced draws) wakes the
/// loop once and takes the GIL once on the runtime's side, not once per call.
#[pyclass(frozen)]
struct Inbox {
    event_loop: Py<PyAny>,
    waiting: Mutex<(Vec<Settle>, bool)>,
}

impl Inbox {
    fn push(inbox: &Py<Inbox>, settle: Settle) {
        let me = inbox.get();
        let schedule = {
            let mut w = me.waiting.lock().unwrap_or_else(|p| p.into_inner());
            w.0.push(settle);
            !std::mem::replace(&mut w.1, true)
        };
        if schedule {
            Python::attach(|py| {
                let scheduled = me.event_loop.bind(py).call_method1(
                    pyo3::intern!(py, "call_soon_threadsafe"),
                    (inbox.clone_ref(py),),
                );
                if scheduled.is_err() {
                    // A loop closed meanwhile has nobody left to tell.
                    let mut w = me.waiting.lock().unwrap_or_else(|p| p.into_inner());
                    let dropped = std::mem::take(&mut w.0);
                    w.1 = false;
                    drop(w);
                    drop(dropped);
                }
            });
        }
    }
}

#[pymethods]
impl Inbox {
    /// Settles every call that finished (run by the loop).
    fn __call__(&self, py: Python<'_>) {
        let ready = {
            let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            w.1 = false;
            std::mem::take(&mut w.0)
        };
        for settle in ready {
            if let Err(e) = settle(py) {
                e.write_unraisable(py, None);
            }
        }
    }
}

/// An inbox, with the loop it belongs to and its process generation.
type LoopInbox = (u64, Py<PyAny>, Py<Inbox>);

thread_local! {
    /// The inbox of the loop this thread runs (of this process generation).
    static INBOX: std::cell::RefCell<Option<LoopInbox>> =
        const { std::cell::RefCell::new(None) };
}

/// The inbox of `event_loop`, made on its first call.
fn inbox_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Py<Inbox>> {
    INBOX.with(|cell| {
        let mut cell = cell.borrow_mut();
        if let Some((g, l, inbox)) = &*cell
            && *g == generation()
            && l.bind(py).is(event_loop)
        {
            return Ok(inbox.clone_ref(py));
        }
        let inbox = Py::new(
            py,
            Inbox {
                event_loop: event_loop.clone().unbind(),
                waiting: Mutex::new((Vec::new(), false)),
            },
        )?;
        *cell = Some((
            generation(),
            event_loop.clone().unbind(),
            inbox.clone_ref(py),
        ));
        Ok(inbox)
    })
}

/// Drops the core future of a cancelled `asyncio.Future` (each core call documents what a
/// dropped call leaves: never a duplicate).
#[pyclass(frozen)]
struct Canceller {
    task: tokio::task::AbortHandle,
}

#[pymethods]
impl Canceller {
    fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            self.task.abort();
        }
        Ok(())
    }
}
