//! Reading a shard one read ahead, paced to the stream service's read limit.
//!
//! The next read runs on its own task while the handler works on the current one, so reading
//! and handling overlap. One read at most is in flight; reads of a shard start at least
//! [`StreamSource::read_interval`](crate::source::StreamSource::read_interval) apart (Kinesis:
//! 5 per second), and [`wait_after`] says how long to wait after a read that found the shard
//! caught up or empty, so an idle subscription leaves the shard's reads to other consumers.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::metrics::ShardMetrics;
use crate::source::{ReadBatch, ShardReader, SourceError};

/// The longest wait between reads of a shard that stays empty, as a multiple of `poll_interval`.
pub const IDLE_BACKOFF: u32 = 4;

type Answer = (
    Box<dyn ShardReader>,
    Instant,
    Result<ReadBatch, SourceError>,
);

/// A shard's reader and the read in flight on it, if any.
pub(super) struct Reads {
    /// `None` while a read is in flight (the task owns the reader then).
    reader: Option<Box<dyn ShardReader>>,
    pending: Option<Pending>,
    /// When the last read started.
    last_start: Option<Instant>,
    /// How many records the last answered read asked for.
    asked: usize,
    /// What set the pace of the last answered read (see [`Reads::pace`]).
    pace: Pace,
    /// How long the last answered read took to answer.
    took: Duration,
    interval: Duration,
    /// The shard's byte limit (bytes a second), if it has one.
    byte_rate: Option<u64>,
    /// When the bytes of the last read are paid for: the next read starts no sooner.
    paid_at: Option<Instant>,
    metrics: ShardMetrics,
}

/// What set the pace of an answered read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// The stream's read limits: the loop waited for the read, and it answered within half the
    /// spacing the limits put between it and the next (the read interval, or its bytes at the
    /// byte rate), so a read twice the size would answer before the next may start too.
    Limits,
    /// The server: the loop waited for the read, and it took longer than that to answer.
    Server,
    /// The handler: the read had answered before the loop asked for it.
    Handler,
    /// Not known: the read failed, or the source has no read limits (the embedded stream).
    Unknown,
}

/// A read on its own task; dropping it abandons the read.
struct Pending {
    task: JoinHandle<Answer>,
    /// The records it asked for.
    asked: usize,
    /// The loop asked for its answer before it came.
    waited: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Reads {
    pub fn new(
        reader: Box<dyn ShardReader>,
        interval: Duration,
        byte_rate: Option<u64>,
        metrics: ShardMetrics,
    ) -> Reads {
        Reads {
            reader: Some(reader),
            pending: None,
            last_start: None,
            asked: 0,
            pace: Pace::Unknown,
            took: Duration::ZERO,
            interval,
            byte_rate,
            paid_at: None,
            metrics,
        }
    }

    /// Starts a read of up to `limit` records, not before `not_before`, not sooner than the
    /// read interval after the previous read started, and not before the bytes of the previous
    /// read are paid for at the shard's byte rate. Does nothing if a read is in flight.
    pub fn start(&mut self, limit: usize, not_before: Instant) {
        let Some(mut reader) = self.reader.take() else {
            return;
        };
        let mut at = match self.last_start {
            Some(last) => not_before.max(last + self.interval),
            None => not_before,
        };
        if let Some(paid) = self.paid_at {
            at = at.max(paid);
        }
        // Counted from the planned start, so a read abandoned by a seek still spaces the next.
        self.last_start = Some(at);
        self.pending = Some(Pending {
            task: tokio::spawn(
                async move {
                    // A read due now does not wait for the timer wheel's next tick (1 ms): with
                    // one-record reads that tick alone would cap a shard near 1 000 a second.
                    if at > Instant::now() {
                        tokio::time::sleep_until(at).await;
                    }
                    let started = Instant::now();
                    let read = reader.read(limit).await;
                    (reader, started, read)
                }
                .in_current_span(),
            ),
            asked: limit,
            waited: false,
        });
    }

    /// The answer of the read in flight (call [`Reads::start`] first). Cancel-safe: the read
    /// stays in flight when the caller stops waiting.
    pub async fn next(&mut self) -> Result<ReadBatch, SourceError> {
        let pending = self.pending.as_mut().expect("a read was started");
        pending.waited |= !pending.task.is_finished();
        let joined = (&mut pending.task).await;
        let waited = pending.waited;
        self.asked = pending.asked;
        self.pending = None;
        let (reader, started, read) = match joined {
            Ok(answer) => answer,
            // A bug in a reader, not a read that failed: the worker fails as a whole.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("a shard read was cancelled: {e}"),
        };
        self.reader = Some(reader);
        self.last_start = Some(started);
        let took = started.elapsed();
        self.took = took;
        self.pace = Pace::Unknown;
        match &read {
            Ok(batch) => {
                self.metrics.read(batch.records.len());
                let paid = self.byte_rate.map(|rate| paid_in(batch, rate));
                self.paid_at = paid.map(|paid| started + paid);
                let spacing = self.interval.max(paid.unwrap_or_default());
                self.pace = match () {
                    _ if spacing.is_zero() => Pace::Unknown,
                    _ if !waited => Pace::Handler,
                    _ if took.saturating_mul(2) <= spacing => Pace::Limits,
                    _ => Pace::Server,
                };
            }
            Err(SourceError::Throttled(_)) => self.metrics.throttled(),
            Err(_) => {}
        }
        read
    }

    /// How many records the last answered read asked for (a read started ahead may have asked
    /// for fewer than the subscription's limit).
    pub fn asked(&self) -> usize {
        self.asked
    }

    /// What set the pace of the last answered read (see [`Pace`]).
    pub fn pace(&self) -> Pace {
        self.pace
    }

    /// How long the last answered read took to answer, from its start.
    pub fn took(&self) -> Duration {
        self.took
    }

    /// Reads from `reader` from now on; a read in flight on the old one is abandoned.
    pub fn reopen(&mut self, reader: Box<dyn ShardReader>) {
        self.pending = None;
        self.reader = Some(reader);
    }
}

/// How long the bytes of `batch` take at `rate` bytes a second: a shard read at its limit
/// (Kinesis: 10 MiB, then nothing for 5 s) is read again when they are paid for, not before
/// (a throttle) and not later (a back-off).
fn paid_in(batch: &ReadBatch, rate: u64) -> Duration {
    let bytes: u64 = batch.records.iter().map(|r| r.data.len() as u64).sum();
    Duration::from_secs_f64(bytes as f64 / rate.max(1) as f64)
}

/// How long after a read to start the next one, by what it found: at once while the shard is
/// behind (the read was full, or it is more than a poll interval behind its tip); a poll
/// interval when it is caught up; and while it stays empty, waits doubling up to
/// [`IDLE_BACKOFF`] poll intervals (`empty_reads` in a row, this one included).
pub fn wait_after(batch: &ReadBatch, limit: usize, poll: Duration, empty_reads: u32) -> Duration {
    if batch.records.is_empty() {
        let doublings = empty_reads.saturating_sub(1).min(IDLE_BACKOFF.ilog2());
        return poll.saturating_mul(1 << doublings);
    }
    if behind(batch, limit, poll) {
        Duration::ZERO
    } else {
        poll
    }
}

/// Whether a read of up to `limit` records found the shard behind: it came back full, or more
/// than a poll interval behind the shard's tip.
pub fn behind(batch: &ReadBatch, limit: usize, poll: Duration) -> bool {
    batch.records.len() >= limit
        || batch
            .millis_behind_latest
            .is_some_and(|ms| Duration::from_millis(ms) > poll)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;

    fn batch(n: usize, behind: Option<u64>) -> ReadBatch {
        ReadBatch {
            records: (0..n)
                .map(|i| Record {
                    partition_key: "k".into(),
                    sequence_number: (i + 1).to_string(),
                    sub_sequence_number: 0,
                    approximate_arrival_timestamp: 0,
                    data: Vec::new(),
                })
                .collect(),
            millis_behind_latest: behind,
            end_of_shard: false,
        }
    }

    #[test]
    fn a_shard_behind_its_tip_is_read_again_at_once() {
        let poll = Duration::from_secs(1);
        assert_eq!(
            wait_after(&batch(10_000, Some(0)), 10_000, poll, 0),
            Duration::ZERO
        );
        assert_eq!(
            wait_after(&batch(5, Some(60_000)), 10_000, poll, 0),
            Duration::ZERO
        );
    }

    #[test]
    fn a_caught_up_shard_is_read_once_per_poll_interval() {
        let poll = Duration::from_secs(1);
        assert_eq!(wait_after(&batch(5, Some(0)), 10_000, poll, 0), poll);
        assert_eq!(wait_after(&batch(5, Some(900)), 10_000, poll, 0), poll);
        assert_eq!(wait_after(&batch(5, None), 10_000, poll, 0), poll);
    }

    /// A shard far behind whose server answers every read, full, after `takes`.
    struct Behind {
        takes: Duration,
    }

    #[async_trait::async_trait]
    impl ShardReader for Behind {
        async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
            // The scenario: the server's answer time (virtual).
            tokio::time::sleep(self.takes).await;
            let mut batch = batch(limit, Some(60_000));
            for r in &mut batch.records {
                r.data = vec![0; 1000];
            }
            Ok(batch)
        }
    }

    /// Reads of 100 records of 1 000 bytes, `interval` apart and paid for at `byte_rate`, from a
    /// server that answers in `takes`.
    fn reads(takes: Duration, interval: Duration, byte_rate: Option<u64>) -> Reads {
        let metrics = crate::metrics::Metrics::new().shard("sub", "shard");
        Reads::new(Box::new(Behind { takes }), interval, byte_rate, metrics)
    }

    const KINESIS: Duration = Duration::from_millis(200);

    #[tokio::test(start_paused = true)]
    async fn a_read_the_loop_waits_for_that_answers_within_half_the_read_interval_is_paced() {
        let mut reads = reads(Duration::from_millis(20), KINESIS, None);
        reads.start(100, Instant::now());
        reads.next().await.unwrap();
        assert_eq!(
            reads.pace(),
            Pace::Limits,
            "the read interval sets the pace"
        );
        reads.start(100, Instant::now());
        reads.next().await.unwrap();
        assert_eq!(
            reads.pace(),
            Pace::Limits,
            "and the next one is held back to it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_answered_before_the_loop_asks_for_it_is_not_paced() {
        let mut reads = reads(Duration::from_millis(20), KINESIS, None);
        reads.start(100, Instant::now());
        // The scenario: the handler works on the last read for a second; the next one waits.
        tokio::time::sleep(Duration::from_secs(1)).await;
        reads.next().await.unwrap();
        assert_eq!(reads.pace(), Pace::Handler, "the handler sets the pace");
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_answered_in_more_than_half_the_read_interval_is_paced_by_the_server() {
        // A read twice as large would not answer within the interval: the server sets the pace.
        for takes in [120, 250] {
            let mut reads = reads(Duration::from_millis(takes), KINESIS, None);
            reads.start(100, Instant::now());
            reads.next().await.unwrap();
            assert_eq!(reads.pace(), Pace::Server, "answered in {takes} ms");
            assert_eq!(reads.took(), Duration::from_millis(takes));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_answered_within_half_the_time_its_bytes_take_to_pay_is_paced() {
        // 100 000 bytes at 200 000 bytes a second: the next read starts 500 ms after this one.
        let mut reads = reads(Duration::from_millis(220), KINESIS, Some(200_000));
        reads.start(100, Instant::now());
        reads.next().await.unwrap();
        assert_eq!(reads.pace(), Pace::Limits);
    }

    #[tokio::test(start_paused = true)]
    async fn what_paces_reads_of_a_source_without_read_limits_is_not_known() {
        let mut reads = reads(Duration::ZERO, Duration::ZERO, None);
        reads.start(100, Instant::now());
        reads.next().await.unwrap();
        assert_eq!(reads.pace(), Pace::Unknown);
    }

    #[test]
    fn an_empty_shard_is_read_less_and_less_often_up_to_four_poll_intervals() {
        let poll = Duration::from_secs(1);
        let waits: Vec<_> = (1..=5)
            .map(|n| wait_after(&batch(0, Some(0)), 10_000, poll, n).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 4, 4]);
    }
}
