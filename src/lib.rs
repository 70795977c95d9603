//! # dispenser
//!
//! Unique numbers from MongoDB: order ids, invoice numbers without gaps and cyclic serial
//! numbers such as queue tickets (1 … 99, 0, 1 …), drawn by many processes on many machines
//! at once, never issued twice.
//!
//! Each sequence is one MongoDB document holding its last value, its bounds and a version. A
//! number is returned only once the write that reserved it was acknowledged (majority +
//! journaled by default). Connect once per process with [`Dispenser::connect`], then open a
//! handle per sequence and draw from it; every handle is cheap to clone and shared by all
//! tasks.
//!
//! ## Which tool for which job
//!
//! | you need | use | opened with |
//! |---|---|---|
//! | ids in order: order numbers, cyclic serials (bounded, optionally wrapping) | [`Sequence`] | [`Dispenser::ensure`], [`Dispenser::open`] |
//! | invoice numbers **without gaps**: a number counts only once your business document holding it is written | [`gapless::Gapless`] | [`Dispenser::ensure_gapless`] |
//! | unique ids at a high rate, order not needed: one write per block, handed out from memory | [`block::BlockSequence`] | [`Dispenser::open_blocks`], [`block::Pool`] |
//! | more than one document sustains: `S` disjoint stripes, optionally with blocks | [`stripe::StripedSequence`] | [`Dispenser::ensure_striped`] |
//! | numbering per day, per tenant, per any key | [`scope::DailySequence`], or a [`Sequence`] per key | [`Dispenser::open_daily`], [`Dispenser::ensure_scope`] |
//! | a ticket queue: take a ticket, call the next one | [`queue::Queue`] | [`Dispenser::ensure_queue`] |
//! | code that should not care which of these it draws from | [`source::NumberSource`] | [`Dispenser::open_source`] |
//!
//! ## The concepts
//!
//! - [`Dispenser`]: one collection of sequences; creates, opens and administers them.
//! - [`Sequence`], [`Spec`] (start, step, bounds, cycle) and [`Format`] (serials such as
//!   `INV-2026-000123`).
//! - [`Options`]: where the documents live, the write concern, the strategy
//!   ([`sequence::Strategy`]), timeouts.
//! - [`Error`]: every failure, one enum with matchable kinds; [`Result`]; the kinds, what a
//!   failure left written and every stable code in [`error`].
//! - [`sequence`]: what a sequence reports and how it changes — runs of several numbers from
//!   one write ([`sequence::Run`], [`Sequence::next_n`]), its stored state, usage forecasts,
//!   statistics, live changes ([`sequence::Alter`]), how draws write ([`sequence::Strategy`])
//!   and the naming rules.
//! - The other handles, each in its module: [`block`], [`stripe`], [`scope`], [`gapless`],
//!   [`queue`]; one trait over them in [`source`].
//! - [`history`]: who created, altered, reset or deleted what, when, and the states before
//!   and after — every admin operation records itself ([`Dispenser::history`] reads it).
//! - [`doctor`]: checks a server's guarantees; [`error::redact`]: prints URIs and errors without
//!   credentials.
//! - [`guide`]: the user's guide — the document format, strategies, blocks, stripes, scopes,
//!   gap-free numbers, queues, operations, the command line and HTTP service, benchmarks, the
//!   full guarantees table and running against a real MongoDB.
//!   Words the docs use in a sense of their own (block, held, scope, shape, stripe, …) are in
//!   its [glossary](guide::glossary).
//!
//! ## Example
//!
//! Add `dispenser` (the library alone: the command line and the HTTP service are crates of
//! their own, `dispenser-cli` and `dispenser-server`) and `tokio` with `macros` and
//! `rt-multi-thread`:
//!
//! ```toml
//! [dependencies]
//! dispenser = "0.1"
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
//! - **Gaps are possible** in a [`Sequence`]: a call that fails with [`Error::Database`] or
//!   [`Error::Timeout`] may have reserved its numbers, and a crashed block client loses the
//!   rest of its block; those numbers are never issued to anyone. [`gapless`] leaves none.
//! - **Order** holds per handle (successive calls return numbers in the sequence's
//!   direction), not across clients that hold ranges (runs, blocks, stripes).
//! - Every call returns in bounded time; bad input is rejected before anything is written.
//!
//! The guide's [guarantees](guide::guarantees) chapter has the full table, each row with the
//! tests that check it.
#![deny(missing_docs)]

mod action;
mod adopt;
mod alter;
mod arith;
pub mod block;
mod clock;
mod coalesce;
mod dispenser;
pub mod doctor;
mod document;
pub mod error;
mod format;
pub mod gapless;
pub mod guide;
pub mod history;
mod listing;
mod options;
pub mod queue;
mod retry;
pub mod scope;
pub mod sequence;
pub mod source;
mod spec;
mod stats;
mod store;
mod strategy;
pub mod stripe;
#[doc(hidden)]
pub mod translate;
mod usage;

pub use dispenser::{Dispenser, Sequence};
pub use error::{Error, Result};
pub use format::Format;
pub use options::Options;
pub use spec::Spec;

/// The driver, re-exported so callers use the same version.
pub use mongodb;

/// The date and time library of time zones ([`jiff::tz::TimeZone`]) and days
/// ([`jiff::civil::Date`]) in this API, re-exported so callers use the same version.
pub use jiff;

/// The README's Rust examples (its quick start), compiled as doctests so they stay true; the
/// guide's examples are compiled where the guide lives, in [`guide`].
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
#[allow(dead_code)]
struct ReadmeDoctests;
