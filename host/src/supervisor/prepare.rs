//! Preparing a host: every handler and feed loaded, every stream there, the admin port bound,
//! before anything reads.

use std::sync::Arc;

use super::stores::{lease_store, owner_id};
use super::{Host, StartError};
use crate::admin::{AdminServer, AdminState};
use crate::config::{Config, KinesisEndpoint, SubscriptionConfig};
use crate::deploy::Deployer;
use crate::dispatch::SubscriptionPlan;
use crate::envelope::EnvelopeKey;
use crate::feed::{self, FeedRecord};
use crate::fleet::Fleet;
use crate::handler::{HandlerFactory, HandlerSlot};
use crate::metrics::Metrics;
use crate::publish::Publisher;
use crate::source::StreamSource;
use crate::source::kinesis::KinesisStreams;
use crate::source::memory::MemoryStreams;
use crate::status::StatusBoard;
use crate::status::fleet::Refusal;
use crate::wasm::{HandlerComponent, Runtime, short_version, version_of};

/// A subscription ready to run.
pub(super) struct Prepared {
    pub plan: Arc<SubscriptionPlan>,
    create: Option<u32>,
    pub feed: Vec<FeedRecord>,
    /// Streams the subscription writes to.
    outputs: Vec<String>,
}

/// What every subscription of a host shares while it is prepared.
struct Parts {
    runtime: Arc<Runtime>,
    deployer: Deployer,
    source: Arc<dyn StreamSource>,
    envelopes: Arc<EnvelopeKey>,
    metrics: Arc<Metrics>,
    checkpoint_every: std::time::Duration,
    fleet: Option<Arc<Fleet>>,
}

impl Parts {
    /// Loads a subscription's handler and feed, and plans its shard workers.
    async fn subscription(&mut self, s: &SubscriptionConfig) -> Result<Prepared, StartError> {
        let (component, generation, refusal) = self.first_handler(s).await?;
        let feed = match &s.feed {
            Some(path) => feed::load(path).map_err(|source| StartError::Feed {
                subscription: s.name.clone(),
                source,
            })?,
            None => Vec::new(),
        };
        let slot = Arc::new(HandlerSlot::new(component as Arc<dyn HandlerFactory>));
        self.deployer.add(s, slot.clone());
        self.deployer.started_at(&s.name, generation, refusal);
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
            publisher,
            envelopes: self.envelopes.clone(),
            metrics: self.metrics.clone(),
            tap: None,
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
            create: s.create_if_missing,
            feed,
            outputs,
        })
    }
}

impl Parts {
    /// The handler a subscription starts with: with a fleet that has a desired version, that one
    /// (fetched, checked and validated here); else, or when this instance refuses it, the
    /// config's file. Also the fleet generation it belongs to and the refusal, if any.
    async fn first_handler(
        &self,
        s: &SubscriptionConfig,
    ) -> Result<(Arc<HandlerComponent>, u64, Option<Refusal>), StartError> {
        let fleet_error = |source| StartError::Fleet {
            subscription: s.name.clone(),
            source,
        };
        let desired = match &self.fleet {
            Some(fleet) => fleet.desired(&s.name).await.map_err(fleet_error)?,
            None => None,
        };
        let file = self.load_file(s);
        let Some(desired) = desired else {
            return Ok((file.await?, 0, None));
        };
        let want = &desired.component.version;
        let from_file = std::fs::read(&s.handler).is_ok_and(|b| version_of(&b) == *want);
        if from_file {
            return Ok((file.await?, desired.generation, None));
        }
        let fleet = self
            .fleet
            .as_ref()
            .expect("a desired version comes from a fleet");
        let origin = format!("fleet generation {}", desired.generation);
        let loaded = match fleet.fetch(&s.name, &desired.component).await {
            Ok(bytes) => self
                .runtime
                .load_bytes(&origin, &bytes, s.limits, &s.wasi)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match loaded {
            Ok(component) => {
                tracing::info!(
                    subscription = %s.name, version = short_version(want),
                    generation = desired.generation, deployed_by = %desired.deployed_by,
                    file = %s.handler.display(),
                    "running the fleet's desired handler version (deployed to the lease table), not the config file's"
                );
                Ok((component, desired.generation, None))
            }
            Err(error) => {
                tracing::error!(
                    subscription = %s.name, version = short_version(want),
                    generation = desired.generation, file = %s.handler.display(),
                    "refused the fleet's desired handler version: {error}; running the config file's"
                );
                let refusal = Refusal {
                    version: want.clone(),
                    generation: desired.generation,
                    error,
                };
                Ok((file.await?, desired.generation, Some(refusal)))
            }
        }
    }

    /// Loads the subscription's configured handler file.
    async fn load_file(&self, s: &SubscriptionConfig) -> Result<Arc<HandlerComponent>, StartError> {
        let component = self
            .runtime
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
        Ok(component)
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

impl Host {
    /// Loads every handler and feed of the config and makes sure every stream exists (creating
    /// those with `create_if_missing`). Fails on the first part that cannot load; nothing reads yet.
    pub async fn prepare(config: Config) -> Result<Host, StartError> {
        let cache = Runtime::cache_dir_of(&config.host);
        let stores = lease_store(&config, cache.as_deref()).await?;
        let owner: Arc<str> = Arc::from(owner_id(&config).as_str());
        let metrics = Arc::new(Metrics::new());
        let fleet = stores
            .table
            .map(|table| Arc::new(Fleet::new(table, &config.host.name).counted_in(&metrics)));
        let runtime = Arc::new(
            Runtime::for_host(&config.host, config.meters_fuel()).map_err(StartError::Runtime)?,
        );
        let source: Arc<dyn StreamSource> = match config.kinesis.endpoint {
            KinesisEndpoint::Memory => Arc::new(MemoryStreams::new()),
            _ => Arc::new(KinesisStreams::connect(&config.kinesis).await),
        };
        let mut deployer = Deployer::new(runtime.clone(), metrics.clone());
        if let Some(fleet) = &fleet {
            deployer.join_fleet(fleet.clone(), &owner);
        }
        let mut parts = Parts {
            deployer,
            runtime,
            source,
            envelopes: Arc::new(stores.envelopes),
            metrics,
            checkpoint_every: config.leases.checkpoint_every,
            fleet,
        };
        let mut subscriptions = Vec::new();
        for s in &config.subscriptions {
            subscriptions.push(parts.subscription(s).await?);
        }
        ensure_streams(parts.source.as_ref(), &subscriptions).await?;
        let deployer = Arc::new(parts.deployer);
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
                    metrics: parts.metrics.clone(),
                    fleet: parts.fleet.clone(),
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
