//! Enhanced fan-out's stream consumer: looked up by name (DescribeStreamConsumer with the
//! stream's ARN), registered when missing (RegisterStreamConsumer), waited for until ACTIVE.
//!
//! Never ListStreamConsumers: kinesis-mock's paging of it drops consumers. Never deregistered:
//! a consumer is infrastructure (docs/concepts/fan-out.md shows the aws CLI command).

use std::time::Duration;

use aws_sdk_kinesis::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kinesis::types::ConsumerStatus;
use tokio::time::Instant;

use super::{ACTIVE_WAIT, KinesisStreams, sdk_error};
use crate::source::{Call, SourceError};

/// The longest pause between two looks at a consumer that is not ACTIVE yet.
const MAX_POLL: Duration = Duration::from_secs(2);

/// An AccessDenied answer (IAM said no), whichever operation's error type carries it.
pub(super) fn denied<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> bool {
    e.as_service_error()
        .and_then(ProvideErrorMetadata::code)
        .is_some_and(|code| code == "AccessDeniedException")
}

/// `e` as a [`SourceError`]: access denied names the missing permission.
pub(super) fn call_error<E, R>(
    call: Call,
    permission: &'static str,
    e: SdkError<E, R>,
) -> SourceError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    if denied(&e) {
        SourceError::AccessDenied {
            call: Box::new(call),
            permission,
            source: Box::new(e),
        }
    } else {
        sdk_error(call, e)
    }
}

impl KinesisStreams {
    /// The ARN of stream consumer `name` on `stream`, registered first when it is missing and
    /// waited for until it is ACTIVE (an instance racing this one to register it is fine).
    pub async fn consumer(&self, stream: &str, name: &str) -> Result<String, SourceError> {
        let stream_arn = self.stream_arn(stream).await?;
        let describe_call = || Call::DescribeConsumer {
            stream: stream.to_owned(),
            consumer: name.to_owned(),
        };
        let deadline = Instant::now() + ACTIVE_WAIT;
        let mut pause = Duration::from_millis(50);
        loop {
            let described = self
                .client
                .describe_stream_consumer()
                .stream_arn(&stream_arn)
                .consumer_name(name)
                .send()
                .await;
            let status = match described {
                Ok(out) => {
                    let consumer = out.consumer_description();
                    let status = consumer.map(|c| c.consumer_status().clone());
                    if status == Some(ConsumerStatus::Active) {
                        let arn = consumer.map(|c| c.consumer_arn().to_owned());
                        return Ok(arn.unwrap_or_default());
                    }
                    status.map_or("missing".to_owned(), |s| format!("{s:?}"))
                }
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    self.register(stream, &stream_arn, name).await?;
                    "Creating".to_owned()
                }
                Err(e) => {
                    let permission = "kinesis:DescribeStreamConsumer";
                    return Err(call_error(describe_call(), permission, e));
                }
            };
            if Instant::now() >= deadline {
                return Err(SourceError::ConsumerNotActive {
                    consumer: name.to_owned(),
                    status,
                    waited: ACTIVE_WAIT,
                });
            }
            tracing::debug!(
                stream,
                consumer = name,
                status,
                "waiting for the stream consumer"
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_POLL);
        }
    }

    /// Registers consumer `name`; one registered meanwhile by another instance is as good.
    async fn register(
        &self,
        stream: &str,
        stream_arn: &str,
        name: &str,
    ) -> Result<(), SourceError> {
        let registered = self
            .client
            .register_stream_consumer()
            .stream_arn(stream_arn)
            .consumer_name(name)
            .send()
            .await;
        match registered {
            Ok(_) => {
                tracing::info!(
                    stream,
                    consumer = name,
                    "registered the stream consumer for fan-out"
                );
                Ok(())
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_in_use_exception()) =>
            {
                Ok(())
            }
            Err(e) => {
                let call = Call::RegisterConsumer {
                    stream: stream.to_owned(),
                    consumer: name.to_owned(),
                };
                Err(call_error(call, "kinesis:RegisterStreamConsumer", e))
            }
        }
    }

    /// The stream's ARN (DescribeStreamSummary).
    async fn stream_arn(&self, stream: &str) -> Result<String, SourceError> {
        let out = self
            .client
            .describe_stream_summary()
            .stream_name(stream)
            .send()
            .await;
        match out {
            Ok(out) => Ok(out
                .stream_description_summary()
                .map(|s| s.stream_arn().to_owned())
                .unwrap_or_default()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                Err(SourceError::NoSuchStream(stream.to_owned()))
            }
            Err(e) => {
                let call = Call::DescribeStream {
                    stream: stream.to_owned(),
                };
                Err(call_error(call, "kinesis:DescribeStreamSummary", e))
            }
        }
    }
}
