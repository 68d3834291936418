use std::sync::Arc;

use super::*;
use crate::record::Position;
use crate::state::memory::{MemoryStore, Shared};
use crate::state::{Meter, StateStore, StoreError};

fn at(n: u64) -> Position {
    Position::new(&n.to_string(), 0)
}

fn memory() -> Arc<dyn StateStore> {
    Arc::new(MemoryStore::new(Arc::new(Shared::default()), None))
}

/// Commits what `pending` holds up to `upto` into the memory store, as a checkpoint would.
fn commit(pending: &Pending, store: &Arc<dyn StateStore>, upto: u64) -> Result<usize, Conflict> {
    let Some(set) = pending.to_commit(Some(&at(upto))) else {
        return Ok(0);
    };
    store.apply_commit(&set).expect("a memory store commits")?;
    pending.committed(&set);
    Ok(set.writes.len())
}

#[tokio::test]
async fn writes_stay_with_the_shard_until_the_checkpoint_that_covers_them_commits_them() {
    let (store, m) = (memory(), Meter::default());
    let pending = Arc::new(Pending::default());
    let view = pending.view(store.clone());
    assert_eq!(view.increment(&m, "n", 2).await.unwrap(), 2);
    assert_eq!(view.increment(&m, "n", 3).await.unwrap(), 5, "seen at once");
    assert_eq!(
        store.get(&m, "n").await.unwrap(),
        None,
        "not in the store yet"
    );
    pending.end_batch(Some((at(10), at(10))));
    view.set(&m, "later", b"x".to_vec()).await.unwrap();
    pending.end_batch(Some((at(20), at(20))));

    assert_eq!(
        commit(&pending, &store, 15),
        Ok(1),
        "only the batch up to 10"
    );
    assert_eq!(store.get(&m, "n").await.unwrap(), Some(b"5".to_vec()));
    assert_eq!(store.get(&m, "later").await.unwrap(), None);
    assert_eq!(commit(&pending, &store, 20), Ok(1));
    assert_eq!(store.get(&m, "later").await.unwrap(), Some(b"x".to_vec()));
    assert_eq!(view.increment(&m, "n", 1).await.unwrap(), 6);
}

#[tokio::test]
async fn a_batch_not_wholly_settled_keeps_none_of_its_writes() {
    let (store, m) = (memory(), Meter::default());
    let pending = Arc::new(Pending::default());
    let view = pending.view(store.clone());
    view.increment(&m, "n", 1).await.unwrap();
    pending.end_batch(Some((at(1), at(1))));
    view.increment(&m, "n", 1).await.unwrap();
    pending.end_batch(None);
    assert_eq!(view.get(&m, "n").await.unwrap(), Some(b"1".to_vec()));
    assert_eq!(commit(&pending, &store, 5), Ok(1));
    assert_eq!(store.get(&m, "n").await.unwrap(), Some(b"1".to_vec()));
}

#[tokio::test]
async fn a_key_another_shard_wrote_since_it_was_read_fails_the_whole_commit() {
    let (store, m) = (memory(), Meter::default());
    let (a, b) = (Arc::new(Pending::default()), Arc::new(Pending::default()));
    let (va, vb) = (a.view(store.clone()), b.view(store.clone()));
    va.increment(&m, "shared", 1).await.unwrap();
    va.set(&m, "mine", b"a".to_vec()).await.unwrap();
    vb.increment(&m, "shared", 1).await.unwrap();
    a.end_batch(Some((at(1), at(1))));
    b.end_batch(Some((at(1), at(1))));
    assert_eq!(commit(&b, &store, 1), Ok(1));
    let refused = commit(&a, &store, 1);
    assert!(
        matches!(&refused, Err(c) if c.key == "shared"),
        "{refused:?}"
    );
    assert_eq!(
        store.get(&m, "mine").await.unwrap(),
        None,
        "nothing of it landed"
    );
    assert_eq!(store.get(&m, "shared").await.unwrap(), Some(b"1".to_vec()));

    // Read again from the checkpoint, the shard counts on from what is committed.
    a.discard();
    va.increment(&m, "shared", 1).await.unwrap();
    a.end_batch(Some((at(1), at(1))));
    assert_eq!(commit(&a, &store, 1), Ok(1));
    assert_eq!(store.get(&m, "shared").await.unwrap(), Some(b"2".to_vec()));
}

#[tokio::test]
async fn writes_past_one_commit_are_refused_and_mark_the_batch() {
    let (store, m) = (memory(), Meter::default());
    let pending = Arc::new(Pending::default());
    let view = pending.view(store);
    for i in 0..MAX_ITEMS {
        view.set(&m, &format!("k{i}"), b"v".to_vec()).await.unwrap();
    }
    assert!(pending.half_full());
    let full = view.set(&m, "one-more", b"v".to_vec()).await;
    assert!(
        matches!(full, Err(StoreError::CommitFull { items: 100, .. })),
        "{full:?}"
    );
    view.set(&m, "k0", b"again".to_vec()).await.unwrap();
    assert!(pending.end_batch(None), "the batch overflowed");
    assert!(!pending.end_batch(None), "told once");
}
