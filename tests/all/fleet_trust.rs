//! Fleet deploys you can trust: the desired row is untrusted input (a hostile or broken row is a
//! refused generation, never a crash or a failed start), deploys keep reaching the fleet after
//! the row was deleted or restored from a backup, racing deploys never leave a version whose
//! bytes are gone, and with trusted keys only signed versions run.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use shardhost::fleet_table::FleetTable;
use shardhost::lease::{DynamoLeaseStore, DynamoOptions};
use shardhost::status::fleet::FleetReport;
use shardhost::testing::version_of;
use shardhost::testing::{Fleet as TableFleet, Sign};

use crate::fleet::{Fleet, SUBSCRIPTION, path, settled, text, version};
use crate::support::dynamo::Row;
use crate::support::fleet::Instance;
use crate::support::kinesis::Kinesis;
use crate::support::{dynamodb_endpoint, unique, wait_until_else};

/// The desired row of subscription `test` of service `shardhost` (the default `[host] name`).
pub const DESIRED: &str = "#shardhost#desired#shardhost#test";

pub fn n(v: &str) -> AttributeValue {
    AttributeValue::N(v.to_owned())
}

pub fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

impl Fleet {
    pub fn desired_row(&self) -> Row {
        self.st
            .rt
            .block_on(self.st.d.row(&self.st.table, DESIRED))
            .expect("a desired row")
    }

    /// Writes `row` with `changes` over it, as a writer of the table could.
    pub fn put_desired(&self, row: &Row, changes: &[(&str, AttributeValue)]) {
        let mut row = row.clone();
        for (name, value) in changes {
            row.insert((*name).to_owned(), value.clone());
        }
        let attrs: Vec<(&str, AttributeValue)> =
            row.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        self.st
            .rt
            .block_on(self.st.d.put_row(&self.st.table, &attrs));
    }

    /// Puts one record and waits until `instance` settles it with `handler` (12 hex digits).
    pub fn handles_a_record_with(&self, instance: &Instance, handler: &str, tag: &str) {
        let k = Kinesis::new(&self.st.kinesis);
        let (shard, sequence) = k.put(&self.st.stream, &unique(tag), tag.to_owned());
        instance.wait_for(
            &format!("record {tag} settled by {handler}"),
            Duration::from_secs(30),
            |i| {
                settled(&[i])
                    .iter()
                    .any(|l| l.shard == shard && l.sequence == sequence && l.handler == handler)
            },
        );
    }
}

/// Attributes written over a row.
type Changes = Vec<(&'static str, AttributeValue)>;

/// The refusal instance `owner` reports for subscription `test`, if any.
fn refusal(report: &FleetReport, owner: &str) -> Option<String> {
    let i = report
        .instances
        .iter()
        .find(|i| i.heartbeat.owner == owner && i.live)?;
    let running = i.heartbeat.subscriptions.get(SUBSCRIPTION)?;
    running.refused.as_ref().map(|r| r.error.clone())
}

#[test]
fn a_hostile_desired_row_is_refused_while_instances_keep_handling_records_and_restart() {
    let Some(f) = Fleet::new(1, "fleet-hostile") else {
        return;
    };
    let (v1, v2) = (version("always_ack"), version("always_drop"));
    let mut a = f.start("a", "always_ack");
    f.wait_running(&["a"], &v1);
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_drop")]);
    assert!(out.status.success(), "{}", text(&out));
    f.wait_running(&["a"], &v2);
    let good = f.desired_row();

    let other = "ab".repeat(32);
    let hostile: Vec<(&str, &str, Changes)> = vec![
        (
            "a huge size",
            "size",
            vec![
                ("version", s(&other)),
                ("size", n("99999999999999")),
                ("generation", n("2")),
            ],
        ),
        (
            "a size past u64",
            "size",
            vec![
                ("version", s(&other)),
                ("size", n("18446744073709551615")),
                ("chunks", n("4294967297")),
                ("generation", n("3")),
            ],
        ),
        (
            "chunks that do not add up to the size",
            "chunks",
            vec![
                ("version", s(&other)),
                ("size", n("1000")),
                ("chunks", n("40000")),
                ("generation", n("4")),
            ],
        ),
        (
            "a version that is no sha256",
            "version",
            vec![("version", s("../../etc/passwd")), ("generation", n("5"))],
        ),
        (
            "a wrong-typed generation",
            "generation",
            vec![("version", s(&other)), ("generation", s("6"))],
        ),
        (
            "a negative generation",
            "generation",
            vec![("version", s(&other)), ("generation", n("-1"))],
        ),
        (
            "a generation past u64",
            "generation",
            vec![
                ("version", s(&other)),
                ("generation", n("18446744073709551616")),
            ],
        ),
    ];
    for (i, (what, attribute, changes)) in hostile.iter().enumerate() {
        f.put_desired(&good, changes);
        wait_until_else(
            &format!("a to report the refusal of {what}"),
            Duration::from_secs(30),
            || refusal(&f.report(), "a").is_some_and(|e| e.contains(attribute)),
            || format!("{:#?}\n{}", f.report(), a.text()),
        );
        assert!(a.alive(), "{what}: the instance died:\n{}", a.text());
        f.handles_a_record_with(&a, &v2[..12], &format!("after-{i}"));
    }

    // A restart while the row is still hostile: it starts, on the version it ran last.
    a.kill9();
    let a = f.start("a", "always_ack");
    wait_until_else(
        "a restarted, reporting the refusal",
        Duration::from_secs(60),
        || {
            let report = f.report();
            refusal(&report, "a").is_some_and(|e| e.contains("generation"))
                && report.rollout(SUBSCRIPTION, &v2, 0).running == ["a"]
        },
        || format!("{:#?}\n{}", f.report(), a.text()),
    );
    f.handles_a_record_with(&a, &v2[..12], "after-restart");

    // A good deploy replaces the hostile row, and the instance converges on it.
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_ack")]);
    assert!(out.status.success(), "{}", text(&out));
    f.wait_running(&["a"], &v1);
    assert_eq!(refusal(&f.report(), "a"), None);
}

#[test]
fn a_deleted_or_restored_desired_row_does_not_stop_later_deploys_reaching_the_fleet() {
    let Some(f) = Fleet::new(1, "fleet-generations") else {
        return;
    };
    let (v1, v2, v3) = (
        version("always_ack"),
        version("always_drop"),
        version("batchall"),
    );
    let _a = f.start("a", "always_ack");
    f.wait_running(&["a"], &v1);
    for handler in ["always_drop", "batchall"] {
        let out = f.cli("deploy", &[SUBSCRIPTION, &path(handler)]);
        assert!(out.status.success(), "{}", text(&out));
    }
    f.wait_running(&["a"], &v3);

    // The row is deleted (by hand, or a table restored without it): the next deploy reaches a.
    f.st.rt.block_on(f.st.d.delete_row(&f.st.table, DESIRED));
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_drop")]);
    assert!(out.status.success(), "{}", text(&out));
    f.wait_running(&["a"], &v2);
    let after_delete = f.desired_row();

    // Deploys move on; then the row is restored from that backup: the next deploy reaches a.
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_ack")]);
    assert!(out.status.success(), "{}", text(&out));
    f.wait_running(&["a"], &v1);
    f.put_desired(&after_delete, &[]);
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("batchall")]);
    assert!(out.status.success(), "{}", text(&out));
    f.wait_running(&["a"], &v3);
    assert!(f.report().converged(SUBSCRIPTION), "{:#?}", f.report());
}

#[test]
fn racing_deploys_never_make_a_version_desired_whose_bytes_are_gone() {
    let Some(endpoint) = dynamodb_endpoint() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = crate::support::dynamo::Dynamo::new(&endpoint);
    let table = unique("race");
    rt.block_on(d.create_lease_table(&table));
    let store = rt.block_on(DynamoLeaseStore::connect(DynamoOptions::local(
        &table, &endpoint,
    )));
    let fleet = TableFleet::new(FleetTable::beside(&store), "svc");
    let components: Vec<Vec<u8>> = (0..3)
        .map(|i| format!("component {i}").into_bytes())
        .collect();
    let first = rt.block_on(fleet.publish("sub", &components[0], None, "test", &Sign::No));
    first.unwrap();
    rt.block_on(fleet.publish("sub", &components[1], None, "test", &Sign::No))
        .unwrap();
    for round in 0..60u64 {
        let now = rt.block_on(fleet.desired("sub")).unwrap().unwrap();
        let previous = now.previous.clone().expect("a previous version");
        // One deploy brings a third version, the other brings the previous one back (reusing
        // its stored bytes): the two race for the same generation.
        let third = components
            .iter()
            .find(|c| {
                let v = version_of(c);
                v != now.component.version && v != previous.version
            })
            .unwrap();
        let back = components
            .iter()
            .find(|c| version_of(c) == previous.version)
            .unwrap();
        // The second deploy starts 0–5 ms after the first, sweeping the window between one's
        // read of the row and its conditional write.
        let stagger = Duration::from_micros((round % 6) * 1_000);
        let (x, y) = rt.block_on(async {
            tokio::join!(fleet.publish("sub", third, None, "a", &Sign::No), async {
                tokio::time::sleep(stagger).await;
                fleet.publish("sub", back, None, "b", &Sign::No).await
            })
        });
        x.unwrap();
        y.unwrap();
        let desired = rt.block_on(fleet.desired("sub")).unwrap().unwrap();
        let fetched = rt.block_on(fleet.fetch("sub", &desired.component));
        assert!(
            fetched.is_ok(),
            "round {round}: the desired version's bytes: {fetched:?}"
        );
        let previous = desired.previous.expect("a previous version");
        let fetched = rt.block_on(fleet.fetch("sub", &previous));
        assert!(
            fetched.is_ok(),
            "round {round}: the previous version's bytes: {fetched:?}"
        );
    }
}

/// The refusal `owner` reports for `subscription`, if any.
pub fn refusal_of(report: &FleetReport, owner: &str, subscription: &str) -> Option<String> {
    let i = report
        .instances
        .iter()
        .find(|i| i.heartbeat.owner == owner && i.live)?;
    let running = i.heartbeat.subscriptions.get(subscription)?;
    running.refused.as_ref().map(|r| r.error.clone())
}

/// `shardhost keygen --out DIR/NAME`: the key file and the public key printed.
pub fn keygen(f: &Fleet, name: &str) -> (String, String) {
    use std::os::unix::fs::PermissionsExt;
    let file = f.dir.0.join(name);
    let out = crate::support::fleet::shardhost(&["keygen", "--out", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let public = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(public.starts_with("ed25519:"), "{public}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    (file.display().to_string(), public)
}

#[test]
fn with_trusted_keys_only_versions_signed_for_this_deploy_run_at_start_and_after() {
    let Some(f) = Fleet::new(1, "fleet-signed") else {
        return;
    };
    let (v1, v2) = (version("always_ack"), version("always_drop"));
    let (key, public) = keygen(&f, "deploy.pem");
    let (stranger, _) = keygen(&f, "stranger.pem");
    let config =
        f.st.fleet_config(Some("a"), "always_ack")
            .subscription(crate::support::Subscription::new(
                "other",
                &f.st.stream,
                crate::support::guest("always_ack"),
            ))
            .set("fleet", "trusted_keys", vec![public.clone()]);
    let wait_refused = |sub: &str, needle: &str| {
        wait_until_else(
            &format!("a to refuse `{sub}`: {needle}"),
            Duration::from_secs(30),
            || refusal_of(&f.report(), "a", sub).is_some_and(|e| e.contains(needle)),
            || format!("{:#?}", f.report()),
        )
    };

    // Whoever writes the table without a trusted key (here: a config without trusted keys).
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_drop")]);
    assert!(out.status.success(), "{}", text(&out));
    let mut a = f.start_with("a", config.clone());
    wait_refused(SUBSCRIPTION, "not signed");
    f.wait_running(&["a"], &v1);
    f.handles_a_record_with(&a, &v1[..12], "unsigned-at-start");

    // Signed, but by a key the instance does not trust.
    let out = f.cli(
        "deploy",
        &[SUBSCRIPTION, &path("batchall"), "--sign-key", &stranger],
    );
    assert!(out.status.success(), "{}", text(&out));
    wait_refused(SUBSCRIPTION, "not in [fleet] trusted_keys");

    // Signed by the trusted key: it runs, and the refusal is gone.
    let out = f.cli(
        "deploy",
        &[SUBSCRIPTION, &path("always_drop"), "--sign-key", &key],
    );
    assert!(out.status.success(), "{}", text(&out));
    f.wait_running(&["a"], &v2);
    assert_eq!(refusal_of(&f.report(), "a", SUBSCRIPTION), None);
    f.handles_a_record_with(&a, &v2[..12], "signed");

    // The same signed row replayed onto another subscription, and onto a later generation.
    let signed = f.desired_row();
    let mut elsewhere: Vec<(&str, AttributeValue)> = signed
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    elsewhere.retain(|(k, _)| *k != "lease_key");
    elsewhere.push(("lease_key", s("#shardhost#desired#shardhost#other")));
    f.st.rt.block_on(f.st.d.put_row(&f.st.table, &elsewhere));
    wait_refused("other", "does not verify");
    let generation: u64 = signed["generation"].as_n().unwrap().parse().unwrap();
    f.put_desired(&signed, &[("generation", n(&(generation + 5).to_string()))]);
    wait_refused(SUBSCRIPTION, "does not verify");
    assert!(a.alive());

    // Through the admin API: unsigned is refused, signed runs.
    let admin = f.report().instances[0].heartbeat.admin.clone().unwrap();
    let unsigned = crate::support::fleet::shardhost(&[
        "deploy",
        "--admin",
        &admin,
        SUBSCRIPTION,
        &path("always_ack"),
    ]);
    assert_eq!(unsigned.status.code(), Some(1), "{}", text(&unsigned));
    assert!(
        String::from_utf8_lossy(&unsigned.stderr).contains("signed"),
        "{}",
        text(&unsigned)
    );
    let out = crate::support::fleet::shardhost(&[
        "deploy",
        "--admin",
        &admin,
        SUBSCRIPTION,
        &path("always_ack"),
        "--sign-key",
        &key,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    f.wait_running(&["a"], &v1);

    // A restart while an unsigned row is desired: it starts on the last signed version it ran.
    let out = f.cli("deploy", &[SUBSCRIPTION, &path("always_drop")]);
    assert!(out.status.success(), "{}", text(&out));
    wait_refused(SUBSCRIPTION, "not signed");
    a.kill9();
    let a = f.start_with("a", config);
    wait_refused(SUBSCRIPTION, "not signed");
    f.wait_running(&["a"], &v1);
    f.handles_a_record_with(&a, &v1[..12], "after-restart");
}
