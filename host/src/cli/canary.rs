//! `shardhost deploy --config CFG SUBSCRIPTION FILE.wasm --canary 10% [--canary-for 10m]
//! [--abort-on RULES]` and `deploy --config CFG SUBSCRIPTION --canary-off`: a rollout through
//! the lease table the config names (see [`crate::canary`]).

use std::path::PathBuf;

use super::CliError;
use super::fleet::{FleetSource, subscription, who};
use crate::config::{Config, SubscriptionConfig};
use crate::fleet::{CanaryPlan, Sign};
use crate::fleet_table::RolloutState;
use crate::source::StreamSource;
use crate::source::kinesis::KinesisStreams;
use crate::version::short_version;

/// `10%` or `2.5%` as per mille (1 to 999).
pub fn share(text: &str) -> Result<u32, String> {
    let bad =
        || format!("`{text}`: a share of the shards such as 10% (more than 0, less than 100)");
    let number: f64 = text
        .trim()
        .strip_suffix('%')
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(bad)?;
    let permille = (number * 10.0).round();
    if !(1.0..=999.0).contains(&permille) {
        return Err(bad());
    }
    Ok(permille as u32)
}

/// What a rollout is asked for.
pub struct CanaryArgs<'a> {
    pub subscription: &'a str,
    pub file: &'a PathBuf,
    pub bytes: Vec<u8>,
    pub share_permille: u32,
    pub window: std::time::Duration,
    pub abort_on: &'a str,
    /// Signs the rollout and its promotion.
    pub key: Option<&'a crate::signing::SignKey>,
}

/// Validates the version under the subscription's limits, chooses its shards among the stream's
/// open ones and starts the rollout.
pub async fn start(config: &Config, args: CanaryArgs<'_>) -> Result<(), CliError> {
    let s = subscription(config, args.subscription)?;
    let fleet = FleetSource::table(config).await?;
    let sign = match args.key {
        Some(key) => Sign::Key(key),
        None => Sign::No,
    };
    // A fleet that would refuse it is told so before anything of the bytes runs here.
    let version = crate::version::version_of(&args.bytes);
    fleet.signs_trial(&s.name, "a rollout", &version, &sign)?;
    super::fleet::validate_here(config, s, args.file, &args.bytes).await?;
    let shards = open_shards(config, s).await?;
    let by = format!("{} (deploy --canary)", who());
    let plan = CanaryPlan {
        share_permille: args.share_permille,
        window_ms: u64::try_from(args.window.as_millis()).unwrap_or(u64::MAX),
        abort_on: args.abort_on,
        shards,
        by: &by,
    };
    let r = fleet
        .start_canary(&s.name, &args.bytes, plan, &sign)
        .await?;
    println!(
        "subscription `{}`: rollout {} of {} on {} shard(s): {}",
        s.name,
        r.canary_id,
        short_version(&r.version),
        r.shards.len(),
        r.shards.join(", ")
    );
    println!(
        "  promoted after {} if clean; rolled back at the first of: {}",
        humantime::format_duration(args.window),
        r.abort_on
    );
    if let Some(p) = &r.promote {
        println!(
            "  signed by {}; its promotion is signed as fleet generation {}",
            p.signed.key, p.generation
        );
    }
    Ok(())
}

/// The stream's open shards (closed ones take no new records to compare).
async fn open_shards(config: &Config, s: &SubscriptionConfig) -> Result<Vec<String>, CliError> {
    let source = KinesisStreams::connect(&config.kinesis).await;
    let shards = source.list_shards(&s.stream).await?;
    Ok(shards
        .into_iter()
        .filter(|s| !s.closed)
        .map(|s| s.shard_id)
        .collect())
}

/// Rolls the running rollout of `name` back now.
pub async fn stop(config: &Config, name: &str) -> Result<(), CliError> {
    let s = subscription(config, name)?;
    let fleet = FleetSource::table(config).await?;
    let running = fleet
        .rollout(&s.name)
        .await?
        .filter(|(_, r)| r.state == RolloutState::Running);
    let Some((revision, r)) = running else {
        return Err(CliError::NoRollout(s.name.clone()));
    };
    let by = format!("{} (deploy --canary-off)", who());
    let decided = fleet
        .decide(
            &s.name,
            revision,
            &r,
            RolloutState::Aborted,
            "stopped by an operator",
            &by,
        )
        .await?;
    if !decided {
        return Err(CliError::NoRollout(s.name.clone()));
    }
    println!(
        "subscription `{}`: rollout {} of {} rolled back; every shard returns to the fleet's version",
        s.name,
        r.canary_id,
        short_version(&r.version)
    );
    Ok(())
}
