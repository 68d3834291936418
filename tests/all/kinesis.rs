//! Reading real Kinesis, against kinesis-mock over HTTP (`tests/stack` starts it): start
//! positions, resuming after a checkpoint, resharding while records flow, held records in closed
//! shards, KPL aggregates, iterators that expire before the first record at `latest`, and the
//! stream checks at start.

use crate::support;
use shardhost::status::ShardState;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::support::fault_proxy::FaultProxy;
use crate::support::kinesis::{Kinesis, aggregate};
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Subscription, guest, kinesis_clock_endpoint,
    kinesis_endpoint, unique, wait_until_else,
};
use shardhost::lease::{LeaseStore, MemoryLeaseStore};
use shardhost::record::Outcome;

/// A host on kinesis-mock reading `stream` with `scripted`; `start` says where it starts (and
/// anything else of the subscription).
fn config(
    endpoint: &str,
    stream: &str,
    start: impl FnOnce(Subscription) -> Subscription,
) -> HostToml {
    HostToml::kinesis(endpoint)
        .leases("renew_every", "1s")
        .leases("list_every", "300ms")
        .subscription(start(
            Subscription::new("test", stream, guest("scripted"))
                .batch(50)
                .poll_interval("50ms"),
        ))
}

fn latest(s: Subscription) -> Subscription {
    s.start_at("latest")
}

/// Runs a host until `n` outcomes are seen; answers them.
fn run_until(
    dir: &Scratch,
    config: HostToml,
    n: usize,
    store: Option<Arc<dyn LeaseStore>>,
) -> Vec<support::Seen> {
    let seen = Outcomes::default();
    let host = Running::start_with(dir, config, |h| {
        h.on_outcome(seen.tap());
        if let Some(store) = store {
            h.use_lease_store(store);
        }
    });
    host.wait_for(&format!("{n} outcomes"), |_| seen.len() >= n);
    // Proving something does not happen: a moment more, nothing else may arrive.
    std::thread::sleep(Duration::from_millis(300));
    host.stop();
    seen.all()
}

fn data(seen: &[support::Seen]) -> Vec<&str> {
    seen.iter().map(|s| s.data.as_str()).collect()
}

#[test]
fn reads_from_trim_horizon_a_timestamp_and_latest() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("positions");
    k.create(&stream, 1);
    for i in 0..3 {
        k.put(&stream, "k", format!("early-{i}"));
    }
    // The scenario: arrival times on both sides of `between`, more than a second apart.
    std::thread::sleep(Duration::from_millis(1100));
    let between = SystemTime::now();
    std::thread::sleep(Duration::from_millis(1100));
    for i in 0..3 {
        k.put(&stream, "k", format!("late-{i}"));
    }
    let dir = Scratch::new("positions");

    let all = run_until(
        &dir,
        config(&ep, &stream, Subscription::trim_horizon),
        6,
        None,
    );
    assert_eq!(
        data(&all),
        [
            "early-0", "early-1", "early-2", "late-0", "late-1", "late-2"
        ]
    );

    let ts = humantime::format_rfc3339_millis(between);
    let late = run_until(
        &dir,
        config(&ep, &stream, |s| s.start_at_timestamp(&ts.to_string())),
        3,
        None,
    );
    assert_eq!(data(&late), ["late-0", "late-1", "late-2"]);

    // latest: only what is put after the reader opened.
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream, latest), |h| {
        h.on_outcome(seen.tap())
    });
    // Reading: its iterator at the tip is open.
    host.wait_for("the shard reading", |b| {
        b.snapshot()
            .iter()
            .any(|(_, _, s)| s.state == ShardState::Reading)
    });
    k.put(&stream, "k", "new-0");
    host.wait_for("the new record", |_| seen.len() == 1);
    host.stop();
    assert_eq!(data(&seen.all()), ["new-0"]);
}

#[test]
fn a_restarted_host_resumes_after_the_last_checkpoint() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("resume");
    k.create(&stream, 1);
    for t in ["a1", "a2", "retry", "a3"] {
        k.put(&stream, "k", t);
    }
    let dir = Scratch::new("resume");
    let store: Arc<dyn LeaseStore> = Arc::new(MemoryLeaseStore::new());
    let first = run_until(
        &dir,
        config(&ep, &stream, Subscription::trim_horizon),
        4,
        Some(store.clone()),
    );
    assert_eq!(first[2].outcome, Outcome::Retry);
    k.put(&stream, "k", "b1");
    // start_at no longer matters: the checkpoint (in front of the held record) does.
    let second = run_until(&dir, config(&ep, &stream, latest), 3, Some(store));
    assert_eq!(
        data(&second),
        ["retry", "a3", "b1"],
        "the held record and everything behind it come again"
    );
}

#[test]
fn splits_and_merges_while_records_flow_keep_every_record_and_each_keys_order() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Arc::new(Kinesis::new(&ep));
    let stream = unique("reshard");
    k.create(&stream, 2);
    let dir = Scratch::new("reshard");
    let seen = Outcomes::default();
    let host = Running::start_with(
        &dir,
        config(&ep, &stream, Subscription::trim_horizon),
        |h| h.on_outcome(seen.tap()),
    );

    let keys: Vec<String> = (0..16).map(|i| format!("key-{i}")).collect();
    let per_key = 30;
    let writer = {
        let (k, stream, keys) = (k.clone(), stream.clone(), keys.clone());
        std::thread::spawn(move || {
            for n in 0..per_key {
                for key in &keys {
                    k.put(&stream, key, format!("{key}:{n}"));
                }
                // Paces the writer: a round of keys every 40 ms or so.
                std::thread::sleep(Duration::from_millis(40));
            }
        })
    };
    host.wait_for("records to flow", |_| seen.len() >= keys.len());
    k.split(&stream, "shardId-000000000000");
    let shards = k.shards(&stream);
    // The split's upper child and the untouched shard 1 are adjacent: merge them.
    let upper = shards
        .iter()
        .filter(|s| s.parent.as_deref() == Some("shardId-000000000000"))
        .max_by_key(|s| s.start)
        .unwrap()
        .id
        .clone();
    host.wait_for("records to flow on the upper child", |_| {
        seen.all().iter().any(|s| s.shard_id == upper)
    });
    k.merge(&stream, &upper, "shardId-000000000001");
    writer.join().unwrap();
    let total = keys.len() * per_key;
    host.wait_for("every record", |_| seen.len() >= total);
    // Proving something does not happen: no record comes twice in the next 300 ms.
    std::thread::sleep(Duration::from_millis(300));
    host.stop();

    let all = seen.all();
    assert_eq!(all.len(), total, "every record handled once");
    let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for s in &all {
        let (key, n) = s.data.split_once(':').unwrap();
        by_key.entry(key).or_default().push(n.parse().unwrap());
    }
    for (key, ns) in by_key {
        assert_eq!(ns, (0..per_key).collect::<Vec<_>>(), "order of {key}");
    }
    let shards_seen: std::collections::BTreeSet<_> =
        all.iter().map(|s| s.shard_id.as_str()).collect();
    assert!(
        shards_seen.len() >= 4,
        "parents and children were read: {shards_seen:?}"
    );
}

#[test]
fn under_latest_a_closed_shard_nobody_read_is_skipped_and_its_children_open_at_the_tip() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("latestclosed");
    k.create(&stream, 1);
    k.put(&stream, "k", "old-parent");
    k.split(&stream, "shardId-000000000000");
    k.put(&stream, "k", "old-child");
    let dir = Scratch::new("latestclosed");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream, latest), |h| {
        h.on_outcome(seen.tap())
    });
    // Reading: their iterators at the tip are open.
    host.wait_for("both children reading", |b| {
        b.snapshot()
            .iter()
            .filter(|(_, _, s)| s.state == ShardState::Reading)
            .count()
            == 2
    });
    k.put(&stream, "k", "new");
    host.wait_for("the new record", |_| seen.len() >= 1);
    // Proving something does not happen: no old record comes in the next 300 ms.
    std::thread::sleep(Duration::from_millis(300));
    host.stop();
    assert_eq!(data(&seen.all()), ["new"]);
}

#[test]
fn a_held_record_in_a_closed_parent_keeps_its_children_waiting() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("heldparent");
    k.create(&stream, 1);
    for t in ["ack", "retry", "ack"] {
        k.put(&stream, "k", t);
    }
    let dir = Scratch::new("heldparent");
    let seen = Outcomes::default();
    let host = Running::start_with(
        &dir,
        config(&ep, &stream, Subscription::trim_horizon),
        |h| h.on_outcome(seen.tap()),
    );
    host.wait_for("the parent's records", |_| seen.len() == 3);
    k.split(&stream, "shardId-000000000000");
    for i in 0..10 {
        k.put(&stream, &format!("child-{i}"), "ack");
    }
    host.wait_for("the parent read to its end", |b| {
        b.snapshot().iter().any(|(_, shard, s)| {
            shard == "shardId-000000000000" && s.state == ShardState::HeldAtEnd
        })
    });
    // Proving something does not happen: the children stay unread for 2 s.
    std::thread::sleep(Duration::from_secs(2));
    let board = host.stop();
    assert_eq!(
        seen.len(),
        3,
        "no child record was handled: {:?}",
        seen.all()
    );
    assert!(
        board
            .snapshot()
            .iter()
            .all(|(_, shard, _)| shard == "shardId-000000000000")
    );
}

#[test]
fn kpl_aggregates_arrive_as_their_user_records() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("kpl");
    k.create(&stream, 1);
    let (_, seq) = k.put(
        &stream,
        "outer",
        aggregate(&[("u1", b"ack"), ("u2", b"drop"), ("u1", b"ack")]),
    );
    let mut corrupt = aggregate(&[("u3", b"ack")]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff; // breaks the digest
    k.put(&stream, "outer", corrupt.clone());
    let dir = Scratch::new("kpl");
    let seen = run_until(
        &dir,
        config(&ep, &stream, Subscription::trim_horizon),
        4,
        None,
    );
    let users: Vec<_> = seen[..3]
        .iter()
        .map(|s| {
            (
                s.partition_key.as_str(),
                s.sub_sequence_number,
                s.data.as_str(),
            )
        })
        .collect();
    assert_eq!(
        users,
        [("u1", 0, "ack"), ("u2", 1, "drop"), ("u1", 2, "ack")]
    );
    assert!(seen[..3].iter().all(|s| s.sequence_number == seq));
    assert_eq!(
        seen[3].partition_key, "outer",
        "a corrupt aggregate arrives whole"
    );
    assert_eq!(seen[3].bytes, corrupt);
}

#[test]
fn a_checkpoint_can_stand_between_the_user_records_of_an_aggregate() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("kplresume");
    k.create(&stream, 1);
    k.put(
        &stream,
        "outer",
        aggregate(&[("a", b"ack"), ("b", b"retry"), ("c", b"ack")]),
    );
    let dir = Scratch::new("kplresume");
    let store: Arc<dyn LeaseStore> = Arc::new(MemoryLeaseStore::new());
    run_until(
        &dir,
        config(&ep, &stream, Subscription::trim_horizon),
        3,
        Some(store.clone()),
    );
    let again = run_until(
        &dir,
        config(&ep, &stream, Subscription::trim_horizon),
        2,
        Some(store),
    );
    let keys: Vec<_> = again
        .iter()
        .map(|s| (s.partition_key.as_str(), s.sub_sequence_number))
        .collect();
    assert_eq!(
        keys,
        [("b", 1), ("c", 2)],
        "resumes inside the aggregate, after `a`"
    );
}

#[test]
fn a_missing_stream_is_an_error_naming_it_unless_create_if_missing() {
    let Some(ep) = kinesis_endpoint() else { return };
    let stream = unique("missing");
    let dir = Scratch::new("missing");
    let path = dir.write("shardhost.toml", config(&ep, &stream, latest).render());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cfg = shardhost::config::Config::load(&path).unwrap();
    let err = rt
        .block_on(shardhost::Host::prepare(cfg))
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains(&stream)
            && msg.contains("does not exist")
            && msg.contains("create_if_missing"),
        "{msg}"
    );

    let path = dir.write(
        "shardhost.toml",
        config(&ep, &stream, |s| latest(s).create_if_missing(3)).render(),
    );
    let cfg = shardhost::config::Config::load(&path).unwrap();
    rt.block_on(shardhost::Host::prepare(cfg))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(Kinesis::new(&ep).shards(&stream).len(), 3);
}

#[test]
fn an_expired_iterator_is_reopened_after_the_last_delivered_record() {
    let Some((ep, pid)) = kinesis_clock_endpoint() else {
        return;
    };
    let k = Kinesis::new(&ep);
    let stream = unique("expiry");
    k.create(&stream, 1);
    for i in 0..5 {
        k.put(&stream, "k", format!("r{i}"));
    }
    let dir = Scratch::new("expiry");
    let seen = Outcomes::default();
    let host = Running::start_with(
        &dir,
        config(&ep, &stream, Subscription::trim_horizon),
        |h| h.on_outcome(seen.tap()),
    );
    host.wait_for("the first records", |_| seen.len() == 5);
    // Every iterator the reader holds is now past its 300 s.
    let jumped = std::process::Command::new("kill")
        .args(["-USR2", &pid.to_string()])
        .status()
        .unwrap();
    assert!(jumped.success());
    for i in 5..10 {
        k.put(&stream, "k", format!("r{i}"));
    }
    host.wait_for("the records after the expiry", |_| seen.len() >= 10);
    // Proving something does not happen: nothing is repeated in the next 300 ms.
    std::thread::sleep(Duration::from_millis(300));
    host.stop();
    let expected: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    assert_eq!(
        data(&seen.all()),
        expected,
        "nothing skipped, nothing repeated"
    );
}

#[test]
fn at_latest_iterators_that_expire_before_the_first_record_lose_no_record_put_after_the_start() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("expirylatest");
    k.create(&stream, 1);
    let proxy = FaultProxy::start(&ep);
    let dir = Scratch::new("expirylatest");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&proxy.url(), &stream, latest), |h| {
        h.on_outcome(seen.tap())
    });
    host.wait_for("the shard reading at its tip", |b| {
        b.snapshot()
            .iter()
            .any(|(_, _, s)| s.millis_behind_latest.is_some())
    });
    // Every iterator the reader holds or opens from here on is answered as expired (as after
    // a long stall, or a clock jump), while records arrive.
    proxy.fail("GetRecords", "ExpiredIteratorException");
    let expired: Vec<String> = (0..5).map(|i| format!("expired-{i}")).collect();
    for data in &expired {
        k.put(&stream, "k", data.clone());
    }
    let reads = proxy.failed("GetRecords");
    host.wait_for("iterators reopened after the puts", |_| {
        proxy.failed("GetRecords") >= reads + 4
    });
    proxy.pass("GetRecords");
    k.put(&stream, "k", "fresh");
    host.wait_for("the record put after the expiries", |_| {
        seen.all().iter().any(|s| s.data == "fresh")
    });
    host.stop();
    let handled: std::collections::BTreeSet<String> =
        seen.all().into_iter().map(|s| s.data).collect();
    let lost: Vec<&String> = expired.iter().filter(|r| !handled.contains(*r)).collect();
    assert!(
        lost.is_empty(),
        "records put after the start while iterators expired are handled; lost {lost:?} \
         (handled {handled:?})"
    );
}

/// The peak resident memory of a process so far (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn a_kpl_aggregate_bomb_is_delivered_whole_and_peak_memory_stays_under_100_mib() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("kplbomb");
    k.create(&stream, 1);
    // A ~500 KiB partition key named by ~85 000 empty user records: copied into every user
    // record, that is tens of GB; the record itself is under Kinesis' 1 MiB.
    let key = "k".repeat(500 * 1024);
    let users: Vec<(&str, &[u8])> = (0..85_000).map(|_| (key.as_str(), &b""[..])).collect();
    let bomb = aggregate(&users);
    assert!(bomb.len() + "outer".len() <= 1 << 20, "{}", bomb.len());
    let (_, bomb_seq) = k.put(&stream, "outer", bomb);
    let (_, after_seq) = k.put(&stream, "after", b"ack".to_vec());

    let dir = Scratch::new("kplbomb");
    let config = config(&ep, &stream, Subscription::trim_horizon)
        .set(
            "host",
            "cache_dir",
            dir.0.join("cache").display().to_string(),
        )
        .render();
    let path = dir.write("shardhost.toml", &config);
    // Compile the handler into the cache first: a compile's own peak is not what is measured.
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    assert!(checked.status.success(), "{checked:?}");
    let host = support::fleet::Instance::start(&dir, "host", &config);
    let pid = host.child.id();
    let limit = 100 << 20;
    wait_until_else(
        "the record after the bomb",
        Duration::from_secs(60),
        || {
            let peak = peak_rss(pid).unwrap_or(0);
            assert!(
                peak < limit,
                "peak RSS {} MiB while reading the aggregate",
                peak >> 20
            );
            host.outcomes().iter().any(|(key, _)| key == "after")
        },
        || {
            format!(
                "no outcome for {bomb_seq} / {after_seq}; log:\n{}",
                host.text()
            )
        },
    );
    assert_eq!(
        host.outcomes(),
        [
            ("outer".to_owned(), "ack".to_owned()),
            ("after".to_owned(), "ack".to_owned())
        ],
        "the bomb arrives whole (one corrupt aggregate), then the next record"
    );
    eprintln!("peak RSS {} MiB", peak_rss(pid).unwrap_or(0) >> 20);
}

#[test]
fn an_endpoint_signed_by_a_private_ca_is_read_with_its_ca_file_and_refused_without() {
    let (Some(ep), Some((tls, ca))) = (kinesis_endpoint(), support::kinesis_tls_endpoint()) else {
        return;
    };
    let k = Kinesis::new(&ep);
    let stream = unique("tls");
    k.create(&stream, 1);
    for i in 0..3 {
        k.put(&stream, "k", format!("tls-{i}"));
    }
    let dir = Scratch::new("tls");

    // Without the CA the certificate cannot be verified: the start fails, saying why.
    let path = dir.write(
        "shardhost.toml",
        config(&tls, &stream, Subscription::trim_horizon).render(),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cfg = shardhost::config::Config::load(&path).unwrap();
    let err = rt
        .block_on(shardhost::Host::prepare(cfg))
        .err()
        .expect("an unverifiable certificate is refused");
    let msg = format!("{err:#}");
    assert!(
        msg.to_lowercase().contains("certificate"),
        "the error names the certificate: {msg}"
    );

    // With `[kinesis] ca_file` the same endpoint is read.
    let with_ca = config(&tls, &stream, Subscription::trim_horizon).set("kinesis", "ca_file", ca);
    let seen = run_until(&dir, with_ca, 3, None);
    assert_eq!(data(&seen), ["tls-0", "tls-1", "tls-2"]);
}
