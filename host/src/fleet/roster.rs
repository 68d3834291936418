//! The fleet's roster: every instance's heartbeat (what it runs, its shards, its last refusal),
//! written by that instance, read by `status` and `deploy --wait` ([`Fleet::report`]).

use super::{Fleet, FleetError};
use crate::lease::now_ms;
use crate::status::fleet::{DesiredReport, FleetReport, Heartbeat, InstanceReport};

impl Fleet {
    /// Writes this instance's heartbeat; answers every heartbeat in the roster. Heartbeats of
    /// instances gone for an hour are removed.
    pub async fn beat(&self, beat: &Heartbeat) -> Result<Vec<Heartbeat>, FleetError> {
        self.wrote(1);
        let text = serde_json::to_string(beat).expect("a heartbeat serializes");
        let entries = self.store.beat(&self.service, &beat.owner, &text).await?;
        let mut beats = Vec::new();
        for (owner, text) in entries {
            match serde_json::from_str::<Heartbeat>(&text) {
                Ok(b) if beat.beat_ms.saturating_sub(b.beat_ms) > FORGET_AFTER_MS => {
                    self.wrote(1);
                    self.store.forget(&self.service, &owner, &text).await?;
                }
                Ok(b) => beats.push(b),
                Err(e) => tracing::debug!(owner, "unreadable heartbeat in the roster: {e}"),
            }
        }
        Ok(beats)
    }

    /// Removes this instance's heartbeat (on a clean stop).
    pub async fn leave(&self, beat: &Heartbeat) -> Result<(), FleetError> {
        self.wrote(1);
        let text = serde_json::to_string(beat).expect("a heartbeat serializes");
        Ok(self.store.forget(&self.service, &beat.owner, &text).await?)
    }

    /// What `subscriptions` should run and what every instance runs, read from the table now.
    pub async fn report(&self, subscriptions: &[String]) -> Result<FleetReport, FleetError> {
        let mut desired = Vec::new();
        for name in subscriptions {
            desired.push(self.desired_report(name).await?);
        }
        self.read(1);
        let now = now_ms();
        let mut instances: Vec<InstanceReport> = self
            .store
            .roster(&self.service)
            .await?
            .into_iter()
            .filter_map(|(_, text)| serde_json::from_str::<Heartbeat>(&text).ok())
            .map(|heartbeat| InstanceReport {
                live: heartbeat.live(now),
                heartbeat,
            })
            .collect();
        instances.sort_by(|a, b| a.heartbeat.owner.cmp(&b.heartbeat.owner));
        Ok(FleetReport {
            service: self.service.clone(),
            desired,
            instances,
        })
    }
}

/// A heartbeat this old (ms) is removed from the roster by the next instance that writes one.
const FORGET_AFTER_MS: u64 = 3_600_000;

impl Fleet {
    /// What the desired row of `subscription` says, or why it cannot be used.
    async fn desired_report(&self, subscription: &str) -> Result<DesiredReport, FleetError> {
        let d = match self.desired(subscription).await {
            Ok(d) => d,
            Err(FleetError::BadRow { source, .. }) => {
                return Ok(DesiredReport {
                    subscription: subscription.to_owned(),
                    version: source.version.clone(),
                    generation: source.generation.unwrap_or(0),
                    problem: Some(source.to_string()),
                    ..DesiredReport::default()
                });
            }
            Err(e) => return Err(e),
        };
        Ok(DesiredReport {
            subscription: subscription.to_owned(),
            version: d.as_ref().map(|d| d.component.version.clone()),
            generation: d.as_ref().map_or(0, |d| d.generation),
            deployed_by: d.as_ref().map(|d| d.deployed_by.clone()),
            deployed_at_ms: d.as_ref().map(|d| d.deployed_at_ms),
            deploy_id: d.as_ref().map(|d| d.deploy_id.clone()),
            signed_by: d
                .as_ref()
                .and_then(|d| d.signed.as_ref().map(|s| s.key.clone())),
            previous_version: d.and_then(|d| d.previous.map(|p| p.version)),
            problem: None,
        })
    }
}
