//! What the subscription promises to deliver, by its `start_at`: every record under
//! `trim_horizon`; under `latest` those put after a shard was first opened (a shard closed
//! before any reader opened it is skipped); under `at_timestamp` those that arrived from then
//! on; and every record of a child of a shard read to its end.

use shardhost::config::StartAt;

use crate::log::{Log, Pos};

impl Log {
    /// Whether the subscription promises to deliver this logical record: every one, but
    /// under `latest` only those put after its shard was first opened, and under
    /// `at_timestamp` only those that arrived from then on — except in a child of a shard read
    /// to its end, which is read from its start.
    pub fn required(&self, logical: u64) -> bool {
        let Some(rec) = self.records.get(&logical) else {
            return true;
        };
        if self.after_parents(&rec.shard) {
            return true;
        }
        match self.start_at {
            StartAt::TrimHorizon => true,
            StartAt::Timestamp(ts) => rec.arrival >= ts,
            StartAt::Latest => {
                let index = self.entries[&(rec.shard.clone(), rec.pos)].index;
                self.latest_from
                    .get(&rec.shard)
                    .is_some_and(|&from| index >= from)
            }
        }
    }

    /// Whether a parent of `shard` was read to its end (SHARD_END): then it is read from its
    /// start, whatever `start_at` says.
    pub fn after_parents(&self, shard: &str) -> bool {
        self.parents
            .get(shard)
            .is_some_and(|ps| ps.iter().any(|p| self.shard_ends.contains_key(p)))
    }

    /// A shard the subscription skips: under `latest`, closed before any reader opened it
    /// (no mark in the lease table) and no parent of it read to its end. Nothing in it is
    /// owed, and no SHARD_END is written for it.
    pub fn skipped(&self, shard: &str) -> bool {
        self.start_at == StartAt::Latest
            && self.closed.contains(shard)
            && !self.marked.contains(shard)
            && !self.after_parents(shard)
    }

    /// Whether the entry at `pos` of `shard` must be delivered.
    pub fn entry_required(&self, shard: &str, pos: Pos) -> bool {
        self.entries
            .get(&(shard.to_owned(), pos))
            .is_none_or(|e| self.required(e.logical))
    }
}
