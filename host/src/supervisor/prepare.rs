//! Preparing a host: every handler and feed loaded, every stream there, the admin port bound,
//! before anything reads.

use std::sync::Arc;

use super::stores::{lease_store, owner_id};
use super::{Host, StartError};
use crate::admin::{AdminServer, AdminState, SubscriptionInfo};
use crate::config::{Config, KinesisEndpoint, LeaseStoreKind, ReadMode, SubscriptionConfig};
use crate::deploy::{Deployer, StartFailed};
use crate::dispatch::SubscriptionPlan;
use crate::envelope::EnvelopeKeys;
use crate::feed::{self, FeedRecord};
use crate::fleet::last_ran::LastRan;
use crate::fleet::{Fleet, FleetPolicy};
use crate::fleet_table::FleetTable;
use crate::handler::HandlerFactory;
use crate::metrics::Metrics;
use crate::publish::Publisher;
use crate::slot::HandlerSlot;
use crate::source::StreamSource;
use crate::source::kinesis::KinesisStreams;
use crate::source::memory::MemoryStreams;
use crate::status::StatusBoard;
use crate::wasm::Runtime;

/// A subscription ready to run.
pub(super) struct Prepared {
    pub plan: Arc<SubscriptionPlan>,
    /// Where its shards are read when not from the host's source: through a fan-out
    /// consumer.
    pub reads: Option<Arc<dyn StreamSource>>,
    create: Option<u32>,
    pub feed: Vec<FeedRecord>,
    /// Streams the subscription writes to.
    outputs: Vec<String>,
}

impl Prepared {
    /// The reader of the subscription's retry copies, when they go to a `retry_stream` of
    /// their own (polled, whatever the subscription reads by; nothing more to create).
    fn retry_copies(&self) -> Option<Prepared> {
        let plan = self.plan.retry_copies()?;
        Some(Prepared {
            plan: Arc::new(plan),
            reads: None,
            create: None,
            feed: Vec::new(),
            outputs: Vec::new(),
        })
    }
}

/// What every subscription of a host shares while it is prepared.
struct Parts {
    deployer: Deployer,
    source: Arc<dyn StreamSource>,
    envelopes: Arc<EnvelopeKeys>,
    /// Every subscription of the config: a retry copy naming none of them is logged.
    names: Arc<[Arc<str>]>,
    metrics: Arc<Metrics>,
    checkpoint_every: std::time::Duration,
    fleet: Option<Arc<Fleet>>,
}

impl Parts {
    /// Loads a subscription's handler and feed, and plans its shard workers.
    async fn subscription(&mut self, s: &SubscriptionConfig) -> Result<Prepared, StartError> {
        let start = self.deployer.first_handler(s).await.map_err(|e| match e {
            StartFailed::Handler(source) => StartError::Handler {
                subscription: s.name.clone(),
                source,
            },
            StartFailed::Fleet(source) => StartError::Fleet {
                subscription: s.name.clone(),
                source: Box::new(source),
            },
        })?;
        let feed = match &s.feed {
            Some(path) => feed::load(path).map_err(|source| StartError::Feed {
                subscription: s.name.clone(),
                source,
            })?,
            None => Vec::new(),
        };
        let slot = Arc::new(HandlerSlot::new(start.component as Arc<dyn HandlerFactory>));
        self.deployer.add(s, slot.clone());
        self.deployer
            .started_at(&s.name, start.applied, start.refusal, start.bad_row);
        let publisher = (!s.publish_to.is_empty()).then(|| {
            Arc::new(Publisher::new(
                self.source.clone(),
                &s.name,
                s.publish_to.clone(),
            ))
        });
        let plan = SubscriptionPlan {
            name: Arc::from(s.name.as_str()),
            stream: Arc::from(s.stream.as_str()),
            rows: s.lease_rows,
            read_limit: s.read_limit,
            call_batch: s.batch,
            checkpoint_every: self.checkpoint_every,
            poll_interval: s.poll_interval,
            start_at: s.start_at,
            handler: slot,
            lanes: s.lanes as usize,
            in_flight: crate::dispatch::InFlight {
                records: s.limits.in_flight_records,
                bytes: s.limits.in_flight_bytes,
            },
            retry: s.retry.clone(),
            in_place_max_delay: s.in_place_max_delay,
            publisher,
            envelopes: self.envelopes.clone(),
            subscriptions: self.names.clone(),
            metrics: self.metrics.clone(),
            tap: None,
            role: crate::dispatch::Role::Records,
            commit_state: s
                .wasi
                .get::<crate::state::StateGrant>()
                .is_some_and(|g| g.commit == crate::state::Commit::WithCheckpoint),
            state_conflicts: Default::default(),
        };
        // Where retry copies, dead letters and publishes go: created alongside the
        // subscription's stream when that one may be created, else required.
        let outputs = s
            .retry
            .iter()
            .flat_map(|r| {
                let own = r.own_retry_stream.then_some(&r.retry_stream);
                own.into_iter().chain([&r.dead_letter])
            })
            .chain(&s.publish_to)
            .cloned()
            .collect();
        Ok(Prepared {
            plan: Arc::new(plan),
            reads: None,
            create: s.create_if_missing,
            feed,
            outputs,
        })
    }
}

/// The admin API, bound, when the config asks for one.
async fn admin_server(
    config: &Config,
    owner: &Arc<str>,
    deployer: &Arc<Deployer>,
    status: &StatusBoard,
    metrics: &Arc<Metrics>,
    fleet: &Option<Arc<Fleet>>,
    embedded: Option<MemoryStreams>,
) -> Result<Option<AdminServer>, StartError> {
    let Some(admin) = &config.admin else {
        return Ok(None);
    };
    let state = AdminState {
        owner: owner.clone(),
        subscriptions: config
            .subscriptions
            .iter()
            .map(|s| SubscriptionInfo {
                name: s.name.clone(),
                stream: s.stream.clone(),
                read: s.read.describe(),
            })
            .collect(),
        deployer: deployer.clone(),
        status: status.clone(),
        metrics: metrics.clone(),
        fleet: fleet.clone(),
        embedded,
    };
    let bound = AdminServer::bind(admin, state).await;
    bound.map(Some).map_err(StartError::Admin)
}

/// With a DynamoDB lease table: the fleet on its rows (counted in `metrics`, said at start
/// whether deploys must be signed), and where the fleet version each subscription runs is kept
/// on disk.
fn fleet_of(
    config: &Config,
    table: Option<FleetTable>,
    cache: Option<&std::path::Path>,
    metrics: &Metrics,
) -> (Option<Arc<Fleet>>, Option<LastRan>) {
    let policy = FleetPolicy {
        max_component_size: config.fleet.max_component_size,
        trusted: config.fleet.trusted_keys.clone(),
    };
    let fleet = table.map(|table| {
        let fleet = Fleet::new(table, &config.host.name).with_policy(policy);
        Arc::new(fleet.counted_in(metrics))
    });
    if fleet.is_some() {
        warn_if_unsigned(config);
    }
    let last_ran = match (&config.leases.store, cache) {
        (LeaseStoreKind::Dynamo { table, .. }, Some(cache)) => {
            Some(LastRan::new(cache, table, &config.host.name))
        }
        _ => None,
    };
    (fleet, last_ran)
}

/// Says at start that, without trusted keys, any writer of the lease table can deploy.
fn warn_if_unsigned(config: &Config) {
    if config.fleet.trusted_keys.is_empty() {
        tracing::warn!(
            "[fleet] trusted_keys is not set: anyone who can write the lease table can deploy a \
             handler to every instance (see docs/security.md, \"Signed deploys\")"
        );
    } else {
        tracing::info!(
            keys = config.fleet.trusted_keys.len(),
            "fleet deploys must be signed by a key in [fleet] trusted_keys"
        );
    }
}

/// Makes sure every stream exists (or is created) before anything reads.
async fn ensure_streams(
    source: &dyn StreamSource,
    subscriptions: &[Prepared],
) -> Result<(), StartError> {
    for s in subscriptions {
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
    Ok(())
}

/// Gives each fan-out subscription its consumer (registered when missing, waited for until
/// ACTIVE) to read through.
async fn fan_out(
    kinesis: &KinesisStreams,
    config: &Config,
    subscriptions: &mut [Prepared],
) -> Result<(), StartError> {
    for (s, c) in subscriptions.iter_mut().zip(&config.subscriptions) {
        let ReadMode::FanOut { consumer } = &c.read else {
            continue;
        };
        let arn = kinesis
            .consumer(&c.stream, consumer)
            .await
            .map_err(|source| StartError::Stream {
                subscription: c.name.clone(),
                source,
            })?;
        tracing::info!(subscription = %c.name, consumer, "reading by enhanced fan-out");
        s.reads = Some(Arc::new(kinesis.fan_out(consumer, &arn)));
    }
    Ok(())
}

impl Host {
    /// Loads every handler and feed of the config and makes sure every stream exists (creating
    /// those with `create_if_missing`). Fails on the first part that cannot load; nothing reads yet.
    pub async fn prepare(config: Config) -> Result<Host, StartError> {
        let cache = Runtime::cache_dir_of(&config.host);
        let stores = lease_store(&config, cache.as_deref()).await?;
        let state = config
            .subscriptions
            .iter()
            .filter_map(|s| s.wasi.get::<crate::capability::state::StateGrant>());
        crate::state::check_tables(state)
            .await
            .map_err(StartError::State)?;
        let owner: Arc<str> = Arc::from(owner_id(&config).as_str());
        let metrics = Arc::new(Metrics::new());
        let (fleet, last_ran) = fleet_of(&config, stores.fleet, cache.as_deref(), &metrics);
        let runtime = Arc::new(
            Runtime::for_host(&config.host, config.meters_fuel()).map_err(StartError::Runtime)?,
        );
        let kinesis = match config.kinesis.endpoint {
            KinesisEndpoint::Memory => None,
            _ => Some(KinesisStreams::connect(&config.kinesis).await),
        };
        let embedded = kinesis.is_none().then(MemoryStreams::new);
        let source: Arc<dyn StreamSource> = match (&kinesis, &embedded) {
            (Some(kinesis), _) => Arc::new(kinesis.clone()),
            (None, embedded) => Arc::new(embedded.clone().unwrap_or_default()),
        };
        let mut deployer = Deployer::new(runtime, metrics.clone());
        if let Some(fleet) = &fleet {
            deployer.join_fleet(fleet.clone(), &owner, last_ran);
        }
        let mut parts = Parts {
            deployer,
            source,
            envelopes: Arc::new(stores.envelopes),
            names: config
                .subscriptions
                .iter()
                .map(|s| Arc::from(s.name.as_str()))
                .collect(),
            metrics,
            checkpoint_every: config.leases.checkpoint_every,
            fleet,
        };
        let mut subscriptions = Vec::new();
        for s in &config.subscriptions {
            subscriptions.push(parts.subscription(s).await?);
        }
        ensure_streams(parts.source.as_ref(), &subscriptions).await?;
        if let Some(kinesis) = &kinesis {
            fan_out(kinesis, &config, &mut subscriptions).await?;
        }
        // A subscription whose copies go to a stream of their own reads that stream too.
        let copies: Vec<Prepared> = subscriptions
            .iter()
            .filter_map(Prepared::retry_copies)
            .collect();
        subscriptions.extend(copies);
        let deployer = Arc::new(parts.deployer);
        let status = StatusBoard::new();
        let (metrics, fleet) = (&parts.metrics, &parts.fleet);
        let admin = admin_server(
            &config, &owner, &deployer, &status, metrics, fleet, embedded,
        )
        .await?;
        Ok(Host {
            owner,
            source: parts.source,
            store: stores.leases,
            fleet: parts.fleet,
            subscriptions,
            status,
            metrics: parts.metrics,
            deployer,
            admin,
            config,
        })
    }
}
