//! `shardhost invoke HANDLER.wasm --records FILE.ndjson [--batch N] [--json]`: run a handler
//! over records locally, through the embedded stream, and print each record's outcome.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use shardhost::config::{Limits, WasiGrants};
use shardhost::feed;
use shardhost::handler::{CallContext, Handler, HandlerFactory, outcomes_per_record};
use shardhost::record::{BatchInfo, Outcome, Record};
use shardhost::source::memory::{MemoryStreams, shard_id};
use shardhost::wasm::Runtime;

use super::{EXIT_CONFIG, EXIT_RUNTIME};

#[derive(Args, Debug)]
pub struct InvokeArgs {
    /// The handler component.
    handler: PathBuf,
    /// An NDJSON record file: `{"partition_key": "...", "data": ...}` per line.
    #[arg(long)]
    records: PathBuf,
    /// Records per handler call.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10000))]
    batch: u32,
    /// One JSON object per record instead of text.
    #[arg(long)]
    json: bool,
}

const STREAM: &str = "invoke";

pub fn invoke(args: &InvokeArgs) -> u8 {
    super::block_on(invoke_async(args))
}

async fn invoke_async(args: &InvokeArgs) -> u8 {
    let input = match feed::load(&args.records) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_CONFIG;
        }
    };
    let runtime = match Runtime::new(Runtime::default_cache_dir(), false) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_RUNTIME;
        }
    };
    let component = match runtime
        .load_file(&args.handler, Limits::default(), &WasiGrants::default())
        .await
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return EXIT_CONFIG;
        }
    };
    // One shard, so records keep their file order.
    let streams = MemoryStreams::new();
    streams.create(STREAM, 1);
    for r in input {
        streams
            .put_now(STREAM, &r.partition_key, r.data)
            .expect("the stream was just created");
    }
    let records = streams
        .records(STREAM, &shard_id(0))
        .expect("the stream was just created");
    let ctx = CallContext {
        subscription: Arc::from("invoke"),
        stream: Arc::from(STREAM),
        shard_id: Arc::from(shard_id(0)),
        publisher: None,
        delivered: None,
        metrics: None,
    };
    let info = BatchInfo {
        stream: STREAM.into(),
        shard_id: shard_id(0),
        millis_behind_latest: None,
        attempt: 1,
    };
    let mut out = std::io::stdout().lock();
    let mut instance: Option<Box<dyn Handler>> = None;
    let mut failed_calls = 0;
    for batch in records.chunks(args.batch as usize) {
        let mut handler = match instance.take() {
            Some(h) => h,
            None => match component.instantiate(&ctx).await {
                Ok(h) => h,
                Err(e) => {
                    eprintln!("{e}");
                    return EXIT_RUNTIME;
                }
            },
        };
        let result = handler
            .handle(&info, batch)
            .await
            .and_then(|a| outcomes_per_record(a, batch.len(), handler.version()));
        let (outcomes, error) = match result {
            Ok(o) => {
                instance = Some(handler);
                (o, None)
            }
            Err(e) => {
                failed_calls += 1;
                tracing::error!("{e}");
                (vec![Outcome::Retry; batch.len()], Some(e.to_string()))
            }
        };
        for (record, outcome) in batch.iter().zip(outcomes) {
            let line = if args.json {
                json_line(record, outcome, error.as_deref())
            } else {
                text_line(record, outcome, error.as_deref())
            };
            if writeln!(out, "{line}").is_err() {
                return EXIT_RUNTIME;
            }
        }
    }
    if failed_calls > 0 { EXIT_RUNTIME } else { 0 }
}

fn json_line(record: &Record, outcome: Outcome, error: Option<&str>) -> String {
    let mut v = serde_json::json!({
        "sequence_number": record.sequence_number,
        "partition_key": &*record.partition_key,
        "outcome": outcome.name(),
    });
    if let Outcome::RetryAfter(ms) = outcome {
        v["retry_after_ms"] = ms.into();
    }
    if let Some(e) = error {
        v["error"] = e.into();
    }
    v.to_string()
}

fn text_line(record: &Record, outcome: Outcome, error: Option<&str>) -> String {
    let mut line = format!(
        "{}  {:<12}  {}",
        record.sequence_number,
        outcome.to_string(),
        record.partition_key
    );
    if let Some(e) = error {
        line.push_str("  (");
        line.push_str(e);
        line.push(')');
    }
    line
}
