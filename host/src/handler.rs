//! The seam between dispatch and whatever answers for records: a [`Handler`] handles batches,
//! a [`HandlerFactory`] makes handlers. The wasm runtime is the product's implementation; a
//! native Rust handler (benchmarks, tests) plugs into the same place.

use std::sync::Arc;

use async_trait::async_trait;

use crate::record::{BatchInfo, BatchOutcome, Record};

/// Who is calling, for the handler's log lines and error reports.
#[derive(Clone, Debug)]
pub struct CallContext {
    pub subscription: Arc<str>,
    pub stream: Arc<str>,
    pub shard_id: Arc<str>,
}

/// Something that answers for batches of records. One instance serves one shard at a time and
/// is reused across calls.
///
/// Calls run on the async runtime's threads: a long wasm call yields back to the runtime at
/// every epoch tick, so it never starves other shards or lease renewals.
#[async_trait]
pub trait Handler: Send {
    /// The version this instance runs (a content hash for wasm).
    fn version(&self) -> &str;

    /// Handles one batch. An `Err` means the call failed as a whole (trap, timeout, memory limit,
    /// an answer that does not fit the batch); the instance must not be used again.
    async fn handle(
        &mut self,
        info: &BatchInfo,
        records: &[Record],
    ) -> Result<BatchOutcome, CallError>;
}

/// Makes handler instances.
#[async_trait]
pub trait HandlerFactory: Send + Sync {
    /// The version new instances will run.
    fn version(&self) -> String;

    /// A fresh instance for one shard.
    async fn instantiate(&self, ctx: &CallContext) -> Result<Box<dyn Handler>, CallError>;
}

/// Why a handler call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("handler {version} trapped: {message}")]
    Trap { version: String, message: String },
    #[error("handler {version} ran past its timeout of {timeout_ms} ms")]
    Timeout { version: String, timeout_ms: u64 },
    #[error("handler {version} reached its memory limit: {message}")]
    MemoryLimit { version: String, message: String },
    #[error("handler {version} answered {got} outcomes for a batch of {expected} records")]
    WrongOutcomeCount {
        version: String,
        expected: usize,
        got: usize,
    },
    #[error("handler {version} could not be instantiated: {message}")]
    Instantiate { version: String, message: String },
}

/// Turns a batch answer into one outcome per record, or says why it does not fit.
pub fn outcomes_per_record(
    answer: BatchOutcome,
    records: usize,
    version: &str,
) -> Result<Vec<crate::record::Outcome>, CallError> {
    match answer {
        BatchOutcome::All(o) => Ok(vec![o; records]),
        BatchOutcome::Each(v) if v.len() == records => Ok(v),
        BatchOutcome::Each(v) => Err(CallError::WrongOutcomeCount {
            version: version.to_owned(),
            expected: records,
            got: v.len(),
        }),
    }
}
