//! The shard worker on tokio's paused clock with a native handler: how it paces reads against
//! the stream's limits, and which seeks it follows. Minutes of virtual time run in milliseconds
//! and every figure is exact, so these tests can assert rates without timing anything real.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use shardhost::record::{Outcome, Record};
use shardhost::source::{
    Call, ReadBatch, ShardInfo, ShardReader, SourceError, StartPosition, StreamSource,
};
use shardhost::status::ShardState;
use shardhost::testing::MemoryStreams;
use tokio::time::Instant;

use crate::support::native::{Answer, Native, NativeRun, Plan, one_shard};
use crate::support::puts::FlakyPuts;
use crate::support::reads::WrappedReads;

const MIB: u64 = 1 << 20;

/// Kinesis' read limit of one shard: a read is refused (throttled) while the bytes of earlier
/// reads exceed 2 MiB per second since they were read; one read returns at most 10 MiB.
struct ByteLimitedReader {
    inner: Box<dyn ShardReader>,
    /// Bytes read beyond the limit, draining at 2 MiB/s, as of `at`.
    debt: Arc<std::sync::Mutex<(f64, Instant)>>,
    read_bytes: Arc<AtomicU64>,
    throttles: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl ShardReader for ByteLimitedReader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        let now = Instant::now();
        {
            let mut debt = self.debt.lock().unwrap();
            let drained = now.duration_since(debt.1).as_secs_f64() * (2 * MIB) as f64;
            *debt = ((debt.0 - drained).max(0.0), now);
            if debt.0 > 0.0 {
                self.throttles.fetch_add(1, Ordering::Relaxed);
                return Err(SourceError::Throttled(Call::ReadShard {
                    stream: "big".into(),
                    shard: "shard".into(),
                }));
            }
        }
        let batch = self.inner.read(limit.min(10)).await?;
        let bytes: u64 = batch.records.iter().map(|r| r.data.len() as u64).sum();
        self.read_bytes.fetch_add(bytes, Ordering::Relaxed);
        let mut debt = self.debt.lock().unwrap();
        // Kinesis: "if a call returns 10 MB, calls within the next 5 seconds are throttled".
        debt.0 += bytes as f64;
        Ok(batch)
    }
}

/// Reads a minute of a shard far behind, 1 MiB records, at its byte limit: MiB/s and throttles.
async fn read_a_minute_at_the_byte_limit(declares_limit: bool) -> (f64, usize) {
    let streams = MemoryStreams::new();
    streams.create("big", 1);
    for i in 0..200 {
        streams
            .put_now("big", "k", vec![i as u8; MIB as usize])
            .unwrap();
    }
    let debt = Arc::new(std::sync::Mutex::new((0.0, Instant::now())));
    let (read_bytes, throttles) = (Arc::<AtomicU64>::default(), Arc::<AtomicUsize>::default());
    // Whether the source tells the host its byte rate (Kinesis does); when it does not, only
    // throttles tell the worker when to read (as when another consumer shares the shard).
    let declared = declares_limit.then_some(2 * MIB);
    let (bytes, throttled) = (read_bytes.clone(), throttles.clone());
    let source = Arc::new(WrappedReads::new(
        Arc::new(streams),
        declared,
        move |inner, _, _| {
            Box::new(ByteLimitedReader {
                inner,
                debt: debt.clone(),
                read_bytes: bytes.clone(),
                throttles: throttled.clone(),
            })
        },
    ));
    let handler = Native::new(|records: &[Record]| Answer::each(vec![Outcome::Ack; records.len()]));
    let run = NativeRun::start(source, "big", handler, Plan::default());
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let rate =
        read_bytes.load(Ordering::Relaxed) as f64 / MIB as f64 / started.elapsed().as_secs_f64();
    run.stop().await;
    (rate, throttles.load(Ordering::Relaxed))
}

#[tokio::test(start_paused = true)]
async fn a_shard_behind_at_its_byte_limit_reads_ten_mib_every_five_seconds() {
    // The limit allows 2 MiB/s: 10 MiB read at once, then 10 MiB every 5 s. Waiting out a
    // throttle with doubling waits (1, 2, 4 s) reads 10 MiB per ~7 s (1.3 MiB/s).
    let (rate, throttles) = read_a_minute_at_the_byte_limit(true).await;
    assert!(
        rate >= 1.9,
        "{rate:.2} MiB/s read in a minute of virtual time; the shard allows 2 MiB/s"
    );
    assert_eq!(
        throttles, 0,
        "a read waits until the last one's bytes are paid for"
    );
}

#[tokio::test(start_paused = true)]
async fn throttled_reads_are_tried_again_each_poll_interval_without_doubling() {
    // A source that does not say its byte rate: only throttles pace the reads.
    let (rate, _) = read_a_minute_at_the_byte_limit(false).await;
    assert!(
        rate >= 1.8,
        "{rate:.2} MiB/s read in a minute of virtual time; the shard allows 2 MiB/s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_seek_forward_after_a_seek_back_cannot_pass_records_nobody_answered() {
    // Records 0..300 on one shard, read 100 at a time. The handler acks everything, but on the
    // second batch (100..200) seeks back to record 50, and when it sees record 150 again,
    // seeks forward to record 180: records 150..180 were delivered before the seek back, but
    // never answered since, so that seek must be refused and the checkpoint must not pass them.
    let streams = one_shard("s", 300);
    let seqs: Vec<String> = streams
        .records("s", "shardId-000000000000")
        .unwrap()
        .into_iter()
        .map(|r| r.sequence_number)
        .collect();
    let calls = Arc::new(AtomicUsize::new(0));
    let (back, forward) = (seqs[50].clone(), seqs[180].clone());
    let script = {
        let calls = calls.clone();
        move |records: &[Record]| {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            let first: usize = String::from_utf8_lossy(&records[0].data).parse().unwrap();
            let seek = match (call, first) {
                (1, 100) => Some(back.clone()),
                (2, 50) => Some(forward.clone()),
                _ => None,
            };
            Answer {
                outcomes: vec![Outcome::Ack; records.len()],
                seek,
            }
        }
    };
    let run = NativeRun::start(Arc::new(streams), "s", Native::new(script), Plan::default());
    let last = seqs[299].clone();
    let done = run
        .wait(Duration::from_secs(60), |r| {
            r.checkpoint("shardId-000000000000")
                .is_some_and(|c| c.starts_with(&last))
        })
        .await;
    let acked: std::collections::BTreeSet<String> = run
        .settled
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, o)| *o == Outcome::Ack)
        .map(|(_, seq, _)| seq.clone())
        .collect();
    run.stop().await;
    assert!(done, "the shard was read to its last record");
    let unanswered: Vec<usize> = (0..300).filter(|i| !acked.contains(&seqs[*i])).collect();
    assert!(
        unanswered.is_empty(),
        "the checkpoint passed records without an outcome: {unanswered:?}"
    );
}

fn capped(stream: &str) -> Plan {
    Plan {
        retry: Some(shardhost::config::RetryPolicy {
            max_attempts: 3,
            retry_stream: stream.into(),
            dead_letter: "dead".into(),
            own_retry_stream: false,
        }),
        ..Plan::default()
    }
}

fn flaky(records: usize) -> (Arc<FlakyPuts>, Vec<String>) {
    let inner = one_shard("s", records);
    inner.create("dead", 1);
    let seqs = inner
        .records("s", "shardId-000000000000")
        .unwrap()
        .into_iter()
        .map(|r| r.sequence_number)
        .collect();
    let source = Arc::new(FlakyPuts {
        inner,
        failing: Arc::default(),
        hanging: Arc::default(),
        puts: Arc::default(),
        fails_after: Duration::ZERO,
    });
    (source, seqs)
}

/// Answers retry for the record whose data is `3` (its copies too, until it is dead-lettered),
/// ack for everything else.
fn retry_record_three_once() -> Arc<Native> {
    Native::new(|records: &[Record]| {
        Answer::each(
            records
                .iter()
                .map(|r| {
                    if r.data == b"3" {
                        Outcome::Retry
                    } else {
                        Outcome::Ack
                    }
                })
                .collect(),
        )
    })
}

#[tokio::test(start_paused = true)]
async fn a_retry_copy_whose_publish_failed_is_published_again_and_the_checkpoint_moves_on() {
    let (source, seqs) = flaky(10);
    // The retry stream refuses the first three puts: the copy of record 3 waits, then goes out.
    source.failing.store(3, Ordering::SeqCst);
    let run = NativeRun::start(source.clone(), "s", retry_record_three_once(), capped("s"));
    let last = seqs[9].clone();
    let passed = run
        .wait(Duration::from_secs(120), |r| {
            // Sequence numbers of one shard have one length: their text orders them.
            r.checkpoint("shardId-000000000000")
                .is_some_and(|c| c.as_str() >= last.as_str())
        })
        .await;
    let lettered = run
        .wait(Duration::from_secs(120), |_| {
            source
                .inner
                .records("dead", "shardId-000000000000")
                .is_ok_and(|r| r.len() == 1)
        })
        .await;
    let puts = source.puts.load(Ordering::SeqCst);
    let checkpoint = run.checkpoint("shardId-000000000000");
    run.stop().await;
    assert!(
        passed,
        "the checkpoint stopped at {checkpoint:?} in front of record 3 after {puts} puts: \
         a failed publish of its retry copy was never tried again"
    );
    assert!(
        lettered,
        "record 3 was dead-lettered after its last attempt"
    );
    // Record 3 is retried at every attempt: three failed puts, then its copies for attempts 2
    // and 3 and its dead letter, each once.
    assert_eq!(puts, 6, "three failed puts, then each publish once");
}

#[tokio::test(start_paused = true)]
async fn a_stop_does_not_wait_for_retry_copies_that_cannot_be_published() {
    let (source, seqs) = flaky(10);
    // Every record is retried, and no put ever answers (a dead path to the retry stream).
    source.hanging.store(true, Ordering::SeqCst);
    let handler =
        Native::new(|records: &[Record]| Answer::each(vec![Outcome::Retry; records.len()]));
    let run = NativeRun::start(source.clone(), "s", handler, capped("s"));
    let puts = source.puts.clone();
    assert!(
        run.wait(Duration::from_secs(60), |_| puts.load(Ordering::SeqCst) > 0)
            .await,
        "a copy is being published"
    );
    let store = run.store.clone();
    let stopping = Instant::now();
    let stopped = tokio::time::timeout(Duration::from_secs(5), run.stop()).await;
    assert!(
        stopped.is_ok(),
        "a stop waited more than 5 s of virtual time on a put that never answers"
    );
    assert!(stopping.elapsed() < Duration::from_secs(1));
    use shardhost::lease::{LeaseKey, LeaseStore};
    let row = store
        .read(&LeaseKey::new("s", "shardId-000000000000"))
        .await
        .unwrap();
    let checkpoint = row.and_then(|r| r.checkpoint);
    assert_eq!(
        checkpoint, None,
        "the checkpoint passed a record whose copy was never published (the first is {})",
        seqs[0]
    );
}

/// The embedded stream with every shard closed: a read that reaches the end of what is in a
/// shard says the shard ended. Puts go to `hanging` (they never answer while it is set).
struct ClosedShards(FlakyPuts);

struct ClosedReader(Box<dyn ShardReader>);

#[async_trait::async_trait]
impl ShardReader for ClosedReader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        let mut batch = self.0.read(limit).await?;
        batch.end_of_shard = batch.records.len() < limit;
        Ok(batch)
    }
}

#[async_trait::async_trait]
impl StreamSource for ClosedShards {
    fn read_interval(&self) -> Duration {
        Duration::ZERO
    }
    async fn ensure_stream(&self, stream: &str, create: Option<u32>) -> Result<(), SourceError> {
        self.0.ensure_stream(stream, create).await
    }
    async fn list_shards(&self, stream: &str) -> Result<Vec<ShardInfo>, SourceError> {
        let mut shards = self.0.list_shards(stream).await?;
        for s in &mut shards {
            s.closed = true;
        }
        Ok(shards)
    }
    async fn open(
        &self,
        stream: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<Box<dyn ShardReader>, SourceError> {
        Ok(Box::new(ClosedReader(
            self.0.open(stream, shard_id, start).await?,
        )))
    }
    async fn put(&self, stream: &str, key: &str, data: Vec<u8>) -> Result<String, SourceError> {
        self.0.put(stream, key, data).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_the_last_publish_of_a_closed_shard_stops_the_shard_it_does_not_hold_it() {
    // A closed shard's last record answers retry-after: its copy is due after the shard was
    // read to its end, and its publish never answers. A stop then ends the publish: the shard
    // stops (its record delivered again by the next reader), it is not "held at its end" with
    // the record gone from every list (which kept a handed-over shard and its children waiting
    // until a restart).
    let (flaky, _) = flaky(3);
    let flaky = Arc::into_inner(flaky).expect("one owner");
    flaky.hanging.store(true, Ordering::SeqCst);
    let puts = flaky.puts.clone();
    let source = Arc::new(ClosedShards(flaky));
    let handler = Native::new(|records: &[Record]| {
        Answer::each(
            records
                .iter()
                .map(|r| {
                    if r.data == b"2" {
                        Outcome::RetryAfter(1_000)
                    } else {
                        Outcome::Ack
                    }
                })
                .collect(),
        )
    });
    let run = NativeRun::start(source, "s", handler, capped("s"));
    assert!(
        run.wait(Duration::from_secs(60), |_| puts.load(Ordering::SeqCst) > 0)
            .await,
        "the copy's publish started"
    );
    let status = run.status.clone();
    run.stop().await;
    let state = status
        .shards_of("sub")
        .into_iter()
        .find(|r| r.shard_id == "shardId-000000000000")
        .map(|r| r.status.state);
    assert_eq!(state, Some(shardhost::status::ShardState::Stopped));
}

#[tokio::test(start_paused = true)]
async fn a_closed_shard_ends_once_its_record_called_again_after_retry_after_is_acked() {
    // No retry cap: the closed shard's last record answers retry-after twice, then ack. The
    // shard is read to its end meanwhile; SHARD_END is written after the third call, and the
    // shard is not held at its end.
    let (flaky, _) = flaky(3);
    let source = Arc::new(ClosedShards(Arc::into_inner(flaky).expect("one owner")));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let handler = Native::new(move |records: &[Record]| {
        let outcomes = records
            .iter()
            .map(|r| {
                if r.data == b"2" && counted.fetch_add(1, Ordering::SeqCst) < 2 {
                    Outcome::RetryAfter(100)
                } else {
                    Outcome::Ack
                }
            })
            .collect();
        Answer::each(outcomes)
    });
    let run = NativeRun::start(source, "s", handler, Plan::default());
    let ended = run
        .wait(Duration::from_secs(60), |r| {
            r.checkpoint("shardId-000000000000").as_deref() == Some("SHARD_END")
        })
        .await;
    let status = run.status.clone();
    run.stop().await;
    assert!(ended, "{:#?}", status.snapshot());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A fan-out reader whose subscription task died: every read answers at once that it is gone.
/// Past `SPIN` reads it stops answering, so that a worker that keeps reading idles the clock.
struct Gone {
    reads: Arc<AtomicUsize>,
}

const SPIN: usize = 1000;

#[async_trait::async_trait]
impl ShardReader for Gone {
    async fn read(&mut self, _: usize) -> Result<ReadBatch, SourceError> {
        if self.reads.fetch_add(1, Ordering::SeqCst) >= SPIN {
            std::future::pending::<()>().await;
        }
        Err(SourceError::SubscriptionGone {
            shard: "shardId-000000000000".into(),
            why: "panicked".into(),
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_dead_fan_out_subscription_fails_its_worker_instead_of_reading_in_a_busy_loop() {
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = reads.clone();
    let source = WrappedReads::new(Arc::new(one_shard("s", 3)), None, move |_, _, _| {
        Box::new(Gone {
            reads: counted.clone(),
        })
    })
    .pushing();
    let handler = Native::new(|records: &[Record]| Answer::each(vec![Outcome::Ack; records.len()]));
    let run = NativeRun::start(Arc::new(source), "s", handler, Plan::default());
    let failed = run
        .wait(Duration::from_secs(5), |r| {
            r.status.shards_of("sub").iter().any(|row| {
                row.status.state == ShardState::Failed
                    && row
                        .status
                        .last_error
                        .as_deref()
                        .is_some_and(|e| e.contains("ended unexpectedly"))
            })
        })
        .await;
    let n = reads.load(Ordering::SeqCst);
    assert!(
        failed,
        "the worker fails, its status says why ({n} reads answered at once meanwhile)"
    );
    assert!(n <= 2, "{n} reads of a dead subscription");
    run.stop().await;
}
