//! A held lease, shared by the shard's reader (checkpoints) and its keep-alive (renewals).

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::{Checkpoint, Lease, LeaseError, LeaseStore};

enum Write<'a> {
    Checkpoint(&'a Checkpoint),
    /// A checkpoint with state items, in one transaction.
    CheckpointWith(
        &'a Checkpoint,
        &'a [aws_sdk_dynamodb::types::TransactWriteItem],
    ),
    Renew(Duration),
    Opened(u64),
}

/// One lease this process holds. Writes go through one lock, so the reader's checkpoints and the
/// renewals never race each other on the row's counter. When any write finds the lease lost, or
/// the lease may have expired before a renewal answered, [`LeaseHandle::lost`] fires: the reader
/// stops at once and writes nothing more.
pub struct LeaseHandle {
    store: Arc<dyn LeaseStore>,
    lease: Mutex<Lease>,
    ttl: Duration,
    /// Until when this process may act on the lease: when the last successful renewal (or the
    /// acquire) was sent, plus the ttl, less a safety margin for other instances' clocks.
    valid_until: std::sync::Mutex<Instant>,
    lost: CancellationToken,
    /// Fired by [`LeaseHandle::release`] (which fires `lost` too).
    released: CancellationToken,
    handoff: CancellationToken,
    /// The last write, when it failed with a store error: the table may have applied it all
    /// the same (its answer was lost), and then the row shows it, one write past ours.
    uncertain: std::sync::Mutex<Option<Unanswered>>,
}

/// A write that failed with a store error, and what the row shows if it was applied.
enum Unanswered {
    Checkpoint(Checkpoint),
    /// The expiry the store wrote lies in this range (ms since the Unix epoch): the store
    /// computes it from this process's clock while the write is on its way.
    Renew(std::ops::RangeInclusive<u64>),
    Opened,
}

/// How a [`LeaseHandle::keep_alive`] ended.
#[derive(Debug)]
pub enum KeepAlive {
    /// The lease was released or found lost by another write.
    Ended,
    /// A renewal failed; the lease is fenced.
    Failed(LeaseError),
    /// No renewal answered before the lease could expire; the lease is fenced.
    TimedOut,
}

impl LeaseHandle {
    /// A handle on `lease`, acquired with `ttl` by a request sent at `sent`.
    pub fn new(store: Arc<dyn LeaseStore>, lease: Lease, ttl: Duration, sent: Instant) -> Self {
        let handle = LeaseHandle {
            store,
            lease: Mutex::new(lease),
            ttl,
            valid_until: std::sync::Mutex::new(sent),
            lost: CancellationToken::new(),
            released: CancellationToken::new(),
            handoff: CancellationToken::new(),
            uncertain: std::sync::Mutex::new(None),
        };
        handle.renewed(sent);
        handle
    }

    /// Fires when the lease is found lost.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// Fires when another instance asked for this shard (balancing): stop at the next batch
    /// boundary, write the final checkpoint, and release.
    pub fn handoff(&self) -> &CancellationToken {
        &self.handoff
    }

    /// Whether the lease is lost, or this instant past its fence (then it is fenced now).
    pub fn past_fence(&self) -> bool {
        if !self.lost.is_cancelled() && Instant::now() >= self.valid_until() {
            self.lost.cancel();
        }
        self.lost.is_cancelled()
    }

    /// Treats the lease as lost from now on (e.g. after a failed renewal).
    pub fn fence(&self) {
        self.lost.cancel();
    }

    /// The lease as last written.
    pub async fn current(&self) -> Lease {
        self.lease.lock().await.clone()
    }

    /// The safety margin kept before the lease's expiry: a fifth of the ttl.
    fn margin(&self) -> Duration {
        self.ttl / 5
    }

    fn renewed(&self, sent: Instant) {
        let until = sent + self.ttl.saturating_sub(self.margin());
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
    }

    /// Until when this process may act on the lease (its fence), as the last renewal left it.
    pub fn valid_until(&self) -> Instant {
        *self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn write(&self, op: Write<'_>) -> Result<(), LeaseError> {
        let mut lease = self.lease.lock().await;
        let lost = |lease: &Lease| LeaseError::Lost {
            key: lease.key.clone(),
            owner: lease.owner.clone().unwrap_or_default(),
        };
        if self.lost.is_cancelled() {
            return Err(lost(&lease));
        }
        if Instant::now() >= self.valid_until() {
            // Another instance may take the row any moment now: act as if it had.
            self.lost.cancel();
            return Err(lost(&lease));
        }
        let sent = Instant::now();
        let sent_ms = crate::lease::now_ms();
        let mut result = self.send(&lease, &op).await;
        if matches!(result, Err(LeaseError::Lost { .. }))
            && self.adopt_unanswered(&mut lease).await
            && Instant::now() < self.valid_until()
        {
            result = self.send(&lease, &op).await;
        }
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let expiries =
            sent_ms.saturating_add(ttl_ms)..=crate::lease::now_ms().saturating_add(ttl_ms);
        *self.uncertain.lock().unwrap_or_else(|e| e.into_inner()) = match (&result, &op) {
            (Err(LeaseError::Store(_)), Write::Checkpoint(cp) | Write::CheckpointWith(cp, _)) => {
                Some(Unanswered::Checkpoint((*cp).clone()))
            }
            (Err(LeaseError::Store(_)), Write::Renew(_)) => Some(Unanswered::Renew(expiries)),
            (Err(LeaseError::Store(_)), Write::Opened(_)) => Some(Unanswered::Opened),
            _ => None,
        };
        match result {
            Ok(written) => {
                if matches!(op, Write::Renew(_)) {
                    self.renewed(sent);
                }
                if let Some(to) = &written.handoff_to
                    && !self.handoff.is_cancelled()
                {
                    tracing::info!(lease = %written.key, to = %to, "another instance asked for this shard; handing it over at the next batch boundary");
                    self.handoff.cancel();
                }
                *lease = written;
                Ok(())
            }
            Err(e) => {
                if matches!(e, LeaseError::Lost { .. }) {
                    self.lost.cancel();
                }
                Err(e)
            }
        }
    }

    async fn send(&self, lease: &Lease, op: &Write<'_>) -> Result<Lease, LeaseError> {
        match op {
            Write::Checkpoint(cp) => self.store.checkpoint(lease, cp).await,
            Write::CheckpointWith(cp, items) => self.store.checkpoint_with(lease, cp, items).await,
            Write::Renew(ttl) => self.store.renew(lease, *ttl).await,
            Write::Opened(at) => self.store.mark_opened(lease, *at).await,
        }
    }

    /// After a write that failed with a store error, the next one found the row changed: when
    /// the change is that write itself (applied, its answer lost: still ours, the counter one
    /// past ours), goes on from the row as it is. Answers whether it did.
    async fn adopt_unanswered(&self, lease: &mut Lease) -> bool {
        let Some(unanswered) = self
            .uncertain
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return false;
        };
        let Ok(Some(row)) = self.store.read(&lease.key).await else {
            return false;
        };
        let shows = match &unanswered {
            Unanswered::Checkpoint(cp) => row.checkpoint.as_ref() == Some(cp),
            Unanswered::Renew(expiries) => {
                row.checkpoint == lease.checkpoint && expiries.contains(&row.expiry_ms)
            }
            Unanswered::Opened => row.opened_ms.is_some(),
        };
        let ours = shows
            && row.owner.is_some()
            && row.owner == lease.owner
            && row.counter == lease.counter.saturating_add(1);
        if ours {
            tracing::info!(lease = %row.key, "the last lease write was applied although its answer was lost; going on from it");
            *lease = row;
        }
        ours
    }

    /// Writes a checkpoint; refused once the lease is lost.
    pub async fn checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), LeaseError> {
        self.write(Write::Checkpoint(checkpoint)).await
    }

    /// Writes a checkpoint and state items in one transaction ([`LeaseStore::checkpoint_with`]);
    /// refused once the lease is lost.
    pub async fn checkpoint_with(
        &self,
        checkpoint: &Checkpoint,
        items: &[aws_sdk_dynamodb::types::TransactWriteItem],
    ) -> Result<(), LeaseError> {
        self.write(Write::CheckpointWith(checkpoint, items)).await
    }

    /// Records that the shard was opened at `at_ms` with no checkpoint (see
    /// [`LeaseStore::mark_opened`]).
    pub async fn mark_opened(&self, at_ms: u64) -> Result<(), LeaseError> {
        self.write(Write::Opened(at_ms)).await
    }

    /// Extends the lease.
    pub async fn renew(&self) -> Result<(), LeaseError> {
        self.write(Write::Renew(self.ttl)).await
    }

    /// Renews the lease every `every` until it is released or lost. Nothing but the store's
    /// answer can delay a renewal. A renewal the store fails (it could not be reached, it
    /// throttled) is tried again, a fifth of `every` later, while the lease is still valid;
    /// when none succeeds before the lease could expire, or the lease is found lost, it is
    /// fenced at once (the reader stops and writes nothing more).
    pub async fn keep_alive(&self, every: Duration) -> KeepAlive {
        loop {
            // The next renewal goes out `every` after the last one answered, but early enough
            // to be answered before the fence (half a period before it): a renewal that
            // answered late must not leave the lease acting past its fence unrenewed.
            let fence = self.valid_until();
            let latest = fence.checked_sub(every / 2).unwrap_or(fence);
            let next = (Instant::now() + every).min(latest);
            tokio::select! {
                _ = self.lost.cancelled() => return KeepAlive::Ended,
                _ = tokio::time::sleep_until(next) => {}
            }
            let deadline = self.valid_until();
            match tokio::time::timeout_at(deadline, self.renew_until_answered(every / 5)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) if self.released.is_cancelled() => return KeepAlive::Ended,
                Ok(Err(e)) => {
                    self.fence();
                    return KeepAlive::Failed(e);
                }
                Err(_) => {
                    self.fence();
                    return KeepAlive::TimedOut;
                }
            }
        }
    }

    /// Renews, trying again `pause` after each store error; a lost lease ends it.
    async fn renew_until_answered(&self, pause: Duration) -> Result<(), LeaseError> {
        loop {
            match self.renew().await {
                Err(LeaseError::Store(e)) if !self.lost.is_cancelled() => {
                    tracing::warn!(error = %e, "lease renewal failed; trying again while the lease is valid");
                    tokio::time::sleep(pause.max(Duration::from_millis(50))).await;
                }
                other => return other,
            }
        }
    }

    /// Gives the lease up; later writes are refused. When the holder was asked for the shard,
    /// the row is reserved for the instance that asked.
    pub async fn release(&self) -> Result<(), LeaseError> {
        let lease = self.lease.lock().await;
        if self.lost.is_cancelled() {
            return Ok(());
        }
        self.released.cancel();
        let result = self.store.release(&lease).await;
        self.lost.cancel();
        result
    }
}

#[cfg(test)]
mod tests;
