//! Python bindings of `dispenser` (skeleton).
use pyo3::prelude::*;

#[pymodule]
fn _dispenser(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
