use super::*;
use crate::lease::{LeaseKey, MemoryLeaseStore};
use async_trait::async_trait;
use std::sync::atomic::{AtomicU32, Ordering};

/// The memory store, with renewals that fail: `refused` of them before being applied, and
/// `unanswered` of them after (the row is written, the caller gets an error).
#[derive(Default)]
struct Faulty {
    inner: MemoryLeaseStore,
    refused: AtomicU32,
    unanswered: AtomicU32,
}

fn take(n: &AtomicU32) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

#[async_trait]
impl LeaseStore for Faulty {
    async fn acquire(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        self.inner.acquire(key, owner, ttl).await
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        if take(&self.refused) {
            return Err(LeaseError::Store("refused".into()));
        }
        let written = self.inner.renew(lease, ttl).await?;
        if take(&self.unanswered) {
            return Err(LeaseError::Store("the answer was lost".into()));
        }
        Ok(written)
    }
    async fn checkpoint(&self, lease: &Lease, cp: &Checkpoint) -> Result<Lease, LeaseError> {
        self.inner.checkpoint(lease, cp).await
    }
    async fn mark_opened(&self, lease: &Lease, at_ms: u64) -> Result<Lease, LeaseError> {
        self.inner.mark_opened(lease, at_ms).await
    }
    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        self.inner.read(key).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.inner.release(lease).await
    }
}

const TTL: Duration = Duration::from_secs(10);
const EVERY: Duration = Duration::from_secs(3);

async fn held(store: Arc<Faulty>) -> Arc<LeaseHandle> {
    let key = LeaseKey::new("s", "shard-1");
    let lease = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    Arc::new(LeaseHandle::new(store, lease, TTL, Instant::now()))
}

/// Runs the keep-alive for a minute of virtual time: how it ended, if it did.
async fn keep_alive_for_a_minute(handle: &Arc<LeaseHandle>) -> Option<KeepAlive> {
    let h = handle.clone();
    let task = tokio::spawn(async move { h.keep_alive(EVERY).await });
    tokio::time::sleep(Duration::from_secs(60)).await;
    if task.is_finished() {
        return Some(task.await.unwrap());
    }
    task.abort();
    None
}

#[tokio::test(start_paused = true)]
async fn a_renewal_the_store_fails_is_tried_again_while_the_lease_is_valid() {
    let _clock = crate::lease::simulated_clock(1_000_000);
    let store = Arc::new(Faulty::default());
    store.refused.store(3, Ordering::SeqCst);
    let handle = held(store.clone()).await;
    let ended = keep_alive_for_a_minute(&handle).await;
    assert!(ended.is_none(), "the keep-alive ended: {ended:?}");
    assert!(!handle.lost().is_cancelled(), "the lease was kept");
    assert_eq!(store.refused.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_applied_whose_answer_was_lost_is_not_taken_for_a_lost_lease() {
    let _clock = crate::lease::simulated_clock(1_000_000);
    let store = Arc::new(Faulty::default());
    store.unanswered.store(1, Ordering::SeqCst);
    let handle = held(store.clone()).await;
    let ended = keep_alive_for_a_minute(&handle).await;
    assert!(ended.is_none(), "the keep-alive ended: {ended:?}");
    handle
        .checkpoint(&Checkpoint::ShardEnd)
        .await
        .expect("the holder still writes");
}

#[tokio::test(start_paused = true)]
async fn a_lease_regained_under_the_same_owner_id_elsewhere_is_not_adopted() {
    let _clock = crate::lease::simulated_clock(1_000_000);
    let store = Arc::new(Faulty::default());
    // The first renewal fails without being applied; meanwhile another process under the
    // same owner id (a restart that should not have run beside this one) takes the row.
    store.refused.store(1, Ordering::SeqCst);
    let handle = held(store.clone()).await;
    let h = handle.clone();
    let task = tokio::spawn(async move { h.keep_alive(EVERY).await });
    tokio::time::sleep(EVERY + Duration::from_millis(100)).await;
    let key = LeaseKey::new("s", "shard-1");
    store.inner.acquire(&key, "a", TTL).await.unwrap().unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(60), task).await;
    assert!(
        matches!(ended, Ok(Ok(KeepAlive::Failed(LeaseError::Lost { .. })))),
        "{ended:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_taken_by_another_owner_is_still_lost() {
    let _clock = crate::lease::simulated_clock(1_000_000);
    let store = Arc::new(Faulty::default());
    store.unanswered.store(1, Ordering::SeqCst);
    let handle = held(store.clone()).await;
    // The row moves on without this holder: released behind its back and taken by b.
    let key = LeaseKey::new("s", "shard-1");
    let row = store.read(&key).await.unwrap().unwrap();
    store.inner.release(&row).await.unwrap();
    store.acquire(&key, "b", TTL).await.unwrap().unwrap();
    let ended = keep_alive_for_a_minute(&handle).await;
    assert!(
        matches!(ended, Some(KeepAlive::Failed(LeaseError::Lost { .. }))),
        "{ended:?}"
    );
    assert!(handle.lost().is_cancelled());
}
