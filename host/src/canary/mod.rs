//! Progressive rollouts: `deploy --config CFG --canary 10% SUB FILE.wasm` runs the new version
//! on a share of the shards (whole shards, chosen once from the rollout's id, so every instance,
//! restart and handoff agrees) and the current version elsewhere, compares the two arms over the
//! same minutes ([`rules`]), and promotes the new version when the window passes clean or rolls
//! it back at the first breach. The rollout's state lives in the lease table (`fleet/canary.rs`,
//! `fleet_table/rollout.rs`), never in a lease row.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

pub mod rules;

use rules::{Arm, BUCKETS, bucket};

/// The shards of `shards` a rollout `canary_id` runs its new version on: `share_permille` of
/// them rounded, at least one and never all (the others are its baseline); the ones whose
/// `sha256(canary_id, shard_id)` is smallest. `None` when there are fewer than two shards.
pub fn choose(canary_id: &str, shards: &[String], share_permille: u32) -> Option<Vec<String>> {
    let n = shards.len();
    if n < 2 {
        return None;
    }
    let k = ((n as u64 * u64::from(share_permille) + 500) / 1000) as usize;
    let k = k.clamp(1, n - 1);
    let mut ranked: Vec<([u8; 32], &String)> = shards
        .iter()
        .map(|s| {
            let mut h = Sha256::new();
            h.update(canary_id.as_bytes());
            h.update([0]);
            h.update(s.as_bytes());
            (h.finalize().into(), s)
        })
        .collect();
    ranked.sort();
    let mut chosen: Vec<String> = ranked.into_iter().take(k).map(|(_, s)| s.clone()).collect();
    chosen.sort();
    Some(chosen)
}

/// A rollout as one instance runs it: the new version (`F` makes its instances: the handler
/// seam's factory, which the slot names), its shards, and what both arms did here.
pub struct Canary<F: ?Sized> {
    pub id: String,
    pub factory: Arc<F>,
    pub shards: BTreeSet<String>,
    pub canary: Arc<ArmStats>,
    pub base: Arc<ArmStats>,
}

impl<F: ?Sized> Canary<F> {
    pub fn new(id: &str, factory: Arc<F>, shards: &[String]) -> Canary<F> {
        Canary {
            id: id.to_owned(),
            factory,
            shards: shards.iter().cloned().collect(),
            canary: Arc::default(),
            base: Arc::default(),
        }
    }

    /// Whether `shard` runs the new version.
    pub fn runs(&self, shard: &str) -> bool {
        self.shards.contains(shard)
    }

    /// The arm `shard` counts into.
    pub fn arm_of(&self, shard: &str) -> Arc<ArmStats> {
        if self.runs(shard) {
            self.canary.clone()
        } else {
            self.base.clone()
        }
    }
}

/// One arm's counts on this instance since the rollout began here.
#[derive(Default)]
pub struct ArmStats {
    records: AtomicU64,
    failed: AtomicU64,
    retried: AtomicU64,
    calls: Mutex<Vec<u64>>,
}

impl ArmStats {
    /// Counts answered records.
    pub fn records(&self, records: u64, failed: u64, retried: u64) {
        self.records.fetch_add(records, Ordering::Relaxed);
        self.failed.fetch_add(failed, Ordering::Relaxed);
        self.retried.fetch_add(retried, Ordering::Relaxed);
    }

    /// Counts one call that took `seconds`.
    pub fn call(&self, seconds: f64) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if calls.is_empty() {
            calls.resize(BUCKETS, 0);
        }
        calls[bucket(seconds * 1000.0)] += 1;
    }

    /// The counts, as a heartbeat carries them (trailing empty buckets left out).
    pub fn arm(&self) -> Arm {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
        while calls.last() == Some(&0) {
            calls.pop();
        }
        Arm {
            records: self.records.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            calls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("shardId-{i:012}")).collect()
    }

    #[test]
    fn a_rollout_chooses_the_same_whole_shards_every_time_and_never_all() {
        let all = shards(10);
        let a = choose("rollout-a", &all, 250).unwrap();
        assert_eq!(a.len(), 3, "25% of 10, rounded");
        assert_eq!(choose("rollout-a", &all, 250).unwrap(), a, "stable");
        let mut reversed = all.clone();
        reversed.reverse();
        assert_eq!(
            choose("rollout-a", &reversed, 250).unwrap(),
            a,
            "whatever the order"
        );
        assert_ne!(
            choose("rollout-b", &all, 250).unwrap(),
            a,
            "another rollout, other shards"
        );
        assert_eq!(choose("x", &all, 1).unwrap().len(), 1, "at least one");
        assert_eq!(
            choose("x", &all, 1000).unwrap().len(),
            9,
            "never all: a baseline stays"
        );
        assert_eq!(choose("x", &shards(1), 500), None);
    }
}
