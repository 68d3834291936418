//! The key-value stores handlers keep state in (`[subscription.state]`): in the host's memory
//! ([`memory`]) or in a DynamoDB table shared by a fleet ([`dynamo`]).
//!
//! A store sees whole keys, already namespaced by service, subscription and bucket
//! (`capability/state` puts the prefix on and checks the sizes); it answers with the values or a
//! [`StoreError`], which the guest gets as a `wasi:keyvalue` error, never as a trap.
//!
//! Values are bytes, except counters: `increment` keeps a number the store adds to atomically,
//! which `get` reads back as its decimal text; `set` over a counter replaces it, `increment`
//! over a value `set` wrote is refused ([`StoreError::NotACounter`]).

pub mod commit;
mod grant;
pub use grant::{Commit, StateGrant, StateStoreKind};
pub mod dynamo;
pub mod memory;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

/// The longest key a handler may use, in bytes (before the namespace is put on).
pub const MAX_KEY: usize = 1024;

/// The largest value, in bytes (a DynamoDB item holds 400 KB with its key and attributes).
pub const MAX_VALUE: usize = 350 * 1024;

/// The most keys of one `get-many`, `set-many` or `delete-many`.
pub const MAX_MANY: usize = 10_000;

/// The most bytes of values one `get-many` answers (a key asked twice counts twice): the
/// answer is copied into the guest, and must not cost the host or the guest more.
pub const MAX_ANSWER: usize = 16 << 20;

/// Rounds of a batch request in which DynamoDB processed nothing before the call gives up as
/// throttled.
pub const STALLED_ROUNDS: u32 = 8;

/// Why a store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the key holds a value written by `set`, not a counter: delete it before counting")]
    NotACounter,
    #[error("the counter would pass 2^64 - 1")]
    Overflow,
    #[error("the state table `{table}` throttled the request ({message}): answer retry-after")]
    Throttled { table: String, message: String },
    #[error("the state table `{table}` refused access: {message}")]
    Denied { table: String, message: String },
    #[error(
        "the state table `{table}` does not exist: create it (see docs/handlers/state.md): aws \
         dynamodb create-table --table-name {table} --attribute-definitions \
         AttributeName=key,AttributeType=S --key-schema AttributeName=key,KeyType=HASH \
         --billing-mode PAY_PER_REQUEST"
    )]
    NoTable { table: String },
    #[error("the state table `{table}` is unreachable: {message}")]
    Unreachable { table: String, message: String },
    #[error("the state table `{table}`: {message}")]
    Other { table: String, message: String },
    #[error("the memory state store is full ({limit} bytes): state needs store = \"dynamodb\"")]
    Full { limit: u64 },
    #[error(
        "the values asked for come to more than {} MiB: ask for fewer keys at a time",
        MAX_ANSWER >> 20
    )]
    AnswerTooLarge,
    #[error("{0}")]
    Unsupported(&'static str),
    #[error(
        "the state writes of this replay come to more than its overlay holds ({limit} bytes): \
         replay fewer records"
    )]
    OverlayFull { limit: u64 },
    #[error(
        "the shard's state writes since its checkpoint would come to {items} keys and {bytes} \
         bytes, more than one commit with the checkpoint holds ({} keys, {} bytes): a record \
         must write fewer keys",
        commit::MAX_ITEMS,
        commit::MAX_BYTES
    )]
    CommitFull { items: usize, bytes: u64 },
}

impl StoreError {
    /// The result label of the state call that got this error.
    pub fn metric(&self) -> &'static str {
        match self {
            StoreError::Throttled { .. } => "throttled",
            StoreError::NotACounter
            | StoreError::Overflow
            | StoreError::Unsupported(_)
            | StoreError::AnswerTooLarge
            | StoreError::OverlayFull { .. }
            | StoreError::CommitFull { .. } => "refused",
            _ => "error",
        }
    }
}

/// Counts the requests one state call sends to its store.
#[derive(Debug, Default)]
pub struct Meter {
    requests: AtomicU64,
}

impl Meter {
    pub fn request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// A key-value store. Keys are whole (namespaced) keys; every write sets the grant's expiry.
#[async_trait]
pub trait StateStore: Send + Sync {
    async fn get(&self, m: &Meter, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    async fn set(&self, m: &Meter, key: &str, value: Vec<u8>) -> Result<(), StoreError>;
    async fn delete(&self, m: &Meter, key: &str) -> Result<(), StoreError>;
    /// Adds `delta` to the counter at `key` (from 0 when absent); the new value.
    async fn increment(&self, m: &Meter, key: &str, delta: u64) -> Result<u64, StoreError>;
    /// Writes only when `key` holds nothing (or an expired value); whether it wrote.
    async fn set_if_absent(&self, m: &Meter, key: &str, value: Vec<u8>)
    -> Result<bool, StoreError>;
    /// Writes only when `key` still holds `expected` (a counter's decimal text counts);
    /// whether it wrote.
    async fn compare_and_set(
        &self,
        m: &Meter,
        key: &str,
        expected: &[u8],
        value: Vec<u8>,
    ) -> Result<bool, StoreError>;
    /// The values of `keys`, in their order; [`StoreError::AnswerTooLarge`] past
    /// [`MAX_ANSWER`] bytes of values.
    async fn get_many(
        &self,
        m: &Meter,
        keys: &[String],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError>;
    /// Writes every entry (a key given twice: the last value).
    async fn set_many(&self, m: &Meter, entries: Vec<(String, Vec<u8>)>) -> Result<(), StoreError>;
    async fn delete_many(&self, m: &Meter, keys: &[String]) -> Result<(), StoreError>;
    /// Up to 1 000 keys under `prefix` (whole keys), from `cursor`; the cursor of the rest.
    async fn list_keys(
        &self,
        m: &Meter,
        prefix: &str,
        cursor: Option<u64>,
    ) -> Result<(Vec<String>, Option<u64>), StoreError>;

    /// What `key` holds and its version, for a write committed with the checkpoint
    /// ([`commit`]).
    async fn read_versioned(&self, _: &Meter, _: &str) -> Result<commit::Versioned, StoreError> {
        Err(StoreError::Unsupported(
            "this store cannot commit state with the checkpoint",
        ))
    }

    /// A DynamoDB store: the items of `set` for the checkpoint's transaction.
    fn commit_items(
        &self,
        _: &commit::CommitSet,
    ) -> Option<Vec<aws_sdk_dynamodb::types::TransactWriteItem>> {
        None
    }

    /// A memory store: applies `set` in one step if every key still holds the version it
    /// expects; answers the set that undoes it.
    fn apply_commit(
        &self,
        _: &commit::CommitSet,
    ) -> Option<Result<commit::CommitSet, commit::Conflict>> {
        None
    }
}

/// The stores of one runtime: one memory map for every memory grant (their namespaces keep
/// them apart), one DynamoDB store per table, expiry and request bound, and beside each a
/// store of its own for versions on trial ([`Stores::trial_of`]).
#[derive(Default)]
pub struct Stores {
    memory: Arc<memory::Shared>,
    dynamo: Mutex<HashMap<DynamoKey, Arc<dynamo::DynamoStore>>>,
    trial_dynamo: Mutex<HashMap<DynamoKey, Arc<dynamo::DynamoStore>>>,
}

/// The share of a grant's `max_in_flight` that versions on trial (a shadow, a validation,
/// `replay`) have for their reads: `max_in_flight / TRIAL_SHARE`, at least 1.
pub const TRIAL_SHARE: u32 = 4;

/// One DynamoDB store per subscription (its namespace): `max_in_flight` bounds one
/// subscription's requests.
#[derive(Clone, Hash, PartialEq, Eq)]
struct DynamoKey {
    kind: StateStoreKind,
    namespace: String,
    ttl: Option<Duration>,
    max_in_flight: u32,
}

impl Stores {
    /// The store a grant names (made on first use; nothing is sent until a handler calls it).
    pub fn of(&self, grant: &StateGrant) -> Arc<dyn StateStore> {
        self.store(&self.dynamo, grant, grant.max_in_flight)
    }

    /// The store versions on trial read the grant's state through (their writes never reach
    /// it: see `effects::overlay`): the same table, with permits of its own, a
    /// [`TRIAL_SHARE`]th of `max_in_flight`. A trial stuck on its reads never holds a permit
    /// the version that settles records waits for, and never has more than that share of the
    /// subscription's requests in flight.
    pub fn trial_of(&self, grant: &StateGrant) -> Arc<dyn StateStore> {
        let permits = (grant.max_in_flight / TRIAL_SHARE).max(1);
        self.store(&self.trial_dynamo, grant, permits)
    }

    fn store(
        &self,
        dynamo: &Mutex<HashMap<DynamoKey, Arc<dynamo::DynamoStore>>>,
        grant: &StateGrant,
        permits: u32,
    ) -> Arc<dyn StateStore> {
        match &grant.store {
            StateStoreKind::Memory => {
                Arc::new(memory::MemoryStore::new(self.memory.clone(), grant.ttl))
            }
            StateStoreKind::Dynamo { .. } => {
                let key = DynamoKey {
                    kind: grant.store.clone(),
                    namespace: grant.namespace.clone(),
                    ttl: grant.ttl,
                    max_in_flight: grant.max_in_flight,
                };
                let mut stores = dynamo.lock().unwrap_or_else(|p| p.into_inner());
                stores
                    .entry(key)
                    .or_insert_with(|| {
                        Arc::new(dynamo::DynamoStore::with_permits(grant, permits as usize))
                    })
                    .clone()
            }
        }
    }
}

/// Checks every DynamoDB state table of `grants` at start (each table once): it exists, is
/// keyed by `key` (S) alone and is active. The error names the table and how to create it.
pub async fn check_tables<'a>(
    grants: impl IntoIterator<Item = &'a StateGrant>,
) -> Result<(), StoreError> {
    let mut checked = std::collections::HashSet::new();
    for grant in grants {
        if matches!(grant.store, StateStoreKind::Dynamo { .. })
            && checked.insert(grant.store.clone())
        {
            dynamo::DynamoStore::new(grant).check_table().await?;
        }
    }
    Ok(())
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A counter's value as `get` reads it: its decimal text.
pub(crate) fn counter_text(n: u64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// The counter a compare-and-set's `expected` names, when it is a counter's decimal text.
pub(crate) fn counter_of(expected: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(expected).ok()?;
    let n: u64 = text.parse().ok()?;
    (n.to_string() == text).then_some(n)
}
