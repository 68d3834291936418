//! How many records a shard's reads ask for, on tokio's paused clock with a native handler: a
//! backlog is read in reads as large as the server answers within the read interval, up to
//! `read_limit`. Virtual time makes every answer time exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardhost::record::{Outcome, Record};
use shardhost::source::{
    ReadBatch, ShardInfo, ShardReader, SourceError, StartPosition, StreamSource,
};
use shardhost::testing::MemoryStreams;

use crate::support::native::{Answer, Native, NativeRun, Plan, one_shard};

/// The embedded stream behind a server that takes `per_record` per record asked for to answer a
/// read (a response is built for the whole limit, as kinesis-mock builds it from the backlog),
/// at Kinesis' read interval (5 reads per second per shard). Notes the limit every read that
/// found records asked for.
struct Slow {
    inner: MemoryStreams,
    per_record: Duration,
    asked: Asked,
}

type Asked = Arc<Mutex<Vec<usize>>>;

struct SlowReader {
    inner: Box<dyn ShardReader>,
    per_record: Duration,
    asked: Asked,
}

#[async_trait::async_trait]
impl ShardReader for SlowReader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        // The scenario: the server's answer time (virtual).
        tokio::time::sleep(self.per_record * limit as u32).await;
        let batch = self.inner.read(limit).await?;
        if !batch.records.is_empty() {
            self.asked.lock().unwrap().push(limit);
        }
        Ok(batch)
    }
}

#[async_trait::async_trait]
impl StreamSource for Slow {
    fn read_bytes_per_second(&self) -> Option<u64> {
        None
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
        Ok(Box::new(SlowReader {
            inner: self.inner.open(stream, shard_id, start).await?,
            per_record: self.per_record,
            asked: self.asked.clone(),
        }))
    }
    async fn put(&self, stream: &str, key: &str, data: Vec<u8>) -> Result<String, SourceError> {
        self.inner.put(stream, key, data).await
    }
}

/// Drains a backlog of 200 000 records from a server that answers in `per_record` per record
/// asked for, with the default `read_limit` (10 000): the limits the reads that found records
/// asked for.
async fn drain_a_backlog(per_record: Duration) -> Vec<usize> {
    const N: usize = 200_000;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let source = Arc::new(Slow {
        inner: one_shard("s", N),
        per_record,
        asked: asked.clone(),
    });
    let handler = Native::new(|records: &[Record]| Answer::each(vec![Outcome::Ack; records.len()]));
    let plan = Plan {
        read_limit: 10_000,
        ..Plan::default()
    };
    let run = NativeRun::start(source, "s", handler, plan);
    let done = run
        .wait(Duration::from_secs(600), |r| {
            r.settled.lock().unwrap().len() == N
        })
        .await;
    run.stop().await;
    assert!(done, "the backlog was read");
    asked.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn a_backlog_on_a_server_that_answers_at_once_is_read_in_reads_of_read_limit() {
    let asked = drain_a_backlog(Duration::ZERO).await;
    let behind = asked.iter().position(|&n| n == 10_000);
    assert!(
        behind.is_some_and(|i| i <= 6 && asked[i..].iter().all(|&n| n == 10_000)),
        "paced by the read interval alone, reads double to 10 000 and stay there: {asked:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_backlog_on_a_server_slow_to_answer_large_reads_is_read_in_reads_it_answers_within_the_interval()
 {
    // 100 µs per record: 1 000 records answer in 100 ms, 2 000 in the read interval (200 ms).
    let asked = drain_a_backlog(Duration::from_micros(100)).await;
    let most = asked.iter().max().copied();
    assert_eq!(
        most,
        Some(2000),
        "reads grow while a read twice the size still answers within the interval: {asked:?}"
    );
    let settled = asked.iter().rev().take(10).all(|&n| n == 2000);
    assert!(settled, "and stay at that size: {asked:?}");
}
