//! Answers one outcome fewer than the batch has records: a handler bug (not a record's fault)
//! that the host must hold, whatever the retry policy.

use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};

fn short(_info: &BatchInfo, records: &[Record]) -> BatchOutcome {
    BatchOutcome::Each(vec![Outcome::Ack; records.len().saturating_sub(1)])
}

shardhost_guest::batch_handler!(short);
