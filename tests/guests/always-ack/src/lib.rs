//! Answers ack for every batch. With `always-drop`, two handler versions whose outcomes tell
//! which one handled a record (the hot-swap tests).

use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};

fn all(_info: &BatchInfo, _records: &[Record]) -> BatchOutcome {
    BatchOutcome::All(Outcome::Ack)
}

shardhost_guest::batch_handler!(all);
