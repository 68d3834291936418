//! A stream source for worker tests whose puts fail, answer slowly or hang: a retry or
//! dead-letter stream that is down, throttled, or behind a dead network path.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use shardhost::source::{Call, ShardInfo, ShardReader, SourceError, StartPosition, StreamSource};
use shardhost::testing::MemoryStreams;

/// The embedded stream, with puts that fail while `failing` is above zero (counting down) or
/// never answer while `hanging` is set (a failing one answers after `fails_after`): a retry stream that is down, or a dead network path.
pub struct FlakyPuts {
    pub inner: MemoryStreams,
    /// Puts left to fail (`usize::MAX`: every one, a stream that is down).
    pub failing: Arc<AtomicUsize>,
    pub hanging: Arc<AtomicBool>,
    /// Puts tried.
    pub puts: Arc<AtomicUsize>,
    /// How long a failing put takes to answer (an SDK spending its retries).
    pub fails_after: Duration,
}

#[async_trait]
impl StreamSource for FlakyPuts {
    fn read_interval(&self) -> Duration {
        Duration::ZERO
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
        self.inner.open(stream, shard_id, start).await
    }
    async fn put(&self, stream: &str, key: &str, data: Vec<u8>) -> Result<String, SourceError> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        if self.hanging.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let fail = self
            .failing
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if fail {
            tokio::time::sleep(self.fails_after).await;
            return Err(SourceError::Throttled(Call::Put {
                stream: stream.into(),
            }));
        }
        self.inner.put(stream, key, data).await
    }
}
