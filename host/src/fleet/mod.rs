//! Deploys that reach every instance sharing a DynamoDB lease table.
//!
//! The lease table holds, per service (`[host] name`) and subscription, the *desired* handler
//! version: its sha256, a generation that only grows (every write is conditional on the one read),
//! who deployed it and when, and the version before it (for `--rollback`); the component's bytes
//! sit beside it, cut under DynamoDB's item limit (`lease::Desired`). A deploy validates the bytes,
//! stores them and writes the desired row ([`Fleet::publish`], [`Fleet::rollback`]); every instance
//! polls the row ([`sync`]), fetches a new version, checks its sha256, validates it under its own
//! limits and swaps it in at batch boundaries, like a local deploy (`Deployer::converge`). Each
//! instance also writes a heartbeat (what it runs, its shards, its last refusal) into a roster
//! row of its own, which `status` and `deploy --wait` read ([`Fleet::report`], `roster.rs`).
//!
//! With the memory lease store there is no fleet: a deploy reaches the one host it is sent to.

mod roster;
pub mod sync;

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;

use crate::lease::{Desired, DynamoLeaseStore, LeaseError, SetDesired, StoredComponent, now_ms};
use crate::metrics::Metrics;
use crate::wasm::{short_version, version_of};

/// How many times a deploy reads the desired row again when another deploy wrote it meanwhile.
const CONFLICT_RETRIES: u32 = 5;

/// Why a fleet deploy, rollback or fetch did not happen.
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
}

impl From<LeaseError> for FleetError {
    fn from(e: LeaseError) -> Self {
        FleetError::Table(e)
    }
}

/// One service's fleet state in a lease table.
pub struct Fleet {
    store: Arc<DynamoLeaseStore>,
    service: String,
    /// Requests sent for the fleet (the `fleet_table_requests` metric of a host).
    reads: Counter,
    writes: Counter,
}

impl Fleet {
    pub fn new(store: Arc<DynamoLeaseStore>, service: &str) -> Fleet {
        Fleet {
            store,
            service: service.to_owned(),
            reads: Counter::default(),
            writes: Counter::default(),
        }
    }

    /// Counts this fleet's requests in a host's metrics.
    pub fn counted_in(mut self, metrics: &Metrics) -> Fleet {
        (self.reads, self.writes) = metrics.fleet_requests();
        self
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    fn read(&self, n: u64) {
        self.reads.inc_by(n);
    }

    fn wrote(&self, n: u64) {
        self.writes.inc_by(n);
    }

    /// The desired state of `subscription`; `None` before its first fleet deploy.
    pub async fn desired(&self, subscription: &str) -> Result<Option<Desired>, FleetError> {
        self.read(1);
        Ok(self.store.desired(&self.service, subscription).await?)
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
    ) -> Result<Desired, FleetError> {
        let version = version_of(bytes);
        let mut stored: Option<StoredComponent> = None;
        for _ in 0..CONFLICT_RETRIES {
            let now = self.desired(subscription).await?;
            if let Some(d) = &now
                && d.component.version == version
            {
                return Ok(d.clone());
            }
            let previous = match &now {
                Some(d) => Some(d.component.clone()),
                None => match running {
                    Some(r) if version_of(r) != version => {
                        Some(self.store_bytes(subscription, r).await?)
                    }
                    _ => None,
                },
            };
            let component = match (&stored, &now) {
                (Some(c), _) => c.clone(),
                (None, Some(d)) if d.previous.as_ref().is_some_and(|p| p.version == version) => {
                    d.previous.clone().expect("checked")
                }
                _ => self.store_bytes(subscription, bytes).await?,
            };
            stored = Some(component.clone());
            let desired = Desired {
                component,
                generation: now.as_ref().map_or(1, |d| d.generation + 1),
                deployed_by: by.to_owned(),
                deployed_at_ms: now_ms(),
                previous,
            };
            if self.write(subscription, &desired, now.as_ref()).await? {
                self.drop_older(subscription, now.as_ref(), &desired).await;
                return Ok(desired);
            }
        }
        Err(FleetError::Contended(subscription.to_owned()))
    }

    /// Makes the version before the desired one desired again, fleet-wide.
    pub async fn rollback(&self, subscription: &str, by: &str) -> Result<Desired, FleetError> {
        for _ in 0..CONFLICT_RETRIES {
            let now = self.desired(subscription).await?;
            let Some(d) = &now else {
                return Err(FleetError::NothingToRollBack(subscription.to_owned()));
            };
            let Some(previous) = &d.previous else {
                return Err(FleetError::NothingToRollBack(subscription.to_owned()));
            };
            let desired = Desired {
                component: previous.clone(),
                generation: d.generation + 1,
                deployed_by: by.to_owned(),
                deployed_at_ms: now_ms(),
                previous: Some(d.component.clone()),
            };
            if self.write(subscription, &desired, now.as_ref()).await? {
                return Ok(desired);
            }
        }
        Err(FleetError::Contended(subscription.to_owned()))
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

    /// Writes `desired` if the row is still `seen`; `false` when another deploy came first.
    async fn write(
        &self,
        subscription: &str,
        desired: &Desired,
        seen: Option<&Desired>,
    ) -> Result<bool, FleetError> {
        self.wrote(1);
        let written = self
            .store
            .set_desired(
                &self.service,
                subscription,
                desired,
                seen.map(|d| d.generation),
            )
            .await?;
        Ok(matches!(written, SetDesired::Done))
    }

    /// Removes the bytes of the version that was previous before `desired` was written (the
    /// table keeps the desired version and the one before it). A failure only leaves rows behind.
    async fn drop_older(&self, subscription: &str, before: Option<&Desired>, desired: &Desired) {
        let Some(old) = before.and_then(|b| b.previous.as_ref()) else {
            return;
        };
        let kept = [Some(&desired.component), desired.previous.as_ref()];
        if kept.iter().flatten().any(|k| k.version == old.version) {
            return;
        }
        self.wrote(u64::from(old.chunks));
        if let Err(e) = self
            .store
            .delete_component(&self.service, subscription, old)
            .await
        {
            tracing::warn!(
                subscription,
                version = short_version(&old.version),
                "cannot remove an old handler version's bytes: {e}"
            );
        }
    }

    /// The bytes of `stored`, checked against its version.
    pub async fn fetch(
        &self,
        subscription: &str,
        stored: &StoredComponent,
    ) -> Result<Vec<u8>, FleetError> {
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
