//! The fleet's roster: every instance's heartbeat (what it runs, its shards, its last refusal),
//! in a row of its own that only that instance writes, read by `status` and `deploy --wait`
//! ([`Fleet::report`]). A heartbeat is one small write whatever the size of the fleet; the row
//! of an instance that stopped beating counts until [`Heartbeat::expires_ms`], shown as not
//! live from three missed beats on (`Heartbeat::live`).
//!
//! Anyone who can write the table can write a row, so a row is believed only once [`check`]ed,
//! like a desired row: bounded texts, versions that are sha256s, counts in range, and the owner
//! its key names. A row that fails is skipped (it counts for nothing: not in `status`, not in a
//! rollout's verdict) and named in the report's `unreadable`.

mod check;

use super::{Fleet, FleetError};
use crate::lease::now_ms;
use crate::status::fleet::{DesiredReport, FleetReport, Heartbeat, InstanceReport, UnreadableRow};
use check::{as_written, check, shown};

impl Fleet {
    /// Writes this instance's heartbeat row (replacing its last one).
    pub async fn beat(&self, beat: &Heartbeat) -> Result<(), FleetError> {
        self.wrote(1);
        let expires_at = beat.expires_ms().div_ceil(1_000);
        Ok(self
            .table
            .beat(&self.service, &beat.owner, &as_written(beat), expires_at)
            .await?)
    }

    /// Removes this instance's heartbeat row (on a clean stop), unless it holds a later one.
    pub async fn leave(&self, beat: &Heartbeat) -> Result<(), FleetError> {
        self.wrote(1);
        Ok(self
            .table
            .forget(&self.service, &beat.owner, &as_written(beat))
            .await?)
    }

    /// What `subscriptions` should run and what every instance runs, read from the table now;
    /// rows that do not [`check`] are skipped and named.
    pub async fn report(&self, subscriptions: &[String]) -> Result<FleetReport, FleetError> {
        let mut desired = Vec::new();
        for name in subscriptions {
            desired.push(self.desired_report(name).await?);
        }
        let roster = self.table.roster(&self.service).await?;
        self.read(u64::from(roster.pages));
        let now = now_ms();
        let (mut instances, mut unreadable) = (Vec::new(), Vec::new());
        for row in &roster.rows {
            let read = row
                .heartbeat
                .as_deref()
                .ok_or_else(|| "it holds no heartbeat text".to_owned())
                .and_then(|text| {
                    serde_json::from_str::<Heartbeat>(text)
                        .map_err(|e| format!("its heartbeat does not parse: {e}"))
                })
                .and_then(|beat| {
                    check(&beat)?;
                    if row.is_of(&self.service, &beat.owner) {
                        Ok(beat)
                    } else {
                        Err("its heartbeat names another owner than its key".to_owned())
                    }
                });
            match read {
                Ok(heartbeat) => instances.push(InstanceReport {
                    live: heartbeat.live(now),
                    heartbeat,
                }),
                Err(problem) => {
                    let row = shown(row.owner_part(&self.service));
                    let problem = shown(&problem);
                    tracing::debug!(row, "an instance row of the roster is skipped: {problem}");
                    unreadable.push(UnreadableRow { row, problem });
                }
            }
        }
        instances.sort_by(|a, b| a.heartbeat.owner.cmp(&b.heartbeat.owner));
        unreadable.sort_by(|a, b| a.row.cmp(&b.row));
        Ok(FleetReport {
            table: self.table.table_name().to_owned(),
            service: self.service.clone(),
            desired,
            instances,
            unreadable,
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
