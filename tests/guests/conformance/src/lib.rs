//! The conformance handler in Rust: each record's partition key is a command, as
//! `tests/conformance/README.md` specifies; its Python and JavaScript twins live in
//! `tests/conformance/python` and `tests/conformance/js`.

mod requests;
mod state;

use shardhost_guest::serde_json::Value;
use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};

/// 2020-01-01T00:00:00Z, in ms since the epoch.
const YEAR_2020_MS: u64 = 1_577_836_800_000;

fn conformance(info: &BatchInfo, records: &[Record]) -> BatchOutcome {
    if let Some(all) = records
        .first()
        .and_then(|r| r.partition_key().strip_prefix("all:"))
    {
        return BatchOutcome::All(simple(all).unwrap_or(Outcome::Drop));
    }
    let mut outcomes: Vec<Outcome> = records.iter().map(|r| one(info, r)).collect();
    // Every `http` record of the call goes out at once.
    let http: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].partition_key() == "http")
        .collect();
    let answers = requests::send_all(http.iter().map(|&i| &records[i]));
    for (i, outcome) in http.into_iter().zip(answers) {
        outcomes[i] = outcome;
    }
    if records.iter().any(|r| r.partition_key() == "wrong-shape") {
        outcomes.pop();
    }
    BatchOutcome::Each(outcomes)
}

/// `ack`, `drop`, `retry`, `retry-after:N`.
fn simple(command: &str) -> Option<Outcome> {
    match command {
        "ack" => Some(Outcome::Ack),
        "drop" => Some(Outcome::Drop),
        "retry" => Some(Outcome::Retry),
        _ => command
            .strip_prefix("retry-after:")?
            .parse()
            .ok()
            .map(Outcome::RetryAfter),
    }
}

fn ack_if(yes: bool) -> Outcome {
    if yes { Outcome::Ack } else { Outcome::Drop }
}

fn one(info: &BatchInfo, record: &Record) -> Outcome {
    let key = record.partition_key();
    if let Some(outcome) = simple(key) {
        return outcome;
    }
    let (command, arg) = key.split_once(':').unwrap_or((key, ""));
    match command {
        "size" => ack_if(arg.parse() == Ok(record.data().len())),
        "sum" => {
            let sum: u64 = record.data().iter().map(|&b| u64::from(b)).sum();
            ack_if(arg.parse() == Ok(sum))
        }
        "text" => ack_if(record.text().is_ok()),
        "json" => ack_if(record.json::<Value>().is_ok()),
        "attempt" => ack_if(arg.parse() == Ok(record.attempt())),
        "meta" => ack_if(meta(info, record)),
        "publish" => match shardhost_guest::publish("conformance-out", "k", record.data()) {
            Ok(_) => Outcome::Ack,
            Err(e) => {
                shardhost_guest::warn!("publish refused: {e}");
                Outcome::Retry
            }
        },
        "seek" => match shardhost_guest::seek(arg) {
            Ok(()) => Outcome::Ack,
            Err(e) => {
                shardhost_guest::warn!("seek refused: {e}");
                Outcome::Retry
            }
        },
        "log" => {
            shardhost_guest::info!("{}", String::from_utf8_lossy(record.data()));
            Outcome::Ack
        }
        "config" => match shardhost_guest::config::get(arg) {
            None => Outcome::Drop,
            Some(value) if value.as_bytes() == record.data() => Outcome::Ack,
            Some(_) => Outcome::Retry,
        },
        "http" => Outcome::Drop, // answered by `requests::send_all`
        "state" => state::run(record),
        "raise" => panic!("raised on purpose"),
        _ => Outcome::Drop,
    }
}

fn meta(info: &BatchInfo, record: &Record) -> bool {
    let sequence = record.sequence_number();
    !sequence.is_empty()
        && sequence.bytes().all(|b| b.is_ascii_digit())
        && record.sub_sequence_number() == 0
        && record.arrival_millis() > YEAR_2020_MS
        && !info.stream().is_empty()
        && !info.shard_id().is_empty()
}

shardhost_guest::batch_handler!(conformance);
