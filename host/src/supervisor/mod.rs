//! The supervisor turns a validated [`Config`] into a running host: it loads every handler and
//! record file first (so a bad config or component never starts half a host), then creates the
//! streams, puts the feeds in, and runs one [`Coordinator`] per subscription until told to stop.

mod prepare;
mod stores;
mod supervise;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::admin::{AdminServer, BindError};
use crate::config::Config;
use crate::coordinator::{Coordinator, LeaseSettings, TaskFailed};
use crate::deploy::Deployer;
use crate::deploy::sync;
use crate::dispatch::{OutcomeTap, Role};
use crate::feed::FeedError;
use crate::fleet::Fleet;
use crate::lease::LeaseStore;
use crate::metrics::Metrics;
use crate::publish::Publisher;
use crate::source::{SourceError, StreamSource};
use crate::status::{Failure, StatusBoard};
use crate::task::panic_message;
use crate::wasm::LoadError;
use prepare::Prepared;
pub use stores::{dynamo_table, fleet_envelope_keys};

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
    #[error("subscription `{subscription}`: {source}")]
    Fleet {
        subscription: String,
        source: Box<crate::fleet::FleetError>,
    },
    #[error(transparent)]
    Runtime(LoadError),
    #[error("[leases] {0}")]
    Leases(crate::lease::LeaseError),
    #[error("[subscription.state] {0}")]
    State(#[source] crate::state::StoreError),
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
    /// With a DynamoDB lease table: the fleet's desired versions and heartbeats.
    fleet: Option<Arc<Fleet>>,
    subscriptions: Vec<Prepared>,
    status: StatusBoard,
    metrics: Arc<Metrics>,
    /// Swaps handlers (and holds the runtime, whose epoch ticker must live while the host runs).
    deployer: Arc<Deployer>,
    admin: Option<AdminServer>,
}

impl Host {
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
        for s in &mut self.subscriptions {
            let plan = Arc::get_mut(&mut s.plan).expect("plans are shared only once the host runs");
            let config = self
                .config
                .subscriptions
                .iter()
                .find(|c| *c.name == *plan.name);
            if let (Some(_), Some(c)) = (&plan.publisher, config) {
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
        self.put_feeds().await?;
        tracing::info!(owner = %self.owner, subscriptions = self.subscriptions.len(), "host running");
        // The admin API, the file watcher and the fleet sync stop when the shards have (a deploy
        // during the stop still lands in the slot and is simply not used).
        let side_stop = CancellationToken::new();
        let mut side = self.spawn_side_tasks(&side_stop);
        let failed = self.run_coordinators(stop).await;
        side_stop.cancel();
        while side.join_next().await.is_some() {}
        if let Some(failure) = failed {
            tracing::error!("host stopped after a failure: {failure}");
            return Err(StartError::Failed(failure));
        }
        tracing::info!("host stopped: checkpoints written, leases released");
        Ok(())
    }

    /// Puts each subscription's `feed` records into its (embedded) stream.
    async fn put_feeds(&self) -> Result<(), StartError> {
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
        Ok(())
    }

    /// Starts the admin API, the file watcher and the fleet sync, each when configured.
    fn spawn_side_tasks(&mut self, stop: &CancellationToken) -> tokio::task::JoinSet<()> {
        let mut side = tokio::task::JoinSet::new();
        let admin_addr = self.admin_addr();
        if let Some(admin) = self.admin.take() {
            side.spawn(admin.serve(stop.clone()));
        }
        if self.deployer.watches() {
            side.spawn(self.deployer.clone().watch(stop.clone()));
        }
        if let Some(fleet) = &self.fleet {
            let me = sync::Member {
                owner: self.owner.clone(),
                admin: admin_addr.map(|a| format!("http://{a}")),
                started_ms: crate::lease::now_ms(),
            };
            let (fleet, deployer, status) =
                (fleet.clone(), self.deployer.clone(), self.status.clone());
            let (timings, task_stop) = (self.config.fleet.clone(), stop.clone());
            side.spawn(supervise::supervise(
                "fleet sync",
                self.status.clone(),
                stop.clone(),
                move || {
                    sync::run(
                        fleet.clone(),
                        deployer.clone(),
                        status.clone(),
                        me.clone(),
                        timings.clone(),
                        task_stop.clone(),
                    )
                },
            ));
        }
        side
    }

    /// Runs one coordinator per subscription until `stop`, or until one fails: a failed
    /// subscription stops the whole host (gracefully), so that its supervisor restarts it.
    async fn run_coordinators(&self, stop: CancellationToken) -> Option<TaskFailed> {
        let timings = LeaseSettings {
            ttl: self.config.leases.ttl,
            renew_every: self.config.leases.renew_every,
            list_every: self.config.leases.list_every,
            balance: self.config.leases.balance,
        };
        let stop_all = stop.child_token();
        let mut tasks = tokio::task::JoinSet::new();
        let mut names = std::collections::HashMap::new();
        for s in &self.subscriptions {
            let coordinator = Coordinator {
                plan: s.plan.clone(),
                source: s.reads.clone().unwrap_or_else(|| self.source.clone()),
                store: self.store.clone(),
                owner: self.owner.clone(),
                timings,
                status: self.status.clone(),
            };
            let span = match s.plan.role {
                Role::Records => tracing::info_span!("subscription", subscription = %s.plan.name),
                Role::RetryCopies => tracing::info_span!(
                    "subscription",
                    subscription = %s.plan.name,
                    retry_stream = %s.plan.stream
                ),
            };
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
        failed
    }
}
