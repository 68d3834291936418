//! TransactWriteItems on moto, as exactly-once state will use it: the lease row's checkpoint
//! update (conditional on owner and counter) and state items (conditional on being new, or on
//! their value) in one transaction. It commits whole, or is cancelled whole with
//! `TransactionCanceledException` whose cancellation reasons say which item's condition failed
//! (`ConditionalCheckFailed` at its index, `None` at the others): that is how a lost lease is told
//! from a state key conflict.

use std::time::Duration;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    KeyType, Put, ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TransactWriteItem,
    Update,
};
use shardhost::lease::{Checkpoint, DynamoLeaseStore, DynamoOptions, Lease, LeaseKey, LeaseStore};
use shardhost::record::Position;

use crate::support::dynamo::{Dynamo, Row, n, s};
use crate::support::{dynamodb_txn_endpoint, unique};

const TTL: Duration = Duration::from_secs(60);

/// What TransactWriteItems answered.
pub(super) type Answer = Result<(), SdkError<TransactWriteItemsError, HttpResponse>>;

/// A lease table with one lease held by `a`, and an empty state table keyed `key` (S).
pub(super) struct Tables {
    pub(super) raw: Dynamo,
    pub(super) leases: String,
    pub(super) state: String,
    store: DynamoLeaseStore,
    lease: Lease,
}

pub(super) async fn tables(ep: &str, tag: &str) -> Tables {
    let raw = Dynamo::new(ep);
    let leases = unique(&format!("{tag}-leases"));
    let state = unique(&format!("{tag}-state"));
    raw.create_lease_table(&leases).await;
    raw.create_table(&state, &[("key", KeyType::Hash, ScalarAttributeType::S)])
        .await;
    let store = DynamoLeaseStore::connect(DynamoOptions::local(&leases, ep)).await;
    let key = LeaseKey::new("orders", "shardId-000000000000");
    let lease = store.acquire(&key, "a", TTL).await.unwrap().unwrap();
    Tables {
        raw,
        leases,
        state,
        store,
        lease,
    }
}

impl Tables {
    /// The checkpoint update of `lease` as its holder would send it in a transaction.
    fn checkpoint(&self, lease: &Lease, sequence: &str) -> TransactWriteItem {
        let update = Update::builder()
            .table_name(&self.leases)
            .key("lease_key", s(&lease.key.to_string()))
            .update_expression("SET checkpoint = :cp, lease_counter = lease_counter + :one")
            .condition_expression("lease_owner = :me AND lease_counter = :seen")
            .expression_attribute_values(":cp", s(sequence))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":me", s(lease.owner.as_deref().unwrap()))
            .expression_attribute_values(":seen", n(lease.counter))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .unwrap();
        TransactWriteItem::builder().update(update).build()
    }

    /// A state item put on the condition that the key is new.
    pub(super) fn put_new(&self, key: &str, value: &str) -> TransactWriteItem {
        let put = self
            .put(key, value)
            .condition_expression("attribute_not_exists(#k)")
            .expression_attribute_names("#k", "key");
        TransactWriteItem::builder()
            .put(put.build().unwrap())
            .build()
    }

    /// A state item put on the condition that it holds `expected` now.
    fn put_over(&self, key: &str, expected: &str, value: &str) -> TransactWriteItem {
        let put = self
            .put(key, value)
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", "value")
            .expression_attribute_values(":v", s(expected))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        TransactWriteItem::builder()
            .put(put.build().unwrap())
            .build()
    }

    pub(super) fn put(
        &self,
        key: &str,
        value: &str,
    ) -> aws_sdk_dynamodb::types::builders::PutBuilder {
        Put::builder()
            .table_name(&self.state)
            .item("key", s(key))
            .item("value", s(value))
    }

    pub(super) async fn transact(&self, items: Vec<TransactWriteItem>) -> Answer {
        self.raw
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
            .map(drop)
    }

    /// The state item `key`'s value, or `None` when there is no such item.
    async fn value(&self, key: &str) -> Option<String> {
        let row = self.raw.row_keyed(&self.state, "key", key).await?;
        Some(row["value"].as_s().unwrap().clone())
    }

    async fn lease_row(&self) -> Row {
        self.raw
            .row(&self.leases, &self.lease.key.to_string())
            .await
            .unwrap()
    }
}

/// One cancellation reason as (code, message, the item's attributes when it came back).
type Reason = (Option<String>, Option<String>, Option<Row>);

/// The cancellation reasons of a `TransactionCanceledException`; panics on any other answer.
fn cancelled(answer: Answer) -> Vec<Reason> {
    let error = answer.expect_err("the transaction is cancelled");
    let Some(TransactWriteItemsError::TransactionCanceledException(e)) = error.as_service_error()
    else {
        panic!("not TransactionCanceledException: {error:?}");
    };
    eprintln!("moto answered: {e:?}");
    e.cancellation_reasons()
        .iter()
        .map(|r| {
            (
                r.code().map(str::to_owned),
                r.message().map(str::to_owned),
                r.item().cloned(),
            )
        })
        .collect()
}

fn codes(reasons: &[Reason]) -> Vec<Option<&str>> {
    reasons.iter().map(|(code, _, _)| code.as_deref()).collect()
}

#[tokio::test]
async fn a_checkpoint_and_state_writes_in_one_transaction_commit_together() {
    let Some(ep) = dynamodb_txn_endpoint() else {
        return;
    };
    let t = tables(&ep, "txn-commit").await;
    t.raw
        .put_row(&t.state, &[("key", s("seen")), ("value", s("v1"))])
        .await;

    t.transact(vec![
        t.checkpoint(&t.lease, "100"),
        t.put_new("fresh", "x"),
        t.put_over("seen", "v1", "v2"),
    ])
    .await
    .expect("every condition holds: the transaction commits");

    let held = t.store.read(&t.lease.key).await.unwrap().unwrap();
    assert_eq!(
        held.checkpoint,
        Some(Checkpoint::At(Position::new("100", 0)))
    );
    assert_eq!(held.counter, t.lease.counter + 1);
    assert_eq!(held.owner.as_deref(), Some("a"));
    assert_eq!(t.value("fresh").await.as_deref(), Some("x"));
    assert_eq!(t.value("seen").await.as_deref(), Some("v2"));
    // The holder goes on with the lease store, from the row the transaction wrote.
    t.store.renew(&held, TTL).await.expect("still held");
}

#[tokio::test]
async fn a_state_key_conflict_cancels_the_whole_transaction_and_names_its_item() {
    let Some(ep) = dynamodb_txn_endpoint() else {
        return;
    };
    let t = tables(&ep, "txn-conflict").await;
    t.raw
        .put_row(&t.state, &[("key", s("taken")), ("value", s("theirs"))])
        .await;
    t.raw
        .put_row(&t.state, &[("key", s("seen")), ("value", s("v1"))])
        .await;
    let lease_before = t.lease_row().await;

    // A key that exists already.
    let reasons = cancelled(
        t.transact(vec![
            t.checkpoint(&t.lease, "100"),
            t.put_new("taken", "mine"),
            t.put_over("seen", "v1", "v2"),
        ])
        .await,
    );
    assert_eq!(
        codes(&reasons),
        [Some("None"), Some("ConditionalCheckFailed"), Some("None")],
        "{reasons:?}"
    );
    // A value that changed since it was read.
    let reasons = cancelled(
        t.transact(vec![
            t.checkpoint(&t.lease, "100"),
            t.put_new("fresh", "x"),
            t.put_over("seen", "v0", "v2"),
        ])
        .await,
    );
    assert_eq!(
        codes(&reasons),
        [Some("None"), Some("None"), Some("ConditionalCheckFailed")],
        "{reasons:?}"
    );
    let (_, _, old) = &reasons[2];
    assert_eq!(
        old.as_ref()
            .map(|item| item["value"].as_s().unwrap().as_str()),
        Some("v1"),
        "ALL_OLD answers the item as it is"
    );

    // Nothing of either was written.
    assert_eq!(t.lease_row().await, lease_before);
    assert_eq!(t.value("taken").await.as_deref(), Some("theirs"));
    assert_eq!(t.value("fresh").await, None);
    assert_eq!(t.value("seen").await.as_deref(), Some("v1"));
}

#[tokio::test]
async fn a_lost_lease_cancels_the_whole_transaction_and_names_the_lease_row() {
    let Some(ep) = dynamodb_txn_endpoint() else {
        return;
    };
    let t = tables(&ep, "txn-lost").await;
    // Another instance took the shard since `a` last wrote.
    t.raw
        .set(&t.leases, &t.lease.key.to_string(), "lease_owner", s("b"))
        .await;
    let lease_before = t.lease_row().await;

    let reasons = cancelled(
        t.transact(vec![t.checkpoint(&t.lease, "100"), t.put_new("fresh", "x")])
            .await,
    );
    assert_eq!(
        codes(&reasons),
        [Some("ConditionalCheckFailed"), Some("None")],
        "{reasons:?}"
    );
    let (_, _, row) = &reasons[0];
    let row = row
        .as_ref()
        .expect("ALL_OLD answers the lease row as it is");
    assert_eq!(row["lease_owner"].as_s().unwrap(), "b");

    assert_eq!(t.lease_row().await, lease_before);
    assert_eq!(t.value("fresh").await, None);
    // Both conditions failing: both are named.
    t.raw
        .put_row(&t.state, &[("key", s("fresh")), ("value", s("theirs"))])
        .await;
    let reasons = cancelled(
        t.transact(vec![t.checkpoint(&t.lease, "100"), t.put_new("fresh", "x")])
            .await,
    );
    assert_eq!(
        codes(&reasons),
        [
            Some("ConditionalCheckFailed"),
            Some("ConditionalCheckFailed")
        ],
        "{reasons:?}"
    );
}

/// DynamoDB applies a TransactWriteItems once per ClientRequestToken: the SDK sets one and sends
/// it again when it retries (an answer that came too late), and a repeat within 10 minutes is
/// answered as the first was, without writing again. moto ignores the token and evaluates the
/// repeat again: after an applied checkpoint it is cancelled (the counter moved, the key exists).
/// So on moto a retried commit whose first attempt landed looks like a lost lease; a holder must
/// look at the row before believing that, as the lease store does for its own writes.
#[tokio::test]
async fn moto_evaluates_a_transaction_sent_again_with_the_same_token_again() {
    let Some(ep) = dynamodb_txn_endpoint() else {
        return;
    };
    let t = tables(&ep, "txn-token").await;
    let send = || {
        t.raw
            .client
            .transact_write_items()
            .transact_items(t.checkpoint(&t.lease, "100"))
            .transact_items(t.put_new("fresh", "x"))
            .client_request_token("commit-1")
            .send()
    };
    send().await.expect("the first attempt commits");
    let reasons = cancelled(send().await.map(drop));
    assert_eq!(
        codes(&reasons),
        [
            Some("ConditionalCheckFailed"),
            Some("ConditionalCheckFailed")
        ],
        "{reasons:?}"
    );
    let row = t.lease_row().await;
    assert_eq!(
        row["lease_counter"].as_n().unwrap(),
        &(t.lease.counter + 1).to_string(),
        "applied once"
    );
}
