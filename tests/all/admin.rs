//! The admin API of a running host: deploys are validated before they swap, rollback and
//! watch, the token, the upload limit, status and metrics; `hostile`: what a web page or a slow
//! or hostile client can do.

mod hostile;

use std::time::Duration;

use crate::support::{
    HostToml, Outcomes, Running, Scratch, Subscription, guest, wait_until, wait_until_else,
};
use hyper::{Method, StatusCode};
use shardhost::cli::admin_client::Answer;
use shardhost::record::Outcome;
use shardhost::status::Report;

const TOKEN: &str = "s3cret";

/// Subscription `tagged` of the embedded stream (2 shards), running `handler.wasm`.
fn tagged() -> Subscription {
    Subscription::new("tagged", "s", "handler.wasm")
        .create_if_missing(2)
        .trim_horizon()
        .batch(10)
        .poll_interval("10ms")
}

/// A host on the embedded stream with the admin API on a free port (and the token), running
/// `sub`.
fn config(sub: Subscription) -> HostToml {
    HostToml::memory().admin_with_token(TOKEN).subscription(sub)
}

fn wasm(name: &str) -> Vec<u8> {
    std::fs::read(guest(name)).unwrap()
}

/// Starts a host on `config` with `always_ack` copied into the scratch dir (so a test can
/// rewrite it).
fn start(dir: &Scratch, config: HostToml) -> (Running, Outcomes) {
    dir.write("handler.wasm", wasm("always_ack"));
    let seen = Outcomes::default();
    let host = Running::start_with(dir, config, |h| h.on_outcome(seen.tap()));
    (host, seen)
}

fn send(host: &Running, token: Option<&str>, method: Method, path: &str, body: Vec<u8>) -> Answer {
    let client = host.admin(token);
    host.block_on(client.send(method, path, body)).unwrap()
}

fn deploy(host: &Running, bytes: Vec<u8>) -> Answer {
    send(
        host,
        Some(TOKEN),
        Method::PUT,
        "/subscriptions/tagged/handler",
        bytes,
    )
}

fn report(host: &Running) -> Report {
    let answer = send(host, Some(TOKEN), Method::GET, "/status", Vec::new());
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.message());
    serde_json::from_slice(&answer.body).unwrap()
}

fn version(name: &str) -> String {
    shardhost::testing::version_of(&wasm(name))
}

/// Puts `n` records on the embedded stream through the host's own source and waits until
/// the host has handled them all; answers the outcomes of those records.
fn put_and_handle(host: &Running, seen: &Outcomes, tag: &str, n: usize) -> Vec<Outcome> {
    let before = seen.len();
    for i in 0..n {
        host.put("s", &format!("{tag}-{i}"), tag.as_bytes().to_vec());
    }
    wait_until(
        &format!("the records of `{tag}` handled"),
        Duration::from_secs(30),
        || seen.len() >= before + n,
    );
    seen.all()[before..]
        .iter()
        .filter(|s| s.data == tag)
        .map(|s| s.outcome)
        .collect()
}

#[test]
fn a_deploy_swaps_the_handler_and_new_records_run_on_it() {
    let dir = Scratch::new("admin-deploy");
    let (host, seen) = start(&dir, config(tagged()));
    assert!(
        put_and_handle(&host, &seen, "before", 20)
            .iter()
            .all(|o| *o == Outcome::Ack)
    );
    let answer = deploy(&host, wasm("always_drop"));
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.message());
    let swapped: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(swapped["old"], version("always_ack"));
    assert_eq!(swapped["new"], version("always_drop"));
    assert!(
        put_and_handle(&host, &seen, "after", 20)
            .iter()
            .all(|o| *o == Outcome::Drop),
        "records put after the deploy run on the new version"
    );
    let report = report(&host);
    let sub = &report.subscriptions[0];
    assert_eq!(sub.handler_version, version("always_drop"));
    assert_eq!(sub.previous_version, Some(version("always_ack")));
    for shard in &sub.shards {
        assert_eq!(shard.status.handler_version, version("always_drop"));
    }
    host.stop();
}

#[test]
fn a_broken_component_is_refused_with_422_and_the_old_one_keeps_serving() {
    let dir = Scratch::new("admin-refuse");
    let (host, seen) = start(&dir, config(tagged()));
    for (bytes, reason) in [
        (b"not wasm at all".to_vec(), "not a WebAssembly file"),
        (wasm("wrongworld"), "does not implement the world"),
    ] {
        let answer = deploy(&host, bytes);
        assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
        let message = answer.message();
        assert!(message.contains(reason), "{message}");
        assert!(
            message.contains("tagged"),
            "names the subscription: {message}"
        );
        assert!(
            message.contains("the handler serving is unchanged"),
            "{message}"
        );
    }
    assert!(
        put_and_handle(&host, &seen, "still", 20)
            .iter()
            .all(|o| *o == Outcome::Ack),
        "the old version keeps serving"
    );
    let sub = &report(&host).subscriptions[0];
    assert_eq!(sub.handler_version, version("always_ack"));
    assert!(
        sub.last_deploy_error
            .as_deref()
            .is_some_and(|e| e.contains("does not implement the world")),
        "{sub:?}"
    );
    let unknown = send(
        &host,
        Some(TOKEN),
        Method::PUT,
        "/subscriptions/nope/handler",
        wasm("always_drop"),
    );
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.message().contains("`tagged`"), "lists what runs");
    host.stop();
}

#[test]
fn rollback_restores_the_previous_version() {
    let dir = Scratch::new("admin-rollback");
    let (host, seen) = start(&dir, config(tagged()));
    let rollback = |host: &Running| {
        send(
            host,
            Some(TOKEN),
            Method::POST,
            "/subscriptions/tagged/rollback",
            Vec::new(),
        )
    };
    let nothing = rollback(&host);
    assert_eq!(nothing.status, StatusCode::CONFLICT);
    assert!(nothing.message().contains("no earlier handler"));
    assert_eq!(deploy(&host, wasm("always_drop")).status, StatusCode::OK);
    assert!(
        put_and_handle(&host, &seen, "dropped", 10)
            .iter()
            .all(|o| *o == Outcome::Drop)
    );
    let back = rollback(&host);
    assert_eq!(back.status, StatusCode::OK, "{}", back.message());
    let swapped: serde_json::Value = serde_json::from_slice(&back.body).unwrap();
    assert_eq!(swapped["new"], version("always_ack"));
    assert!(
        put_and_handle(&host, &seen, "acked", 10)
            .iter()
            .all(|o| *o == Outcome::Ack)
    );
    assert_eq!(
        report(&host).subscriptions[0].previous_version,
        Some(version("always_drop")),
        "a second rollback would undo the first"
    );
    host.stop();
}

#[test]
fn watch_reloads_the_handler_when_its_file_changes() {
    let dir = Scratch::new("admin-watch");
    let (host, seen) = start(&dir, config(tagged().set("watch", true)));
    assert!(
        put_and_handle(&host, &seen, "one", 10)
            .iter()
            .all(|o| *o == Outcome::Ack)
    );
    // A half-written (broken) file is refused; the old version keeps serving.
    dir.write("handler.wasm", &wasm("always_drop")[..1000]);
    wait(&host, "the refused reload", |r| {
        r.subscriptions[0].last_deploy_error.is_some()
    });
    assert_eq!(
        report(&host).subscriptions[0].handler_version,
        version("always_ack")
    );
    dir.write("handler.wasm", wasm("always_drop"));
    wait(&host, "the reload", |r| {
        r.subscriptions[0].handler_version == version("always_drop")
    });
    assert!(
        put_and_handle(&host, &seen, "two", 10)
            .iter()
            .all(|o| *o == Outcome::Drop)
    );
    assert_eq!(report(&host).subscriptions[0].last_deploy_error, None);
    host.stop();
}

/// Waits until the host's `/status` report satisfies `pred`.
fn wait(host: &Running, what: &str, pred: impl Fn(&Report) -> bool) {
    wait_until_else(
        what,
        Duration::from_secs(30),
        || pred(&report(host)),
        || format!("{:#?}", report(host)),
    );
}

#[test]
fn requests_without_the_token_get_401() {
    let dir = Scratch::new("admin-token");
    let (host, _) = start(&dir, config(tagged()));
    for (method, path) in [
        (Method::GET, "/status"),
        (Method::GET, "/metrics"),
        (Method::PUT, "/subscriptions/tagged/handler"),
        (Method::POST, "/subscriptions/tagged/rollback"),
    ] {
        for token in [None, Some("wrong")] {
            let answer = send(&host, token, method.clone(), path, wasm("always_drop"));
            assert_eq!(
                answer.status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {token:?}"
            );
        }
    }
    let health = send(&host, None, Method::GET, "/healthz", Vec::new());
    assert_eq!(health.status, StatusCode::OK, "liveness needs no token");
    assert_eq!(
        report(&host).subscriptions[0].handler_version,
        version("always_ack"),
        "nothing was swapped"
    );
    host.stop();
}

#[test]
fn an_upload_past_max_upload_gets_413() {
    let dir = Scratch::new("admin-413");
    let (host, _) = start(&dir, config(tagged()).set("admin", "max_upload", "64KiB"));
    // Far more than max_upload: the 413 comes while the client is still sending, and reaches it.
    let big = vec![0u8; 8 << 20];
    assert_eq!(deploy(&host, big).status, StatusCode::PAYLOAD_TOO_LARGE);
    let small_but_broken = vec![0u8; 1 << 10];
    assert_eq!(
        deploy(&host, small_but_broken).status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "under the limit the body is read and validated"
    );
    host.stop();
}

#[test]
fn metrics_count_records_by_outcome_and_name_the_handler_version() {
    let dir = Scratch::new("admin-metrics");
    let (host, seen) = start(&dir, config(tagged()));
    put_and_handle(&host, &seen, "m", 30);
    deploy(&host, wasm("always_drop"));
    put_and_handle(&host, &seen, "n", 12);
    let answer = send(&host, Some(TOKEN), Method::GET, "/metrics", Vec::new());
    assert_eq!(answer.status, StatusCode::OK);
    let text = String::from_utf8(answer.body.to_vec()).unwrap();
    let total = |outcome: &str| -> u64 {
        text.lines()
            .filter(|l| {
                l.starts_with("shardhost_records_total{")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!((total("ack"), total("drop")), (30, 12), "{text}");
    let drop_version = format!(
        "shardhost_handler_version_info{{subscription=\"tagged\",version=\"{}\"}} 1",
        version("always_drop")
    );
    assert!(text.contains(&drop_version), "{text}");
    assert!(
        !text.contains(&version("always_ack")),
        "only the current version is listed"
    );
    for name in [
        "shardhost_handler_call_seconds_bucket",
        "shardhost_leases_held{subscription=\"tagged\"} 2",
        "shardhost_checkpoint_writes_total",
        "shardhost_millis_behind_latest",
        "shardhost_handler_swaps_total{subscription=\"tagged\",result=\"ok\"} 1",
    ] {
        assert!(text.contains(name), "missing {name}: {text}");
    }
    host.stop();
}
