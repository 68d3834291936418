//! The fleet's roster on dynalite: every instance's heartbeat in a row of its own, written only
//! by that instance, read by `status` and `deploy --wait`. A thousand instances fit; a crashed
//! instance's row is listed as not live, then not at all once it expires; a clean stop removes
//! the row; forged rows are skipped and named (`forged.rs`).

mod forged;

use std::sync::Arc;
use std::time::Duration;

use shardhost::fleet_table::FleetTable;
use shardhost::lease::{DynamoLeaseStore, DynamoOptions, now_ms};
use shardhost::status::fleet::{FleetReport, Heartbeat, Running};
use shardhost::testing::Fleet;

use crate::support::dynamo::Dynamo;
use crate::support::fleet::{Instance, Stack, shardhost, stack};
use crate::support::{HostToml, Scratch, dynamodb_endpoint, unique, wait_until, wait_until_else};

/// `[host] name` when a config does not set it.
const SERVICE: &str = "shardhost";

/// The fleet of `service` on the lease table `table`, written and read as an instance would.
async fn fleet(endpoint: &str, table: &str, service: &str) -> Arc<Fleet> {
    let store = DynamoLeaseStore::connect(DynamoOptions::local(table, endpoint)).await;
    Arc::new(Fleet::new(FleetTable::beside(&store), service))
}

/// A heartbeat as a production instance writes it: an owner id like the default one (hostname
/// and a random suffix), an admin address, two subscriptions.
fn heartbeat(owner: &str, beat_ms: u64, beat_every_ms: u64) -> Heartbeat {
    let running = |version: char, generation| Running {
        version: version.to_string().repeat(64),
        generation,
        shards: 4,
        refused: None,
        canary: None,
        shadow: None,
        refused_trials: Vec::new(),
    };
    Heartbeat {
        owner: owner.to_owned(),
        admin: Some("http://10.0.113.207:9750".to_owned()),
        started_ms: beat_ms.saturating_sub(3_600_000),
        beat_ms,
        beat_every_ms,
        subscriptions: [
            ("orders".to_owned(), running('a', 12)),
            ("payments".to_owned(), running('b', 7)),
        ]
        .into(),
    }
}

/// The owner id of simulated instance `i`.
fn simulated(i: usize) -> String {
    format!("ip-10-0-{}-{}-{:08x}", i / 250, i % 250, i * 7919)
}

/// Writes the heartbeats of `count` simulated instances, 16 at a time, through the instances'
/// own code path.
async fn simulate(fleet: &Arc<Fleet>, count: usize) {
    let now = now_ms();
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..count {
        if writes.len() == 16 {
            writes.join_next().await.unwrap().unwrap();
        }
        let fleet = Arc::clone(fleet);
        writes.spawn(async move {
            let beat = heartbeat(&simulated(i), now, 10_000);
            fleet
                .beat(&beat)
                .await
                .unwrap_or_else(|e| panic!("the heartbeat of simulated instance {i}: {e}"));
        });
    }
    while let Some(done) = writes.join_next().await {
        done.unwrap();
    }
}

impl Stack {
    /// A host on the stack's lease table with heartbeats every second (`owner`: `None` is the
    /// command line's config, with no subscription running).
    fn roster_host(&self, owner: Option<&str>) -> HostToml {
        let host = match owner {
            Some(owner) => self.config(owner, "always_ack").admin(),
            None => self.config("cli", "always_ack"),
        };
        host.leases("renew_every", "1s")
            .set("fleet", "heartbeat", "1s")
    }
}

/// The fleet, read from the table by `status --config FILE --json`.
fn status(config: &std::path::Path) -> FleetReport {
    let out = shardhost(&["status", "--config", config.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "status --config: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn instance<'r>(report: &'r FleetReport, owner: &str) -> Option<&'r Heartbeat> {
    report
        .instances
        .iter()
        .map(|i| &i.heartbeat)
        .find(|h| h.owner == owner)
}

#[test]
fn a_thousand_instances_heartbeats_fit_and_status_lists_a_real_instance_beside_them() {
    let Some(st) = stack(1) else {
        return;
    };
    let dir = Scratch::new("roster-thousand");
    let cli = dir.write("cli.toml", st.roster_host(None).render());
    let simulated_fleet = st.rt.block_on(fleet(&st.dynamodb, &st.table, SERVICE));
    st.rt.block_on(simulate(&simulated_fleet, 1_000));

    let real = Instance::start(&dir, "real", st.roster_host(Some("real")));
    let mut seen = None;
    wait_until_else(
        "status to list the real instance live beside the 1 000 simulated ones, twice",
        Duration::from_secs(30),
        || {
            let report = status(&cli);
            let listed = report.instances.len() == 1_001;
            let live = report
                .instances
                .iter()
                .find(|i| i.heartbeat.owner == "real");
            let Some(beat) = live
                .filter(|i| i.live && listed)
                .map(|i| i.heartbeat.beat_ms)
            else {
                return false;
            };
            // Its heartbeats keep being written: a later one replaces the first seen.
            *seen.get_or_insert(beat) < beat
        },
        || real.text(),
    );
    let report = st
        .rt
        .block_on(simulated_fleet.report(&["test".to_owned()]))
        .unwrap();
    assert_eq!(report.instances.len(), 1_001);
    let heartbeat = instance(&report, &simulated(999)).expect("simulated instance 999 is listed");
    assert_eq!(heartbeat.subscriptions["orders"].generation, 12);
    assert!(!real.logged("cannot write this instance's heartbeat"));
    let single_row = st
        .rt
        .block_on(st.d.row(&st.table, "#shardhost#fleet#shardhost"));
    assert!(single_row.is_none(), "no fleet-wide roster row is written");
}

/// The key of `owner`'s row in the default service.
fn row_key(owner: &str) -> String {
    format!("#shardhost#instance#{SERVICE}#{owner}")
}

#[test]
fn a_clean_stop_removes_the_instances_row() {
    let Some(st) = stack(1) else {
        return;
    };
    let dir = Scratch::new("roster-stop");
    let cli = dir.write("cli.toml", st.roster_host(None).render());
    let mut real = Instance::start(&dir, "real", st.roster_host(Some("real")));
    wait_until_else(
        "status to list the instance live",
        Duration::from_secs(30),
        || {
            status(&cli)
                .instances
                .iter()
                .any(|i| i.heartbeat.owner == "real" && i.live)
        },
        || real.text(),
    );
    let row = st.rt.block_on(st.d.row(&st.table, &row_key("real")));
    let row = row.expect("the instance's row");
    let expires_at: u64 = row["expires_at"].as_n().unwrap().parse().unwrap();
    let now_s = now_ms() / 1_000;
    assert!(
        (now_s + 290..=now_s + 301).contains(&expires_at),
        "a row written every second expires about five minutes ahead: {expires_at} at {now_s}"
    );
    assert!(
        row["heartbeat"]
            .as_s()
            .unwrap()
            .contains(r#""owner":"real""#)
    );

    assert_eq!(real.interrupt(), Some(0), "{}", real.text());
    let row = st.rt.block_on(st.d.row(&st.table, &row_key("real")));
    assert!(row.is_none(), "a clean stop removes the row: {row:?}");
    assert!(instance(&status(&cli), "real").is_none());
}

/// A fresh lease table on dynalite and a runtime to use it from; `None` without the emulator.
fn table() -> Option<(tokio::runtime::Runtime, String, String)> {
    let endpoint = dynamodb_endpoint()?;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let table = unique("roster");
    rt.block_on(Dynamo::new(&endpoint).create_lease_table(&table));
    Some((rt, endpoint, table))
}

#[test]
fn a_crashed_instances_row_is_listed_not_live_then_no_longer_once_it_expired() {
    let Some((rt, endpoint, table)) = table() else {
        return;
    };
    let fleet = rt.block_on(fleet(&endpoint, &table, SERVICE));
    // The last heartbeat of an instance that crashed: its row expires in about two seconds.
    let lifetime = heartbeat("crashed", 0, 1_000).expires_ms();
    let crashed = heartbeat("crashed", now_ms() + 2_000 - lifetime, 1_000);
    rt.block_on(fleet.beat(&crashed)).unwrap();
    rt.block_on(fleet.beat(&heartbeat("alive", now_ms(), 1_000)))
        .unwrap();
    let report = rt.block_on(fleet.report(&[])).unwrap();
    let listed: Vec<(&str, bool)> = report
        .instances
        .iter()
        .map(|i| (i.heartbeat.owner.as_str(), i.live))
        .collect();
    assert_eq!(listed, [("alive", true), ("crashed", false)]);
    // DynamoDB's TTL may delete the row from then on: its `expires_at` says when.
    let row = rt.block_on(Dynamo::new(&endpoint).row(&table, &row_key("crashed")));
    let expires_at = row.unwrap()["expires_at"].as_n().unwrap().parse::<u64>();
    assert_eq!(expires_at, Ok(crashed.expires_ms().div_ceil(1_000)));

    wait_until(
        "the crashed instance's row to stop being listed",
        Duration::from_secs(10),
        || instance(&rt.block_on(fleet.report(&[])).unwrap(), "crashed").is_none(),
    );
    let report = rt.block_on(fleet.report(&[])).unwrap();
    assert!(instance(&report, "alive").is_some(), "{report:#?}");
}

#[test]
fn leaving_with_an_earlier_heartbeat_keeps_the_later_one() {
    let Some((rt, endpoint, table)) = table() else {
        return;
    };
    let fleet = rt.block_on(fleet(&endpoint, &table, SERVICE));
    let first = heartbeat("a", now_ms(), 1_000);
    let later = heartbeat("a", first.beat_ms + 1_000, 1_000);
    rt.block_on(fleet.beat(&first)).unwrap();
    rt.block_on(fleet.beat(&later)).unwrap();
    rt.block_on(fleet.leave(&first)).unwrap();
    let report = rt.block_on(fleet.report(&[])).unwrap();
    assert_eq!(instance(&report, "a"), Some(&later));
    rt.block_on(fleet.leave(&later)).unwrap();
    assert!(rt.block_on(fleet.report(&[])).unwrap().instances.is_empty());
}

#[test]
fn services_and_owners_named_with_hash_or_percent_keep_to_their_own_rows() {
    let Some((rt, endpoint, table)) = table() else {
        return;
    };
    let now = now_ms();
    let services = ["a", "a#b", "a%23b"];
    let owners = ["b#c", "c", "c%"];
    for (service, owner) in services.iter().zip(owners) {
        let fleet = rt.block_on(fleet(&endpoint, &table, service));
        rt.block_on(fleet.beat(&heartbeat(owner, now, 1_000)))
            .unwrap();
    }
    for (service, owner) in services.iter().zip(owners) {
        let fleet = rt.block_on(fleet(&endpoint, &table, service));
        let report = rt.block_on(fleet.report(&[])).unwrap();
        let listed: Vec<&str> = report
            .instances
            .iter()
            .map(|i| i.heartbeat.owner.as_str())
            .collect();
        assert_eq!(listed, [owner], "service {service}");
    }
}
