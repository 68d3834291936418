//! State committed with the checkpoint (issue 45) against immediate writes: one shard counting
//! orders per SKU (`sku-count` guest, 20 SKUs, keyed by shard) in batches of 500, through the
//! whole host (read, dispatch, settle, checkpoint) on kinesis-mock and moto's DynamoDB (the
//! emulator with `TransactWriteItems`). Per mode: records per second for the shard, and the
//! DynamoDB requests per record (state calls' requests, plus the checkpoints that carried state).
//!
//! `tests/stack cargo bench -p shardhost --bench committed` (builds the guest first:
//! `scripts/build-guests --fixtures`). Prints the figures; paste them into BENCHMARKS.md.

use std::path::Path;
use std::time::{Duration, Instant};

use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use shardhost::Host;
use shardhost::config::Config;
use shardhost_test_support::{HostToml, Subscription, guest, median, wait_until};
use tokio_util::sync::CancellationToken;

// Shared by the emulator benches; this one reads from moto and needs no producer.
#[allow(dead_code)]
mod emulators;

const RECORDS: usize = 10_000;
const SKUS: usize = 20;

fn main() {
    let kinesis = std::env::var("KINESIS_TEST_ENDPOINT");
    let moto = std::env::var("DYNAMODB_TXN_TEST_ENDPOINT");
    let (Ok(kinesis), Ok(moto)) = (kinesis, moto) else {
        eprintln!("run under tests/stack: the emulator endpoints are not set");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let modes = ["immediate", "with-checkpoint"];
    let mut rates = [Vec::new(), Vec::new()];
    let mut requests = [Vec::new(), Vec::new()];
    // Interleaved rounds: the machine's drift hits both modes alike.
    for round in 0..3 {
        for (m, commit) in modes.iter().enumerate() {
            let (rate, per_record) = run(&rt, &kinesis, &moto, commit, round);
            println!(
                "{commit:>15} round {round}: {rate:>7.0} records/s for the shard, \
                 {per_record:.4} DynamoDB requests per record"
            );
            rates[m].push(rate);
            requests[m].push(per_record);
        }
    }
    for (m, commit) in modes.iter().enumerate() {
        println!(
            "{commit:>15} median of 3: {:.0} records/s, {:.4} DynamoDB requests per record",
            median(rates[m].clone()),
            median(requests[m].clone())
        );
    }
}

/// One mode: a fresh stream of `RECORDS` orders, counted from its beginning.
fn run(
    rt: &tokio::runtime::Runtime,
    kinesis: &str,
    moto: &str,
    commit: &str,
    round: usize,
) -> (f64, f64) {
    let tag = format!("c{}{round}", commit.len());
    let (stream, leases) = emulators::stream_and_table(kinesis, moto, &tag, 1);
    let state = format!("bench-{tag}-state-{}", std::process::id());
    rt.block_on(emulators::create_table(
        &emulators::dynamo_client(moto),
        &state,
        "key",
    ));
    rt.block_on(put_orders(kinesis, &stream));
    let text = HostToml::kinesis(kinesis)
        .owner("bench")
        .dynamodb_leases(&leases, moto)
        .leases("balance", false)
        .leases("checkpoint_every", "1s")
        .subscription(
            Subscription::new("count", &stream, guest("sku_count"))
                .trim_horizon()
                .batch(500)
                .set("read_limit", 500)
                .nested("state", "table", state.as_str())
                .nested("state", "commit", commit),
        )
        .render();
    let config = Config::parse(Path::new("bench.toml"), &text).unwrap();
    let host = rt.block_on(Host::prepare(config)).unwrap();
    let (status, metrics) = (host.status(), host.metrics());
    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = rt.spawn(host.run(stop.clone()));
    wait_until("every order settled", Duration::from_secs(600), || {
        status.totals("count").settled >= RECORDS as u64
    });
    let took = started.elapsed().as_secs_f64();
    stop.cancel();
    rt.block_on(task).unwrap().unwrap();
    let text = metrics.encode();
    let requests = counter(&text, "shardhost_state_store_requests_total");
    let commits = counter(&text, "shardhost_state_commits_total");
    (RECORDS as f64 / took, (requests + commits) / RECORDS as f64)
}

/// The sum of a counter family's samples in the exposition text.
fn counter(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn put_orders(endpoint: &str, stream: &str) {
    let client = emulators::kinesis_client(endpoint);
    for chunk in 0..RECORDS / 500 {
        let entries = (0..500)
            .map(|i| {
                let n = chunk * 500 + i;
                let data = format!(r#"{{"id":{n},"sku":"sku-{}"}}"#, n % SKUS);
                PutRecordsRequestEntry::builder()
                    .partition_key(format!("customer-{n}"))
                    .data(Blob::new(data))
                    .build()
                    .unwrap()
            })
            .collect();
        let out = client
            .put_records()
            .stream_name(stream)
            .set_records(Some(entries))
            .send()
            .await
            .unwrap();
        assert_eq!(
            out.failed_record_count(),
            Some(0),
            "kinesis-mock took every order"
        );
    }
}
