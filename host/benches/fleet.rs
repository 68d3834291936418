//! Fleet deploys against kinesis-mock + dynalite: three `shardhost run` processes on a 3-shard
//! stream and one lease table, default timings (`[fleet] poll = "2s"`, `heartbeat = "10s"`,
//! `poll_interval = "1s"`), a producer putting a record every 20 ms.
//! 1. rollout: `shardhost deploy --config` started → the last of the three instances settles a
//!    record with the new version; ten deploys alternating two handlers;
//! 2. the lease-table reads and writes per instance per hour that the fleet adds at steady state
//!    (`shardhost_fleet_table_requests_total` of each instance over a two-minute window).
//!
//! `tests/stack cargo bench -p shardhost --bench fleet`

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shardhost::status::fleet::FleetReport;
use shardhost::testing::version_of;
use shardhost_test_support::{HostToml, Subscription, guest, median, wait_until};

mod emulators;

const OWNERS: [&str; 3] = ["a", "b", "c"];
const DEPLOYS: usize = 10;
const STEADY: Duration = Duration::from_secs(120);

fn main() {
    let (kinesis, dynamo) = emulators::endpoints();
    let handlers = [guest("always_ack"), guest("always_drop")];
    let (stream, table) = emulators::stream_and_table(&kinesis, &dynamo, "fleet", 3);
    let dir = std::env::temp_dir().join(format!("shardhost-bench-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = |owner: Option<&str>| {
        let host = HostToml::kinesis(&kinesis).dynamodb_leases(&table, &dynamo);
        let host = match owner {
            Some(owner) => host.owner(owner).admin(),
            None => host,
        };
        let sub = Subscription::new("test", &stream, &handlers[0]).trim_horizon();
        let path = dir.join(format!("{}.toml", owner.unwrap_or("cli")));
        std::fs::write(&path, host.subscription(sub).render()).unwrap();
        path
    };
    let cli = config(None);
    let stop = Arc::new(AtomicBool::new(false));
    let producer = emulators::produce(&kinesis, &stream, stop.clone());
    let mut fleet: Vec<Instance> = OWNERS
        .iter()
        .map(|o| Instance::start(&dir, o, &config(Some(o))))
        .collect();
    // Set-up (not measured): the three instances balance the shards and each settles records.
    wait_until(
        "each instance to settle records",
        Duration::from_secs(180),
        || fleet.iter_mut().all(|i| !i.settled_since_mark().is_empty()),
    );

    let mut took = Vec::new();
    for n in 0..DEPLOYS {
        let handler = &handlers[(n + 1) % 2];
        // Back-to-back deploys would all start just after the slowest instance's poll; this
        // spreads them over the poll period (0, 0.74, 1.47, 0.21 ... s after the last rollout).
        std::thread::sleep(Duration::from_millis((n as u64 * 737) % 2000));
        let (cli_secs, secs) = rollout(&mut fleet, &cli, handler);
        println!(
            "deploy {n}: {secs:.2} s to the last instance's first record on the new version \
             (the deploy command itself: {cli_secs:.2} s)"
        );
        took.push(secs);
    }
    let max = took.iter().copied().fold(0.0, f64::max);
    println!(
        "rollout over {DEPLOYS} deploys: median {:.2} s, max {max:.2} s (target <= 5 s)",
        median(took)
    );

    let (reads, writes) = steady_state(&cli);
    println!(
        "fleet table requests per instance per hour at steady state: {reads:.0} reads, \
         {writes:.0} writes"
    );
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    drop(fleet);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deploys `handler` through the table; returns the seconds the deploy command took, and the
/// seconds from its start to the moment every instance has settled a record with it.
fn rollout(fleet: &mut [Instance], cli: &Path, handler: &Path) -> (f64, f64) {
    let version = version_of(&std::fs::read(handler).unwrap());
    let short = &version[..12];
    for i in fleet.iter_mut() {
        i.settled_since_mark();
    }
    let started = Instant::now();
    let out = shardhost(&["deploy", "--config", path(cli), "test", path(handler)]);
    assert!(out.status.success(), "deploy: {out:?}");
    let cli_secs = started.elapsed().as_secs_f64();
    let mut first: Vec<Option<Instant>> = vec![None; fleet.len()];
    wait_until(
        "every instance to run the new version",
        Duration::from_secs(60),
        || {
            for (i, seen) in fleet.iter_mut().zip(first.iter_mut()) {
                if seen.is_none() && i.settled_since_mark().iter().any(|h| h == short) {
                    *seen = Some(Instant::now());
                }
            }
            first.iter().all(Option::is_some)
        },
    );
    let last = first.into_iter().flatten().max().unwrap();
    (cli_secs, last.duration_since(started).as_secs_f64())
}

/// Reads and writes per instance per hour, from each instance's `/metrics`.
fn steady_state(cli: &Path) -> (f64, f64) {
    let out = shardhost(&["status", "--config", path(cli), "--json"]);
    assert!(out.status.success(), "status: {out:?}");
    let report: FleetReport = serde_json::from_slice(&out.stdout).unwrap();
    let admins: Vec<String> = report
        .instances
        .iter()
        .filter(|i| i.live)
        .filter_map(|i| i.heartbeat.admin.clone())
        .collect();
    assert_eq!(admins.len(), OWNERS.len(), "{report:#?}");
    let count = || -> Vec<(f64, f64)> { admins.iter().map(|a| fleet_requests(a)).collect() };
    let (before, started) = (count(), Instant::now());
    // The scenario: nothing happens but the fleet's own polling and heartbeats.
    std::thread::sleep(STEADY);
    let (after, hours) = (count(), started.elapsed().as_secs_f64() / 3600.0);
    let per = |pick: fn(&(f64, f64)) -> f64| {
        let total: f64 = before
            .iter()
            .zip(&after)
            .map(|(b, a)| pick(a) - pick(b))
            .sum();
        total / admins.len() as f64 / hours
    };
    (per(|c| c.0), per(|c| c.1))
}

/// (reads, writes) of `shardhost_fleet_table_requests_total` at one instance's admin API.
fn fleet_requests(admin: &str) -> (f64, f64) {
    let addr = admin.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(
        conn,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let value = |kind: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with("shardhost_fleet_table_requests_total{"))
            .filter(|l| l.contains(&format!("kind=\"{kind}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (value("read"), value("write"))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn shardhost(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// One `shardhost run` process whose JSON log is read as it grows.
struct Instance {
    child: Child,
    log: File,
    /// Bytes of the log read so far, and a partial last line.
    read: u64,
    partial: Vec<u8>,
}

impl Instance {
    fn start(dir: &Path, owner: &str, config: &PathBuf) -> Instance {
        let log = dir.join(format!("{owner}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_shardhost"))
            .args(["--log-format", "json", "run"])
            .arg(config)
            .env("SHARDHOST_LOG", "info,shardhost::dispatch=debug")
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Instance {
            child,
            log: File::open(&log).unwrap(),
            read: 0,
            partial: Vec::new(),
        }
    }

    /// The handler versions (12 hex digits) of the records settled since the last call.
    fn settled_since_mark(&mut self) -> Vec<String> {
        self.log.seek(SeekFrom::Start(self.read)).unwrap();
        self.read += self.log.read_to_end(&mut self.partial).unwrap() as u64;
        let complete = self
            .partial
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |end| end + 1);
        let lines: Vec<u8> = self.partial.drain(..complete).collect();
        String::from_utf8_lossy(&lines)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["sequence_number"].is_string())
            .filter_map(|v| Some(v["fields"]["handler"].as_str()?.to_owned()))
            .collect()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
