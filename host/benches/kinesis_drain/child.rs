//! The drain bench's child processes: the host (this binary with `--host-mode`, or another
//! build's) or the peer, each run under `/usr/bin/time -v`, and what they print.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use shardhost::Host;
use shardhost::config::Config;
use tokio_util::sync::CancellationToken;

/// What one run measured.
pub struct Sample {
    /// Records per second.
    pub rate: f64,
    /// The child's CPU seconds from its start to the last record (start-up included).
    pub cpu: f64,
    pub rss_mib: f64,
    /// CPU milliseconds per second while caught up (NaN: not measured).
    pub idle: f64,
    /// kinesis-mock's CPU seconds over the same span.
    pub emulator: f64,
    /// GetRecords calls over every shard (NaN: the child does not say).
    pub reads: f64,
}

impl Sample {
    pub fn print(&self, who: &str, run: usize, records: usize, shards: i32) {
        println!(
            "{who} run {run}: {records} records in {:.2} s = {:.0} rec/s; CPU {:.2} s ({:.3} s per 10 000); peak RSS {:.1} MiB; {:.1} reads per shard; idle CPU {:.1} ms/s; kinesis-mock CPU {:.2} s",
            records as f64 / self.rate,
            self.rate,
            self.cpu,
            self.cpu * 10_000.0 / records as f64,
            self.rss_mib,
            self.reads / shards as f64,
            self.idle,
            self.emulator
        );
    }
}

/// The peer (`bench-peer/`'s `drain-peer`) draining `stream` in a child process.
pub fn peer(exe: &Path, endpoint: &str, stream: &str, records: usize) -> Sample {
    let mut command = Command::new(exe);
    command
        .arg("run")
        .env("PEER_ENDPOINT", endpoint)
        .env("PEER_STREAM", stream)
        .env("PEER_RECORDS", records.to_string());
    measure(command, records)
}

/// Runs `command` under `/usr/bin/time -v` until it exits; answers what it printed.
pub fn measure(command: Command, records: usize) -> Sample {
    let wrap = std::env::var("SHARDHOST_BENCH_WRAP").unwrap_or_default();
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .args(wrap.split_whitespace())
        .arg(command.get_program())
        .args(command.get_args())
        .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .output()
        .expect("/usr/bin/time runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run failed:\n{stdout}\n{stderr}");
    let drain: f64 = field(&stdout, "drained in").expect("drain time");
    let idle = field(&stdout, "idle cpu:").unwrap_or(f64::NAN);
    Sample {
        rate: records as f64 / drain,
        cpu: field(&stdout, "cpu at drain:").expect("cpu at drain"),
        rss_mib: field(&stderr, "Maximum resident set size (kbytes):").unwrap() / 1024.0,
        idle: idle * 1000.0 / idle_for().as_secs_f64(),
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

/// How long a host stays up after the drain, caught up, to measure its idle CPU
/// (`SHARDHOST_BENCH_IDLE` seconds, default 10).
fn idle_for() -> Duration {
    Duration::from_secs(
        std::env::var("SHARDHOST_BENCH_IDLE").map_or(10, |s| s.parse().expect("seconds")),
    )
}

/// The child: runs the host until `n` records are delivered, prints the drain time, stops.
pub fn host_mode(config: &Path, n: u64) {
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
        let idle = idle_for();
        if !idle.is_zero() {
            let before = cpu_seconds();
            // The scenario: the host stays up, caught up, for the idle span.
            tokio::time::sleep(idle).await;
            println!("idle cpu: {:.4}", cpu_seconds() - before);
        }
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
