//! Integration tests against the MongoDB wire-protocol server in `MONGODB_URI` (started by
//! `scripts/test.sh` when unset). One binary, one module per concern.

mod alter;
mod bad_input;
mod blocks;
mod check;
mod cli;
mod cli_ux;
mod clients;
mod coalesce;
mod common;
mod contract;
mod core;
mod docs;
mod doctor;
mod faults;
mod gapless;
mod gapless_model;
mod gate;
mod hardening;
mod history;
mod isolation;
mod model;
mod proxy;
mod queue;
mod queue_desks;
mod queue_edges;
mod reload;
mod rtt;
mod scale;
mod scope;
mod serve;
mod sources;
mod stalled;
mod tls;
mod ui;
mod vocabulary;
