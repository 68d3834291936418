//! Balancing: an instance short of its fair share asks one holding more to hand a shard over.

use std::collections::HashMap;

use super::Coordinator;
use super::shards::Shards;
use crate::lease::{Lease, LeaseState, now_ms};
use crate::source::ShardInfo;

impl Coordinator {
    /// Balancing: live instances are the unexpired owners in the table plus this one. When this
    /// instance holds fewer than its fair share and another holds more than its share, it asks
    /// that one to hand shards over (gracefully: a batch boundary, a final checkpoint, a
    /// release reserving the row for this instance), and takes them once released. Only the
    /// instance short of shards asks, so instances converge without flapping.
    pub(super) async fn balance(&self, shards: &[ShardInfo], s: &mut Shards) {
        s.forget_older_than(self.timings.ttl * 2);
        let now = now_ms();
        let mut others: HashMap<String, Vec<Lease>> = HashMap::new();
        let mut open = 0;
        for shard in shards {
            if s.ended(&shard.shard_id).is_some() {
                continue;
            }
            open += 1;
            if s.holds(&shard.shard_id) {
                continue;
            }
            let key = self.plan.lease_key(&shard.shard_id);
            let Ok(Some(row)) = self.store.read(&key).await else {
                continue;
            };
            let holder = match row.state(now) {
                LeaseState::Held { owner } | LeaseState::HandoffRequested { owner, .. } => owner,
                LeaseState::Free | LeaseState::Reserved { .. } => continue,
            };
            if holder != &*self.owner {
                others.entry(holder.to_owned()).or_default().push(row);
            }
        }
        if others.is_empty() {
            return;
        }
        let owners = others.len() + 1;
        let floor = open / owners;
        let mut want = floor.saturating_sub(s.held() + s.asks());
        while want > 0 {
            let Some((victim, rows)) = others.iter_mut().max_by_key(|(_, rows)| rows.len()) else {
                break;
            };
            // A holder gives a shard only when it keeps its floor and ends up with no fewer
            // than this instance (4 shards over 3: 2/2/0 becomes 2/1/1, never flapping back).
            if rows.len() <= floor.max(s.held() + s.asks() + 1) {
                break;
            }
            let Some(row) = rows.pop() else { break };
            if s.asked_for(&row.key.shard_id) || row.handoff_to.is_some() {
                continue;
            }
            match self.store.request_handoff(&row, &self.owner).await {
                Ok(true) => {
                    tracing::info!(shard = %row.key.shard_id, holder = %victim, "asked for the shard (balancing)");
                    s.ask_for(&row.key.shard_id);
                    want -= 1;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(shard = %row.key.shard_id, error = %e, "cannot ask for the shard");
                }
            }
        }
    }
}
