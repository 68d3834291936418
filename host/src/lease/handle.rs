//! A held lease, shared by the shard's reader (checkpoints) and the coordinator (renewals).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::{Checkpoint, HANDOFF_REQUESTED, Lease, LeaseError, LeaseStore};

enum Write<'a> {
    Checkpoint(&'a Checkpoint),
    Renew(Duration),
}

/// One lease this process holds. Writes go through one lock, so the reader's checkpoints and the
/// coordinator's renewals never race each other on the row's counter. When any write finds the
/// lease lost, [`LeaseHandle::lost`] fires: the reader stops at once and writes nothing more.
pub struct LeaseHandle {
    store: Arc<dyn LeaseStore>,
    lease: Mutex<Lease>,
    lost: CancellationToken,
    handoff: CancellationToken,
}

impl LeaseHandle {
    pub fn new(store: Arc<dyn LeaseStore>, lease: Lease) -> Self {
        LeaseHandle {
            store,
            lease: Mutex::new(lease),
            lost: CancellationToken::new(),
            handoff: CancellationToken::new(),
        }
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

    /// Treats the lease as lost from now on (e.g. after a failed renewal).
    pub fn fence(&self) {
        self.lost.cancel();
    }

    /// The lease as last written.
    pub async fn current(&self) -> Lease {
        self.lease.lock().await.clone()
    }

    async fn write(&self, op: Write<'_>) -> Result<(), LeaseError> {
        let mut lease = self.lease.lock().await;
        if self.lost.is_cancelled() {
            return Err(LeaseError::Lost {
                key: lease.key.clone(),
                owner: lease.owner.clone().unwrap_or_default(),
            });
        }
        let mut result = self.send(&lease, &op).await;
        if matches!(result, Err(LeaseError::Lost { .. }))
            && let Ok(Some(row)) = self.store.read(&lease.key).await
            && row.owner == lease.owner
            && row.expiry_ms == HANDOFF_REQUESTED
        {
            // Still ours, but another instance asks for it: adopt the row, hand over gracefully.
            tracing::info!(lease = %lease.key, "another instance asked for this shard; handing it over");
            self.handoff.cancel();
            *lease = row;
            result = self.send(&lease, &op).await;
        }
        match result {
            Ok(written) => {
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
            Write::Renew(ttl) => self.store.renew(lease, *ttl).await,
        }
    }

    /// Writes a checkpoint; refused once the lease is lost.
    pub async fn checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), LeaseError> {
        self.write(Write::Checkpoint(checkpoint)).await
    }

    /// Extends the lease.
    pub async fn renew(&self, ttl: Duration) -> Result<(), LeaseError> {
        self.write(Write::Renew(ttl)).await
    }

    /// Gives the lease up; later writes are refused.
    pub async fn release(&self) -> Result<(), LeaseError> {
        let lease = self.lease.lock().await;
        if self.lost.is_cancelled() {
            return Ok(());
        }
        let result = self.store.release(&lease).await;
        self.lost.cancel();
        result
    }
}
