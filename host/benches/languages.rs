//! The shipping handler in Rust, Python and JavaScript: its component's size, the first
//! (uncached) compile and a load from the compile cache, the cache entry's size, and the peak
//! RSS of a process that compiles it. Each language runs in a child process of its own so that
//! its peak RSS is its own. Throughput: the dispatch bench with `SHARDHOST_BENCH_GUEST`.
//!
//! `cargo bench -p shardhost --bench languages` (builds the Python and JavaScript components
//! with their build scripts first).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use shardhost::config::{Limits, WasiGrants};
use shardhost::testing::Runtime;
use shardhost_test_support::{guest, root};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--compile") {
        compile_in_this_process(Path::new(&args[i + 1]));
        return;
    }
    println!(
        "{:<12}{:>12}{:>16}{:>14}{:>14}{:>12}",
        "handler", "component", "first compile", "from cache", "cache entry", "peak RSS"
    );
    for (name, path) in [
        ("rust", guest("ship")),
        ("python", built("examples/shipping/python")),
        ("javascript", built("examples/shipping/js")),
    ] {
        let out = Command::new(std::env::current_exe().unwrap())
            .arg("--compile")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let size = std::fs::metadata(&path).unwrap().len();
        println!(
            "{name:<12}{:>12}{}",
            mib(size),
            String::from_utf8_lossy(&out.stdout).trim_end()
        );
    }
}

/// Runs `DIR/build` (a no-op when the component is up to date); answers `DIR/ship.wasm`.
fn built(dir: &str) -> PathBuf {
    let dir = root().join(dir);
    let status = Command::new(dir.join("build")).status().unwrap();
    assert!(status.success(), "{}/build failed", dir.display());
    dir.join("ship.wasm")
}

/// In the child: compile with an empty cache, then load from it; print the figures.
fn compile_in_this_process(path: &Path) {
    let cache = std::env::temp_dir().join(format!("shardhost-bench-lang-{}", std::process::id()));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let load = |runtime: &Runtime| {
        let started = Instant::now();
        rt.block_on(runtime.load_file(path, Limits::default(), &may_book()))
            .unwrap();
        started.elapsed().as_secs_f64()
    };
    let first = load(&Runtime::new(Some(cache.clone()), false).unwrap());
    let cached = load(&Runtime::new(Some(cache.clone()), false).unwrap());
    let entry: u64 = std::fs::read_dir(cache.join("components"))
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    let _ = std::fs::remove_dir_all(&cache);
    println!(
        "{:>14.2} s{:>12.3} s{:>14}{:>12}",
        first,
        cached,
        mib(entry),
        mib(peak_rss())
    );
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// This process's peak resident set (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// The shipping example imports wasi:http and wasi:keyvalue (it books once per shipment when its
/// config has a `carrier_url`): it loads only with both grants; without `carrier_url` it sends nothing.
fn may_book() -> WasiGrants {
    WasiGrants::default()
        .with(shardhost::capability::http::HttpGrant {
            allow: vec![shardhost::capability::http::Origin::parse("http://127.0.0.1:9").unwrap()],
            timeout: std::time::Duration::from_secs(5),
            max_body: 1 << 20,
            max_in_flight: 16,
            ca_file: None,
            allow_private: false,
        })
        .with(shardhost::capability::state::StateGrant {
            store: shardhost::capability::state::StateStoreKind::Memory,
            ttl: None,
            buckets: Vec::new(),
            namespace: "bench/ship/".to_owned(),
            max_in_flight: 64,
            timeout: std::time::Duration::from_secs(2),
            commit: Default::default(),
        })
}
