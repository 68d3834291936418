//! The few Kinesis calls the shard readers make, as a trait of our own: [`KinesisApi`]
//! (GetShardIterator, GetRecords, SubscribeToShard) answering our own types. The SDK's client is
//! one implementation (`sdk_api.rs`); a simulated stream is another, so the seeded simulation
//! runs the real polling and fan-out readers (`open.rs`): their
//! iterators, expiry, reopening, skips, subscriptions and end-of-shard rules.
//!
//! What an implementation must do, as Kinesis does:
//! - `get_shard_iterator` answers an iterator at the position (`None`: the service gave none);
//!   `Latest` is the tip when the call is answered, `Timestamp` the first record that arrived at
//!   or after it.
//! - `get_records` answers up to `limit` records after the iterator, as stored (a KPL aggregate
//!   is one record, sub-sequence 0: the readers take it apart), the next iterator (none: the
//!   shard is closed and read to its end), and how far behind the tip the read is. An iterator
//!   past its life answers [`ApiErrorKind::ExpiredIterator`]; a read over the shard's limit
//!   [`ApiErrorKind::Throttled`].
//! - `subscribe` answers a stream of [`ShardEvent`]s from the position: each event's records,
//!   the continuation sequence number the next subscription starts after (empty: the shard
//!   ended; no event follows), and the lag. The stream answers `Ok(None)` when the service ends
//!   the subscription (Kinesis: after 5 minutes), an error when it fails. A second subscription
//!   of the same consumer and shard within 5 s answers [`ApiErrorKind::InUse`].

use async_trait::async_trait;

use crate::record::Record;
use crate::source::{Call, ServiceError, SourceError, StartPosition};

/// Where an iterator or a subscription starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IteratorAt {
    AtSequence(String),
    AfterSequence(String),
    TrimHorizon,
    Latest,
    /// Milliseconds since the epoch.
    Timestamp(u64),
}

impl IteratorAt {
    /// Where a reader at `start` opens: AT a checkpoint's or seek's sequence number, not after
    /// (it may stand inside an aggregate; the reader's skip drops what was handled).
    pub(super) fn of(start: &StartPosition) -> IteratorAt {
        match start {
            StartPosition::After(p) | StartPosition::At(p) => {
                IteratorAt::AtSequence(p.sequence_number().to_owned())
            }
            StartPosition::TrimHorizon => IteratorAt::TrimHorizon,
            StartPosition::Latest => IteratorAt::Latest,
            StartPosition::Timestamp(ms) => IteratorAt::Timestamp(*ms),
        }
    }
}

/// What GetRecords answered.
#[derive(Clone, Debug, Default)]
pub struct GotRecords {
    /// As stored: an aggregate is one record (sub-sequence 0).
    pub records: Vec<Record>,
    /// `None`: the shard is closed and this read reached its end.
    pub next_iterator: Option<String>,
    pub millis_behind_latest: Option<u64>,
}

/// One SubscribeToShard event.
#[derive(Clone, Debug, Default)]
pub struct ShardEvent {
    /// As stored, in shard order (possibly none).
    pub records: Vec<Record>,
    /// Where the next subscription starts (after it); empty: the shard ended.
    pub continuation: String,
    pub millis_behind_latest: u64,
}

/// The events of one subscription.
#[async_trait]
pub trait ShardEvents: Send {
    /// The next event; `Ok(None)` when the service ended the subscription.
    async fn next(&mut self) -> Result<Option<ShardEvent>, ApiError>;
}

/// What kind of failure a call answered: what the readers tell apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// The shard iterator is past its life (Kinesis: 5 minutes).
    ExpiredIterator,
    /// ProvisionedThroughputExceeded or KMS throttling: the shard's (or key's) limit.
    Throttled,
    /// LimitExceeded (SubscribeToShard: more than one a second per shard and consumer).
    LimitExceeded,
    /// ResourceInUse (another subscription of the consumer holds the shard).
    InUse,
    /// AccessDenied: the credentials may not make the call.
    Denied,
    /// Anything else: a transport failure, a missing shard, a timeout.
    Other,
}

/// A failed call: its kind and the service's error, whole (its causes and details).
#[derive(Debug, thiserror::Error)]
#[error("{kind:?}: {source}")]
pub struct ApiError {
    pub kind: ApiErrorKind,
    #[source]
    pub source: ServiceError,
}

impl ApiError {
    pub fn new(kind: ApiErrorKind, source: impl Into<ServiceError>) -> ApiError {
        ApiError {
            kind,
            source: source.into(),
        }
    }

    /// `call` failed with this error (the service's error whole, as the source).
    pub(super) fn failed(self, call: Call) -> SourceError {
        SourceError::Service {
            call,
            source: self.source,
        }
    }

    /// As [`ApiError::failed`], but access denied names the IAM permission `call` needs.
    pub(super) fn failed_needing(self, call: Call, permission: &'static str) -> SourceError {
        match self.kind {
            ApiErrorKind::Denied => SourceError::AccessDenied {
                call: Box::new(call),
                permission,
                source: self.source,
            },
            _ => self.failed(call),
        }
    }
}

/// The Kinesis calls a shard reader makes.
#[async_trait]
pub trait KinesisApi: Send + Sync + 'static {
    async fn get_shard_iterator(
        &self,
        stream: &str,
        shard: &str,
        at: &IteratorAt,
    ) -> Result<Option<String>, ApiError>;

    async fn get_records(&self, iterator: &str, limit: usize) -> Result<GotRecords, ApiError>;

    async fn subscribe(
        &self,
        consumer_arn: &str,
        shard: &str,
        at: &IteratorAt,
    ) -> Result<Box<dyn ShardEvents>, ApiError>;
}
