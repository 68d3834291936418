//! [`KinesisApi`] on aws-sdk-kinesis: the client's calls, their answers in our types, their
//! failures sorted by the service's error code (the SDK's error kept whole as the source).

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::primitives::event_stream::EventReceiver;
use aws_sdk_kinesis::types::error::SubscribeToShardEventStreamError;
use aws_sdk_kinesis::types::{ShardIteratorType, StartingPosition, SubscribeToShardEventStream};

use super::api::{
    ApiError, ApiErrorKind, GotRecords, IteratorAt, KinesisApi, ShardEvent, ShardEvents,
};
use crate::record::Record;

/// The SDK client as a [`KinesisApi`].
#[derive(Clone, Debug)]
pub(super) struct SdkApi {
    pub client: Client,
}

/// `e` sorted by the service's error code.
fn api_error<E, R>(e: SdkError<E, R>) -> ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let kind = match e.as_service_error().and_then(ProvideErrorMetadata::code) {
        Some("ExpiredIteratorException") => ApiErrorKind::ExpiredIterator,
        Some("ProvisionedThroughputExceededException" | "KMSThrottlingException") => {
            ApiErrorKind::Throttled
        }
        Some("LimitExceededException") => ApiErrorKind::LimitExceeded,
        Some("ResourceInUseException") => ApiErrorKind::InUse,
        Some("AccessDeniedException") => ApiErrorKind::Denied,
        _ => ApiErrorKind::Other,
    };
    ApiError::new(kind, Box::new(e))
}

/// A stored record as the SDK answered it (an aggregate whole).
fn stored(r: aws_sdk_kinesis::types::Record) -> Record {
    Record {
        partition_key: r.partition_key.unwrap_or_default().into(),
        approximate_arrival_timestamp: r
            .approximate_arrival_timestamp
            .and_then(|t| t.to_millis().ok())
            .unwrap_or(0)
            .max(0) as u64,
        sequence_number: r.sequence_number,
        sub_sequence_number: 0,
        data: r.data.into_inner(),
    }
}

#[async_trait]
impl KinesisApi for SdkApi {
    async fn get_shard_iterator(
        &self,
        stream: &str,
        shard: &str,
        at: &IteratorAt,
    ) -> Result<Option<String>, ApiError> {
        let request = self
            .client
            .get_shard_iterator()
            .stream_name(stream)
            .shard_id(shard);
        let request = match at {
            IteratorAt::AtSequence(s) => request
                .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
                .starting_sequence_number(s),
            IteratorAt::AfterSequence(s) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .starting_sequence_number(s),
            IteratorAt::TrimHorizon => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            IteratorAt::Latest => request.shard_iterator_type(ShardIteratorType::Latest),
            IteratorAt::Timestamp(ms) => request
                .shard_iterator_type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(*ms as i64)),
        };
        let out = request.send().await.map_err(api_error)?;
        Ok(out.shard_iterator)
    }

    async fn get_records(&self, iterator: &str, limit: usize) -> Result<GotRecords, ApiError> {
        // No SDK retries: a throttled read is the shard's read limit, which the shard worker
        // paces (and counts); any other failure is tried again by the worker too.
        let out = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(limit.clamp(1, crate::config::MAX_READ_RECORDS) as i32)
            .customize()
            .config_override(
                aws_sdk_kinesis::config::Builder::default().retry_config(RetryConfig::disabled()),
            )
            .send()
            .await
            .map_err(api_error)?;
        Ok(GotRecords {
            millis_behind_latest: out.millis_behind_latest.map(|m| m.max(0) as u64),
            next_iterator: out.next_shard_iterator,
            records: out.records.into_iter().map(stored).collect(),
        })
    }

    async fn subscribe(
        &self,
        consumer_arn: &str,
        shard: &str,
        at: &IteratorAt,
    ) -> Result<Box<dyn ShardEvents>, ApiError> {
        let position = StartingPosition::builder();
        let position = match at {
            IteratorAt::AtSequence(s) => position
                .r#type(ShardIteratorType::AtSequenceNumber)
                .sequence_number(s),
            IteratorAt::AfterSequence(s) => position
                .r#type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(s),
            IteratorAt::TrimHorizon => position.r#type(ShardIteratorType::TrimHorizon),
            IteratorAt::Latest => position.r#type(ShardIteratorType::Latest),
            IteratorAt::Timestamp(ms) => position
                .r#type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(*ms as i64)),
        };
        let position = position.build().expect("the type is always set");
        let out = self
            .client
            .subscribe_to_shard()
            .consumer_arn(consumer_arn)
            .shard_id(shard)
            .starting_position(position)
            .send()
            .await
            .map_err(api_error)?;
        Ok(Box::new(SdkEvents(out.event_stream)))
    }
}

/// A SubscribeToShard's event stream.
struct SdkEvents(EventReceiver<SubscribeToShardEventStream, SubscribeToShardEventStreamError>);

#[async_trait]
impl ShardEvents for SdkEvents {
    async fn next(&mut self) -> Result<Option<ShardEvent>, ApiError> {
        loop {
            match self.0.recv().await.map_err(api_error)? {
                Some(SubscribeToShardEventStream::SubscribeToShardEvent(event)) => {
                    return Ok(Some(ShardEvent {
                        records: event.records.into_iter().map(stored).collect(),
                        continuation: event.continuation_sequence_number,
                        millis_behind_latest: event.millis_behind_latest.max(0) as u64,
                    }));
                }
                Some(_) => continue,
                None => return Ok(None),
            }
        }
    }
}
