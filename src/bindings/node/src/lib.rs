//! Node.js bindings of `dispenser`: the core's handles as JavaScript classes whose methods
//! return Promises. A translation and nothing else — one function per core call, names in
//! camelCase, every integer a `bigint` (see `convert`), every error the core's with its stable
//! `code` and `kind`. The JavaScript wrapper (`index.js`) turns errors into classes and adds
//! what only JavaScript can do (iterators, the gap-free business write's callback, the
//! Mongoose plugin).
//!
//! The runtime: napi-rs runs these futures on one tokio runtime per process, created when
//! the first environment (the main thread or a worker) loads the addon and shut down when the
//! last one unloads; every driver client is created inside it. Nothing here holds a
//! reference on the event loop between calls, so a process exits when its JavaScript is
//! done, without a `close()`.
//!
//! Every method that returns a Promise does it through `promise::promise`, which clones the
//! core's handle (cheap: the core's handles share their state) and moves the clone into the
//! future it spawns, instead of an `async fn`
//! borrowing `&self`: a worker thread that is terminated frees its objects, and a future
//! still running on the shared runtime would then read freed memory (it did: a division by a
//! step of 0, then SIGSEGV).
#![deny(missing_docs)]

mod abort;
mod adopt;
mod block;
mod convert;
mod dispenser;
mod gapless;
mod promise;
mod queue;
mod scope;
mod sequence;
mod stripe;

use napi_derive::napi;

/// The version of the core library.
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}
