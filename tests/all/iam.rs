//! The lease table's IAM policy, as the IAM table (docs/operations/iam.md) states it, is all a fleet needs: two
//! `shardhost` processes and the command line reach dynalite only through a proxy that answers
//! every operation the policy leaves out `AccessDeniedException`, as IAM would (the emulators
//! enforce no IAM), and the whole fleet path works: deploys, a trapping canary rolled back by
//! its decider, `--canary-off`, `--shadow` and `--shadow-off`, rollback, `--promote`, the
//! roster (heartbeats, `status --config`) and a clean stop.

use std::path::Path;
use std::time::Duration;

use shardhost::fleet_table::{Rollout, RolloutState};

use crate::fleet::{Fleet, SUBSCRIPTION, path, text, version};
use crate::support::fleet::{Instance, stack};
use crate::support::proxy::PolicyProxy;
use crate::support::{HostToml, Scratch, wait_until_else};

/// The DynamoDB actions the IAM table (docs/operations/iam.md) grants on the lease table.
fn lease_table_policy() -> Vec<String> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations/iam.md");
    let doc = std::fs::read_to_string(doc).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| DynamoDB, the lease table |"))
        .expect("the IAM table (docs/operations/iam.md) has a row for the lease table");
    let actions = row.split('|').nth(2).expect("an actions column");
    actions
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// A fleet whose instances and command line reach the lease table through `proxy`.
struct Gated {
    f: Fleet,
    proxy: PolicyProxy,
}

impl Gated {
    fn new(tag: &str) -> Option<Gated> {
        let st = stack(2)?;
        let proxy = PolicyProxy::start(&st.dynamodb, &lease_table_policy());
        let dir = Scratch::new(tag);
        let cli = HostToml::kinesis(&st.kinesis)
            .dynamodb_leases(&st.table, &proxy.url())
            .subscription(st.subscription("always_ack"));
        let cli_config = dir.write("cli.toml", cli.render());
        Some(Gated {
            f: Fleet {
                st,
                dir,
                cli_config,
            },
            proxy,
        })
    }

    /// Instance `owner` running `always_ack`, its lease table behind the proxy.
    fn start(&self, owner: &str) -> Instance {
        let st = &self.f.st;
        let config = st
            .host_on(owner, &self.proxy.url())
            .admin()
            .leases("renew_every", "1s")
            .leases("list_every", "1s")
            .leases("checkpoint_every", "200ms")
            .set("fleet", "poll", "300ms")
            .set("fleet", "heartbeat", "500ms")
            .subscription(st.subscription("always_ack").trim_horizon().batch(10));
        self.f.start_with(owner, config)
    }

    /// `deploy --config CLI SUBSCRIPTION ARGS...`, which must succeed.
    fn deploy(&self, args: &[&str]) -> String {
        let mut all = vec![SUBSCRIPTION];
        all.extend_from_slice(args);
        let out = self.f.cli("deploy", &all);
        assert!(
            out.status.success(),
            "deploy {args:?}: {}\ndenied so far: {:?}",
            text(&out),
            self.proxy.denied()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn rollout(&self) -> Option<Rollout> {
        self.f
            .report()
            .desired_of(SUBSCRIPTION)
            .and_then(|d| d.rollout.clone())
    }

    /// Waits until the subscription's rollout has ended; answers it.
    fn wait_decided(&self, what: &str, mut meanwhile: impl FnMut()) -> Rollout {
        wait_until_else(
            what,
            Duration::from_secs(120),
            || {
                meanwhile();
                self.rollout()
                    .is_some_and(|r| r.state != RolloutState::Running)
            },
            || format!("{:#?}\ndenied: {:?}", self.rollout(), self.proxy.denied()),
        );
        self.rollout().unwrap()
    }

    /// Waits until the live instances that show a shadow number `count`, all of `version`.
    fn wait_shadows(&self, count: usize, version: &str) {
        wait_until_else(
            &format!("{count} instance(s) running the fleet's shadow"),
            Duration::from_secs(60),
            || {
                let shadows: Vec<String> = self
                    .f
                    .report()
                    .instances
                    .iter()
                    .filter(|i| i.live)
                    .filter_map(|i| i.heartbeat.subscriptions.get(SUBSCRIPTION)?.shadow.clone())
                    .map(|s| s.version)
                    .collect();
                shadows.len() == count && shadows.iter().all(|v| v == version)
            },
            || format!("{:#?}", self.f.report()),
        );
    }
}

/// A canary that traps on every record, rolled back by its decider (a conditional write of the
/// rollout row), then a clean one stopped by `--canary-off`.
fn canaries(g: &Gated) {
    let scripted = path("scripted");
    g.deploy(&[&scripted, "--canary", "50%", "--abort-on", "traps>1%"]);
    let mut i = 0;
    let decided = g.wait_decided("the trapping canary rolled back by its decider", || {
        for _ in 0..10 {
            g.f.st.k.put(&g.f.st.stream, &format!("key-{i}"), "panic");
            i += 1;
        }
    });
    assert_eq!(decided.state, RolloutState::Aborted, "{decided:#?}");
    assert!(
        decided
            .decided_by
            .as_deref()
            .is_some_and(|by| by.contains("(decider)")),
        "{decided:#?}"
    );

    g.deploy(&[&path("always_drop"), "--canary", "50%"]);
    let running = g.rollout().expect("a rollout row");
    assert_eq!(running.state, RolloutState::Running, "{running:#?}");
    g.deploy(&["--canary-off"]);
    let off = g.rollout().expect("the rollout row");
    assert_eq!(
        (off.canary_id.as_str(), off.state),
        (running.canary_id.as_str(), RolloutState::Aborted)
    );
}

#[test]
fn the_whole_fleet_path_works_within_the_documented_lease_table_policy() {
    let Some(g) = Gated::new("iam-fleet") else {
        return;
    };
    let policy = lease_table_policy();
    assert!(
        policy.contains(&"UpdateItem".to_owned()) && !policy.contains(&"PutItem".to_owned()),
        "{policy:?}"
    );
    let (ack, drop) = (version("always_ack"), version("always_drop"));
    let mut a = g.start("a");
    let b = g.start("b");
    g.f.wait_running(&["a", "b"], &ack);

    canaries(&g);

    g.deploy(&[&path("always_drop")]);
    g.f.wait_running(&["a", "b"], &drop);

    g.deploy(&[&path("always_ack"), "--shadow"]);
    g.wait_shadows(2, &ack);
    g.deploy(&["--shadow-off"]);
    g.wait_shadows(0, &ack);

    g.deploy(&["--rollback"]);
    g.f.wait_running(&["a", "b"], &ack);

    g.deploy(&[&path("always_drop"), "--shadow"]);
    g.wait_shadows(2, &drop);
    g.deploy(&["--promote"]);
    g.f.wait_running(&["a", "b"], &drop);
    g.wait_shadows(0, &drop);

    let out = g.f.cli("status", &[]);
    assert!(out.status.success(), "status: {}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&drop[..12]) && shown.contains(", converged") && shown.contains(" b "),
        "{shown}"
    );

    // A clean stop releases the leases and removes the instance's heartbeat row.
    assert_eq!(a.interrupt(), Some(0), "{}", a.text());
    wait_until_else(
        "a's row gone from the roster",
        Duration::from_secs(10),
        || {
            g.f.report()
                .instances
                .iter()
                .all(|i| i.heartbeat.owner != "a")
        },
        || format!("{:#?}", g.f.report()),
    );

    assert_eq!(g.proxy.denied(), Vec::<String>::new(), "operations denied");
    let used = g.proxy.allowed();
    for op in [
        "GetItem",
        "UpdateItem",
        "DeleteItem",
        "Scan",
        "DescribeTable",
    ] {
        assert!(used.iter().any(|u| u == op), "{op} never used: {used:?}");
    }
    for i in [&a, &b] {
        assert!(!i.logged("AccessDenied"), "{}", i.text());
    }
}
