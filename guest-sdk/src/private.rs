//! What the `handler!` and `batch_handler!` macros expand to. Not a public API: names here
//! change without notice.

use std::panic::PanicHookInfo;
use std::sync::Once;

use crate::{BatchInfo, BatchOutcome, Outcome, Record};

/// The bindings of the world `shardhost:handler/http-state-handler` (the handler world,
/// `wasi:http`'s outgoing handler, `wasi:keyvalue` and `conditional`), generated from
/// `../wit`. A component imports only what its handler calls: one that sends no request does
/// not import `wasi:http`, one that keeps no state does not import `wasi:keyvalue` or
/// `conditional`.
#[allow(clippy::too_many_arguments)] // the generated canonical-ABI entry point
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "http-state-handler",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "__export",
        default_bindings_module: "::shardhost_guest::__private::bindings",
        additional_derives: [PartialEq, Eq],
        // wasi:io's stream error holds a resource (an io error), which compares as nothing.
        additional_derives_ignore: ["stream-error"],
    });
}

/// The generated types and imports under short names.
pub mod wit {
    pub use super::bindings::Guest;
    pub use super::bindings::shardhost::handler::host;
    pub use super::bindings::shardhost::handler::types::{
        BatchInfo, BatchOutcome, KinesisRecord, Outcome,
    };
}

/// Runs a per-record handler over a batch: one call per record, in order, and one outcome per
/// record in the same order. Each record is moved out of the batch, not copied.
pub fn per_record<F>(
    info: wit::BatchInfo,
    records: Vec<wit::KinesisRecord>,
    mut handler: F,
) -> wit::BatchOutcome
where
    F: FnMut(&Record) -> Outcome,
{
    let attempt = info.attempt;
    drop(info);
    crate::log::refresh_threshold();
    let outcomes = records
        .into_iter()
        .map(|r| handler(&Record::from_wit(r, attempt)).into_wit())
        .collect();
    wit::BatchOutcome::Each(outcomes)
}

/// Runs a per-batch handler over a batch.
pub fn per_batch<F>(
    info: wit::BatchInfo,
    records: Vec<wit::KinesisRecord>,
    handler: F,
) -> wit::BatchOutcome
where
    F: FnOnce(&BatchInfo, &[Record]) -> BatchOutcome,
{
    crate::log::refresh_threshold();
    let info = BatchInfo::from_wit(info);
    let records: Vec<Record> = records
        .into_iter()
        .map(|r| Record::from_wit(r, info.attempt()))
        .collect();
    handler(&info, &records).into_wit()
}

/// Installs, once per instance, a panic hook that writes the panic's message and location to
/// the host's log at error level. The guest then traps as usual (wasm panics abort), so the
/// host's report of the trap can name the panic.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            crate::log::log_always(crate::log::Level::Error, &panic_line(info))
        }))
    });
}

fn panic_line(info: &PanicHookInfo<'_>) -> String {
    let message = info.payload_as_str().unwrap_or("Box<dyn Any>");
    match info.location() {
        Some(at) => format!("handler panicked at {at}: {message}"),
        None => format!("handler panicked: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(texts: &[&str]) -> (wit::BatchInfo, Vec<wit::KinesisRecord>) {
        let info = wit::BatchInfo {
            stream: "s".into(),
            shard_id: "shardId-000000000000".into(),
            millis_behind_latest: Some(0),
            attempt: 1,
        };
        let records = texts
            .iter()
            .enumerate()
            .map(|(i, t)| wit::KinesisRecord {
                partition_key: format!("pk-{i}"),
                sequence_number: format!("{}", 100 + i),
                sub_sequence_number: 0,
                approximate_arrival_timestamp: 0,
                data: t.as_bytes().to_vec(),
            })
            .collect();
        (info, records)
    }

    fn decide(r: &Record) -> Outcome {
        match r.text() {
            Ok("drop") => Outcome::Drop,
            Ok("retry") => Outcome::Retry,
            Ok("later") => Outcome::RetryAfter(250),
            _ => Outcome::Ack,
        }
    }

    #[test]
    fn per_record_maps_outcomes_in_order() {
        let (info, records) = batch(&["ack", "drop", "retry", "later", "ack", "drop"]);
        let mut seen = Vec::new();
        let out = per_record(info, records, |r| {
            seen.push(r.sequence_number().to_owned());
            decide(r)
        });
        assert_eq!(
            out,
            wit::BatchOutcome::Each(vec![
                wit::Outcome::Ack,
                wit::Outcome::Drop,
                wit::Outcome::Retry,
                wit::Outcome::RetryAfter(250),
                wit::Outcome::Ack,
                wit::Outcome::Drop,
            ])
        );
        assert_eq!(seen, ["100", "101", "102", "103", "104", "105"]);
    }

    #[test]
    fn per_record_takes_a_fn_item_and_an_empty_batch() {
        let (info, records) = batch(&[]);
        assert_eq!(
            per_record(info, records, decide),
            wit::BatchOutcome::Each(vec![])
        );
    }

    #[test]
    fn per_batch_sees_info_and_records() {
        let (info, records) = batch(&["retry", "ack"]);
        let out = per_batch(info, records, |info, records| {
            assert_eq!(info.shard_id(), "shardId-000000000000");
            assert_eq!(info.millis_behind_latest(), Some(0));
            assert_eq!(records.len(), 2);
            assert_eq!(records[1].partition_key(), "pk-1");
            BatchOutcome::All(decide(&records[0]))
        });
        assert_eq!(out, wit::BatchOutcome::All(wit::Outcome::Retry));
    }

    #[test]
    fn panic_hook_line_names_message_and_location() {
        let line = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = line.clone();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            *sink.lock().unwrap() = panic_line(info)
        }));
        let result = std::panic::catch_unwind(|| panic!("poison record {}", 7));
        std::panic::set_hook(previous);
        assert!(result.is_err());
        let line = line.lock().unwrap().clone();
        assert!(line.starts_with("handler panicked at "), "{line}");
        assert!(line.contains("private.rs:"), "{line}");
        assert!(line.ends_with(": poison record 7"), "{line}");
    }
}
