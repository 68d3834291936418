//! Trust that holds, tried as an attacker with write access to the lease table and no signing
//! key would (issue 41): on a fleet with `[fleet] trusted_keys`, a rollout or a shadow nobody
//! signed is never loaded, a hand-written rollout row is refused, a signed rollback or promote
//! never signs what only the table vouches for, and a row signed for another table does not
//! run. Real `shardhost` processes on kinesis-mock and dynalite.

mod answer;

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use shardhost::fleet_table::{Rollout, RolloutState};

use crate::canary::Producer;
use crate::fleet::{Fleet, SUBSCRIPTION, path, settled, text, version};
use crate::fleet_trust::{DESIRED, keygen, refusal_of, s};
use crate::support::fleet::Instance;
use crate::support::{HostToml, unique, wait_until_else};

/// The rollout row of subscription `test` of service `shardhost`.
const ROLLOUT: &str = "#shardhost#canary#shardhost#test";

impl Fleet {
    /// Instance `owner` running `handler`, trusting only `public`, polling the table often.
    fn start_trusting(&self, owner: &str, handler: &str, public: &str) -> Instance {
        self.start_with(owner, self.trusting(owner, handler, public))
    }

    fn trusting(&self, owner: &str, handler: &str, public: &str) -> HostToml {
        self.st
            .fleet_config(Some(owner), handler)
            .set("fleet", "trusted_keys", vec![public.to_owned()])
            .set("fleet", "poll", "300ms")
            .set("fleet", "heartbeat", "500ms")
    }

    /// Waits until `owner` reports refusing a rollout or shadow, its error holding every needle.
    fn wait_trial_refused(&self, owner: &str, needles: &[&str]) -> String {
        let refused = || {
            let report = self.report();
            let i = report
                .instances
                .iter()
                .find(|i| i.live && i.heartbeat.owner == owner)?;
            let running = i.heartbeat.subscriptions.get(SUBSCRIPTION)?;
            let errors = running.refused_trials.iter().map(|r| r.error.as_str());
            errors
                .filter(|e| needles.iter().all(|n| e.contains(n)))
                .map(str::to_owned)
                .next()
        };
        wait_until_else(
            &format!("{owner} to refuse a trial: {needles:?}"),
            Duration::from_secs(30),
            || refused().is_some(),
            || format!("{:#?}", self.report()),
        );
        refused().expect("the refusal stands while its row names it")
    }

    /// `deploy --config cli.toml ARGS`, which must succeed.
    fn deploy_ok(&self, args: &[&str]) -> String {
        let out = self.cli("deploy", args);
        assert!(out.status.success(), "deploy {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The row keyed `key`, as the table holds it.
    fn row_of(&self, key: &str) -> Option<crate::support::dynamo::Row> {
        self.st.rt.block_on(self.st.d.row(&self.st.table, key))
    }
}

/// Every record `instances` settled was settled by `handler` (12 hex digits).
fn all_settled_by(instances: &[&Instance], handler: &str) {
    let lines = settled(instances);
    let others: Vec<_> = lines.iter().filter(|l| l.handler != handler).collect();
    assert!(others.is_empty(), "settled by another version: {others:#?}");
}

#[test]
fn on_a_signed_fleet_an_unsigned_rollout_or_shadow_is_refused_and_never_loaded() {
    let Some(f) = Fleet::new(2, "signed-trials") else {
        return;
    };
    let (_key, public) = keygen(&f, "deploy.pem");
    let v1 = version("always_ack");
    let a = f.start_trusting("a", "always_ack", &public);
    f.wait_running(&["a"], &v1);
    f.handles_a_record_with(&a, &v1[..12], "before");

    // The attacker: their own config (no trusted keys) on the same table, no signing key.
    f.deploy_ok(&[
        SUBSCRIPTION,
        &path("always_drop"),
        "--canary",
        "50%",
        "--canary-for",
        "1h",
    ]);
    let refused = f.wait_trial_refused("a", &["rollout", "not signed"]);
    assert!(refused.contains(&version("always_drop")[..12]), "{refused}");
    // The instance that decides the rollout ends it: nobody on this fleet will run it.
    let aborted = f.wait_rollout("the unsigned rollout ended", Duration::from_secs(30), |r| {
        r.state != RolloutState::Running
    });
    assert_eq!(aborted.state, RolloutState::Aborted, "{aborted:#?}");
    assert!(
        aborted.reason.as_deref().unwrap_or("").contains("refused"),
        "{aborted:#?}"
    );

    f.deploy_ok(&[SUBSCRIPTION, &path("batchall"), "--shadow"]);
    f.wait_trial_refused("a", &["shadow", "not signed"]);

    // The signed version keeps settling every record, on every shard.
    for i in 0..6 {
        f.handles_a_record_with(&a, &v1[..12], &format!("after-{i}"));
    }
    all_settled_by(&[&a], &v1[..12]);
    assert!(
        !a.logged("a rollout runs") && !a.logged("runs here too"),
        "a loaded a version nobody signed:\n{}",
        a.text()
    );
    assert!(a.logged("does not run here"), "{}", a.text());
    assert!(
        a.logged("this instance cannot run the rollout"),
        "{}",
        a.text()
    );
    let status = f.cli("status", &[]);
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(
        shown.contains("a refuses on `test`") && shown.contains("not signed"),
        "{}",
        text(&status)
    );

    // A config with the fleet's trusted keys refuses to write either, before validating.
    let trusted_cli = f.dir.write(
        "trusted-cli.toml",
        f.st.fleet_host(None)
            .set("fleet", "trusted_keys", vec![public.clone()])
            .subscription(f.st.subscription("always_ack"))
            .render(),
    );
    let cfg = trusted_cli.to_str().unwrap();
    for extra in [&["--shadow"][..], &["--canary", "50%"][..]] {
        let mut args = vec!["deploy", "--config", cfg, SUBSCRIPTION];
        let drop_path = path("always_drop");
        args.push(&drop_path);
        args.extend_from_slice(extra);
        let out = crate::support::fleet::shardhost(&args);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not signed"),
            "{}",
            text(&out)
        );
    }
}

#[test]
fn a_signed_rollout_runs_and_is_promoted_while_a_hand_widened_copy_is_refused() {
    let Some(f) = Fleet::new(2, "signed-rollout") else {
        return;
    };
    let (key, public) = keygen(&f, "deploy.pem");
    let (v1, v2) = (version("always_ack"), version("always_drop"));
    let mut a = f.start_trusting("a", "always_ack", &public);
    f.wait_all_shards_held(2);
    // A signed rollout on one shard of two: it runs there, and nowhere else.
    let out = f.deploy_ok(&[
        SUBSCRIPTION,
        &path("always_drop"),
        "--canary",
        "50%",
        "--canary-for",
        "1h",
        "--sign-key",
        &key,
    ]);
    assert!(out.contains("signed by"), "{out}");
    let signed: Rollout = f.rollout_now().expect("a rollout row");
    assert!(signed.signed.is_some() && signed.promote.is_some());
    a.wait_for("the signed rollout to run", Duration::from_secs(30), |i| {
        i.logged("a rollout runs")
    });

    // The attacker widens it to every shard (same id and signature, a week-long window) and
    // restarts nothing: an instance started now reads the widened row and refuses it.
    let mut widened = signed.clone();
    widened.shards = vec![
        "shardId-000000000000".to_owned(),
        "shardId-000000000001".to_owned(),
    ];
    widened.window_ms = 7 * 24 * 3_600_000;
    let row = f.row_of(ROLLOUT).expect("the rollout row");
    let mut attrs: Vec<(&str, AttributeValue)> =
        row.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    attrs.retain(|(k, _)| *k != "rollout");
    let json = serde_json::to_string(&widened).unwrap();
    attrs.push(("rollout", s(&json)));
    f.st.rt.block_on(f.st.d.put_row(&f.st.table, &attrs));
    a.kill9();
    let a = f.start_trusting("a", "always_ack", &public);
    f.wait_trial_refused("a", &["rollout", "does not verify"]);
    let ended = f.wait_rollout("the widened rollout ended", Duration::from_secs(30), |r| {
        r.state != RolloutState::Running
    });
    assert_eq!(ended.state, RolloutState::Aborted, "{ended:#?}");
    for i in 0..4 {
        f.handles_a_record_with(&a, &v1[..12], &format!("widened-{i}"));
    }
    all_settled_by(&[&a], &v1[..12]);

    // A signed rollout with a short window is promoted as a signed deploy: the fleet runs it.
    f.deploy_ok(&[
        SUBSCRIPTION,
        &path("always_drop"),
        "--canary",
        "50%",
        "--canary-for",
        "2s",
        "--sign-key",
        &key,
    ]);
    let producer = Producer::start(&f.st.kinesis, &f.st.stream, "ack");
    let promoted = f.wait_rollout(
        "the signed rollout promoted",
        Duration::from_secs(90),
        |r| r.state != RolloutState::Running,
    );
    producer.finish();
    assert_eq!(promoted.state, RolloutState::Promoted, "{promoted:#?}");
    f.wait_running(&["a"], &v2);
    assert_eq!(refusal_of(&f.report(), "a", SUBSCRIPTION), None);
    let desired = f.desired_row();
    assert!(desired.contains_key("signature"), "{desired:?}");
}

#[test]
fn a_signed_rollback_or_promote_refuses_what_only_the_table_vouches_for() {
    let Some(f) = Fleet::new(1, "signed-rollback") else {
        return;
    };
    let (key, public) = keygen(&f, "deploy.pem");
    let (v1, v2, v3) = (
        version("always_ack"),
        version("always_drop"),
        version("batchall"),
    );
    let a = f.start_trusting("a", "always_ack", &public);
    f.deploy_ok(&[SUBSCRIPTION, &path("always_ack"), "--sign-key", &key]);
    f.deploy_ok(&[SUBSCRIPTION, &path("always_drop"), "--sign-key", &key]);
    f.wait_running(&["a"], &v2);
    // A rollback to a version that was deployed signed re-verifies and goes through.
    f.deploy_ok(&[SUBSCRIPTION, "--rollback", "--sign-key", &key]);
    f.wait_running(&["a"], &v1);
    f.deploy_ok(&[SUBSCRIPTION, &path("always_drop"), "--sign-key", &key]);
    f.wait_running(&["a"], &v2);
    let good = f.desired_row();

    // The attacker stores their component (an unsigned deploy: refused by the fleet) ...
    f.deploy_ok(&[SUBSCRIPTION, &path("batchall")]);
    let theirs = f.desired_row();
    // ... and points the signed row's `previous` at it, keeping the old previous signature.
    let mut poison: Vec<(&str, AttributeValue)> = Vec::new();
    for (from, to) in [
        ("version", "previous_version"),
        ("size", "previous_size"),
        ("chunks", "previous_chunks"),
        ("upload", "previous_upload"),
    ] {
        poison.push((to, theirs[from].clone()));
    }
    f.put_desired(&good, &poison);
    let before = f.desired_row();
    let out = f.cli("deploy", &[SUBSCRIPTION, "--rollback", "--sign-key", &key]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused to sign a rollback to") && err.contains(&v3[..12]),
        "{}",
        text(&out)
    );
    assert_eq!(f.desired_row(), before, "nothing was written");

    // Through the instance's admin API the command line checks the same before it signs.
    let admin = f.report().instances[0].heartbeat.admin.clone().unwrap();
    let out = crate::support::fleet::shardhost(&[
        "deploy",
        "--admin",
        &admin,
        SUBSCRIPTION,
        "--rollback",
        "--sign-key",
        &key,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refused to sign a rollback to"),
        "{}",
        text(&out)
    );
    // Without the previous signature at all: refused too.
    let mut stripped = before.clone();
    for k in [
        "previous_generation",
        "previous_deploy_id",
        "previous_signature",
        "previous_signed_by",
    ] {
        stripped.remove(k);
    }
    f.st.rt.block_on(f.st.d.delete_row(&f.st.table, DESIRED));
    f.put_desired(&stripped, &[]);
    let out = f.cli("deploy", &[SUBSCRIPTION, "--rollback", "--sign-key", &key]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("never deployed under a signature"),
        "{}",
        text(&out)
    );
    f.handles_a_record_with(&a, &v2[..12], "after-refused-rollback");

    // A shadow the attacker set (unsigned) is not promoted with the key.
    f.deploy_ok(&[SUBSCRIPTION, &path("batchall"), "--shadow"]);
    let out = f.cli("deploy", &[SUBSCRIPTION, "--promote", "--sign-key", &key]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("refused to sign a promotion of the shadow"),
        "{}",
        text(&out)
    );
    // A signed shadow runs on the fleet and is promoted with the key.
    f.deploy_ok(&[
        SUBSCRIPTION,
        &path("batchall"),
        "--shadow",
        "--sign-key",
        &key,
    ]);
    a.wait_for("the signed shadow to run", Duration::from_secs(30), |i| {
        i.logged("runs here too")
    });
    f.deploy_ok(&[SUBSCRIPTION, "--promote", "--sign-key", &key]);
    f.wait_running(&["a"], &v3);
}

#[test]
fn a_row_signed_for_another_lease_table_does_not_run() {
    let Some(f) = Fleet::new(1, "signed-staging") else {
        return;
    };
    let (key, public) = keygen(&f, "deploy.pem");
    let (v1, v2) = (version("always_ack"), version("always_drop"));
    // Staging: the fixture's table, deployed with the key.
    f.deploy_ok(&[SUBSCRIPTION, &path("always_drop"), "--sign-key", &key]);
    // Production: another table, same service, subscription, stream and key.
    let production = unique("production");
    f.st.rt.block_on(f.st.d.create_lease_table(&production));
    for row in f.st.rt.block_on(f.st.d.rows(&f.st.table)) {
        let key_text = row["lease_key"].as_s().unwrap().clone();
        if key_text.starts_with("#shardhost#desired")
            || key_text.starts_with("#shardhost#component")
        {
            let attrs: Vec<(&str, AttributeValue)> =
                row.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            f.st.rt.block_on(f.st.d.put_row(&production, &attrs));
        }
    }
    let config =
        f.st.host("b")
            .admin()
            .leases("table", production.as_str())
            .leases("renew_every", "1s")
            .leases("list_every", "1s")
            .set("fleet", "heartbeat", "500ms")
            .set("fleet", "poll", "300ms")
            .set("fleet", "trusted_keys", vec![public.clone()])
            .subscription(f.st.subscription("always_ack").trim_horizon().batch(10));
    let b = f.start_with("b", config);
    let production_cli = f.dir.write(
        "production-cli.toml",
        f.st.fleet_host(None)
            .leases("table", production.as_str())
            .subscription(f.st.subscription("always_ack"))
            .render(),
    );
    let report = || {
        let out = crate::support::fleet::shardhost(&[
            "status",
            "--config",
            production_cli.to_str().unwrap(),
            "--json",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice::<shardhost::status::fleet::FleetReport>(&out.stdout).unwrap()
    };
    wait_until_else(
        "b to refuse the staging row",
        Duration::from_secs(30),
        || refusal_of(&report(), "b", SUBSCRIPTION).is_some_and(|e| e.contains("does not verify")),
        || format!("{:#?}\n{}", report(), b.text()),
    );
    f.handles_a_record_with(&b, &v1[..12], "in-production");
    all_settled_by(&[&b], &v1[..12]);
    assert!(!b.logged(&format!("to={}", &v2[..12])), "{}", b.text());
}
