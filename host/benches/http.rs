//! Outbound HTTP from a handler (issue 26): requests per second from one handler to a server
//! on 127.0.0.1 through `wasi:http`, against a native hyper client doing the same in this
//! process, and the latency a request adds to a call (median, p99).
//!
//! `cargo bench -p shardhost --bench http` (builds the Rust conformance guest first). Each
//! request of either side opens its own connection (the host keeps none between requests), so
//! the native client does too; one request at a time, then 16 at once. Prints the figures;
//! paste them into BENCHMARKS.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use shardhost::capability::http::{HttpGrant, Origin};
use shardhost::capability::state::{StateGrant, StateStoreKind};
use shardhost::config::{Limits, WasiGrants};
use shardhost::handler::{CallContext, Handler, HandlerFactory};
use shardhost::record::{BatchInfo, BatchOutcome, Record};
use shardhost::testing::Runtime;
use shardhost_test_support::{HttpServer, guest, median};

const SECONDS: Duration = Duration::from_secs(3);
const RUNS: usize = 3;

fn record(i: usize, key: &str, data: String) -> Record {
    Record {
        partition_key: Arc::from(key),
        sequence_number: format!("4959{:052}", i + 1),
        sub_sequence_number: 0,
        approximate_arrival_timestamp: 1_700_000_000_000,
        data: data.into_bytes(),
    }
}

fn info() -> BatchInfo {
    BatchInfo {
        stream: "bench".into(),
        shard_id: "shardId-000000000000".into(),
        millis_behind_latest: Some(0),
        attempt: 1,
    }
}

/// Calls `records` over and over for [`SECONDS`]: requests per second and each call's time.
async fn calls(handler: &mut dyn Handler, records: &[Record]) -> (f64, Vec<f64>) {
    let started = Instant::now();
    let mut times = Vec::new();
    while started.elapsed() < SECONDS {
        let t = Instant::now();
        let answer = handler.handle(&info(), records).await.unwrap();
        times.push(t.elapsed().as_secs_f64());
        assert!(
            !matches!(answer, BatchOutcome::All(_)),
            "the conformance handler answers each"
        );
    }
    let requests = (times.len() * records.len()) as f64;
    (requests / started.elapsed().as_secs_f64(), times)
}

/// GET `url` with a fresh connection, reading the whole body.
async fn native_get(addr: String, path: &'static str) {
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header("host", &addr)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert!(response.status().is_success());
    response.into_body().collect().await.unwrap();
}

/// Native requests per second, `at_once` at a time (each on a task of its own).
async fn native(addr: &str, path: &'static str, at_once: usize) -> f64 {
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < SECONDS {
        let all: Vec<_> = (0..at_once)
            .map(|_| tokio::spawn(native_get(addr.to_owned(), path)))
            .collect();
        for request in all {
            request.await.unwrap();
        }
        n += at_once;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64) * 0.99) as usize % v.len()]
}

fn main() {
    let server = HttpServer::start();
    let origin = server.origin();
    let addr = origin.trim_start_matches("http://").to_owned();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let runtime = Runtime::new(None, false).unwrap();
    let grants = WasiGrants::default()
        .with(HttpGrant {
            allow: vec![Origin::parse(&origin).unwrap()],
            timeout: Duration::from_secs(5),
            max_body: 1 << 20,
            max_in_flight: 16,
            ca_file: None,
            allow_private: false,
        })
        // The conformance handler keeps state too: it loads only with a grant.
        .with(StateGrant {
            store: StateStoreKind::Memory,
            ttl: None,
            buckets: Vec::new(),
            namespace: "bench/http/".to_owned(),
            max_in_flight: 16,
            timeout: Duration::from_secs(2),
            commit: Default::default(),
        });
    let handler: Arc<dyn HandlerFactory> = rt
        .block_on(runtime.load_file(&guest("conformance"), Limits::default(), &grants))
        .unwrap();
    let ctx = CallContext {
        subscription: Arc::from("bench"),
        stream: Arc::from("bench"),
        shard_id: Arc::from("shardId-000000000000"),
        publisher: None,
        delivered: None,
        metrics: None,
        log_budget: Default::default(),
        effects: None,
        pending: None,
    };
    let get = |i| record(i, "http", format!("{{\"url\":\"{origin}/status/200\"}}"));
    let one = vec![get(0)];
    let sixteen: Vec<Record> = (0..16).map(get).collect();
    let none = vec![record(0, "ack", String::new())];
    println!(
        "machine: {} cores; {RUNS} runs of {SECONDS:?} each, medians",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let mut rows: Vec<(String, f64, f64)> = Vec::new();
    for (name, records, at_once) in [("1 at a time", &one, 1), ("16 at once", &sixteen, 16)] {
        let mut wasm = Vec::new();
        let mut nat = Vec::new();
        for _ in 0..RUNS {
            let mut instance = rt.block_on(handler.instantiate(&ctx)).unwrap();
            wasm.push(rt.block_on(calls(instance.as_mut(), records)).0);
            nat.push(rt.block_on(native(&addr, "/status/200", at_once)));
        }
        rows.push((name.to_owned(), median(wasm), median(nat)));
    }
    println!(
        "{:<14}{:>16}{:>16}{:>8}",
        "requests", "wasi:http req/s", "native req/s", "ratio"
    );
    for (name, wasm, nat) in &rows {
        println!("{name:<14}{wasm:>16.0}{nat:>16.0}{:>8.2}", wasm / nat);
    }
    let mut instance = rt.block_on(handler.instantiate(&ctx)).unwrap();
    let (_, with) = rt.block_on(calls(instance.as_mut(), &one));
    let (_, without) = rt.block_on(calls(instance.as_mut(), &none));
    let ms = |s: f64| s * 1000.0;
    println!(
        "a call with one request: median {:.3} ms, p99 {:.3} ms; without: median {:.3} ms, p99 {:.3} ms; \
         added: median {:.3} ms",
        ms(median(with.clone())),
        ms(p99(with.clone())),
        ms(median(without.clone())),
        ms(p99(without.clone())),
        ms(median(with) - median(without)),
    );
}
