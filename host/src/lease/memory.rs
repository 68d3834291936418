//! Leases kept in the memory of the process: right for one instance.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::{Checkpoint, Lease, LeaseError, LeaseKey, LeaseStore, claimed_by_another, now_ms};

/// A [`LeaseStore`] in the memory of the process.
///
/// It applies the same conditions as the table-backed store, so code that is correct on it is
/// correct on DynamoDB: rows are keyed by their key's text, and a row keeps the name of the
/// subscription that took it and is refused to any other. It starts empty: a restarted process
/// opens each shard where `start_at` says.
#[derive(Debug, Default)]
pub struct MemoryLeaseStore {
    rows: Mutex<HashMap<String, Row>>,
}

#[derive(Debug)]
struct Row {
    /// The subscription that took the row, if one named itself.
    claim: Option<String>,
    lease: Lease,
}

impl Row {
    /// Refuses a key whose subscription is not the one that took the row.
    fn check(&self, key: &LeaseKey) -> Result<(), LeaseError> {
        match (&self.claim, &key.subscription) {
            (Some(theirs), Some(ours)) if theirs != ours => {
                Err(claimed_by_another("", key, theirs))
            }
            _ => Ok(()),
        }
    }
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
        let row = &mut rows.get_mut(&lease.key.to_string()).ok_or_else(lost)?.lease;
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
        let entry = rows.entry(key.to_string()).or_insert_with(|| Row {
            claim: None,
            lease: Lease::new(key.clone()),
        });
        entry.check(key)?;
        if !entry.lease.takeable_by(owner, now_ms()) {
            return Ok(None);
        }
        if key.subscription.is_some() {
            entry.claim = key.subscription.clone();
        }
        let row = &mut entry.lease;
        row.key = key.clone();
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
        let rows = self.rows.lock().expect("lease rows poisoned");
        let Some(row) = rows.get(&key.to_string()) else {
            return Ok(None);
        };
        row.check(key)?;
        Ok(Some(row.lease.clone()))
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
        store
            .rows
            .lock()
            .unwrap()
            .get_mut(&key.to_string())
            .unwrap()
            .lease
            .expiry_ms = 0;
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
    async fn a_row_one_subscription_took_is_refused_to_another() {
        use crate::lease::LeaseRows;
        let store = MemoryLeaseStore::new();
        let shard = "shardId-000000000000";
        let one = LeaseKey::of("orders", shard, "one", LeaseRows::Stream);
        let a = store.acquire(&one, "a", TTL).await.unwrap().unwrap();
        store.release(&a).await.unwrap();
        let two = LeaseKey::of("orders", shard, "two", LeaseRows::Stream);
        let refused = store.acquire(&two, "a", TTL).await.unwrap_err().to_string();
        assert!(
            refused.contains("`one`") && refused.contains("`two`") && refused.contains("lease_key"),
            "{refused}"
        );
        assert!(store.read(&two).await.is_err());
        let own = LeaseKey::of("orders", shard, "two", LeaseRows::Subscription);
        assert!(store.acquire(&own, "a", TTL).await.unwrap().is_some());
        assert!(store.acquire(&one, "a", TTL).await.unwrap().is_some());
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
