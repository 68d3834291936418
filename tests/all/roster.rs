//! The fleet's roster on dynalite: every instance's heartbeat in a row of its own, written only
//! by that instance, read by `status` and `deploy --wait`. A thousand instances fit; a crashed
//! instance's row is listed as not live, then not at all once it expires; a clean stop removes
//! the row.

use std::sync::Arc;
use std::time::Duration;

use shardhost::lease::{DynamoLeaseStore, DynamoOptions, now_ms};
use shardhost::status::fleet::{FleetReport, Heartbeat, Running};
use shardhost::testing::Fleet;

use crate::support::fleet::{Instance, Stack, shardhost, stack};
use crate::support::{HostToml, Scratch, wait_until_else};

/// `[host] name` when a config does not set it.
const SERVICE: &str = "shardhost";

/// The fleet of `service` on the lease table `table`, written and read as an instance would.
async fn fleet(endpoint: &str, table: &str, service: &str) -> Arc<Fleet> {
    let store = DynamoLeaseStore::connect(DynamoOptions::local(table, endpoint)).await;
    Arc::new(Fleet::new(Arc::new(store), service))
}

/// A heartbeat as a production instance writes it: an owner id like the default one (hostname
/// and a random suffix), an admin address, two subscriptions.
fn heartbeat(owner: &str, beat_ms: u64, beat_every_ms: u64) -> Heartbeat {
    let running = |version: char, generation| Running {
        version: version.to_string().repeat(64),
        generation,
        shards: 4,
        refused: None,
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
            let live = report.instances.iter().find(|i| i.heartbeat.owner == "real");
            let Some(beat) = live.filter(|i| i.live && listed).map(|i| i.heartbeat.beat_ms) else {
                return false;
            };
            // Its heartbeats keep being written: a later one replaces the first seen.
            *seen.get_or_insert(beat) < beat
        },
        || real.text(),
    );
    let report = st.rt.block_on(simulated_fleet.report(&["test".to_owned()])).unwrap();
    assert_eq!(report.instances.len(), 1_001);
    let heartbeat = instance(&report, &simulated(999)).expect("simulated instance 999 is listed");
    assert_eq!(heartbeat.subscriptions["orders"].generation, 12);
    assert!(!real.logged("cannot write this instance's heartbeat"));
}
