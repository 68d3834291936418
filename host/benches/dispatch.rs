//! Records per second through the dispatcher: the shipping handler as wasm vs the same logic as
//! a native Rust handler in this binary, with a batch of 500 and with one record per call.
//!
//! `cargo bench -p shardhost --bench dispatch` (builds the example guest first). Prints medians;
//! paste them into BENCHMARKS.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use shardhost::config::{Limits, StartAt, WasiGrants};
use shardhost::handler::{CallContext, CallError, Handler, HandlerFactory};
use shardhost::lease::MemoryLeaseStore;
use shardhost::record::{BatchInfo, BatchOutcome, Outcome, Record};
use shardhost::status::StatusBoard;
use shardhost::testing::MemoryStreams;
use shardhost::testing::Runtime;
use shardhost::testing::SubscriptionPlan;
use shardhost::testing::{Coordinator, LeaseSettings};
use shardhost_test_support::{guest, median};
use tokio_util::sync::CancellationToken;

const CARRIERS: [&str; 2] = ["dhl", "ups"];

#[derive(Deserialize)]
#[allow(dead_code)]
struct Shipment {
    id: u64,
    address: String,
    carrier: String,
}

/// The shipping example's logic (`examples/shipping/src/lib.rs`), natively, with the same log
/// lines through tracing.
struct NativeShip;

fn ship(record: &Record) -> Outcome {
    let s = match serde_json::from_slice::<Shipment>(&record.data) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(
                "not a shipment, retired: sequence_number={} error={e}",
                record.sequence_number
            );
            return Outcome::Drop;
        }
    };
    if s.address.is_empty() {
        tracing::warn!("shipment without an address retired: id={}", s.id);
        Outcome::Drop
    } else if !CARRIERS.contains(&s.carrier.as_str()) {
        tracing::warn!(
            "unknown carrier, shipment held: id={} carrier={}",
            s.id,
            s.carrier
        );
        Outcome::Retry
    } else {
        tracing::info!("shipment booked: id={} carrier={}", s.id, s.carrier);
        Outcome::Ack
    }
}

#[async_trait::async_trait]
impl Handler for NativeShip {
    fn version(&self) -> &str {
        "native"
    }
    async fn handle(
        &mut self,
        _: &BatchInfo,
        records: &[Record],
    ) -> Result<BatchOutcome, CallError> {
        Ok(BatchOutcome::Each(records.iter().map(ship).collect()))
    }
}

struct NativeFactory;

#[async_trait::async_trait]
impl HandlerFactory for NativeFactory {
    fn version(&self) -> String {
        "native".into()
    }
    async fn instantiate(&self, _: &CallContext) -> Result<Box<dyn Handler>, CallError> {
        Ok(Box::new(NativeShip))
    }
}

/// One drain of `n` preloaded shipments through a coordinator; answers records/s.
fn drain(factory: Arc<dyn HandlerFactory>, n: usize, batch: usize, call_batch: usize) -> f64 {
    drain_shadowed(factory, None, n, batch, call_batch).0
}

/// As [`drain`], with `shadow` (if any) in shadow of `factory`; answers records/s and the
/// shadow's batches compared and dropped.
fn drain_shadowed(
    factory: Arc<dyn HandlerFactory>,
    shadow: Option<Arc<dyn HandlerFactory>>,
    n: usize,
    batch: usize,
    call_batch: usize,
) -> (f64, u64, u64) {
    let slot = Arc::new(shardhost::slot::HandlerSlot::new(factory));
    if let Some(candidate) = shadow {
        let shadow = shardhost::shadow::Shadow::new(candidate, Vec::new());
        slot.set_shadow(Some(Arc::new(shadow)));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let streams = MemoryStreams::new();
    streams.create("shipments", 1);
    for i in 0..n {
        // ~100 bytes of JSON; every 50th has an unknown carrier (held), every 40th no address.
        let carrier = if i % 50 == 0 {
            "fedex"
        } else {
            CARRIERS[i % 2]
        };
        let address = if i % 40 == 0 {
            ""
        } else {
            "1 Main Street, Springfield"
        };
        let data = format!(
            r#"{{"id":{i},"address":"{address}","carrier":"{carrier}","note":"fragile, keep dry"}}"#
        );
        streams
            .put_now(
                "shipments",
                &format!("customer-{}", i % 97),
                data.into_bytes(),
            )
            .unwrap();
    }
    let status = StatusBoard::new();
    let coordinator = Coordinator {
        plan: Arc::new(SubscriptionPlan {
            name: Arc::from("bench"),
            stream: Arc::from("shipments"),
            rows: Default::default(),
            read_limit: batch,
            call_batch,
            checkpoint_every: Duration::from_secs(1),
            poll_interval: Duration::from_millis(1),
            start_at: StartAt::TrimHorizon,
            handler: slot.clone(),
            metrics: Arc::new(shardhost::Metrics::new()),
            lanes: 1,
            in_flight: Default::default(),
            retry: None,
            in_place_max_delay: shardhost::config::defaults::IN_PLACE_MAX_DELAY,
            publisher: None,
            envelopes: Arc::new(
                shardhost::testing::envelope::EnvelopeKey::from_bytes([0; 32]).into(),
            ),
            subscriptions: Arc::new([Arc::from("bench")]),
            role: Default::default(),
            commit_state: false,
            state_conflicts: Default::default(),
            tap: None,
        }),
        source: Arc::new(streams),
        store: Arc::new(MemoryLeaseStore::new()),
        owner: Arc::from("bench"),
        timings: LeaseSettings {
            ttl: Duration::from_secs(10),
            renew_every: Duration::from_secs(3),
            list_every: Duration::from_secs(10),
            balance: false,
        },
        status: status.clone(),
    };
    let stop = CancellationToken::new();
    let started = Instant::now();
    let task = rt.spawn(coordinator.run(stop.clone()));
    // Polled every 200 µs: the drain time is what is measured.
    while status.totals("bench").delivered < n as u64 {
        std::thread::sleep(Duration::from_micros(200));
    }
    let elapsed = started.elapsed();
    stop.cancel();
    rt.block_on(task).unwrap().unwrap();
    let (compared, dropped) = slot.shadow().1.map_or((0, 0), |s| {
        let r = s.report();
        (r.batches_compared, r.batches_dropped)
    });
    (n as f64 / elapsed.as_secs_f64(), compared, dropped)
}

fn main() {
    // SHARDHOST_BENCH_GUEST=path.wasm measures another guest against the same native handler.
    let wasm_path = match std::env::var_os("SHARDHOST_BENCH_GUEST") {
        Some(p) => p.into(),
        None => guest("ship"),
    };
    let runtime = Runtime::new(None, false).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let wasm: Arc<dyn HandlerFactory> = rt
        .block_on(runtime.load_file(&wasm_path, Limits::default(), &may_book()))
        .unwrap();
    let native: Arc<dyn HandlerFactory> = Arc::new(NativeFactory);
    // `cargo bench --bench dispatch -- wasm` runs only the wasm side (for profiling).
    // A second word keeps only the modes whose label contains it: `-- wasm reads`.
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let only = words.first().cloned();
    let mode = words.get(1).cloned();
    let runs = 5;
    println!(
        "machine: {} cores; {} runs each, medians",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        runs
    );
    for (label, batch, call_batch, n) in [
        ("batch of 500", 500, 500, 200_000),
        ("reads of 500, 1 record per call", 500, 1, 200_000),
        ("batch = 1 (read and call)", 1, 1, 50_000),
    ] {
        if mode.as_deref().is_some_and(|m| !label.contains(m)) {
            continue;
        }
        let side = |f: &Arc<dyn HandlerFactory>, name: &str| {
            if only.as_deref().is_some_and(|o| o != name) {
                return f64::NAN;
            }
            median(
                (0..runs)
                    .map(|_| drain(f.clone(), n, batch, call_batch))
                    .collect(),
            )
        };
        let w = side(&wasm, "wasm");
        let nat = side(&native, "native");
        println!(
            "{label:<32} wasm {w:>10.0} rec/s   native {nat:>10.0} rec/s   wasm/native {:.2}",
            w / nat
        );
    }
    // A shadow of the same version on the batch-of-500 path: what the current version pays.
    if only.as_deref().is_none_or(|o| o == "wasm") && mode.as_deref().is_none_or(|m| m == "shadow")
    {
        let (batch, n) = (500, 200_000);
        let plain = median(
            (0..runs)
                .map(|_| drain(wasm.clone(), n, batch, batch))
                .collect(),
        );
        let mut compared = Vec::new();
        let shadowed = median(
            (0..runs)
                .map(|_| {
                    let (rate, c, d) =
                        drain_shadowed(wasm.clone(), Some(wasm.clone()), n, batch, batch);
                    compared.push((c, d));
                    rate
                })
                .collect(),
        );
        println!(
            "{:<32} wasm {plain:>10.0} rec/s   with a shadow {shadowed:>10.0} rec/s   shadowed/plain {:.2}   batches compared/dropped per run {compared:?}",
            "batch of 500, shadow (same)",
            shadowed / plain
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(hwm) = status.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
        println!("peak RSS of this process: {}", hwm.trim());
    }
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
