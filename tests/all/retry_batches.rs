//! Retry copies of a batch go out together, against kinesis-mock: one PutRecords per stream per
//! call's worth of copies (never a PutRecord each), through a proxy that lets through only the
//! Kinesis actions the IAM table (docs/operations/iam.md) grants, and every copy arrives and is handled again.

use std::path::Path;

use crate::retries::SECRET;
use crate::support::kinesis::Kinesis;
use crate::support::proxy::PolicyProxy;
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Subscription, guest, kinesis_endpoint, unique,
};
use shardhost::record::Outcome;
use shardhost::testing::envelope::{self, Kind};

/// The Kinesis actions the IAM table (docs/operations/iam.md) grants (every `| Kinesis` row).
fn kinesis_policy() -> Vec<String> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations/iam.md");
    let doc = std::fs::read_to_string(doc).unwrap();
    let mut actions = Vec::new();
    for row in doc.lines().filter(|l| l.starts_with("| Kinesis")) {
        let column = row.split('|').nth(2).expect("an actions column");
        actions.extend(column.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    assert!(
        !actions.is_empty(),
        "the IAM table (docs/operations/iam.md) has Kinesis rows"
    );
    actions
}

#[test]
fn the_copies_of_a_call_are_published_with_one_put_records_and_all_arrive() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("batched-copies");
    k.create(&stream, 1);
    k.create(&format!("{stream}-dead"), 1);
    for i in 0..50 {
        k.put(&stream, &format!("key-{i}"), "retry-until:2");
    }
    let proxy = PolicyProxy::start(&ep, &kinesis_policy());
    let dir = Scratch::new("retry-batches");
    let config = HostToml::kinesis(&proxy.url())
        .set("host", "retry_key", SECRET)
        .subscription(
            Subscription::new("capped", &stream, guest("scripted"))
                .trim_horizon()
                .batch(10)
                .poll_interval("50ms")
                .max_attempts(3)
                .dead_letter(&format!("{stream}-dead")),
        );
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("every record handled at its second attempt", |b| {
        let t = b.totals("capped");
        t.delivered == 100 && t.settled == 100
    });
    host.stop();
    let outcomes = seen.all();
    let acked = outcomes
        .iter()
        .filter(|s| s.outcome == Outcome::Ack)
        .count();
    let retried = outcomes
        .iter()
        .filter(|s| s.outcome == Outcome::Retry)
        .count();
    assert_eq!(
        (retried, acked),
        (50, 50),
        "each record retried once, then acked"
    );
    let copies = k
        .read_all(&stream)
        .into_iter()
        .filter_map(|(_, _, data)| {
            let (h, _) = envelope::unwrap(&crate::retries::fleet_key(), &data).ok()??;
            assert_eq!((h.kind, h.attempt), (Kind::Retry, 2));
            Some(h.origin.sequence_number)
        })
        .count();
    assert_eq!(copies, 50, "every copy arrived, once");
    assert_eq!(
        proxy.denied(),
        Vec::<String>::new(),
        "the documented policy is all it needs"
    );
    let (singles, batches) = (proxy.count("PutRecord"), proxy.count("PutRecords"));
    assert_eq!(singles, 0, "copies went out one PutRecord each");
    assert!(
        (1..=5).contains(&batches),
        "{batches} PutRecords calls for 50 copies handled 10 a call"
    );
}
