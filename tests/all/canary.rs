//! Progressive rollouts (`deploy --canary`) on a fleet of `shardhost` processes on kinesis-mock
//! and dynalite: a version that traps is rolled back within its window and never settles a
//! record, the other shards never see it; a clean one is promoted when its window passes, and
//! a fleet killed and restarted mid-rollout keeps the rollout (it lives in the table).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use shardhost::fleet_table::{Rollout, RolloutState};
use shardhost::testing::version_of;

use crate::fleet::{Fleet, SUBSCRIPTION, text};
use crate::support::fleet::Instance;
use crate::support::kinesis::Kinesis;
use crate::support::{guest, wait_until_else};

fn version(handler: &str) -> String {
    version_of(&std::fs::read(guest(handler)).unwrap())
}

impl Fleet {
    /// The subscription's rollout, as `status --config --json` shows it.
    pub fn rollout_now(&self) -> Option<Rollout> {
        self.report()
            .desired_of(SUBSCRIPTION)
            .and_then(|d| d.rollout.clone())
    }

    pub fn wait_rollout(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Rollout) -> bool,
    ) -> Rollout {
        wait_until_else(
            what,
            timeout,
            || self.rollout_now().is_some_and(|r| pred(&r)),
            || format!("{:#?}", self.rollout_now()),
        );
        self.rollout_now().unwrap()
    }

    pub fn wait_all_shards_held(&self, shards: usize) {
        wait_until_else(
            "every shard held",
            Duration::from_secs(60),
            || {
                let report = self.report();
                let held: usize = report
                    .instances
                    .iter()
                    .filter(|i| i.live)
                    .filter_map(|i| i.heartbeat.subscriptions.get(SUBSCRIPTION))
                    .map(|r| r.shards)
                    .sum();
                held == shards
            },
            || format!("{:#?}", self.report()),
        );
    }
}

/// Puts records under 64 keys (so every shard gets some) until stopped.
pub struct Producer {
    stop: Arc<AtomicBool>,
    put: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<()>,
}

impl Producer {
    pub fn start(endpoint: &str, stream: &str, data: &'static str) -> Producer {
        let (stop, put) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let thread = {
            let (stop, put) = (stop.clone(), put.clone());
            let (endpoint, stream) = (endpoint.to_owned(), stream.to_owned());
            std::thread::spawn(move || {
                let k = Kinesis::new(&endpoint);
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    k.put(&stream, &format!("key-{}", i % 64), data);
                    i += 1;
                    put.store(i, Ordering::Relaxed);
                    // The scenario: a steady trickle, about 50 records a second.
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        Producer { stop, put, thread }
    }

    pub fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.put.load(Ordering::Relaxed)
    }
}

/// Every record settled by any of `instances`: data -> handler versions that settled it.
fn settled_by(instances: &[&Instance]) -> BTreeMap<String, Vec<(String, String)>> {
    let mut all: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for instance in instances {
        // (`settled()` also lists a record held with its handler: only acks and drops count.)
        for line in instance
            .settled()
            .into_iter()
            .filter(|l| l.outcome == "ack" || l.outcome == "drop")
        {
            all.entry(line.sequence.clone())
                .or_default()
                .push((line.shard.clone(), line.handler.clone()));
        }
    }
    all
}

#[test]
fn a_canary_that_traps_is_rolled_back_within_its_window_and_settles_nothing() {
    let Some(f) = Fleet::new(4, "canary-abort") else {
        return;
    };
    let a = f.start_fast("a", "always_ack");
    let b = f.start_fast("b", "always_ack");
    f.wait_all_shards_held(4);
    let scripted = guest("scripted");
    let out = f.cli(
        "deploy",
        &[
            SUBSCRIPTION,
            scripted.to_str().unwrap(),
            "--canary",
            "50%",
            "--canary-for",
            "5m",
            "--abort-on",
            "traps>1%",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let started = f.rollout_now().expect("a rollout row");
    assert_eq!(started.state, RolloutState::Running);
    assert_eq!(started.shards.len(), 2, "50% of 4 shards");
    // Every record makes the new version trap (scripted: `panic`); the current one acks it.
    let producer = Producer::start(&f.st.kinesis, &f.st.stream, "panic");
    let aborted = f.wait_rollout("the rollout rolled back", Duration::from_secs(120), |r| {
        r.state != RolloutState::Running
    });
    assert_eq!(aborted.state, RolloutState::Aborted, "{aborted:#?}");
    assert!(
        aborted
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("traps>1%"),
        "{aborted:#?}"
    );
    assert_eq!(aborted.canary_id, started.canary_id);
    // Back on the fleet's version, the canary shards settle new records again (the ones the
    // rolled-back version failed on stay held, as any held record, until the shard is read
    // again from its checkpoint).
    let ack = version("always_ack");
    let on_canary = |settled: &BTreeMap<String, Vec<(String, String)>>| {
        settled
            .values()
            .any(|by| started.shards.iter().any(|c| *c == by[0].0))
    };
    wait_until_else(
        "a canary shard settling records again",
        Duration::from_secs(60),
        || on_canary(&settled_by(&[&a, &b])),
        || format!("{:#?}", settled_by(&[&a, &b])),
    );
    producer.finish();
    let settled = settled_by(&[&a, &b]);
    let base: BTreeSet<&str> = [
        "shardId-000000000000",
        "shardId-000000000001",
        "shardId-000000000002",
        "shardId-000000000003",
    ]
    .into_iter()
    .filter(|s| !started.shards.iter().any(|c| c == s))
    .collect();
    for (sequence, by) in &settled {
        assert_eq!(by.len(), 1, "{sequence} settled twice: {by:?}");
        assert_eq!(
            by[0].1,
            ack[..12],
            "{sequence} settled by the rolled-back version"
        );
    }
    assert!(
        settled.values().any(|by| base.contains(by[0].0.as_str())),
        "the other shards settled records all along"
    );
    // The lease rows stay the seeds' rows: no rollout attribute ever lands on one.
    for shard in &started.shards {
        let row = f.st.row(shard).expect("a lease row");
        assert!(
            row.keys()
                .all(|k| !k.contains("canary") && !k.contains("rollout")),
            "{row:?}"
        );
    }
}

#[test]
fn a_clean_canary_is_promoted_when_its_window_passes_even_across_a_fleet_restart() {
    let Some(f) = Fleet::new(4, "canary-promote") else {
        return;
    };
    let mut a = f.start_fast("a", "always_ack");
    let mut b = f.start_fast("b", "always_ack");
    f.wait_all_shards_held(4);
    let producer = Producer::start(&f.st.kinesis, &f.st.stream, "ack");
    let drop = guest("always_drop");
    let out = f.cli(
        "deploy",
        &[
            SUBSCRIPTION,
            drop.to_str().unwrap(),
            "--canary",
            "25%",
            "--canary-for",
            "8s",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let started = f.rollout_now().expect("a rollout row");
    assert_eq!(started.shards.len(), 1, "25% of 4 shards");
    // Mid-window, the whole fleet dies and comes back: the rollout is in the table.
    a.kill9();
    b.kill9();
    let a = f.start_fast("a", "always_ack");
    let b = f.start_fast("b", "always_ack");
    let promoted = f.wait_rollout("the rollout promoted", Duration::from_secs(120), |r| {
        r.state != RolloutState::Running
    });
    assert_eq!(promoted.state, RolloutState::Promoted, "{promoted:#?}");
    assert_eq!(
        (
            promoted.canary_id.as_str(),
            promoted.started_at_ms,
            &promoted.shards
        ),
        (
            started.canary_id.as_str(),
            started.started_at_ms,
            &started.shards
        ),
        "the same rollout, kept across the restart"
    );
    let drop_v = version("always_drop");
    let desired = f.report().desired_of(SUBSCRIPTION).cloned().unwrap();
    assert_eq!(
        desired.version.as_deref(),
        Some(drop_v.as_str()),
        "promoted as a deploy"
    );
    f.wait_running(&["a", "b"], &drop_v);
    producer.finish();
    std::mem::drop((a, b));
}
