//! Earlier-version rows (keyed by the bare shard id): adopted for `legacy_stream`, refused
//! without it, ignored for another stream; the bare row is never written.

use super::{SHARD, TTL, at, attr, store, table};
use crate::support::dynamo::{Dynamo, Row, n, s};
use shardhost::lease::{LeaseError, LeaseKey, LeaseStore};

/// Writes an earlier-version row keyed by the bare shard id; answers it as stored.
async fn legacy_row(raw: &Dynamo, table: &str, shard: &str, checkpoint: Option<&str>) -> Row {
    let mut attrs = vec![
        ("lease_key", s(shard)),
        ("lease_owner", s("old-pod")),
        ("lease_expiry", n(0)),
        ("lease_counter", n(41)),
    ];
    attrs.extend(checkpoint.map(|c| ("checkpoint", s(c))));
    raw.put_row(table, &attrs).await;
    raw.row(table, shard).await.unwrap()
}

pub async fn a_legacy_row_is_adopted_for_the_named_stream(ep: String) {
    let (raw, table) = table(&ep, "adopt").await;
    let bare = legacy_row(&raw, &table, SHARD, Some("4242/1")).await;
    let store = store(&ep, &table, Some("orders")).await;
    let key = LeaseKey::new("orders", SHARD);

    // A read answers what an acquire would start from, and writes nothing.
    let read = store.read(&key).await.unwrap().unwrap();
    assert_eq!(read.checkpoint, Some(at("4242", 1)));
    assert_eq!(read.owner, None);
    assert!(raw.row(&table, &key.to_string()).await.is_none());

    let a = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    assert_eq!(
        a.checkpoint,
        Some(at("4242", 1)),
        "resumes from the bare row"
    );
    assert_eq!(a.counter, 1);
    let row = raw
        .row(&table, "orders:shardId-000000000000")
        .await
        .unwrap();
    assert_eq!(
        attr(&row, "checkpoint"),
        "4242/1",
        "copied under stream:shard"
    );
    assert_eq!(row.len(), 5);

    // From now on the new row's own checkpoint counts, also for a fresh store.
    let a = store.checkpoint(&a, &at("5000", 0)).await.unwrap();
    store.release(&a).await.unwrap();
    let fresh = self::store(&ep, &table, Some("orders")).await;
    let b = fresh.acquire(&key, "b", TTL).await.unwrap().unwrap();
    assert_eq!(b.checkpoint, Some(at("5000", 0)));
    assert_eq!(
        fresh.read(&key).await.unwrap().unwrap().checkpoint,
        Some(at("5000", 0))
    );

    assert_eq!(
        raw.row(&table, SHARD).await.unwrap(),
        bare,
        "the bare row is untouched"
    );

    // A shard without a bare row starts with no checkpoint.
    let other = LeaseKey::new("orders", "shardId-000000000001");
    let c = store.acquire(&other, "a", TTL).await.unwrap().unwrap();
    assert_eq!(c.checkpoint, None);
}

pub async fn a_legacy_row_without_legacy_stream_refuses_the_shard(ep: String) {
    let (raw, table) = table(&ep, "refuse").await;
    let bare = legacy_row(&raw, &table, SHARD, Some("4242")).await;
    let store = store(&ep, &table, None).await;
    let key = LeaseKey::new("orders", SHARD);

    for answer in [
        store.acquire(&key, "a", TTL).await.map(drop),
        store.read(&key).await.map(drop),
    ] {
        let Err(LeaseError::Refused(message)) = answer else {
            panic!("expected a refusal, got {answer:?}");
        };
        for part in [
            table.as_str(),
            SHARD,
            "orders",
            "legacy_stream = \"orders\"",
        ] {
            assert!(message.contains(part), "{part:?} missing from: {message}");
        }
    }
    assert!(
        raw.row(&table, &key.to_string()).await.is_none(),
        "nothing written"
    );
    assert_eq!(raw.row(&table, SHARD).await.unwrap(), bare);

    // A bare row without a checkpoint holds nothing to resume from: no refusal.
    legacy_row(&raw, &table, "shardId-000000000001", None).await;
    let other = LeaseKey::new("orders", "shardId-000000000001");
    assert!(store.acquire(&other, "a", TTL).await.unwrap().is_some());
}

pub async fn a_legacy_row_of_another_stream_is_ignored(ep: String) {
    let (raw, table) = table(&ep, "ignore").await;
    let bare = legacy_row(&raw, &table, SHARD, Some("4242")).await;
    let store = store(&ep, &table, Some("shipments")).await;
    let key = LeaseKey::new("orders", SHARD);

    assert_eq!(store.read(&key).await.unwrap(), None);
    let a = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    assert_eq!(a.checkpoint, None);
    let row = raw.row(&table, &key.to_string()).await.unwrap();
    assert!(!row.contains_key("checkpoint"), "{row:?}");
    assert_eq!(raw.row(&table, SHARD).await.unwrap(), bare);
}
