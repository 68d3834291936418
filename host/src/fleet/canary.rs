//! Rollouts in the lease table (see [`crate::canary`]): starting one, reading it, and deciding
//! it. A decision is one conditional write on the rollout row; promoting is first a deploy of
//! the rollout's version (one generation past the desired row, as any deploy), then that write.

use super::{Fleet, FleetError, Intent, Sign, rollout_statement};
use crate::canary::choose;
use crate::canary::rules::AbortOn;
use crate::fleet_table::{Rollout, RolloutState, new_id};
use crate::lease::now_ms;

/// What a rollout starts with.
pub struct CanaryPlan<'a> {
    pub share_permille: u32,
    pub window_ms: u64,
    pub abort_on: &'a str,
    /// The stream's open shards now.
    pub shards: Vec<String>,
    pub by: &'a str,
}

impl Fleet {
    /// The rollout of `subscription` and its revision; `None` when none was ever started.
    pub async fn rollout(&self, subscription: &str) -> Result<Option<(u64, Rollout)>, FleetError> {
        self.read(1);
        let read = self.table.rollout(&self.service, subscription).await?;
        match (read.revision, read.doc) {
            (Some(revision), Some(Ok(rollout))) => Ok(Some((revision, rollout))),
            (_, Some(Err(why))) => Err(FleetError::BadRollout {
                subscription: subscription.to_owned(),
                why,
            }),
            _ => Ok(None),
        }
    }

    /// Starts a rollout of `bytes` (validated by the caller) on a share of the shards, signed as
    /// `sign` says (with a key: the rollout, and its promotion as the desired row's next
    /// generation).
    pub async fn start_canary(
        &self,
        subscription: &str,
        bytes: &[u8],
        plan: CanaryPlan<'_>,
        sign: &Sign<'_>,
    ) -> Result<Rollout, FleetError> {
        let refused = |why: String| FleetError::CanaryRefused {
            subscription: subscription.to_owned(),
            why,
        };
        let version = crate::version::version_of(bytes);
        self.signs_trial(subscription, "a rollout", &version, sign)?;
        AbortOn::parse(plan.abort_on).map_err(|e| refused(format!("--abort-on: {e}")))?;
        self.fits(subscription, bytes.len())?;
        self.read(1);
        let read = self.table.rollout(&self.service, subscription).await?;
        if let Some(Ok(r)) = &read.doc
            && r.state == RolloutState::Running
        {
            return Err(refused(format!(
                "a rollout of {} is running (started by {}); wait for its decision",
                crate::version::short_version(&r.version),
                r.started_by
            )));
        }
        let canary_id = new_id();
        let shards = choose(&canary_id, &plan.shards, plan.share_permille).ok_or_else(|| {
            refused("a rollout needs at least two shards: one to try, one to compare with".into())
        })?;
        let promote = match sign {
            Sign::Key(key) => Some(self.promotion(subscription, &version, key).await?),
            _ => None,
        };
        let stored = self.store_bytes(subscription, bytes).await?;
        let mut rollout = Rollout {
            canary_id,
            version: stored.version.clone(),
            size: stored.size,
            chunks: stored.chunks,
            upload: stored.upload.clone().unwrap_or_default(),
            share_permille: plan.share_permille,
            shards,
            started_at_ms: now_ms(),
            window_ms: plan.window_ms,
            abort_on: plan.abort_on.to_owned(),
            started_by: plan.by.chars().take(256).collect(),
            state: RolloutState::Running,
            reason: None,
            decided_at_ms: None,
            decided_by: None,
            signed: None,
            promote,
        };
        if let Sign::Key(key) = sign {
            rollout.signed = Some(key.sign(&rollout_statement(self.scope(subscription), &rollout)));
        }
        self.wrote(1);
        let written = self
            .table
            .set_rollout(&self.service, subscription, &rollout, read.revision)
            .await?;
        if !written {
            self.remove(subscription, &stored).await;
            return Err(FleetError::Contended(subscription.to_owned()));
        }
        Ok(rollout)
    }

    /// Ends the rollout read at `revision` as `state`, saying why; whether this write decided
    /// it (another decision may have come first). Its parts are removed once decided: a
    /// promoted version was deployed with parts of its own.
    pub async fn decide(
        &self,
        subscription: &str,
        revision: u64,
        rollout: &Rollout,
        state: RolloutState,
        reason: &str,
        by: &str,
    ) -> Result<bool, FleetError> {
        let mut state = state;
        let mut reason = reason.to_owned();
        if state == RolloutState::Promoted {
            let bytes = self.fetch(subscription, &rollout.component()).await?;
            let by = format!("{by} (rollout {} promoted)", rollout.canary_id);
            let sign = match &rollout.promote {
                Some(intent) => Sign::Made(intent.clone()),
                None => Sign::No,
            };
            match self.publish(subscription, &bytes, None, &by, &sign).await {
                Ok(_) => {}
                // Its signature no longer fits (another deploy came between) or was never
                // made on a fleet that needs one: nobody signed this promotion.
                Err(e @ (FleetError::Untrusted { .. } | FleetError::Moved { .. })) => {
                    state = RolloutState::Aborted;
                    reason = format!("its window passed clean, but it cannot be promoted: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        let mut decided = rollout.clone();
        decided.state = state;
        decided.reason = Some(reason.chars().take(1024).collect());
        decided.decided_at_ms = Some(now_ms());
        decided.decided_by = Some(by.chars().take(256).collect());
        self.wrote(1);
        let written = self
            .table
            .set_rollout(&self.service, subscription, &decided, Some(revision))
            .await?;
        if written {
            self.remove(subscription, &rollout.component()).await;
        }
        Ok(written)
    }
}

impl Fleet {
    /// The deploy signature a signed rollout's promotion writes: `version` as the desired row's
    /// next generation, of its lineage.
    async fn promotion(
        &self,
        subscription: &str,
        version: &str,
        key: &crate::signing::SignKey,
    ) -> Result<Intent, FleetError> {
        let (_, now) = self.current(subscription).await?;
        let (generation, deploy_id) = self.next(subscription, now.as_ref(), &Sign::No).await?;
        let signed = key.sign(&self.statement(subscription, version, generation, &deploy_id));
        Ok(Intent {
            generation,
            deploy_id,
            signed,
        })
    }
}
