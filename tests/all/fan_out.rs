//! Enhanced fan-out (`read = "fan-out"`), against kinesis-mock: the consumer registered at
//! start, every shard drained through SubscribeToShard (over HTTP/2 on the TLS endpoint, as on
//! AWS), consumers that each see every record, a split while records are pushed, subscriptions
//! cut by the network, a restart inside a KPL aggregate, a missing permission named, and a
//! first subscription at `latest` refused for a while, and an end-of-shard question that hangs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::types::ConsumerStatus;
use shardhost::lease::{LeaseStore, MemoryLeaseStore};
use shardhost::record::Outcome;

use crate::support::fault_proxy::FaultProxy;
use crate::support::kinesis::{Kinesis, aggregate};
use crate::support::proxy::{DelayProxy, DenyProxy};
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Seen, Subscription, guest, kinesis_endpoint,
    kinesis_tls_endpoint, unique,
};

/// A host on `endpoint` reading `stream` by fan-out from its beginning with the scripted guest.
fn config(endpoint: &str, stream: &str) -> HostToml {
    HostToml::kinesis(endpoint)
        .leases("renew_every", "1s")
        .leases("list_every", "300ms")
        .subscription(fan_out(Subscription::new(
            "test",
            stream,
            guest("scripted"),
        )))
}

fn fan_out(s: Subscription) -> Subscription {
    s.trim_horizon().batch(50).set("read", "fan-out")
}

/// Puts records `KEY:N` for each of `keys` keys and each N of `rounds`, a round of keys every
/// `pause`.
fn put_rounds(
    k: &Kinesis,
    stream: &str,
    keys: usize,
    rounds: std::ops::Range<usize>,
    pause: Duration,
) {
    for n in rounds {
        for key in 0..keys {
            k.put(stream, &format!("key-{key}"), format!("key-{key}:{n}"));
        }
        std::thread::sleep(pause);
    }
}

/// Asserts every `KEY:N` record of `keys` × `per_key` was handled exactly once, each key's in
/// order.
fn assert_each_once_in_key_order(seen: &[Seen], keys: usize, per_key: usize) {
    assert_eq!(seen.len(), keys * per_key, "every record handled once");
    let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for s in seen {
        let (key, n) = s.data.split_once(':').unwrap();
        by_key.entry(key).or_default().push(n.parse().unwrap());
    }
    assert_eq!(by_key.len(), keys);
    for (key, ns) in by_key {
        assert_eq!(ns, (0..per_key).collect::<Vec<_>>(), "order of {key}");
    }
}

/// Waits until `n` outcomes are seen and a moment more (proving nothing else comes), then stops.
fn stop_after(host: Running, seen: &Outcomes, n: usize) -> shardhost::status::StatusBoard {
    host.wait_for(&format!("{n} outcomes"), |_| seen.len() >= n);
    // Proving something does not happen: nothing else comes in the next 1.5 s (events come
    // on kinesis-mock's 1 s tick).
    std::thread::sleep(Duration::from_millis(1500));
    host.stop()
}

#[test]
fn a_fan_out_subscription_registers_its_consumer_and_drains_every_shard_over_http2() {
    let (Some(ep), Some((tls, ca))) = (kinesis_endpoint(), kinesis_tls_endpoint()) else {
        return;
    };
    let k = Kinesis::new(&ep);
    let stream = unique("fanout");
    k.create(&stream, 4);
    let (keys, per_key) = (20, 20);
    put_rounds(&k, &stream, keys, 0..per_key, Duration::ZERO);
    let dir = Scratch::new("fanout");
    let seen = Outcomes::default();
    let config = config(&tls, &stream)
        .set("kinesis", "ca_file", ca)
        .set("host", "name", "billing")
        .admin();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    let report = host.block_on(host.admin(None).status()).unwrap();
    assert_eq!(
        report.subscriptions[0].read,
        "fan-out (consumer billing-test)"
    );
    host.wait_for("a record from each shard", |_| {
        seen.all()
            .iter()
            .map(|s| s.shard_id.clone())
            .collect::<BTreeSet<_>>()
            .len()
            == 4
    });
    // The pushes go on: records put now arrive too.
    put_rounds(&k, &stream, keys, per_key..per_key + 1, Duration::ZERO);
    let board = stop_after(host, &seen, keys * (per_key + 1));
    assert_each_once_in_key_order(&seen.all(), keys, per_key + 1);
    assert!(
        board
            .snapshot()
            .iter()
            .all(|(_, _, s)| s.millis_behind_latest.is_some()),
        "each shard's lag comes from its events"
    );
    // The default consumer name: the service's and the subscription's.
    let consumer = k.consumer(&stream, "billing-test");
    assert_eq!(consumer, Some(ConsumerStatus::Active));
}

#[test]
fn two_subscriptions_with_their_own_consumers_each_see_every_record() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("twoconsumers");
    k.create(&stream, 2);
    let dir = Scratch::new("twoconsumers");
    let seen = Outcomes::default();
    let config = HostToml::kinesis(&ep)
        .subscription(fan_out(Subscription::new(
            "billing",
            &stream,
            guest("scripted"),
        )))
        .subscription(
            fan_out(Subscription::new("audit", &stream, guest("scripted")))
                .set("consumer", "audit-v2"),
        );
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    let (keys, per_key) = (8, 10);
    put_rounds(&k, &stream, keys, 0..per_key, Duration::from_millis(20));
    stop_after(host, &seen, 2 * keys * per_key);
    for subscription in ["billing", "audit"] {
        let theirs: Vec<Seen> = seen
            .all()
            .into_iter()
            .filter(|s| s.subscription == subscription)
            .collect();
        assert_each_once_in_key_order(&theirs, keys, per_key);
    }
    assert_eq!(
        k.consumer(&stream, "audit-v2"),
        Some(ConsumerStatus::Active)
    );
}

#[test]
fn a_split_while_records_are_pushed_keeps_every_record_and_each_keys_order() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Arc::new(Kinesis::new(&ep));
    let stream = unique("fanoutsplit");
    k.create(&stream, 1);
    let dir = Scratch::new("fanoutsplit");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream), |h| h.on_outcome(seen.tap()));
    let (keys, per_key) = (12, 25);
    let writer = {
        let (k, stream) = (k.clone(), stream.clone());
        std::thread::spawn(move || {
            put_rounds(&k, &stream, keys, 0..per_key, Duration::from_millis(40))
        })
    };
    host.wait_for("records to flow", |_| seen.len() >= keys);
    k.split(&stream, "shardId-000000000000");
    writer.join().unwrap();
    stop_after(host, &seen, keys * per_key);
    let all = seen.all();
    // Per-key order across the split: a child's records come after its parent's.
    assert_each_once_in_key_order(&all, keys, per_key);
    let shards: BTreeSet<_> = all.iter().map(|s| s.shard_id.as_str()).collect();
    assert_eq!(
        shards.len(),
        3,
        "the parent and both children were read: {shards:?}"
    );
}

#[test]
fn subscriptions_cut_by_the_network_resume_after_their_last_event() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Arc::new(Kinesis::new(&ep));
    let stream = unique("fanoutcut");
    k.create(&stream, 2);
    let proxy = DelayProxy::start(&ep);
    let dir = Scratch::new("fanoutcut");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&proxy.url(), &stream), |h| {
        h.on_outcome(seen.tap())
    });
    let (keys, per_key) = (8, 40);
    let writer = {
        let (k, stream) = (k.clone(), stream.clone());
        std::thread::spawn(move || {
            put_rounds(&k, &stream, keys, 0..per_key, Duration::from_millis(50))
        })
    };
    for cut in 1..=3 {
        host.wait_for("records since the last cut", |_| {
            seen.len() >= cut * keys * 8
        });
        proxy.cut();
    }
    writer.join().unwrap();
    stop_after(host, &seen, keys * per_key);
    assert_each_once_in_key_order(&seen.all(), keys, per_key);
}

#[test]
fn a_restarted_fan_out_host_resumes_inside_a_kpl_aggregate_after_its_checkpoint() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("fanoutkpl");
    k.create(&stream, 1);
    k.put(
        &stream,
        "outer",
        aggregate(&[("a", b"ack"), ("b", b"retry"), ("c", b"ack")]),
    );
    let dir = Scratch::new("fanoutkpl");
    let store: Arc<dyn LeaseStore> = Arc::new(MemoryLeaseStore::new());
    let run = |n: usize| {
        let seen = Outcomes::default();
        let store = store.clone();
        let host = Running::start_with(&dir, config(&ep, &stream), |h| {
            h.on_outcome(seen.tap());
            h.use_lease_store(store);
        });
        stop_after(host, &seen, n);
        seen.all()
    };
    let first = run(3);
    let users: Vec<_> = first
        .iter()
        .map(|s| (s.partition_key.as_str(), s.sub_sequence_number, s.outcome))
        .collect();
    assert_eq!(
        users,
        [
            ("a", 0, Outcome::Ack),
            ("b", 1, Outcome::Retry),
            ("c", 2, Outcome::Ack)
        ],
        "an aggregate arrives as its user records"
    );
    k.put(&stream, "after", "ack");
    let again = run(3);
    let keys: Vec<_> = again
        .iter()
        .map(|s| (s.partition_key.as_str(), s.sub_sequence_number))
        .collect();
    assert_eq!(
        keys,
        [("b", 1), ("c", 2), ("after", 0)],
        "resumes inside the aggregate, after `a`, and goes on"
    );
}

#[test]
fn a_missing_permission_to_register_the_consumer_is_named_at_start() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("fanoutdenied");
    k.create(&stream, 1);
    let proxy = DenyProxy::start(&ep, "RegisterStreamConsumer");
    let dir = Scratch::new("fanoutdenied");
    let path = dir.write("shardhost.toml", config(&proxy.url(), &stream).render());
    let config = shardhost::config::Config::load(&path).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let err = rt
        .block_on(shardhost::Host::prepare(config))
        .err()
        .expect("a host that may not register its consumer does not start");
    let msg = err.to_string();
    for part in [
        "subscription `test`",
        "kinesis:RegisterStreamConsumer",
        "consumer `shardhost-test`",
    ] {
        assert!(msg.contains(part), "the error names {part}: {msg}");
    }
    assert_eq!(
        k.consumer(&stream, "shardhost-test"),
        None,
        "nothing was registered"
    );
}

#[test]
fn a_seek_under_fan_out_subscribes_again_at_its_target() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("fanoutseek");
    k.create(&stream, 1);
    let seqs: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|t| k.put(&stream, "k", format!("ack;{t}")).1)
        .collect();
    k.put(&stream, "k", format!("seek-once:{}", seqs[1]));
    k.put(&stream, "k", "ack;d");
    let dir = Scratch::new("fanoutseek");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream), |h| h.on_outcome(seen.tap()));
    // One call holds the five records: `a` is settled; the seek sends the reader back to `b`,
    // which with everything after it is delivered (once) by a new subscription.
    stop_after(host, &seen, 5);
    let order: Vec<&str> = seen
        .all()
        .iter()
        .map(|s| s.sequence_number.clone())
        .map(|seq| match seqs.iter().position(|s| *s == seq) {
            Some(0) => "a",
            Some(1) => "b",
            Some(2) => "c",
            _ => "other",
        })
        .collect();
    assert_eq!(
        order,
        ["a", "b", "c", "other", "other"],
        "read again from `b` after the seek, once"
    );
}

#[test]
fn a_handler_slower_than_the_pushes_loses_and_repeats_nothing() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("fanoutslow");
    k.create(&stream, 1);
    let dir = Scratch::new("fanoutslow");
    let seen = Outcomes::default();
    let config = HostToml::kinesis(&ep).subscription(
        fan_out(Subscription::new("test", &stream, guest("scripted"))).limit("timeout", "30s"),
    );
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    k.put(&stream, "k", "sleep:8000;slow");
    host.wait_for("the slow record pushed", |b| {
        b.snapshot()
            .iter()
            .any(|(_, _, s)| s.millis_behind_latest.is_some())
    });
    // While the handler sleeps, an event a second (kinesis-mock's tick) fills the
    // subscription's queue, and the subscription pauses until there is room.
    let rounds = 7;
    for n in 0..rounds {
        for i in 0..3 {
            k.put(&stream, "k", format!("{n}-{i}"));
        }
        std::thread::sleep(Duration::from_millis(1000));
    }
    stop_after(host, &seen, 1 + rounds * 3);
    assert!(seen.all().iter().all(|s| s.outcome == Outcome::Ack));
    let data: Vec<String> = seen.all().iter().map(|s| s.data.clone()).collect();
    let expected: Vec<String> = std::iter::once("sleep:8000;slow".to_owned())
        .chain((0..rounds).flat_map(|n| (0..3).map(move |i| format!("{n}-{i}"))))
        .collect();
    assert_eq!(data, expected);
}

#[test]
fn at_latest_a_first_subscription_refused_for_a_while_loses_no_record_put_after_the_start() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("fanoutrefused");
    k.create(&stream, 1);
    let proxy = FaultProxy::start(&ep);
    // IAM says no to SubscribeToShard until the policy is fixed (in 3 s or so).
    proxy.fail("SubscribeToShard", "AccessDeniedException");
    let dir = Scratch::new("fanoutrefused");
    let seen = Outcomes::default();
    let config = HostToml::kinesis(&proxy.url())
        .leases("renew_every", "1s")
        .leases("list_every", "300ms")
        .subscription(
            Subscription::new("test", &stream, guest("scripted"))
                .start_at("latest")
                .batch(50)
                .set("read", "fan-out"),
        );
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("the first subscription refused", |_| {
        proxy.failed("SubscribeToShard") >= 1
    });
    // The worker opened the shard at its tip: everything from here on is after the start.
    let refused: Vec<String> = (0..5).map(|i| format!("refused-{i}")).collect();
    for data in &refused {
        k.put(&stream, "k", data.clone());
    }
    let tries = proxy.failed("SubscribeToShard");
    host.wait_for("a subscription refused after the puts", |_| {
        proxy.failed("SubscribeToShard") > tries
    });
    proxy.pass("SubscribeToShard");
    host.wait_for("the first event pushed", |b| {
        b.snapshot()
            .iter()
            .any(|(_, _, s)| s.millis_behind_latest.is_some())
    });
    k.put(&stream, "k", "allowed");
    host.wait_for("the record put once allowed", |_| {
        seen.all().iter().any(|s| s.data == "allowed")
    });
    host.stop();
    let handled: BTreeSet<String> = seen.all().into_iter().map(|s| s.data).collect();
    let lost: Vec<&String> = refused.iter().filter(|r| !handled.contains(*r)).collect();
    assert!(
        lost.is_empty(),
        "records put after the start while subscribing was refused are handled; lost {lost:?} \
         (handled {handled:?})"
    );
}

#[test]
fn events_keep_flowing_while_the_question_whether_the_shard_ended_hangs() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("fanoutprobe");
    k.create(&stream, 1);
    let proxy = FaultProxy::start(&ep);
    // An idle subscription asks GetRecords after its continuation whether its shard ended
    // (kinesis-mock never says so itself); that question's iterator hangs for a minute.
    proxy.hold_next(
        "GetShardIterator",
        "AFTER_SEQUENCE_NUMBER",
        Duration::from_secs(60),
    );
    let dir = Scratch::new("fanoutprobe");
    let seen = Outcomes::default();
    let config = config(&proxy.url(), &stream);
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    k.put(&stream, "k", "first");
    host.wait_for("the first record", |_| seen.len() == 1);
    host.wait_for(
        "the idle subscription asking whether the shard ended",
        |_| proxy.held() == 1,
    );
    let put = std::time::Instant::now();
    k.put(&stream, "k", "second");
    host.wait_for("the second record", |_| seen.len() == 2);
    let took = put.elapsed();
    host.stop();
    // Events come on kinesis-mock's 1 s tick; the SDK gives up on the hanging call after 15 s.
    assert!(
        took < Duration::from_secs(8),
        "a record pushed while the question hangs is handled at once, not after it: {took:?}"
    );
}
