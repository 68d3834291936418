//! Leases in a DynamoDB table shared by many instances, in the layout ruststream-kinesis 0.7
//! writes, so a service moves between that crate and shardhost on the same table.
//!
//! The table has one string partition key, `lease_key`, and nothing else. One row holds one shard
//! of one stream, with exactly these attributes:
//!
//! | attribute       | type | value                                                   |
//! |-----------------|------|---------------------------------------------------------|
//! | `lease_key`     | S    | `stream:shard`                                          |
//! | `lease_owner`   | S    | the holder; absent while nobody holds it                |
//! | `lease_expiry`  | N    | ms since the Unix epoch; 0 after a release              |
//! | `lease_counter` | N    | +1 on every write                                       |
//! | `checkpoint`    | S    | a sequence number, `SEQ/SUB` in a KPL aggregate, or `SHARD_END` |
//!
//! shardhost adds two attributes of its own, which other readers of the table ignore:
//! `opened_at` (N, when a reader first opened the shard while it had no checkpoint) and
//! `handoff_to` (S, the owner a handoff was asked for; see [`LeaseState`](super::LeaseState)).
//!
//! Every write is a conditional UpdateItem: acquire on the row being free, expired or already the
//! caller's; renew, checkpoint and release on the owner and counter the caller last saw. Rows keyed
//! by a bare shard id are earlier-version rows, read only through `legacy_stream` (see `legacy`).
//!
//! Rows whose key starts with `#` are shardhost's own and never meet a lease row: the fleet's
//! envelope key (`secret`), its desired handler versions and their bytes (`desired`), and its
//! heartbeats (`roster`).

mod canary;
mod component;
mod desired;
mod doc;
mod legacy;
mod roster;
mod row;
mod secret;
mod shadow;
mod table;
mod write;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use super::{Checkpoint, Lease, LeaseError, LeaseKey, LeaseStore, now_ms};
pub use canary::{Rollout, RolloutRead, RolloutState};
pub use component::new_id;
pub use desired::{
    BadRow, CHUNK_BYTES, Desired, DesiredRead, MAX_GENERATION, Seen, SetDesired, StoredComponent,
    is_id, is_version,
};
pub use doc::DocRead;
use legacy::Legacy;
use row::{CHECKPOINT, COUNTER, EXPIRY, HANDOFF_TO, KEY, OPENED, OWNER, n, s};
pub use shadow::FleetShadow;
use write::{HELD, UNASKED};

/// A [`LeaseStore`] in a DynamoDB table (`[leases] store = "dynamodb"`).
///
/// The service's credentials need `dynamodb:GetItem` and `dynamodb:UpdateItem` on the table,
/// `dynamodb:DescribeTable` for [`check_table`](Self::check_table), `dynamodb:DeleteItem` for
/// fleet deploys to remove the bytes of versions older than the previous one and for a clean
/// stop to remove the instance's heartbeat row, and `dynamodb:Scan` to read the roster.
#[derive(Debug)]
pub struct DynamoLeaseStore {
    client: Client,
    table: String,
    endpoint: Option<String>,
    legacy_stream: Option<String>,
    /// The checkpoint of each bare (earlier-version) row looked at so far, by shard id.
    bare_rows: Mutex<HashMap<String, Option<Checkpoint>>>,
    /// Rows seen with a checkpoint of their own: earlier-version rows no longer matter for them
    /// (a checkpoint is never removed).
    checkpointed: Mutex<HashSet<LeaseKey>>,
}

/// Where a DynamoDB lease table is and how to reach it (`[leases]` of the config).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DynamoOptions {
    pub table: String,
    /// An `http(s)://` endpoint; `None`: the AWS chain.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Static dummy credentials, for a local stack.
    pub test_credentials: bool,
    /// The stream that earlier-version rows (keyed by the bare shard id) belong to.
    pub legacy_stream: Option<String>,
}

impl DynamoOptions {
    /// A table on a local stack (an emulator at `endpoint`, dummy credentials).
    pub fn local(table: &str, endpoint: &str) -> DynamoOptions {
        DynamoOptions {
            table: table.to_owned(),
            endpoint: Some(endpoint.to_owned()),
            test_credentials: true,
            ..DynamoOptions::default()
        }
    }
}

impl DynamoLeaseStore {
    /// A store on the table `options` name, with a client for its endpoint (else the AWS
    /// chain, which honours `AWS_ENDPOINT_URL_DYNAMODB`), region and credentials. Nothing is
    /// sent until the first call.
    pub async fn connect(options: DynamoOptions) -> DynamoLeaseStore {
        let endpoint_spec = crate::aws::Endpoint {
            ca_pem: None,
            url: options.endpoint.as_deref(),
            region: options.region.as_deref(),
            test_credentials: options.test_credentials,
        };
        let sdk = crate::aws::sdk_config(
            &endpoint_spec,
            RetryConfig::standard()
                .with_max_attempts(5)
                .with_initial_backoff(Duration::from_millis(100))
                .with_max_backoff(Duration::from_secs(2)),
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(3))
                // Within the default lease ttl: a stalled write must not outlive the lease.
                .operation_timeout(Duration::from_secs(8))
                .build(),
        )
        .await;
        DynamoLeaseStore {
            client: Client::new(&sdk),
            table: options.table,
            endpoint: options.endpoint,
            legacy_stream: options.legacy_stream,
            bare_rows: Mutex::default(),
            checkpointed: Mutex::default(),
        }
    }

    /// Checks at start that the table exists and is keyed by one string partition key
    /// `lease_key`; answers [`LeaseError::Refused`] saying what is wrong (with the AWS CLI command
    /// that creates the table when it is missing). Waits while the table is still being created.
    /// The table's name.
    pub fn table_name(&self) -> &str {
        &self.table
    }

    pub async fn check_table(&self) -> Result<(), LeaseError> {
        table::check(&self.client, &self.table, self.endpoint.as_deref()).await
    }

    /// The row of `key` as stored, without looking at earlier-version rows.
    async fn get(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(key.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.sdk_error("read", &key.to_string(), e))?;
        let lease = out
            .item()
            .map(|item| row::lease(&self.table, key, item))
            .transpose()?;
        self.note(lease.as_ref());
        Ok(lease)
    }

    /// Remembers that a row has a checkpoint of its own.
    fn note(&self, lease: Option<&Lease>) {
        if let Some(lease) = lease
            && lease.checkpoint.is_some()
        {
            let mut checkpointed = self.checkpointed.lock().expect("checkpointed poisoned");
            if !checkpointed.contains(&lease.key) {
                checkpointed.insert(lease.key.clone());
            }
        }
    }

    fn has_checkpoint(&self, key: &LeaseKey) -> bool {
        self.checkpointed
            .lock()
            .expect("checkpointed poisoned")
            .contains(key)
    }

    /// A store error naming what was done, on which row of which table.
    fn sdk_error<E, R>(&self, what: &str, row: &str, e: SdkError<E, R>) -> LeaseError
    where
        E: std::error::Error + ProvideErrorMetadata + 'static,
        R: std::fmt::Debug,
    {
        let service = e.as_service_error();
        let code = service.and_then(|s| s.code());
        if code == Some("ResourceNotFoundException") {
            return LeaseError::Store(format!(
                "{what} `{row}`: lease table `{}` does not exist",
                self.table
            ));
        }
        let detail = match (code, service.and_then(|s| s.message())) {
            (Some(code), Some(message)) => format!("{code}: {message}"),
            _ => DisplayErrorContext(&e).to_string(),
        };
        LeaseError::Store(format!(
            "{what} `{row}` in lease table `{}`: {detail}",
            self.table
        ))
    }
}

/// `now_ms` + `ttl`, saturating.
fn expiry(now_ms: u64, ttl: Duration) -> u64 {
    now_ms.saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
}

#[async_trait]
impl LeaseStore for DynamoLeaseStore {
    async fn acquire(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        if !self.has_checkpoint(key)
            && let Some(legacy) = self.legacy(key).await?
        {
            let has_own = self.get(key).await?.is_some_and(|r| r.checkpoint.is_some());
            match legacy {
                _ if has_own => {}
                Legacy::Refuse(message) => return Err(LeaseError::Refused(message)),
                Legacy::Adopt(checkpoint) => return self.adopt(key, owner, ttl, &checkpoint).await,
            }
        }
        self.take(key, owner, ttl, None).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        let expiry = expiry(now_ms(), ttl);
        let set = format!("SET {EXPIRY} = :expiry");
        let owner = lease.owner.clone();
        let shows = move |r: &Lease| r.owner == owner && r.expiry_ms == expiry;
        self.guarded(lease, "renew", &set, vec![(":expiry", n(expiry))], &shows)
            .await
    }

    async fn checkpoint(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
    ) -> Result<Lease, LeaseError> {
        let set = format!("SET {CHECKPOINT} = :checkpoint");
        let values = vec![(":checkpoint", s(checkpoint.to_stored()))];
        let shows = |r: &Lease| r.owner == lease.owner && r.checkpoint.as_ref() == Some(checkpoint);
        self.guarded(lease, "checkpoint", &set, values, &shows)
            .await
    }

    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        let row = self.get(key).await?;
        if row.as_ref().is_some_and(|r| r.checkpoint.is_some()) {
            return Ok(row);
        }
        match self.legacy(key).await? {
            None => Ok(row),
            Some(Legacy::Refuse(message)) => Err(LeaseError::Refused(message)),
            // What an acquire would start from; the table is left as it is.
            Some(Legacy::Adopt(checkpoint)) => Ok(Some(Lease {
                checkpoint: Some(checkpoint),
                ..row.unwrap_or_else(|| Lease::new(key.clone()))
            })),
        }
    }

    async fn mark_opened(&self, lease: &Lease, at_ms: u64) -> Result<Lease, LeaseError> {
        let set = format!("SET {OPENED} = if_not_exists({OPENED}, :opened)");
        let shows = |r: &Lease| r.owner == lease.owner && r.opened_ms.is_some();
        self.guarded(
            lease,
            "mark opened",
            &set,
            vec![(":opened", n(at_ms))],
            &shows,
        )
        .await
    }

    async fn request_handoff(&self, lease: &Lease, requester: &str) -> Result<bool, LeaseError> {
        let update = format!("SET {HANDOFF_TO} = :to");
        let values = vec![(":to", s(requester))];
        match self
            .conditional(lease, "request handoff", update, UNASKED, values, None)
            .await
        {
            Ok(_) => Ok(true),
            Err(LeaseError::Lost { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        if lease.handoff_to.is_some() {
            // Reserved for the requester until the expiry the holder had.
            let set = format!("SET {COUNTER} = {COUNTER} + :one REMOVE {OWNER}");
            return self
                .conditional(lease, "release", set, HELD, Vec::new(), None)
                .await
                .map(drop);
        }
        let set = format!("REMOVE {OWNER}, {HANDOFF_TO} SET {EXPIRY} = :zero");
        // A release whose answer was lost is not looked into: the row is free either way.
        self.guarded(lease, "release", &set, vec![(":zero", n(0))], &|_| false)
            .await
            .map(drop)
    }
}
