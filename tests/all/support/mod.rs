//! Shared by the behaviour tests: builds the guest components once per test process and runs
//! hosts in process.
#![allow(dead_code)]

pub mod dynamo;
pub mod fault_proxy;
pub mod fleet;
pub mod kinesis;
pub mod native;
pub mod proxy;
pub mod puts;
pub mod reads;

use std::fmt::Display;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use shardhost::Host;
use shardhost::config::Config;
use shardhost::status::StatusBoard;
use tokio_util::sync::CancellationToken;

pub use shardhost_test_support::{
    HostToml, HttpServer, Subscription, closed_origin, guest, root, wait_until, wait_until_async,
    wait_until_else,
};

/// A scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("shardhost-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One NDJSON line with text data.
pub fn text_record(partition_key: &str, text: &str) -> String {
    serde_json::json!({ "partition_key": partition_key, "data": text }).to_string()
}

/// A partition key that the embedded stream puts on shard `shard` of `shards`.
pub fn key_on_shard(shard: usize, shards: usize, tag: &str) -> String {
    let width = u128::MAX / shards as u128;
    (0..)
        .map(|i| format!("{tag}-{i}"))
        .find(|k| {
            let h = shardhost::testing::hash_key(k);
            ((h / width) as usize).min(shards - 1) == shard
        })
        .unwrap()
}

/// A host running in process on its own runtime.
pub struct Running {
    pub status: StatusBoard,
    pub leases: std::sync::Arc<dyn shardhost::lease::LeaseStore>,
    /// Where the admin API listens, when the config turns it on.
    pub admin: Option<std::net::SocketAddr>,
    pub deployer: std::sync::Arc<shardhost::Deployer>,
    pub source: std::sync::Arc<dyn shardhost::source::StreamSource>,
    pub host_metrics: std::sync::Arc<shardhost::Metrics>,
    stop: CancellationToken,
    rt: tokio::runtime::Runtime,
    done: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Prepares and starts a host from config text written into `dir`.
    pub fn start(dir: &Scratch, config: impl Display) -> Running {
        Running::start_with(dir, config, |_| {})
    }

    /// As `start`, letting `customize` change the host before it runs.
    pub fn start_with(
        dir: &Scratch,
        config: impl Display,
        customize: impl FnOnce(&mut Host),
    ) -> Running {
        init_logs();
        let path = dir.write("shardhost.toml", config.to_string());
        let config = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut host = rt
            .block_on(Host::prepare(config))
            .unwrap_or_else(|e| panic!("{e}"));
        customize(&mut host);
        let status = host.status();
        let leases = host.lease_store();
        let admin = host.admin_addr();
        let deployer = host.deployer();
        let source = host.source();
        let host_metrics = host.metrics();
        let stop = CancellationToken::new();
        let token = stop.clone();
        let done = rt.spawn(async move { host.run(token).await.unwrap() });
        Running {
            status,
            leases,
            admin,
            deployer,
            source,
            host_metrics,
            stop,
            rt,
            done: Some(done),
        }
    }

    /// Waits (up to 60 s) until `pred` holds for the status board.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&StatusBoard) -> bool) {
        wait_until_else(
            what,
            Duration::from_secs(60),
            || pred(&self.status),
            || format!("{:#?}", self.status.snapshot()),
        );
    }

    /// The host's metrics, as `/metrics` serves them.
    pub fn metrics(&self) -> String {
        self.host_metrics.encode()
    }

    /// A client for this host's admin API, sending `token`.
    pub fn admin(&self, token: Option<&str>) -> shardhost::cli::admin_client::AdminClient {
        let addr = self.admin.expect("the config turns the admin API on");
        shardhost::cli::admin_client::AdminClient::new(
            &format!("http://{addr}"),
            token.map(str::to_owned),
        )
        .unwrap()
    }

    /// Puts a record into a stream of the host's source.
    pub fn put(&self, stream: &str, partition_key: &str, data: Vec<u8>) {
        self.rt
            .block_on(self.source.put(stream, partition_key, data))
            .unwrap();
    }

    /// Every record of shard 0 of a stream of the host's embedded source, oldest first.
    pub fn read_stream(&self, stream: &str) -> Vec<shardhost::record::Record> {
        self.rt.block_on(async {
            let mut reader = self
                .source
                .open(
                    stream,
                    "shardId-000000000000",
                    &shardhost::source::StartPosition::TrimHorizon,
                )
                .await
                .unwrap();
            reader.read(10_000).await.unwrap().records
        })
    }

    /// Runs a future on the host's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Stops gracefully and waits for the host to finish.
    pub fn stop(self) -> StatusBoard {
        self.stop_keep().status.clone()
    }

    /// Stops gracefully; keeps the runtime so the lease store can still be read.
    pub fn stop_keep(mut self) -> Running {
        self.stop.cancel();
        let done = self.done.take().unwrap();
        self.rt.block_on(done).unwrap();
        self
    }
}

fn init_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
    });
}

/// The kinesis-mock endpoint that `tests/stack` started. Under CI a missing endpoint fails the
/// test; elsewhere the test is skipped with a notice.
pub fn kinesis_endpoint() -> Option<String> {
    emulator("KINESIS_TEST_ENDPOINT")
}

/// The same kinesis-mock over TLS (`https://`, HTTP/2 through ALPN), and the test CA that signed
/// its certificate (`tests/tls/ca.pem`).
pub fn kinesis_tls_endpoint() -> Option<(String, String)> {
    Some((
        emulator("KINESIS_TEST_TLS_ENDPOINT")?,
        emulator("KINESIS_TEST_CA_FILE")?,
    ))
}

/// The kinesis-mock whose clock jumps 301 s on each SIGUSR2 (expiring every shard iterator), and
/// the pid to signal; one test at a time may use it.
pub fn kinesis_clock_endpoint() -> Option<(String, u32)> {
    let endpoint = emulator("KINESIS_CLOCK_TEST_ENDPOINT")?;
    let pid = emulator("KINESIS_CLOCK_TEST_PID")?.parse().expect("a pid");
    Some((endpoint, pid))
}

/// The kinesis-mock that outage tests may pause, and the pid of its process (one test at a time).
pub fn kinesis_fault_endpoint() -> Option<(String, u32)> {
    let endpoint = emulator("KINESIS_FAULT_TEST_ENDPOINT")?;
    let pid = emulator("KINESIS_FAULT_TEST_PID")?.parse().expect("a pid");
    Some((endpoint, pid))
}

/// The dynalite that outage tests may pause, the pid of its process, and the turn of the test
/// that holds it (one test at a time).
pub fn dynamodb_fault_endpoint() -> Option<(String, u32, std::sync::MutexGuard<'static, ()>)> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let endpoint = emulator("DYNAMODB_FAULT_TEST_ENDPOINT")?;
    let pid = emulator("DYNAMODB_FAULT_TEST_PID")?.parse().expect("a pid");
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    Some((endpoint, pid, turn))
}

/// The moto that outage tests may pause, and the pid of its process (one test: the chaos run
/// of `committed_state`).
pub fn dynamodb_txn_fault_endpoint() -> Option<(String, u32)> {
    let endpoint = emulator("DYNAMODB_TXN_FAULT_TEST_ENDPOINT")?;
    let pid = emulator("DYNAMODB_TXN_FAULT_TEST_PID")?
        .parse()
        .expect("a pid");
    Some((endpoint, pid))
}

/// The dynalite endpoint that `tests/stack` started (same rules).
pub fn dynamodb_endpoint() -> Option<String> {
    emulator("DYNAMODB_TEST_ENDPOINT")
}

/// The moto server `tests/stack` started: a DynamoDB that implements TransactWriteItems (same
/// rules).
pub fn dynamodb_txn_endpoint() -> Option<String> {
    emulator("DYNAMODB_TXN_TEST_ENDPOINT")
}

fn emulator(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if std::env::var_os("CI").is_some() => {
            panic!("{var} is not set: run the tests through `tests/stack cargo test --workspace`")
        }
        _ => {
            eprintln!("skipped: {var} is not set (run the tests through `tests/stack`)");
            None
        }
    }
}

/// A name no other test (or earlier run against the same emulator) uses.
pub fn unique(tag: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    format!("{tag}-{}-{t}-{n}", std::process::id())
}

/// Records every outcome a host settles, in order.
#[derive(Clone, Default)]
pub struct Outcomes(pub std::sync::Arc<std::sync::Mutex<Vec<Seen>>>);

/// One settled record.
#[derive(Clone, Debug)]
pub struct Seen {
    pub subscription: String,
    pub shard_id: String,
    pub partition_key: String,
    pub sequence_number: String,
    pub sub_sequence_number: u32,
    /// The data as text (lossy).
    pub data: String,
    pub bytes: Vec<u8>,
    pub outcome: shardhost::record::Outcome,
    /// The handler version that answered.
    pub version: String,
}

impl Outcomes {
    pub fn tap(&self) -> shardhost::OutcomeTap {
        let seen = self.0.clone();
        std::sync::Arc::new(move |s: &shardhost::Settled<'_>| {
            seen.lock().unwrap().push(Seen {
                subscription: s.subscription.to_owned(),
                shard_id: s.shard_id.to_owned(),
                partition_key: s.record.partition_key.to_string(),
                sequence_number: s.record.sequence_number.clone(),
                sub_sequence_number: s.record.sub_sequence_number,
                data: String::from_utf8_lossy(&s.record.data).into_owned(),
                bytes: s.record.data.clone(),
                outcome: s.outcome,
                version: s.version.to_owned(),
            })
        })
    }

    pub fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// The sum of the samples of `name` (OpenMetrics text) whose labels contain every one of
/// `labels` (`key="value"`).
pub fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}
