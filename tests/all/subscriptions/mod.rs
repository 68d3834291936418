//! Two subscriptions on one stream (issue 42): each handles every record through lease rows of
//! its own, polling and by fan-out, on the memory store and a DynamoDB lease table, with records
//! put while both read and a kill -9 and restart in the middle; each checkpoint stays behind
//! what its own subscription handled. A shared `stream:shard` row another host's subscription
//! took is refused, never shared. `table.rs`: the tests on a DynamoDB lease table.

mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shardhost::source::StartPosition;
use shardhost::status::StatusBoard;

use crate::support::kinesis::Kinesis;
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Seen, Subscription, guest, kinesis_endpoint, unique,
    wait_until_else,
};

const SUBSCRIPTIONS: [&str; 2] = ["one", "two"];

/// A record: its shard and sequence number.
type Put = (String, String);

/// Subscription `name` of `stream` with the scripted guest, from the stream's beginning.
fn sub(name: &str, stream: &str, read: &str) -> Subscription {
    Subscription::new(name, stream, guest("scripted"))
        .trim_horizon()
        .batch(10)
        .poll_interval("100ms")
        .set("read", read)
}

/// Whether sequence number `seq` is at or before the checkpoint `checkpoint` (`SEQ`, `SEQ/SUB`
/// or `SHARD_END`); sequence numbers compare as numbers.
fn at_or_before(seq: &str, checkpoint: &str) -> bool {
    if checkpoint == "SHARD_END" {
        return true;
    }
    let cp = checkpoint.split('/').next().unwrap_or_default();
    (seq.len(), seq) <= (cp.len(), cp)
}

/// A checkpoint a subscription had on a shard, and what it had handled by then.
struct Sample {
    subscription: String,
    shard: String,
    checkpoint: String,
    handled: BTreeSet<Put>,
}

/// Asserts that no checkpoint passed a record its subscription had not handled.
fn assert_behind_what_was_handled(samples: &[Sample], records: &[Put]) {
    for s in samples {
        for (shard, seq) in records {
            if *shard == s.shard && at_or_before(seq, &s.checkpoint) {
                assert!(
                    s.handled.contains(&(shard.clone(), seq.clone())),
                    "subscription `{}` checkpointed shard {shard} at {} past record {seq}, \
                     which it never handled",
                    s.subscription,
                    s.checkpoint
                );
            }
        }
    }
}

/// Asserts that each subscription handled every record.
fn assert_each_handled_all(handled: &BTreeMap<String, BTreeSet<Put>>, records: &[Put]) {
    for name in SUBSCRIPTIONS {
        let mine = handled.get(name).cloned().unwrap_or_default();
        let missed: Vec<&Put> = records.iter().filter(|r| !mine.contains(*r)).collect();
        assert!(
            missed.is_empty(),
            "subscription `{name}` never handled {} of {} records: {:?}",
            missed.len(),
            records.len(),
            &missed[..missed.len().min(5)]
        );
    }
}

/// What each subscription handled, from a host's outcome tap.
fn by_subscription(seen: &[Seen]) -> BTreeMap<String, BTreeSet<Put>> {
    let mut out: BTreeMap<String, BTreeSet<Put>> = BTreeMap::new();
    for s in seen {
        out.entry(s.subscription.clone())
            .or_default()
            .insert((s.shard_id.clone(), s.sequence_number.clone()));
    }
    out
}

/// Notes every checkpoint of the board, with what the tap saw its subscription handle: the tap
/// sees a record as it is settled, before any checkpoint passes it, so checkpoints are read
/// first.
fn sample(status: &StatusBoard, seen: &Outcomes, samples: &mut Vec<Sample>) {
    let board = status.snapshot();
    let handled = by_subscription(&seen.all());
    for (subscription, shard, s) in board {
        if let Some(checkpoint) = s.checkpoint {
            samples.push(Sample {
                handled: handled.get(&subscription).cloned().unwrap_or_default(),
                subscription,
                shard,
                checkpoint,
            });
        }
    }
}

/// Every record of every shard of `stream` in the host's embedded stream.
fn embedded_records(host: &Running, stream: &str) -> Vec<Put> {
    host.block_on(async {
        let mut records = Vec::new();
        for shard in host.source.list_shards(stream).await.unwrap() {
            let mut reader = host
                .source
                .open(stream, &shard.shard_id, &StartPosition::TrimHorizon)
                .await
                .unwrap();
            let read = reader.read(10_000).await.unwrap();
            records.extend(
                read.records
                    .into_iter()
                    .map(|r| (shard.shard_id.clone(), r.sequence_number)),
            );
        }
        records
    })
}

#[test]
fn two_subscriptions_on_the_embedded_stream_each_handle_every_record() {
    let dir = Scratch::new("two-subs-embedded");
    let stream = "orders";
    let config = HostToml::memory()
        .leases("checkpoint_every", "100ms")
        .subscription(sub("one", stream, "polling").create_if_missing(4))
        .subscription(sub("two", stream, "polling").create_if_missing(4));
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    let mut samples = Vec::new();
    for i in 0..600 {
        host.put(stream, &format!("key-{i}"), format!("r-{i}").into_bytes());
        if i % 20 == 0 {
            // Both read while records come in, a few at a time.
            std::thread::sleep(Duration::from_millis(20));
            sample(&host.status, &seen, &mut samples);
        }
    }
    wait_until_else(
        "each subscription to handle all 600 records",
        Duration::from_secs(60),
        || {
            sample(&host.status, &seen, &mut samples);
            let handled = by_subscription(&seen.all());
            SUBSCRIPTIONS
                .iter()
                .all(|s| handled.get(*s).is_some_and(|h| h.len() >= 600))
        },
        || {
            format!(
                "{:#?}",
                by_subscription(&seen.all())
                    .iter()
                    .map(|(s, h)| (s, h.len()))
                    .collect::<Vec<_>>()
            )
        },
    );
    let records = embedded_records(&host, stream);
    assert_eq!(records.len(), 600);
    assert_each_handled_all(&by_subscription(&seen.all()), &records);
    assert_behind_what_was_handled(&samples, &records);
    let text = host.metrics();
    for name in SUBSCRIPTIONS {
        let label = format!("subscription=\"{name}\"");
        let acked = crate::support::metric(
            &text,
            "shardhost_records_total",
            &[&label, "outcome=\"ack\""],
        );
        assert!(acked >= 600.0, "records_total of `{name}`: {acked}");
    }
    host.stop();
}

#[test]
fn two_fan_out_subscriptions_on_kinesis_each_handle_every_record() {
    let Some(endpoint) = kinesis_endpoint() else {
        return;
    };
    let k = Kinesis::new(&endpoint);
    let stream = unique("two-subs-fan-out");
    k.create(&stream, 2);
    let dir = Scratch::new("two-subs-fan-out");
    let config = HostToml::kinesis(&endpoint)
        .leases("renew_every", "1s")
        .leases("list_every", "300ms")
        .leases("checkpoint_every", "100ms")
        .subscription(sub("one", &stream, "fan-out"))
        .subscription(sub("two", &stream, "fan-out"));
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    let mut samples = Vec::new();
    let mut records = Vec::new();
    for i in 0..200 {
        records.push(k.put(&stream, &format!("key-{i}"), format!("r-{i}")));
        if i % 20 == 0 {
            sample(&host.status, &seen, &mut samples);
        }
    }
    wait_until_else(
        "each subscription to handle all 200 records",
        Duration::from_secs(60),
        || {
            sample(&host.status, &seen, &mut samples);
            let handled = by_subscription(&seen.all());
            SUBSCRIPTIONS.iter().all(|s| {
                records
                    .iter()
                    .all(|r| handled.get(*s).is_some_and(|h| h.contains(r)))
            })
        },
        || {
            format!(
                "{:?}",
                by_subscription(&seen.all())
                    .iter()
                    .map(|(s, h)| (s, h.len()))
                    .collect::<Vec<_>>()
            )
        },
    );
    assert_each_handled_all(&by_subscription(&seen.all()), &records);
    assert_behind_what_was_handled(&samples, &records);
    host.stop();
}

#[test]
fn check_says_which_lease_rows_each_subscription_reads_through() {
    let dir = Scratch::new("two-subs-check");
    let config = HostToml::memory()
        .subscription(sub("one", "orders", "polling"))
        .subscription(sub("two", "orders", "polling"))
        .subscription(sub("three", "orders", "polling").set("lease_key", "stream"))
        .subscription(sub("alone", "invoices", "polling"));
    let path = dir.write("shardhost.toml", config.to_string());
    let out = crate::support::fleet::shardhost(&["check", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "lease rows: orders:SHARD#one (its own: `two`, `three` read stream `orders` too)",
        "lease rows: orders:SHARD#two (its own: `one`, `three` read stream `orders` too)",
        "lease rows: orders:SHARD (lease_key = \"stream\")",
        "lease rows: invoices:SHARD (shared, as ruststream-kinesis and earlier versions key them: \
         the only subscription on stream `invoices`)",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let refused = HostToml::memory()
        .subscription(sub("one", "orders", "polling").set("lease_key", "stream"))
        .subscription(sub("two", "orders", "polling").set("lease_key", "stream"));
    let path = dir.write("refused.toml", refused.to_string());
    let out = crate::support::fleet::shardhost(&["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("subscriptions `one` (line")
            && err.contains("and `two` both read stream `orders`"),
        "{err}"
    );
}
