//! The peer of the drain benchmark (`host/benches/kinesis_drain.rs`): a ruststream-kinesis
//! service that acks every order of one stream from its trim horizon, with the crate's defaults
//! and its memory lease store, as its README writes a first service.
//!
//! `PEER_ENDPOINT=http://127.0.0.1:PORT PEER_STREAM=NAME PEER_RECORDS=N drain-peer run` — reads
//! until N records were handled, then prints what the bench reads (as the host's bench child
//! does: `drained in`, `cpu at drain`, `emulator cpu` when `KINESIS_TEST_PID` names
//! kinesis-mock) and exits.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ruststream_kinesis::prelude::*;
use serde::Deserialize;

/// The bench's orders; the handler needs only the id.
#[derive(Debug, Deserialize)]
struct Order {
    #[allow(dead_code)]
    id: u64,
}

/// Records the handler was called with.
static HANDLED: AtomicU64 = AtomicU64::new(0);

#[subscriber(
    KinesisStream::new(setting("PEER_STREAM")),
    start_at(KinesisPosition::horizon())
)]
async fn take(_order: &Order) -> HandlerOutcome {
    HANDLED.fetch_add(1, Ordering::Relaxed);
    HandlerOutcome::ack()
}

#[ruststream::app]
fn app() -> impl App {
    watch(
        setting("PEER_RECORDS")
            .parse()
            .expect("PEER_RECORDS is a number"),
    );
    RustStream::new(AppInfo::new("drain-peer", "0.1.0")).with_broker(
        KinesisBroker::new()
            .endpoint(setting("PEER_ENDPOINT"))
            .region("us-east-1")
            .test_credentials(),
        |b| {
            b.include(take);
        },
    )
}

fn setting(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// From now on, every 5 ms (as the host's bench child polls its status board): once `records`
/// were handled, prints the drain time and the CPU, and exits.
fn watch(records: u64) {
    static STARTED: OnceLock<()> = OnceLock::new();
    if STARTED.set(()).is_err() {
        return;
    }
    let emulator_at_start = emulator_cpu_seconds();
    let started = Instant::now();
    std::thread::spawn(move || {
        while HANDLED.load(Ordering::Relaxed) < records {
            std::thread::sleep(Duration::from_millis(5));
        }
        println!("drained in {:.3}s", started.elapsed().as_secs_f64());
        println!("cpu at drain: {:.4}", cpu_seconds());
        if let (Some(start), Some(now)) = (emulator_at_start, emulator_cpu_seconds()) {
            println!("emulator cpu: {:.2}", now - start);
        }
        std::process::exit(0);
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
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf only reads a system setting.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / per_second)
}
