//! What `deploy/` ships works with the host it ships for: a live host's `/metrics` passes
//! `promtool check metrics`, every metric the Grafana dashboard and the alert rules use is one a
//! live host serves, the rules pass `promtool check rules` and their unit tests, and the
//! Kubernetes ConfigMap's TOML passes `shardhost check` with the environment the Deployment
//! gives a pod.
//!
//! promtool is Debian's `prometheus` package (`.ci/run` installs it). Without it these tests
//! are skipped with a note, except under `CI`, where they fail.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use hyper::Method;

use crate::support::{HostToml, Running, Scratch, Subscription, guest, root, text_record};

const TOKEN: &str = "deploy-files-token";

fn deploy_file(path: &str) -> PathBuf {
    root().join("deploy").join(path)
}

fn read(path: &str) -> String {
    let path = deploy_file(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The promtool on PATH; `None` (the test skipped with a note) when there is none, outside CI.
fn promtool() -> Option<&'static str> {
    match Command::new("promtool").arg("--version").output() {
        Ok(out) if out.status.success() => Some("promtool"),
        _ if std::env::var_os("CI").is_some() => panic!(
            "promtool is not installed (Debian: apt-get install prometheus); CI must run the \
             checks of deploy/ with it (.ci/run installs it)"
        ),
        _ => {
            eprintln!("skipped: promtool is not installed (Debian: apt-get install prometheus)");
            None
        }
    }
}

/// Runs `promtool ARGS`, with `stdin` as its input, and answers its output; panics with
/// everything it said unless it succeeded.
fn run_promtool(promtool: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(promtool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool {} failed ({}):\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A host on the embedded stream whose records go every way a record can: acked, dropped, held
/// (a retry), trapped, a seek refused (a containment event); then a deploy. Answers the host
/// and its `/metrics` as a client that does not ask for OpenMetrics gets it (promtool's
/// format), once every record was handled.
fn live_host(dir: &Scratch) -> (Running, String, SystemTime) {
    // `seek:1;ack`: a seek to a record this reader never delivered, refused; then ack.
    let records: Vec<String> = ["ack", "ack", "drop", "retry", "panic", "seek:1;ack", "ack"]
        .iter()
        .enumerate()
        .map(|(i, data)| text_record(&format!("k{i}"), data))
        .collect();
    dir.write("feed.ndjson", records.join("\n"));
    let config = HostToml::memory().admin_with_token(TOKEN).subscription(
        Subscription::new("ship", "shipments", guest("scripted"))
            .feed("feed.ndjson")
            .create_if_missing(1)
            .batch(10)
            .poll_interval("20ms")
            .limit("timeout", "2s"),
    );
    let before = SystemTime::now();
    let host = Running::start(dir, config);
    host.wait_for("all 7 records delivered, 5 settled, 2 held", |board| {
        let t = board.totals("ship");
        t.delivered >= 7 && t.settled == 5 && t.held == 2
    });
    let client = host.admin(Some(TOKEN));
    let swapped = host.block_on(client.send(
        Method::PUT,
        "/subscriptions/ship/handler",
        std::fs::read(guest("always_ack")).unwrap(),
    ));
    assert_eq!(swapped.unwrap().status, hyper::StatusCode::OK);
    let answer = host
        .block_on(client.send(Method::GET, "/metrics", Vec::new()))
        .unwrap();
    assert_eq!(answer.status, hyper::StatusCode::OK);
    let text = String::from_utf8(answer.body.to_vec()).unwrap();
    (host, text, before)
}

#[test]
fn a_live_hosts_metrics_pass_promtool_check_metrics() {
    let Some(promtool) = promtool() else { return };
    let dir = Scratch::new("deploy-promtool-metrics");
    let (host, text, _) = live_host(&dir);
    for family in ["shardhost_records_total", "shardhost_handler_traps_total"] {
        assert!(
            text.contains(&format!("# TYPE {family} counter")),
            "{family} in the classic text format: {text}"
        );
    }
    let out = run_promtool(promtool, &["check", "metrics"], &text);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.trim().is_empty(), "promtool complains: {said}\n{text}");
    // Prometheus asks for OpenMetrics, and gets it.
    let client = host.admin(Some(TOKEN));
    let answer = host
        .block_on(client.send_with(
            Method::GET,
            "/metrics",
            &[(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5".into(),
            )],
            Vec::new(),
        ))
        .unwrap();
    let body = String::from_utf8(answer.body.to_vec()).unwrap();
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(body.contains("# TYPE shardhost_records counter"), "{body}");
    host.stop();
}

#[test]
fn a_held_record_shows_since_when_it_is_held_in_the_metrics() {
    let dir = Scratch::new("deploy-held-since");
    let (host, text, before) = live_host(&dir);
    let since = crate::support::metric(
        &text,
        "shardhost_held_since_timestamp_seconds",
        &["subscription=\"ship\"", "shard=\"shardId-000000000000\""],
    );
    let secs = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    let now = secs(SystemTime::now()) as f64;
    assert!(
        since >= secs(before) as f64 && since <= now,
        "held since {since}, the host started at {}, now {now}: {text}",
        secs(before)
    );
    host.stop();
}

/// Every `shardhost_...` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("shardhost_") {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            names.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// The series names a host serves: each family of its `# TYPE` lines, and a histogram's
/// `_bucket`, `_sum` and `_count`.
fn served_names(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in metrics.lines() {
        let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' '))
        else {
            continue;
        };
        names.insert(name.to_owned());
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        }
    }
    names
}

#[test]
fn every_metric_the_dashboard_and_the_alerts_use_is_served_by_a_live_host() {
    let dashboard = read("grafana/shardhost.json");
    let parsed: serde_json::Value = serde_json::from_str(&dashboard)
        .unwrap_or_else(|e| panic!("deploy/grafana/shardhost.json is not JSON: {e}"));
    assert!(
        parsed["panels"].as_array().is_some_and(|p| p.len() >= 7),
        "the dashboard has its panels"
    );
    let alerts = read("prometheus/alerts.yml");
    let dir = Scratch::new("deploy-metric-names");
    let (host, text, _) = live_host(&dir);
    host.stop();
    let served = served_names(&text);
    for (file, used) in [
        ("grafana/shardhost.json", metric_names(&dashboard)),
        ("prometheus/alerts.yml", metric_names(&alerts)),
    ] {
        assert!(used.len() >= 5, "{file} uses {used:?}");
        let missing: Vec<_> = used.difference(&served).collect();
        assert!(
            missing.is_empty(),
            "deploy/{file} uses metrics a live host does not serve: {missing:?}\nserved: \
             {served:?}"
        );
    }
}

#[test]
fn the_alert_rules_pass_promtool_check_rules_and_their_unit_tests() {
    let Some(promtool) = promtool() else { return };
    let rules = deploy_file("prometheus/alerts.yml");
    let out = run_promtool(promtool, &["check", "rules", path(&rules)], "");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("SUCCESS"), "{said}");
    let tests = deploy_file("prometheus/alerts.test.yml");
    let out = run_promtool(promtool, &["test", "rules", path(&tests)], "");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("SUCCESS"), "{said}");
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The value of the block scalar `key: |` in `yaml`, its indentation removed.
fn block_scalar(yaml: &str, key: &str) -> String {
    let mut lines = yaml.lines();
    let head = lines
        .by_ref()
        .find(|l| l.trim_start() == format!("{key}: |"))
        .unwrap_or_else(|| panic!("no `{key}: |` block"));
    let key_indent = head.len() - head.trim_start().len();
    let body: Vec<&str> = lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > key_indent)
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap();
    body.iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The environment variables a config text reads (`${NAME}` and `${NAME:-default}`), with
/// whether they have a default.
fn references(toml: &str) -> Vec<(String, bool)> {
    toml.split("${")
        .skip(1)
        .filter_map(|r| r.split_once('}').map(|(inside, _)| inside))
        .map(|inside| match inside.split_once(":-") {
            Some((name, _)) => (name.to_owned(), true),
            None => (inside.to_owned(), false),
        })
        .collect()
}

fn shardhost_check(dir: &Scratch, vars: &[(&str, String)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shardhost"));
    command
        .arg("check")
        .arg(dir.0.join("shardhost.toml"))
        .env_remove("POD_NAME")
        .env_remove("SHARDHOST_ADMIN_TOKEN")
        .env_remove("SHARDHOST_HANDLERS")
        .env("SHARDHOST_CACHE_DIR", dir.0.join("cache"));
    for (k, v) in vars {
        command.env(k, v);
    }
    command.output().unwrap()
}

#[test]
fn the_configmaps_toml_passes_shardhost_check_with_the_environment_of_a_pod() {
    let toml = block_scalar(&read("k8s/configmap.yaml"), "shardhost.toml");
    let dir = Scratch::new("deploy-configmap");
    dir.write("shardhost.toml", &toml);
    let handlers = dir.0.join("handlers");
    std::fs::create_dir_all(&handlers).unwrap();
    std::fs::copy(guest("always_ack"), handlers.join("ship.wasm")).unwrap();
    let pod = [
        ("POD_NAME", "shipping-shardhost-7d9f8-x2k4p".to_owned()),
        ("SHARDHOST_ADMIN_TOKEN", "0123456789abcdef0123456789".into()),
        ("SHARDHOST_RETRY_KEY", "fedcba9876543210fedcba98".into()),
        ("SHARDHOST_HANDLERS", handlers.display().to_string()),
        ("AWS_REGION", "eu-west-1".into()),
    ];
    let out = shardhost_check(&dir, &pod);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("shardhost.toml: ok"), "{said}");
    assert!(
        !said.contains("0123456789abcdef"),
        "the token is never shown: {said}"
    );

    // Without the pod's name the config names the variable, where it is read.
    let without_name: Vec<_> = pod
        .iter()
        .filter(|(k, _)| *k != "POD_NAME")
        .cloned()
        .collect();
    let out = shardhost_check(&dir, &without_name);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("host.owner_id: the environment variable POD_NAME is not set"),
        "{said}"
    );
}

/// `key: N` of the first line of `yaml` that has it.
fn yaml_number(yaml: &str, key: &str) -> u64 {
    yaml.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}:")))
        .and_then(|v| v.split('#').next()?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{key}: N`"))
}

#[test]
fn the_deployment_gives_every_variable_the_config_reads_and_outlasts_a_drain() {
    let deployment = read("k8s/deployment.yaml");
    let toml = block_scalar(&read("k8s/configmap.yaml"), "shardhost.toml");
    let refs = references(&toml);
    assert!(refs.iter().any(|(n, _)| n == "POD_NAME"), "{refs:?}");
    for (name, _) in &refs {
        assert!(
            deployment.contains(&format!("- name: {name}")),
            "deployment.yaml does not set {name}, which the ConfigMap's TOML reads"
        );
    }
    let pod_name = deployment
        .split("- name: POD_NAME")
        .nth(1)
        .and_then(|rest| rest.split("- name:").next())
        .unwrap();
    assert!(pod_name.contains("fieldPath: metadata.name"), "{pod_name}");
    assert_eq!(
        deployment.matches("path: /healthz").count(),
        2,
        "readiness and liveness on /healthz"
    );
    // A drain: the call in flight (limits.timeout), a retry copy's put (30 s at most), the
    // final checkpoint and a release (8 s each at most).
    let config: toml::Table = toml.parse().unwrap();
    let timeout = config["subscription"][0]["limits"]["timeout"]
        .as_str()
        .and_then(|t| humantime::parse_duration(t).ok())
        .unwrap();
    let drain = timeout + Duration::from_secs(30 + 8 + 8);
    let grace = Duration::from_secs(yaml_number(&deployment, "terminationGracePeriodSeconds"));
    assert!(grace > drain, "grace {grace:?}, a drain up to {drain:?}");
}
