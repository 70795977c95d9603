//! Python bindings of `dispenser`: the extension module `dispenser._dispenser`, which the
//! package `dispenser` (sync) and `dispenser.aio` (asyncio) re-export. Every method is one
//! call of the core, translated: arguments in, the core's value (or its JSON rendering) and
//! errors out. Nothing here decides anything the core decides.

mod adopt;
mod closing;
mod convert;
mod dispenser;
mod errors;
mod flavor;
mod gapless;
mod handles;
mod queue;
mod runtime;
mod sequence;

use pyo3::prelude::*;

#[pymodule]
fn _dispenser(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let aio = PyModule::new(py, "aio")?;
    m.add_class::<dispenser::SyncDispenser>()?;
    aio.add_class::<dispenser::AsyncDispenser>()?;
    m.add_class::<sequence::SyncSequence>()?;
    aio.add_class::<sequence::AsyncSequence>()?;
    m.add_class::<sequence::SyncBlockSequence>()?;
    aio.add_class::<sequence::AsyncBlockSequence>()?;
    m.add_class::<sequence::SyncStripedSequence>()?;
    aio.add_class::<sequence::AsyncStripedSequence>()?;
    m.add_class::<sequence::SyncDailySequence>()?;
    aio.add_class::<sequence::AsyncDailySequence>()?;
    m.add_class::<gapless::SyncGapless>()?;
    aio.add_class::<gapless::AsyncGapless>()?;
    m.add_class::<queue::SyncQueue>()?;
    aio.add_class::<queue::AsyncQueue>()?;
    m.add_class::<gapless::Issued>()?;
    m.add_class::<adopt::PyAdoptSource>()?;
    m.add_class::<adopt::PyFormat>()?;
    m.add_submodule(&aio)?;
    m.add_function(wrap_pyfunction!(runtime::_after_fork_in_child, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
