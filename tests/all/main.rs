//! shardhost's behaviour tests, in one binary (one link of wasmtime and the AWS SDK).
//!
//! Each module is one room of behaviour; `support` builds guests, runs hosts in process and
//! talks to the emulators that `tests/stack` starts. `cargo test --test all -- lanes::` runs one
//! module.

mod support;

mod admin;
mod canary;
mod cli;
mod committed_state;
mod conformance;
mod containment;
mod delivery;
mod deploy_files;
mod docs;
mod dynamo;
mod dynamo_txn;
mod fan_out;
mod faults;
mod first_handler;
mod fleet;
mod fleet_trust;
mod guest_logs;
mod hotswap;
mod http;
mod iam;
mod imports;
mod install;
mod instances;
mod kinesis;
mod lanes;
mod outcomes;
mod put;
mod read_size;
mod replay;
mod retries;
mod retry_after;
mod retry_batches;
mod retry_keys;
mod retry_stream;
mod roster;
mod sandbox;
mod sdks;
mod shadow;
mod signed_rows;
mod state;
mod status_page;
mod subscriptions;
mod throughput;
mod trial;
mod worker;
mod worker_waits;
