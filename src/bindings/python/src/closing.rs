//! Closing a dispenser (`close()`, `aclose()`, the end of a `with` / `async with` block):
//! every block client it opened gives back the numbers it holds, every gap-free handle
//! confirms the numbers it used, its connection pool is shut down, and every later call on
//! it or on a handle it opened is refused (`UnavailableError`, code `closed`).
//!
//! One [`Closer`] per connection pool: `Dispenser.connect` makes it, `with_caller` shares
//! it (the same pool), and every handle opened from either holds it in its
//! [`Live`](crate::runtime::Live).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use dispenser::Dispenser;
use dispenser::block::BlockSequence;
use dispenser::gapless::Gapless;
use dispenser::stripe::StripedSequence;

use crate::runtime::Live;

/// What a closed dispenser refuses, and what closing it must close.
pub(crate) struct Closer {
    closed: AtomicBool,
    /// Where the dispenser keeps its sequences, for the error's message.
    place: String,
    blocks: Mutex<Vec<Weak<Live<BlockSequence>>>>,
    striped: Mutex<Vec<Weak<Live<StripedSequence>>>>,
    gapless: Mutex<Vec<Weak<Live<Gapless>>>>,
}

/// `dispenser._errors`, looked up once.
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// Keeps the handles still alive (dropping the dead ones), so the lists do not grow with
/// handles made and dropped.
fn keep<T>(list: &Mutex<Vec<Weak<T>>>, live: &Arc<T>) {
    let mut l = list.lock().unwrap_or_else(|p| p.into_inner());
    l.retain(|w| w.strong_count() > 0);
    l.push(Arc::downgrade(live));
}

fn alive<T>(list: &Mutex<Vec<Weak<T>>>) -> Vec<Arc<T>> {
    let l = list.lock().unwrap_or_else(|p| p.into_inner());
    l.iter().filter_map(Weak::upgrade).collect()
}

impl Closer {
    pub(crate) fn new(database: &str, collection: &str) -> Arc<Closer> {
        Arc::new(Closer {
            closed: AtomicBool::new(false),
            place: format!("{database}.{collection}"),
            blocks: Mutex::new(Vec::new()),
            striped: Mutex::new(Vec::new()),
            gapless: Mutex::new(Vec::new()),
        })
    }

    /// Refuses a call once closed: `UnavailableError`, code `closed`, nothing written.
    pub(crate) fn check(&self, py: Python<'_>) -> PyResult<()> {
        if !self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let message = format!(
            "the dispenser of {} was closed (close(), or the end of its with block): its handles make no more calls; connect again",
            self.place
        );
        let module =
            ERRORS.get_or_try_init(py, || py.import("dispenser._errors").map(Bound::unbind))?;
        let exc = module.bind(py).getattr("UnavailableError")?.call1((
            message,
            "closed",
            "unavailable",
            "nothing_written",
        ))?;
        Err(PyErr::from_value(exc))
    }

    /// Whether it was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn keep_blocks(&self, live: &Arc<Live<BlockSequence>>) {
        keep(&self.blocks, live);
    }

    pub(crate) fn keep_striped(&self, live: &Arc<Live<StripedSequence>>) {
        keep(&self.striped, live);
    }

    pub(crate) fn keep_gapless(&self, live: &Arc<Live<Gapless>>) {
        keep(&self.gapless, live);
    }

    /// Marks it closed (later calls are refused) and returns what is left to do: the
    /// future that gives back the blocks, flushes the gap-free handles and shuts the pool
    /// down. `None` when it was closed already.
    pub(crate) fn close(
        &self,
        d: Option<Dispenser>,
    ) -> Option<impl std::future::Future<Output = (u64, u64)> + Send + 'static> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return None;
        }
        let blocks: Vec<BlockSequence> = alive(&self.blocks)
            .iter()
            .filter_map(|l| l.current())
            .collect();
        let striped: Vec<StripedSequence> = alive(&self.striped)
            .iter()
            .filter_map(|l| l.current())
            .collect();
        let gapless: Vec<Gapless> = alive(&self.gapless)
            .iter()
            .filter_map(|l| l.current())
            .collect();
        Some(async move {
            let (mut given_back, mut lost) = (0, 0);
            for b in blocks {
                if let Ok(r) = b.close().await {
                    given_back += r.given_back;
                    lost += r.lost;
                }
            }
            for s in striped {
                if let Ok(r) = s.close().await {
                    given_back += r.given_back;
                    lost += r.lost;
                }
            }
            for g in gapless {
                // A flush that fails leaves its leases to run out: no number is lost.
                let _ = g.flush().await;
            }
            if let Some(d) = d {
                d.client().clone().shutdown().immediate(true).await;
            }
            (given_back, lost)
        })
    }
}
