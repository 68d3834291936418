//! Lanes: one shard of the embedded stream, 2 000 records, a handler that waits 1 ms per record
//! (`sleep:1` in the scripted test guest, a WASI clock wait), read in batches of 100, with
//! `lanes` = 1, 2 and 4. Records per second, median of 3 runs each.
//!
//! `cargo bench --bench lanes`

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use shardhost::Host;
use shardhost::config::Config;
use shardhost_test_support::{HostToml, Subscription, guest, median};
use tokio_util::sync::CancellationToken;

const RECORDS: usize = 2_000;

fn run(dir: &Path, wasm: &Path, lanes: u32) -> f64 {
    let config = HostToml::memory().subscription(
        Subscription::new("slow", "s", wasm)
            .feed("feed.ndjson")
            .batch(100)
            .lanes(lanes)
            .poll_interval("5ms"),
    );
    std::fs::write(dir.join("shardhost.toml"), config.render()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = Config::load(&dir.join("shardhost.toml")).unwrap();
    let mut host = rt.block_on(Host::prepare(config)).unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    {
        let done = done.clone();
        host.on_outcome(Arc::new(move |_| {
            done.fetch_add(1, Ordering::Relaxed);
        }));
    }
    let stop = CancellationToken::new();
    let started = Instant::now();
    let running = rt.spawn(host.run(stop.clone()));
    // Polled every millisecond: the drain time is what is measured.
    while done.load(Ordering::Relaxed) < RECORDS {
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = started.elapsed();
    stop.cancel();
    rt.block_on(running).unwrap().unwrap();
    RECORDS as f64 / took.as_secs_f64()
}

fn main() {
    let wasm = guest("scripted");
    let dir = std::env::temp_dir().join(format!("shardhost-lanes-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let feed: Vec<String> = (0..RECORDS)
        .map(|i| format!(r#"{{"partition_key":"key-{}","data":"sleep:1"}}"#, i % 64))
        .collect();
    std::fs::write(dir.join("feed.ndjson"), feed.join("\n")).unwrap();
    let mut base = None;
    for lanes in [1, 2, 4] {
        let runs: Vec<f64> = (0..3).map(|_| run(&dir, &wasm, lanes)).collect();
        let median = median(runs.clone());
        let speedup = median / *base.get_or_insert(median);
        println!(
            "lanes = {lanes}: {median:>7.0} rec/s (runs {:.0}, {:.0}, {:.0}), {speedup:.2}x lanes = 1",
            runs[0], runs[1], runs[2]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
