//! What waiting costs a shard worker, on tokio's paused clock with a native handler: a record
//! that waits an hour (memory stays within the in-flight bound), a retry stream that is down (a
//! batch of copies waits as one, the shard does not stall per copy), a lease table that fails
//! checkpoint writes for a few seconds (the lease is kept, nothing is delivered twice).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use shardhost::lease::{Checkpoint, Lease, LeaseError, LeaseKey, LeaseStore, MemoryLeaseStore};
use shardhost::record::{Outcome, Record};
use shardhost::status::ShardState;
use shardhost::testing::MemoryStreams;
use shardhost::testing::envelope;
use tokio::time::Instant;

use crate::support::native::{Answer, Native, NativeRun, Plan, one_shard};
use crate::support::puts::FlakyPuts;

const SHARD: &str = "shardId-000000000000";
const HOUR: Duration = Duration::from_secs(3600);

/// Every record's sequence number, in order.
fn sequence_numbers(streams: &MemoryStreams, stream: &str) -> Vec<String> {
    streams
        .records(stream, SHARD)
        .unwrap()
        .into_iter()
        .map(|r| r.sequence_number)
        .collect()
}

/// Record `0` answers retry-after an hour at its first attempt; everything else is acked.
fn record_zero_waits_an_hour() -> Arc<Native> {
    Native::with_info(|info, records: &[Record]| {
        Answer::each(
            records
                .iter()
                .map(|r| {
                    if r.data == b"0" && info.attempt == 1 {
                        Outcome::RetryAfter(HOUR.as_millis() as u64)
                    } else {
                        Outcome::Ack
                    }
                })
                .collect(),
        )
    })
}

fn in_flight(records: usize) -> shardhost::testing::InFlight {
    shardhost::testing::InFlight {
        records,
        bytes: 64 << 20,
    }
}

/// 100 000 records behind one that waits an hour, under an in-flight bound of 1 000 records:
/// ten minutes into the wait the shard holds no more than the bound and does not read; after
/// the hour every record is handled and the checkpoint reaches the last.
async fn a_record_waiting_an_hour(plan: Plan) {
    let streams = one_shard("s", 100_001);
    let seqs = sequence_numbers(&streams, "s");
    let bound = plan.in_flight.records;
    let run = NativeRun::start(Arc::new(streams), "s", record_zero_waits_an_hour(), plan);
    tokio::time::sleep(Duration::from_secs(600)).await;
    let status = run.shard(SHARD).expect("the shard is read");
    assert_eq!(
        status.state,
        ShardState::PausedInFlight,
        "ten minutes into the wait, the shard should have stopped reading at the in-flight \
         bound; it delivered {} records behind the waiting one",
        status.counts.delivered
    );
    // Every record delivered stays in the shard's tracker until the waiting one settles.
    assert!(
        status.counts.delivered <= bound as u64,
        "{} records delivered behind the waiting one: the shard keeps each in memory, past the \
         in-flight bound of {bound}",
        status.counts.delivered
    );
    let last = seqs.last().unwrap().clone();
    // Sequence numbers of one shard have one length: their text orders them (a copy of the
    // waiting record, on the same stream, comes after the last).
    let done = run
        .wait(HOUR, |r| {
            r.checkpoint(SHARD)
                .is_some_and(|c| c.as_str() >= last.as_str())
        })
        .await;
    let acked = run
        .settled
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, o)| *o == Outcome::Ack)
        .count();
    let state = run.shard(SHARD).map(|s| s.state);
    run.stop().await;
    assert!(done, "after the hour the shard is read to its end");
    assert_eq!(
        acked, 100_001,
        "every record is handled once, the waiting one after the hour"
    );
    assert_eq!(state, Some(ShardState::Reading));
}

#[tokio::test(start_paused = true)]
async fn a_record_waiting_an_hour_under_a_cap_keeps_the_shard_within_its_in_flight_bound() {
    let plan = Plan {
        retry: Some(shardhost::config::RetryPolicy {
            max_attempts: 3,
            retry_stream: "s".into(),
            dead_letter: "dead".into(),
            own_retry_stream: false,
        }),
        in_flight: in_flight(1_000),
        ..Plan::default()
    };
    a_record_waiting_an_hour(plan).await;
}

#[tokio::test(start_paused = true)]
async fn a_record_called_again_after_an_hour_keeps_the_shard_within_its_in_flight_bound() {
    let plan = Plan {
        in_place_max_delay: HOUR,
        in_flight: in_flight(1_000),
        ..Plan::default()
    };
    a_record_waiting_an_hour(plan).await;
}

#[tokio::test(start_paused = true)]
async fn copies_of_later_batches_wait_for_the_back_off_of_a_failed_publish() {
    // Every record answers retry, ten reads of 100; the retry stream refuses every put at once.
    // After the first failure, the copies of the batches read during its back-off wait with it
    // (1 s, 2 s, 4 s, ...): a put per back-off, not a put per batch.
    let inner = one_shard("s", 1_000);
    inner.create("retry", 1);
    inner.create("dead", 1);
    let source = Arc::new(FlakyPuts {
        inner,
        failing: Arc::new(AtomicUsize::new(usize::MAX)),
        hanging: Arc::default(),
        puts: Arc::default(),
        fails_after: Duration::ZERO,
    });
    let handler =
        Native::new(|records: &[Record]| Answer::each(vec![Outcome::Retry; records.len()]));
    let plan = Plan {
        read_limit: 100,
        call_batch: 100,
        retry: Some(shardhost::config::RetryPolicy {
            max_attempts: 3,
            retry_stream: "retry".into(),
            dead_letter: "dead".into(),
            own_retry_stream: false,
        }),
        ..Plan::default()
    };
    let run = NativeRun::start(source.clone(), "s", handler, plan);
    let all_read = run
        .wait(Duration::from_secs(5), |r| {
            r.shard(SHARD).is_some_and(|s| s.counts.delivered >= 1_000)
        })
        .await;
    let puts = source.puts.load(Ordering::SeqCst);
    run.stop().await;
    assert!(all_read, "reading went on while the copies waited");
    assert!(
        puts <= 4,
        "{puts} puts in 5 s against a retry stream that refuses each at once: the copies of the \
         batches read after a failure should wait for its back-off (puts at 0, 1, 3 s)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_of_retries_against_a_retry_stream_that_is_down_waits_as_one() {
    // Records 0..500 of one read answer retry, 500..1000 ack; the retry stream is down and each
    // put fails after 30 s. Publishing the 500 copies one at a time would hold the shard for
    // 500 × 30 s (over four hours) before it handled the next read.
    let inner = one_shard("s", 1_000);
    inner.create("retry", 1);
    inner.create("dead", 1);
    let seqs = sequence_numbers(&inner, "s");
    let source = Arc::new(FlakyPuts {
        inner,
        failing: Arc::new(AtomicUsize::new(usize::MAX)),
        hanging: Arc::default(),
        puts: Arc::default(),
        fails_after: Duration::from_secs(30),
    });
    let handler = Native::new(|records: &[Record]| {
        Answer::each(
            records
                .iter()
                .map(|r| {
                    let n: usize = String::from_utf8_lossy(&r.data).parse().unwrap();
                    if n < 500 {
                        Outcome::Retry
                    } else {
                        Outcome::Ack
                    }
                })
                .collect(),
        )
    });
    let plan = Plan {
        read_limit: 500,
        call_batch: 500,
        retry: Some(shardhost::config::RetryPolicy {
            max_attempts: 3,
            retry_stream: "retry".into(),
            dead_letter: "dead".into(),
            own_retry_stream: false,
        }),
        ..Plan::default()
    };
    let run = NativeRun::start(source.clone(), "s", handler, plan);
    let started = Instant::now();
    let acked = |r: &NativeRun| {
        r.settled
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, _, o)| *o == Outcome::Ack)
            .count()
    };
    let read_on = run
        .wait(Duration::from_secs(120), |r| acked(r) == 500)
        .await;
    let (took, puts) = (started.elapsed(), source.puts.load(Ordering::SeqCst));
    assert!(
        read_on,
        "in {took:?} of virtual time the shard handled {} of the 500 records after the retried \
         ones ({puts} puts tried)",
        acked(&run)
    );
    assert!(
        puts <= 5,
        "{puts} puts in {took:?} against a retry stream that is down: the copies of one batch \
         should wait together after one failure"
    );
    // The retry stream is back: every copy goes out, in read order, and the checkpoint passes
    // every record.
    source.failing.store(0, Ordering::SeqCst);
    let last = seqs[999].clone();
    let passed = run
        .wait(Duration::from_secs(300), |r| {
            r.checkpoint(SHARD).is_some_and(|c| c.starts_with(&last))
        })
        .await;
    run.stop().await;
    assert!(
        passed,
        "the checkpoint reached the last record once the copies went out"
    );
    let key = envelope::EnvelopeKey::from_bytes([0; 32]);
    let origins: Vec<String> = source
        .inner
        .records("retry", SHARD)
        .unwrap()
        .iter()
        .map(|r| {
            let (h, _) = envelope::unwrap(&key, &r.data).unwrap().expect("a copy");
            h.origin.sequence_number
        })
        .collect();
    assert_eq!(origins, seqs[..500], "each copy once, in read order");
}

/// The memory lease store, whose checkpoint writes fail with a store error while `failing` is
/// set (the table throttles or cannot be reached); `refused` counts them.
struct FailingCheckpoints {
    inner: Arc<MemoryLeaseStore>,
    failing: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
}

#[async_trait]
impl LeaseStore for FailingCheckpoints {
    async fn acquire(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        self.inner.acquire(key, owner, ttl).await
    }
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        self.inner.renew(lease, ttl).await
    }
    async fn checkpoint(&self, lease: &Lease, cp: &Checkpoint) -> Result<Lease, LeaseError> {
        if self.failing.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(LeaseError::Store(
                "throttled (ProvisionedThroughputExceeded)".into(),
            ));
        }
        self.inner.checkpoint(lease, cp).await
    }
    async fn mark_opened(&self, lease: &Lease, at_ms: u64) -> Result<Lease, LeaseError> {
        self.inner.mark_opened(lease, at_ms).await
    }
    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        self.inner.read(key).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.inner.release(lease).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_checkpoint_write_the_table_fails_for_a_few_seconds_is_written_after_and_nothing_is_delivered_twice()
 {
    let streams = one_shard("s", 300);
    let seqs = sequence_numbers(&streams, "s");
    let (failing, refused) = (
        Arc::new(AtomicBool::new(true)),
        Arc::<AtomicUsize>::default(),
    );
    let (f, r) = (failing.clone(), refused.clone());
    let plan = Plan {
        wrap_store: Some(Box::new(move |inner| {
            Arc::new(FailingCheckpoints {
                inner,
                failing: f,
                refused: r,
            }) as Arc<dyn LeaseStore>
        })),
        ..Plan::default()
    };
    let handler = Native::new(|records: &[Record]| Answer::each(vec![Outcome::Ack; records.len()]));
    let run = NativeRun::start(Arc::new(streams), "s", handler, plan);
    let refusing = run
        .wait(Duration::from_secs(10), |_| {
            refused.load(Ordering::SeqCst) > 0
        })
        .await;
    assert!(refusing, "a checkpoint write was tried");
    tokio::time::sleep(Duration::from_secs(3)).await;
    failing.store(false, Ordering::SeqCst);
    let last = seqs[299].clone();
    let written = run
        .wait(Duration::from_secs(60), |r| {
            r.checkpoint(SHARD).is_some_and(|c| c.starts_with(&last))
        })
        .await;
    let stored = run
        .store
        .read(&LeaseKey::new("s", SHARD))
        .await
        .unwrap()
        .and_then(|l| l.checkpoint);
    let settled = run.settled.lock().unwrap().len();
    let status = run.shard(SHARD);
    run.stop().await;
    assert!(
        written,
        "the checkpoint was written once the table answered: {status:#?}"
    );
    assert_eq!(
        stored.map(|c| c.to_stored()).as_deref(),
        Some(last.as_str())
    );
    assert_eq!(
        settled, 300,
        "each record handled once: a checkpoint the table failed for 3 s ended the worker and \
         its lease, and the shard was read again from its last checkpoint"
    );
    let status = status.unwrap();
    assert_eq!(status.state, ShardState::Reading);
    assert_eq!(status.counts.delivered, 300);
}
