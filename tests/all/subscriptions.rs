//! Two subscriptions on one stream (issue 42): each handles every record through lease rows of
//! its own, polling and by fan-out, on the memory store and a DynamoDB lease table, with records
//! put while both read and a kill -9 and restart in the middle; each checkpoint stays behind
//! what its own subscription handled. A shared `stream:shard` row another host's subscription
//! took is refused, never shared.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shardhost::source::StartPosition;
use shardhost::status::StatusBoard;

use crate::support::fleet::{Instance, Stack, stack};
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

/// (subscription, shard, sequence number) of every record an instance settled, from its log.
fn settled(instance: &Instance) -> BTreeMap<String, BTreeSet<Put>> {
    let mut out: BTreeMap<String, BTreeSet<Put>> = BTreeMap::new();
    for v in instance.lines() {
        let f = &v["fields"];
        if !(f["sequence_number"].is_string() && f["handler"].is_string()) {
            continue;
        }
        let subscription = v["spans"]
            .as_array()
            .and_then(|spans| spans.iter().find_map(|s| s["subscription"].as_str()))
            .unwrap_or_default()
            .to_owned();
        let shard = v["span"]["shard"].as_str().unwrap_or_default().to_owned();
        let seq = f["sequence_number"].as_str().unwrap_or_default();
        let seq = seq.split('/').next().unwrap_or_default().to_owned();
        out.entry(subscription).or_default().insert((shard, seq));
    }
    out
}

impl Stack {
    /// The checkpoint of subscription `name`'s own row of `shard`.
    fn own_checkpoint(&self, shard: &str, name: &str) -> Option<String> {
        let key = format!("{}:{shard}#{name}", self.stream);
        self.rt
            .block_on(self.d.row(&self.table, &key))?
            .get("checkpoint")
            .and_then(|v| v.as_s().ok())
            .cloned()
    }
}

/// Puts `count` records on the stack's stream from a thread of its own, 10 every 100 ms.
fn put_while_reading(st: &Stack, count: usize) -> std::thread::JoinHandle<Vec<Put>> {
    let (endpoint, stream) = (st.kinesis.clone(), st.stream.clone());
    std::thread::spawn(move || {
        let k = Kinesis::new(&endpoint);
        (0..count)
            .map(|i| {
                if i % 10 == 0 {
                    std::thread::sleep(Duration::from_millis(100));
                }
                k.put(&stream, &format!("key-{i}"), format!("r-{i}"))
            })
            .collect()
    })
}

/// Two subscriptions of one host on a DynamoDB lease table, records put while both read, the
/// host killed (kill -9) and restarted in the middle.
fn two_subscriptions_on_a_lease_table_across_a_kill_9(read: &str) {
    let Some(st) = stack(2) else { return };
    let dir = Scratch::new("two-subs-kill9");
    let config = st
        .host("pod-a")
        .leases("renew_every", "1s")
        .leases("list_every", "1s")
        .leases("checkpoint_every", "200ms")
        .subscription(sub("one", &st.stream, read))
        .subscription(sub("two", &st.stream, read));
    let mut first = Instance::start(&dir, "first", &config);
    let producer = put_while_reading(&st, 400);
    first.wait_for(
        "each subscription to handle 60 records",
        Duration::from_secs(60),
        |i| {
            let handled = settled(i);
            SUBSCRIPTIONS
                .iter()
                .all(|s| handled.get(*s).is_some_and(|h| h.len() >= 60))
        },
    );
    first.kill9();
    let mut samples = Vec::new();
    let handled_first = settled(&first);
    for name in SUBSCRIPTIONS {
        for shard in ["shardId-000000000000", "shardId-000000000001"] {
            if let Some(checkpoint) = st.own_checkpoint(shard, name) {
                samples.push(Sample {
                    subscription: name.to_owned(),
                    shard: shard.to_owned(),
                    checkpoint,
                    handled: handled_first.get(name).cloned().unwrap_or_default(),
                });
            }
        }
    }
    // The same owner id regains its leases at once.
    let second = Instance::start(&dir, "second", &config);
    let records = producer.join().unwrap();
    second.wait_for(
        "each subscription to handle every record",
        Duration::from_secs(90),
        |i| {
            let handled = settled(i);
            SUBSCRIPTIONS.iter().all(|s| {
                records.iter().all(|r| {
                    handled.get(*s).is_some_and(|h| h.contains(r))
                        || handled_first.get(*s).is_some_and(|h| h.contains(r))
                })
            })
        },
    );
    let mut handled = handled_first.clone();
    for (name, set) in settled(&second) {
        handled.entry(name).or_default().extend(set);
    }
    assert_each_handled_all(&handled, &records);
    assert_behind_what_was_handled(&samples, &records);
    for name in SUBSCRIPTIONS {
        assert!(
            samples.iter().any(|s| s.subscription == name),
            "subscription `{name}` wrote checkpoints to rows of its own before the kill"
        );
    }
}

#[test]
fn two_polling_subscriptions_on_a_lease_table_each_handle_every_record_across_a_kill_9() {
    two_subscriptions_on_a_lease_table_across_a_kill_9("polling");
}

#[test]
fn two_fan_out_subscriptions_on_a_lease_table_each_handle_every_record_across_a_kill_9() {
    two_subscriptions_on_a_lease_table_across_a_kill_9("fan-out");
}

#[test]
fn a_shared_row_another_hosts_subscription_took_is_refused_not_shared() {
    let Some(st) = stack(1) else { return };
    let dir = Scratch::new("two-subs-refused");
    let records: Vec<Put> = (0..20)
        .map(|i| st.k.put(&st.stream, &format!("key-{i}"), format!("r-{i}")))
        .collect();
    let host = |owner: &str| {
        st.host(owner)
            .leases("renew_every", "1s")
            .leases("list_every", "1s")
    };
    let a = Instance::start(
        &dir,
        "a",
        host("a").subscription(sub("one", &st.stream, "polling")),
    );
    a.wait_for("a to handle every record", Duration::from_secs(60), |i| {
        settled(i).get("one").is_some_and(|h| h.len() == 20)
    });
    // Host b runs another service's subscription alone on the same stream and table: by
    // default it would read the same `stream:shard` rows.
    let b = Instance::start(
        &dir,
        "b",
        host("b").subscription(sub("two", &st.stream, "polling")),
    );
    b.wait_for(
        "b to refuse the row subscription `one` took",
        Duration::from_secs(30),
        |i| {
            i.logged("belongs to subscription `one`")
                && i.logged("lease_key = \\\"subscription\\\"")
        },
    );
    assert!(settled(&b).is_empty(), "b handled none of one's records");
    let shard = "shardId-000000000000";
    let row = st.row(shard).unwrap();
    assert_eq!(row["subscription"].as_s().unwrap(), "one");
    assert_eq!(
        st.owner(shard).as_deref(),
        Some("a"),
        "b never took a's row"
    );
    drop(b);
    // With rows of its own, it reads the stream beside `one`, from its own start.
    let b = Instance::start(
        &dir,
        "b2",
        host("b").subscription(sub("two", &st.stream, "polling").set("lease_key", "subscription")),
    );
    b.wait_for("b to handle every record", Duration::from_secs(60), |i| {
        settled(i)
            .get("two")
            .is_some_and(|h| records.iter().all(|r| h.contains(r)))
    });
    assert_eq!(
        st.owner(shard).as_deref(),
        Some("a"),
        "a's row is still a's"
    );
    let last = &records.last().unwrap().1;
    wait_until_else(
        "two's checkpoint in its own row at the last record",
        Duration::from_secs(30),
        || st.own_checkpoint(shard, "two").as_deref() == Some(last.as_str()),
        || format!("{:?}", st.own_checkpoint(shard, "two")),
    );
}

#[tokio::test]
async fn a_subscription_moved_to_rows_of_its_own_resumes_from_the_shared_row_it_wrote() {
    use shardhost::lease::{
        Checkpoint, DynamoLeaseStore, DynamoOptions, LeaseKey, LeaseRows, LeaseStore,
    };
    use shardhost::record::Position;
    let Some(ep) = crate::support::dynamodb_endpoint() else {
        return;
    };
    let table = unique("moved");
    crate::support::dynamo::Dynamo::new(&ep)
        .create_lease_table(&table)
        .await;
    let store = DynamoLeaseStore::connect(DynamoOptions::local(&table, &ep)).await;
    let ttl = Duration::from_secs(10);
    let shard = "shardId-000000000000";
    // `one`, alone on its stream, read through the shared row and checkpointed there.
    let shared = LeaseKey::of("orders", shard, "one", LeaseRows::Stream);
    let lease = store.acquire(&shared, "a", ttl).await.unwrap().unwrap();
    let cp = Checkpoint::At(Position::new("42", 0));
    let lease = store.checkpoint(&lease, &cp).await.unwrap();
    store.release(&lease).await.unwrap();
    // A second subscription joined the stream: `one` reads through its own row now, and
    // starts where the shared row it wrote stopped; `two` starts at its start_at.
    let own = LeaseKey::of("orders", shard, "one", LeaseRows::Subscription);
    let taken = store.acquire(&own, "a", ttl).await.unwrap().unwrap();
    assert_eq!(taken.checkpoint, Some(cp.clone()));
    let two = LeaseKey::of("orders", shard, "two", LeaseRows::Subscription);
    let taken = store.acquire(&two, "a", ttl).await.unwrap().unwrap();
    assert_eq!(taken.checkpoint, None);
    // The shared row is `one`'s: `two` may neither read nor take it.
    let two_shared = LeaseKey::of("orders", shard, "two", LeaseRows::Stream);
    assert!(
        store
            .acquire(&two_shared, "b", ttl)
            .await
            .unwrap()
            .is_none()
    );
    let refused = store.read(&two_shared).await.unwrap_err().to_string();
    assert!(
        refused.contains("belongs to subscription `one`"),
        "{refused}"
    );
    // A reader that names no subscription (ruststream-kinesis's layout) still reads it.
    let plain = store
        .read(&LeaseKey::new("orders", shard))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(plain.checkpoint, Some(cp));
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

#[test]
fn a_table_ruststream_kinesis_wrote_is_read_on_from_its_checkpoints() {
    use crate::support::dynamo::{n, s};
    let Some(st) = stack(1) else { return };
    let dir = Scratch::new("two-subs-ruststream");
    let records: Vec<Put> = (0..10)
        .map(|i| st.k.put(&st.stream, &format!("key-{i}"), format!("r-{i}")))
        .collect();
    // The row ruststream-kinesis 0.7 leaves after a clean stop: released at record 4.
    let shard = "shardId-000000000000";
    let key = format!("{}:{shard}", st.stream);
    st.rt.block_on(st.d.put_row(
        &st.table,
        &[
            ("lease_key", s(&key)),
            ("lease_expiry", n(0)),
            ("lease_counter", n(7)),
            ("checkpoint", s(&records[4].1)),
        ],
    ));
    let config = st
        .host("pod-a")
        .leases("list_every", "1s")
        .leases("checkpoint_every", "200ms")
        .subscription(sub("one", &st.stream, "polling"));
    let a = Instance::start(&dir, "a", config);
    a.wait_for(
        "the records after the checkpoint",
        Duration::from_secs(60),
        |i| {
            settled(i)
                .get("one")
                .is_some_and(|h| records[5..].iter().all(|r| h.contains(r)))
        },
    );
    let handled = settled(&a).remove("one").unwrap_or_default();
    assert!(
        records[..5].iter().all(|r| !handled.contains(r)),
        "nothing at or before ruststream's checkpoint is read again: {handled:?}"
    );
    let last = &records[9].1;
    wait_until_else(
        "the shared row's checkpoint at the last record",
        Duration::from_secs(30),
        || st.checkpoint(shard).as_deref() == Some(last.as_str()),
        || format!("{:?}", st.row(shard)),
    );
    let row = st.row(shard).unwrap();
    assert_eq!(row["subscription"].as_s().unwrap(), "one");
}
