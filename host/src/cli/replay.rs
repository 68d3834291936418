//! `shardhost replay SUB FILE.wasm [--config CFG] [--from T] [--to T | --records N] [--json]
//! [--http live] [--http-answer STATUS[:FILE]] [--current FILE] [--file RECORDS]`: run a version over a subscription's history
//! (or a records file's records) next to the version it runs now, and report the records they
//! answer differently (exit 1 when any do).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use tracing::Instrument;

use super::CliError;
use crate::config::{Config, KinesisEndpoint, LeaseStoreKind, SubscriptionConfig};
use crate::effects::answer::MAX_REPLAY_BODY;
use crate::effects::{AnswerSpec, Effects, HttpAnswer};
use crate::handler::CallContext;
use crate::publish::Publisher;
use crate::record::Record;
use crate::replay::{Copies, Plan, Range, Report, Trial};
use crate::source::StreamSource;
use crate::source::kinesis::KinesisStreams;
use crate::source::memory::MemoryStreams;
use crate::wasm::Runtime;

/// How much a replay's state overlay holds (keys and values written) before writes fail.
const OVERLAY_LIMIT: u64 = 256 << 20;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The subscription whose stream is replayed.
    subscription: String,

    /// The version on trial (a handler component).
    handler: PathBuf,

    /// Replay the records of this file (NDJSON, as `invoke` reads) instead of the stream: one
    /// pseudo-shard named as the file, each record's sequence number its line number. Works
    /// with the embedded stream's config too.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["from", "to"])]
    file: Option<PathBuf>,

    /// The config that names the subscription.
    #[arg(long, default_value = "shardhost.toml")]
    config: PathBuf,

    /// Replay from the first record that arrived at this time: RFC 3339
    /// (`2026-12-06T09:00:00Z`) or how long ago (`2h`). Default: the oldest record kept.
    #[arg(long, value_parser = time)]
    from: Option<u64>,

    /// Replay no record that arrived after this time (as --from). Default: up to the tip.
    #[arg(long, value_parser = time, conflicts_with = "records")]
    to: Option<u64>,

    /// Replay at most this many records, over every shard.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    records: Option<u64>,

    /// The report as one JSON document.
    #[arg(long)]
    json: bool,

    /// `off`: every HTTP request answers 503 without being sent. `live`: requests that only
    /// read (GET, HEAD, OPTIONS) reach their granted origin; others still answer 503.
    #[arg(long, value_enum, default_value_t = HttpReplay::Off)]
    http: HttpReplay,

    /// Answer every request that is not sent (all of them with `--http off`, all but the reads
    /// with `--http live`) with STATUS (200 to 599) and, with `:FILE`, FILE's bytes as the body
    /// (at most 1 MiB; a `.json` file answers `content-type: application/json`), so that the
    /// success path is compared too. The report marks those answers stubbed. Default: 503, no
    /// body.
    #[arg(long, value_name = "STATUS[:FILE]")]
    http_answer: Option<AnswerSpec>,

    /// The version to compare with. Default: the version the fleet's last deploy set (with
    /// a DynamoDB lease table), else the subscription's `handler`.
    #[arg(long)]
    current: Option<PathBuf>,

    /// How many differing records the report lists (the rest are counted).
    #[arg(long, default_value_t = 1000)]
    max_differences: usize,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum HttpReplay {
    Off,
    Live,
}

/// `2026-12-06T09:00:00Z`, or a duration ago (`90m`), as ms since the epoch.
fn time(text: &str) -> Result<u64, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    if let Ok(ago) = crate::config::parse_duration(text) {
        return Ok(now.saturating_sub(ago).as_millis() as u64);
    }
    crate::config::timestamp_millis(text).ok_or_else(|| {
        format!(
            "`{text}` is neither an RFC 3339 time (2026-12-06T09:00:00Z) nor a duration ago (2h)"
        )
    })
}

/// Where the version the subscription runs now comes from.
enum Current {
    File(PathBuf),
    /// The fleet's desired version, read from the lease table (never written).
    Deployed {
        name: String,
        bytes: Vec<u8>,
    },
}

/// `--current`; else the fleet's desired version when a deploy set one (checked against the
/// trusted keys as an instance checks it); else the config's `handler`.
async fn current_of(
    args: &ReplayArgs,
    config: &Config,
    sub: &SubscriptionConfig,
) -> Result<Current, CliError> {
    if let Some(file) = &args.current {
        return Ok(Current::File(file.clone()));
    }
    if !matches!(config.leases.store, LeaseStoreKind::Dynamo { .. }) {
        return Ok(Current::File(sub.handler.clone()));
    }
    let fleet = super::fleet::FleetSource::table(config).await?;
    let Some(desired) = fleet.desired(&sub.name).await? else {
        return Ok(Current::File(sub.handler.clone()));
    };
    fleet.trust(&sub.name, &desired)?;
    let bytes = fleet.fetch(&sub.name, &desired.component).await?;
    let name = format!(
        "the fleet's version {} (generation {})",
        crate::version::short_version(&desired.component.version),
        desired.generation
    );
    tracing::info!(subscription = %sub.name, "comparing with {name}");
    Ok(Current::Deployed { name, bytes })
}

pub fn replay(args: &ReplayArgs) -> Result<(), CliError> {
    // Read before anything else: a bad body file is told before a byte of config loads.
    let answer = match &args.http_answer {
        Some(spec) => Some(spec.load(MAX_REPLAY_BODY)?),
        None => None,
    };
    let config = Config::load(&args.config)?;
    let sub = super::fleet::subscription(&config, &args.subscription)?;
    if config.kinesis.endpoint == KinesisEndpoint::Memory && args.file.is_none() {
        return Err(CliError::EmbeddedReplay(args.config.clone()));
    }
    let report = super::block_on(run(args, &config, sub, answer))?;
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    match report.differences_total {
        0 => Ok(()),
        n => Err(CliError::Differs(n)),
    }
}

async fn run(
    args: &ReplayArgs,
    config: &Config,
    sub: &SubscriptionConfig,
    answer: Option<HttpAnswer>,
) -> Result<Report, CliError> {
    let file = match &args.file {
        Some(path) => Some((path.display().to_string(), file_records(path)?)),
        None => None,
    };
    let source: Arc<dyn StreamSource> = match &file {
        // Nothing is read from it: a publish on trial is recorded, never put.
        Some(_) => Arc::new(MemoryStreams::new()),
        None => Arc::new(KinesisStreams::connect(&config.kinesis).await),
    };
    let (mut now, mut then) = trials(args, config, sub, source.clone(), answer).await?;
    let plan = Plan {
        stream: sub.stream.clone(),
        range: Range {
            from: args.from,
            to: args.to,
            records: args.records,
        },
        batch: sub.batch,
        read_limit: sub.read_limit,
        max_differences: args.max_differences,
    };
    // The fleet's keys, read only: a retry copy of this subscription is replayed as its
    // original, as a host hands it over.
    let keys = crate::supervisor::fleet_envelope_keys(config)
        .await
        .map_err(|source| CliError::Start {
            path: config.path.clone(),
            source: Box::new(source),
        })?;
    let ours_here = sub
        .retry
        .as_ref()
        .is_some_and(|r| r.retry_stream == sub.stream);
    let copies = Copies::new(keys, &sub.name, ours_here);
    let span = tracing::info_span!("replay", subscription = %sub.name);
    let report = match file {
        Some((shard, records)) => {
            crate::replay::replay_records(&shard, records, &plan, &copies, &mut now, &mut then)
                .instrument(span)
                .await
        }
        None => {
            crate::replay::replay(source.as_ref(), &plan, &copies, &mut now, &mut then)
                .instrument(span)
                .await?
        }
    };
    Ok(report)
}

/// The current version and the candidate, each on trial with the subscription's limits and
/// grants; publishes checked against `publish_to` through `source`, as a host checks them.
async fn trials(
    args: &ReplayArgs,
    config: &Config,
    sub: &SubscriptionConfig,
    source: Arc<dyn StreamSource>,
    answer: Option<HttpAnswer>,
) -> Result<(Trial, Trial), CliError> {
    let fuel = sub.limits.fuel.is_some();
    let runtime =
        Runtime::new(Runtime::cache_dir_of(&config.host), fuel).map_err(CliError::Engine)?;
    let current = match current_of(args, config, sub).await? {
        Current::File(file) => runtime.load_file(&file, sub.limits, &sub.wasi).await,
        Current::Deployed { name, bytes } => {
            runtime
                .load_bytes(&name, &bytes, sub.limits, &sub.wasi)
                .await
        }
    }
    .map_err(CliError::Handler)?;
    let candidate = runtime
        .load_file(&args.handler, sub.limits, &sub.wasi)
        .await
        .map_err(CliError::Handler)?;
    let ctx = CallContext {
        subscription: Arc::from(sub.name.as_str()),
        stream: Arc::from(sub.stream.as_str()),
        shard_id: Arc::from(""),
        // Checks `publish_to` as a host does; a publish on trial is recorded, never put.
        publisher: Some(Arc::new(Publisher::new(
            source,
            &sub.name,
            sub.publish_to.clone(),
        ))),
        delivered: None,
        metrics: None,
        log_budget: Default::default(),
        effects: None,
        pending: None,
    };
    let live = args.http == HttpReplay::Live;
    let (call_batch, lanes) = (sub.batch, sub.lanes as usize);
    let trial = |factory, ctx, effects| Trial::new(factory, ctx, effects, call_batch, lanes);
    Ok((
        trial(
            current,
            ctx.clone(),
            Effects::answering(live, OVERLAY_LIMIT, answer.clone()),
        ),
        trial(
            candidate,
            ctx,
            Effects::answering(live, OVERLAY_LIMIT, answer),
        ),
    ))
}

/// The records of `--file`, in order: each one's sequence number is its line number, its
/// arrival time now.
fn file_records(path: &Path) -> Result<Vec<Record>, CliError> {
    let arrived = crate::lease::now_ms();
    Ok(crate::feed::load_numbered(path)?
        .into_iter()
        .map(|(line, r)| Record {
            partition_key: Arc::from(r.partition_key.as_str()),
            sequence_number: line.to_string(),
            sub_sequence_number: 0,
            approximate_arrival_timestamp: arrived,
            data: r.data,
        })
        .collect())
}
