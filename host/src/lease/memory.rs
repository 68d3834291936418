//! Leases kept in the memory of the process: right for one instance.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::{Checkpoint, Lease, LeaseError, LeaseKey, LeaseStore, now_ms};

/// A [`LeaseStore`] in the memory of the process.
///
/// It applies the same conditions as the table-backed store, so code that is correct on it is
/// correct on DynamoDB. It starts empty: a restarted process opens each shard where `start_at`
/// says.
#[derive(Debug, Default)]
pub struct MemoryLeaseStore {
    rows: Mutex<HashMap<LeaseKey, Lease>>,
}

impl MemoryLeaseStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `change` to the row if `lease` still matches it (owner and counter), and bumps
    /// the counter.
    fn conditional(
        &self,
        lease: &Lease,
        change: impl FnOnce(&mut Lease),
    ) -> Result<Lease, LeaseError> {
        self.conditional_with(lease, true, change)
    }

    fn conditional_with(
        &self,
        lease: &Lease,
        bump: bool,
        change: impl FnOnce(&mut Lease),
    ) -> Result<Lease, LeaseError> {
        let mut rows = self.rows.lock().expect("lease rows poisoned");
        let lost = || LeaseError::Lost {
            key: lease.key.clone(),
            owner: lease.owner.clone().unwrap_or_default(),
        };
        let row = rows.get_mut(&lease.key).ok_or_else(lost)?;
        if row.owner != lease.owner || row.counter != lease.counter || lease.owner.is_none() {
            return Err(lost());
        }
        change(row);
        if bump {
            row.counter += 1;
        }
        Ok(row.clone())
    }
}

fn expiry(ttl: Duration) -> u64 {
    now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
}

#[async_trait]
impl LeaseStore for MemoryLeaseStore {
    async fn acquire(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        let mut rows = self.rows.lock().expect("lease rows poisoned");
        let row = rows
            .entry(key.clone())
            .or_insert_with(|| Lease::new(key.clone()));
        if !row.takeable_by(owner, now_ms()) {
            return Ok(None);
        }
        row.owner = Some(owner.to_owned());
        row.expiry_ms = expiry(ttl);
        row.handoff_to = None;
        row.counter += 1;
        Ok(Some(row.clone()))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        self.conditional(lease, |row| row.expiry_ms = expiry(ttl))
    }

    async fn checkpoint(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
    ) -> Result<Lease, LeaseError> {
        self.conditional(lease, |row| row.checkpoint = Some(checkpoint.clone()))
    }

    async fn mark_opened(&self, lease: &Lease, at_ms: u64) -> Result<Lease, LeaseError> {
        self.conditional(lease, |row| {
            row.opened_ms.get_or_insert(at_ms);
        })
    }

    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        Ok(self
            .rows
            .lock()
            .expect("lease rows poisoned")
            .get(key)
            .cloned())
    }

    async fn request_handoff(&self, lease: &Lease, requester: &str) -> Result<bool, LeaseError> {
        let mut asked = false;
        match self.conditional_with(lease, false, |row| {
            if row.handoff_to.is_none() {
                row.handoff_to = Some(requester.to_owned());
                asked = true;
            }
        }) {
            Ok(_) => Ok(asked),
            Err(LeaseError::Lost { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        let reserve = lease.handoff_to.is_some();
        self.conditional(lease, |row| {
            row.owner = None;
            if !reserve {
                row.expiry_ms = 0;
                row.handoff_to = None;
            }
        })
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Position;

    const TTL: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn a_held_lease_cannot_be_taken_by_another_owner() {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("orders", "shardId-000000000000");
        assert!(store.acquire(&key, "a", TTL).await.unwrap().is_some());
        assert!(store.acquire(&key, "b", TTL).await.unwrap().is_none());
        // The same owner regains it at once, e.g. after a restart.
        assert!(store.acquire(&key, "a", TTL).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_checkpoint_lands_only_while_its_writer_holds_the_lease() {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("orders", "shardId-000000000000");
        let a = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
        let cp = Checkpoint::At(Position::new("7", 0));
        let a = store.checkpoint(&a, &cp).await.unwrap();
        assert_eq!(a.checkpoint, Some(cp.clone()));

        // Expire it, let b take it: a's next write is refused and changes nothing.
        store.rows.lock().unwrap().get_mut(&key).unwrap().expiry_ms = 0;
        let b = store.acquire(&key, "b", TTL).await.unwrap().unwrap();
        assert_eq!(
            b.checkpoint,
            Some(cp.clone()),
            "the new holder resumes from it"
        );
        let stale = store
            .checkpoint(&a, &Checkpoint::At(Position::new("9", 0)))
            .await;
        assert!(matches!(stale, Err(LeaseError::Lost { .. })));
        assert!(matches!(
            store.renew(&a, TTL).await,
            Err(LeaseError::Lost { .. })
        ));
        let row = store.read(&key).await.unwrap().unwrap();
        assert_eq!(row.checkpoint, Some(cp));
        assert_eq!(row.owner.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn release_keeps_the_checkpoint_and_frees_the_shard_at_once() {
        let store = MemoryLeaseStore::new();
        let key = LeaseKey::new("orders", "shardId-000000000001");
        let a = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
        let a = store.checkpoint(&a, &Checkpoint::ShardEnd).await.unwrap();
        store.release(&a).await.unwrap();
        let b = store.acquire(&key, "b", TTL).await.unwrap().unwrap();
        assert_eq!(b.checkpoint, Some(Checkpoint::ShardEnd));
        assert!(b.counter > a.counter, "every write bumps the counter");
    }
}
