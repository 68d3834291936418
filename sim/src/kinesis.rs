//! Kinesis' own calls over the simulated stream ([`KinesisApi`]), so that the host's real
//! polling reader (iterators that expire after 300 s or when a fault says so, throttles,
//! GetRecords' end of shard) and its real fan-out reader (subscriptions that push, end after
//! 5 minutes or early, fail as denied, limited or in use) read it. [`crate::logged::Logged`] wraps either and
//! logs what it hands out, as the simulation's own reader does.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shardhost::lease::now_ms;
use shardhost::record::Record;
use shardhost::testing::kinesis_api::{
    ApiError, ApiErrorKind, GotRecords, IteratorAt, KinesisApi, ShardEvent, ShardEvents,
};
use tokio_util::sync::CancellationToken;

use crate::faults::Faults;
use crate::log::Log;
use crate::stream::{Stream, seq_text};

/// What an injected panic of a subscription's event stream says (the simulation's panic hook
/// keeps it out of the output).
pub const INJECTED_PANIC: &str = "injected: the subscription's event stream panics";

/// How long a subscription may leave its events unread: the host cancels one whose reader has
/// no room within 2 s (events left in the connection would stall every subscription sharing
/// its flow-control window).
const UNREAD_MS: u64 = 10_000;

/// How long an iterator lives, and a subscription.
const ITERATOR_LIFE_MS: u64 = 300_000;
const SUBSCRIPTION_LIFE: Duration = Duration::from_secs(300);

/// One instance's Kinesis calls on one simulated stream.
pub struct SimKinesis {
    pub stream: Arc<Stream>,
    pub inc: u32,
    pub faults: Arc<Faults>,
    pub killed: CancellationToken,
}

fn other(why: &str) -> ApiError {
    ApiError::new(ApiErrorKind::Other, why.to_owned())
}

impl SimKinesis {
    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.stream.log.lock().unwrap()
    }

    /// Waits `delay`; a killed instance's calls never answer.
    async fn wait(&self, delay: Duration) {
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = self.killed.cancelled() => std::future::pending().await,
        }
    }

    /// A call's faults: its delay, and the error it answers, if any.
    async fn enter(&self, what: &str, read: bool) -> Result<(), ApiError> {
        let f = self.faults.source(self.inc, what, read);
        self.wait(f.delay).await;
        if f.throttled {
            return Err(ApiError::new(ApiErrorKind::Throttled, "injected throttle"));
        }
        if f.expired {
            return Err(ApiError::new(ApiErrorKind::ExpiredIterator, "injected"));
        }
        if f.error {
            return Err(self.failure(read));
        }
        Ok(())
    }

    /// A failed call (a subscribe fails in every way Kinesis fails one).
    fn failure(&self, read: bool) -> ApiError {
        let kind = match (read, self.log().now() % 4) {
            (true, _) | (_, 0) => ApiErrorKind::Other,
            (_, 1) => ApiErrorKind::Denied,
            (_, 2) => ApiErrorKind::LimitExceeded,
            _ => ApiErrorKind::InUse,
        };
        ApiError::new(kind, "injected: the stream service fails")
    }

    /// A call at the tip of `shard` is sent: where the tip is now (a reader opening there
    /// promises every record from here on, whether this call succeeds or not).
    fn sent_at_latest(&self, shard: &str, at: &IteratorAt) -> Option<usize> {
        if *at != IteratorAt::Latest {
            return None;
        }
        self.faults.called_at_latest(shard);
        let i = self.shard_index(shard).ok()?;
        Some(self.index_at(i, at))
    }

    /// The call at the tip sent at `sent` failed: the reader opened there all the same (it
    /// must not skip what arrives while it tries again).
    fn failed_at_latest(&self, shard: &str, sent: Option<usize>) {
        if let Some(index) = sent {
            self.log().opened_latest(shard, index);
        }
    }

    fn shard_index(&self, shard: &str) -> Result<usize, ApiError> {
        let shards = self.stream.shards.lock().unwrap();
        shards
            .iter()
            .position(|s| s.id == shard)
            .ok_or_else(|| other("ResourceNotFound: no such shard"))
    }

    /// The index of the first record `at` reads.
    fn index_at(&self, shard: usize, at: &IteratorAt) -> usize {
        let shards = self.stream.shards.lock().unwrap();
        let records = &shards[shard].records;
        match at {
            IteratorAt::TrimHorizon => 0,
            IteratorAt::Latest => records.len(),
            IteratorAt::Timestamp(ms) => {
                records.partition_point(|r| r.approximate_arrival_timestamp < *ms)
            }
            IteratorAt::AtSequence(s) => records.partition_point(|r| r.sequence_number < *s),
            IteratorAt::AfterSequence(s) => records.partition_point(|r| r.sequence_number <= *s),
        }
    }

    fn opened(&self, shard: &str, index: usize, at: &IteratorAt) {
        if *at == IteratorAt::Latest {
            self.log().opened_latest(shard, index);
        }
    }
}

#[async_trait]
impl KinesisApi for SimKinesis {
    async fn get_shard_iterator(
        &self,
        _stream: &str,
        shard: &str,
        at: &IteratorAt,
    ) -> Result<Option<String>, ApiError> {
        if matches!(at, IteratorAt::AfterSequence(_))
            && let Some(hang) = self.faults.probe_hang(self.inc, shard)
        {
            // Only a fan-out subscription's end-of-shard question opens after a sequence
            // number (the readers open AT one).
            self.wait(hang).await;
        }
        let sent = self.sent_at_latest(shard, at);
        if let Err(e) = self.enter("open", false).await {
            self.failed_at_latest(shard, sent);
            return Err(e);
        }
        let i = self.shard_index(shard)?;
        let index = self.index_at(i, at);
        self.opened(shard, index, at);
        Ok(Some(format!("{i}:{index}:{}", now_ms())))
    }

    async fn get_records(&self, iterator: &str, limit: usize) -> Result<GotRecords, ApiError> {
        self.enter("read", true).await?;
        let mut parts = iterator.split(':').map(|p| p.parse::<u64>());
        let (Some(Ok(shard)), Some(Ok(index)), Some(Ok(issued))) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(other("InvalidArgument: not an iterator"));
        };
        if now_ms() > issued + ITERATOR_LIFE_MS {
            return Err(ApiError::new(ApiErrorKind::ExpiredIterator, "past 300 s"));
        }
        let shards = self.stream.shards.lock().unwrap();
        let s = &shards[shard as usize];
        if self.faults.refused_at_start(self.inc, &s.id, "read") {
            return Err(ApiError::new(ApiErrorKind::ExpiredIterator, "injected"));
        }
        let from = (index as usize).min(s.records.len());
        let end = (from + limit.max(1)).min(s.records.len());
        let ended = s.closed && end == s.records.len();
        Ok(GotRecords {
            records: s.records[from..end].to_vec(),
            next_iterator: (!ended).then(|| format!("{shard}:{end}:{}", now_ms())),
            millis_behind_latest: Some(behind(&s.records, end)),
        })
    }

    async fn subscribe(
        &self,
        _consumer_arn: &str,
        shard: &str,
        at: &IteratorAt,
    ) -> Result<Box<dyn ShardEvents>, ApiError> {
        let sent = self.sent_at_latest(shard, at);
        let entered = if self.faults.refused_at_start(self.inc, shard, "subscribe") {
            Err(self.failure(false))
        } else {
            self.enter("subscribe", false).await
        };
        if let Err(e) = entered {
            self.failed_at_latest(shard, sent);
            return Err(e);
        }
        let i = self.shard_index(shard)?;
        let next = self.index_at(i, at);
        self.opened(shard, next, at);
        let continuation = match next {
            0 => seq_text(0),
            n => self.stream.shards.lock().unwrap()[i].records[n - 1]
                .sequence_number
                .clone(),
        };
        Ok(Box::new(Events {
            kinesis: SimKinesis {
                stream: self.stream.clone(),
                inc: self.inc,
                faults: self.faults.clone(),
                killed: self.killed.clone(),
            },
            shard: i,
            next,
            continuation,
            until: tokio::time::Instant::now() + SUBSCRIPTION_LIFE,
            ended: false,
            answered_at: None,
        }))
    }
}

/// How far behind the tip a read that stops at `end` is (ms).
fn behind(records: &[Record], end: usize) -> u64 {
    match (records.get(end), records.last()) {
        (Some(next), Some(tip)) => tip
            .approximate_arrival_timestamp
            .saturating_sub(next.approximate_arrival_timestamp),
        _ => 0,
    }
}

/// One subscription's events: what arrived since the last, every 200 ms or at least every
/// 2 s (empty then), until its life ends, a fault ends it, or the shard ended.
struct Events {
    kinesis: SimKinesis,
    shard: usize,
    next: usize,
    continuation: String,
    until: tokio::time::Instant,
    ended: bool,
    /// When the last event was answered (the subscription reads the next one at once, or
    /// lets the subscription go).
    answered_at: Option<tokio::time::Instant>,
}

impl Events {
    /// The next event is asked for: a subscription that left its events unread past
    /// [`UNREAD_MS`] broke its promise (`events-unread`).
    fn asked(&mut self) {
        let Some(at) = self.answered_at.take() else {
            return;
        };
        let unread = at.elapsed().as_millis() as u64;
        if unread <= UNREAD_MS {
            return;
        }
        let id = self.kinesis.stream.shards.lock().unwrap()[self.shard]
            .id
            .clone();
        let mut log = self.kinesis.log();
        let who = log.who(self.kinesis.inc);
        log.violate(
            "events-unread",
            format!("shard {id}: {who}'s subscription left its events unread for {unread} ms"),
        );
    }
}

#[async_trait]
impl ShardEvents for Events {
    async fn next(&mut self) -> Result<Option<ShardEvent>, ApiError> {
        self.asked();
        let event = self.event().await;
        self.answered_at = Some(tokio::time::Instant::now());
        event
    }
}

impl Events {
    async fn event(&mut self) -> Result<Option<ShardEvent>, ApiError> {
        if self.ended || tokio::time::Instant::now() >= self.until {
            return Ok(None);
        }
        for tick in 0..10 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = self.kinesis.killed.cancelled() => std::future::pending().await,
            }
            if self.kinesis.faults.task_panics() {
                let inc = self.kinesis.inc;
                let id = self.kinesis.stream.shards.lock().unwrap()[self.shard]
                    .id
                    .clone();
                let mut log = self.kinesis.log();
                log.fault(|| format!("#{inc} the subscription of {id}: its event stream panics"));
                let now = log.now();
                log.subscription_panics.insert((inc, id), now);
                drop(log);
                // No lock held: the panic ends the subscription's task, nothing else.
                panic!("{INJECTED_PANIC}");
            }
            // A fault ends the subscription early (an error, or the service closing it).
            if let Err(e) = self.kinesis.enter("event", true).await {
                return match e.kind {
                    ApiErrorKind::Throttled => Ok(None),
                    _ => Err(e),
                };
            }
            let shards = self.kinesis.stream.shards.lock().unwrap();
            let s = &shards[self.shard];
            let records = s.records[self.next.min(s.records.len())..].to_vec();
            let ended = s.closed && self.next + records.len() >= s.records.len();
            if records.is_empty() && !ended && tick < 9 {
                continue;
            }
            self.next += records.len();
            if let Some(last) = records.last() {
                self.continuation = last.sequence_number.clone();
            }
            self.ended = ended;
            return Ok(Some(ShardEvent {
                millis_behind_latest: behind(&s.records, self.next),
                continuation: if ended {
                    String::new()
                } else {
                    self.continuation.clone()
                },
                records,
            }));
        }
        Ok(None)
    }
}
