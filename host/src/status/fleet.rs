//! The fleet as operators see it: what each subscription should run (the desired state in the
//! lease table) and what every live instance runs (its heartbeat). `GET /status` carries it
//! when the host keeps its leases in DynamoDB; `shardhost status --config` reads it straight
//! from the table; `deploy --wait` waits on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How many heartbeat periods an instance may miss before it counts as gone.
pub const MISSED_BEATS: u64 = 3;

/// How many heartbeat periods an instance's row counts after its last heartbeat (shown as not
/// live from [`MISSED_BEATS`] on), and at least how long (ms): long enough for an operator to see
/// that an instance stopped answering, short enough that a crashed one leaves `status` soon.
pub const EXPIRES_AFTER_BEATS: u64 = 10;
pub const EXPIRES_AFTER_AT_LEAST_MS: u64 = 5 * 60_000;

/// One instance's heartbeat, as it writes it into the lease table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub owner: String,
    /// Where its admin API listens, if it has one.
    #[serde(default)]
    pub admin: Option<String>,
    /// When it started, and when it wrote this (ms since the Unix epoch).
    pub started_ms: u64,
    pub beat_ms: u64,
    /// How often it writes one.
    pub beat_every_ms: u64,
    /// What it runs, by subscription.
    pub subscriptions: BTreeMap<String, Running>,
}

/// What one instance runs for one subscription.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    pub version: String,
    /// The last fleet generation it applied (or refused); 0: none yet.
    pub generation: u64,
    /// Shards it holds.
    pub shards: usize,
    /// The last desired version it refused, if the one it runs is not that one.
    #[serde(default)]
    pub refused: Option<Refusal>,
    /// While a rollout runs: what both arms did here since it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryArms>,
    /// While a shadow runs here: its version and how its answers compared so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowCounts>,
    /// The rollout and the fleet shadow it refuses to run (with trusted keys: ones no trusted
    /// key signed), while their rows name them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_trials: Vec<Refusal>,
}

/// A shadow's comparison on one instance.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowCounts {
    pub version: String,
    pub agree: u64,
    pub differ: u64,
    pub trapped: u64,
    pub timed_out: u64,
    pub skipped: u64,
    pub batches_dropped: u64,
    /// What its unsent HTTP requests are answered when told (`201 (stubbed)`); none: 503.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_answer: Option<String>,
}

/// What the shards of a rollout (`canary`) and the others (`base`) did on one instance.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryArms {
    pub canary_id: String,
    pub canary: crate::canary::rules::Arm,
    pub base: crate::canary::rules::Arm,
}

/// A desired version an instance would not run, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub version: String,
    pub generation: u64,
    pub error: String,
}

impl Heartbeat {
    /// Whether it wrote a heartbeat recently enough, at `now_ms`.
    pub fn live(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.beat_ms) <= self.beat_every_ms.saturating_mul(MISSED_BEATS)
    }

    /// When its row stops being listed (ms since the Unix epoch): [`EXPIRES_AFTER_BEATS`]
    /// periods after it was written, at least [`EXPIRES_AFTER_AT_LEAST_MS`].
    pub fn expires_ms(&self) -> u64 {
        let after = self
            .beat_every_ms
            .saturating_mul(EXPIRES_AFTER_BEATS)
            .max(EXPIRES_AFTER_AT_LEAST_MS);
        self.beat_ms.saturating_add(after)
    }
}

/// What one subscription should run, fleet-wide.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredReport {
    pub subscription: String,
    /// `None` before the first fleet deploy: each instance runs its config file's handler.
    pub version: Option<String>,
    pub generation: u64,
    pub deployed_by: Option<String>,
    pub deployed_at_ms: Option<u64>,
    /// What `deploy --rollback` restores.
    pub previous_version: Option<String>,
    /// The row's lineage (see `fleet_table::Desired::deploy_id`).
    #[serde(default)]
    pub deploy_id: Option<String>,
    /// The public key the deploy was signed with, when it was signed.
    #[serde(default)]
    pub signed_by: Option<String>,
    /// Why the row cannot be used, when it cannot (every instance refuses it).
    #[serde(default)]
    pub problem: Option<String>,
    /// The subscription's last rollout (`deploy --canary`), running or decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<crate::fleet_table::Rollout>,
    /// The signature the previous version was deployed under (a signed rollback re-verifies it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_signed: Option<crate::signing::Intent>,
    /// The fleet's shadow of the subscription (`deploy --shadow`), on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<crate::fleet_table::FleetShadow>,
}

/// The whole fleet of one service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetReport {
    /// The lease table (signatures are bound to it).
    #[serde(default)]
    pub table: String,
    /// `[host] name`.
    pub service: String,
    pub desired: Vec<DesiredReport>,
    /// Every instance whose heartbeat row has not expired, live or not.
    pub instances: Vec<InstanceReport>,
    /// Instance rows skipped because they do not read as a heartbeat (not JSON, out of bounds,
    /// under another instance's key): anyone who can write the table can write one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableRow>,
}

/// An instance row of the roster that was skipped, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableRow {
    /// What its key names after the service (the owner it was written for), cut and escaped.
    pub row: String,
    pub problem: String,
}

/// One instance's last heartbeat and whether it is live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceReport {
    #[serde(flatten)]
    pub heartbeat: Heartbeat,
    pub live: bool,
}

/// Where a rollout of one version stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// Live instances that run it.
    pub running: Vec<String>,
    /// Live instances that refused it, with why.
    pub refused: Vec<(String, String)>,
    /// Live instances that do neither yet.
    pub pending: Vec<String>,
}

impl Rollout {
    /// Every live instance runs the version (none refused, none pending).
    pub fn converged(&self) -> bool {
        self.refused.is_empty() && self.pending.is_empty()
    }
}

impl FleetReport {
    /// The desired state of `subscription`.
    pub fn desired_of(&self, subscription: &str) -> Option<&DesiredReport> {
        self.desired.iter().find(|d| d.subscription == subscription)
    }

    /// The highest generation the desired row of `subscription` or any live instance shows
    /// (the next deploy writes one past it).
    pub fn highest_generation(&self, subscription: &str) -> u64 {
        let row = self.desired_of(subscription).map_or(0, |d| d.generation);
        let instances = self
            .instances
            .iter()
            .filter(|i| i.live)
            .filter_map(|i| i.heartbeat.subscriptions.get(subscription))
            .flat_map(|r| [Some(r.generation), r.refused.as_ref().map(|f| f.generation)])
            .flatten()
            .filter(|g| *g <= crate::fleet_table::MAX_GENERATION);
        instances.fold(row, u64::max)
    }

    /// Where the rollout of `version` at `generation` stands for `subscription`, over the live
    /// instances that run the subscription.
    pub fn rollout(&self, subscription: &str, version: &str, generation: u64) -> Rollout {
        let mut rollout = Rollout::default();
        for i in self.instances.iter().filter(|i| i.live) {
            let Some(running) = i.heartbeat.subscriptions.get(subscription) else {
                continue;
            };
            let owner = i.heartbeat.owner.clone();
            match &running.refused {
                _ if running.version == version => rollout.running.push(owner),
                Some(r) if r.version == version && r.generation >= generation => {
                    rollout.refused.push((owner, r.error.clone()))
                }
                _ => rollout.pending.push(owner),
            }
        }
        rollout
    }

    /// Whether every live instance runs what `subscription` should run (with no desired state
    /// yet: whether they all run one version).
    pub fn converged(&self, subscription: &str) -> bool {
        match self.desired_of(subscription) {
            Some(DesiredReport {
                version: Some(v),
                generation,
                ..
            }) => self.rollout(subscription, v, *generation).converged(),
            _ => {
                let mut versions = self
                    .instances
                    .iter()
                    .filter(|i| i.live)
                    .filter_map(|i| i.heartbeat.subscriptions.get(subscription))
                    .map(|r| &r.version);
                let first = versions.next();
                versions.all(|v| Some(v) == first)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(
        owner: &str,
        version: &str,
        refused: Option<(&str, u64)>,
        live: bool,
    ) -> InstanceReport {
        let running = Running {
            version: version.into(),
            generation: 2,
            shards: 1,
            refused: refused.map(|(v, g)| Refusal {
                version: v.into(),
                generation: g,
                error: "too big".into(),
            }),
            canary: None,
            shadow: None,
            refused_trials: Vec::new(),
        };
        InstanceReport {
            heartbeat: Heartbeat {
                owner: owner.into(),
                subscriptions: [("s".to_owned(), running)].into(),
                ..Heartbeat::default()
            },
            live,
        }
    }

    #[test]
    fn a_rollout_counts_live_instances_only_and_names_refusals() {
        let report = FleetReport {
            table: "leases".into(),
            service: "svc".into(),
            desired: vec![DesiredReport {
                subscription: "s".into(),
                version: Some("new".into()),
                generation: 2,
                ..DesiredReport::default()
            }],
            instances: vec![
                instance("a", "new", None, true),
                instance("b", "old", Some(("new", 2)), true),
                instance("c", "old", Some(("new", 1)), true),
                instance("dead", "old", None, false),
            ],
            unreadable: Vec::new(),
        };
        let r = report.rollout("s", "new", 2);
        assert_eq!(r.running, ["a"]);
        assert_eq!(r.refused, [("b".to_owned(), "too big".to_owned())]);
        assert_eq!(r.pending, ["c"]);
        assert!(!report.converged("s"));
    }

    #[test]
    fn an_instance_is_live_for_three_missed_beats() {
        let beat = Heartbeat {
            beat_ms: 1_000,
            beat_every_ms: 10_000,
            ..Heartbeat::default()
        };
        assert!(beat.live(31_000));
        assert!(!beat.live(31_001));
    }

    #[test]
    fn a_row_expires_after_ten_periods_and_never_within_five_minutes() {
        let beat = |every_ms| Heartbeat {
            beat_ms: 1_000,
            beat_every_ms: every_ms,
            ..Heartbeat::default()
        };
        assert_eq!(beat(10_000).expires_ms(), 1_000 + 300_000);
        assert_eq!(beat(1_000).expires_ms(), 1_000 + 300_000);
        assert_eq!(beat(60_000).expires_ms(), 1_000 + 600_000);
    }
}
