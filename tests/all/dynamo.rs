//! The DynamoDB lease store against dynalite (`tests/stack` starts it): conditional writes on
//! owner and counter, release, the exact row layout ruststream-kinesis 0.7 writes, earlier-version
//! rows through `legacy_stream`, and the table check at start. Every test has its own table.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::dynamo::{Dynamo, KeySpec, Row, n, s};
use crate::support::{dynamodb_endpoint, unique};
use aws_sdk_dynamodb::types::{AttributeValue, KeyType, ScalarAttributeType};
use shardhost::fleet_table::{CHUNK_BYTES, Desired, FleetTable, SetDesired, StoredComponent};
use shardhost::lease::{
    Checkpoint, DynamoLeaseStore, DynamoOptions, LeaseError, LeaseKey, LeaseStore, now_ms,
};
use shardhost::record::Position;

const TTL: Duration = Duration::from_secs(60);
const SHARD: &str = "shardId-000000000000";

/// A new lease table and a raw client on it.
async fn table(endpoint: &str, tag: &str) -> (Dynamo, String) {
    let raw = Dynamo::new(endpoint);
    let table = unique(tag);
    raw.create_lease_table(&table).await;
    (raw, table)
}

async fn store(endpoint: &str, table: &str, legacy_stream: Option<&str>) -> DynamoLeaseStore {
    let options = DynamoOptions {
        legacy_stream: legacy_stream.map(str::to_owned),
        ..DynamoOptions::local(table, endpoint)
    };
    DynamoLeaseStore::connect(options).await
}

fn at(seq: &str, sub: u32) -> Checkpoint {
    Checkpoint::At(Position::new(seq, sub))
}

fn lost<T: std::fmt::Debug>(r: Result<T, LeaseError>) -> bool {
    matches!(r, Err(LeaseError::Lost { .. }))
}

/// A row's attributes as (name, type, value) text, for comparing rows.
fn shape(row: &Row) -> BTreeMap<String, (&'static str, String)> {
    row.iter()
        .map(|(k, v)| {
            let tv = match v {
                AttributeValue::S(s) => ("S", s.clone()),
                AttributeValue::N(n) => ("N", n.clone()),
                other => ("other", format!("{other:?}")),
            };
            (k.clone(), tv)
        })
        .collect()
}

fn attr<'a>(row: &'a Row, name: &str) -> &'a str {
    match &row[name] {
        AttributeValue::S(v) | AttributeValue::N(v) => v,
        other => panic!("{name} is {other:?}"),
    }
}

#[tokio::test]
async fn a_held_lease_cannot_be_taken_until_it_expires() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn the_same_owner_regains_its_lease_at_once() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn a_checkpoint_lands_only_while_its_writer_holds_the_lease() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn release_keeps_the_checkpoint_and_frees_the_shard() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn rows_have_exactly_the_documented_attributes_and_types() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn a_legacy_row_is_adopted_for_the_named_stream() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn a_legacy_row_without_legacy_stream_refuses_the_shard() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn a_legacy_row_of_another_stream_is_ignored() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn a_malformed_row_is_a_malformed_error_naming_the_key_and_attribute() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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

#[tokio::test]
async fn a_missing_table_is_refused_with_the_create_command() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
    let table = unique("missing");
    let store = store(&ep, &table, None).await;
    let Err(LeaseError::Refused(message)) = store.check_table().await else {
        panic!("a missing table is refused");
    };
    assert!(
        message.contains(&format!("`{table}` does not exist")),
        "{message}"
    );
    let command = format!(
        "aws dynamodb create-table --table-name {table} \
         --attribute-definitions AttributeName=lease_key,AttributeType=S \
         --key-schema AttributeName=lease_key,KeyType=HASH --billing-mode PAY_PER_REQUEST"
    );
    assert!(message.contains(&command), "{message}");

    let key = LeaseKey::new("orders", SHARD);
    let Err(LeaseError::Store(message)) = store.acquire(&key, "a", TTL).await else {
        panic!("writes to a missing table are store errors");
    };
    assert!(message.contains(&table), "{message}");
}

#[tokio::test]
async fn a_table_with_the_wrong_key_schema_is_refused() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
    let raw = Dynamo::new(&ep);
    let cases: [(&[KeySpec], &str); 3] = [
        (
            &[("id", KeyType::Hash, ScalarAttributeType::S)],
            "id (HASH, S)",
        ),
        (
            &[("lease_key", KeyType::Hash, ScalarAttributeType::N)],
            "lease_key (HASH, N)",
        ),
        (
            &[
                ("lease_key", KeyType::Hash, ScalarAttributeType::S),
                ("shard", KeyType::Range, ScalarAttributeType::S),
            ],
            "lease_key (HASH, S), shard (RANGE, S)",
        ),
    ];
    for (keys, found) in cases {
        let table = unique("schema");
        raw.create_table(&table, keys).await;
        let store = store(&ep, &table, None).await;
        let Err(LeaseError::Refused(message)) = store.check_table().await else {
            panic!("{found} is refused");
        };
        assert!(
            message.contains(&table) && message.contains(found),
            "{message}"
        );
    }

    let (_, good) = table(&ep, "schema-ok").await;
    store(&ep, &good, None).await.check_table().await.unwrap();
}

#[tokio::test]
async fn a_lease_store_without_describe_table_permission_still_starts() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
    let (_raw, table) = table(&ep, "nodescribe").await;
    // The seeds' IAM policy grants GetItem and UpdateItem, not DescribeTable.
    let proxy = tokio::task::spawn_blocking({
        let ep = ep.clone();
        move || support::proxy::DenyProxy::start(&ep, "DescribeTable")
    })
    .await
    .unwrap();
    let store = store(&proxy.url(), &table, None).await;
    store
        .check_table()
        .await
        .expect("a denied DescribeTable is a warning, not a refusal");
    let key = LeaseKey::new("orders", SHARD);
    let lease = store
        .acquire(&key, "a", TTL)
        .await
        .expect("the table works through the same identity")
        .expect("a free lease is taken");
    assert_eq!(lease.owner.as_deref(), Some("a"));
    tokio::task::spawn_blocking(move || drop(proxy))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_component_larger_than_an_item_is_stored_in_parts_beside_the_leases_and_read_back_whole()
{
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
    let (raw, table) = table(&ep, "parts").await;
    let store = FleetTable::beside(&store(&ep, &table, None).await);
    let bytes: Vec<u8> = (0..CHUNK_BYTES * 2 + 1234)
        .map(|i| (i * 31 % 251) as u8)
        .collect();
    let stored = store
        .put_component("svc", "sub", "v1", &bytes)
        .await
        .unwrap();
    assert_eq!(stored.chunks, 3);
    assert_eq!(
        store.component("svc", "sub", &stored).await.unwrap(),
        Some(bytes)
    );
    // Beside the leases: keys no `stream:shard` or bare shard id can be.
    for i in 0..3 {
        let upload = stored.upload.as_deref().expect("an upload id");
        let key = format!("#shardhost#component#svc#sub#v1#{upload}#{i}");
        assert!(raw.row(&table, &key).await.is_some(), "{key}");
    }
    store.delete_component("svc", "sub", &stored).await.unwrap();
    assert_eq!(store.component("svc", "sub", &stored).await.unwrap(), None);
}

#[tokio::test]
async fn a_desired_version_written_over_a_row_read_earlier_is_refused() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
    let (_raw, table) = table(&ep, "desired").await;
    let store = FleetTable::beside(&store(&ep, &table, None).await);
    let max = 64 << 20;
    let desired = |v: &str, generation: u64| Desired {
        component: StoredComponent {
            version: v.repeat(64),
            size: 1,
            chunks: 1,
            upload: Some("u1".into()),
        },
        generation,
        deploy_id: "lineage".into(),
        deployed_by: "test".into(),
        deployed_at_ms: now_ms(),
        previous: None,
        previous_signed: None,
        signed: None,
    };
    let nothing = store.desired("svc", "sub", max).await.unwrap();
    assert_eq!(nothing.row, None);
    let written = store
        .set_desired("svc", "sub", &desired("a", 1), &nothing.seen)
        .await
        .unwrap();
    assert!(matches!(written, SetDesired::Done));
    // A second first deploy comes too late.
    let written = store
        .set_desired("svc", "sub", &desired("b", 2), &nothing.seen)
        .await
        .unwrap();
    assert!(matches!(written, SetDesired::Conflict));
    let first = store.desired("svc", "sub", max).await.unwrap();
    let written = store
        .set_desired("svc", "sub", &desired("b", 2), &first.seen)
        .await
        .unwrap();
    assert!(matches!(written, SetDesired::Done));
    // One that read generation 1 comes too late now.
    let written = store
        .set_desired("svc", "sub", &desired("c", 3), &first.seen)
        .await
        .unwrap();
    assert!(matches!(written, SetDesired::Conflict));
    let Some(Ok(now)) = store.desired("svc", "sub", max).await.unwrap().row else {
        panic!("a usable row");
    };
    assert_eq!((now.component.version, now.generation), ("b".repeat(64), 2));
    // Another service's rows are its own.
    assert_eq!(store.desired("other", "sub", max).await.unwrap().row, None);
}

#[tokio::test]
async fn a_lease_write_applied_whose_answer_was_lost_is_not_taken_for_a_lost_lease() {
    let Some(ep) = dynamodb_endpoint() else {
        return;
    };
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
