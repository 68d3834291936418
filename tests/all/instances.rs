//! Several `shardhost` processes on one DynamoDB lease table (dynalite) reading one stream
//! (kinesis-mock): failover after kill -9, handover on a clean stop, restart under the same
//! owner id, a stolen lease, and the table checks at start.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::dynamo::{n, s};
use crate::support::fleet::{Instance, Stack, stack};
use crate::support::{HostToml, Scratch, wait_until, wait_until_else};

const SHARDS: [&str; 2] = ["shardId-000000000000", "shardId-000000000001"];

impl Stack {
    /// A host config for instance `owner`, with lease `ttl`.
    fn instance_config(&self, owner: &str, ttl: &str) -> HostToml {
        self.host(owner)
            .leases("ttl", ttl)
            .leases("renew_every", "1s")
            .leases("list_every", "1s")
            .leases("checkpoint_every", "200ms")
            .subscription(self.subscription("scripted").trim_horizon().batch(10))
    }

    /// Puts `count` records `log:{tag}-{i}` over many partition keys; answers their texts.
    fn put(&self, tag: &str, count: usize) -> Vec<String> {
        self.put_noting_the_last(tag, count).0
    }

    /// As `put`, also answering the sequence number of the last record put on each shard.
    fn put_noting_the_last(
        &self,
        tag: &str,
        count: usize,
    ) -> (Vec<String>, BTreeMap<String, String>) {
        let mut last = BTreeMap::new();
        let texts = (0..count)
            .map(|i| {
                let text = format!("{tag}-{i}");
                let (shard, sequence) =
                    self.k
                        .put(&self.stream, &format!("key-{i}"), format!("log:{text}"));
                last.insert(shard, sequence);
                text
            })
            .collect();
        (texts, last)
    }

    /// Waits until each shard's checkpoint is at the last record put on it.
    fn wait_checkpointed(&self, last: &BTreeMap<String, String>) {
        wait_until(
            "the checkpoints at the last records",
            Duration::from_secs(30),
            || {
                last.iter().all(|(shard, sequence)| {
                    self.checkpoint(shard)
                        .is_some_and(|c| c.split('/').next() == Some(sequence.as_str()))
                })
            },
        );
    }
}

/// Waits until the instance runs (its leases listed, nothing taken yet).
fn wait_running(instance: &Instance) {
    instance.wait_for("the instance to run", Duration::from_secs(30), |i| {
        i.logged("host running")
    });
}

fn texts(handled: &[(String, String)]) -> BTreeSet<String> {
    handled.iter().map(|(_, t)| t.clone()).collect()
}

#[test]
fn kill_9_fails_over_after_expiry_and_resumes_after_the_last_checkpoint() {
    let Some(st) = stack(2) else { return };
    let dir = Scratch::new("failover");
    let (first, last) = st.put_noting_the_last("r", 20);
    // First lister takes all (no balancing), so b holds nothing until a dies.
    let config = |owner: &str| st.instance_config(owner, "3s").leases("balance", false);
    let mut a = Instance::start(&dir, "a", config("a"));
    a.wait_for(
        "a to handle the first records",
        Duration::from_secs(60),
        |i| texts(&i.handled()).len() == 20,
    );
    st.wait_checkpointed(&last);
    let b = Instance::start(&dir, "b", config("b"));
    wait_running(&b);
    a.kill9();
    let killed = Instant::now();
    let at_kill: BTreeMap<String, Option<String>> =
        ["shardId-000000000000", "shardId-000000000001"]
            .iter()
            .map(|s| (s.to_string(), st.checkpoint(s)))
            .collect();
    let later = st.put("t", 20);
    wait_until("b to take a lease", Duration::from_secs(60), || {
        SHARDS.iter().any(|s| st.owner(s).as_deref() == Some("b"))
    });
    let waited = killed.elapsed();
    b.wait_for(
        "b to take over and handle the new records",
        Duration::from_secs(60),
        |i| {
            let seen = texts(&i.handled());
            later.iter().all(|t| seen.contains(t))
        },
    );
    assert!(
        waited >= Duration::from_secs(1),
        "b waited for the dead lease to expire (3 s ttl, renewed every 1 s): {waited:?}"
    );
    let by_b = b.handled();
    assert!(
        by_b.iter().all(|(_, t)| !first.contains(t)),
        "records before the last checkpoint are not delivered again: {by_b:?} (checkpoints {at_kill:?})"
    );
    assert_eq!(st.owner("shardId-000000000000").as_deref(), Some("b"));
    assert_eq!(st.owner("shardId-000000000001").as_deref(), Some("b"));
}

#[test]
fn a_clean_stop_hands_the_shards_over_without_waiting_for_expiry() {
    let Some(st) = stack(2) else { return };
    let dir = Scratch::new("handover");
    let first = st.put("r", 10);
    let mut a = Instance::start(&dir, "a", st.instance_config("a", "30s"));
    a.wait_for("a to handle the records", Duration::from_secs(60), |i| {
        texts(&i.handled()).len() == 10
    });
    let b = Instance::start(&dir, "b", st.instance_config("b", "30s"));
    wait_running(&b);
    assert_eq!(a.interrupt(), Some(0), "a clean stop exits 0");
    assert!(
        SHARDS.iter().all(|s| st.owner(s).as_deref() != Some("a")),
        "a released its leases as it stopped"
    );
    let stopped = Instant::now();
    let later = st.put("t", 10);
    b.wait_for("b to take over", Duration::from_secs(20), |i| {
        let seen = texts(&i.handled());
        later.iter().all(|t| seen.contains(t))
    });
    assert!(
        stopped.elapsed() < Duration::from_secs(15),
        "b took over long before the 30 s lease would have expired ({:?})",
        stopped.elapsed()
    );
    let by_b = texts(&b.handled());
    assert!(
        first.iter().all(|t| !by_b.contains(t)),
        "a planned handover re-reads nothing: {by_b:?}"
    );
}

#[test]
fn a_restart_under_the_same_owner_id_regains_its_leases_at_once() {
    let Some(st) = stack(1) else { return };
    let dir = Scratch::new("sameowner");
    st.put("r", 5);
    let mut a = Instance::start(&dir, "a", st.instance_config("pod-a", "30s"));
    a.wait_for("the first records", Duration::from_secs(60), |i| {
        i.handled().len() == 5
    });
    a.kill9();
    let restarted = Instant::now();
    let again = Instance::start(&dir, "a2", st.instance_config("pod-a", "30s"));
    let later = st.put("t", 5);
    again.wait_for(
        "the restarted instance to read",
        Duration::from_secs(20),
        |i| {
            let seen = texts(&i.handled());
            later.iter().all(|t| seen.contains(t))
        },
    );
    assert!(
        restarted.elapsed() < Duration::from_secs(15),
        "regained without waiting for the 30 s expiry"
    );
}

#[test]
fn a_stolen_lease_stops_the_old_reader_at_once_and_it_writes_no_checkpoint_after() {
    let Some(st) = stack(1) else { return };
    let dir = Scratch::new("stolen");
    let (_, last) = st.put_noting_the_last("r", 5);
    let a = Instance::start(&dir, "a", st.instance_config("a", "30s"));
    a.wait_for("the first records", Duration::from_secs(60), |i| {
        i.handled().len() == 5
    });
    st.wait_checkpointed(&last);
    let shard = "shardId-000000000000";
    let key = format!("{}:{shard}", st.stream);
    st.rt
        .block_on(st.d.set(&st.table, &key, "lease_owner", s("thief")));
    st.rt
        .block_on(st.d.set(&st.table, &key, "lease_counter", n(1_000_000)));
    let checkpoint = st.checkpoint(shard);
    a.wait_for("a to notice", Duration::from_secs(10), |i| {
        i.logged("lease lost") || i.logged("renewal failed")
    });
    let after = st.put("t", 5);
    // Proving something does not happen: a would have read these within 2 s.
    std::thread::sleep(Duration::from_secs(2));
    let seen = texts(&a.handled());
    assert!(
        after.iter().all(|t| !seen.contains(t)),
        "a stopped reading: {seen:?}"
    );
    assert_eq!(
        st.checkpoint(shard),
        checkpoint,
        "a wrote no checkpoint after losing the lease"
    );
    assert_eq!(st.owner(shard).as_deref(), Some("thief"));
}

#[test]
fn a_missing_lease_table_stops_the_start_with_the_command_that_creates_it() {
    let Some(st) = stack(1) else { return };
    let dir = Scratch::new("notable");
    let config = st
        .instance_config("a", "10s")
        .leases("table", "no-such-table");
    let path = dir.write("a.toml", config.render());
    let out = Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .arg("run")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no-such-table") && stderr.contains("aws dynamodb create-table"),
        "{stderr}"
    );
    assert!(!stderr.contains("host running"));
    let _ = Path::new(&path);
}

#[test]
fn two_instances_split_four_shards_two_and_two_and_a_handoff_rereads_nothing() {
    let Some(st) = stack(4) else { return };
    let dir = Scratch::new("balance");
    let first = st.put("r", 40);
    let a = Instance::start(&dir, "a", st.instance_config("a", "10s"));
    a.wait_for("a to handle every record", Duration::from_secs(60), |i| {
        texts(&i.handled()).len() == 40
    });
    let b = Instance::start(&dir, "b", st.instance_config("b", "10s"));
    let shards: Vec<String> = (0..4).map(|i| format!("shardId-{i:012}")).collect();
    let owners = || -> Vec<Option<String>> { shards.iter().map(|s| st.owner(s)).collect() };
    let started = Instant::now();
    let even = || {
        let o = owners();
        o.iter().filter(|x| x.as_deref() == Some("a")).count() == 2
            && o.iter().filter(|x| x.as_deref() == Some("b")).count() == 2
    };
    wait_until_else("an even split", Duration::from_secs(30), even, || {
        format!("owners {:?}\nb's log:\n{}", owners(), b.text())
    });
    let converged = started.elapsed();
    let later = st.put("t", 40);
    let all: BTreeSet<String> = first.iter().chain(&later).cloned().collect();
    let both = || {
        let mut seen = texts(&a.handled());
        seen.extend(texts(&b.handled()));
        seen
    };
    a.wait_for("every record handled", Duration::from_secs(60), |_| {
        both() == all
    });
    // Proving something does not happen: no flapping, the split holds over more listing periods.
    std::thread::sleep(Duration::from_secs(3));
    assert!(even(), "the split held: {:?}", owners());
    let (by_a, by_b) = (a.handled(), b.handled());
    assert_eq!(
        by_a.len() + by_b.len(),
        all.len(),
        "every record handled exactly once: a handled {}, b {} (b: {by_b:?})",
        by_a.len(),
        by_b.len()
    );
    assert!(!by_b.is_empty(), "b handled its shards' records");
    eprintln!("converged to 2/2 in {converged:?}");
}

#[test]
fn a_third_instance_on_four_shards_gets_one_from_an_instance_holding_two() {
    let Some(st) = stack(4) else { return };
    let dir = Scratch::new("balance3");
    let a = Instance::start(&dir, "a", st.instance_config("a", "10s"));
    let b = Instance::start(&dir, "b", st.instance_config("b", "10s"));
    let shards: Vec<String> = (0..4).map(|i| format!("shardId-{i:012}")).collect();
    let owners = || -> Vec<Option<String>> { shards.iter().map(|s| st.owner(s)).collect() };
    let held_by = |owner: &str| {
        owners()
            .iter()
            .filter(|x| x.as_deref() == Some(owner))
            .count()
    };
    wait_until("a and b two shards each", Duration::from_secs(30), || {
        held_by("a") == 2 && held_by("b") == 2
    });
    let c = Instance::start(&dir, "c", st.instance_config("c", "10s"));
    wait_until_else(
        "c to hold a shard",
        Duration::from_secs(30),
        || held_by("c") == 1,
        || format!("owners {:?}\nc's log:\n{}", owners(), c.text()),
    );
    // Proving something does not happen: no flapping over more listing periods.
    std::thread::sleep(Duration::from_secs(3));
    let split = [held_by("a"), held_by("b"), held_by("c")];
    assert_eq!(split.iter().sum::<usize>(), 4, "{:?}", owners());
    assert!(
        split.iter().all(|n| (1..=2).contains(n)),
        "a 2/1/1 split: {:?}",
        owners()
    );
    drop((a, b));
}
