//! The state benchmark's handler (host/benches/state.rs): checks and marks one key per record
//! (the record's partition key) — skips a record already marked, marks the others. Config
//! `mode = "many"` does it for the whole batch with one `get_many` and one `set_many`; anything
//! else with a `get` and a `set` per record. A state error answers retry-after for the batch.

use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record, config, state};

fn dedup(_info: &BatchInfo, records: &[Record]) -> BatchOutcome {
    let keys: Vec<&str> = records.iter().map(|r| r.partition_key()).collect();
    let done = if config::get("mode").as_deref() == Some("many") {
        many(&keys)
    } else {
        each(&keys)
    };
    match done {
        Ok(()) => BatchOutcome::All(Outcome::Ack),
        Err(e) => {
            shardhost_guest::warn!("state: {e}");
            BatchOutcome::All(Outcome::RetryAfter(1000))
        }
    }
}

fn many(keys: &[&str]) -> Result<(), state::Error> {
    let seen = state::get_many(keys)?;
    let marks = keys
        .iter()
        .zip(seen)
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| (k.to_string(), b"done".to_vec()));
    state::set_many(marks)
}

fn each(keys: &[&str]) -> Result<(), state::Error> {
    for key in keys {
        if state::get(key)?.is_none() {
            state::set(key, b"done")?;
        }
    }
    Ok(())
}

shardhost_guest::batch_handler!(dedup);
