//! One shard's enhanced fan-out subscription, on its own task: SubscribeToShard, events read as
//! they come into a small queue the shard's reader takes them from, and a new subscription at
//! the last event's continuation whenever one ends, so nothing is skipped or repeated.
//!
//! - The service ends every subscription after 5 minutes; a transport error or a long silence
//!   ends one too. Each is followed by a subscription AFTER the last continuation number.
//! - At most one SubscribeToShard a second per shard (the service's limit per consumer).
//!   `ResourceInUse` (another subscription of this consumer still holds the shard: the previous
//!   owner's, or this reader's own just cancelled) is waited out; it is reported only when it
//!   lasts. `LimitExceeded` is reported as a throttle.
//! - Events are always read, never left in the HTTP/2 connection: every subscription of the
//!   host shares that connection's flow-control window, so one shard whose handler is behind
//!   would stall them all. When the queue stays full, the subscription is cancelled instead and
//!   taken up again when there is room.
//! - The end of a shard: the service sends `ChildShards` with no continuation number, then ends
//!   the subscription. kinesis-mock never does (it sends empty events forever, and gives closed
//!   shards no real ending sequence number), so an idle subscription also asks GetRecords after
//!   its continuation from time to time: no records and no next iterator is the end (the rule
//!   polling ends a shard by). On the real service that question is only ever answered "not
//!   yet": it costs one read every 30 s of an idle shard.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::error::SdkError;
use aws_sdk_kinesis::primitives::DateTime;
use aws_sdk_kinesis::primitives::event_stream::EventReceiver;
use aws_sdk_kinesis::types::error::SubscribeToShardEventStreamError;
use aws_sdk_kinesis::types::{
    ShardIteratorType, StartingPosition, SubscribeToShardEvent, SubscribeToShardEventStream,
};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::time::Instant;

use super::consumer::call_error;
use super::reader::{Skip, user_records};
use super::sdk_error;
use crate::record::Record;
use crate::source::{Call, SourceError, StartPosition};

/// SubscribeToShard calls of one shard start at least this far apart (the service's limit).
const SUBSCRIBE_EVERY: Duration = Duration::from_secs(1);
/// The longest wait after failed subscriptions.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// `ResourceInUse` answers in a row before they are reported (the service lets a new
/// subscription take a shard over 5 s after the last one started).
const IN_USE_REPORTED_AFTER: u32 = 10;
/// A subscription silent this long is taken for a dead connection (the service sends an event
/// at least every few seconds, empty ones too).
const SILENCE: Duration = Duration::from_secs(60);
/// How long a full queue may hold up reading events before the subscription is cancelled.
const STALL: Duration = Duration::from_secs(2);
/// An idle subscription first asks whether its shard ended this long after its last records;
/// the wait doubles up to [`PROBE_MAX`].
const PROBE_FIRST: Duration = Duration::from_secs(2);
const PROBE_MAX: Duration = Duration::from_secs(30);

/// A registered stream consumer.
#[derive(Clone, Debug)]
pub struct Consumer {
    pub name: Arc<str>,
    pub arn: Arc<str>,
}

/// What a subscription hands the shard's reader.
pub(super) enum Pushed {
    /// One event's records (possibly none), in shard order.
    Records {
        records: Vec<Record>,
        millis_behind_latest: u64,
    },
    /// The shard is closed and every record of it was pushed.
    End,
}

pub(super) type Push = Result<Pushed, SourceError>;

type Events = EventReceiver<SubscribeToShardEventStream, SubscribeToShardEventStreamError>;

/// Where the next subscription starts.
enum From {
    /// The reader's start: nothing was pushed yet.
    Start(StartPosition),
    /// Just after the last event (its continuation sequence number).
    Continuation(String),
}

/// Why a subscription ended.
enum Outcome {
    /// The service ended it (5 minutes), or it was cancelled to free the connection: go on.
    Again,
    /// The shard ended, or the reader is gone.
    Done,
    Failed(Failure),
}

enum Failure {
    InUse(SourceError),
    Throttled(SourceError),
    Other(SourceError),
}

/// One shard's subscriptions, one after the other.
pub(super) struct Subscription {
    pub client: Client,
    pub stream: String,
    pub shard: String,
    pub consumer: Consumer,
    pub tx: mpsc::Sender<Push>,
    from: From,
    skip: Option<Skip>,
    /// Failed subscriptions since the last event.
    failures: u32,
    probe: EndProbe,
}

impl Subscription {
    pub fn new(
        client: Client,
        stream: &str,
        shard: &str,
        consumer: Consumer,
        start: &StartPosition,
        tx: mpsc::Sender<Push>,
    ) -> Subscription {
        Subscription {
            client,
            stream: stream.to_owned(),
            shard: shard.to_owned(),
            consumer,
            tx,
            from: From::Start(start.clone()),
            skip: Skip::of(start),
            failures: 0,
            probe: EndProbe::default(),
        }
    }

    /// Subscribes again and again until the shard ends or the reader is dropped.
    pub async fn run(mut self) {
        let mut last: Option<Instant> = None;
        loop {
            if let Some(last) = last {
                tokio::time::sleep_until(last + SUBSCRIBE_EVERY).await;
            }
            last = Some(Instant::now());
            let outcome = match self.subscribe().await {
                Ok(events) => self.pump(events).await,
                Err(failure) => Outcome::Failed(failure),
            };
            let failure = match outcome {
                Outcome::Done => return,
                Outcome::Again => continue,
                Outcome::Failed(failure) => failure,
            };
            self.failures += 1;
            let (report, wait) = match failure {
                Failure::InUse(e) => {
                    tracing::debug!(failures = self.failures, "{e}; subscribing again");
                    let lasting = self.failures.is_multiple_of(IN_USE_REPORTED_AFTER);
                    (lasting.then_some(e), SUBSCRIBE_EVERY)
                }
                Failure::Throttled(e) => (Some(e), SUBSCRIBE_EVERY),
                Failure::Other(e) => (Some(e), backoff(self.failures)),
            };
            if let Some(e) = report
                && self.tx.send(Err(e)).await.is_err()
            {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }

    fn call(&self) -> Call {
        Call::Subscribe {
            shard: self.shard.clone(),
            consumer: self.consumer.name.to_string(),
        }
    }

    /// SubscribeToShard where the last one left off. Answers with the first event received.
    async fn subscribe(&mut self) -> Result<Events, Failure> {
        let position = StartingPosition::builder();
        let position = match &self.from {
            // AT, not AFTER: the position may stand inside an aggregate; `skip` drops what
            // was handled already.
            From::Start(StartPosition::After(p) | StartPosition::At(p)) => position
                .r#type(ShardIteratorType::AtSequenceNumber)
                .sequence_number(p.sequence_number()),
            From::Start(StartPosition::TrimHorizon) => {
                position.r#type(ShardIteratorType::TrimHorizon)
            }
            From::Start(StartPosition::Latest) => position.r#type(ShardIteratorType::Latest),
            From::Start(StartPosition::Timestamp(ms)) => position
                .r#type(ShardIteratorType::AtTimestamp)
                .timestamp(DateTime::from_millis(*ms as i64)),
            From::Continuation(c) => position
                .r#type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(c),
        };
        let position = position.build().expect("the type is always set");
        let sent = self
            .client
            .subscribe_to_shard()
            .consumer_arn(&*self.consumer.arn)
            .shard_id(&self.shard)
            .starting_position(position)
            .send()
            .await;
        match sent {
            Ok(out) => Ok(out.event_stream),
            Err(e) => {
                let service = e.as_service_error();
                if service.is_some_and(|s| s.is_resource_in_use_exception()) {
                    Err(Failure::InUse(sdk_error(self.call(), e)))
                } else if service.is_some_and(|s| s.is_limit_exceeded_exception()) {
                    Err(Failure::Throttled(SourceError::Throttled(self.call())))
                } else {
                    let call = self.call();
                    Err(Failure::Other(call_error(
                        call,
                        "kinesis:SubscribeToShard",
                        e,
                    )))
                }
            }
        }
    }

    /// Reads one subscription's events until it ends.
    async fn pump(&mut self, mut events: Events) -> Outcome {
        loop {
            let event = match tokio::time::timeout(SILENCE, events.recv()).await {
                Err(_) => {
                    let silent = format!("no event for {SILENCE:?}");
                    let e = SourceError::Service {
                        call: self.call(),
                        source: silent.into(),
                    };
                    return Outcome::Failed(Failure::Other(e));
                }
                Ok(Ok(Some(SubscribeToShardEventStream::SubscribeToShardEvent(event)))) => event,
                Ok(Ok(Some(_))) => continue,
                Ok(Ok(None)) => return Outcome::Again,
                Ok(Err(e)) => return Outcome::Failed(self.stream_failure(e)),
            };
            self.failures = 0;
            match self.take(event).await {
                Flow::Go => {}
                Flow::Stop(outcome) => return outcome,
                Flow::Stalled(pushed) => {
                    // Free the connection's window, then wait for room: the next
                    // subscription starts after this event.
                    drop(events);
                    tracing::debug!("the shard's handler is behind; subscription paused");
                    return match self.tx.send(Ok(pushed)).await {
                        Ok(()) => Outcome::Again,
                        Err(_) => Outcome::Done,
                    };
                }
            }
        }
    }

    fn stream_failure(
        &self,
        e: SdkError<SubscribeToShardEventStreamError, impl std::fmt::Debug + Send + Sync + 'static>,
    ) -> Failure {
        let service = e.as_service_error();
        if service.is_some_and(|s| s.is_resource_in_use_exception()) {
            Failure::InUse(sdk_error(self.call(), e))
        } else if service.is_some_and(|s| s.is_kms_throttling_exception()) {
            Failure::Throttled(SourceError::Throttled(self.call()))
        } else {
            Failure::Other(sdk_error(self.call(), e))
        }
    }
}

/// What to do after an event.
enum Flow {
    Go,
    Stop(Outcome),
    /// The queue stayed full: this is the event to push once there is room.
    Stalled(Pushed),
}

impl Subscription {
    /// One event: its records pushed (after what was handled already), the continuation kept,
    /// the end of the shard noticed.
    async fn take(&mut self, event: SubscribeToShardEvent) -> Flow {
        let continuation = event.continuation_sequence_number;
        // The service marks the end of a shard by an event without a continuation number
        // (and with the child shards).
        let ended = continuation.is_empty();
        let mut records = user_records(event.records);
        if let Some(skip) = &self.skip {
            skip.apply(&mut records);
        }
        if !records.is_empty() {
            self.skip = None;
            self.probe.records();
        }
        let idle = records.is_empty();
        if !ended {
            self.from = From::Continuation(continuation.clone());
        }
        let pushed = Pushed::Records {
            records,
            millis_behind_latest: event.millis_behind_latest.max(0) as u64,
        };
        match self.tx.try_reserve() {
            Ok(permit) => permit.send(Ok(pushed)),
            Err(TrySendError::Closed(())) => return Flow::Stop(Outcome::Done),
            // An empty event tells the reader nothing it must wait for.
            Err(TrySendError::Full(())) if idle && !ended => {}
            Err(TrySendError::Full(())) => {
                match tokio::time::timeout(STALL, self.tx.reserve()).await {
                    Ok(Ok(permit)) => permit.send(Ok(pushed)),
                    Ok(Err(_)) => return Flow::Stop(Outcome::Done),
                    Err(_) if ended => {
                        return match self.tx.send(Ok(pushed)).await {
                            Ok(()) => self.end().await,
                            Err(_) => Flow::Stop(Outcome::Done),
                        };
                    }
                    Err(_) => return Flow::Stalled(pushed),
                }
            }
        }
        if ended {
            return self.end().await;
        }
        if idle && self.probe.due(Instant::now()) && self.closed_and_read(&continuation).await {
            return self.end().await;
        }
        Flow::Go
    }

    /// Tells the reader the shard ended.
    async fn end(&self) -> Flow {
        tracing::debug!("the subscription reached the end of the shard");
        let _ = self.tx.send(Ok(Pushed::End)).await;
        Flow::Stop(Outcome::Done)
    }

    /// Whether the shard is closed and read to its end after `continuation`: GetRecords there
    /// answers no records and no next iterator. A failed question is "not known yet".
    async fn closed_and_read(&self, continuation: &str) -> bool {
        let iterator = self
            .client
            .get_shard_iterator()
            .stream_name(&self.stream)
            .shard_id(&self.shard)
            .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
            .starting_sequence_number(continuation)
            .send()
            .await;
        let Some(iterator) = iterator.ok().and_then(|o| o.shard_iterator) else {
            return false;
        };
        match self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(1)
            .send()
            .await
        {
            Ok(out) => out.records.is_empty() && out.next_shard_iterator.is_none(),
            Err(e) => {
                tracing::debug!(error = %sdk_error(self.call(), e), "could not ask whether the shard ended");
                false
            }
        }
    }
}

/// The wait after the `failures`th failed subscription in a row: 1 s doubling up to 10 s.
fn backoff(failures: u32) -> Duration {
    SUBSCRIBE_EVERY
        .saturating_mul(1 << failures.saturating_sub(1).min(8))
        .min(MAX_BACKOFF)
}

/// When an idle subscription asks whether its shard ended.
#[derive(Default)]
struct EndProbe {
    next: Option<Instant>,
    every: Duration,
}

impl EndProbe {
    /// Records came: the shard is not at its end.
    fn records(&mut self) {
        self.next = None;
    }

    /// Whether to ask now, after an idle event at `now`.
    fn due(&mut self, now: Instant) -> bool {
        let Some(next) = self.next else {
            self.every = PROBE_FIRST;
            self.next = Some(now + PROBE_FIRST);
            return false;
        };
        if now < next {
            return false;
        }
        self.every = (self.every * 2).min(PROBE_MAX);
        self.next = Some(now + self.every);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_subscriptions_wait_one_second_doubling_up_to_ten() {
        let waits: Vec<u64> = (1..=6).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn an_idle_shard_is_asked_about_its_end_less_and_less_often_until_records_come() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut probe = EndProbe::default();
        assert!(
            !probe.due(at(0)),
            "the first idle event only starts the wait"
        );
        assert!(!probe.due(at(1)));
        assert!(probe.due(at(2)));
        assert!(!probe.due(at(5)));
        assert!(probe.due(at(6)), "4 s after the first question");
        assert!(probe.due(at(14)), "then 8 s");
        probe.records();
        assert!(!probe.due(at(15)));
        assert!(probe.due(at(17)), "records start the waits over");
    }
}
