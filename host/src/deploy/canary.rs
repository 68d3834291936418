//! Following a rollout: while the subscription's rollout row says `running`, this instance runs
//! the rollout's version on the rollout's shards (fetched, checked against its version and
//! validated under its own limits, as a deploy); once it is decided, every shard runs the
//! fleet's desired version again (after a promotion, that is the rollout's version).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Deployer, Target, Trial};
use crate::canary::Canary;
use crate::fleet::Fleet;
use crate::fleet_table::{Rollout, RolloutState};
use crate::handler::HandlerFactory;
use crate::status::fleet::{CanaryArms, Refusal};
use crate::version::short_version;

impl Deployer {
    /// Reads `subscription`'s rollout row and follows it. Answers the rollout read when it is
    /// running (for the decider).
    pub async fn follow_canary(&self, fleet: &Fleet, subscription: &str) -> Option<(u64, Rollout)> {
        let target = self.target(subscription).ok()?;
        let read = match fleet.rollout(subscription).await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(subscription, "cannot follow the rollout: {e}");
                return None;
            }
        };
        // A refusal stands while the row names the rollout refused (ended by the decider or
        // not); a row naming another rollout, or none, clears it.
        let named = read.as_ref().map(|(_, r)| r.canary_id.clone());
        let refused = target
            .canary_refused
            .lock()
            .expect("deployer poisoned")
            .clone();
        if named != refused {
            self.trial_refused(target, Trial::Rollout, None);
        }
        let running = read.filter(|(_, r)| r.state == RolloutState::Running);
        let have = target.slot.canary();
        match (&running, have) {
            (None, have) => {
                let ended = have?;
                target.slot.set_canary(None);
                tracing::info!(
                    subscription,
                    version = short_version(&ended.factory.version()),
                    "the rollout ended: every shard runs the fleet's version"
                );
                self.changed.notify_one();
            }
            (Some((_, r)), Some(c)) if c.id == r.canary_id => {}
            (Some((_, r)), _) => self.start_canary(fleet, subscription, r).await,
        }
        running
    }

    async fn start_canary(&self, fleet: &Fleet, subscription: &str, r: &Rollout) {
        let Ok(target) = self.target(subscription) else {
            return;
        };
        let refused_before = {
            let refused = target.canary_refused.lock().expect("deployer poisoned");
            refused.as_deref() == Some(r.canary_id.as_str())
        };
        if refused_before {
            return;
        }
        let origin = format!("rollout {}", r.canary_id);
        // Trusted before a byte of it is fetched: an unsigned rollout is never loaded.
        let loaded = match fleet.trust_rollout(subscription, r) {
            Err(e) => {
                let refusal = Refusal {
                    version: r.version.clone(),
                    generation: 0,
                    error: e.to_string(),
                };
                self.trial_refused(target, Trial::Rollout, Some(refusal));
                Err(e.to_string())
            }
            Ok(()) => match fleet.fetch(subscription, &r.component()).await {
                Ok(bytes) => self
                    .validate(subscription, target, &bytes, &origin)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
        };
        match loaded {
            Ok(component) => {
                let factory = component as Arc<dyn HandlerFactory>;
                let canary = Canary::new(&r.canary_id, factory, &r.shards);
                target.slot.set_canary(Some(Arc::new(canary)));
                tracing::info!(
                    subscription,
                    version = short_version(&r.version),
                    shards = ?r.shards,
                    "a rollout runs: its shards switch to its version at their next batch"
                );
            }
            Err(e) => {
                tracing::error!(
                    subscription,
                    version = short_version(&r.version),
                    "this instance cannot run the rollout's version; its shards keep the fleet's: {e}"
                );
                *target.canary_refused.lock().expect("deployer poisoned") =
                    Some(r.canary_id.clone());
            }
        }
        self.changed.notify_one();
    }

    /// Records (`Some`) or clears (`None`) the refusal of a rollout or the fleet's shadow, for
    /// the heartbeat.
    pub(super) fn trial_refused(&self, target: &Target, trial: Trial, refusal: Option<Refusal>) {
        let mut refused = target.refused_trial.lock().expect("deployer poisoned");
        let changed = match refusal {
            Some(r) => refused.insert(trial, r.clone()) != Some(r),
            None => refused.remove(&trial).is_some(),
        };
        if changed {
            self.changed.notify_one();
        }
    }

    /// The rollout and the shadow each subscription refuses here, by subscription.
    pub fn trial_refusals(&self) -> BTreeMap<String, Vec<Refusal>> {
        self.targets
            .iter()
            .filter_map(|(name, t)| {
                let refused = t.refused_trial.lock().expect("deployer poisoned");
                let all: Vec<Refusal> = refused.values().cloned().collect();
                (!all.is_empty()).then(|| (name.clone(), all))
            })
            .collect()
    }

    /// Each subscription's shadow comparison on this instance, by subscription.
    pub fn shadow_counts(&self) -> BTreeMap<String, crate::status::fleet::ShadowCounts> {
        self.targets
            .iter()
            .filter_map(|(name, t)| {
                let r = t.slot.shadow().1?.report();
                let counts = crate::status::fleet::ShadowCounts {
                    version: r.version,
                    agree: r.agree,
                    differ: r.differ,
                    trapped: r.trapped,
                    timed_out: r.timed_out,
                    skipped: r.skipped,
                    batches_dropped: r.batches_dropped,
                    http_answer: r.http_answer,
                };
                Some((name.clone(), counts))
            })
            .collect()
    }

    /// What both arms of each running rollout did on this instance, by subscription.
    pub fn canary_arms(&self) -> BTreeMap<String, CanaryArms> {
        self.targets
            .iter()
            .filter_map(|(name, t)| {
                let c = t.slot.canary()?;
                let arms = CanaryArms {
                    canary_id: c.id.clone(),
                    canary: c.canary.arm(),
                    base: c.base.arm(),
                };
                Some((name.clone(), arms))
            })
            .collect()
    }
}
