//! # dispenser
//!
//! Unique numbers from MongoDB: order ids, invoice numbers and cyclic serial numbers such as
//! queue tickets (1 … 99, 0, 1 …), drawn by many processes on many machines at once, never
//! issued twice.
//!
//! Each sequence is one document holding its last value, its bounds and a version. A number
//! is issued only once the write that reserved it was acknowledged (majority + journaled by
//! default). See the README for the document schema, the guarantees and the CLI.
//!
//! The modules are the design, bottom up:
//!
//! | module | what lives there |
//! |---|---|
//! | `spec`, `arith` | what a sequence is and how the next number is **computed** (pure, no I/O) |
//! | `document`, `store` | the MongoDB document and every operation that **writes** it |
//! | `retry`, `strategy` | the conditional increment and the compare-and-set loop: where it is **retried** |
//! | `dispenser` | the public handles: [`Dispenser`] (admin) and [`Sequence`] (draw) |
//! | `block` | block (hi-lo) allocation on top of a [`Sequence`]: [`BlockSequence`](block::BlockSequence) hands out numbers from memory, reserving each block with one draw (prefetched in the background, adaptive size, give-back on close), and a pool of block clients, one per sequence ([`Pool`](block::Pool)) |
//! | `stripe` | [`StripedSequence`](stripe::StripedSequence): unique but unordered numbers from `S` disjoint sequences (`name~0` …), optionally with blocks |
//! | `scope`, `format` | one sequence per scope key ([`Dispenser::open_scope`], daily: [`Dispenser::open_daily`]) and human-facing serials ([`Format`]) |
//! | `redact`, `stats`, `options` | credentials kept out of output, readable counters ([`Stats`]), settings ([`Options`]) |
//!
//! The binary (`src/bin/dispenser/`) adds the CLI (`cli`, `main`), `dispenser bench` and
//! `dispenser serve` (an HTTP service) on top; see the README.
//!
//! # Example
//!
//! ```no_run
//! use dispenser::{Dispenser, Options, Spec};
//!
//! # async fn f() -> dispenser::Result<()> {
//! let dispenser = Dispenser::connect("mongodb://127.0.0.1:27017", Options::default()).await?;
//! let tickets = dispenser
//!     .ensure("tickets", Spec::default().with_max(99).with_cycle(true))
//!     .await?;
//! let ticket = tickets.next().await?; // 1, 2, …, 99, 0, 1, …
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod alter;
mod arith;
pub mod block;
mod coalesce;
mod dispenser;
mod document;
mod error;
mod format;
mod options;
mod redact;
mod retry;
pub mod scope;
mod source;
mod spec;
mod stats;
mod store;
mod strategy;
pub mod stripe;
mod usage;

pub use alter::Alter;
pub use arith::{Run, RunIter};
pub use block::CloseReport;
pub use dispenser::{Dispenser, Sequence};
pub use document::SequenceState;
pub use error::{Error, Result, describe_driver_error};
pub use format::{Format, MAX_FORMAT_BYTES, MAX_PAD};
pub use options::{CasMode, Options, Strategy, safe_write_concern};
pub use redact::{check_credentials, redact_uri, scrub};
pub use retry::Backoff;
pub use source::{BoxFuture, BoxNumberSource, DynNumberSource, NumberSource, SourceKind};
pub use spec::{MAX_NAME_BYTES, Spec, validate_name, validate_plain_name};
pub use stats::{CasModeUsed, Stats};
pub use usage::{KEPT_DAYS, Usage};

/// The driver, re-exported so callers use the same version.
pub use mongodb;

/// The README's Rust examples, compiled as doctests so they stay true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
