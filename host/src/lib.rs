//! shardhost: reads Kinesis shards, keeps shard leases and checkpoints, and calls sandboxed
//! WebAssembly handler components with batches of records.
//!
//! The modules read as the data flows: `config` → `supervisor` → `coordinator` (leases) +
//! `source` (shards) → `dispatch` → `wasm` (via the [`handler`] seam) → `settle` → [`lease`].
//! `ARCHITECTURE.md` at the repository root is the map.
//!
//! What an embedder uses: [`Host`] (prepare a [`Config`], run it until a stop token fires), the
//! [`lease`] store trait and its stores, the [`handler`] seam (plug in a native handler), the
//! [`source`] trait, and the [`status`] report. The `shardhost` binary is [`cli`].

pub mod canary;
pub mod capability;
pub mod config;
pub mod effects;
pub mod fleet_table;
pub mod handler;
pub mod lease;
pub mod record;
pub mod shadow;
pub mod signing;
pub mod slot;
pub mod source;
pub mod state;
pub mod status;

#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod testing;

mod admin;
mod allocator;
mod aws;
mod bindings;
mod coordinator;
mod deploy;
mod dispatch;
mod envelope;
mod feed;
mod fleet;
mod log_budget;
mod memory;
mod metrics;
mod publish;
mod replay;
mod settle;
mod supervisor;
mod task;
mod version;
mod wasm;

pub use config::Config;
pub use deploy::Deployer;
pub use dispatch::{OutcomeTap, Settled};
pub use metrics::Metrics;
pub use supervisor::{Host, StartError};
