//! Drain JSON orders (~80 B) from a 4-shard stream of kinesis-mock with the orders example
//! handler and the default config: records/s, CPU seconds (the host's and kinesis-mock's), peak
//! RSS of the host process and reads per shard, then the host's CPU while it stays caught up
//! (idle CPU). Side by side in the same run, optionally: another build of this bench's host (the
//! code before a change) and the peer, a ruststream-kinesis service (`bench-peer/`).
//!
//! `tests/stack cargo bench -p shardhost --bench kinesis_drain` — needs the emulator stack. The
//! records are put into a fresh stream once per record count (kinesis-mock takes minutes to
//! take 100 000); then each run drains it from its trim horizon with every contender in turn, in
//! a child process under `/usr/bin/time -v`, until every record is delivered (each child has
//! its own memory lease store: reading does not change the stream). Prints every run and the
//! medians. Knobs (environment):
//!
//! - `SHARDHOST_BENCH_RECORDS=20000,100000`: the record counts (default 20 000);
//! - `SHARDHOST_BENCH_RUNS=5`: runs per count and contender (default 3);
//! - `SHARDHOST_BENCH_IDLE=0`: seconds a host stays up caught up after the drain (default 10);
//! - `SHARDHOST_BENCH_BEFORE=PATH`: another build of this bench (say, main's): its host runs too;
//! - `SHARDHOST_BENCH_PEER=PATH`: the `drain-peer` binary of `bench-peer/`: it runs too;
//! - `SHARDHOST_BENCH_WRAP="perf record -g -o F"` (or `heaptrack -o F`): profiles each child;
//! - `SHARDHOST_BENCH_KEEP=1`: the streams are named by their count (`drain-100000`), kept, and
//!   drained again by the next bench on the same emulator (a `tests/stack` left running; a
//!   kept stream is taken as full).

#[path = "kinesis_drain/child.rs"]
mod child;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use shardhost_test_support::{HostToml, Subscription, guest, median};

use child::Sample;

const SHARDS: i32 = 4;

/// What drains the stream in a run.
enum Contender {
    /// This bench's own host.
    This,
    /// The host of another build of this bench (`SHARDHOST_BENCH_BEFORE`).
    Before(PathBuf),
    /// The ruststream-kinesis service of `bench-peer/` (`SHARDHOST_BENCH_PEER`).
    Peer(PathBuf),
}

impl Contender {
    fn label(&self) -> &'static str {
        match self {
            Contender::This => "shardhost",
            Contender::Before(_) => "before",
            Contender::Peer(_) => "peer",
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--host-mode") {
        child::host_mode(Path::new(&args[i + 1]), args[i + 2].parse().unwrap());
        return;
    }
    let Ok(endpoint) = std::env::var("KINESIS_TEST_ENDPOINT") else {
        eprintln!("KINESIS_TEST_ENDPOINT is not set: run under tests/stack");
        std::process::exit(2);
    };
    let counts: Vec<usize> = std::env::var("SHARDHOST_BENCH_RECORDS")
        .unwrap_or_else(|_| "20000".into())
        .split(',')
        .map(|n| n.trim().parse().expect("SHARDHOST_BENCH_RECORDS: numbers"))
        .collect();
    let runs: usize = std::env::var("SHARDHOST_BENCH_RUNS").map_or(3, |n| n.parse().unwrap());
    let mut contenders = vec![Contender::This];
    if let Ok(path) = std::env::var("SHARDHOST_BENCH_BEFORE") {
        contenders.push(Contender::Before(path.into()));
    }
    if let Ok(path) = std::env::var("SHARDHOST_BENCH_PEER") {
        contenders.push(Contender::Peer(path.into()));
    }
    let pick = guest("pick");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client(&endpoint);
    let dir = std::env::temp_dir().join(format!("shardhost-drain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for &records in &counts {
        let keep = std::env::var_os("SHARDHOST_BENCH_KEEP").is_some();
        let stream = match keep {
            true => format!("drain-{records}"),
            false => format!("drain-{}-{records}", std::process::id()),
        };
        if !(keep && rt.block_on(exists(&client, &stream))) {
            let filling = Instant::now();
            rt.block_on(fill(&client, &stream, records));
            println!("{records} records put in {:.0?}", filling.elapsed());
        }
        // samples[c]: contender c's runs.
        let mut samples: Vec<Vec<Sample>> = contenders.iter().map(|_| Vec::new()).collect();
        for run in 0..runs {
            // Each run starts with another contender, so a slow spell of the machine does not
            // always fall on the same one.
            for k in 0..contenders.len() {
                let c = (run + k) % contenders.len();
                let sample = match &contenders[c] {
                    Contender::This => host(
                        &std::env::current_exe().unwrap(),
                        &dir,
                        &endpoint,
                        &stream,
                        &pick,
                        records,
                    ),
                    Contender::Before(exe) => host(exe, &dir, &endpoint, &stream, &pick, records),
                    Contender::Peer(exe) => child::peer(exe, &endpoint, &stream, records),
                };
                sample.print(contenders[c].label(), run, records, SHARDS);
                samples[c].push(sample);
            }
        }
        if !keep {
            rt.block_on(delete(&client, &stream));
        }
        summary(&contenders, &samples, records);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A host (this bench's or another build's) draining `stream` in a child process.
fn host(
    exe: &Path,
    dir: &Path,
    endpoint: &str,
    stream: &str,
    pick: &Path,
    records: usize,
) -> Sample {
    let config = HostToml::kinesis(endpoint)
        .subscription(Subscription::new("pick", stream, pick).trim_horizon());
    let path = dir.join("shardhost.toml");
    std::fs::write(&path, config.render()).unwrap();
    let mut command = std::process::Command::new(exe);
    command
        .arg("--host-mode")
        .arg(&path)
        .arg(records.to_string());
    child::measure(command, records)
}

/// The medians of each contender, and the ratios to the peer's when it ran.
fn summary(contenders: &[Contender], samples: &[Vec<Sample>], records: usize) {
    let of = |c: usize, f: fn(&Sample) -> f64| median(samples[c].iter().map(f).collect());
    let peer = contenders
        .iter()
        .position(|c| matches!(c, Contender::Peer(_)));
    println!(
        "medians of {} runs, {records} records, {SHARDS} shards, default config:",
        samples[0].len()
    );
    println!(
        "| | records/s | CPU | kinesis-mock CPU | peak RSS | reads per shard | idle CPU | rate vs peer | CPU vs peer |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (c, contender) in contenders.iter().enumerate() {
        let (rate, cpu) = (of(c, |s| s.rate), of(c, |s| s.cpu));
        let (vs_rate, vs_cpu) = match peer {
            Some(p) => (
                format!("{:.2}×", rate / of(p, |s| s.rate)),
                format!("{:.2}×", cpu / of(p, |s| s.cpu)),
            ),
            None => ("-".into(), "-".into()),
        };
        println!(
            "| {} | {rate:.0} | {cpu:.2} s | {:.2} s | {:.1} MiB | {:.1} | {:.1} ms/s | {vs_rate} | {vs_cpu} |",
            contender.label(),
            of(c, |s| s.emulator),
            of(c, |s| s.rss_mib),
            of(c, |s| s.reads) / SHARDS as f64,
            of(c, |s| s.idle),
        );
    }
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

/// Creates `stream` with [`SHARDS`] shards and puts `records` orders into it.
async fn fill(client: &Client, stream: &str, records: usize) {
    client
        .create_stream()
        .stream_name(stream)
        .shard_count(SHARDS)
        .send()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = client
            .describe_stream_summary()
            .stream_name(stream)
            .send()
            .await
            .unwrap();
        let status = s.stream_description_summary().unwrap().stream_status();
        if status.as_str() == "ACTIVE" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stream {stream} still {status:?}"
        );
        // Polled: the stream becomes ACTIVE (set-up, not measured).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for chunk in (0..records).collect::<Vec<_>>().chunks(500) {
        let entries = chunk
            .iter()
            .map(|i| {
                let data = format!(
                    r#"{{"id":{i},"sku":"SKU-{:05}","customer":"customer-{}","qty":{}}}"#,
                    i * 7 % 100_000,
                    i % 997,
                    i % 5 + 1
                );
                PutRecordsRequestEntry::builder()
                    .partition_key(format!("customer-{}", i % 997))
                    .data(Blob::new(data.into_bytes()))
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

/// Whether `stream` exists (a kept one, filled by an earlier bench).
async fn exists(client: &Client, stream: &str) -> bool {
    client
        .describe_stream_summary()
        .stream_name(stream)
        .send()
        .await
        .is_ok()
}

/// Deletes a drained stream, so the emulator does not keep every count's records in memory.
async fn delete(client: &Client, stream: &str) {
    client
        .delete_stream()
        .stream_name(stream)
        .enforce_consumer_deletion(true)
        .send()
        .await
        .unwrap();
}
