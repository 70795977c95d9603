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
//! | [`queues_holding`] | how a queue holds: its document, the coalesced line, lost replies |
//! | [`operations`] | alter a live sequence, exhaustion alerts (`check`), `doctor`, `audit` |
//! | [`cli`] | the command line: commands, flags and their limits, output, exit codes |
//! | [`python`] | the Python package: install, the API call by call, asyncio, threads and fork, errors, its figures |
//! | [`python_odm`] | switching a Python app over: adopting mongoengine's counters, the mongoengine and Beanie fields, their figures |
//! | [`node`] | the Node.js package: install, the API call by call, bigints or numbers, errors, aborting, gap-free numbers with the app's driver, workers and exit, its figures |
//! | [`node_mongoose`] | the Mongoose plugin: its options, mongoose-sequence's, switching over from it |
//! | [`service`] | the HTTP service: running it, endpoints, errors, how draws are served |
//! | [`tokens`] | the service's tokens and rights, and the connection limits |
//! | [`deploying`] | TLS or a proxy, rotating certificates and tokens, the history's database rights |
//! | [`pages`] | the service's pages: the operators' `/ui`, the kiosk and the board |
//! | [`metrics`] | the service's Prometheus metrics, alert rules and logs |
//! | [`benchmarks`] | `dispenser bench`: running it, sequences, blocks, what the numbers mean |
//! | [`benchmarks_rtt`] | the benchmarks at a real network round trip (`bench --rtt`) |
//! | [`benchmarks_queue`] | queues under a crowd at a real round trip (`bench --queue`) |
//! | [`benchmarks_service`] | the benchmarks of the HTTP service, queues at their largest, TLS |
//! | [`guarantees`] | every promise, under which configuration, and the tests that check it |
//! | [`production`] | a real MongoDB, compatibility, least privilege, scaling out, the local server |
//! | [`glossary`] | the words this guide uses in a sense of its own: held, family, floor, shape, … |
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

#[doc = include_str!("queues_holding.md")]
pub mod queues_holding {}

#[doc = include_str!("operations.md")]
pub mod operations {}

#[doc = include_str!("cli.md")]
pub mod cli {}

#[doc = include_str!("python.md")]
pub mod python {}

#[doc = include_str!("python_odm.md")]
pub mod python_odm {}

#[doc = include_str!("node.md")]
pub mod node {}

#[doc = include_str!("node_mongoose.md")]
pub mod node_mongoose {}

#[doc = include_str!("service.md")]
pub mod service {}

#[doc = include_str!("tokens.md")]
pub mod tokens {}

#[doc = include_str!("deploying.md")]
pub mod deploying {}

#[doc = include_str!("pages.md")]
pub mod pages {}

#[doc = include_str!("metrics.md")]
pub mod metrics {}

#[doc = include_str!("benchmarks.md")]
pub mod benchmarks {}

#[doc = include_str!("benchmarks_rtt.md")]
pub mod benchmarks_rtt {}

#[doc = include_str!("benchmarks_queue.md")]
pub mod benchmarks_queue {}

#[doc = include_str!("benchmarks_service.md")]
pub mod benchmarks_service {}

#[doc = include_str!("guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("production.md")]
pub mod production {}

#[doc = include_str!("glossary.md")]
pub mod glossary {}
