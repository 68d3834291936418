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
            let d = self.desired(name).await?;
            desired.push(DesiredReport {
                subscription: name.clone(),
                version: d.as_ref().map(|d| d.component.version.clone()),
                generation: d.as_ref().map_or(0, |d| d.generation),
                deployed_by: d.as_ref().map(|d| d.deployed_by.clone()),
                deployed_at_ms: d.as_ref().map(|d| d.deployed_at_ms),
                previous_version: d.and_then(|d| d.previous.map(|p| p.version)),
            });
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
            service: self.service.clone(),
            desired,
            instances,
        })
    }
}
