//! Deploys that reach every instance sharing a DynamoDB lease table.
//!
//! The lease table holds, per service (`[host] name`) and subscription, the *desired* handler
//! version: its sha256, a generation, the row's lineage (`deploy_id`), who deployed it and when,
//! the version before it (for `--rollback`) and, when signed, the deploy's signature; the
//! component's bytes sit beside it, cut under DynamoDB's item limit (`lease::Desired`). A deploy
//! validates the bytes, stores them and writes the desired row ([`Fleet::publish`],
//! [`Fleet::rollback`]); every instance polls the row ([`sync`]), checks it (a bad row or, with
//! trusted keys, a version not signed by one of them is refused: [`Fleet::trust`]), fetches a new
//! version, checks its sha256, validates it under its own limits and swaps it in at batch
//! boundaries, like a local deploy (`Deployer::converge`). Each instance also writes a heartbeat
//! (what it runs, its shards, its last refusal) into a roster row of its own, which `status`
//! and `deploy --wait` read ([`Fleet::report`], `roster.rs`).
//!
//! Generations: a deploy writes one past both the row's and the highest any instance reports
//! (so a row deleted or restored from a backup never makes the next deploy look old), and an
//! instance takes a row whose lineage changed whatever its generation.
//!
//! Concurrent deploys: every write of the row is conditional on the row as read; every upload
//! writes parts of its own; a deploy removes only the parts that its own conditional write
//! dropped from the row (the previous version before it), which no later write can reference
//! again (a reference is only ever copied from a row into a write conditional on that row).
//!
//! With the memory lease store there is no fleet: a deploy reaches the one host it is sent to.

pub mod last_ran;
mod roster;
pub mod sync;

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;

use crate::lease::{
    BadRow, Desired, DynamoLeaseStore, LeaseError, MAX_GENERATION, Seen, SetDesired,
    StoredComponent, new_id, now_ms,
};
use crate::metrics::Metrics;
use crate::signing::{SignKey, Signed, Statement, TrustedKeys, Untrusted};
use crate::wasm::{short_version, version_of};

/// How many times a deploy reads the desired row again when another deploy wrote it meanwhile.
const CONFLICT_RETRIES: u32 = 5;

/// Why a fleet deploy, rollback or fetch did not happen, or a desired version is not run.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("the lease table: {0}")]
    Table(#[source] LeaseError),
    #[error("subscription `{0}`: no earlier fleet version to roll back to")]
    NothingToRollBack(String),
    #[error(
        "subscription `{subscription}`: the bytes of version {} are no longer in the lease table \
         (a later deploy replaced them)", short_version(.version)
    )]
    Missing {
        subscription: String,
        version: String,
    },
    #[error(
        "subscription `{subscription}`: the bytes stored for version {} hash to {}; not run",
        short_version(.version), short_version(.found)
    )]
    Corrupt {
        subscription: String,
        version: String,
        found: String,
    },
    #[error("subscription `{0}`: other deploys kept writing the desired version; try again")]
    Contended(String),
    #[error("subscription `{subscription}`: {source}; not run")]
    BadRow {
        subscription: String,
        #[source]
        source: BadRow,
    },
    #[error(
        "subscription `{subscription}`: desired version {} (generation {generation}) is refused: \
         {source}", short_version(.version)
    )]
    Untrusted {
        subscription: String,
        version: String,
        generation: u64,
        #[source]
        source: Untrusted,
    },
    #[error(
        "subscription `{subscription}`: the component is {size} bytes, more than [fleet] \
         max_component_size ({max} bytes)"
    )]
    TooLarge {
        subscription: String,
        size: u64,
        max: u64,
    },
    #[error(
        "subscription `{0}`: the generation cannot grow any further; delete the desired row \
         (a new lineage starts) and deploy again"
    )]
    Exhausted(String),
    #[error(
        "subscription `{subscription}`: the desired row moved while the deploy was signed (it is \
         at generation {now}, lineage {lineage:?}); sign again"
    )]
    Moved {
        subscription: String,
        now: u64,
        lineage: String,
    },
}

impl From<LeaseError> for FleetError {
    fn from(e: LeaseError) -> Self {
        FleetError::Table(e)
    }
}

/// What a fleet accepts: the largest component, and the keys a deploy must be signed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetPolicy {
    pub max_component_size: u64,
    /// Empty: any writer of the table may deploy.
    pub trusted: TrustedKeys,
}

impl Default for FleetPolicy {
    fn default() -> Self {
        FleetPolicy {
            max_component_size: crate::config::defaults::MAX_COMPONENT_SIZE,
            trusted: TrustedKeys::default(),
        }
    }
}

/// How a deploy is signed.
pub enum Sign<'a> {
    /// Not signed.
    No,
    /// Signed here, with this key, for whatever generation the write gets.
    Key(&'a SignKey),
    /// Signed elsewhere (the command line, through an admin API) for this generation and lineage.
    Made(Intent),
}

/// A signature made for one generation and lineage of the desired row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intent {
    pub generation: u64,
    pub deploy_id: String,
    pub signed: Signed,
}

/// One service's fleet state in a lease table.
pub struct Fleet {
    store: Arc<DynamoLeaseStore>,
    service: String,
    policy: FleetPolicy,
    /// Requests sent for the fleet (the `fleet_table_requests` metric of a host).
    reads: Counter,
    writes: Counter,
}

impl Fleet {
    pub fn new(store: Arc<DynamoLeaseStore>, service: &str) -> Fleet {
        Fleet {
            store,
            service: service.to_owned(),
            policy: FleetPolicy::default(),
            reads: Counter::default(),
            writes: Counter::default(),
        }
    }

    /// Accepts what `policy` allows.
    pub fn with_policy(mut self, policy: FleetPolicy) -> Fleet {
        self.policy = policy;
        self
    }

    /// Counts this fleet's requests in a host's metrics.
    pub fn counted_in(mut self, metrics: &Metrics) -> Fleet {
        (self.reads, self.writes) = metrics.fleet_requests();
        self
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    pub fn policy(&self) -> &FleetPolicy {
        &self.policy
    }

    fn read(&self, n: u64) {
        self.reads.inc_by(n);
    }

    fn wrote(&self, n: u64) {
        self.writes.inc_by(n);
    }

    /// The desired state of `subscription`; `None` before its first fleet deploy; a row that
    /// cannot be used is [`FleetError::BadRow`].
    pub async fn desired(&self, subscription: &str) -> Result<Option<Desired>, FleetError> {
        let (_, row) = self.read_row(subscription).await?;
        row.transpose().map_err(|source| FleetError::BadRow {
            subscription: subscription.to_owned(),
            source,
        })
    }

    async fn read_row(
        &self,
        subscription: &str,
    ) -> Result<(Seen, Option<Result<Desired, BadRow>>), FleetError> {
        self.read(1);
        let read = self
            .store
            .desired(&self.service, subscription, self.policy.max_component_size)
            .await?;
        Ok((read.seen, read.row))
    }

    /// The row a deploy builds on: a bad one is replaced (and said so).
    async fn current(&self, subscription: &str) -> Result<(Seen, Option<Desired>), FleetError> {
        let (seen, row) = self.read_row(subscription).await?;
        let now = match row {
            Some(Err(bad)) => {
                tracing::warn!(subscription, "{bad}; this deploy replaces the row");
                None
            }
            Some(Ok(d)) => Some(d),
            None => None,
        };
        Ok((seen, now))
    }

    /// Whether this instance may run `desired` for `subscription`: with trusted keys, only when
    /// its signature verifies for this service, subscription, version, generation and lineage.
    pub fn trust(&self, subscription: &str, desired: &Desired) -> Result<(), FleetError> {
        if self.policy.trusted.is_empty() {
            return Ok(());
        }
        let statement = self.statement(
            subscription,
            &desired.component.version,
            desired.generation,
            &desired.deploy_id,
        );
        self.policy
            .trusted
            .verify(&statement, desired.signed.as_ref())
            .map_err(|source| FleetError::Untrusted {
                subscription: subscription.to_owned(),
                version: desired.component.version.clone(),
                generation: desired.generation,
                source,
            })
    }

    /// What a deploy of `version` as `generation` of lineage `deploy_id` signs.
    pub fn statement<'a>(
        &'a self,
        subscription: &'a str,
        version: &'a str,
        generation: u64,
        deploy_id: &'a str,
    ) -> Statement<'a> {
        Statement {
            service: &self.service,
            subscription,
            version,
            generation,
            deploy_id,
        }
    }

    /// Makes `bytes` (already validated by the caller) what `subscription` should run
    /// fleet-wide. `running` is the version the caller runs now and its bytes, stored as the
    /// rollback target when the fleet had no desired version yet. `by` says who deploys.
    /// Answers the desired state written (the one already there when it wants these bytes).
    pub async fn publish(
        &self,
        subscription: &str,
        bytes: &[u8],
        running: Option<&[u8]>,
        by: &str,
        sign: &Sign<'_>,
    ) -> Result<Desired, FleetError> {
        self.fits(subscription, bytes.len())?;
        self.signs(subscription, &version_of(bytes), sign)?;
        // Parts this deploy uploaded: removed again unless the row it wrote refers to them
        // (no other deploy ever knew of them).
        let mut own = Uploads::default();
        let published = self
            .publish_with(subscription, bytes, running, by, sign, &mut own)
            .await;
        for stored in own.all() {
            self.remove(subscription, &stored).await;
        }
        published
    }

    async fn publish_with(
        &self,
        subscription: &str,
        bytes: &[u8],
        running: Option<&[u8]>,
        by: &str,
        sign: &Sign<'_>,
        own: &mut Uploads,
    ) -> Result<Desired, FleetError> {
        let version = version_of(bytes);
        for _ in 0..CONFLICT_RETRIES {
            let (seen, now) = self.current(subscription).await?;
            if let Some(d) = &now
                && d.component.version == version
                && (matches!(sign, Sign::No) || d.signed.is_some())
            {
                return Ok(d.clone());
            }
            let (generation, deploy_id) = self.next(subscription, now.as_ref(), sign).await?;
            let previous = match &now {
                Some(d) => Some(d.component.clone()),
                None => match running {
                    Some(r) if version_of(r) != version => {
                        Some(own.running(self, subscription, r).await?)
                    }
                    _ => None,
                },
            };
            let component = match now.as_ref().and_then(|d| d.previous.as_ref()) {
                // The previous version's parts, referenced only under this row's condition.
                Some(p) if p.version == version => p.clone(),
                _ => own.component(self, subscription, bytes).await?,
            };
            let desired = Desired {
                signed: self.signature(subscription, &version, generation, &deploy_id, sign),
                component,
                generation,
                deploy_id,
                deployed_by: by.to_owned(),
                deployed_at_ms: now_ms(),
                previous,
            };
            if self.write(subscription, &desired, &seen).await? {
                own.written(&desired);
                self.drop_unreferenced(subscription, now.as_ref(), &desired)
                    .await;
                return Ok(desired);
            }
            if let Sign::Made(_) = sign {
                return Err(self.moved(subscription).await);
            }
        }
        Err(FleetError::Contended(subscription.to_owned()))
    }

    /// Makes the version before the desired one desired again, fleet-wide.
    pub async fn rollback(
        &self,
        subscription: &str,
        by: &str,
        sign: &Sign<'_>,
    ) -> Result<Desired, FleetError> {
        for _ in 0..CONFLICT_RETRIES {
            let (seen, now) = self.current(subscription).await?;
            let Some((d, previous)) = now.as_ref().and_then(|d| Some((d, d.previous.clone()?)))
            else {
                return Err(FleetError::NothingToRollBack(subscription.to_owned()));
            };
            self.signs(subscription, &previous.version, sign)?;
            let (generation, deploy_id) = self.next(subscription, now.as_ref(), sign).await?;
            let desired = Desired {
                signed: self.signature(
                    subscription,
                    &previous.version,
                    generation,
                    &deploy_id,
                    sign,
                ),
                component: previous,
                generation,
                deploy_id,
                deployed_by: by.to_owned(),
                deployed_at_ms: now_ms(),
                previous: Some(d.component.clone()),
            };
            if self.write(subscription, &desired, &seen).await? {
                return Ok(desired);
            }
            if let Sign::Made(_) = sign {
                return Err(self.moved(subscription).await);
            }
        }
        Err(FleetError::Contended(subscription.to_owned()))
    }

    /// Refuses a component larger than the fleet accepts.
    fn fits(&self, subscription: &str, size: usize) -> Result<(), FleetError> {
        let max = self.policy.max_component_size;
        if size as u64 > max {
            return Err(FleetError::TooLarge {
                subscription: subscription.to_owned(),
                size: size as u64,
                max,
            });
        }
        Ok(())
    }

    /// With trusted keys, refuses an unsigned deploy before anything is written.
    /// With trusted keys, a signature made elsewhere is checked here too, before it is written.
    fn signs(&self, subscription: &str, version: &str, sign: &Sign<'_>) -> Result<(), FleetError> {
        if self.policy.trusted.is_empty() {
            return Ok(());
        }
        let (generation, checked) = match sign {
            Sign::No => (0, Err(Untrusted::Unsigned)),
            Sign::Key(_) => return Ok(()),
            Sign::Made(intent) => {
                let statement =
                    self.statement(subscription, version, intent.generation, &intent.deploy_id);
                let checked = self.policy.trusted.verify(&statement, Some(&intent.signed));
                (intent.generation, checked)
            }
        };
        checked.map_err(|source| FleetError::Untrusted {
            subscription: subscription.to_owned(),
            version: version.to_owned(),
            generation,
            source,
        })
    }

    /// The generation and lineage the next write of the row gets: one past the row's and every
    /// instance's (or, for a signature made elsewhere, the ones it was made for, when they still
    /// follow the row).
    async fn next(
        &self,
        subscription: &str,
        now: Option<&Desired>,
        sign: &Sign<'_>,
    ) -> Result<(u64, String), FleetError> {
        let lineage = now.map(|d| d.deploy_id.clone()).filter(|id| !id.is_empty());
        if let Sign::Made(intent) = sign {
            // A row of the first release has no lineage: the signed write starts one.
            let follows = match now {
                Some(d) => {
                    intent.generation > d.generation
                        && lineage.as_ref().is_none_or(|l| *l == intent.deploy_id)
                }
                None => true,
            };
            if !follows || intent.generation > MAX_GENERATION {
                return Err(self.moved(subscription).await);
            }
            return Ok((intent.generation, intent.deploy_id.clone()));
        }
        let report = self.report(&[]).await?;
        let highest = report
            .highest_generation(subscription)
            .max(now.map_or(0, |d| d.generation));
        let generation = highest
            .checked_add(1)
            .filter(|g| *g <= MAX_GENERATION)
            .ok_or_else(|| FleetError::Exhausted(subscription.to_owned()))?;
        Ok((generation, lineage.unwrap_or_else(new_id)))
    }

    fn signature(
        &self,
        subscription: &str,
        version: &str,
        generation: u64,
        deploy_id: &str,
        sign: &Sign<'_>,
    ) -> Option<Signed> {
        match sign {
            Sign::No => None,
            Sign::Key(key) => {
                Some(key.sign(&self.statement(subscription, version, generation, deploy_id)))
            }
            Sign::Made(intent) => Some(intent.signed.clone()),
        }
    }

    /// The answer to a signature made for a generation the row has passed.
    async fn moved(&self, subscription: &str) -> FleetError {
        let now = self.current(subscription).await.ok().and_then(|(_, d)| d);
        FleetError::Moved {
            subscription: subscription.to_owned(),
            now: now.as_ref().map_or(0, |d| d.generation),
            lineage: now.map(|d| d.deploy_id).unwrap_or_default(),
        }
    }

    async fn store_bytes(
        &self,
        subscription: &str,
        bytes: &[u8],
    ) -> Result<StoredComponent, FleetError> {
        let version = version_of(bytes);
        let stored = self
            .store
            .put_component(&self.service, subscription, &version, bytes)
            .await?;
        self.wrote(u64::from(stored.chunks));
        Ok(stored)
    }

    /// Writes `desired` if the row is still as `seen`; `false` when another deploy came first.
    async fn write(
        &self,
        subscription: &str,
        desired: &Desired,
        seen: &Seen,
    ) -> Result<bool, FleetError> {
        self.wrote(1);
        let written = self
            .store
            .set_desired(&self.service, subscription, desired, seen)
            .await?;
        Ok(matches!(written, SetDesired::Done))
    }

    /// Removes the parts that writing `desired` over `before` dropped from the row: after that
    /// conditional write nothing can refer to them again.
    async fn drop_unreferenced(
        &self,
        subscription: &str,
        before: Option<&Desired>,
        desired: &Desired,
    ) {
        let Some(before) = before else {
            return;
        };
        let kept = [Some(&desired.component), desired.previous.as_ref()];
        for old in [Some(&before.component), before.previous.as_ref()]
            .into_iter()
            .flatten()
        {
            if !kept.iter().flatten().any(|k| k.same_parts(old)) {
                self.remove(subscription, old).await;
            }
        }
    }

    /// Removes a stored component's parts; a failure only leaves rows behind.
    async fn remove(&self, subscription: &str, old: &StoredComponent) {
        self.wrote(u64::from(old.chunks));
        if let Err(e) = self
            .store
            .delete_component(&self.service, subscription, old)
            .await
        {
            tracing::warn!(
                subscription,
                version = short_version(&old.version),
                "cannot remove a handler version's bytes that nothing refers to: {e}"
            );
        }
    }

    /// The bytes of `stored`, checked against its version.
    pub async fn fetch(
        &self,
        subscription: &str,
        stored: &StoredComponent,
    ) -> Result<Vec<u8>, FleetError> {
        self.fits(
            subscription,
            usize::try_from(stored.size).unwrap_or(usize::MAX),
        )?;
        self.read(u64::from(stored.chunks));
        let bytes = self
            .store
            .component(&self.service, subscription, stored)
            .await?
            .ok_or_else(|| FleetError::Missing {
                subscription: subscription.to_owned(),
                version: stored.version.clone(),
            })?;
        let found = version_of(&bytes);
        if found != stored.version {
            return Err(FleetError::Corrupt {
                subscription: subscription.to_owned(),
                version: stored.version.clone(),
                found,
            });
        }
        Ok(bytes)
    }
}

/// What one deploy uploaded itself.
#[derive(Default)]
struct Uploads {
    component: Option<StoredComponent>,
    running: Option<StoredComponent>,
}

impl Uploads {
    async fn component(
        &mut self,
        fleet: &Fleet,
        subscription: &str,
        bytes: &[u8],
    ) -> Result<StoredComponent, FleetError> {
        if self.component.is_none() {
            self.component = Some(fleet.store_bytes(subscription, bytes).await?);
        }
        Ok(self.component.clone().expect("just stored"))
    }

    async fn running(
        &mut self,
        fleet: &Fleet,
        subscription: &str,
        bytes: &[u8],
    ) -> Result<StoredComponent, FleetError> {
        if self.running.is_none() {
            self.running = Some(fleet.store_bytes(subscription, bytes).await?);
        }
        Ok(self.running.clone().expect("just stored"))
    }

    /// A row refers to these parts now: they are no longer this deploy's to remove.
    fn written(&mut self, desired: &Desired) {
        let referenced = |c: &Option<StoredComponent>| {
            c.as_ref().is_some_and(|c| {
                desired.component.same_parts(c)
                    || desired.previous.as_ref().is_some_and(|p| p.same_parts(c))
            })
        };
        if referenced(&self.component) {
            self.component = None;
        }
        if referenced(&self.running) {
            self.running = None;
        }
    }

    fn all(&mut self) -> Vec<StoredComponent> {
        [self.component.take(), self.running.take()]
            .into_iter()
            .flatten()
            .collect()
    }
}
