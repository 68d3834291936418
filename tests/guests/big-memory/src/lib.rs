//! Answers ack, like `always-ack`, but its linear memory starts at more than 8 MiB (a static
//! buffer it touches): a version that a host with a smaller `limits.memory` refuses at
//! validation while others run it (the fleet tests).

use std::hint::black_box;
use std::sync::Mutex;

use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};

/// 8 MiB of zeroes, part of the memory the component starts with.
static BUFFER: Mutex<[u8; 8 << 20]> = Mutex::new([0; 8 << 20]);

fn all(_info: &BatchInfo, records: &[Record]) -> BatchOutcome {
    let mut buffer = BUFFER.lock().unwrap();
    buffer[records.len() % (8 << 20)] = black_box(1);
    BatchOutcome::All(Outcome::Ack)
}

shardhost_guest::batch_handler!(all);
