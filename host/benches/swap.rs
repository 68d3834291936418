//! Swap latency: records flow into two shards of the embedded stream (about 10 000 a second)
//! while the handler is deployed 20 times through the admin API, alternating two versions
//! whose components are already compiled (cached). For each swap: the time from the deploy
//! call to the first record handled by the new version, and the longest gap between handled
//! records around it (against the longest gap with no swap).
//!
//! `cargo bench --bench swap`

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use shardhost::cli::admin_client::AdminClient;
use shardhost::config::Config;
use shardhost::source::StreamSource;
use shardhost::{Host, StartError};
use shardhost_test_support::{HostToml, Subscription, guest, median};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const SWAPS: usize = 20;

/// When each record was handled, and by which version.
type Handled = Arc<Mutex<Vec<(Instant, Arc<str>)>>>;

/// One swap: when the deploy call started, when it answered, the version deployed.
type Swap = (Instant, Instant, String);

fn main() {
    let ack = std::fs::read(guest("always_ack")).unwrap();
    let drop = std::fs::read(guest("always_drop")).unwrap();
    let dir = std::env::temp_dir().join(format!("shardhost-swap-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("handler.wasm"), &ack).unwrap();
    let rt = Runtime::new().unwrap();
    let handled: Handled = Arc::default();
    let Started {
        client,
        source,
        stop,
        running,
    } = start_host(&rt, &dir, handled.clone());
    // The load: 10 records every millisecond.
    let producing = CancellationToken::new();
    let producer = rt.spawn(produce(source, producing.clone()));
    let deploy = |bytes: &[u8]| {
        rt.block_on(client.send(Method::PUT, "/subscriptions/tagged/handler", bytes.to_vec()))
            .unwrap()
    };
    // Warm up: compile both versions once (the compile cache keeps them) and return to `ack`,
    // once the load has run 0.5 s.
    std::thread::sleep(Duration::from_millis(500));
    for bytes in [&drop, &ack] {
        assert_eq!(deploy(bytes).status, StatusCode::OK);
    }
    // The scenario: 1 s of load with no swap, the baseline of the longest gap.
    std::thread::sleep(Duration::from_millis(300));
    let quiet_from = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let quiet_to = Instant::now();
    let mut swaps = Vec::new();
    for i in 0..SWAPS {
        let bytes = if i % 2 == 0 { &drop } else { &ack };
        let started = Instant::now();
        let answer = deploy(bytes);
        let answered = Instant::now();
        assert_eq!(answer.status, StatusCode::OK);
        swaps.push((started, answered, shardhost::testing::version_of(bytes)));
        // The scenario: a swap every 200 ms.
        std::thread::sleep(Duration::from_millis(200));
    }
    producing.cancel();
    let produced = rt.block_on(producer).unwrap();
    // The scenario: the host drains what was produced before it stops.
    std::thread::sleep(Duration::from_millis(300));
    stop.cancel();
    rt.block_on(running).unwrap().unwrap();
    report(
        &handled.lock().unwrap(),
        &swaps,
        (quiet_from, quiet_to),
        produced,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A host running on the bench's runtime.
struct Started {
    client: AdminClient,
    source: Arc<dyn StreamSource>,
    stop: CancellationToken,
    running: JoinHandle<Result<(), StartError>>,
}

/// Starts a host on the embedded stream (2 shards, `handler.wasm` in `dir`) with the admin API,
/// noting every handled record in `handled`.
fn start_host(rt: &Runtime, dir: &Path, handled: Handled) -> Started {
    let config = HostToml::memory().admin().subscription(
        Subscription::new("tagged", "s", "handler.wasm")
            .create_if_missing(2)
            .trim_horizon()
            .batch(100)
            .poll_interval("5ms"),
    );
    std::fs::write(dir.join("shardhost.toml"), config.render()).unwrap();
    let config = Config::load(&dir.join("shardhost.toml")).unwrap();
    let mut host = rt.block_on(Host::prepare(config)).unwrap();
    // (when, version) of every handled record; one `Arc<str>` per run of a version.
    let last: Mutex<Option<Arc<str>>> = Mutex::new(None);
    host.on_outcome(Arc::new(move |s| {
        let mut last = last.lock().unwrap();
        let v = match &*last {
            Some(v) if **v == *s.version => v.clone(),
            _ => {
                let v: Arc<str> = Arc::from(s.version);
                *last = Some(v.clone());
                v
            }
        };
        handled.lock().unwrap().push((Instant::now(), v));
    }));
    let url = format!("http://{}", host.admin_addr().unwrap());
    let source = host.source();
    let stop = CancellationToken::new();
    let running = rt.spawn(host.run(stop.clone()));
    Started {
        client: AdminClient::new(&url, None).unwrap(),
        source,
        stop,
        running,
    }
}

/// Puts 10 records every millisecond until `producing` is cancelled; answers how many.
async fn produce(source: Arc<dyn StreamSource>, producing: CancellationToken) -> u64 {
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let mut i = 0u64;
    while !producing.is_cancelled() {
        tick.tick().await;
        for _ in 0..10 {
            source
                .put("s", &format!("k{}", i % 64), i.to_le_bytes().to_vec())
                .await
                .unwrap();
            i += 1;
        }
    }
    i
}

/// Prints the deploy calls' times, the latency to the first record on each new version and the
/// longest gaps between handled records (during a swap, and in the quiet window).
fn report(
    handled: &[(Instant, Arc<str>)],
    swaps: &[Swap],
    (quiet_from, quiet_to): (Instant, Instant),
    produced: u64,
) {
    let times: Vec<Instant> = handled.iter().map(|(t, _)| *t).collect();
    let max_gap = |from: Instant, to: Instant| -> Duration {
        let inside: Vec<_> = times.iter().filter(|t| **t >= from && **t <= to).collect();
        inside
            .windows(2)
            .map(|w| w[1].duration_since(*w[0]))
            .max()
            .unwrap_or_default()
    };
    let mut latencies = Vec::new();
    let mut gaps = Vec::new();
    let mut calls = Vec::new();
    for (started, answered, v) in swaps {
        let first = handled
            .iter()
            .find(|(t, ver)| t >= started && **ver == **v)
            .map(|(t, _)| *t)
            .expect("the new version handled records");
        latencies.push(first.duration_since(*started).as_secs_f64() * 1e3);
        calls.push(answered.duration_since(*started).as_secs_f64() * 1e3);
        gaps.push(max_gap(*started, first + Duration::from_millis(20)).as_secs_f64() * 1e3);
    }
    let quiet = max_gap(quiet_from, quiet_to).as_secs_f64() * 1e3;
    let max = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    println!("records produced: {produced}, handled: {}", handled.len());
    println!(
        "deploy call (validate + swap), ms: median {:.2}, max {:.2}",
        median(calls.clone()),
        max(&calls)
    );
    println!(
        "deploy call -> first record on the new version, ms: median {:.2}, max {:.2} (target <= 50)",
        median(latencies.clone()),
        max(&latencies)
    );
    println!(
        "longest gap between handled records during a swap, ms: median {:.2}, max {:.2}; with no swap: {:.2}",
        median(gaps.clone()),
        max(&gaps),
        quiet
    );
}
