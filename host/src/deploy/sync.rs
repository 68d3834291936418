//! The loop every instance of a fleet runs beside its subscriptions: read the desired versions
//! every `poll` and converge on them, write the heartbeat every `heartbeat` and at once after
//! anything it shows changed; remove the heartbeat on a clean stop.

use std::sync::Arc;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::Deployer;
use crate::config::FleetConfig;
use crate::fleet::{Fleet, decide};
use crate::fleet_table::Rollout;
use crate::lease::now_ms;
use crate::status::StatusBoard;
use crate::status::fleet::{Heartbeat, Running};

/// Who this instance is, for its heartbeat.
#[derive(Clone)]
pub struct Member {
    pub owner: Arc<str>,
    pub admin: Option<String>,
    pub started_ms: u64,
}

/// Runs until `stop` fires.
pub async fn run(
    fleet: Arc<Fleet>,
    deployer: Arc<Deployer>,
    status: StatusBoard,
    me: Member,
    timings: FleetConfig,
    stop: CancellationToken,
) {
    let mut poll = tokio::time::interval(timings.poll);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut beat = tokio::time::interval(timings.heartbeat);
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let changed = deployer.changes();
    let heartbeat = |status: &StatusBoard| {
        let mut arms = deployer.canary_arms();
        let mut shadows = deployer.shadow_counts();
        let mut refused_trials = deployer.trial_refusals();
        Heartbeat {
            owner: me.owner.to_string(),
            admin: me.admin.clone(),
            started_ms: me.started_ms,
            beat_ms: now_ms(),
            beat_every_ms: u64::try_from(timings.heartbeat.as_millis()).unwrap_or(u64::MAX),
            subscriptions: deployer
                .fleet_states()
                .into_iter()
                .map(|(name, (version, generation, refused))| {
                    let shards = status
                        .shards_of(&name)
                        .iter()
                        .filter(|s| s.status.state.holds_lease())
                        .count();
                    let running = Running {
                        version,
                        generation,
                        shards,
                        refused,
                        canary: arms.remove(&name),
                        shadow: shadows.remove(&name),
                        refused_trials: refused_trials.remove(&name).unwrap_or_default(),
                    };
                    (name, running)
                })
                .collect(),
        }
    };
    let mut last = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = poll.tick() => {
                converge(&fleet, &deployer).await;
                for (name, revision, rollout) in follow_rollouts(&fleet, &deployer).await {
                    let decides = decide::decider_shard(&rollout).is_some_and(|shard| {
                        status.shards_of(&name).iter().any(|s| {
                            s.shard_id == shard && s.status.state.holds_lease()
                        })
                    });
                    if decides {
                        decide::rollout(&fleet, &me.owner, &name, revision, &rollout)
                            .await;
                    }
                }
                continue;
            }
            _ = beat.tick() => {}
            _ = changed.notified() => {}
        }
        let now = heartbeat(&status);
        match fleet.beat(&now).await {
            Ok(_) => last = Some(now),
            Err(e) => tracing::warn!("cannot write this instance's heartbeat: {e}"),
        }
    }
    if let Some(last) = last
        && let Err(e) = fleet.leave(&last).await
    {
        tracing::warn!("cannot remove this instance's heartbeat: {e}");
    }
}

/// Follows every subscription's rollout; answers the running ones.
async fn follow_rollouts(fleet: &Fleet, deployer: &Deployer) -> Vec<(String, u64, Rollout)> {
    let mut running = Vec::new();
    for name in deployer.subscriptions() {
        if let Some((revision, rollout)) = deployer.follow_canary(fleet, &name).await {
            running.push((name, revision, rollout));
        }
    }
    running
}

/// Reads every subscription's desired version and converges on it.
async fn converge(fleet: &Fleet, deployer: &Deployer) {
    for name in deployer.subscriptions() {
        deployer.follow(fleet, &name).await;
        deployer.follow_shadow(fleet, &name).await;
    }
}
