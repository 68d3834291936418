//! `shardhost invoke HANDLER.wasm --records FILE.ndjson [--batch N] [--json] [--memory SIZE]
//! [--timeout D] [--allow-http ORIGIN]... [--config KEY=VALUE]... [--state] [--bucket NAME]...`: run a handler over records
//! locally, through the embedded stream, and print each record's outcome.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tracing::Instrument;

use clap::Args;

use super::CliError;
use crate::capability::config::{ConfigGrant, ConfigValue};
use crate::capability::http::{HttpGrant, Origin};
use crate::capability::state::{StateGrant, StateStoreKind};
use crate::config::{Limits, MAX_CALL_TIMEOUT, MAX_MEMORY, MIN_MEMORY, WasiGrants, defaults};
use crate::dispatch::{Judge, Judged};
use crate::feed::{self, FeedRecord};
use crate::handler::{CallContext, HandlerFactory};
use crate::record::{BatchInfo, Outcome, Record};
use crate::source::memory::{MemoryStreams, shard_id};
use crate::status::summary::Totals;
use crate::wasm::Runtime;

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
    /// The instance's memory limit, as `[subscription.limits] memory` (1MiB to 4GiB).
    #[arg(long, default_value = "64MiB", value_parser = memory)]
    memory: u64,
    /// The limit per handler call, as `[subscription.limits] timeout`.
    #[arg(long, default_value = "5s", value_parser = timeout)]
    timeout: std::time::Duration,
    /// An origin (`scheme://host[:port]`) the handler may send HTTP requests to, as
    /// `[subscription.http] allow` (repeat for more; none: no HTTP).
    #[arg(long = "allow-http", value_name = "ORIGIN", value_parser = origin)]
    allow_http: Vec<Origin>,
    /// A configuration value the handler reads by name, as `[subscription.config]` (repeat
    /// for more).
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = config_value)]
    config: Vec<(String, String)>,
    /// Grant state, as `[subscription.state]` does: a memory store that lives as long as
    /// this command (the bucket `default`, and each `--bucket`).
    #[arg(long)]
    state: bool,
    /// A bucket the handler may open besides `default`, as `[subscription.state] buckets`
    /// (repeat for more; implies --state).
    #[arg(long = "bucket", value_name = "NAME", value_parser = bucket)]
    buckets: Vec<String>,
}

fn bucket(text: &str) -> Result<String, String> {
    if !crate::capability::state::is_bucket_name(text) || text == "default" {
        return Err(format!(
            "`{text}` is not a bucket name besides default: 1 to 64 letters, digits, `_`, `.` or `-`"
        ));
    }
    Ok(text.to_owned())
}

fn origin(text: &str) -> Result<Origin, String> {
    Origin::parse(text)
}

fn config_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("`{text}`: write KEY=VALUE")),
    }
}

impl InvokeArgs {
    /// What the handler is granted: `--allow-http` origins (with `[subscription.http]`'s
    /// defaults otherwise) and `--config` values.
    fn grants(&self) -> WasiGrants {
        let http = (!self.allow_http.is_empty()).then(|| HttpGrant {
            allow: self.allow_http.clone(),
            timeout: defaults::HTTP_TIMEOUT,
            max_body: defaults::HTTP_MAX_BODY,
            max_in_flight: defaults::HTTP_MAX_IN_FLIGHT,
            ca_file: None,
            allow_private: false,
        });
        let config: std::collections::BTreeMap<_, _> = self
            .config
            .iter()
            .map(|(k, v)| {
                let value = ConfigValue {
                    value: v.clone(),
                    from_env: false,
                };
                (k.clone(), value)
            })
            .collect();
        let state = (self.state || !self.buckets.is_empty()).then(|| StateGrant {
            store: StateStoreKind::Memory,
            ttl: None,
            buckets: self.buckets.clone(),
            namespace: crate::capability::state::namespace("invoke", "invoke"),
            max_in_flight: defaults::STATE_MAX_IN_FLIGHT,
            timeout: defaults::STATE_TIMEOUT,
            commit: Default::default(),
        });
        let mut grants = WasiGrants::default();
        if let Some(http) = http {
            grants.insert(http);
        }
        if !config.is_empty() {
            grants.insert(ConfigGrant(config));
        }
        if let Some(state) = state {
            grants.insert(state);
        }
        grants
    }
}

/// As `[subscription.limits] memory` takes it.
fn memory(text: &str) -> Result<u64, String> {
    let bytes = crate::config::parse_size(text)?;
    if !(MIN_MEMORY..=MAX_MEMORY).contains(&bytes) {
        return Err(format!("{text} is out of range: from 1MiB to 4GiB"));
    }
    Ok(bytes)
}

/// As `[subscription.limits] timeout` takes it.
fn timeout(text: &str) -> Result<std::time::Duration, String> {
    let d = crate::config::parse_duration(text)?;
    if d.is_zero() || d > MAX_CALL_TIMEOUT {
        return Err(format!("{text} is out of range: more than 0, at most 15m"));
    }
    Ok(d)
}

const STREAM: &str = "invoke";

pub fn invoke(args: &InvokeArgs) -> Result<(), CliError> {
    super::block_on(invoke_async(args))
}

async fn invoke_async(args: &InvokeArgs) -> Result<(), CliError> {
    let input = feed::load(&args.records)?;
    let runtime = Runtime::new(Runtime::default_cache_dir(), false).map_err(CliError::Engine)?;
    let limits = Limits {
        memory: args.memory,
        timeout: args.timeout,
        ..Limits::default()
    };
    let component = runtime
        .load_file(&args.handler, limits, &args.grants())
        .await
        .map_err(CliError::Handler)?;
    let records = in_file_order(input);
    // The handler's log lines name the shard, as they do in a running host.
    let span = tracing::info_span!("shard", shard = %shard_id(0));
    let calls = call_in_batches(args, component, &records);
    let totals = calls.instrument(span).await?;
    // On stderr: stdout keeps one line per record, for a pipe.
    eprintln!("{totals}");
    match totals.failed {
        0 => Ok(()),
        failed => Err(CliError::CallsFailed(failed as usize)),
    }
}

/// The records as the embedded stream numbers them: one shard, so they keep their file order.
fn in_file_order(input: Vec<FeedRecord>) -> Vec<Record> {
    let streams = MemoryStreams::new();
    streams.create(STREAM, 1);
    for r in input {
        streams
            .put_now(STREAM, &r.partition_key, r.data)
            .expect("the stream was just created");
    }
    streams
        .records(STREAM, &shard_id(0))
        .expect("the stream was just created")
}

/// Calls the handler with `--batch` records at a time, exactly as a shard of `run` answers
/// them: one lane, calls of at most `--batch` records, and a failed call halved until the
/// records that fail on their own are found (each is retried, with its error). Prints each
/// record's outcome; answers how many records got each.
async fn call_in_batches(
    args: &InvokeArgs,
    component: Arc<dyn HandlerFactory>,
    records: &[Record],
) -> Result<Totals, CliError> {
    let ctx = CallContext {
        subscription: Arc::from("invoke"),
        stream: Arc::from(STREAM),
        shard_id: Arc::from(shard_id(0)),
        publisher: None,
        delivered: None,
        metrics: None,
        log_budget: Default::default(),
        effects: None,
        pending: None,
    };
    let info = BatchInfo {
        stream: STREAM.into(),
        shard_id: shard_id(0),
        millis_behind_latest: None,
        attempt: 1,
    };
    let version = component.version();
    let budget = ctx.log_budget.clone();
    let mut judge = Judge::new(component, ctx, args.batch as usize, 1);
    let mut out = std::io::stdout().lock();
    let mut totals = Totals::default();
    for batch in records.chunks(args.batch as usize) {
        let pairs: Vec<(Record, u32)> = batch.iter().cloned().map(|r| (r, 1)).collect();
        for (record, judged) in batch.iter().zip(judge.judge(&info, &pairs).await) {
            totals.records += 1;
            let (outcome, error) = match judged {
                Judged::Outcome(o) => {
                    match o {
                        Outcome::Ack => totals.ack += 1,
                        Outcome::Drop => totals.drop += 1,
                        Outcome::Retry => totals.retry += 1,
                        Outcome::RetryAfter(_) => totals.retry_after += 1,
                    }
                    (o, None)
                }
                Judged::Failed(e) => {
                    totals.failed += 1;
                    (Outcome::Retry, Some(e))
                }
                // Only a seek leaves records unanswered: `run` reads them again from there.
                Judged::Unanswered => {
                    totals.retry += 1;
                    (
                        Outcome::Retry,
                        Some("not answered: the handler sought".into()),
                    )
                }
            };
            print_outcome(&mut out, args.json, record, outcome, error.as_deref())?;
        }
        // Guest log lines the call lost to the budget are said once per call, as a host does
        // once per batch.
        budget.report(crate::version::short_version(&version));
    }
    Ok(totals)
}

/// A record's line.
fn print_outcome(
    out: &mut impl Write,
    json: bool,
    record: &Record,
    outcome: Outcome,
    error: Option<&str>,
) -> Result<(), CliError> {
    let line = if json {
        json_line(record, outcome, error)
    } else {
        text_line(record, outcome, error)
    };
    writeln!(out, "{line}").map_err(CliError::Output)
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
