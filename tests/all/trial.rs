//! A candidate is on trial from its first instruction: a component whose start-up code (a
//! constructor, run when it is instantiated) sends an HTTP request to an allowed server and
//! writes state reaches neither while the host only checks it or tries it — `shardhost check`,
//! `shardhost replay`, `deploy --config … --shadow` on a running fleet, an unsigned admin
//! deploy refused by a fleet with `trusted_keys` — and does reach both once it is the version
//! that settles records. Real processes on kinesis-mock and dynalite.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shardhost::capability::config::{ConfigGrant, ConfigValue};
use shardhost::capability::http::{HttpGrant, Origin};
use shardhost::capability::state::{StateGrant, StateStoreKind};
use shardhost::config::{Limits, WasiGrants};
use shardhost::effects::Effects;
use shardhost::handler::{CallContext, HandlerFactory};
use shardhost::testing::Runtime;

use crate::fleet::{Fleet, SUBSCRIPTION, path, text, version};
use crate::state::state_table;
use crate::support::fleet::{Stack, shardhost, stack};
use crate::support::{
    HttpServer, Scratch, Subscription, dynamodb_endpoint, guest, wait_until_else,
};

/// `sub` granted what the `startup` fixture reaches: HTTP to `server` (its `url`, a path that
/// answers 200) and state in `table`.
fn granted(sub: Subscription, server: &HttpServer, table: &str) -> Subscription {
    sub.nested("http", "allow", vec![server.origin()])
        .nested("config", "url", format!("{}/status/200", server.origin()))
        .nested("state", "table", table)
}

/// What the start-up code would have left behind: requests the server answered, items in the
/// state table.
fn reached(st: &Stack, server: &HttpServer, table: &str) -> (u64, usize) {
    (server.requests(), st.rt.block_on(st.d.count(table)))
}

#[test]
fn check_runs_a_components_start_up_code_without_sending_or_storing_anything() {
    let Some(st) = stack(1) else { return };
    let (server, table) = (HttpServer::start(), state_table(&st.d, &st.rt));
    let dir = Scratch::new("trial-check");
    let config = dir.write(
        "shardhost.toml",
        st.host("checker")
            .subscription(granted(st.subscription("startup"), &server, &table))
            .render(),
    );
    let out = shardhost(&["check", config.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(reached(&st, &server, &table), (0, 0), "{}", text(&out));
}

#[test]
fn replay_runs_a_candidates_start_up_code_on_trial_and_reports_what_it_would_have_done() {
    let Some(st) = stack(1) else { return };
    let (server, table) = (HttpServer::start(), state_table(&st.d, &st.rt));
    for key in ["a", "b"] {
        st.k.put(&st.stream, key, "x");
    }
    let dir = Scratch::new("trial-replay");
    let sub = granted(
        st.subscription("always_ack").trim_horizon(),
        &server,
        &table,
    );
    let config = dir.write(
        "shardhost.toml",
        st.host("replayer").subscription(sub).render(),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args([
            "replay",
            SUBSCRIPTION,
            &path("startup"),
            "--json",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The candidate's own instance started on trial: its start-up request and write recorded.
    let counts = &report["effects"]["candidate"]["counts"];
    assert!(counts["http-not-sent"].as_u64() >= Some(1), "{report}");
    assert!(counts["state-write"].as_u64() >= Some(1), "{report}");
    assert_eq!(reached(&st, &server, &table), (0, 0), "{}", text(&out));
}

#[test]
fn a_fleets_shadow_set_with_deploy_config_runs_its_start_up_code_on_trial_everywhere() {
    let Some(f) = Fleet::new(1, "trial-shadow") else {
        return;
    };
    let (server, table) = (HttpServer::start(), state_table(&f.st.d, &f.st.rt));
    let sub = || {
        granted(
            f.st.subscription("always_ack").trim_horizon().batch(10),
            &server,
            &table,
        )
    };
    let instance = f.st.fleet_host(Some("a")).set("fleet", "poll", "300ms");
    let _a = f.start_with("a", instance.subscription(sub()));
    f.wait_running(&["a"], &version("always_ack"));
    let cli = f.dir.write(
        "granted.toml",
        f.st.fleet_host(None).subscription(sub()).render(),
    );
    let out = shardhost(&[
        "deploy",
        "--config",
        cli.to_str().unwrap(),
        SUBSCRIPTION,
        &path("startup"),
        "--shadow",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    // The instance validated the shadow and runs it: it has compared records.
    let candidate = version("startup");
    let mut round = 0;
    wait_until_else(
        "a to compare records with the shadow",
        Duration::from_secs(60),
        || {
            round += 1;
            f.st.k.put(&f.st.stream, &format!("k-{round}"), "x");
            f.report().instances.iter().any(|i| {
                i.heartbeat
                    .subscriptions
                    .get(SUBSCRIPTION)
                    .and_then(|s| s.shadow.as_ref())
                    .is_some_and(|s| s.version == candidate && s.agree > 0)
            })
        },
        || format!("{:#?}", f.report()),
    );
    assert_eq!(reached(&f.st, &server, &table), (0, 0));
}

#[test]
fn an_unsigned_admin_deploy_refused_by_trusted_keys_sends_and_stores_nothing() {
    let Some(f) = Fleet::new(1, "trial-unsigned") else {
        return;
    };
    let (server, table) = (HttpServer::start(), state_table(&f.st.d, &f.st.rt));
    let key = f.dir.0.join("deploy.pem");
    let out = shardhost(&["keygen", "--out", key.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let public = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let sub = granted(
        f.st.subscription("always_ack").trim_horizon().batch(10),
        &server,
        &table,
    );
    let config =
        f.st.fleet_host(Some("a"))
            .set("fleet", "trusted_keys", vec![public])
            .subscription(sub);
    let _a = f.start_with("a", config);
    f.wait_running(&["a"], &version("always_ack"));
    let admin = f.report().instances[0].heartbeat.admin.clone().unwrap();
    let out = shardhost(&["deploy", "--admin", &admin, SUBSCRIPTION, &path("startup")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("signed"),
        "{}",
        text(&out)
    );
    assert_eq!(reached(&f.st, &server, &table), (0, 0));
}

/// The control: as the version that settles records, the same component's start-up code does
/// send its request and write its state (once per instance it starts); loading it does neither,
/// and an instance on trial neither.
#[test]
fn only_a_live_instance_runs_start_up_code_with_effects() {
    let Some(endpoint) = dynamodb_endpoint() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = crate::support::dynamo::Dynamo::new(&endpoint);
    let (server, table) = (HttpServer::start(), state_table(&d, &rt));
    let grants = WasiGrants::default()
        .with(HttpGrant {
            allow: vec![Origin::parse(&server.origin()).unwrap()],
            timeout: Duration::from_secs(2),
            max_body: 1 << 20,
            max_in_flight: 4,
            ca_file: None,
            allow_private: false,
        })
        .with(StateGrant {
            store: StateStoreKind::Dynamo {
                table: table.clone(),
                endpoint: Some(endpoint.clone()),
                region: None,
                test_credentials: true,
            },
            ttl: None,
            buckets: Vec::new(),
            namespace: "trial/test/".to_owned(),
            max_in_flight: 4,
            timeout: Duration::from_secs(2),
            commit: Default::default(),
        })
        .with(ConfigGrant(
            [(
                "url".to_owned(),
                ConfigValue {
                    value: format!("{}/status/200", server.origin()),
                    from_env: false,
                },
            )]
            .into(),
        ));
    let count = || rt.block_on(d.count(&table));
    let runtime = Runtime::new(None, false).unwrap();
    let component = rt.block_on(load(&runtime, &guest("startup"), &grants));
    assert_eq!(
        (server.requests(), count()),
        (0, 0),
        "loading it reached out"
    );

    let ctx = |effects: Option<Arc<Effects>>| CallContext {
        subscription: Arc::from(SUBSCRIPTION),
        stream: Arc::from("trial"),
        shard_id: Arc::from("shardId-000000000000"),
        publisher: None,
        delivered: None,
        metrics: None,
        log_budget: Default::default(),
        effects,
        pending: None,
    };
    let effects = Effects::new(false, 1 << 20);
    rt.block_on(component.instantiate(&ctx(Some(effects.clone()))))
        .unwrap();
    assert_eq!((server.requests(), count()), (0, 0), "a trial reached out");
    let recorded = effects.recorded().counts;
    assert_eq!(recorded.get("http-not-sent"), Some(&1), "{recorded:?}");
    assert_eq!(recorded.get("state-write"), Some(&1), "{recorded:?}");

    rt.block_on(component.instantiate(&ctx(None))).unwrap();
    assert_eq!((server.requests(), count()), (1, 1), "live start-up code");
}

async fn load(runtime: &Runtime, wasm: &Path, grants: &WasiGrants) -> Arc<dyn HandlerFactory> {
    let limits = Limits {
        timeout: Duration::from_secs(10),
        ..Limits::default()
    };
    runtime
        .load_file(wasm, limits, grants)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", wasm.display()))
}
