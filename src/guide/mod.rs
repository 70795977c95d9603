//! # The guide
//!
//! The long-form documentation of `dispenser`, one chapter per module, next to the API it
//! explains. Every Rust example in it is compiled as a doctest. The chapters:
//!
//! | chapter | what it covers |
//! |---|---|
//! | [`document`] | the sequence document and the write rule: the spec other-language clients implement, with complete clients in mongosh and Python |
//! | [`drawing`] | how numbers are drawn: the conditional increment and the compare-and-set, backoff, write concern, errors; coalesced draws |
//! | [`blocks`] | many numbers per write (hi-lo): prefetch, range share, growth, give-back, the pool |
//! | [`stripes`] | one sequence over `S` documents, administered as a whole |
//! | [`scopes`] | per-key and daily sequences, formatted serials, advance-to |
//! | [`gapless`] | gap-free numbers for invoices: issue with the business write, void, confirm |
//! | [`queues`] | ticket queues: take a ticket, call the next one |
//! | [`operations`] | alter a live sequence, exhaustion alerts (`check`), `doctor`, `audit` |
//! | [`cli`] | the command line: commands, flags and their limits, output, exit codes |
//! | [`service`] | the HTTP service: endpoints, tokens, errors, pages, metrics and alert rules |
//! | [`benchmarks`] | `dispenser bench` and what it measured, each figure with its command |
//! | [`guarantees`] | every promise, under which configuration, and the tests that check it |
//! | [`production`] | a real MongoDB, compatibility, least privilege, scaling out, the local server |
//!
//! Start with the crate's front page for which handle to use when; come here for the details.
//! Contributors: `.github/CONTRIBUTING.md` in the repository describes the architecture and
//! how to run the tests.

#[doc = include_str!("document.md")]
pub mod document {}

#[doc = include_str!("drawing.md")]
pub mod drawing {}

#[doc = include_str!("blocks.md")]
pub mod blocks {}

#[doc = include_str!("stripes.md")]
pub mod stripes {}

#[doc = include_str!("scopes.md")]
pub mod scopes {}

#[doc = include_str!("gapless.md")]
pub mod gapless {}

#[doc = include_str!("queues.md")]
pub mod queues {}

#[doc = include_str!("operations.md")]
pub mod operations {}

#[doc = include_str!("cli.md")]
pub mod cli {}

#[doc = include_str!("service.md")]
pub mod service {}

#[doc = include_str!("benchmarks.md")]
pub mod benchmarks {}

#[doc = include_str!("guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("production.md")]
pub mod production {}
