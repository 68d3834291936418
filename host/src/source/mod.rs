//! Reading shards. [`StreamSource`] lists a stream's shards and opens a [`ShardReader`] on one;
//! a reader hands out that shard's records in order, batch by batch.
//!
//! `kinesis` reads real Kinesis (or an emulator) through aws-sdk-kinesis; `memory` is the
//! embedded in-process stream (the demo, `invoke`, fast tests); `kpl` de-aggregates records
//! written by the Kinesis Producer Library.

pub(crate) mod kinesis;
pub(crate) mod kpl;
pub(crate) mod memory;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_kinesis::error::DisplayErrorContext;

use crate::record::{Position, Record};

/// One shard as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardInfo {
    pub shard_id: String,
    /// The shards this one was split or merged from; it starts only after they all ended.
    pub parents: Vec<String>,
    /// Closed by a split or a merge: no record will be added to it.
    pub closed: bool,
}

/// Where a reader opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartPosition {
    /// Just after this record (a checkpoint).
    After(Position),
    /// At this record (a handler's seek).
    At(Position),
    /// The oldest record still kept.
    TrimHorizon,
    /// Only records put after the reader opened.
    Latest,
    /// The first record that arrived at or after this time (ms since the epoch).
    Timestamp(u64),
}

/// What one read answers.
#[derive(Clone, Debug, Default)]
pub struct ReadBatch {
    /// In shard order; empty when nothing new arrived.
    pub records: Vec<Record>,
    pub millis_behind_latest: Option<u64>,
    /// The shard is closed and this read delivered its last records.
    pub end_of_shard: bool,
}

/// A failure of the stream service, as the SDK reports it (kept whole: its causes and details).
pub type ServiceError = Box<dyn std::error::Error + Send + Sync>;

/// Which call to the stream service failed, on which stream and shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    DescribeStream {
        stream: String,
    },
    CreateStream {
        stream: String,
    },
    ListShards {
        stream: String,
    },
    Put {
        stream: String,
    },
    /// PutRecords: several records in one call.
    PutMany {
        stream: String,
    },
    OpenShard {
        stream: String,
        shard: String,
    },
    ReadShard {
        stream: String,
        shard: String,
    },
    DescribeConsumer {
        stream: String,
        consumer: String,
    },
    RegisterConsumer {
        stream: String,
        consumer: String,
    },
    /// SubscribeToShard (the consumer names its stream).
    Subscribe {
        shard: String,
        consumer: String,
    },
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Call::DescribeStream { stream } => write!(f, "describe stream `{stream}`"),
            Call::CreateStream { stream } => write!(f, "create stream `{stream}`"),
            Call::ListShards { stream } => write!(f, "list shards of `{stream}`"),
            Call::Put { stream } => write!(f, "put a record into `{stream}`"),
            Call::PutMany { stream } => write!(f, "put records into `{stream}`"),
            Call::OpenShard { stream, shard } => write!(f, "open shard `{shard}` of `{stream}`"),
            Call::ReadShard { stream, shard } => write!(f, "read shard `{shard}` of `{stream}`"),
            Call::DescribeConsumer { stream, consumer } => {
                write!(f, "describe consumer `{consumer}` of `{stream}`")
            }
            Call::RegisterConsumer { stream, consumer } => {
                write!(f, "register consumer `{consumer}` on `{stream}`")
            }
            Call::Subscribe { shard, consumer } => {
                write!(f, "subscribe consumer `{consumer}` to shard `{shard}`")
            }
        }
    }
}

/// Why the source failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(
        "stream `{0}` does not exist (set `create_if_missing = <shard count>` on the \
         subscription to create it)"
    )]
    NoSuchStream(String),
    #[error("shard `{shard}` of stream `{stream}` does not exist")]
    NoSuchShard { stream: String, shard: String },
    /// The shard's read limit is spent (Kinesis: 5 reads per second per shard, shared by every
    /// consumer of the stream); read again later.
    #[error("{0}: throttled")]
    Throttled(Call),
    /// A call failed (after the SDK's retries, where it retries). Shown with every cause of
    /// the service's error and its details, as the SDK's `DisplayErrorContext` writes them.
    #[error("{call}: {}", DisplayErrorContext(&**.source))]
    Service {
        call: Call,
        #[source]
        source: ServiceError,
    },
    #[error("stream `{stream}` is still {status} after {waited:?}")]
    NotActive {
        stream: String,
        /// The stream's status as the service names it (`Creating`, say).
        status: String,
        waited: Duration,
    },
    /// The credentials may not make this call: the IAM policy lacks `permission`.
    #[error(
        "{call}: access denied; the host's credentials need the IAM permission `{permission}`: {}",
        DisplayErrorContext(&**.source)
    )]
    AccessDenied {
        call: Box<Call>,
        permission: &'static str,
        #[source]
        source: ServiceError,
    },
    #[error("consumer `{consumer}` is still {status} after {waited:?}")]
    ConsumerNotActive {
        consumer: String,
        /// As the service names it (`Creating`, `Deleting`).
        status: String,
        waited: Duration,
    },
    /// A fan-out reader's subscription task is gone (it panicked): a bug, not a read failure.
    /// The reader can never read again ([`SourceError::ends_reader`]).
    #[error("the subscription of shard `{shard}` ended unexpectedly ({why})")]
    SubscriptionGone { shard: String, why: String },
    #[error("no iterator for shard `{shard}`")]
    NoIterator { stream: String, shard: String },
}

impl SourceError {
    /// Whether the reader can never read again (its fan-out subscription task is gone): the
    /// shard's worker fails, instead of reading again and again at once.
    pub fn ends_reader(&self) -> bool {
        matches!(self, SourceError::SubscriptionGone { .. })
    }
}

/// A shard read before but never checkpointed is opened this long before the time its first
/// reader opened it (and a reader opened at the tip reopens this long before that moment), so
/// that a clock difference between this host and Kinesis loses nothing (what arrived in that
/// margin is delivered again: the documented cost is duplicates).
pub const OPENED_SLACK_MS: u64 = 30_000;

/// Kinesis allows 5 reads per second per shard: reads of one shard start at least this far apart.
pub const KINESIS_READ_INTERVAL: Duration = Duration::from_millis(200);

/// Kinesis allows each shard 2 MiB of reads per second: after a read of 10 MiB, reads of that
/// shard are throttled for the next 5 seconds.
pub const KINESIS_READ_BYTES_PER_SECOND: u64 = 2 << 20;

/// The most records one [`StreamSource::put_many`] call takes (Kinesis' PutRecords limit).
pub const PUT_MANY_RECORDS: usize = 500;

/// The most bytes (data and partition keys together) one [`StreamSource::put_many`] call takes
/// (Kinesis' PutRecords limit: 5 MiB).
pub const PUT_MANY_BYTES: usize = 5 << 20;

/// One record to put: its partition key and data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutEntry {
    pub partition_key: String,
    pub data: Vec<u8>,
}

impl PutEntry {
    /// What it counts towards [`PUT_MANY_BYTES`].
    pub fn size(&self) -> usize {
        self.partition_key.len() + self.data.len()
    }
}

/// What a [`StreamSource::put_many`] answers for each record it tried, in the order given: its
/// sequence number, or why it was not put.
pub type PutAnswers = Vec<Result<String, SourceError>>;

/// A Kinesis-shaped stream service.
#[async_trait]
pub trait StreamSource: Send + Sync + 'static {
    /// How far apart reads of one shard must start ([`KINESIS_READ_INTERVAL`] unless the
    /// service has no read limit).
    fn read_interval(&self) -> Duration {
        KINESIS_READ_INTERVAL
    }

    /// How many bytes a second one shard may be read at ([`KINESIS_READ_BYTES_PER_SECOND`];
    /// `None`: no limit). A read of `n` bytes is followed by the next no sooner than
    /// `n / rate` after it started, so a shard catching up reads at its limit without throttles.
    fn read_bytes_per_second(&self) -> Option<u64> {
        Some(KINESIS_READ_BYTES_PER_SECOND)
    }

    /// Whether records are pushed (enhanced fan-out): a read waits for the next push itself, so
    /// the shard worker adds no wait between reads (no poll interval, no read interval).
    fn pushes(&self) -> bool {
        false
    }

    /// Makes sure `stream` exists; creates it with this many shards when given and missing.
    async fn ensure_stream(&self, stream: &str, create: Option<u32>) -> Result<(), SourceError>;

    /// Every shard of the stream, open and closed.
    async fn list_shards(&self, stream: &str) -> Result<Vec<ShardInfo>, SourceError>;

    /// Opens a reader on one shard.
    async fn open(
        &self,
        stream: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<Box<dyn ShardReader>, SourceError>;

    /// Puts one record; answers its sequence number.
    async fn put(
        &self,
        stream: &str,
        partition_key: &str,
        data: Vec<u8>,
    ) -> Result<String, SourceError>;

    /// Puts `records` into `stream` with one call (Kinesis: PutRecords, at most
    /// [`PUT_MANY_RECORDS`] records and [`PUT_MANY_BYTES`]). Each record is put or fails on its
    /// own; the answer holds one result per record tried, in the order given, and is shorter
    /// than `records` when the rest were not tried. `Err`: the call failed as a whole (nothing
    /// was put, or what was is not known). Records put in one call may land in any order.
    ///
    /// By default one [`StreamSource::put`] each, in order, stopping at the first failure.
    async fn put_many(
        &self,
        stream: &str,
        records: Vec<PutEntry>,
    ) -> Result<PutAnswers, SourceError> {
        let mut answers = Vec::with_capacity(records.len());
        for r in records {
            let answer = self.put(stream, &r.partition_key, r.data).await;
            let failed = answer.is_err();
            answers.push(answer);
            if failed {
                break;
            }
        }
        Ok(answers)
    }
}

/// Reads one shard in order.
#[async_trait]
pub trait ShardReader: Send {
    /// Up to `limit` records after the last ones read.
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError>;
}
