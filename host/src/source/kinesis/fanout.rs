//! Enhanced fan-out: the streams of [`KinesisStreams`], each shard read through a
//! SubscribeToShard [`Subscription`] of one registered consumer instead of GetRecords.

use std::collections::VecDeque;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::KinesisStreams;
use super::subscription::{Consumer, Push, Pushed, Subscription};
use crate::record::Record;
use crate::source::{ReadBatch, ShardInfo, ShardReader, SourceError, StartPosition, StreamSource};

/// Events a subscription may hold for its reader: a little ahead, never a backlog (the
/// subscription pauses instead).
const QUEUED_EVENTS: usize = 2;

/// Kinesis read through a consumer's subscriptions; everything else as [`KinesisStreams`].
#[derive(Clone, Debug)]
pub struct FanOut {
    streams: KinesisStreams,
    consumer: Consumer,
}

impl FanOut {
    /// Reads through `consumer` (registered and ACTIVE: [`KinesisStreams::consumer`]).
    pub fn new(streams: KinesisStreams, name: &str, arn: &str) -> FanOut {
        FanOut {
            streams,
            consumer: Consumer {
                name: name.into(),
                arn: arn.into(),
            },
        }
    }
}

#[async_trait]
impl StreamSource for FanOut {
    /// Each consumer has the shard's pushes to itself: no read limit to pace.
    fn read_interval(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    fn read_bytes_per_second(&self) -> Option<u64> {
        None
    }

    fn pushes(&self) -> bool {
        true
    }

    async fn ensure_stream(&self, stream: &str, create: Option<u32>) -> Result<(), SourceError> {
        self.streams.ensure_stream(stream, create).await
    }

    async fn list_shards(&self, stream: &str) -> Result<Vec<ShardInfo>, SourceError> {
        self.streams.list_shards(stream).await
    }

    async fn open(
        &self,
        stream: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<Box<dyn ShardReader>, SourceError> {
        let (tx, pushes) = mpsc::channel(QUEUED_EVENTS);
        let subscription = Subscription::new(
            self.streams.client.clone(),
            stream,
            shard_id,
            self.consumer.clone(),
            start,
            tx,
        );
        let task = tokio::spawn(subscription.run().in_current_span());
        Ok(Box::new(FanOutReader {
            shard: shard_id.to_owned(),
            pushes,
            buffer: VecDeque::new(),
            millis_behind_latest: None,
            ended: false,
            _task: Subscribed(task),
        }))
    }

    async fn put(
        &self,
        stream: &str,
        partition_key: &str,
        data: Vec<u8>,
    ) -> Result<String, SourceError> {
        self.streams.put(stream, partition_key, data).await
    }
}

/// The subscription task; dropping the reader cancels it (and so its SubscribeToShard).
struct Subscribed(JoinHandle<()>);

impl Drop for Subscribed {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One shard's pushed records, handed out as reads.
struct FanOutReader {
    shard: String,
    pushes: mpsc::Receiver<Push>,
    /// Records of an event beyond what a read asked for.
    buffer: VecDeque<Record>,
    millis_behind_latest: Option<u64>,
    ended: bool,
    _task: Subscribed,
}

#[async_trait]
impl ShardReader for FanOutReader {
    /// The records pushed since the last read, up to `limit`; waits for the next event when
    /// none are left (an empty event answers an empty read).
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        if self.buffer.is_empty() && !self.ended {
            match self.pushes.recv().await {
                Some(Ok(Pushed::Records {
                    records,
                    millis_behind_latest,
                })) => {
                    self.buffer.extend(records);
                    self.millis_behind_latest = Some(millis_behind_latest);
                }
                Some(Ok(Pushed::End)) => self.ended = true,
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(SourceError::SubscriptionGone {
                        shard: self.shard.clone(),
                    });
                }
            }
        }
        let n = limit.max(1).min(self.buffer.len());
        let records: Vec<Record> = self.buffer.drain(..n).collect();
        Ok(ReadBatch {
            records,
            millis_behind_latest: self.millis_behind_latest,
            end_of_shard: self.ended && self.buffer.is_empty(),
        })
    }
}
