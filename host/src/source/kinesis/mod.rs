//! Reading real Kinesis (or an emulator) through aws-sdk-kinesis: GetRecords polling, or
//! enhanced fan-out ([`KinesisStreams::fan_out`]: SubscribeToShard through a registered consumer).
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
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::{PutRecordsRequestEntry, PutRecordsResultEntry, StreamStatus};

pub mod api;
#[cfg(test)]
mod api_tests;
mod consumer;
mod end_probe;
mod fanout;
mod open;
pub use open::{open_fan_out, open_polling};
mod reader;
mod sdk_api;
mod subscription;

use std::sync::Arc;

use api::KinesisApi;
use reader::KinesisReader;
use sdk_api::SdkApi;
use subscription::Consumer;

use super::{
    Call, PutAnswers, PutEntry, ShardInfo, ShardReader, SourceError, StartPosition, StreamSource,
};
use crate::config::{KinesisConfig, KinesisEndpoint};

/// How long `ensure_stream` waits for a stream (and `consumer` for a consumer) to become ACTIVE.
const ACTIVE_WAIT: Duration = Duration::from_secs(120);

/// A Kinesis service reached through the AWS SDK.
#[derive(Clone, Debug)]
pub struct KinesisStreams {
    client: Client,
    /// The calls shard readers make, on `client`.
    api: Arc<SdkApi>,
    /// Set: shards are read by enhanced fan-out through this consumer.
    consumer: Option<Consumer>,
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
            // Checked whole when the config was read; a file gone since is an error there too.
            ca_pem: config.ca_file.as_ref().and_then(|f| std::fs::read(f).ok()),
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
                // Every attempt of a call together: a put or read never waits longer than this,
                // whatever the retries (8 attempts of 15 s would be two minutes).
                .operation_timeout(Duration::from_secs(30))
                .build(),
        )
        .await;
        let client = Client::new(&sdk);
        KinesisStreams {
            api: Arc::new(SdkApi {
                client: client.clone(),
            }),
            client,
            consumer: None,
        }
    }

    /// The same streams, their shards read by enhanced fan-out through consumer `name`
    /// (registered and ACTIVE: [`KinesisStreams::consumer`]) instead of GetRecords.
    pub fn fan_out(&self, name: &str, arn: &str) -> KinesisStreams {
        KinesisStreams {
            client: self.client.clone(),
            api: self.api.clone(),
            consumer: Some(Consumer {
                name: name.into(),
                arn: arn.into(),
            }),
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
    /// A consumer has the shard's pushes to itself: no read limit to pace.
    fn read_interval(&self) -> Duration {
        match self.consumer {
            Some(_) => Duration::ZERO,
            None => super::KINESIS_READ_INTERVAL,
        }
    }

    fn read_bytes_per_second(&self) -> Option<u64> {
        match self.consumer {
            Some(_) => None,
            None => Some(super::KINESIS_READ_BYTES_PER_SECOND),
        }
    }

    fn pushes(&self) -> bool {
        self.consumer.is_some()
    }

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
        if let Some(consumer) = &self.consumer {
            return Ok(fanout::open(
                self.api.clone() as Arc<dyn KinesisApi>,
                consumer,
                stream,
                shard_id,
                start,
            ));
        }
        let api = self.api.clone() as Arc<dyn KinesisApi>;
        let reader = KinesisReader::open(api, stream, shard_id, start).await?;
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

    /// One PutRecords call. A record its answer names an error for failed on its own (a
    /// throttle: `ProvisionedThroughputExceeded`, `KMSThrottlingException`).
    async fn put_many(
        &self,
        stream: &str,
        records: Vec<PutEntry>,
    ) -> Result<PutAnswers, SourceError> {
        let call = || Call::PutMany {
            stream: stream.to_owned(),
        };
        let entries = records
            .into_iter()
            .map(|r| {
                PutRecordsRequestEntry::builder()
                    .partition_key(r.partition_key)
                    .data(Blob::new(r.data))
                    .build()
                    .expect("a partition key and data are set")
            })
            .collect();
        let out = self
            .client
            .put_records()
            .stream_name(stream)
            .set_records(Some(entries))
            .send()
            .await
            .map_err(|e| consumer::call_error(call(), "kinesis:PutRecords", e))?;
        Ok(out
            .records()
            .iter()
            .map(|r| put_answer(r, call()))
            .collect())
    }
}

/// One record's answer in a PutRecords response.
fn put_answer(r: &PutRecordsResultEntry, call: Call) -> Result<String, SourceError> {
    match (r.sequence_number(), r.error_code()) {
        (Some(seq), None) => Ok(seq.to_owned()),
        (_, Some("ProvisionedThroughputExceededException" | "KMSThrottlingException")) => {
            Err(SourceError::Throttled(call))
        }
        (_, code) => {
            let code = code.unwrap_or("no sequence number");
            let message = r.error_message().unwrap_or_default();
            Err(SourceError::Service {
                call,
                source: format!("{code}: {message}").into(),
            })
        }
    }
}
