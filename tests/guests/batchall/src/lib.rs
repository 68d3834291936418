//! A per-batch handler answering one outcome for the whole batch, decided by the first
//! record's data: `drop` → drop, `retry` → retry, anything else (or an empty batch) → ack.
//! Logs the batch size at debug level.

use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};

fn all(info: &BatchInfo, records: &[Record]) -> BatchOutcome {
    shardhost_guest::debug!(
        "batch of {} records from {} (attempt {})",
        records.len(),
        info.shard_id(),
        info.attempt()
    );
    let first = records.first().and_then(|r| r.text().ok());
    BatchOutcome::All(match first {
        Some("drop") => Outcome::Drop,
        Some("retry") => Outcome::Retry,
        _ => Outcome::Ack,
    })
}

shardhost_guest::batch_handler!(all);
