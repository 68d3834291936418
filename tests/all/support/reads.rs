//! A stream service whose shards are read through a test's own reader: what a test puts between
//! the host and a stream to enforce a service's read limits or watch the reads.

use std::sync::Arc;

use async_trait::async_trait;
use shardhost::source::{ShardInfo, ShardReader, SourceError, StartPosition, StreamSource};

/// Makes the reader a shard is read through from the inner reader, the stream and the shard.
type Wrap = dyn Fn(Box<dyn ShardReader>, &str, &str) -> Box<dyn ShardReader> + Send + Sync;

/// `inner` with every reader wrapped, declaring `byte_rate` (and Kinesis' read interval);
/// everything else is `inner`'s.
pub struct WrappedReads {
    inner: Arc<dyn StreamSource>,
    byte_rate: Option<u64>,
    /// Says it pushes (enhanced fan-out): the worker adds no wait between reads.
    pushes: bool,
    wrap: Box<Wrap>,
}

impl WrappedReads {
    pub fn new(
        inner: Arc<dyn StreamSource>,
        byte_rate: Option<u64>,
        wrap: impl Fn(Box<dyn ShardReader>, &str, &str) -> Box<dyn ShardReader> + Send + Sync + 'static,
    ) -> WrappedReads {
        WrappedReads {
            inner,
            byte_rate,
            pushes: false,
            wrap: Box::new(wrap),
        }
    }

    /// Says its records are pushed, as enhanced fan-out does.
    pub fn pushing(mut self) -> WrappedReads {
        self.pushes = true;
        self
    }
}

#[async_trait]
impl StreamSource for WrappedReads {
    fn read_bytes_per_second(&self) -> Option<u64> {
        self.byte_rate
    }
    fn pushes(&self) -> bool {
        self.pushes
    }
    /// A pushing source has no read interval to pace (a consumer's pushes are its own).
    fn read_interval(&self) -> std::time::Duration {
        match self.pushes {
            true => std::time::Duration::ZERO,
            false => shardhost::source::KINESIS_READ_INTERVAL,
        }
    }
    async fn ensure_stream(&self, stream: &str, create: Option<u32>) -> Result<(), SourceError> {
        self.inner.ensure_stream(stream, create).await
    }
    async fn list_shards(&self, stream: &str) -> Result<Vec<ShardInfo>, SourceError> {
        self.inner.list_shards(stream).await
    }
    async fn open(
        &self,
        stream: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<Box<dyn ShardReader>, SourceError> {
        let reader = self.inner.open(stream, shard_id, start).await?;
        Ok((self.wrap)(reader, stream, shard_id))
    }
    async fn put(&self, stream: &str, key: &str, data: Vec<u8>) -> Result<String, SourceError> {
        self.inner.put(stream, key, data).await
    }
}
