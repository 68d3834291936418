//! What runs, as operators see it: one entry per subscription and shard, updated by the shard
//! workers after every batch. `status` and metrics read it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::settle::Counts;

/// The state of one shard of one subscription.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardStatus {
    pub owner: String,
    /// As stored in the lease table.
    pub checkpoint: Option<String>,
    pub millis_behind_latest: Option<u64>,
    pub handler_version: String,
    pub counts: Counts,
    /// The position of the held record that stops the checkpoint, if any.
    pub held_at: Option<String>,
    pub last_error: Option<String>,
    /// `reading`, `ended` (SHARD_END written), `held at end`, `stopped`, `lease lost`.
    pub state: String,
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
