//! Deploys that reach every instance sharing a DynamoDB lease table.
//!
//! The lease table holds, per service (`[host] name`) and subscription, the *desired* handler
//! version: its sha256, a generation, the row's lineage (`deploy_id`), who deployed it and when,
//! the version before it (for `--rollback`) and, when signed, the deploy's signature; the
//! component's bytes sit beside it, cut under DynamoDB's item limit (`fleet_table::Desired`). A deploy
//! validates the bytes, stores them and writes the desired row ([`Fleet::publish`],
//! [`Fleet::rollback`]); every instance polls the row (`deploy/sync.rs`), checks it (a bad row or, with
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

mod canary;
pub mod decide;
pub mod last_ran;
mod publish;
mod shadow;
mod sign;
mod trust;

pub use canary::CanaryPlan;

mod roster;

use prometheus_client::metrics::counter::Counter;

use crate::fleet_table::{BadRow, Desired, FleetTable, Seen, StoredComponent};
use crate::lease::LeaseError;
use crate::metrics::Metrics;
pub use crate::signing::Intent;
use crate::signing::{SignKey, TrustedKeys, Untrusted};
use crate::version::{short_version, version_of};
pub use trust::{rollout_statement, shadow_statement, vouch_previous, vouch_shadow};

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
    #[error("subscription `{subscription}`: the rollout row cannot be used: {why}")]
    BadRollout { subscription: String, why: String },
    #[error("subscription `{subscription}`: no rollout started: {why}")]
    CanaryRefused { subscription: String, why: String },
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
    #[error("subscription `{subscription}`: {what} of {} is refused: {source}", short_version(.version))]
    UntrustedTrial {
        subscription: String,
        /// `rollout ID` or `the fleet's shadow ID`.
        what: String,
        version: String,
        #[source]
        source: Untrusted,
    },
    #[error(
        "subscription `{subscription}`: refused to sign {what} {}: {why}", short_version(.version)
    )]
    Unvouched {
        subscription: String,
        /// `a rollback to` or `a promotion of the shadow`.
        what: &'static str,
        version: String,
        why: String,
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

/// One service's fleet state in a lease table.
pub struct Fleet {
    table: FleetTable,
    service: String,
    policy: FleetPolicy,
    /// Requests sent for the fleet (the `fleet_table_requests` metric of a host).
    reads: Counter,
    writes: Counter,
}

impl Fleet {
    pub fn new(table: FleetTable, service: &str) -> Fleet {
        Fleet {
            table,
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
            .table
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
            .table
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
