//! Enhanced fan-out against polling on kinesis-mock: put → handled latency (median and p99) of
//! records put at a steady rate into 4 shards, and the drain rate of a 20 000-record backlog.
//!
//! `tests/stack cargo bench -p shardhost --bench fan_out` — needs the emulator stack. Each mode
//! runs a host in process with the `always_ack` handler and the default config (polling:
//! `poll_interval` 1 s; fan-out over the plain endpoint, as a new user would point it).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use shardhost::Host;
use shardhost::config::Config;
use shardhost_test_support::{HostToml, Subscription, guest};
use tokio_util::sync::CancellationToken;

const SHARDS: i32 = 4;
/// Records put per second during the latency run, and for how long.
const RATE: u32 = 40;
const STEADY: Duration = Duration::from_secs(30);
const BACKLOG: usize = 20_000;

fn main() {
    let Ok(endpoint) = std::env::var("KINESIS_TEST_ENDPOINT") else {
        eprintln!("KINESIS_TEST_ENDPOINT is not set: run under tests/stack");
        std::process::exit(2);
    };
    let handler = guest("always_ack");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client(&endpoint);
    let dir = std::env::temp_dir().join(format!("shardhost-fanout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for mode in ["polling", "fan-out"] {
        let config = |stream: &str| {
            let s = Subscription::new("bench", stream, &handler)
                .trim_horizon()
                .set("read", mode);
            let path = dir.join(format!("{mode}.toml"));
            std::fs::write(&path, HostToml::kinesis(&endpoint).subscription(s).render()).unwrap();
            Config::load(&path).unwrap()
        };
        let stream = unique(&format!("latency-{mode}"));
        rt.block_on(create(&client, &stream));
        let mut latencies = rt.block_on(latency(&client, &stream, config(&stream)));
        latencies.sort_by(f64::total_cmp);
        let at =
            |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        println!(
            "{mode}: put → handled latency over {} records ({RATE}/s on {SHARDS} shards): median {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            latencies.len(),
            at(0.5),
            at(0.99),
            at(1.0)
        );
        let stream = unique(&format!("drain-{mode}"));
        rt.block_on(create(&client, &stream));
        rt.block_on(put_backlog(&client, &stream));
        let took = rt.block_on(drain(config(&stream)));
        println!(
            "{mode}: drained {BACKLOG} records in {:.2} s = {:.0} records/s",
            took.as_secs_f64(),
            BACKLOG as f64 / took.as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// Starts a host on `config` whose handled records are timed against the put time each one
/// carries; answers the latencies (ms) of records put at [`RATE`] for [`STEADY`].
async fn latency(client: &Client, stream: &str, config: Config) -> Vec<f64> {
    let mut host = Host::prepare(config).await.unwrap();
    let seen: Arc<Mutex<Vec<f64>>> = Arc::default();
    let tap = seen.clone();
    host.on_outcome(Arc::new(move |s: &shardhost::Settled<'_>| {
        let put: f64 = String::from_utf8_lossy(&s.record.data)
            .parse()
            .unwrap_or(f64::NAN);
        tap.lock().unwrap().push(now_ms() - put);
    }));
    let status = host.status();
    let stop = CancellationToken::new();
    let run = tokio::spawn(host.run(stop.clone()));
    // Set-up, not measured: every shard read once (fan-out: subscribed).
    while status
        .snapshot()
        .iter()
        .filter(|(_, _, s)| s.millis_behind_latest.is_some())
        .count()
        < SHARDS as usize
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let total = RATE as usize * STEADY.as_secs() as usize;
    let every = Duration::from_secs(1) / RATE;
    let start = tokio::time::Instant::now();
    for i in 0..total {
        tokio::time::sleep_until(start + every * i as u32).await;
        client
            .put_record()
            .stream_name(stream)
            .partition_key(format!("k-{i}"))
            .data(Blob::new(format!("{}", now_ms())))
            .send()
            .await
            .unwrap();
    }
    while seen.lock().unwrap().len() < total {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    run.await.unwrap().unwrap();
    seen.lock().unwrap().clone()
}

/// Runs a host on `config` until the backlog is settled; answers how long that took from its
/// start (the consumer registered and the component loaded before).
async fn drain(config: Config) -> Duration {
    let host = Host::prepare(config).await.unwrap();
    let status = host.status();
    let stop = CancellationToken::new();
    let started = Instant::now();
    let run = tokio::spawn(host.run(stop.clone()));
    while status.totals("bench").settled < BACKLOG as u64 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    stop.cancel();
    run.await.unwrap().unwrap();
    took
}

async fn put_backlog(client: &Client, stream: &str) {
    for chunk in (0..BACKLOG).collect::<Vec<_>>().chunks(500) {
        let entries = chunk
            .iter()
            .map(|i| {
                PutRecordsRequestEntry::builder()
                    .partition_key(format!("k-{i}"))
                    .data(Blob::new(format!(
                        r#"{{"id":{i},"sku":"SKU-{:05}"}}"#,
                        i * 7
                    )))
                    .build()
                    .unwrap()
            })
            .collect::<Vec<_>>();
        let out = client
            .put_records()
            .stream_name(stream)
            .set_records(Some(entries))
            .send()
            .await
            .unwrap();
        assert_eq!(out.failed_record_count(), Some(0));
    }
}

async fn create(client: &Client, stream: &str) {
    client
        .create_stream()
        .stream_name(stream)
        .shard_count(SHARDS)
        .send()
        .await
        .unwrap();
    // Polled: the stream becomes ACTIVE (set-up, not measured).
    while client
        .describe_stream_summary()
        .stream_name(stream)
        .send()
        .await
        .unwrap()
        .stream_description_summary()
        .unwrap()
        .stream_status()
        .as_str()
        != "ACTIVE"
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn unique(tag: &str) -> String {
    format!("{tag}-{}-{}", std::process::id(), now_ms() as u64)
}

fn client(endpoint: &str) -> Client {
    Client::from_conf(
        aws_sdk_kinesis::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(shardhost::testing::http_client())
            .endpoint_url(endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "bench"))
            .build(),
    )
}
