//! Taking shards: list them, take every lease this instance may (parents before children), skip
//! what holds nothing to read, and start a worker and a keep-alive on each.

use std::collections::HashSet;
use std::sync::Arc;
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use super::Coordinator;
use super::shards::{Ended, Shards};
use crate::config::StartAt;
use crate::dispatch::ShardWorker;
use crate::lease::{Checkpoint, Lease, LeaseError, LeaseHandle, LeaseState, now_ms};
use crate::source::ShardInfo;
use crate::status::ShardState;

impl Coordinator {
    /// Lists the shards and takes every lease this instance may; answers the listing.
    /// Notes in `s` when a shard that could not be taken may be takeable.
    pub(super) async fn take_shards(&self, s: &mut Shards) -> Option<Vec<ShardInfo>> {
        s.forget_older_than(self.timings.ttl * 2);
        let shards = match self.source.list_shards(&self.plan.stream).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(stream = %self.plan.stream, error = %e, "cannot list shards");
                return None;
            }
        };
        let listed: HashSet<&str> = shards.iter().map(|s| s.shard_id.as_str()).collect();
        for shard in &shards {
            let id = &shard.shard_id;
            if s.settled(id) {
                continue;
            }
            let Some(after_parents) = self.parents_ended(shard, &listed, s).await else {
                continue;
            };
            let sent = Instant::now();
            let Some(lease) = self.try_take(id, s).await else {
                continue;
            };
            if sent.elapsed() >= self.timings.ttl.mul_f64(0.8) {
                // The answer came after the lease's fence (four fifths of the ttl after the
                // request was sent): by then another instance may have taken the row, so this
                // take is not acted on. The row is this owner's: the next listing takes it again
                // (found by the seeded fault simulation, a stalled lease table).
                tracing::warn!(
                    shard = %id,
                    waited = ?sent.elapsed(),
                    "the lease table answered the take too late to act on it; taking it again"
                );
                s.look_again(now_ms());
                continue;
            }
            let handle = Arc::new(LeaseHandle::new(
                self.store.clone(),
                lease.clone(),
                self.timings.ttl,
                sent,
            ));
            if lease.checkpoint == Some(Checkpoint::ShardEnd) {
                s.mark_ended(id, Ended::Read);
                let _ = handle.release().await;
                continue;
            }
            if self.skips(shard, &lease, after_parents) {
                tracing::info!(
                    shard = %id,
                    "shard skipped: it is closed and no reader ever opened it, and start_at = latest; its children start at the tip"
                );
                s.mark_ended(id, Ended::Skipped);
                let _ = handle.release().await;
                continue;
            }
            tracing::info!(shard = %id, owner = %self.owner, "lease taken");
            self.start(id, handle, after_parents, s);
        }
        Some(shards)
    }

    /// A closed shard with no checkpoint that no reader ever opened, under start_at = latest,
    /// holds nothing to read: skip it. One that was opened is read from where it was opened.
    fn skips(&self, shard: &ShardInfo, lease: &Lease, after_parents: bool) -> bool {
        lease.checkpoint.is_none()
            && lease.opened_ms.is_none()
            && shard.closed
            && !after_parents
            && self.plan.start_at == StartAt::Latest
    }

    /// Tries to take one shard's lease; `None` when it is not takeable now (held elsewhere,
    /// refused, or the store failed), noting when to look again.
    async fn try_take(&self, id: &str, s: &mut Shards) -> Option<Lease> {
        let key = self.plan.lease_key(id);
        match self
            .store
            .acquire(&key, &self.owner, self.timings.ttl)
            .await
        {
            Ok(Some(lease)) => {
                self.clear_refusal(id);
                Some(lease)
            }
            Ok(None) if s.asked_for(id) => {
                // Asked for: its holder notices at its next write (a renewal at the latest),
                // then releases it to this instance at a batch boundary.
                s.look_again(now_ms().saturating_add(self.renew_ms()));
                None
            }
            Ok(None) => {
                // Held elsewhere: look again just after it would expire, not a whole listing
                // period later, so a dead holder's shards move quickly.
                match self.store.read(&key).await {
                    Ok(Some(row)) if row.state(now_ms()) != LeaseState::Free => {
                        s.look_again(row.expiry_ms.saturating_add(50));
                    }
                    Err(LeaseError::Malformed(why) | LeaseError::Refused(why)) => {
                        self.refuse(id, why)
                    }
                    _ => {}
                }
                None
            }
            Err(LeaseError::Refused(why) | LeaseError::Malformed(why)) => {
                self.refuse(id, why);
                None
            }
            Err(e) => {
                tracing::warn!(shard = %id, error = %e, "cannot take lease");
                None
            }
        }
    }

    fn renew_ms(&self) -> u64 {
        u64::try_from(self.timings.renew_every.as_millis()).unwrap_or(u64::MAX)
    }

    /// A shard that cannot be taken until its row is fixed: said once, shown in status.
    fn refuse(&self, id: &str, why: String) {
        let cell = self
            .status
            .shard(&self.plan.name, &self.plan.shard_label(id));
        if cell.get().last_error.as_deref() != Some(why.as_str()) {
            tracing::error!(shard = %id, "shard not started: {why}");
            cell.update(|s| {
                s.state = ShardState::Refused;
                s.last_error = Some(why);
            });
        }
    }

    fn clear_refusal(&self, id: &str) {
        let cell = self
            .status
            .shard(&self.plan.name, &self.plan.shard_label(id));
        if cell.get().state == ShardState::Refused {
            cell.update(|s| {
                s.state = ShardState::Starting;
                s.last_error = None;
            });
        }
    }

    /// Starts a shard's worker and its lease's keep-alive.
    fn start(&self, id: &str, handle: Arc<LeaseHandle>, after_parents: bool, s: &mut Shards) {
        let stop = CancellationToken::new();
        let worker = ShardWorker::new(
            self.plan.clone(),
            id,
            handle.clone(),
            self.status.clone(),
            stop.clone(),
        )
        .at_trim_horizon(after_parents);
        let run = worker.run(self.source.clone());
        s.start(id, handle, stop, run, self.timings.renew_every);
    }

    /// Whether a shard may start: `None` while a parent is still to be read; otherwise whether
    /// any parent was read to its end (then the shard, a continuation of its parents, opens at
    /// its beginning when it has no checkpoint of its own).
    async fn parents_ended(
        &self,
        shard: &ShardInfo,
        listed: &HashSet<&str>,
        s: &mut Shards,
    ) -> Option<bool> {
        let mut any_read = false;
        for parent in &shard.parents {
            if let Some(how) = s.ended(parent) {
                any_read |= how == Ended::Read;
                continue;
            }
            let key = self.plan.lease_key(parent);
            match self.store.read(&key).await {
                Ok(Some(row)) if row.checkpoint == Some(Checkpoint::ShardEnd) => {
                    s.mark_ended(parent, Ended::Read);
                    any_read = true;
                }
                // Aged out of the stream and never read here.
                Ok(_) if !listed.contains(parent.as_str()) => {}
                _ => return None,
            }
        }
        Some(any_read)
    }
}
