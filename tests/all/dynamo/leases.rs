//! The lease store's own rows: acquire, renew, checkpoint, the opened mark, handoff requests and
//! release, each conditional on owner and counter (a stale or stolen view is `Lost` and writes
//! nothing), the exact row layout, malformed rows, and a write whose answer was lost.

use std::time::Duration;

use super::{SHARD, TTL, at, attr, lost, shape, store, table};
use crate::support;
use crate::support::dynamo::{n, s};
use shardhost::lease::{Checkpoint, LeaseError, LeaseKey, LeaseStore, now_ms};

pub async fn a_held_lease_cannot_be_taken_until_it_expires(ep: String) {
    let (_raw, table) = table(&ep, "held").await;
    let store = store(&ep, &table, None).await;
    let key = LeaseKey::new("orders", SHARD);

    let a = store
        .acquire(&key, "a", Duration::from_millis(1500))
        .await
        .unwrap()
        .expect("a free shard is taken");
    assert_eq!(a.owner.as_deref(), Some("a"));
    assert_eq!(a.counter, 1);
    assert!(store.acquire(&key, "b", TTL).await.unwrap().is_none());

    // The scenario: time passes until a's lease has expired.
    let wait = a.expiry_ms.saturating_sub(now_ms()) + 100;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let b = store
        .acquire(&key, "b", TTL)
        .await
        .unwrap()
        .expect("an expired lease is taken");
    assert_eq!(b.owner.as_deref(), Some("b"));
    assert_eq!(b.counter, a.counter + 1);
    assert!(lost(store.renew(&a, TTL).await), "the old holder lost it");
    assert!(store.acquire(&key, "a", TTL).await.unwrap().is_none());
}

pub async fn the_same_owner_regains_its_lease_at_once(ep: String) {
    let (_raw, table) = table(&ep, "regain").await;
    let key = LeaseKey::new("orders", SHARD);
    let first = store(&ep, &table, None).await;
    let a = first.acquire(&key, "pod-a", TTL).await.unwrap().unwrap();
    let a = first.checkpoint(&a, &at("17", 0)).await.unwrap();

    // A restart: a new store, the same owner id, long before the lease expires.
    let second = store(&ep, &table, None).await;
    let again = second
        .acquire(&key, "pod-a", TTL)
        .await
        .unwrap()
        .expect("the same owner regains it");
    assert_eq!(again.counter, a.counter + 1);
    assert_eq!(again.checkpoint, Some(at("17", 0)));
    assert!(second.acquire(&key, "pod-b", TTL).await.unwrap().is_none());
    assert!(
        lost(first.renew(&a, TTL).await),
        "the pre-restart view is stale"
    );
}

pub async fn a_checkpoint_lands_only_while_its_writer_holds_the_lease(ep: String) {
    let (raw, table) = table(&ep, "fence").await;
    let store = store(&ep, &table, None).await;
    let key = LeaseKey::new("orders", SHARD);
    let name = key.to_string();

    let a0 = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    let a1 = store.checkpoint(&a0, &at("7", 0)).await.unwrap();
    assert_eq!(a1.checkpoint, Some(at("7", 0)));
    assert_eq!(a1.counter, a0.counter + 1);
    let a2 = store.checkpoint(&a1, &at("8", 3)).await.unwrap();
    assert_eq!(
        attr(&raw.row(&table, &name).await.unwrap(), "checkpoint"),
        "8/3"
    );

    // A stale view (an older counter) of a lease a still holds is refused.
    assert!(lost(store.checkpoint(&a0, &at("9", 0)).await));
    assert!(lost(store.renew(&a1, TTL).await));

    // Stolen by a direct write of lease_owner: every write of a's is refused and changes nothing.
    raw.set(&table, &name, "lease_owner", s("thief")).await;
    let stolen = shape(&raw.row(&table, &name).await.unwrap());
    assert!(lost(store.checkpoint(&a2, &at("9", 0)).await));
    assert!(lost(store.renew(&a2, TTL).await));
    assert!(lost(store.release(&a2).await));
    let row = raw.row(&table, &name).await.unwrap();
    assert_eq!(shape(&row), stolen, "the row keeps the thief's values");
    assert_eq!(attr(&row, "lease_owner"), "thief");
    assert_eq!(attr(&row, "checkpoint"), "8/3");
    let read = store.read(&key).await.unwrap().unwrap();
    assert_eq!(read.owner.as_deref(), Some("thief"));
    assert_eq!(read.counter, a2.counter);
}

pub async fn release_keeps_the_checkpoint_and_frees_the_shard(ep: String) {
    let (raw, table) = table(&ep, "release").await;
    let store = store(&ep, &table, None).await;
    let key = LeaseKey::new("orders", SHARD);

    let a = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    let a = store.checkpoint(&a, &Checkpoint::ShardEnd).await.unwrap();
    store.release(&a).await.unwrap();
    let row = raw.row(&table, &key.to_string()).await.unwrap();
    assert!(!row.contains_key("lease_owner"), "{row:?}");
    assert_eq!(attr(&row, "lease_expiry"), "0");
    assert_eq!(attr(&row, "checkpoint"), "SHARD_END");
    assert_eq!(attr(&row, "lease_counter"), (a.counter + 1).to_string());
    assert!(lost(store.release(&a).await), "a release is a write too");

    let b = store
        .acquire(&key, "b", TTL)
        .await
        .unwrap()
        .expect("a released shard is free at once");
    assert_eq!(b.checkpoint, Some(Checkpoint::ShardEnd));
    assert_eq!(b.counter, a.counter + 2);
}

pub async fn the_opened_mark_is_written_once_and_kept_by_later_writes(ep: String) {
    let (raw, table) = table(&ep, "opened").await;
    let store = store(&ep, &table, None).await;
    let key = LeaseKey::new("orders", SHARD);

    let a = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    assert_eq!(a.opened_ms, None);
    let marked = store.mark_opened(&a, 1_000).await.unwrap();
    assert_eq!(marked.opened_ms, Some(1_000));
    assert_eq!(
        marked.counter,
        a.counter + 1,
        "a mark is a write of the holder's"
    );
    let again = store.mark_opened(&marked, 2_000).await.unwrap();
    assert_eq!(again.opened_ms, Some(1_000), "an earlier mark is kept");
    assert!(
        lost(store.mark_opened(&a, 3_000).await),
        "a stale view marks nothing"
    );

    let done = store.checkpoint(&again, &at("5", 0)).await.unwrap();
    assert_eq!(done.opened_ms, Some(1_000));
    store.release(&done).await.unwrap();
    let row = raw.row(&table, &key.to_string()).await.unwrap();
    assert_eq!(attr(&row, "opened_at"), "1000", "{row:?}");
    let b = store.acquire(&key, "b", TTL).await.unwrap().unwrap();
    assert_eq!(b.opened_ms, Some(1_000), "an acquire keeps the mark");
}

pub async fn a_handoff_request_keeps_the_row_its_holders_then_reserves_it_for_the_requester(
    ep: String,
) {
    let (raw, table) = table(&ep, "handoff").await;
    let store = store(&ep, &table, None).await;
    let key = LeaseKey::new("orders", SHARD);
    let name = key.to_string();

    let a = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    let seen = store.read(&key).await.unwrap().unwrap();
    assert!(store.request_handoff(&seen, "b").await.unwrap(), "written");
    assert!(
        !store.request_handoff(&seen, "c").await.unwrap(),
        "one request at a time"
    );
    let row = raw.row(&table, &name).await.unwrap();
    assert_eq!(attr(&row, "handoff_to"), "b");
    assert_eq!(
        attr(&row, "lease_counter"),
        a.counter.to_string(),
        "no bump"
    );

    // Still a's: nobody takes it, and a's next write succeeds and tells it of the request.
    assert!(store.acquire(&key, "b", TTL).await.unwrap().is_none());
    let a = store.renew(&a, TTL).await.unwrap();
    assert_eq!(a.handoff_to.as_deref(), Some("b"));
    assert!(
        !store.request_handoff(&seen, "c").await.unwrap(),
        "a stale view asks nothing"
    );
    let a = store.checkpoint(&a, &at("9", 0)).await.unwrap();
    store.release(&a).await.unwrap();

    // Released on the request: reserved for b until a's expiry.
    let row = raw.row(&table, &name).await.unwrap();
    assert!(!row.contains_key("lease_owner"), "{row:?}");
    assert_eq!(attr(&row, "lease_expiry"), a.expiry_ms.to_string());
    assert!(store.acquire(&key, "c", TTL).await.unwrap().is_none());
    let b = store
        .acquire(&key, "b", TTL)
        .await
        .unwrap()
        .expect("reserved for the requester");
    assert_eq!(b.checkpoint, Some(at("9", 0)));
    assert_eq!(b.handoff_to, None);
    let row = raw.row(&table, &name).await.unwrap();
    assert!(!row.contains_key("handoff_to"), "{row:?}");
}

pub async fn rows_have_exactly_the_documented_attributes_and_types(ep: String) {
    let (raw, table) = table(&ep, "layout").await;
    let store = store(&ep, &table, None).await;
    let key = LeaseKey::new("orders", SHARD);

    let before = now_ms();
    let lease = store.acquire(&key, "pod-a", TTL).await.unwrap().unwrap();
    let lease = store
        .checkpoint(
            &lease,
            &at(
                "49590338271490256608559692538361571095921575989136588898",
                2,
            ),
        )
        .await
        .unwrap();
    let lease = store.renew(&lease, TTL).await.unwrap();

    let row = raw
        .row(&table, "orders:shardId-000000000000")
        .await
        .unwrap();
    let types: Vec<(String, &str)> = shape(&row).into_iter().map(|(k, (t, _))| (k, t)).collect();
    let expected = [
        ("checkpoint", "S"),
        ("lease_counter", "N"),
        ("lease_expiry", "N"),
        ("lease_key", "S"),
        ("lease_owner", "S"),
    ];
    assert_eq!(
        types,
        expected.map(|(k, t)| (k.to_owned(), t)).to_vec(),
        "{row:?}"
    );
    assert_eq!(attr(&row, "lease_key"), "orders:shardId-000000000000");
    assert_eq!(attr(&row, "lease_owner"), "pod-a");
    assert_eq!(attr(&row, "lease_counter"), "3");
    assert_eq!(
        attr(&row, "checkpoint"),
        "49590338271490256608559692538361571095921575989136588898/2"
    );
    let expiry: u64 = attr(&row, "lease_expiry").parse().unwrap();
    assert_eq!(expiry, lease.expiry_ms);
    assert!(expiry >= before + TTL.as_millis() as u64 && expiry <= now_ms() + 60_000);
    assert_eq!(store.read(&key).await.unwrap(), Some(lease));
}

pub async fn a_malformed_row_is_a_malformed_error_naming_the_key_and_attribute(ep: String) {
    let (raw, table) = table(&ep, "malformed").await;
    let store = store(&ep, &table, None).await;
    let key = LeaseKey::new("orders", SHARD);
    let a = store.acquire(&key, "a", TTL).await.unwrap().unwrap();

    raw.set(&table, &key.to_string(), "lease_expiry", s("soon"))
        .await;
    let Err(LeaseError::Malformed(message)) = store.read(&key).await else {
        panic!("a malformed lease_expiry is a malformed-row error");
    };
    assert!(message.contains("orders:shardId-000000000000") && message.contains("lease_expiry"));

    raw.set(&table, &key.to_string(), "lease_expiry", n(0))
        .await;
    raw.set(&table, &key.to_string(), "checkpoint", s("somewhere"))
        .await;
    let Err(LeaseError::Malformed(message)) = store.renew(&a, TTL).await else {
        panic!("a malformed checkpoint is a malformed-row error");
    };
    assert!(message.contains("orders:shardId-000000000000") && message.contains("checkpoint"));
}

pub async fn a_lease_write_applied_whose_answer_was_lost_is_not_taken_for_a_lost_lease(ep: String) {
    let (raw, table) = table(&ep, "late").await;
    // The answer of the checkpoint write comes back after the SDK's 3 s attempt timeout: the
    // row is written, the SDK sends the write again, and that one fails its condition (the
    // counter moved).
    let proxy = tokio::task::spawn_blocking({
        let ep = ep.clone();
        move || {
            support::proxy::LateAnswerProxy::start(
                &ep,
                "UpdateItem",
                ":checkpoint",
                Duration::from_secs(4),
            )
        }
    })
    .await
    .unwrap();
    let store = store(&proxy.url(), &table, None).await;
    let key = LeaseKey::new("orders", SHARD);
    let lease = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    proxy.arm();
    let written = store
        .checkpoint(
            &lease,
            &at(
                "49590338271490256608559692538361571095921575989136588898",
                0,
            ),
        )
        .await;
    assert_eq!(
        proxy.late_answers(),
        1,
        "the checkpoint's answer was held back"
    );
    let written = written.expect("the holder's own write, applied once, is not a lost lease");
    assert_eq!(written.owner.as_deref(), Some("a"));
    assert_eq!(written.counter, lease.counter + 1, "written once");
    let row = raw.row(&table, &key.to_string()).await.expect("the row");
    assert_eq!(
        attr(&row, "checkpoint"),
        "49590338271490256608559692538361571095921575989136588898"
    );
    // The holder goes on writing with what it was answered.
    let renewed = store
        .renew(&written, TTL)
        .await
        .expect("the lease is still held");
    assert_eq!(renewed.counter, written.counter + 1);
    tokio::task::spawn_blocking(move || drop(proxy))
        .await
        .unwrap();
}
