//! `shardhost.toml` → a typed, validated [`Config`].
//!
//! Parsing never stops at the first problem: [`Config::load`] returns every problem it finds,
//! each naming the file, the line and the key, so `shardhost check` can list them all at once.
//! A config with any problem never starts a host.
//!
//! A subscription's grants (`[subscription.http]`, `.state`, …) are read by the capabilities
//! that own them (`capability/`), through [`GrantTable`]: config walks the file and hands each
//! its table, never naming one. `Config::load` and `Config::parse` (defined beside the
//! capabilities' registry, `capability/registry.rs`) read with every registered capability.

pub mod defaults;
mod grants;
mod parse;
mod show;
mod units;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::lease::LeaseRows;

pub(crate) use grants::GrantTable;
pub use grants::{Grant, GrantValue, Grants, TableContext, WasiGrants};
pub use parse::{MAX_CALL_TIMEOUT, MAX_MEMORY, MIN_MEMORY, timestamp_millis};
pub(crate) use parse::{ca, walk};
pub use units::{parse_duration, parse_size, show_size};

/// The most records one GetRecords call answers.
pub const MAX_READ_RECORDS: usize = 10_000;

/// The whole configuration of one host process.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file this config was read from.
    pub path: PathBuf,
    pub host: HostConfig,
    pub kinesis: KinesisConfig,
    pub leases: LeaseConfig,
    /// Used with a DynamoDB lease table only.
    pub fleet: FleetConfig,
    pub admin: Option<AdminConfig>,
    pub subscriptions: Vec<SubscriptionConfig>,
}

/// `[host]` (its `Debug` hides `retry_key` and `retry_keys_previous`)
#[derive(Clone)]
pub struct HostConfig {
    /// Default "shardhost".
    pub name: String,
    /// Default: hostname + random suffix, chosen at start (see `supervisor`).
    pub owner_id: Option<String>,
    /// Where compiled components are cached. Default: `$SHARDHOST_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/shardhost`, else `$HOME/.cache/shardhost`.
    pub cache_dir: Option<PathBuf>,
    /// The compile cache's size cap, in bytes; past it, the entries used longest ago go.
    pub cache_max: u64,
    /// The secret retry copies and dead letters are authenticated with (16 characters or more);
    /// see `envelope::key` for where the key comes from without it.
    pub retry_key: Option<String>,
    /// Earlier secrets (`retry_keys_previous`): copies made under them are still opened, none is
    /// made under them. Empty: `SHARDHOST_RETRY_KEY_PREVIOUS`, when set.
    pub retry_keys_previous: Vec<String>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            name: "shardhost".to_owned(),
            owner_id: None,
            cache_dir: None,
            cache_max: defaults::CACHE_MAX,
            retry_key: None,
            retry_keys_previous: Vec::new(),
        }
    }
}

/// `[kinesis] endpoint`
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KinesisEndpoint {
    /// Omitted: the AWS default chain (incl. `AWS_ENDPOINT_URL_KINESIS`).
    Aws,
    /// `"memory"`: the embedded in-process stream.
    Memory,
    /// An `http://` or `https://` URL.
    Url(String),
}

/// `[kinesis]`
#[derive(Clone, Debug)]
pub struct KinesisConfig {
    pub endpoint: KinesisEndpoint,
    pub region: Option<String>,
    pub test_credentials: bool,
    /// A CA certificate (PEM file) trusted besides the platform's roots, for an endpoint whose
    /// certificate a private CA signed (`[kinesis] ca_file`).
    pub ca_file: Option<PathBuf>,
}

/// `[leases] store`
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseStoreKind {
    Memory,
    Dynamo {
        table: String,
        endpoint: Option<String>,
        /// `[leases] region`, else `[kinesis] region`.
        region: Option<String>,
        /// `[leases] test_credentials`, else `[kinesis] test_credentials`.
        test_credentials: bool,
    },
}

/// `[leases]`
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub store: LeaseStoreKind,
    pub legacy_stream: Option<String>,
    /// Default 10 s.
    pub ttl: Duration,
    /// Default 3 s; must be shorter than `ttl`.
    pub renew_every: Duration,
    /// Default 10 s.
    pub list_every: Duration,
    /// Checkpoint writes are coalesced per shard: at most one per this period (default 1 s),
    /// and always on release, on SHARD_END and on stop.
    pub checkpoint_every: Duration,
    /// Hand extra shards to instances holding fewer than their fair share (default true).
    pub balance: bool,
}

/// `[fleet]`: how instances sharing a DynamoDB lease table follow its desired handler versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetConfig {
    /// How often the desired versions are read (default 2 s).
    pub poll: Duration,
    /// How often the heartbeat is written (default 10 s), and at once after every change.
    pub heartbeat: Duration,
    /// The largest component a desired row may name (default 64 MiB); a larger one is refused
    /// before anything is fetched.
    pub max_component_size: u64,
    /// `trusted_keys` and the keys in `trusted_keys_file`: with any, only desired versions
    /// signed by one of them run. Empty: any writer of the lease table may deploy.
    pub trusted_keys: crate::signing::TrustedKeys,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            poll: defaults::FLEET_POLL,
            heartbeat: defaults::FLEET_HEARTBEAT,
            max_component_size: defaults::MAX_COMPONENT_SIZE,
            trusted_keys: Default::default(),
        }
    }
}

/// `[admin]` (its `Debug` hides `token`)
#[derive(Clone)]
pub struct AdminConfig {
    pub listen: SocketAddr,
    /// Required on every request when set (always set when `listen` is off loopback).
    pub token: Option<String>,
    /// The largest handler upload accepted; larger ones are answered 413. Default 50 MiB.
    pub max_upload: u64,
}

/// `start_at`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartAt {
    Latest,
    TrimHorizon,
    /// Milliseconds since the Unix epoch.
    Timestamp(u64),
}

/// `[subscription.limits]`
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of linear memory an instance may grow to. Default 64 MiB.
    pub memory: u64,
    /// Per handler call; a call past it is a trap. Default 5 s.
    pub timeout: Duration,
    /// Instructions' worth of fuel per handler call; a call that burns it all is a trap.
    /// Default: no fuel metering (the timeout still holds).
    pub fuel: Option<u64>,
    /// Records a shard holds in memory: the batch the handler works on, the read ahead and the
    /// records waiting for a retry-after delay. Reads ask for no more than the room left, and
    /// when the waiting records alone reach it the shard stops reading until they drain.
    /// Default 20 000 (two full reads).
    pub in_flight_records: usize,
    /// The same bound in bytes of record data. Default 64 MiB.
    pub in_flight_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: defaults::MEMORY,
            timeout: defaults::TIMEOUT,
            fuel: None,
            in_flight_records: defaults::IN_FLIGHT_RECORDS,
            in_flight_bytes: defaults::IN_FLIGHT_BYTES,
        }
    }
}

/// One `[[subscription]]`.
#[derive(Clone, Debug)]
pub struct SubscriptionConfig {
    pub name: String,
    pub stream: String,
    /// Resolved against the config file's directory.
    pub handler: PathBuf,
    /// Where `handler` stands in the config, for error messages about the component.
    pub handler_at: Location,
    /// Reload the handler (validated like a deploy) when its file changes on disk.
    pub watch: bool,
    /// Embedded stream only: an NDJSON record file put in at start (resolved like `handler`).
    pub feed: Option<PathBuf>,
    /// Shards to create the stream with when it does not exist; `None`: a missing stream is an
    /// error. The embedded stream always creates ([`defaults::EMBEDDED_SHARDS`] unless set).
    pub create_if_missing: Option<u32>,
    /// Where a shard without a checkpoint starts. Default latest; trim_horizon for a fed
    /// embedded stream (so the feed is read).
    pub start_at: StartAt,
    /// Records per handler call, 1..=10000. Default [`defaults::BATCH`].
    pub batch: usize,
    /// The most records one read (GetRecords) asks for, 1..=10000. Default
    /// [`defaults::READ_LIMIT`], the service maximum. The read size adapts below it (small while
    /// the shard keeps up, growing while the read limits pace a backlog), and the shard's
    /// in-flight bound may leave less room.
    pub read_limit: usize,
    /// The wait after a read that found the shard caught up; an empty shard is read less often,
    /// up to 4 × this. Default [`defaults::POLL_INTERVAL`].
    pub poll_interval: Duration,
    /// How shards are read: polling (GetRecords) or enhanced fan-out (SubscribeToShard).
    pub read: ReadMode,
    /// Parallel lanes per shard (1..=64, default 1); one partition key stays in one lane.
    pub lanes: u32,
    /// `lease_key` as set; `None`: decided by how many subscriptions read the stream.
    pub lease_key: Option<LeaseRows>,
    /// Whose lease rows the subscription reads through: `lease_key`, else the shared
    /// `stream:shard` rows when it is the config's only subscription on its stream, else its own
    /// `stream:shard#SUBSCRIPTION`.
    pub lease_rows: LeaseRows,
    /// The retry cap (`max_attempts`, `dead_letter`, `retry_stream`); `None`: retry holds the
    /// record.
    pub retry: Option<RetryPolicy>,
    /// Without a retry cap, a record answered `retry-after` is called again in its shard after
    /// the delay, each further wait twice the last, at most this long (`in_place_max_delay`).
    /// Default [`defaults::IN_PLACE_MAX_DELAY`].
    pub in_place_max_delay: Duration,
    /// The streams a handler may `publish` to.
    pub publish_to: Vec<String>,
    pub limits: Limits,
    pub wasi: WasiGrants,
}

/// How a subscription reads its shards (`read`, `consumer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// GetRecords: each shard's 5 reads and 2 MB a second are shared by every polling consumer
    /// of the stream; records wait up to `poll_interval`.
    Polling,
    /// SubscribeToShard through the stream consumer of this name (registered at start when
    /// missing): its own 2 MB a second per shard, records pushed as they arrive.
    FanOut { consumer: String },
}

impl ReadMode {
    /// `polling`, or `fan-out (consumer NAME)`: as `check` and the status show it.
    pub fn describe(&self) -> String {
        match self {
            ReadMode::Polling => "polling".to_owned(),
            ReadMode::FanOut { consumer } => format!("fan-out (consumer {consumer})"),
        }
    }
}

/// `max_attempts`, `dead_letter` and `retry_stream` of a subscription: with a cap, retry
/// publishes a copy of the record (attempt + 1) and settles the original.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Deliveries a record gets; after the last one it goes to `dead_letter`.
    pub max_attempts: u32,
    /// Where retry copies go (the subscription's stream unless `retry_stream` is set).
    pub retry_stream: String,
    pub dead_letter: String,
    /// `retry_stream` was set (a stream of its own, created or required beside the
    /// subscription's).
    pub own_retry_stream: bool,
}

/// A place in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    /// 1-based; `None` when the problem has no single line (e.g. a missing key in the root table).
    pub line: Option<usize>,
    /// The dotted key, e.g. `subscription[0].limits.memory`.
    pub key: String,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file.display(), line, self.key),
            None => write!(f, "{}: {}", self.file.display(), self.key),
        }
    }
}

/// One thing wrong with a config, where it is and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub at: Location,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// Every problem found in a config.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        writeln!(
            f,
            "{n} problem{} in the config:",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            writeln!(f, "  {p}")?;
        }
        Ok(())
    }
}

impl Config {
    /// Reads and validates a config file, each `[[subscription]]`'s grants read by `tables`
    /// (`Config::load`, in `capability/`, gives every capability's). Checks that handler and
    /// feed files exist, but does not load components (see `wasm::Runtime::load`).
    pub(crate) fn load_with(
        path: &Path,
        tables: &[&dyn GrantTable],
    ) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            problems: vec![Problem {
                at: Location {
                    file: path.to_owned(),
                    line: None,
                    key: "(file)".into(),
                },
                message: format!("cannot read the config: {e}"),
            }],
        })?;
        Config::parse_with(path, &text, &|name| std::env::var(name), tables)
    }

    /// Validates config text as if read from `path` (relative paths resolve against its
    /// directory), its `${VAR}` references looked up by `env` (`std::env::var`'s shape) and
    /// each `[[subscription]]`'s grants read by `tables`.
    pub(crate) fn parse_with(
        path: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Result<String, std::env::VarError>,
        tables: &[&dyn GrantTable],
    ) -> Result<Config, ConfigError> {
        parse::parse(path, text, env, tables)
    }

    /// Whether any subscription sets a fuel limit (the engine then meters fuel).
    pub fn meters_fuel(&self) -> bool {
        self.subscriptions.iter().any(|s| s.limits.fuel.is_some())
    }

    /// The subscription with this name.
    pub fn subscription(&self, name: &str) -> Option<&SubscriptionConfig> {
        self.subscriptions.iter().find(|s| s.name == name)
    }
}
