//! Requests at once: `tests/stack` serves moto one request at a time, so each is atomic as in
//! DynamoDB.

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::TransactWriteItem;

use super::transact::tables;
use crate::support::dynamo::s;
use crate::support::dynamodb_txn_endpoint;

/// moto's server takes no lock of its own: a cancelled transaction puts back copies of the tables
/// it wrote, taken when it started, so a write another request made to one of them meanwhile
/// was lost although it was answered (against a bare `moto_server`, 1 to 9 of these 300 writes,
/// in each of 6 runs). `tests/stack` serves moto one request at a time
/// (`tests/moto_one_at_a_time.py`): every answered write stays.
#[tokio::test]
async fn writes_beside_cancelled_transactions_are_kept() {
    let Some(ep) = dynamodb_txn_endpoint() else {
        return;
    };
    let t = tables(&ep, "txn-beside").await;
    // Enough items that copying the table takes a while.
    for i in 0..100 {
        let padding = "x".repeat(200);
        t.raw
            .put_row(
                &t.state,
                &[("key", s(&format!("pad-{i}"))), ("value", s(&padding))],
            )
            .await;
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    let cancelling = async || {
        let mut cancelled = 0;
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            let put = t
                .put("never", "x")
                .condition_expression("attribute_exists(#k)")
                .expression_attribute_names("#k", "key");
            let item = TransactWriteItem::builder()
                .put(put.build().unwrap())
                .build();
            let answer = t.transact(vec![item]).await;
            let canceled = answer.as_ref().err().and_then(|e| e.as_service_error());
            assert!(
                matches!(
                    canceled,
                    Some(TransactWriteItemsError::TransactionCanceledException(_))
                ),
                "{answer:?}"
            );
            cancelled += 1;
        }
        cancelled
    };
    let writing = async |writer: usize| {
        let mut written = Vec::new();
        for i in 0..75 {
            let key = format!("w{writer}-{i}");
            if writer.is_multiple_of(2) {
                t.transact(vec![t.put_new(&key, "x")]).await.unwrap();
            } else {
                t.raw
                    .put_row(&t.state, &[("key", s(&key)), ("value", s("x"))])
                    .await;
            }
            written.push(key);
        }
        written
    };
    let writers = async {
        let written = futures_util::future::join_all((0..4).map(writing)).await;
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        written.concat()
    };
    let cancellers = futures_util::future::join_all((0..4).map(|_| cancelling()));
    let (written, cancelled) = tokio::join!(writers, cancellers);
    assert!(cancelled.iter().sum::<usize>() > 0);

    let stored: std::collections::HashSet<String> = t
        .raw
        .rows(&t.state)
        .await
        .iter()
        .map(|row| row["key"].as_s().unwrap().clone())
        .collect();
    let lost: Vec<&String> = written.iter().filter(|k| !stored.contains(*k)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} answered writes lost: {lost:?}",
        lost.len(),
        written.len()
    );
}
