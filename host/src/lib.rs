//! shardhost: reads Kinesis shards, keeps shard leases and checkpoints, and calls sandboxed
//! WebAssembly handler components with batches of records.
//!
//! The modules read as the data flows:
//! [`config`] → [`supervisor`] → [`coordinator`] (leases) + [`source`] (shards) →
//! [`dispatch`] → [`wasm`] (via the [`handler`] seam) → [`settle`] → [`lease`].
//! [`cli`] is the command line (the `shardhost` binary is its glue). `ARCHITECTURE.md` at the
//! repository root is the map.

pub mod admin;
pub mod allocator;
pub mod aws;
pub mod cli;
pub mod config;
pub mod coordinator;
pub mod deploy;
pub mod dispatch;
pub mod envelope;
pub mod feed;
pub mod handler;
pub mod lease;
pub mod metrics;
pub mod publish;
pub mod record;
pub mod settle;
pub mod source;
pub mod status;
pub mod supervisor;
pub mod wasm;
