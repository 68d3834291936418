//! Deploys to a fleet: several `shardhost run` processes on one lease table (dynalite) and one
//! stream (kinesis-mock) follow the desired handler version the table holds. One deploy reaches
//! every instance (and ones started later), a refused component never becomes desired, rollback
//! is fleet-wide, a dead instance does not hold the others back, and `deploy --config` needs no
//! running instance.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use shardhost::status::fleet::FleetReport;
use shardhost::testing::version_of;

use crate::support::fleet::{Instance, SettledLine, Stack, shardhost, stack};
use crate::support::kinesis::Kinesis;
use crate::support::{HostToml, Scratch, guest, wait_until, wait_until_else};

pub const SUBSCRIPTION: &str = "test";

/// A stack, its instances and a config file for the command line, for one test.
pub struct Fleet {
    pub st: Stack,
    pub dir: Scratch,
    /// The config `deploy --config` and `status --config` read (no admin API, no owner).
    pub cli_config: PathBuf,
}

impl Fleet {
    pub fn new(shards: i32, tag: &str) -> Option<Fleet> {
        let st = stack(shards)?;
        let dir = Scratch::new(tag);
        let cli_config = dir.write("cli.toml", st.fleet_config(None, "always_ack").render());
        Some(Fleet {
            st,
            dir,
            cli_config,
        })
    }

    /// Starts instance `owner` whose config file names `handler`.
    pub fn start(&self, owner: &str, handler: &str) -> Instance {
        self.start_with(owner, self.st.fleet_config(Some(owner), handler))
    }

    pub fn start_with(&self, owner: &str, config: HostToml) -> Instance {
        Instance::start(&self.dir, owner, config)
    }

    /// Instance `owner` on the fleet, running `handler`, polling the table every 300 ms.
    pub fn start_fast(&self, owner: &str, handler: &str) -> Instance {
        let config = self
            .st
            .fleet_config(Some(owner), handler)
            .set("fleet", "poll", "300ms")
            .set("fleet", "heartbeat", "500ms");
        self.start_with(owner, config)
    }

    /// `shardhost ARGS... --config cli.toml REST...`
    pub fn cli(&self, verb: &str, rest: &[&str]) -> std::process::Output {
        let config = self.cli_config.to_str().unwrap();
        let mut args = vec![verb, "--config", config];
        args.extend_from_slice(rest);
        shardhost(&args)
    }

    /// The fleet, read from the table by `status --config --json`.
    pub fn report(&self) -> FleetReport {
        let out = self.cli("status", &["--json"]);
        assert!(out.status.success(), "status --config: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Waits until every instance named runs `version`, live, in the table's view.
    pub fn wait_running(&self, owners: &[&str], version: &str) {
        wait_until_else(
            &format!("{owners:?} to run {}", &version[..12]),
            Duration::from_secs(30),
            || {
                let report = self.report();
                let running = report.rollout(SUBSCRIPTION, version, 0).running;
                owners.iter().all(|o| running.iter().any(|r| r == o))
            },
            || format!("{:#?}", self.report()),
        );
    }
}

impl Stack {
    /// Instance `owner`'s host (`None`: the command line's config) on the stack, heartbeats every
    /// second, the admin API on a free port, running the guest `handler` from the start.
    pub fn fleet_config(&self, owner: Option<&str>, handler: &str) -> HostToml {
        self.fleet_host(owner)
            .subscription(self.subscription(handler).trim_horizon().batch(10))
    }

    /// As `fleet_config`, without the subscription.
    pub fn fleet_host(&self, owner: Option<&str>) -> HostToml {
        let host = match owner {
            Some(owner) => self.host(owner).admin(),
            None => HostToml::kinesis(&self.kinesis).dynamodb_leases(&self.table, &self.dynamodb),
        };
        host.leases("renew_every", "1s")
            .leases("list_every", "1s")
            .leases("checkpoint_every", "200ms")
            .set("fleet", "heartbeat", "1s")
    }
}

pub fn text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn version(handler: &str) -> String {
    version_of(&std::fs::read(guest(handler)).unwrap())
}

pub fn path(handler: &str) -> String {
    guest(handler).display().to_string()
}

/// Puts records under random keys until finished; answers each record's (shard, sequence).
struct Producer {
    stop: Arc<AtomicBool>,
    put: Arc<Mutex<Vec<(String, String)>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Producer {
    fn start(endpoint: &str, stream: &str) -> Producer {
        let (stop, put) = (Arc::new(AtomicBool::new(false)), Arc::default());
        let (k, stream) = (Kinesis::new(endpoint), stream.to_owned());
        let (stop2, put2): (_, Arc<Mutex<Vec<_>>>) = (stop.clone(), Arc::clone(&put));
        let thread = std::thread::spawn(move || {
            for i in 0.. {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let at = k.put(&stream, &format!("key-{i}-{}", i * 7919), format!("r{i}"));
                put2.lock().unwrap().push(at);
                // Pacing the load: about 50 records a second over the shards.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Producer { stop, put, thread }
    }

    fn finish(self) -> Vec<(String, String)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        Arc::try_unwrap(self.put).unwrap().into_inner().unwrap()
    }
}

/// Every record settled by any of `instances`.
pub fn settled(instances: &[&Instance]) -> Vec<SettledLine> {
    instances.iter().flat_map(|i| i.settled()).collect()
}

/// Sequence numbers compare as numbers.
fn numeric(sequence: &str) -> (usize, &str) {
    (sequence.len(), sequence)
}

/// Each record put was settled exactly once, and on each shard the versions answering go
/// `first`, then `second`, never back.
fn assert_once_each_in_version_order(
    all: &[SettledLine],
    put: &[(String, String)],
    first: &str,
    second: &str,
) {
    let mut count: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for s in all {
        *count.entry((&s.shard, &s.sequence)).or_default() += 1;
    }
    for (shard, sequence) in put {
        assert_eq!(
            count.get(&(shard.as_str(), sequence.as_str())),
            Some(&1),
            "{shard} {sequence}"
        );
    }
    let mut by_shard: BTreeMap<&str, Vec<&SettledLine>> = BTreeMap::new();
    for s in all {
        by_shard.entry(&s.shard).or_default().push(s);
    }
    for (shard, mut lines) in by_shard {
        lines.sort_by(|a, b| numeric(&a.sequence).cmp(&numeric(&b.sequence)));
        let versions: Vec<&str> = lines.iter().map(|l| l.handler.as_str()).collect();
        let switch = versions
            .iter()
            .position(|v| *v == &second[..12])
            .unwrap_or(versions.len());
        assert!(
            versions[..switch].iter().all(|v| *v == &first[..12])
                && versions[switch..].iter().all(|v| *v == &second[..12]),
            "{shard}: versions out of deploy order: {versions:?}"
        );
    }
}

#[test]
fn one_deploy_reaches_every_instance_and_one_started_later_runs_it_from_its_first_record() {
    let Some(f) = Fleet::new(4, "fleet-deploy") else {
        return;
    };
    let (v1, v2) = (version("always_ack"), version("always_drop"));
    let a = f.start("a", "always_ack");
    let b = f.start("b", "always_ack");
    let c = f.start("c", "always_ack");
    let producer = Producer::start(&f.st.kinesis, &f.st.stream);
    wait_until("every shard read", Duration::from_secs(30), || {
        settled(&[&a, &b, &c])
            .iter()
            .map(|s| &s.shard)
            .collect::<HashSet<_>>()
            .len()
            == 4
    });
    f.wait_running(&["a", "b", "c"], &v1);
    // The shards settle over the three (2/1/1) before the rollout: a shard that moved during it
    // from an instance on the new version to one not yet on it would go back a version.
    wait_until(
        "every instance holding a shard",
        Duration::from_secs(30),
        || {
            let report = f.report();
            let held: Vec<usize> = ["a", "b", "c"]
                .iter()
                .filter_map(|o| {
                    report
                        .instances
                        .iter()
                        .find(|i| i.live && i.heartbeat.owner == *o)
                })
                .filter_map(|i| {
                    i.heartbeat
                        .subscriptions
                        .get(SUBSCRIPTION)
                        .map(|r| r.shards)
                })
                .collect();
            held.len() == 3 && held.iter().all(|n| *n >= 1) && held.iter().sum::<usize>() == 4
        },
    );

    // Through b's admin API, whose address the table's heartbeats show.
    let report = f.report();
    let admin = report
        .instances
        .iter()
        .find(|i| i.heartbeat.owner == "b")
        .unwrap();
    let admin = admin.heartbeat.admin.clone().expect("b has an admin API");
    let out = shardhost(&[
        "deploy",
        "--admin",
        &admin,
        SUBSCRIPTION,
        &path("always_drop"),
        "--wait",
        "--timeout",
        "30s",
    ]);
    assert!(out.status.success(), "deploy --wait: {}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("every live instance runs"),
        "{}",
        text(&out)
    );
    let report = f.report();
    let desired = report.desired_of(SUBSCRIPTION).unwrap();
    assert_eq!(desired.version.as_deref(), Some(v2.as_str()));
    assert_eq!(desired.previous_version.as_deref(), Some(v1.as_str()));
    assert_eq!(desired.generation, 1);
    for i in [&a, &b, &c] {
        i.wait_for(
            "a record dropped by the new version",
            Duration::from_secs(30),
            |i| {
                i.settled()
                    .iter()
                    .any(|s| s.handler == v2[..12] && s.outcome == "drop")
            },
        );
    }

    // A fourth instance, whose config file still names the old version.
    let d = f.start("d", "always_ack");
    d.wait_for(
        "the fleet's version at start",
        Duration::from_secs(30),
        |i| i.logged("running the fleet's desired handler version"),
    );
    d.wait_for("its first record", Duration::from_secs(60), |i| {
        !i.settled().is_empty()
    });
    let put = producer.finish();
    let instances = [&a, &b, &c, &d];
    wait_until_else(
        &format!("all {} records settled", put.len()),
        Duration::from_secs(60),
        || {
            let seen: HashSet<(String, String)> = settled(&instances)
                .into_iter()
                .map(|s| (s.shard, s.sequence))
                .collect();
            put.iter().all(|p| seen.contains(p))
        },
        || d.text(),
    );
    assert!(
        d.settled().iter().all(|s| s.handler == v2[..12]),
        "d ran only the new version"
    );
    // The lease rows hold the lease table's attributes only (with the subscription whose rows
    // they are): the fleet's rows are its own.
    let lease_attributes = [
        "lease_key",
        "lease_owner",
        "lease_expiry",
        "lease_counter",
        "checkpoint",
        "opened_at",
        "handoff_to",
        "subscription",
    ];
    for shard in (0..4).map(|i| format!("shardId-{i:012}")) {
        let row = f.st.row(&shard).unwrap();
        assert!(
            row.keys().all(|k| lease_attributes.contains(&k.as_str())),
            "{shard}: {row:?}"
        );
    }
    assert_once_each_in_version_order(&settled(&instances), &put, &v1, &v2);
}

#[test]
fn a_refused_component_never_becomes_desired_and_rollback_is_fleet_wide() {
    let Some(f) = Fleet::new(2, "fleet-refused") else {
        return;
    };
    let (v1, v2) = (version("always_ack"), version("big_memory"));
    let a = f.start("a", "always_ack");
    // `small` runs the same handler but refuses what does not fit in 4 MiB.
    let small_config = f.st.fleet_host(Some("small")).subscription(
        f.st.subscription("always_ack")
            .trim_horizon()
            .batch(10)
            .limit("memory", "4MiB"),
    );
    let small = f.start_with("small", small_config);
    f.wait_running(&["a", "small"], &v1);

    // Not a handler component: refused by `deploy --config` before the table is touched.
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("wrongworld")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("desired version is unchanged"),
        "{}",
        text(&out)
    );
    assert_eq!(f.report().desired_of(SUBSCRIPTION).unwrap().version, None);

    // Fits the deploying config (64 MiB) but not `small`: `--wait` names it and why.
    let out = f.cli(
        "deploy",
        &[
            SUBSCRIPTION,
            &path("big_memory"),
            "--wait",
            "--timeout",
            "30s",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("small refused it") && stderr.contains("memory"),
        "{}",
        text(&out)
    );
    let report = f.report();
    assert!(!report.converged(SUBSCRIPTION));
    let small_runs = &report
        .instances
        .iter()
        .find(|i| i.heartbeat.owner == "small")
        .unwrap()
        .heartbeat
        .subscriptions[SUBSCRIPTION];
    assert_eq!(
        small_runs.version, v1,
        "the refusing instance keeps its version"
    );
    assert_eq!(
        small_runs.refused.as_ref().map(|r| r.version.as_str()),
        Some(v2.as_str())
    );
    f.wait_running(&["a"], &v2);

    // Rollback, fleet-wide, through the table.
    let out = f.cli(
        "deploy",
        &[SUBSCRIPTION, "--rollback", "--wait", "--timeout", "30s"],
    );
    assert!(out.status.success(), "rollback: {}", text(&out));
    f.wait_running(&["a", "small"], &v1);
    let report = f.report();
    let desired = report.desired_of(SUBSCRIPTION).unwrap();
    assert_eq!(
        (desired.version.as_deref(), desired.generation),
        (Some(v1.as_str()), 2)
    );
    assert_eq!(desired.previous_version.as_deref(), Some(v2.as_str()));
    assert!(report.converged(SUBSCRIPTION), "{report:#?}");
    drop((a, small));
}

#[test]
fn kill_9_of_one_instance_during_a_rollout_does_not_stop_the_others_converging() {
    let Some(f) = Fleet::new(2, "fleet-kill") else {
        return;
    };
    let v2 = version("always_drop");
    let a = f.start("a", "always_ack");
    let mut b = f.start("b", "always_ack");
    let c = f.start("c", "always_ack");
    f.wait_running(&["a", "b", "c"], &version("always_ack"));
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_drop")]);
    assert!(out.status.success(), "{}", text(&out));
    b.kill9();
    // b misses its heartbeats and drops out of the live instances; the others converge.
    let out = f.cli(
        "deploy",
        &[
            SUBSCRIPTION,
            &path("always_drop"),
            "--wait",
            "--timeout",
            "30s",
        ],
    );
    assert!(
        out.status.success(),
        "deploy --wait after kill -9: {}",
        text(&out)
    );
    f.wait_running(&["a", "c"], &v2);
    let report = f.report();
    assert!(report.converged(SUBSCRIPTION), "{report:#?}");
    assert!(
        report
            .instances
            .iter()
            .any(|i| i.heartbeat.owner == "b" && !i.live),
        "{report:#?}"
    );
    drop((a, c));
}

#[test]
fn deploy_config_with_no_instance_running_then_instances_start_on_that_version() {
    let Some(f) = Fleet::new(2, "fleet-cold") else {
        return;
    };
    let v2 = version("always_drop");
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_drop"), "--wait"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no live instance runs"),
        "{}",
        text(&out)
    );
    let out = f.cli("status", &[]);
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.contains(&format!("desired {}", &v2[..12])),
        "{}",
        text(&out)
    );

    let a = f.start("a", "always_ack");
    let b = f.start("b", "always_ack");
    let k = Kinesis::new(&f.st.kinesis);
    for i in 0..20 {
        k.put(&f.st.stream, &format!("key-{i}"), format!("r{i}"));
    }
    wait_until("20 records settled", Duration::from_secs(60), || {
        settled(&[&a, &b]).len() >= 20
    });
    let all = settled(&[&a, &b]);
    assert!(
        all.iter()
            .all(|s| s.handler == v2[..12] && s.outcome == "drop"),
        "{all:?}"
    );
    for i in [&a, &b] {
        assert!(i.logged("running the fleet's desired handler version"));
    }
    f.wait_running(&["a", "b"], &v2);
}

#[test]
fn bytes_in_the_table_that_do_not_match_their_version_are_refused_and_the_file_runs() {
    let Some(f) = Fleet::new(1, "fleet-corrupt") else {
        return;
    };
    let (v1, v2) = (version("always_ack"), version("always_drop"));
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_drop")]);
    assert!(out.status.success(), "{}", text(&out));
    // Someone overwrites the stored component (one part is all of it: it is under 350 KB).
    let desired =
        f.st.rt
            .block_on(f.st.d.row(&f.st.table, "#shardhost#desired#shardhost#test"))
            .unwrap();
    let upload = desired["upload"].as_s().unwrap();
    let part = format!("#shardhost#component#shardhost#{SUBSCRIPTION}#{v2}#{upload}#0");
    let mut tampered = std::fs::read(guest("always_drop")).unwrap();
    tampered[100] ^= 0xff;
    f.st.rt.block_on(f.st.d.set(
        &f.st.table,
        &part,
        "bytes",
        AttributeValue::B(Blob::new(tampered)),
    ));

    let a = f.start("a", "always_ack");
    a.wait_for("the refusal at start", Duration::from_secs(30), |i| {
        i.logged("refused the fleet's desired handler version")
    });
    f.wait_running(&["a"], &v1);
    let report = f.report();
    let runs = &report.instances[0].heartbeat.subscriptions[SUBSCRIPTION];
    let refused = runs
        .refused
        .as_ref()
        .expect("the refusal is in the heartbeat");
    assert_eq!(refused.version, v2);
    assert!(refused.error.contains("hash to"), "{refused:?}");
    assert!(!report.converged(SUBSCRIPTION));
}
