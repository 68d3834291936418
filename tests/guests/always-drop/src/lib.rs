//! Answers drop for every batch. With `always-ack`, two handler versions whose outcomes tell
//! which one handled a record (the hot-swap tests).

use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};

fn all(_info: &BatchInfo, _records: &[Record]) -> BatchOutcome {
    BatchOutcome::All(Outcome::Drop)
}

shardhost_guest::batch_handler!(all);
