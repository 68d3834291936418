//! What a subscription's state is kept in, as `[subscription.state]` grants it (read and checked
//! by the capability, `capability/state/grant.rs`): the stores are made from it.

use std::time::Duration;

/// `[subscription.state]`: a key-value store the handler reads and writes through
/// `wasi:keyvalue`, its keys kept apart from every other service's and subscription's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateGrant {
    pub store: StateStoreKind,
    /// Items expire this long after their last write; `None` (`ttl = "0"`, the default): never.
    pub ttl: Option<Duration>,
    /// The buckets a handler may open besides `default`.
    pub buckets: Vec<String>,
    /// What every key of the subscription is stored under: `SERVICE/SUBSCRIPTION/` (the
    /// service name with `%` and `/` escaped), then the bucket and `/`.
    pub namespace: String,
    /// Store requests the subscription has open at once, over all its shards. Default
    /// [`defaults::STATE_MAX_IN_FLIGHT`](crate::config::defaults::STATE_MAX_IN_FLIGHT).
    pub max_in_flight: u32,
    /// Per state call; never longer than what is left of the call's timeout. Default
    /// [`defaults::STATE_TIMEOUT`](crate::config::defaults::STATE_TIMEOUT).
    pub timeout: Duration,
    /// `commit`: when writes become durable.
    pub commit: Commit,
}

/// `[subscription.state] commit`
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Commit {
    /// `"immediate"` (the default): each write reaches the store at once.
    #[default]
    Immediate,
    /// `"with-checkpoint"`: a shard's writes are kept and made durable with the checkpoint
    /// that covers the records that made them, in one atomic write (`state::commit`).
    WithCheckpoint,
}

/// `[subscription.state] store`
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StateStoreKind {
    /// In the host's memory: gone when it stops (one instance, the embedded stream, `invoke`).
    Memory,
    /// A DynamoDB table with partition key `key` (S), shared by every instance.
    Dynamo {
        table: String,
        /// `[subscription.state] endpoint`, else the lease table's.
        endpoint: Option<String>,
        region: Option<String>,
        test_credentials: bool,
    },
}
