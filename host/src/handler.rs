//! The seam between dispatch and whatever answers for records: a [`Handler`] handles batches,
//! a [`HandlerFactory`] makes handlers. The wasm runtime is the product's implementation; a
//! native Rust handler (benchmarks, tests) plugs into the same place.

use std::sync::Arc;

use async_trait::async_trait;

use crate::record::{BatchInfo, BatchOutcome, Position, Record};

/// Who is calling, for the handler's log lines and error reports, and what the handler may
/// reach through the host.
#[derive(Clone, Debug)]
pub struct CallContext {
    pub subscription: Arc<str>,
    pub stream: Arc<str>,
    pub shard_id: Arc<str>,
    /// Where `publish` goes (none: every publish is refused).
    pub publisher: Option<Arc<crate::publish::Publisher>>,
    /// What the shard's reader has handed to the handler, the only places a seek may go
    /// (none: any sequence number, as `invoke` has no reader).
    pub delivered: Option<Arc<Delivered>>,
    /// Where containment events are counted (none: not counted).
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// What the guest may still write to the log: one budget per shard worker, shared by every
    /// instance it makes, so a fresh instance (bisecting, a replaced one) never resets it.
    pub log_budget: crate::log_budget::LogBudget,
    /// Where a version on trial records what it would have done (`replay`): its publishes,
    /// seeks, HTTP requests and state writes are recorded there, never performed. None: live.
    pub effects: Option<Arc<crate::effects::Effects>>,
    /// The shard's state writes not yet committed, when its subscription commits state with
    /// the checkpoint (`[subscription.state] commit = "with-checkpoint"`). None: writes reach
    /// the store at once.
    pub pending: Option<Arc<crate::state::commit::Pending>>,
}

impl CallContext {
    /// Counts a containment event of this subscription.
    pub fn contained(&self, event: &'static str) {
        if let Some(m) = &self.metrics {
            m.contained(&self.subscription, event);
        }
    }
}

/// The positions a shard's reader has delivered, from the first to the last.
#[derive(Debug, Default)]
pub struct Delivered(std::sync::Mutex<Option<(Position, Position)>>);

impl Delivered {
    /// Records that the records from `first` to `last` (in shard order) were delivered.
    /// Allocates nothing (positions are packed; it is updated once per batch).
    pub fn extend(&self, first: &crate::record::Record, last: &crate::record::Record) {
        let mut range = self.0.lock().expect("delivered range poisoned");
        match &mut *range {
            Some((lo, hi)) => {
                if first.position_cmp(lo).is_lt() {
                    *lo = first.position();
                }
                if last.position_cmp(hi).is_gt() {
                    *hi = last.position();
                }
            }
            None => *range = Some((first.position(), last.position())),
        }
    }

    /// Forgets what was delivered from `at` on: the reader reads it again after a seek, and
    /// until it has, a seek may go back, or as far forward as `at`, but never past it (the
    /// records after `at` have no outcome since the seek, whatever they had before).
    pub fn rewind(&self, at: &Position) {
        let mut range = self.0.lock().expect("delivered range poisoned");
        if let Some((lo, hi)) = &mut *range {
            if *at < *lo {
                *lo = at.clone();
            }
            if *at < *hi {
                *hi = at.clone();
            }
        }
    }

    /// Whether the record with this sequence number was delivered (as far as its sequence
    /// number can tell), or the range it was delivered in when not.
    pub fn check(&self, sequence_number: &str) -> Result<(), String> {
        let range = self.0.lock().expect("delivered range poisoned");
        let at = Position::new(sequence_number, 0);
        match &*range {
            Some((lo, hi)) if lo.record_start() <= at && at <= *hi => Ok(()),
            Some((lo, hi)) => Err(format!(
                "this reader delivered from {lo} to {hi}; a seek may only go back to a record it delivered"
            )),
            None => Err("this reader has delivered nothing yet".into()),
        }
    }
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

    /// The sequence number the last call asked the shard to seek to, if it did.
    fn take_seek(&mut self) -> Option<String> {
        None
    }

    /// This instance calls records again to find the ones a failed call failed on: what it
    /// logs repeats the first call, so it logs at debug.
    fn replaying(&mut self) {}
}

/// Polls `future` once: its output when it is ready at once, else `None` (poll it on). Lets a
/// caller set up timers and interrupts only for the calls that have to wait.
pub async fn poll_once<F: std::future::Future + ?Sized>(
    mut future: std::pin::Pin<&mut F>,
) -> Option<F::Output> {
    std::future::poll_fn(|cx| match future.as_mut().poll(cx) {
        std::task::Poll::Ready(out) => std::task::Poll::Ready(Some(out)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

/// Makes handler instances.
#[async_trait]
pub trait HandlerFactory: Send + Sync {
    /// The version new instances will run.
    fn version(&self) -> String;

    /// A fresh instance for one shard.
    async fn instantiate(&self, ctx: &CallContext) -> Result<Box<dyn Handler>, CallError>;
}

/// Why a handler call failed. Its text names the handler by its short version (the first 12
/// hex digits, as every log line does).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// `message`: what the handler said about it (its last error line, or the end of its
    /// stderr) when it said anything, else the trap itself. `said`: the handler's own error
    /// line already went to the log (so a report need not repeat it).
    #[error("handler {} trapped: {message}", short(version))]
    Trap {
        version: String,
        message: String,
        said: bool,
    },
    #[error("handler {} ran past its timeout of {timeout_ms} ms", short(version))]
    Timeout { version: String, timeout_ms: u64 },
    #[error("handler {} reached its memory limit: {message}", short(version))]
    MemoryLimit { version: String, message: String },
    #[error(
        "handler {} answered {got} outcomes for a batch of {expected} records",
        short(version)
    )]
    WrongOutcomeCount {
        version: String,
        expected: usize,
        got: usize,
    },
    #[error(
        "handler {} burned all its fuel ({fuel} units per call)",
        short(version)
    )]
    OutOfFuel { version: String, fuel: u64 },
    #[error("handler {} could not be instantiated: {message}", short(version))]
    Instantiate { version: String, message: String },
}

fn short(version: &str) -> &str {
    crate::version::short_version(version)
}

impl CallError {
    /// Whether the handler's own error line already said what this reports.
    pub fn said_by_the_handler(&self) -> bool {
        matches!(self, CallError::Trap { said: true, .. })
    }

    /// A failure some record of the batch may have caused on its own (trap, timeout, memory,
    /// fuel): splitting the batch can isolate it. A bad answer or a failed instantiation is
    /// the handler's, not a record's.
    pub fn may_be_a_record(&self) -> bool {
        matches!(
            self,
            CallError::Trap { .. }
                | CallError::Timeout { .. }
                | CallError::MemoryLimit { .. }
                | CallError::OutOfFuel { .. }
        )
    }

    /// Every [`kind`](Self::kind) a failed call can have.
    pub const KINDS: [&'static str; 6] = [
        "trap",
        "timeout",
        "memory",
        "fuel",
        "wrong-answer",
        "instantiate",
    ];

    /// A short name of the kind of failure, for metrics and dead letters.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Trap { .. } => "trap",
            CallError::Timeout { .. } => "timeout",
            CallError::MemoryLimit { .. } => "memory",
            CallError::OutOfFuel { .. } => "fuel",
            CallError::WrongOutcomeCount { .. } => "wrong-answer",
            CallError::Instantiate { .. } => "instantiate",
        }
    }
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

#[cfg(test)]
mod delivered_tests {
    use super::*;

    fn record(seq: &str) -> Record {
        Record {
            partition_key: "k".into(),
            sequence_number: seq.into(),
            sub_sequence_number: 0,
            approximate_arrival_timestamp: 0,
            data: Vec::new(),
        }
    }

    #[test]
    fn a_seek_may_go_only_where_the_reader_delivered() {
        let d = Delivered::default();
        assert!(d.check("10").is_err(), "nothing delivered yet");
        d.extend(&record("10"), &record("19"));
        d.extend(&record("20"), &record("29"));
        for ok in ["10", "15", "29", "0029"] {
            assert!(d.check(ok).is_ok(), "{ok}");
        }
        for bad in ["9", "30", "100"] {
            let e = d.check(bad).unwrap_err();
            assert!(e.contains("from 10 to 29"), "{bad}: {e}");
        }
    }
}
