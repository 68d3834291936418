//! State (issue 27): a batch of 500 records that checks and marks one key per record, on
//! DynamoDB (dynalite), with `get-many`/`set-many` against one `get` and one `set` per record:
//! records per second per shard (one shard's handler, one call at a time), and the DynamoDB
//! requests per record.
//!
//! `tests/stack cargo bench -p shardhost --bench state` (needs `DYNAMODB_TEST_ENDPOINT`; builds
//! the `dedup` guest first: `scripts/build-guests --fixtures`). Prints the figures; paste them
//! into BENCHMARKS.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};
use shardhost::Metrics;
use shardhost::capability::config::{ConfigGrant, ConfigValue};
use shardhost::capability::state::{StateGrant, StateStoreKind};
use shardhost::config::{Limits, WasiGrants};
use shardhost::handler::{CallContext, HandlerFactory};
use shardhost::record::{BatchInfo, BatchOutcome, Outcome, Record};
use shardhost::testing::Runtime;
use shardhost_test_support::{guest, median};

const BATCH: usize = 500;
const CALLS: usize = 8;

fn batch(run: &str, call: usize) -> Vec<Record> {
    (0..BATCH)
        .map(|i| Record {
            partition_key: Arc::from(format!("{run}-{call}-{i}").as_str()),
            sequence_number: format!("4959{:052}", call * BATCH + i + 1),
            sub_sequence_number: 0,
            approximate_arrival_timestamp: 1_700_000_000_000,
            data: b"{}".to_vec(),
        })
        .collect()
}

async fn create_table(endpoint: &str, table: &str) {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(shardhost::testing::http_client())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "bench"))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    client
        .create_table()
        .table_name(table)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("key")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("key")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .unwrap();
    for _ in 0..100 {
        let d = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .unwrap();
        if d.table().and_then(|t| t.table_status()).map(|s| s.as_str()) == Some("ACTIVE") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("table {table} never became ACTIVE");
}

/// The sum of a counter family's samples for `subscription` in the metrics text.
fn counted(metrics: &Metrics, name: &str, subscription: &str) -> f64 {
    metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(&format!("subscription=\"{subscription}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Runs `CALLS` batches of fresh keys twice over (first: every key new, marked; second: every
/// key seen, skipped): records per second of each pass, requests per record.
async fn run(runtime: &Runtime, endpoint: &str, table: &str, mode: &str) -> (f64, f64, f64) {
    let mode_value = ConfigValue {
        value: mode.to_owned(),
        from_env: false,
    };
    let grants = WasiGrants::default()
        .with(ConfigGrant([("mode".to_owned(), mode_value)].into()))
        .with(StateGrant {
            store: StateStoreKind::Dynamo {
                table: table.to_owned(),
                endpoint: Some(endpoint.to_owned()),
                region: None,
                test_credentials: true,
            },
            ttl: None,
            buckets: Vec::new(),
            namespace: format!("bench/{mode}/"),
            max_in_flight: 64,
            timeout: std::time::Duration::from_secs(2),
            commit: Default::default(),
        });
    let limits = Limits {
        timeout: Duration::from_secs(60),
        ..Limits::default()
    };
    let handler = runtime
        .load_file(&guest("dedup"), limits, &grants)
        .await
        .expect("dedup.wasm loads (scripts/build-guests --fixtures)");
    let metrics = Arc::new(Metrics::new());
    let ctx = CallContext {
        subscription: Arc::from(mode),
        stream: Arc::from("bench"),
        shard_id: Arc::from("shardId-000000000000"),
        publisher: None,
        delivered: None,
        metrics: Some(metrics.clone()),
        log_budget: Default::default(),
        effects: None,
        pending: None,
    };
    let info = BatchInfo {
        stream: "bench".into(),
        shard_id: "shardId-000000000000".into(),
        millis_behind_latest: Some(0),
        attempt: 1,
    };
    let mut instance = handler.instantiate(&ctx).await.unwrap();
    let batches: Vec<Vec<Record>> = (0..CALLS).map(|c| batch(mode, c)).collect();
    let mut rates = Vec::new();
    for _pass in 0..2 {
        let started = Instant::now();
        for records in &batches {
            let answer = instance.handle(&info, records).await.unwrap();
            assert!(
                matches!(answer, BatchOutcome::All(Outcome::Ack)),
                "{mode}: {answer:?}"
            );
        }
        rates.push((CALLS * BATCH) as f64 / started.elapsed().as_secs_f64());
    }
    let records = (2 * CALLS * BATCH) as f64;
    let requests = counted(&metrics, "shardhost_state_store_requests", mode) / records;
    (rates[0], rates[1], requests)
}

fn main() {
    let Ok(endpoint) = std::env::var("DYNAMODB_TEST_ENDPOINT") else {
        eprintln!("state bench: DYNAMODB_TEST_ENDPOINT is not set; run it under tests/stack");
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let runtime = Runtime::new(None, false).unwrap();
    println!("{BATCH} records a batch, {CALLS} batches a pass; each figure the median of 3 runs");
    for mode in ["many", "each"] {
        let mut new = Vec::new();
        let mut seen = Vec::new();
        let mut per = Vec::new();
        for run_no in 0..3 {
            let table = format!("bench-state-{}-{mode}-{run_no}", std::process::id());
            rt.block_on(create_table(&endpoint, &table));
            let (a, b, r) = rt.block_on(run(&runtime, &endpoint, &table, mode));
            new.push(a);
            seen.push(b);
            per.push(r);
        }
        println!(
            "{mode:>4}: {:>7.0} records/s marking new keys, {:>7.0} records/s skipping seen \
             ones, {:.3} DynamoDB requests per record",
            median(new),
            median(seen),
            median(per)
        );
    }
}
