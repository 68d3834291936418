//! The real polling and fan-out readers opened over any [`KinesisApi`]: how the simulation (and
//! a test) runs them over simulated calls.

use std::sync::Arc;

use super::api::KinesisApi;
use super::fanout;
use super::reader::KinesisReader;
use super::subscription::Consumer;
use crate::source::{ShardReader, SourceError, StartPosition};

/// The polling reader (GetShardIterator, GetRecords) of `shard` at `start`, its iterator opened.
pub async fn open_polling(
    api: Arc<dyn KinesisApi>,
    stream: &str,
    shard: &str,
    start: &StartPosition,
) -> Result<Box<dyn ShardReader>, SourceError> {
    Ok(Box::new(
        KinesisReader::open(api, stream, shard, start).await?,
    ))
}

/// The enhanced fan-out reader of `shard` at `start` through consumer `consumer` (its ARN
/// `consumer_arn`): its subscription task starts at once (call inside a tokio runtime).
pub fn open_fan_out(
    api: Arc<dyn KinesisApi>,
    consumer: &str,
    consumer_arn: &str,
    stream: &str,
    shard: &str,
    start: &StartPosition,
) -> Box<dyn ShardReader> {
    let consumer = Consumer {
        name: consumer.into(),
        arn: consumer_arn.into(),
    };
    fanout::open(api, &consumer, stream, shard, start)
}
