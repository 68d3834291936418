//! `shardhost put`: records put into a running host's embedded stream through its admin API
//! reach the handler as fed records do, and a shadow set with `deploy --shadow` compares them;
//! a put without the token, for an unknown subscription, past the size bound or into a host
//! that reads Kinesis is refused, saying why.

use std::process::{Command, Output};
use std::time::Duration;

use hyper::{Method, StatusCode};
use shardhost::record::Outcome;
use shardhost::shadow::ShadowReport;
use shardhost::status::ShardState;

use crate::support::{
    HostToml, Outcomes, Running, Scratch, Subscription, guest, kinesis_endpoint, metric, unique,
    wait_until_else,
};

const TOKEN: &str = "put-token";

mod answer;

/// A host on the embedded stream `orders` running `handler`, with the admin API.
fn start(dir: &Scratch, handler: &str) -> (Running, Outcomes) {
    start_sub(dir, Subscription::new("orders", "orders", guest(handler)))
}

/// A host on the embedded stream running `sub` (on stream `orders`), with the admin API.
fn start_sub(dir: &Scratch, sub: Subscription) -> (Running, Outcomes) {
    let sub = sub.trim_horizon().batch(10).poll_interval("20ms");
    let config = HostToml::memory().admin_with_token(TOKEN).subscription(sub);
    let seen = Outcomes::default();
    let host = Running::start_with(dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("the shard read", |b| {
        b.shards_of("orders")
            .iter()
            .any(|s| s.status.state == ShardState::Reading)
    });
    (host, seen)
}

/// `shardhost VERB ARGS… --admin URL` against `host`, with `token`.
fn cli(host: &Running, token: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shardhost"));
    c.args(args)
        .arg("--admin")
        .arg(format!("http://{}", host.admin.unwrap()))
        .env_remove("SHARDHOST_ADMIN_TOKEN");
    if let Some(token) = token {
        c.env("SHARDHOST_ADMIN_TOKEN", token);
    }
    c.output().unwrap()
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

#[test]
fn put_into_a_running_embedded_stream_reaches_the_handler() {
    let dir = Scratch::new("put-reaches");
    let (host, seen) = start(&dir, "scripted");
    let records = dir.write(
        "records.ndjson",
        "{\"partition_key\":\"order-1\",\"data\":\"ack\"}\n\n\
         {\"partition_key\":\"order-2\",\"data\":\"drop\"}\n",
    );
    let out = cli(
        &host,
        Some(TOKEN),
        &["put", "orders", records.to_str().unwrap()],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("embedded stream `orders`"), "{stdout}");
    assert!(
        stdout.contains("shardId-000000000000  4960") && stdout.contains("key order-2"),
        "each record's shard and sequence number: {stdout}"
    );
    assert!(stdout.contains("2 record(s) put"), "{stdout}");
    // One record from the command line.
    let out = cli(
        &host,
        Some(TOKEN),
        &["put", "orders", "--key", "order-3", "--data", "drop"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("1 record(s) put"));

    host.wait_for("3 records handled", |_| seen.len() >= 3);
    let mut all: Vec<(String, Outcome)> = seen
        .all()
        .into_iter()
        .map(|s| (s.partition_key, s.outcome))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        all,
        [
            ("order-1".to_owned(), Outcome::Ack),
            ("order-2".to_owned(), Outcome::Drop),
            ("order-3".to_owned(), Outcome::Drop),
        ]
    );
    let metrics = host.metrics();
    let put = metric(
        &metrics,
        "shardhost_admin_put_records_total",
        &["subscription=\"orders\""],
    );
    assert_eq!(put, 3.0, "{metrics}");
    host.stop();
}

#[test]
fn a_shadow_compares_the_records_put_into_the_embedded_stream() {
    let dir = Scratch::new("put-shadow");
    let (host, seen) = start(&dir, "scripted");
    let candidate = guest("always_drop");
    let out = cli(
        &host,
        Some(TOKEN),
        &["deploy", "orders", "--shadow", candidate.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: String = (0..9)
        .map(|i| {
            let data = if i % 3 == 0 { "drop" } else { "ack" };
            format!("{{\"partition_key\":\"key-{i}\",\"data\":\"{data}\"}}\n")
        })
        .collect();
    let records = dir.write("records.ndjson", lines);
    let out = cli(
        &host,
        Some(TOKEN),
        &["put", "orders", records.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    host.wait_for("9 records settled", |_| seen.len() >= 9);

    let shadow = || -> Option<ShadowReport> {
        let report = host.block_on(host.admin(Some(TOKEN)).status()).unwrap();
        report.subscriptions[0].shadow.clone()
    };
    wait_until_else(
        "the shadow to compare the 9 records put",
        Duration::from_secs(60),
        || shadow().is_some_and(|s| s.agree + s.differ + s.records_dropped >= 9),
        || format!("{:#?}", shadow()),
    );
    let s = shadow().unwrap();
    // One batch of 9: compared whole unless the shadow was busy (counted as dropped).
    if s.records_dropped == 0 {
        assert_eq!((s.agree, s.differ), (3, 6), "{s:#?}");
    }
    let metrics = host.metrics();
    let differ = metric(
        &metrics,
        "shardhost_shadow_records_total",
        &["subscription=\"orders\"", "result=\"differ\""],
    );
    assert_eq!(differ, s.differ as f64, "{metrics}");
    host.stop();
}

#[test]
fn put_is_refused_without_the_token_for_an_unknown_subscription_and_past_5_mib() {
    let dir = Scratch::new("put-refused");
    let (host, seen) = start(&dir, "always_ack");
    let one = ["put", "orders", "--key", "k", "--data", "x"];

    let out = cli(&host, None, &one);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--token or SHARDHOST_ADMIN_TOKEN"),
        "{stderr}"
    );

    let out = cli(
        &host,
        Some(TOKEN),
        &["put", "nope", "--key", "k", "--data", "x"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no subscription `nope`") && stderr.contains("orders"),
        "{stderr}"
    );

    // Past the bound: refused from the declared length, while the client still sends.
    let line = format!(
        "{{\"partition_key\":\"k\",\"data\":\"{}\"}}\n",
        "x".repeat(900_000)
    );
    let big = line.repeat(8).into_bytes();
    let client = host.admin(Some(TOKEN));
    let answer = host
        .block_on(client.send(Method::POST, "/subscriptions/orders/records", big))
        .unwrap();
    assert_eq!(
        answer.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        answer.message()
    );
    // A bad line refuses the whole put, naming it.
    let bad = b"{\"partition_key\":\"a\",\"data\":1}\n{\"data\":2}\n".to_vec();
    let answer = host
        .block_on(client.send(Method::POST, "/subscriptions/orders/records", bad))
        .unwrap();
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        answer.message().contains(":2: missing `partition_key`"),
        "{}",
        answer.message()
    );

    assert_eq!(seen.len(), 0, "a refused put put something");
    let metrics = host.metrics();
    let refused = metric(
        &metrics,
        "shardhost_admin_puts_total",
        &["subscription=\"orders\"", "result=\"refused\""],
    );
    assert_eq!(refused, 2.0, "the oversized and the bad put: {metrics}");
    host.stop();
}

#[test]
fn put_into_a_host_that_reads_kinesis_is_refused_naming_the_aws_cli() {
    let Some(ep) = kinesis_endpoint() else { return };
    let stream = unique("put-kinesis");
    crate::support::kinesis::Kinesis::new(&ep).create(&stream, 1);
    let dir = Scratch::new("put-kinesis");
    let config = HostToml::kinesis(&ep)
        .admin_with_token(TOKEN)
        .subscription(Subscription::new("orders", &stream, guest("always_ack")));
    let host = Running::start(&dir, config);
    let out = cli(
        &host,
        Some(TOKEN),
        &["put", "orders", "--key", "k", "--data", "x"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("409")
            && stderr.contains(&format!("reads the Kinesis stream `{stream}`"))
            && stderr.contains("aws kinesis put-record"),
        "{stderr}"
    );
    host.stop();
}
