//! What runs, as operators see it: one entry per subscription and shard, updated by the shard
//! workers after every batch. `status` and metrics read it.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

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

/// Shared, cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct StatusBoard {
    shards: Arc<RwLock<BTreeMap<(String, String), ShardStatus>>>,
}

impl StatusBoard {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&self, subscription: &str, shard_id: &str, f: impl FnOnce(&mut ShardStatus)) {
        let mut shards = self.shards.write().expect("status poisoned");
        f(shards
            .entry((subscription.to_owned(), shard_id.to_owned()))
            .or_default());
    }

    /// Every shard, ordered by subscription and shard id.
    pub fn snapshot(&self) -> Vec<(String, String, ShardStatus)> {
        self.shards
            .read()
            .expect("status poisoned")
            .iter()
            .map(|((sub, shard), s)| (sub.clone(), shard.clone(), s.clone()))
            .collect()
    }

    /// Records settled so far across every shard of a subscription.
    pub fn settled(&self, subscription: &str) -> u64 {
        self.totals(subscription).settled
    }

    /// Delivered, settled and held records across every shard of a subscription.
    pub fn totals(&self, subscription: &str) -> Counts {
        let shards = self.shards.read().expect("status poisoned");
        shards
            .iter()
            .filter(|((sub, _), _)| sub == subscription)
            .fold(Counts::default(), |mut acc, (_, s)| {
                acc.delivered += s.counts.delivered;
                acc.settled += s.counts.settled;
                acc.held += s.counts.held;
                acc
            })
    }
}
