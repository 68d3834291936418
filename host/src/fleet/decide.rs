//! Deciding a running rollout: the instance that holds the lease of the rollout's first shard
//! does it (whoever takes that shard over takes the decisions over; a decision is a conditional
//! write, so a lease moving mid-decision never makes two). Only it reads the roster: at every
//! poll it sums both arms over the live heartbeats of this rollout; the first rule broken rolls
//! it back; a window passed clean, with enough records on both arms to judge, promotes it.

use super::Fleet;
use crate::canary::rules::{AbortOn, Arm, MIN_RECORDS};
use crate::fleet_table::{Rollout, RolloutState};
use crate::lease::now_ms;

/// The shard whose lease holder decides `r`.
pub fn decider_shard(r: &Rollout) -> Option<&str> {
    r.shards.iter().min().map(String::as_str)
}

/// Decides `rollout` (read at `revision`) of `subscription` if the time has come; called by the
/// instance (`me`) that holds [`decider_shard`].
pub async fn rollout(fleet: &Fleet, me: &str, subscription: &str, revision: u64, r: &Rollout) {
    if let Err(e) = fleet.trust_rollout(subscription, r) {
        // No instance of this fleet runs it: end it now rather than let it stand as running.
        let reason = format!("refused: {e}");
        let by = format!("{me} (decider)");
        match fleet
            .decide(
                subscription,
                revision,
                r,
                RolloutState::Aborted,
                &reason,
                &by,
            )
            .await
        {
            Ok(_) => tracing::warn!(subscription, "rollout aborted: {reason}"),
            Err(e) => tracing::error!(subscription, "cannot write the rollout's decision: {e}"),
        }
        return;
    }
    let report = match fleet.report(&[]).await {
        Ok(report) => report,
        Err(e) => {
            tracing::warn!(
                subscription,
                "cannot read the roster to decide the rollout: {e}"
            );
            return;
        }
    };
    let live: Vec<_> = report.instances.iter().filter(|i| i.live).collect();
    let (mut canary, mut base) = (Arm::default(), Arm::default());
    for instance in &live {
        let arms = instance
            .heartbeat
            .subscriptions
            .get(subscription)
            .and_then(|running| running.canary.as_ref())
            .filter(|a| a.canary_id == r.canary_id);
        if let Some(a) = arms {
            canary.add(&a.canary);
            base.add(&a.base);
        }
    }
    let Some((state, reason)) = verdict(r, &canary, &base, now_ms()) else {
        return;
    };
    let by = format!("{me} (decider)");
    match fleet
        .decide(subscription, revision, r, state, &reason, &by)
        .await
    {
        Ok(true) => tracing::warn!(subscription, state = ?state, "rollout decided: {reason}"),
        Ok(false) => tracing::info!(subscription, "the rollout was decided elsewhere meanwhile"),
        Err(e) => tracing::error!(subscription, "cannot write the rollout's decision: {e}"),
    }
}

/// What `r` comes to with these arms at `now`: aborted at the first rule broken, promoted once
/// its window passed with [`MIN_RECORDS`] on both arms, or nothing yet.
pub fn verdict(r: &Rollout, canary: &Arm, base: &Arm, now: u64) -> Option<(RolloutState, String)> {
    let rules = match AbortOn::parse(&r.abort_on) {
        Ok(rules) => rules,
        Err(e) => {
            return Some((
                RolloutState::Aborted,
                format!("its rules do not parse: {e}"),
            ));
        }
    };
    if let Some(breach) = rules.breach(canary, base) {
        return Some((RolloutState::Aborted, breach.to_string()));
    }
    let over = now >= r.started_at_ms.saturating_add(r.window_ms);
    if over && canary.records >= MIN_RECORDS && base.records >= MIN_RECORDS {
        let reason = format!(
            "the window passed clean: canary {} records ({} failed, {} retried), base {} ({} failed, {} retried)",
            canary.records, canary.failed, canary.retried, base.records, base.failed, base.retried
        );
        return Some((RolloutState::Promoted, reason));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout(window_ms: u64) -> Rollout {
        Rollout {
            canary_id: "c".into(),
            version: "a".repeat(64),
            size: 1,
            chunks: 1,
            upload: "u".into(),
            share_permille: 500,
            shards: vec!["s0".into()],
            started_at_ms: 1_000,
            window_ms,
            abort_on: "traps>1%".into(),
            started_by: "me".into(),
            state: RolloutState::Running,
            reason: None,
            decided_at_ms: None,
            decided_by: None,
            signed: None,
            promote: None,
        }
    }

    fn arm(records: u64, failed: u64) -> Arm {
        Arm {
            records,
            failed,
            ..Arm::default()
        }
    }

    #[test]
    fn a_breach_aborts_at_once_and_a_clean_window_promotes_at_its_end() {
        let r = rollout(10_000);
        let aborted = verdict(&r, &arm(100, 10), &arm(100, 0), 2_000).unwrap();
        assert_eq!(aborted.0, RolloutState::Aborted);
        assert!(aborted.1.contains("traps>1%"), "{}", aborted.1);
        assert_eq!(
            verdict(&r, &arm(100, 0), &arm(100, 0), 2_000),
            None,
            "in the window"
        );
        let promoted = verdict(&r, &arm(100, 0), &arm(100, 0), 11_000).unwrap();
        assert_eq!(promoted.0, RolloutState::Promoted);
        assert_eq!(
            verdict(&r, &arm(5, 0), &arm(100, 0), 11_000),
            None,
            "too few canary records to promote"
        );
    }
}
