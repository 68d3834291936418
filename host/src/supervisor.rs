//! The supervisor turns a validated [`Config`] into a running host: it loads every handler and
//! record file first (so a bad config or component never starts half a host), then creates the
//! streams, puts the feeds in, and runs one [`Coordinator`] per subscription until told to stop.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Arc;
use tracing::Instrument;

use tokio_util::sync::CancellationToken;

use crate::admin::{AdminServer, AdminState, BindError};
use crate::config::{Config, KinesisEndpoint, LeaseStoreKind};
use crate::coordinator::{Coordinator, LeaseSettings, TaskFailed, panic_message};
use crate::deploy::Deployer;
use crate::dispatch::{OutcomeTap, SubscriptionPlan};
use crate::envelope::EnvelopeKey;
use crate::feed::{self, FeedError, FeedRecord};
use crate::handler::{HandlerFactory, HandlerSlot};
use crate::lease::{DynamoLeaseStore, LeaseStore, MemoryLeaseStore};
use crate::metrics::Metrics;
use crate::publish::Publisher;
use crate::source::kinesis::KinesisStreams;
use crate::source::memory::MemoryStreams;
use crate::source::{SourceError, StreamSource};
use crate::status::{Failure, StatusBoard};
use crate::wasm::{LoadError, Runtime, short_version};

/// Why a host could not start. Nothing has been started when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("subscription `{subscription}`: {source}")]
    Handler {
        subscription: String,
        source: LoadError,
    },
    #[error("subscription `{subscription}`: {source}")]
    Feed {
        subscription: String,
        source: FeedError,
    },
    #[error("subscription `{subscription}`: {source}")]
    Stream {
        subscription: String,
        source: SourceError,
    },
    #[error(transparent)]
    Runtime(LoadError),
    #[error("[leases] {0}")]
    Leases(crate::lease::LeaseError),
    #[error("[host] retry_key: {0}")]
    EnvelopeKey(#[source] crate::envelope::key::KeyError),
    #[error(transparent)]
    Admin(BindError),
    /// A subscription's task failed while running; the host stopped.
    #[error("the host stopped because a task failed: {0}")]
    Failed(#[source] crate::coordinator::TaskFailed),
}

/// Everything a host needs, loaded and checked, with nothing running yet.
pub struct Host {
    config: Config,
    owner: Arc<str>,
    source: Arc<dyn StreamSource>,
    store: Arc<dyn LeaseStore>,
    subscriptions: Vec<Prepared>,
    status: StatusBoard,
    metrics: Arc<Metrics>,
    /// Swaps handlers (and holds the runtime, whose epoch ticker must live while the host runs).
    deployer: Arc<Deployer>,
    admin: Option<AdminServer>,
}

struct Prepared {
    plan: Arc<SubscriptionPlan>,
    create: Option<u32>,
    feed: Vec<FeedRecord>,
    /// Streams the subscription writes to.
    outputs: Vec<String>,
}

/// The owner id of this process: the configured one, else hostname + a random suffix.
pub fn owner_id(config: &Config) -> String {
    if let Some(id) = &config.host.owner_id {
        return id.clone();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "shardhost".to_owned());
    let suffix = RandomState::new().hash_one(std::process::id()) as u32;
    format!("{host}-{suffix:08x}")
}

/// The configured lease store, checked (a DynamoDB table must exist with the right key), and the
/// key that authenticates envelopes.
async fn lease_store(
    config: &Config,
    cache: Option<&Path>,
) -> Result<(Arc<dyn LeaseStore>, EnvelopeKey), StartError> {
    match &config.leases.store {
        LeaseStoreKind::Memory => Ok((
            Arc::new(MemoryLeaseStore::new()),
            envelope_key(config, cache, None).await?,
        )),
        LeaseStoreKind::Dynamo {
            table,
            endpoint,
            region,
            test_credentials,
        } => {
            let store = DynamoLeaseStore::connect(
                table,
                endpoint.as_deref(),
                region.as_deref(),
                *test_credentials,
                config.leases.legacy_stream.as_deref(),
            )
            .await;
            store.check_table().await.map_err(StartError::Leases)?;
            let key = envelope_key(config, cache, Some(&store)).await?;
            Ok((Arc::new(store), key))
        }
    }
}

/// The key that authenticates this fleet's retry copies and dead letters, found as a host of
/// `config` finds it (for tools such as `shardhost dead-letters`).
pub async fn fleet_envelope_key(config: &Config) -> Result<EnvelopeKey, StartError> {
    let cache = config
        .host
        .cache_dir
        .clone()
        .or_else(Runtime::default_cache_dir);
    lease_store(config, cache.as_deref()).await.map(|(_, k)| k)
}

/// See [`crate::envelope::key`]: the configured secret; else the lease table's key; else the
/// cache directory's key file.
async fn envelope_key(
    config: &Config,
    cache: Option<&Path>,
    table: Option<&DynamoLeaseStore>,
) -> Result<EnvelopeKey, StartError> {
    if let Some(key) = EnvelopeKey::configured(config.host.retry_key.as_deref()) {
        return Ok(key);
    }
    if let Some(store) = table {
        let bytes = store.envelope_key().await.map_err(StartError::Leases)?;
        return Ok(EnvelopeKey::from_bytes(bytes));
    }
    match cache {
        Some(dir) => EnvelopeKey::in_dir(dir).map_err(StartError::EnvelopeKey),
        None => {
            tracing::warn!(
                "no cache directory: retry copies are authenticated with a key of this process only (set [host] retry_key)"
            );
            EnvelopeKey::random().map_err(StartError::EnvelopeKey)
        }
    }
}

impl Host {
    /// Loads every handler and feed of the config and makes sure every stream exists (creating
    /// those with `create_if_missing`). Fails on the first part that cannot load; nothing reads yet.
    pub async fn prepare(config: Config) -> Result<Host, StartError> {
        let cache = config
            .host
            .cache_dir
            .clone()
            .or_else(Runtime::default_cache_dir);
        let (store, envelopes) = lease_store(&config, cache.as_deref()).await?;
        let envelopes = Arc::new(envelopes);
        let runtime =
            Arc::new(Runtime::new(cache, config.meters_fuel()).map_err(StartError::Runtime)?);
        let metrics = Arc::new(Metrics::new());
        let mut deployer = Deployer::new(runtime.clone(), metrics.clone());
        let source: Arc<dyn StreamSource> = match config.kinesis.endpoint {
            KinesisEndpoint::Memory => Arc::new(MemoryStreams::new()),
            _ => Arc::new(KinesisStreams::connect(&config.kinesis).await),
        };
        let mut subscriptions = Vec::new();
        for s in &config.subscriptions {
            let component = runtime
                .load_file(&s.handler, s.limits, &s.wasi)
                .await
                .map_err(|source| StartError::Handler {
                    subscription: s.name.clone(),
                    source,
                })?;
            tracing::info!(
                subscription = %s.name, handler = %s.handler.display(),
                version = short_version(component.version()), "handler loaded"
            );
            let feed = match &s.feed {
                Some(path) => feed::load(path).map_err(|source| StartError::Feed {
                    subscription: s.name.clone(),
                    source,
                })?,
                None => Vec::new(),
            };
            let slot = Arc::new(HandlerSlot::new(component as Arc<dyn HandlerFactory>));
            deployer.add(
                &s.name,
                slot.clone(),
                s.limits,
                s.wasi.clone(),
                s.handler.clone(),
                s.watch,
            );
            subscriptions.push(Prepared {
                plan: Arc::new(SubscriptionPlan {
                    name: Arc::from(s.name.as_str()),
                    stream: Arc::from(s.stream.as_str()),
                    read_limit: s.read_limit,
                    call_batch: s.batch,
                    checkpoint_every: config.leases.checkpoint_every,
                    poll_interval: s.poll_interval,
                    start_at: s.start_at,
                    handler: slot,
                    lanes: s.lanes as usize,
                    in_flight: crate::dispatch::InFlight {
                        records: s.limits.in_flight_records,
                        bytes: s.limits.in_flight_bytes,
                    },
                    retry: s.retry.clone(),
                    publisher: (!s.publish_to.is_empty()).then(|| {
                        Arc::new(Publisher::new(
                            source.clone(),
                            &s.name,
                            s.publish_to.clone(),
                        ))
                    }),
                    envelopes: envelopes.clone(),
                    metrics: metrics.clone(),
                    tap: None,
                }),
                create: s.create_if_missing,
                feed,
                // Where retry copies, dead letters and publishes go: created alongside the
                // subscription's stream when that one may be created, else required.
                outputs: s
                    .retry
                    .iter()
                    .flat_map(|r| {
                        let own = r.own_retry_stream.then_some(&r.retry_stream);
                        own.into_iter().chain([&r.dead_letter])
                    })
                    .chain(&s.publish_to)
                    .cloned()
                    .collect(),
            });
        }
        // Every stream must exist (or be created) before anything reads.
        for s in &subscriptions {
            let outputs = s.outputs.iter().map(|o| (o.as_str(), s.create.map(|_| 1)));
            for (stream, create) in std::iter::once((&*s.plan.stream, s.create)).chain(outputs) {
                source
                    .ensure_stream(stream, create)
                    .await
                    .map_err(|source| StartError::Stream {
                        subscription: s.plan.name.to_string(),
                        source,
                    })?;
            }
        }
        let owner: Arc<str> = Arc::from(owner_id(&config).as_str());
        let deployer = Arc::new(deployer);
        let status = StatusBoard::new();
        let admin = match &config.admin {
            Some(admin) => {
                let state = AdminState {
                    owner: owner.clone(),
                    subscriptions: config
                        .subscriptions
                        .iter()
                        .map(|s| (s.name.clone(), s.stream.clone()))
                        .collect(),
                    deployer: deployer.clone(),
                    status: status.clone(),
                    metrics: metrics.clone(),
                };
                Some(
                    AdminServer::bind(admin, state)
                        .await
                        .map_err(StartError::Admin)?,
                )
            }
            None => None,
        };
        Ok(Host {
            owner,
            source,
            store,
            subscriptions,
            status,
            metrics,
            deployer,
            admin,
            config,
        })
    }

    /// The live status of every shard.
    pub fn status(&self) -> StatusBoard {
        self.status.clone()
    }

    /// Where the admin API listens, when it is on.
    pub fn admin_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.as_ref().map(AdminServer::local_addr)
    }

    /// Swaps handlers (what the admin API's deploy and rollback call).
    pub fn deployer(&self) -> Arc<Deployer> {
        self.deployer.clone()
    }

    /// The streams this host reads (e.g. to put records into the embedded stream).
    pub fn source(&self) -> Arc<dyn StreamSource> {
        self.source.clone()
    }

    /// Every metric of this host.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Calls `tap` with every record's outcome, on every subscription. Call before `run`.
    pub fn on_outcome(&mut self, tap: OutcomeTap) {
        for s in &mut self.subscriptions {
            Arc::get_mut(&mut s.plan)
                .expect("plans are shared only once the host runs")
                .tap = Some(tap.clone());
        }
    }

    /// Keeps leases and checkpoints in `store` instead of the configured one (e.g. to restart a
    /// host in process over the checkpoints of an earlier one). Call before `run`.
    pub fn use_lease_store(&mut self, store: Arc<dyn LeaseStore>) {
        self.store = store;
    }

    /// Reads, publishes and puts through `source` instead of the configured stream service (e.g.
    /// one wrapped to enforce a service's limits in a test). The streams the config names must
    /// already exist in it. Call before `run`.
    pub fn use_source(&mut self, source: Arc<dyn StreamSource>) {
        for (s, c) in self
            .subscriptions
            .iter_mut()
            .zip(&self.config.subscriptions)
        {
            let plan = Arc::get_mut(&mut s.plan).expect("plans are shared only once the host runs");
            if plan.publisher.is_some() {
                plan.publisher = Some(Arc::new(Publisher::new(
                    source.clone(),
                    &c.name,
                    c.publish_to.clone(),
                )));
            }
        }
        self.source = source;
    }

    /// Where this host keeps its leases and checkpoints.
    pub fn lease_store(&self) -> Arc<dyn LeaseStore> {
        self.store.clone()
    }

    /// Runs every subscription until `stop` fires; then every shard finishes its batch, writes
    /// its checkpoint and releases its lease before this returns.
    pub async fn run(mut self, stop: CancellationToken) -> Result<(), StartError> {
        for s in &self.subscriptions {
            for r in &s.feed {
                self.source
                    .put(&s.plan.stream, &r.partition_key, r.data.clone())
                    .await
                    .map_err(|source| StartError::Stream {
                        subscription: s.plan.name.to_string(),
                        source,
                    })?;
            }
            if !s.feed.is_empty() {
                tracing::info!(subscription = %s.plan.name, records = s.feed.len(), stream = %s.plan.stream, "feed put into the embedded stream");
            }
        }
        let timings = LeaseSettings {
            ttl: self.config.leases.ttl,
            renew_every: self.config.leases.renew_every,
            list_every: self.config.leases.list_every,
            balance: self.config.leases.balance,
        };
        tracing::info!(owner = %self.owner, subscriptions = self.subscriptions.len(), "host running");
        // The admin API and the file watcher stop when the shards have (a deploy during the
        // stop still lands in the slot and is simply not used).
        let side_stop = CancellationToken::new();
        let mut side = tokio::task::JoinSet::new();
        if let Some(admin) = self.admin.take() {
            side.spawn(admin.serve(side_stop.clone()));
        }
        if self.deployer.watches() {
            side.spawn(self.deployer.clone().watch(side_stop.clone()));
        }
        // A failed subscription stops the whole host (gracefully), so that its supervisor
        // restarts it: `stop` for the caller's stop, `stop_all` for both.
        let stop_all = stop.child_token();
        let mut tasks = tokio::task::JoinSet::new();
        let mut names = std::collections::HashMap::new();
        for s in &self.subscriptions {
            let coordinator = Coordinator {
                plan: s.plan.clone(),
                source: self.source.clone(),
                store: self.store.clone(),
                owner: self.owner.clone(),
                timings,
                status: self.status.clone(),
            };
            let span = tracing::info_span!("subscription", subscription = %s.plan.name);
            let task = tasks.spawn(coordinator.run(stop_all.clone()).instrument(span));
            names.insert(task.id(), s.plan.name.to_string());
        }
        let mut failed = None;
        while let Some(done) = tasks.join_next_with_id().await {
            let failure = match done {
                Ok((_, Ok(()))) => continue,
                Ok((_, Err(failure))) => failure,
                Err(e) => {
                    let subscription = names.get(&e.id()).cloned().unwrap_or_default();
                    let reason = format!("coordinator failed: {}", panic_message(e));
                    tracing::error!(subscription, "{reason}; the host stops");
                    let failure = Failure {
                        subscription,
                        shard: None,
                        reason,
                    };
                    self.status.fail(failure.clone());
                    TaskFailed(failure)
                }
            };
            stop_all.cancel();
            failed.get_or_insert(failure);
        }
        side_stop.cancel();
        while side.join_next().await.is_some() {}
        if let Some(failure) = failed {
            tracing::error!("host stopped after a failure: {failure}");
            return Err(StartError::Failed(failure));
        }
        tracing::info!("host stopped: checkpoints written, leases released");
        Ok(())
    }
}
