//! The fleet's roster: every instance's heartbeat (what it runs, its shards, its last refusal),
//! in a row of its own that only that instance writes, read by `status` and `deploy --wait`
//! ([`Fleet::report`]). A heartbeat is one small write whatever the size of the fleet; the row
//! of an instance that stopped beating counts until [`Heartbeat::expires_ms`], shown as not
//! live from three missed beats on (`Heartbeat::live`).

use super::{Fleet, FleetError};
use crate::lease::now_ms;
use crate::status::fleet::{DesiredReport, FleetReport, Heartbeat, InstanceReport};

impl Fleet {
    /// Writes this instance's heartbeat row (replacing its last one).
    pub async fn beat(&self, beat: &Heartbeat) -> Result<(), FleetError> {
        self.wrote(1);
        let text = serde_json::to_string(beat).expect("a heartbeat serializes");
        let expires_at = beat.expires_ms().div_ceil(1_000);
        Ok(self
            .store
            .beat(&self.service, &beat.owner, &text, expires_at)
            .await?)
    }

    /// Removes this instance's heartbeat row (on a clean stop), unless it holds a later one.
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
        let roster = self.store.roster(&self.service).await?;
        self.read(u64::from(roster.pages));
        let now = now_ms();
        let mut instances: Vec<InstanceReport> = roster
            .heartbeats
            .iter()
            .filter_map(|text| match serde_json::from_str::<Heartbeat>(text) {
                Ok(heartbeat) => Some(heartbeat),
                Err(e) => {
                    tracing::debug!("unreadable heartbeat in the roster: {e}");
                    None
                }
            })
            .map(|heartbeat| InstanceReport {
                live: heartbeat.live(now),
                heartbeat,
            })
            .collect();
        instances.sort_by(|a, b| a.heartbeat.owner.cmp(&b.heartbeat.owner));
        Ok(FleetReport {
            table: self.store.table_name().to_owned(),
            service: self.service.clone(),
            desired,
            instances,
        })
    }
}

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
        let rollout = match self.rollout(subscription).await {
            Ok(r) => r.map(|(_, r)| r),
            Err(e) => {
                tracing::debug!(subscription, "status: the rollout row: {e}");
                None
            }
        };
        let shadow = match self.shadow(subscription).await {
            Ok(s) => s.map(|(_, s)| s),
            Err(e) => {
                tracing::debug!(subscription, "status: the shadow row: {e}");
                None
            }
        };
        Ok(DesiredReport {
            rollout,
            shadow,
            previous_signed: d.as_ref().and_then(|d| d.previous_signed.clone()),
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
