//! Two subscriptions on a DynamoDB lease table (dynalite) and kinesis-mock: across a kill -9,
//! a shared row another host's subscription took, a subscription moved to rows of its own, and a
//! table ruststream-kinesis wrote.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{
    Put, SUBSCRIPTIONS, Sample, assert_behind_what_was_handled, assert_each_handled_all, sub,
};
use crate::support::fleet::{Instance, Stack, stack};
use crate::support::kinesis::Kinesis;
use crate::support::{Scratch, unique, wait_until_else};

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
