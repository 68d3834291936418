//! The table check at start: a missing table is refused with the command that creates it, a
//! wrong key schema is refused, and a denied DescribeTable is only a warning.

use super::{SHARD, TTL, store, table};
use crate::support;
use crate::support::dynamo::{Dynamo, KeySpec};
use crate::support::unique;
use aws_sdk_dynamodb::types::{KeyType, ScalarAttributeType};
use shardhost::lease::{LeaseError, LeaseKey, LeaseStore};

pub async fn a_missing_table_is_refused_with_the_create_command(ep: String) {
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

pub async fn a_table_with_the_wrong_key_schema_is_refused(ep: String) {
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

pub async fn a_lease_store_without_describe_table_permission_still_starts(ep: String) {
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
