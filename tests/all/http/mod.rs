//! Outbound HTTP as a handler sees it, against a real server on 127.0.0.1: what no grant
//! refuses (at load, `check` and `invoke`), the call's timeout cutting a slow server, and what
//! the metrics count; `egress.rs`: which addresses an allowed name may reach; `memory.rs`: the
//! host memory a guest's responses may hold; `tls.rs`: https to a private CA. The request-by-request behaviour (allowed, denied,
//! redirects, timeouts, bodies, concurrency) is in `tests/conformance/http.ndjson`, run for
//! every SDK.

mod egress;
mod memory;
mod tls;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use shardhost::Metrics;
use shardhost::capability::config::{ConfigGrant, ConfigValue};
use shardhost::capability::http::{HttpGrant, Origin};
use shardhost::capability::state::{StateGrant, StateStoreKind};
use shardhost::config::{Limits, WasiGrants};
use shardhost::handler::{CallContext, CallError, HandlerFactory};
use shardhost::record::{BatchInfo, BatchOutcome, Outcome, Record};
use shardhost::testing::Runtime;

use crate::support::{HttpServer, Scratch, guest};

fn grant(origins: &[&str], timeout: Duration) -> WasiGrants {
    let greeting = ConfigValue {
        value: "hello".into(),
        from_env: false,
    };
    WasiGrants::default()
        .with(HttpGrant {
            allow: origins.iter().map(|o| Origin::parse(o).unwrap()).collect(),
            timeout,
            max_body: 64 * 1024,
            max_in_flight: 16,
            ca_file: None,
            allow_private: false,
        })
        .with(ConfigGrant([("greeting".to_owned(), greeting)].into()))
        // The conformance handler keeps state too (tests/conformance: `state`).
        .with(StateGrant {
            store: StateStoreKind::Memory,
            ttl: None,
            buckets: Vec::new(),
            namespace: "http/test/".to_owned(),
            max_in_flight: 16,
            timeout: Duration::from_secs(2),
            commit: Default::default(),
        })
}

fn request(i: usize, url: &str) -> Record {
    Record {
        partition_key: Arc::from("http"),
        sequence_number: format!("4959{:052}", i + 1),
        sub_sequence_number: 0,
        approximate_arrival_timestamp: 1_700_000_000_000,
        data: serde_json::json!({ "url": url }).to_string().into_bytes(),
    }
}

fn ctx(metrics: Option<Arc<Metrics>>) -> CallContext {
    CallContext {
        subscription: Arc::from("book"),
        stream: Arc::from("shipments"),
        shard_id: Arc::from("shardId-000000000000"),
        publisher: None,
        delivered: None,
        metrics,
        log_budget: Default::default(),
        effects: None,
        pending: None,
    }
}

async fn call(
    handler: &dyn HandlerFactory,
    ctx: &CallContext,
    records: &[Record],
) -> Result<BatchOutcome, CallError> {
    let info = BatchInfo {
        stream: "shipments".into(),
        shard_id: "shardId-000000000000".into(),
        millis_behind_latest: Some(0),
        attempt: 1,
    };
    let mut instance = handler.instantiate(ctx).await?;
    instance.handle(&info, records).await
}

#[tokio::test]
async fn a_component_that_sends_http_is_refused_where_no_http_is_granted() {
    let runtime = Runtime::new(None, false).unwrap();
    let refused = runtime
        .load_file(
            &guest("conformance"),
            Limits::default(),
            &WasiGrants::default(),
        )
        .await
        .err()
        .expect("no grant, no load")
        .to_string();
    for needle in [
        "wasi:http/outgoing-handler",
        "grants no HTTP",
        "[subscription.http]",
    ] {
        assert!(refused.contains(needle), "{needle}: {refused}");
    }
    let granted = grant(&["http://127.0.0.1:9"], Duration::from_secs(1));
    runtime
        .load_file(&guest("conformance"), Limits::default(), &granted)
        .await
        .expect("with a grant it loads");
}

#[test]
fn check_and_invoke_name_the_missing_http_grant() {
    let dir = Scratch::new("nohttp");
    let config = dir.write(
        "shardhost.toml",
        format!(
            "[kinesis]\nendpoint = \"memory\"\n\n[[subscription]]\nname = \"book\"\nstream = \"s\"\nhandler = \"{}\"\n",
            guest("conformance").display()
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .arg("check")
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("grants no HTTP") && stderr.contains("[subscription.http]"),
        "{stderr}"
    );

    let records = dir.write("r.ndjson", "{\"partition_key\": \"ack\", \"data\": \"\"}\n");
    let invoke = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_shardhost"))
            .arg("invoke")
            .arg(guest("conformance"))
            .arg("--records")
            .arg(&records)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = invoke(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--allow-http ORIGIN"), "{stderr}");
    let out = invoke(&["--allow-http", "http://127.0.0.1:9", "--state"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ack"));
}

#[tokio::test]
async fn a_slow_server_is_cut_at_the_call_timeout_when_that_comes_first() {
    let server = HttpServer::start();
    let runtime = Runtime::new(None, false).unwrap();
    let limits = Limits {
        timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    // The request may take 60 s, the call 1 s: the call's timeout wins.
    let granted = grant(&[&server.origin()], Duration::from_secs(60));
    let handler = runtime
        .load_file(&guest("conformance"), limits, &granted)
        .await
        .unwrap();
    let slow = request(0, &format!("{}/slow/30000", server.origin()));
    let answer = call(handler.as_ref(), &ctx(None), &[slow]).await;
    assert!(
        matches!(answer, Err(CallError::Timeout { .. })),
        "the call should time out: {answer:?}"
    );
}

#[tokio::test]
async fn responses_and_refusals_are_counted_per_subscription_and_origin() {
    let server = HttpServer::start();
    let runtime = Runtime::new(None, false).unwrap();
    let granted = grant(&[&server.origin()], Duration::from_secs(5));
    let handler = runtime
        .load_file(&guest("conformance"), Limits::default(), &granted)
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::new());
    let base = server.origin();
    let records = [
        request(0, &format!("{base}/status/200")),
        request(1, &format!("{base}/status/503")),
        request(2, "http://not-allowed.example/x"),
        request(3, &format!("{base}/big/100000")),
    ];
    let answer = call(handler.as_ref(), &ctx(Some(metrics.clone())), &records)
        .await
        .unwrap();
    assert_eq!(
        answer,
        BatchOutcome::Each(vec![
            Outcome::RetryAfter(200),
            Outcome::RetryAfter(503),
            Outcome::RetryAfter(1),
            Outcome::RetryAfter(4),
        ])
    );
    let text = metrics.encode();
    let origin = format!("origin=\"{base}\"");
    let has = |family: &str, labels: &[&str]| {
        text.lines().any(|l| {
            l.starts_with(family)
                && l.contains("subscription=\"book\"")
                && labels.iter().all(|x| l.contains(x))
                && l.ends_with(" 1")
        })
    };
    assert!(
        has(
            "shardhost_http_responses_total",
            &[&origin, "class=\"2xx\""]
        ),
        "{text}"
    );
    assert!(
        has(
            "shardhost_http_responses_total",
            &[&origin, "class=\"5xx\""]
        ),
        "{text}"
    );
    assert!(
        has(
            "shardhost_http_errors_total",
            &["origin=\"other\"", "kind=\"denied\""]
        ),
        "{text}"
    );
    assert!(
        has(
            "shardhost_http_errors_total",
            &[&origin, "kind=\"body_too_large\""]
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "shardhost_http_request_seconds_count{{subscription=\"book\",{origin}}} 2"
        )),
        "{text}"
    );
    assert!(
        !text.contains("not-allowed.example"),
        "a denied origin is never a label: {text}"
    );

    // Config reads are counted too.
    let reads = [
        Record {
            partition_key: Arc::from("config:greeting"),
            ..request(4, "")
        },
        Record {
            partition_key: Arc::from("config:nothing"),
            ..request(5, "")
        },
    ];
    call(handler.as_ref(), &ctx(Some(metrics.clone())), &reads)
        .await
        .unwrap();
    let text = metrics.encode();
    for result in ["found", "missing"] {
        let line =
            format!("shardhost_config_reads_total{{subscription=\"book\",result=\"{result}\"}} 1");
        assert!(text.contains(&line), "{line}: {text}");
    }
}
