//! Lease benchmarks against kinesis-mock + dynalite, default lease timings (ttl 10 s, renewals
//! every 3 s, listing every 10 s):
//! 1. failover: an instance dies (its runtime is dropped: no release, no final checkpoint, as
//!    with kill -9) → the survivor's first handled record from the dead one's shards;
//! 2. lease-table writes per shard per hour at steady state, with checkpoint coalescing
//!    (`checkpoint_every = "1s"`) and without (a write whenever the checkpoint moves).
//!
//! `tests/stack cargo bench -p shardhost --bench failover`

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use shardhost::Host;
use shardhost::config::Config;
use shardhost::lease::{
    Checkpoint, DynamoLeaseStore, DynamoOptions, Lease, LeaseError, LeaseKey, LeaseStore,
};
use shardhost_test_support::{HostToml, Subscription, guest, median, wait_until};
use tokio_util::sync::CancellationToken;

mod emulators;

fn main() {
    let (kinesis, dynamo) = emulators::endpoints();
    let pick = guest("pick");
    let env = Env {
        kinesis,
        dynamo,
        pick,
    };
    let runs: Vec<f64> = (0..3).map(|run| env.failover(run)).collect();
    for (i, r) in runs.iter().enumerate() {
        println!("failover run {i}: {r:.2} s from death to the survivor's first record");
    }
    println!(
        "failover median of 3: {:.2} s (target <= 12 s)",
        median(runs)
    );
    for (label, every) in [
        ("coalesced (checkpoint_every = 1s)", "1s"),
        ("every move (checkpoint_every = 1ms)", "1ms"),
    ] {
        let per_hour = env.writes_per_hour(every);
        println!("lease writes per shard per hour, {label}: {per_hour:.0}");
    }
}

struct Env {
    kinesis: String,
    dynamo: String,
    pick: PathBuf,
}

impl Env {
    fn config(&self, stream: &str, table: &str, owner: &str, checkpoint_every: &str) -> Config {
        let text = HostToml::kinesis(&self.kinesis)
            .owner(owner)
            .dynamodb_leases(table, &self.dynamo)
            .leases("balance", false)
            .leases("checkpoint_every", checkpoint_every)
            .subscription(
                Subscription::new("pick", stream, &self.pick)
                    .trim_horizon()
                    .batch(100),
            )
            .render();
        Config::parse(Path::new("bench.toml"), &text).unwrap()
    }

    fn failover(&self, run: usize) -> f64 {
        let (stream, table) =
            emulators::stream_and_table(&self.kinesis, &self.dynamo, &format!("fo{run}"), 2);
        let stop = Arc::new(AtomicBool::new(false));
        let producer = emulators::produce(&self.kinesis, &stream, stop.clone());
        // a: its own runtime, dropped without a clean stop to "kill" it.
        let rt_a = tokio::runtime::Runtime::new().unwrap();
        let host_a = rt_a
            .block_on(Host::prepare(self.config(&stream, &table, "a", "1s")))
            .unwrap();
        let status_a = host_a.status();
        rt_a.spawn(host_a.run(CancellationToken::new()));
        wait_until("a to settle 20 records", Duration::from_secs(60), || {
            status_a.totals("pick").settled >= 20
        });
        let rt_b = tokio::runtime::Runtime::new().unwrap();
        let mut host_b = rt_b
            .block_on(Host::prepare(self.config(&stream, &table, "b", "1s")))
            .unwrap();
        let first = Arc::new(std::sync::Mutex::new(None::<Instant>));
        let seen = first.clone();
        host_b.on_outcome(Arc::new(move |_| {
            seen.lock().unwrap().get_or_insert_with(Instant::now);
        }));
        let stop_b = CancellationToken::new();
        let b = rt_b.spawn(host_b.run(stop_b.clone()));
        // The scenario: b runs 3 s next to a, and handles nothing.
        std::thread::sleep(Duration::from_secs(3));
        assert!(
            first.lock().unwrap().is_none(),
            "b handled nothing while a was alive"
        );
        let died = Instant::now();
        rt_a.shutdown_background();
        // (The tap notes when the first record came: how often this polls does not matter.)
        wait_until("a failover", Duration::from_secs(60), || {
            first.lock().unwrap().is_some()
        });
        let took = first
            .lock()
            .unwrap()
            .unwrap()
            .duration_since(died)
            .as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        producer.join().unwrap();
        stop_b.cancel();
        rt_b.block_on(b).unwrap().unwrap();
        took
    }

    fn writes_per_hour(&self, checkpoint_every: &str) -> f64 {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let tag = format!("w{}", checkpoint_every.len());
        let (stream, table) = emulators::stream_and_table(&self.kinesis, &self.dynamo, &tag, 1);
        let stop = Arc::new(AtomicBool::new(false));
        let producer = emulators::produce(&self.kinesis, &stream, stop.clone());
        let config = self.config(&stream, &table, "w", checkpoint_every);
        let mut host = rt.block_on(Host::prepare(config)).unwrap();
        let dynamo = rt.block_on(DynamoLeaseStore::connect(DynamoOptions::local(
            &table,
            &self.dynamo,
        )));
        let counting = Arc::new(Counting {
            inner: Arc::new(dynamo),
            writes: AtomicU64::new(0),
        });
        host.use_lease_store(counting.clone());
        let stop_host = CancellationToken::new();
        let task = rt.spawn(host.run(stop_host.clone()));
        // The scenario: 3 s of warm-up, then 20 s of steady state counted.
        std::thread::sleep(Duration::from_secs(3));
        let (start_writes, started) = (counting.writes.load(Ordering::Relaxed), Instant::now());
        std::thread::sleep(Duration::from_secs(20));
        let writes = counting.writes.load(Ordering::Relaxed) - start_writes;
        let per_hour = writes as f64 * 3600.0 / started.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        producer.join().unwrap();
        stop_host.cancel();
        rt.block_on(task).unwrap().unwrap();
        per_hour
    }
}

/// Counts the writes that reach the table.
struct Counting {
    inner: Arc<dyn LeaseStore>,
    writes: AtomicU64,
}

impl Counting {
    fn count(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl LeaseStore for Counting {
    async fn acquire(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        self.count();
        self.inner.acquire(key, owner, ttl).await
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        self.count();
        self.inner.renew(lease, ttl).await
    }
    async fn checkpoint(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
    ) -> Result<Lease, LeaseError> {
        self.count();
        self.inner.checkpoint(lease, checkpoint).await
    }
    async fn mark_opened(&self, lease: &Lease, at_ms: u64) -> Result<Lease, LeaseError> {
        self.count();
        self.inner.mark_opened(lease, at_ms).await
    }
    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        self.inner.read(key).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.count();
        self.inner.release(lease).await
    }
}
