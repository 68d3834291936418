//! Counts orders per SKU in state: for each record `{"sku": "..."}` it increments
//! `count/SHARD/SKU` (config `key = "sku"`: `count/SKU`, one key every shard writes). The
//! exactly-once tests (`tests/all/committed_state/`) read the counts back and compare them with
//! the records put.
//!
//! Config `flaky = "SKU"`: the first call of each instance that meets that SKU answers retry for
//! its record (the batch is then read again). Config `wide = "N"`: a record with SKU `wide`
//! writes N keys of its own. A state error answers retry-after for the record.

use std::sync::atomic::{AtomicBool, Ordering};

use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record, config, state};

static FLAKED: AtomicBool = AtomicBool::new(false);

fn sku(record: &Record) -> Option<String> {
    let text = std::str::from_utf8(record.data()).ok()?;
    let value: shardhost_guest::serde_json::Value = shardhost_guest::serde_json::from_str(text).ok()?;
    value.get("sku")?.as_str().map(str::to_owned)
}

fn count(info: &BatchInfo, records: &[Record]) -> BatchOutcome {
    let by_sku = config::get("key").as_deref() == Some("sku");
    let flaky = config::get("flaky");
    let wide: usize = config::get("wide").and_then(|n| n.parse().ok()).unwrap_or(0);
    let outcomes = records
        .iter()
        .map(|record| {
            let Some(sku) = sku(record) else {
                return Outcome::Drop;
            };
            if flaky.as_deref() == Some(sku.as_str()) && !FLAKED.swap(true, Ordering::Relaxed) {
                return Outcome::Retry;
            }
            let key = if by_sku {
                format!("count/{sku}")
            } else {
                format!("count/{}/{sku}", info.shard_id())
            };
            if let Err(e) = state::increment(&key, 1) {
                shardhost_guest::warn!("state: {e}");
                return Outcome::RetryAfter(200);
            }
            if sku == "wide" {
                for i in 0..wide {
                    let key = format!("wide/{}/{i}", record.sequence_number());
                    if let Err(e) = state::set(&key, b"x") {
                        shardhost_guest::warn!("state: {e}");
                        return Outcome::RetryAfter(200);
                    }
                }
            }
            Outcome::Ack
        })
        .collect();
    BatchOutcome::Each(outcomes)
}

shardhost_guest::batch_handler!(count);
