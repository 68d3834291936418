//! What the emulator benches share: clients of kinesis-mock and dynalite, a fresh stream and lease
//! table, and a producer that keeps putting records.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
};

/// The emulators' endpoints from `tests/stack`; exits with a hint without them.
pub fn endpoints() -> (String, String) {
    match (
        std::env::var("KINESIS_TEST_ENDPOINT"),
        std::env::var("DYNAMODB_TEST_ENDPOINT"),
    ) {
        (Ok(kinesis), Ok(dynamo)) => (kinesis, dynamo),
        _ => {
            eprintln!("run under tests/stack: the emulator endpoints are not set");
            std::process::exit(2);
        }
    }
}

fn credentials() -> aws_sdk_kinesis::config::Credentials {
    aws_sdk_kinesis::config::Credentials::new("t", "t", None, None, "bench")
}

pub fn kinesis_client(endpoint: &str) -> aws_sdk_kinesis::Client {
    aws_sdk_kinesis::Client::from_conf(
        aws_sdk_kinesis::Config::builder()
            .behavior_version(aws_sdk_kinesis::config::BehaviorVersion::latest())
            .http_client(shardhost::testing::http_client())
            .endpoint_url(endpoint)
            .region(aws_sdk_kinesis::config::Region::new("us-east-1"))
            .credentials_provider(credentials())
            .build(),
    )
}

pub fn dynamo_client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .http_client(shardhost::testing::http_client())
            .endpoint_url(endpoint)
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .credentials_provider(credentials())
            .build(),
    )
}

/// A fresh stream of `shards` shards and a fresh lease table, named after `tag`.
pub fn stream_and_table(kinesis: &str, dynamo: &str, tag: &str, shards: i32) -> (String, String) {
    let stream = format!("bench-{tag}-{}", std::process::id());
    let table = format!("bench-{tag}-leases-{}", std::process::id());
    let (k, d) = (kinesis_client(kinesis), dynamo_client(dynamo));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        k.create_stream()
            .stream_name(&stream)
            .shard_count(shards)
            .send()
            .await
            .unwrap();
        create_table(&d, &table, "lease_key").await;
        // Set-up (not measured): the stream and the table are ready to use.
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
    (stream, table)
}

/// Creates `table` (on demand capacity) keyed by the string attribute `key` alone.
pub async fn create_table(client: &aws_sdk_dynamodb::Client, table: &str, key: &str) {
    client
        .create_table()
        .table_name(table)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(key)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name(key)
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .unwrap();
}

/// A producer putting a record every 20 ms on `stream` until `stop`.
pub fn produce(endpoint: &str, stream: &str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let (endpoint, stream) = (endpoint.to_owned(), stream.to_owned());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let k = kinesis_client(&endpoint);
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let data = format!(r#"{{"id":{i},"sku":"SKU-{i}"}}"#);
            let _ = rt.block_on(
                k.put_record()
                    .stream_name(&stream)
                    .partition_key(format!("customer-{}", i % 31))
                    .data(aws_sdk_kinesis::primitives::Blob::new(data))
                    .send(),
            );
            i += 1;
            // Paces the producer: a record every 20 ms.
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}
