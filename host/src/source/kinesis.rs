//! Reading real Kinesis (or an emulator) through aws-sdk-kinesis: GetRecords polling.
//!
//! - Throttling (`ProvisionedThroughputExceeded`, `LimitExceeded`) and transport errors are
//!   retried by the SDK's standard retry strategy (exponential backoff with jitter), except for
//!   GetRecords: a throttled or failed read is answered at once, and the shard worker paces
//!   and counts reads (see `dispatch::read`).
//! - A reader resumes *at* its checkpoint's sequence number and skips every record up to the
//!   checkpoint, so a checkpoint may stand between the user records of one KPL aggregate.
//! - An expired iterator is reopened just after the last delivered record: nothing is skipped or
//!   repeated by that.
//! - A closed shard ends when GetRecords answers no next iterator (the emulator's
//!   EndingSequenceNumber is not to be trusted).

use std::time::Duration;

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::error::SdkError;
use aws_sdk_kinesis::operation::get_records::GetRecordsOutput;
use aws_sdk_kinesis::primitives::{Blob, DateTime};
use aws_sdk_kinesis::types::{ShardIteratorType, StreamStatus};

use super::kpl;
use super::{Call, ReadBatch, ShardInfo, ShardReader, SourceError, StartPosition, StreamSource};
use crate::config::{KinesisConfig, KinesisEndpoint};
use crate::record::{Position, Record};

/// How long `ensure_stream` waits for a stream to become ACTIVE.
const ACTIVE_WAIT: Duration = Duration::from_secs(120);

/// A Kinesis service reached through the AWS SDK.
#[derive(Clone, Debug)]
pub struct KinesisStreams {
    client: Client,
}

/// A failed SDK call, with the SDK's error (and so all its causes) as the source.
fn sdk_error<E, R>(call: Call, e: SdkError<E, R>) -> SourceError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    SourceError::Service {
        call,
        source: Box::new(e),
    }
}

impl KinesisStreams {
    /// A client from `[kinesis]`: the endpoint (else the AWS chain, which honours
    /// `AWS_ENDPOINT_URL_KINESIS`), the region, and static dummy credentials when
    /// `test_credentials` is set.
    pub async fn connect(config: &KinesisConfig) -> KinesisStreams {
        let endpoint = crate::aws::Endpoint {
            url: match &config.endpoint {
                KinesisEndpoint::Url(url) => Some(url),
                _ => None,
            },
            region: config.region.as_deref(),
            test_credentials: config.test_credentials,
        };
        let sdk = crate::aws::sdk_config(
            &endpoint,
            RetryConfig::standard()
                .with_max_attempts(8)
                .with_initial_backoff(Duration::from_millis(100))
                .with_max_backoff(Duration::from_secs(5)),
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(15))
                .build(),
        )
        .await;
        KinesisStreams {
            client: Client::new(&sdk),
        }
    }

    /// The stream's status, or `None` when it does not exist.
    async fn status(&self, stream: &str) -> Result<Option<StreamStatus>, SourceError> {
        match self
            .client
            .describe_stream_summary()
            .stream_name(stream)
            .send()
            .await
        {
            Ok(out) => Ok(out
                .stream_description_summary()
                .map(|s| s.stream_status().clone())),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                Ok(None)
            }
            Err(e) => Err(sdk_error(
                Call::DescribeStream {
                    stream: stream.to_owned(),
                },
                e,
            )),
        }
    }
}

#[async_trait]
impl StreamSource for KinesisStreams {
    async fn ensure_stream(&self, stream: &str, create: Option<u32>) -> Result<(), SourceError> {
        let mut status = self.status(stream).await?;
        if status.is_none() {
            let Some(shards) = create else {
                return Err(SourceError::NoSuchStream(stream.to_owned()));
            };
            tracing::info!(stream, shards, "creating stream (create_if_missing)");
            let created = self
                .client
                .create_stream()
                .stream_name(stream)
                .shard_count(shards as i32)
                .send()
                .await;
            if let Err(e) = created
                && !e
                    .as_service_error()
                    .is_some_and(|s| s.is_resource_in_use_exception())
            {
                return Err(sdk_error(
                    Call::CreateStream {
                        stream: stream.to_owned(),
                    },
                    e,
                ));
            }
            status = self.status(stream).await?;
        }
        let deadline = tokio::time::Instant::now() + ACTIVE_WAIT;
        loop {
            match status {
                Some(StreamStatus::Active) | Some(StreamStatus::Updating) => return Ok(()),
                None => return Err(SourceError::NoSuchStream(stream.to_owned())),
                Some(other) if tokio::time::Instant::now() >= deadline => {
                    return Err(SourceError::NotActive {
                        stream: stream.to_owned(),
                        status: format!("{other:?}"),
                        waited: ACTIVE_WAIT,
                    });
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
            status = self.status(stream).await?;
        }
    }

    async fn list_shards(&self, stream: &str) -> Result<Vec<ShardInfo>, SourceError> {
        let mut shards = Vec::new();
        let mut token: Option<String> = None;
        loop {
            // ListShards takes the stream name or a next token, never both.
            let request = match &token {
                Some(t) => self.client.list_shards().next_token(t),
                None => self.client.list_shards().stream_name(stream),
            };
            let out = request.send().await.map_err(|e| {
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception())
                {
                    SourceError::NoSuchStream(stream.to_owned())
                } else {
                    sdk_error(
                        Call::ListShards {
                            stream: stream.to_owned(),
                        },
                        e,
                    )
                }
            })?;
            for s in out.shards() {
                shards.push(ShardInfo {
                    shard_id: s.shard_id().to_owned(),
                    parents: [s.parent_shard_id(), s.adjacent_parent_shard_id()]
                        .into_iter()
                        .flatten()
                        .map(str::to_owned)
                        .collect(),
                    closed: s
                        .sequence_number_range()
                        .is_some_and(|r| r.ending_sequence_number().is_some()),
                });
            }
            token = out.next_token().map(str::to_owned);
            if token.is_none() {
                return Ok(shards);
            }
        }
    }

    async fn open(
        &self,
        stream: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<Box<dyn ShardReader>, SourceError> {
        let mut reader = KinesisReader {
            client: self.client.clone(),
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            start: start.clone(),
            iterator: None,
            skip: None,
            ended: false,
        };
        reader.iterator = Some(reader.open_iterator().await?);
        Ok(Box::new(reader))
    }

    async fn put(
        &self,
        stream: &str,
        partition_key: &str,
        data: Vec<u8>,
    ) -> Result<String, SourceError> {
        let out = self
            .client
            .put_record()
            .stream_name(stream)
            .partition_key(partition_key)
            .data(Blob::new(data))
            .send()
            .await
            .map_err(|e| {
                sdk_error(
                    Call::Put {
                        stream: stream.to_owned(),
                    },
                    e,
                )
            })?;
        Ok(out.sequence_number().to_owned())
    }
}

struct KinesisReader {
    client: Client,
    stream: String,
    shard_id: String,
    /// Where the next iterator opens: the original start until a record is delivered, then
    /// just after the last delivered one.
    start: StartPosition,
    iterator: Option<String>,
    /// Set when an iterator opens at a position: records before it (and, for `After`, the one
    /// at it) were delivered or checkpointed already. Cleared once a later record arrives.
    skip: Option<Skip>,
    ended: bool,
}

/// What an iterator opened AT a sequence number must drop from its first reads.
enum Skip {
    /// Records up to and including this one.
    Through(Position),
    /// Records before this one (the sub-records of an aggregate before a seek target).
    Before(Position),
}

impl KinesisReader {
    /// This reader's GetRecords call, for errors.
    fn call(&self) -> Call {
        Call::ReadShard {
            stream: self.stream.clone(),
            shard: self.shard_id.clone(),
        }
    }

    async fn open_iterator(&mut self) -> Result<String, SourceError> {
        self.skip = match &self.start {
            StartPosition::After(p) => Some(Skip::Through(p.clone())),
            StartPosition::At(p) => Some(Skip::Before(p.clone())),
            _ => None,
        };
        let request = self
            .client
            .get_shard_iterator()
            .stream_name(&self.stream)
            .shard_id(&self.shard_id);
        let request = match &self.start {
            // AT, not AFTER: the position may stand inside an aggregate; `skip` drops
            // what was already handled.
            StartPosition::After(p) | StartPosition::At(p) => request
                .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
                .starting_sequence_number(p.sequence_number()),
            StartPosition::TrimHorizon => {
                request.shard_iterator_type(ShardIteratorType::TrimHorizon)
            }
            StartPosition::Latest => request.shard_iterator_type(ShardIteratorType::Latest),
            StartPosition::Timestamp(ms) => request
                .shard_iterator_type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(*ms as i64)),
        };
        let out = request.send().await.map_err(|e| {
            sdk_error(
                Call::OpenShard {
                    stream: self.stream.clone(),
                    shard: self.shard_id.clone(),
                },
                e,
            )
        })?;
        out.shard_iterator()
            .map(str::to_owned)
            .ok_or_else(|| SourceError::NoIterator {
                stream: self.stream.clone(),
                shard: self.shard_id.clone(),
            })
    }
}

impl KinesisReader {
    /// One GetRecords on the shard's iterator (opened first if there is none); an expired
    /// iterator is reopened once, after the last delivered record.
    async fn get_records(&mut self, limit: usize) -> Result<GetRecordsOutput, SourceError> {
        let mut reopened = false;
        loop {
            let iterator = match self.iterator.take() {
                Some(it) => it,
                None => self.open_iterator().await?,
            };
            // No SDK retries here: a throttled read is the shard's read limit, which the
            // worker paces (and counts); any other failure is tried again by the worker too.
            let sent = self
                .client
                .get_records()
                .shard_iterator(&iterator)
                .limit(limit.clamp(1, crate::config::MAX_READ_RECORDS) as i32)
                .customize()
                .config_override(
                    aws_sdk_kinesis::config::Builder::default()
                        .retry_config(RetryConfig::disabled()),
                )
                .send()
                .await;
            match sent {
                Ok(out) => return Ok(out),
                Err(e)
                    if !reopened
                        && e.as_service_error()
                            .is_some_and(|s| s.is_expired_iterator_exception()) =>
                {
                    tracing::debug!(
                        "shard iterator expired; reopening after the last delivered record"
                    );
                    reopened = true;
                }
                Err(e) => {
                    // Keep the iterator for the next try unless the error says it is spent.
                    self.iterator = Some(iterator);
                    if e.as_service_error().is_some_and(|s| {
                        s.is_provisioned_throughput_exceeded_exception()
                            || s.is_kms_throttling_exception()
                    }) {
                        return Err(SourceError::Throttled(self.call()));
                    }
                    return Err(sdk_error(self.call(), e));
                }
            }
        }
    }
}

/// The user records of a read: KPL aggregates taken apart (a corrupt one delivered whole, and
/// logged).
fn user_records(records: Vec<aws_sdk_kinesis::types::Record>) -> Vec<Record> {
    let raw: Vec<Record> = records
        .into_iter()
        .map(|r| Record {
            partition_key: r.partition_key.unwrap_or_default().into(),
            approximate_arrival_timestamp: r
                .approximate_arrival_timestamp
                .and_then(|t| t.to_millis().ok())
                .unwrap_or(0)
                .max(0) as u64,
            sequence_number: r.sequence_number,
            sub_sequence_number: 0,
            data: r.data.into_inner(),
        })
        .collect();
    kpl::deaggregate_all(raw, |record, reason| {
        tracing::warn!(
            sequence_number = %record.sequence_number,
            "corrupt KPL aggregate delivered as one plain record: {reason}"
        );
    })
}

#[async_trait]
impl ShardReader for KinesisReader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        if self.ended {
            return Ok(ReadBatch {
                end_of_shard: true,
                ..ReadBatch::default()
            });
        }
        let out = self.get_records(limit).await?;
        let millis_behind_latest = out.millis_behind_latest().map(|m| m.max(0) as u64);
        self.iterator = out.next_shard_iterator().map(str::to_owned);
        self.ended = self.iterator.is_none();
        let mut records = user_records(out.records);
        match &self.skip {
            Some(Skip::Through(p)) => records.retain(|r| r.position() > *p),
            Some(Skip::Before(p)) => records.retain(|r| r.position() >= *p),
            None => {}
        }
        if let Some(last) = records.last() {
            self.start = StartPosition::After(last.position());
            self.skip = None;
        }
        Ok(ReadBatch {
            records,
            millis_behind_latest,
            end_of_shard: self.ended,
        })
    }
}
