//! Drain 20 000 JSON orders (~100 B) from a 4-shard stream of kinesis-mock with the orders
//! example handler and the default config: records/s, CPU seconds, peak RSS of the host process
//! and reads per shard, then the host's CPU while it stays caught up for 10 s (idle CPU).
//!
//! `tests/stack cargo bench -p shardhost --bench kinesis_drain` — needs the emulator stack. Each
//! run puts the records into a fresh stream, then runs the host in a child process under
//! `/usr/bin/time -v` until every record is settled. Prints the medians of 3 runs.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use shardhost::Host;
use shardhost::config::Config;
use shardhost_test_support::{HostToml, Subscription, guest, median};
use tokio_util::sync::CancellationToken;

const RECORDS: usize = 20_000;
const SHARDS: i32 = 4;
const RUNS: usize = 3;
/// How long the host stays up after the drain, caught up, to measure its idle CPU.
const IDLE: Duration = Duration::from_secs(10);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--host-mode") {
        host_mode(Path::new(&args[i + 1]), args[i + 2].parse().unwrap());
        return;
    }
    let Ok(endpoint) = std::env::var("KINESIS_TEST_ENDPOINT") else {
        eprintln!("KINESIS_TEST_ENDPOINT is not set: run under tests/stack");
        std::process::exit(2);
    };
    let pick = guest("pick");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client(&endpoint);
    let dir = std::env::temp_dir().join(format!("shardhost-drain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let samples: Vec<Sample> = (0..RUNS)
        .map(|run| {
            let stream = format!("drain-{}-{run}", std::process::id());
            rt.block_on(fill(&client, &stream));
            let config = HostToml::kinesis(&endpoint)
                .subscription(Subscription::new("pick", &stream, &pick).trim_horizon());
            let path = dir.join("shardhost.toml");
            std::fs::write(&path, config.render()).unwrap();
            let sample = drain_in_a_child(&path);
            sample.print(run);
            sample
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    let of = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
    let cpu = of(|s| s.cpu);
    println!(
        "median of {RUNS}: {:.0} rec/s, host CPU {cpu:.2} s ({:.3} s per 10 000 records), peak RSS {:.1} MiB, idle CPU {:.1} ms/s, kinesis-mock CPU {:.2} s ({RECORDS} records, {SHARDS} shards, default config)",
        of(|s| s.rate),
        cpu * 10_000.0 / RECORDS as f64,
        of(|s| s.rss_mib),
        of(|s| s.idle),
        of(|s| s.emulator)
    );
}

/// What one run measured.
struct Sample {
    /// Records per second.
    rate: f64,
    /// The host process's CPU seconds from its start to the last record (start-up included).
    cpu: f64,
    rss_mib: f64,
    /// CPU milliseconds per second while caught up.
    idle: f64,
    /// kinesis-mock's CPU seconds.
    emulator: f64,
    reads: f64,
}

impl Sample {
    fn print(&self, run: usize) {
        println!(
            "run {run}: {RECORDS} records in {:.2} s = {:.0} rec/s; host CPU {:.2} s ({:.3} s per 10 000); peak RSS {:.1} MiB; {:.1} reads per shard; idle CPU {:.1} ms/s; kinesis-mock CPU {:.2} s",
            RECORDS as f64 / self.rate,
            self.rate,
            self.cpu,
            self.cpu * 10_000.0 / RECORDS as f64,
            self.rss_mib,
            self.reads / SHARDS as f64,
            self.idle,
            self.emulator
        );
    }
}

/// Runs the host on `config` in a child process under `/usr/bin/time -v` until every record is
/// settled; answers what it measured.
fn drain_in_a_child(config: &Path) -> Sample {
    // SHARDHOST_BENCH_WRAP="perf record -g -o F" (or "heaptrack -o F") profiles the child.
    let wrap = std::env::var("SHARDHOST_BENCH_WRAP").unwrap_or_default();
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .args(wrap.split_whitespace())
        .arg(std::env::current_exe().unwrap())
        .arg("--host-mode")
        .arg(config)
        .arg(RECORDS.to_string())
        .output()
        .expect("/usr/bin/time runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "host run failed:\n{stdout}\n{stderr}");
    let drain: f64 = field(&stdout, "drained in").expect("drain time");
    let idle = field(&stdout, "idle cpu:").unwrap_or(f64::NAN);
    Sample {
        rate: RECORDS as f64 / drain,
        cpu: field(&stdout, "cpu at drain:").expect("cpu at drain"),
        rss_mib: field(&stderr, "Maximum resident set size (kbytes):").unwrap() / 1024.0,
        idle: idle * 1000.0 / IDLE.as_secs_f64(),
        emulator: field(&stdout, "emulator cpu:").unwrap_or(f64::NAN),
        reads: field(&stdout, "reads:").unwrap_or(f64::NAN),
    }
}

fn field(text: &str, label: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains(label))?;
    let rest = &line[line.find(label)? + label.len()..];
    rest.split_whitespace()
        .next()?
        .trim_end_matches('s')
        .parse()
        .ok()
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

async fn fill(client: &Client, stream: &str) {
    client
        .create_stream()
        .stream_name(stream)
        .shard_count(SHARDS)
        .send()
        .await
        .unwrap();
    loop {
        let s = client
            .describe_stream_summary()
            .stream_name(stream)
            .send()
            .await
            .unwrap();
        if s.stream_description_summary()
            .unwrap()
            .stream_status()
            .as_str()
            == "ACTIVE"
        {
            break;
        }
        // Polled: the stream becomes ACTIVE (set-up, not measured).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(500) {
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

/// The child: runs the host until `n` records are settled, prints the drain time, stops.
fn host_mode(config: &Path, n: u64) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("warn")
        .with_writer(std::io::stderr)
        .try_init();
    // As `shardhost run` does before it starts its runtime.
    shardhost::testing::release_large_buffers();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let emulator_at_start = emulator_cpu_seconds();
    rt.block_on(async {
        let host = Host::prepare(Config::load(config).unwrap()).await.unwrap();
        let status = host.status();
        let metrics = host.metrics();
        let stop = CancellationToken::new();
        let started = Instant::now();
        let run = tokio::spawn(host.run(stop.clone()));
        // Polled every 5 ms: the drain time is what is measured.
        while status.totals("pick").delivered < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        println!("drained in {:.3}s", started.elapsed().as_secs_f64());
        println!("cpu at drain: {:.4}", cpu_seconds());
        if let (Some(start), Some(now)) = (emulator_at_start, emulator_cpu_seconds()) {
            println!("emulator cpu: {:.2}", now - start);
        }
        // GetRecords calls answered, over every shard (a host before read metrics prints none).
        let reads: f64 = metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("shardhost_reads_total{"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum();
        if reads > 0.0 {
            println!("reads: {reads}");
        }
        // Then caught up: what the host costs while its shards stay empty.
        let before = cpu_seconds();
        // The scenario: the host stays up, caught up, for IDLE.
        tokio::time::sleep(IDLE).await;
        println!("idle cpu: {:.4}", cpu_seconds() - before);
        stop.cancel();
        run.await.unwrap().unwrap();
    });
}

/// This process's CPU time (user + system) so far, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// kinesis-mock's CPU time so far (user + system, seconds), when tests/stack says its pid.
fn emulator_cpu_seconds() -> Option<f64> {
    let pid = std::env::var("KINESIS_TEST_PID").ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is the first, utime the 12th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf only reads a system setting.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / per_second)
}
