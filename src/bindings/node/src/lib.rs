//! Node.js bindings of `dispenser` (skeleton).
use napi_derive::napi;

/// The version of the core library.
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}
