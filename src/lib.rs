//! # dispenser
//!
//! Unique numbers from MongoDB: order ids, invoice numbers and cyclic serial numbers such as
//! queue tickets (1 … 99, 0, 1 …), drawn by many processes on many machines at once, never
//! issued twice.
//!
//! Each sequence is one MongoDB document holding its last value, its bounds and a version.
//! A number is returned only once the write that reserved it was acknowledged (majority +
//! journaled by default). Connect once per process with [`Dispenser::connect`], then get a
//! handle per sequence and draw from it; every handle is cheap to clone and shared by all
//! tasks.
//!
//! ## Which handle to use
//!
//! | you need | use | from |
//! |---|---|---|
//! | numbers in order: invoice numbers, queue tickets (bounded, optionally cyclic) | [`Sequence`] | [`Dispenser::ensure`], [`Dispenser::open`] |
//! | unique ids at a high rate, order not needed: one write per block of numbers, handed out from memory | [`block::BlockSequence`] | [`Dispenser::open_blocks`], [`block::Pool`] (one per sequence and process) |
//! | unique ids beyond what one document sustains: `S` disjoint sequences, optionally with blocks | [`stripe::StripedSequence`] | [`Dispenser::ensure_striped`] |
//! | numbering per day, per tenant, per any key, restarting without anyone resetting it | [`scope::DailySequence`], or a [`Sequence`] per key | [`Dispenser::open_daily`], [`Dispenser::open_scope`] |
//! | a ticket queue: take a ticket, call the next one, never two people waiting with the same number | [`queue::Queue`] | [`Dispenser::ensure_queue`], [`Dispenser::open_queue`] |
//!
//! Several numbers in one write: [`Sequence::next_n`] returns a [`Run`]. Human-facing serials
//! (`INV-2026-000123`): [`Format`]. Settings (database, collection, write concern, strategy,
//! timeouts): [`Options`]. Every failure is one [`Error`]. Code that should not care which of these it draws from takes a
//! [`NumberSource`] (or, chosen from configuration, a [`BoxNumberSource`] from
//! [`Dispenser::open_source`]). Live changes: [`Dispenser::alter`]; exhaustion forecasts:
//! [`SequenceState::usage`].
//!
//! ## Example
//!
//! Add `dispenser` with `default-features = false` (the default feature `cli` only builds the
//! command-line tool) and `tokio` with `macros` and `rt-multi-thread`:
//!
//! ```toml
//! [dependencies]
//! dispenser = { version = "0.1", default-features = false }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! ```no_run
//! use dispenser::{Dispenser, Options, Spec};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), dispenser::Error> {
//!     let uri = std::env::var("MONGODB_URI")
//!         .unwrap_or_else(|_| "mongodb://127.0.0.1:27017".to_string());
//!     let dispenser = Dispenser::connect(&uri, Options::default()).await?;
//!
//!     // Created once; every process may call `ensure` and gets the same sequence.
//!     let orders = dispenser.ensure("orders", Spec::default()).await?;
//!     let order_id = orders.next().await?; // 1, 2, 3, …
//!
//!     // Queue tickets: 1 … 99, 0, 1 …
//!     let tickets = dispenser
//!         .ensure("tickets", Spec::default().with_max(99).with_cycle(true))
//!         .await?;
//!     let ticket = tickets.next().await?;
//!
//!     println!("order {order_id}, ticket {ticket}");
//!     Ok(())
//! }
//! ```
//!
//! ## Guarantees
//!
//! - **No number is ever issued twice** — across tasks, handles, processes and machines, with
//!   either strategy, with or without blocks and stripes — as long as the server keeps the
//!   writes it acknowledged (keep the default write concern `w: majority, j: true`).
//! - **Gaps are possible**: a call that fails with [`Error::Database`] or [`Error::Timeout`]
//!   may have reserved its numbers, and a crashed block client loses the rest of its block;
//!   those numbers are never issued to anyone.
//! - **Order** holds per handle (successive calls return numbers in the sequence's
//!   direction), not across clients that hold ranges (runs, blocks, stripes).
//! - Every call returns in bounded time; bad input is rejected before anything is written.
//!
//! The README's *Guarantees* section has the full table (each row with the tests that check
//! it) and what happens when an outcome is unknown; *The sequence document* gives the
//! on-disk schema, *How numbers are drawn* the two strategies, and *Running against a real
//! MongoDB* the privileges and replica-set settings.
//!
//! ## Modules
//!
//! The core lives at the crate root. These public modules add the other handles:
//!
//! - [`block`]: block (hi-lo) allocation — [`block::BlockSequence`], [`block::BlockOptions`],
//!   [`block::AdaptiveBlocks`].
//! - [`stripe`]: striped sequences — [`stripe::StripedSequence`].
//! - [`scope`]: scoped and daily sequences — [`scope::DailySequence`],
//!   [`scope::ScopedNumber`].
//! - [`queue`]: ticket queues — [`queue::Queue`], [`queue::QueueSpec`], [`queue::Ticket`],
//!   [`queue::QueueStatus`].
//!
//! The crate also builds the `dispenser` command-line tool (`dispenser bench`, and
//! `dispenser serve`, an HTTP service) when its default feature `cli` is on; the README
//! describes them.
#![deny(missing_docs)]

mod alter;
mod arith;
pub mod block;
mod coalesce;
mod dispenser;
pub mod doctor;
mod document;
mod error;
mod format;
pub mod gapless;
mod options;
pub mod queue;
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
