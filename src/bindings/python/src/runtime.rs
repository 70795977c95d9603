//! The one tokio runtime of the process, how a call waits for a core future (sync: the
//! calling thread blocks with the GIL released, looking for signals every [`TICK`];
//! asyncio: an `asyncio.Future` resolved from the runtime), and what a fork does to both.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::BoundObject;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tokio::runtime::Runtime;

use crate::closing::Closer;
use crate::errors::Failure;

/// How often a blocked sync call looks for a signal (`PyErr_CheckSignals`): a Ctrl-C
/// interrupts it within this, plus the time the signal handler takes.
const TICK: Duration = Duration::from_millis(50);

/// Work the core hands to the thread blocked in a sync call, run there with the GIL: a
/// gap-free business write, so that it runs on the caller's own thread (its thread-locals,
/// its `contextvars`, its database session) while the call waits.
pub(crate) type Job = Box<dyn FnOnce(Python<'_>) + Send>;

/// Where the core sends the [`Job`]s of one sync call.
pub(crate) type JobSender = tokio::sync::mpsc::UnboundedSender<Job>;

/// Where the thread blocked in one sync call receives its [`Job`]s.
pub(crate) type Jobs = tokio::sync::mpsc::UnboundedReceiver<Job>;

/// What a call may have written when a signal interrupts it: the `written` the raised
/// exception carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writes {
    /// A read: nothing was written (`nothing_written`).
    Never,
    /// A call that writes: its write may have been sent (`unknown`).
    Maybe,
}

impl Writes {
    fn as_str(self) -> &'static str {
        match self {
            Writes::Never => "nothing_written",
            Writes::Maybe => "unknown",
        }
    }
}

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

/// A core handle (cheap to clone) that a fork makes open again, and the [`Closer`] of the
/// dispenser it came from: what every Python handle holds.
pub(crate) struct Live<T> {
    slot: Mutex<Gen<T>>,
    remake: Remake<T>,
    closer: Arc<Closer>,
}

impl<T: Clone + Send + 'static> Live<T> {
    pub(crate) fn new(value: T, remake: Remake<T>, closer: Arc<Closer>) -> Self {
        Live {
            slot: Mutex::new(Gen::new(value)),
            remake,
            closer,
        }
    }

    /// The closer of the dispenser this handle came from.
    pub(crate) fn closer(&self) -> &Arc<Closer> {
        &self.closer
    }

    /// The core handle of this generation, if it was made in this process (no remake, and
    /// whether or not its dispenser was closed): what closing a dispenser closes.
    pub(crate) fn current(&self) -> Option<T> {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        (slot.generation == generation()).then(|| (*slot.value).clone())
    }

    /// The core handle, for what reads no database (a name, counters), also once its
    /// dispenser was closed.
    pub(crate) fn view(&self, py: Python<'_>) -> PyResult<T> {
        match self.current() {
            Some(v) => Ok(v),
            None => self.get(py),
        }
    }

    /// The core handle of this generation (opened again first after a fork); refused once
    /// its dispenser was closed.
    pub(crate) fn get(&self, py: Python<'_>) -> PyResult<T> {
        self.closer.check(py)?;
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
/// GIL released) and returns the value; an asyncio handle returns an awaitable at once. A
/// sync call interrupted by a signal says its write may have been sent: for reads, see
/// [`run_read`].
pub(crate) fn run<T, F>(py: Python<'_>, asynchronous: bool, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    if asynchronous {
        spawn(py, fut)
    } else {
        block(py, fut, None, Writes::Maybe)
    }
}

/// [`run`] for a call that only reads: interrupted, it says nothing was written.
pub(crate) fn run_read<T, F>(py: Python<'_>, asynchronous: bool, fut: F) -> PyResult<Py<PyAny>>
where
    F: Future<Output = Result<T, Failure>> + Send + 'static,
    T: for<'py> IntoPyObject<'py> + Send + 'static,
{
    if asynchronous {
        spawn(py, fut)
    } else {
        block(py, fut, None, Writes::Never)
    }
}

/// What one wait of a blocked sync call ended with.
enum Step<T> {
    Done(Result<T, Failure>),
    Job(Job),
    Tick,
}

/// The sync flavour: refuses to block a running event loop, else waits with the GIL
/// released (so other Python threads run, and their draws coalesce with this one). While
/// it waits it runs the [`Job`]s the call sends (`jobs`) on this thread, and every
/// [`TICK`] it looks for a signal: a signal handler that raises (Ctrl-C's
/// `KeyboardInterrupt`) drops the call in the core — as cancelling an asyncio call does —
/// and its exception is raised with `written` set from `writes`.
pub(crate) fn block<T, F>(
    py: Python<'_>,
    fut: F,
    jobs: Option<Jobs>,
    writes: Writes,
) -> PyResult<Py<PyAny>>
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
    let mut fut = Box::pin(fut);
    let mut jobs = jobs;
    loop {
        let step = py.detach(|| {
            rt.block_on(async {
                let job = async {
                    match jobs.as_mut() {
                        Some(j) => j.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    out = &mut fut => Step::Done(out),
                    Some(job) = job => Step::Job(job),
                    () = tokio::time::sleep(TICK) => Step::Tick,
                }
            })
        });
        match step {
            Step::Done(Ok(v)) => {
                return v
                    .into_pyobject(py)
                    .map(|b| b.into_any().unbind())
                    .map_err(Into::into);
            }
            Step::Done(Err(f)) => return Err(f.into_py_err(py)),
            Step::Job(job) => job(py),
            Step::Tick => {
                if let Err(e) = py.check_signals() {
                    // Dropped inside the runtime, as an aborted asyncio call is.
                    let inside = rt.enter();
                    drop(fut);
                    drop(inside);
                    let _ = e.value(py).setattr("written", writes.as_str());
                    return Err(e);
                }
            }
        }
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
