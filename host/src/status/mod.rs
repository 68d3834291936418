//! What runs, as operators see it: one entry per subscription and shard, updated by the shard
//! workers after every batch. `GET /status` serves it as a [`Report`]; `shardhost status`
//! renders one.

pub mod fleet;
pub mod summary;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

pub use crate::settle::Counts;
pub use summary::Totals;

/// The state of one shard of one subscription.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShardStatus {
    pub owner: String,
    /// As stored in the lease table.
    pub checkpoint: Option<String>,
    pub millis_behind_latest: Option<u64>,
    pub handler_version: String,
    pub counts: Counts,
    /// The position of the held record that stops the checkpoint, if any.
    pub held_at: Option<String>,
    /// That record's partition key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_key: Option<String>,
    /// Since when this instance holds it (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_since_ms: Option<u64>,
    /// The first record waiting to be called again after `retry-after` (no retry cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrying: Option<Retrying>,
    pub last_error: Option<String>,
    pub state: ShardState,
}

/// A record answered `retry-after` without a retry cap, waiting in its shard to be called
/// again; the checkpoint waits in front of it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Retrying {
    /// Its position (sequence number).
    pub at: String,
    /// Its partition key.
    pub key: String,
    /// The calls it had so far.
    pub attempts: u32,
    /// When it is called next (ms since the Unix epoch).
    pub next_try_ms: u64,
    /// How many records of the shard wait so.
    pub records: usize,
}

/// What a shard's reader is doing, as `status` and `/status` show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ShardState {
    /// Leased, its reader not started yet (shown as `-`).
    #[default]
    #[serde(rename = "")]
    Starting,
    #[serde(rename = "reading")]
    Reading,
    /// Records waiting (for a retry-after delay, a publish, a call again) and those read behind
    /// them fill the in-flight limit: the shard does not read until they settle.
    #[serde(rename = "paused (in-flight limit)")]
    PausedInFlight,
    #[serde(rename = "stopped")]
    Stopped,
    /// Read to its end and SHARD_END written.
    #[serde(rename = "ended")]
    Ended,
    /// Read to its end, but a held record keeps SHARD_END from being written.
    #[serde(rename = "held at end")]
    HeldAtEnd,
    #[serde(rename = "lease lost")]
    LeaseLost,
    /// Its worker failed (see `last_error`).
    #[serde(rename = "failed")]
    Failed,
    /// Its lease row is unusable (see `last_error`); not read.
    #[serde(rename = "refused")]
    Refused,
}

impl ShardState {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardState::Starting => "-",
            ShardState::Reading => "reading",
            ShardState::PausedInFlight => "paused (in-flight limit)",
            ShardState::Stopped => "stopped",
            ShardState::Ended => "ended",
            ShardState::HeldAtEnd => "held at end",
            ShardState::LeaseLost => "lease lost",
            ShardState::Failed => "failed",
            ShardState::Refused => "refused",
        }
    }
}

impl ShardState {
    /// Whether a shard in this state is leased by the instance showing it.
    pub fn holds_lease(self) -> bool {
        matches!(
            self,
            ShardState::Starting
                | ShardState::Reading
                | ShardState::PausedInFlight
                | ShardState::HeldAtEnd
        )
    }
}

impl std::fmt::Display for ShardState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One shard's entry on the board; its worker updates it without touching the board's map.
#[derive(Clone, Debug, Default)]
pub struct ShardCell(Arc<Mutex<ShardStatus>>);

impl ShardCell {
    pub fn update(&self, f: impl FnOnce(&mut ShardStatus)) {
        f(&mut self.0.lock().expect("status poisoned"));
    }

    pub fn get(&self) -> ShardStatus {
        self.0.lock().expect("status poisoned").clone()
    }
}

/// Shared, cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct StatusBoard {
    shards: Arc<RwLock<BTreeMap<(String, String), ShardCell>>>,
    /// Subscriptions whose coordinator or a shard worker failed, with why: the host is unhealthy.
    failures: Arc<Mutex<Vec<Failure>>>,
}

/// A task of the host that failed (a panic in a coordinator or shard worker).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    pub subscription: String,
    pub shard: Option<String>,
    pub reason: String,
}

impl StatusBoard {
    pub fn new() -> Self {
        Self::default()
    }

    /// The entry of one shard, made on first use.
    pub fn shard(&self, subscription: &str, shard_id: &str) -> ShardCell {
        let key = (subscription.to_owned(), shard_id.to_owned());
        if let Some(cell) = self.shards.read().expect("status poisoned").get(&key) {
            return cell.clone();
        }
        self.shards
            .write()
            .expect("status poisoned")
            .entry(key)
            .or_default()
            .clone()
    }

    /// Every shard, ordered by subscription and shard id.
    pub fn snapshot(&self) -> Vec<(String, String, ShardStatus)> {
        self.shards
            .read()
            .expect("status poisoned")
            .iter()
            .map(|((sub, shard), s)| (sub.clone(), shard.clone(), s.get()))
            .collect()
    }

    /// Records a failed task: from now on the host is unhealthy.
    pub fn fail(&self, failure: Failure) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(failure);
    }

    /// Every failed task so far (empty while the host is healthy).
    pub fn failures(&self) -> Vec<Failure> {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Delivered, settled and held records across every shard of a subscription.
    pub fn totals(&self, subscription: &str) -> Counts {
        let shards = self.shards.read().expect("status poisoned");
        shards
            .iter()
            .filter(|((sub, _), _)| sub == subscription)
            .fold(Counts::default(), |mut acc, (_, cell)| {
                let s = cell.0.lock().expect("status poisoned");
                acc.delivered += s.counts.delivered;
                acc.settled += s.counts.settled;
                acc.held += s.counts.held;
                acc
            })
    }
}

/// The whole host, as `GET /status` answers it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// This instance's owner id in the lease table.
    pub owner: String,
    pub subscriptions: Vec<SubscriptionReport>,
    /// Tasks that failed: a host with any is unhealthy (`/healthz` answers 503) and stops.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<Failure>,
    /// With a DynamoDB lease table: what the fleet should run and what every instance runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<fleet::FleetReport>,
}

/// One subscription: its handler and the shards this instance has read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SubscriptionReport {
    pub name: String,
    pub stream: String,
    /// How its shards are read: `polling`, or `fan-out (consumer NAME)`.
    #[serde(default)]
    pub read: String,
    /// The version new batches run (sha256 of the component).
    pub handler_version: String,
    /// The version `deploy --rollback` would restore.
    pub previous_version: Option<String>,
    /// Why the last deploy, rollback or reload was refused, if it was.
    pub last_deploy_error: Option<String>,
    /// The candidate in shadow (`deploy --shadow`), and how its answers compare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<crate::shadow::ShadowReport>,
    /// How its records were answered since this instance started (absent from hosts before
    /// these were reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<Totals>,
    pub shards: Vec<ShardReport>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShardReport {
    pub shard_id: String,
    #[serde(flatten)]
    pub status: ShardStatus,
}

impl StatusBoard {
    /// The shards of one subscription, ordered by shard id.
    pub fn shards_of(&self, subscription: &str) -> Vec<ShardReport> {
        self.snapshot()
            .into_iter()
            .filter(|(sub, _, _)| sub == subscription)
            .map(|(_, shard_id, status)| ShardReport { shard_id, status })
            .collect()
    }
}
