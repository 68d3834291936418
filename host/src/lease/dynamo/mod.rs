//! Leases in a DynamoDB table shared by many instances, in the layout ruststream-kinesis 0.7
//! writes, so a service moves between that crate and shardhost on the same table.
//!
//! The table has one string partition key, `lease_key`, and nothing else. One row holds one shard
//! of one stream, with exactly these attributes:
//!
//! | attribute       | type | value                                                   |
//! |-----------------|------|---------------------------------------------------------|
//! | `lease_key`     | S    | `stream:shard` (or `stream:shard#SUBSCRIPTION`, below)  |
//! | `lease_owner`   | S    | the holder; absent while nobody holds it                |
//! | `lease_expiry`  | N    | ms since the Unix epoch; 0 after a release              |
//! | `lease_counter` | N    | +1 on every write                                       |
//! | `checkpoint`    | S    | a sequence number, `SEQ/SUB` in a KPL aggregate, or `SHARD_END` |
//!
//! shardhost adds three attributes of its own, which other readers of the table ignore:
//! `opened_at` (N, when a reader first opened the shard while it had no checkpoint),
//! `handoff_to` (S, the owner a handoff was asked for; see [`LeaseState`](super::LeaseState))
//! and `subscription` (S, the subscription that took the row: a row is never taken, read or
//! written for another subscription, which is refused with [`LeaseError::Refused`]).
//!
//! A subscription whose rows are its own ([`LeaseRows::Subscription`](super::LeaseRows)) keys
//! them `stream:shard#SUBSCRIPTION`; while such a row has no checkpoint, it starts from the
//! checkpoint of the shared `stream:shard` row when that row names the same subscription (it
//! read through the shared rows before it had rows of its own).
//!
//! Every write is a conditional UpdateItem: acquire on the row being free, expired or already the
//! caller's; renew, checkpoint and release on the owner and counter the caller last saw. Rows keyed
//! by a bare shard id are earlier-version rows, read only through `legacy_stream` (see `legacy`).
//!
//! Rows whose key starts with `#` are shardhost's own and never meet a lease row: the fleet's
//! rows (its envelope key, desired handler versions and their bytes, heartbeats, rollouts and
//! shadows) are kept beside the leases by the fleet table, on this store's client
//! (`DynamoLeaseStore::client`), never through this store.

mod commit;
mod legacy;
pub(crate) mod row;
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

use super::{Checkpoint, Lease, LeaseError, LeaseKey, LeaseRows, LeaseStore, now_ms};
use legacy::Legacy;
use row::{CHECKPOINT, COUNTER, EXPIRY, HANDOFF_TO, KEY, OPENED, OWNER, n, s};
use write::{HELD, UNASKED};

/// A [`LeaseStore`] in a DynamoDB table (`[leases] store = "dynamodb"`).
///
/// The service's credentials need `dynamodb:GetItem` and `dynamodb:UpdateItem` on the table,
/// `dynamodb:DescribeTable` for [`check_table`](Self::check_table); the fleet's rows beside the
/// leases need `dynamodb:DeleteItem` and `dynamodb:Scan` too (see the fleet table).
#[derive(Debug)]
pub struct DynamoLeaseStore {
    client: Client,
    table: String,
    endpoint: Option<String>,
    legacy_stream: Option<String>,
    /// The checkpoint of each bare (earlier-version) row looked at so far, by shard id.
    bare_rows: Mutex<HashMap<String, Option<Checkpoint>>>,
    /// For each subscription's own row looked at so far, the checkpoint the shared row of its
    /// shard holds for the same subscription (see [`Self::inherited`]).
    shared_rows: Mutex<HashMap<LeaseKey, Option<Checkpoint>>>,
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
            shared_rows: Mutex::default(),
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

    /// The row of `key` as stored, without looking at earlier-version rows. A row another
    /// subscription took is refused.
    async fn get(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        let item = self.get_item(&key.to_string()).await?;
        let lease = item
            .map(|item| row::lease(&self.table, key, &item))
            .transpose()?;
        self.note(lease.as_ref());
        Ok(lease)
    }

    /// The item keyed `name`, read consistently.
    async fn get_item(&self, name: &str) -> Result<Option<row::Item>, LeaseError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(name))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.sdk_error("read", name, e))?;
        Ok(out.item().cloned())
    }

    /// The checkpoint a subscription's own row starts from while it has none: the shared row's
    /// of the same shard, when that row names this subscription (taken by it before it had rows
    /// of its own: a second subscription on its stream, or `lease_key = "subscription"`, moved
    /// it). Read once per row and store.
    async fn inherited(&self, key: &LeaseKey) -> Result<Option<Checkpoint>, LeaseError> {
        if key.rows != LeaseRows::Subscription || key.subscription.is_none() {
            return Ok(None);
        }
        let cached = self
            .shared_rows
            .lock()
            .expect("shared rows poisoned")
            .get(key)
            .cloned();
        if let Some(cached) = cached {
            return Ok(cached);
        }
        let shared = key.shared().to_string();
        let checkpoint = match self.get_item(&shared).await? {
            Some(item) if row::claim(&self.table, &shared, &item)? == key.subscription => {
                row::checkpoint(&self.table, &shared, &item)?
            }
            _ => None,
        };
        self.shared_rows
            .lock()
            .expect("shared rows poisoned")
            .insert(key.clone(), checkpoint.clone());
        Ok(checkpoint)
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
        sdk_error(&self.table, what, row, e)
    }

    /// The DynamoDB client this store sends with: the fleet's rows beside the leases go
    /// through it too.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }
}

/// A store error naming what was done, on which row of which lease table.
pub(crate) fn sdk_error<E, R>(table: &str, what: &str, row: &str, e: SdkError<E, R>) -> LeaseError
where
    E: std::error::Error + ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
{
    let service = e.as_service_error();
    let code = service.and_then(|s| s.code());
    if code == Some("ResourceNotFoundException") {
        return LeaseError::Store(format!(
            "{what} `{row}`: lease table `{table}` does not exist"
        ));
    }
    let detail = match (code, service.and_then(|s| s.message())) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        _ => DisplayErrorContext(&e).to_string(),
    };
    LeaseError::Store(format!("{what} `{row}` in lease table `{table}`: {detail}"))
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
            && let Some(checkpoint) = self.inherited(key).await?
            && self.get(key).await?.is_none_or(|r| r.checkpoint.is_none())
        {
            let from = format!(
                "the shared row `{}`, which this subscription wrote",
                key.shared()
            );
            return self.adopt(key, owner, ttl, &checkpoint, &from).await;
        }
        if !self.has_checkpoint(key)
            && let Some(legacy) = self.legacy(key).await?
        {
            let has_own = self.get(key).await?.is_some_and(|r| r.checkpoint.is_some());
            match legacy {
                _ if has_own => {}
                Legacy::Refuse(message) => return Err(LeaseError::Refused(message)),
                Legacy::Adopt(checkpoint) => {
                    let from =
                        format!("the earlier-version row `{}` (legacy_stream)", key.shard_id);
                    return self.adopt(key, owner, ttl, &checkpoint, &from).await;
                }
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

    async fn checkpoint_with(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
        items: &[aws_sdk_dynamodb::types::TransactWriteItem],
    ) -> Result<Lease, LeaseError> {
        self.checkpoint_with_items(lease, checkpoint, items).await
    }

    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        let row = self.get(key).await?;
        if row.as_ref().is_some_and(|r| r.checkpoint.is_some()) {
            return Ok(row);
        }
        if let Some(checkpoint) = self.inherited(key).await? {
            // What an acquire would start from; the table is left as it is.
            return Ok(Some(Lease {
                checkpoint: Some(checkpoint),
                ..row.unwrap_or_else(|| Lease::new(key.clone()))
            }));
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
