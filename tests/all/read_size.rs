//! How many records a shard's reads ask for, on tokio's paused clock with a native handler: a
//! backlog is read in reads as large as the server answers within the read interval, up to
//! `read_limit`. Virtual time makes every answer time exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardhost::record::{Outcome, Record};
use shardhost::source::{ReadBatch, ShardReader, SourceError};
use shardhost::testing::MemoryStreams;

use crate::support::native::{Answer, Native, NativeRun, Plan, one_shard};
use crate::support::reads::WrappedReads;

/// How long the server takes to answer a read that asks for so many records (a response is
/// built for the whole limit, as kinesis-mock builds it from the backlog).
type AnswerTime = Arc<dyn Fn(usize) -> Duration + Send + Sync>;

/// The embedded stream behind a server that answers in `answer`, at Kinesis' read interval (5
/// reads per second per shard). Notes the limit every read that found records asked for.
fn slow(inner: MemoryStreams, answer: AnswerTime, asked: Asked) -> WrappedReads {
    WrappedReads::new(Arc::new(inner), None, move |inner, _, _| {
        Box::new(SlowReader {
            inner,
            answer: answer.clone(),
            asked: asked.clone(),
        })
    })
}

type Asked = Arc<Mutex<Vec<usize>>>;

struct SlowReader {
    inner: Box<dyn ShardReader>,
    answer: AnswerTime,
    asked: Asked,
}

#[async_trait::async_trait]
impl ShardReader for SlowReader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        // The scenario: the server's answer time (virtual).
        tokio::time::sleep((self.answer)(limit)).await;
        let batch = self.inner.read(limit).await?;
        if !batch.records.is_empty() {
            self.asked.lock().unwrap().push(limit);
        }
        Ok(batch)
    }
}

/// Drains a backlog of 200 000 records from a server that answers a read of `n` records in
/// `answer(n)`, with the default `read_limit` (10 000): the limits the reads that found records
/// asked for.
async fn drain_a_backlog(answer: impl Fn(usize) -> Duration + Send + Sync + 'static) -> Vec<usize> {
    const N: usize = 200_000;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let source = Arc::new(slow(one_shard("s", N), Arc::new(answer), asked.clone()));
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
    let asked = drain_a_backlog(|_| Duration::ZERO).await;
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
    let asked = drain_a_backlog(|n| Duration::from_micros(100) * n as u32).await;
    let most = asked.iter().max().copied();
    assert_eq!(
        most,
        Some(2000),
        "reads grow while a read twice the size still answers within the interval: {asked:?}"
    );
    let settled = asked.iter().rev().take(10).all(|&n| n == 2000);
    assert!(settled, "and stay at that size: {asked:?}");
}

#[tokio::test(start_paused = true)]
async fn a_backlog_behind_a_long_round_trip_is_read_in_reads_of_read_limit() {
    // 300 ms a read, whatever its size (a far region): each read pays the trip once, so larger
    // reads drain faster even though the server, not the read interval, sets the pace.
    let asked =
        drain_a_backlog(|n| Duration::from_millis(300) + Duration::from_micros(n as u64 / 10))
            .await;
    let full = asked.iter().position(|&n| n == 10_000);
    assert!(
        full.is_some_and(|i| i <= 6 && asked[i..].iter().all(|&n| n == 10_000)),
        "reads grow while they pay, to 10 000, and stay there: {asked:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_backlog_on_a_server_that_answers_large_reads_more_slowly_per_record_is_read_in_reads_no_larger_than_the_first_that_cost()
 {
    // n² × 100 ns (kinesis-mock answers large reads more slowly per record): 1 000 records in
    // 100 ms (10 000 a second), 2 000 in 400 ms (5 000 a second).
    let asked = drain_a_backlog(|n| Duration::from_nanos(100 * (n * n) as u64)).await;
    let most = asked.iter().max().copied();
    assert_eq!(
        most,
        Some(2000),
        "2 000 answered at half the rate of 1 000: {asked:?}"
    );
}
