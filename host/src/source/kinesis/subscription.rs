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
//!   yet": it costs one read every 30 s of an idle shard. The question runs beside the events,
//!   never in their way: a slow answer holds up no record.
//! - A reader opened at the tip (`Latest`) subscribes there once; every later subscription
//!   before the first event starts where the reader opened, less a margin (see
//!   `reader::reopened_after_latest`): a first subscription refused or cut must not skip what
//!   arrived meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::time::Instant;

use super::api::{ApiError, ApiErrorKind, IteratorAt, KinesisApi, ShardEvent, ShardEvents};
use super::end_probe::{Asker, Asking, EndProbe, answer, closed_and_read};
use super::reader::{Skip, reopened_after_latest, user_records};
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

/// Where the next subscription starts.
enum From {
    /// The reader's start: nothing was pushed yet (after a first try at `Latest`, the time the
    /// reader opened, less a margin).
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
    pub api: Arc<dyn KinesisApi>,
    pub stream: String,
    pub shard: String,
    pub consumer: Consumer,
    pub tx: mpsc::Sender<Push>,
    from: From,
    skip: Option<Skip>,
    /// Failed subscriptions since the last event.
    failures: u32,
    probe: EndProbe,
    /// When the reader opened (this host's clock, ms since the epoch).
    opened_ms: u64,
}

impl Subscription {
    pub fn new(
        api: Arc<dyn KinesisApi>,
        stream: &str,
        shard: &str,
        consumer: Consumer,
        start: &StartPosition,
        tx: mpsc::Sender<Push>,
    ) -> Subscription {
        Subscription {
            api,
            stream: stream.to_owned(),
            shard: shard.to_owned(),
            consumer,
            tx,
            from: From::Start(start.clone()),
            skip: Skip::of(start),
            failures: 0,
            probe: EndProbe::default(),
            opened_ms: crate::lease::now_ms(),
        }
    }

    /// Subscribes again and again until the shard ends, the reader is dropped, or the task is
    /// aborted (the reader's drop).
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

    /// Where this subscription starts: where the last one left off. A start at the tip is
    /// taken once; from then on, until an event comes, the start is the time of that first
    /// try (less a margin), so a refused or cut first subscription skips nothing.
    fn position(&mut self) -> IteratorAt {
        let at = match &self.from {
            From::Start(start) => IteratorAt::of(start),
            From::Continuation(c) => IteratorAt::AfterSequence(c.clone()),
        };
        if matches!(self.from, From::Start(StartPosition::Latest)) {
            self.from = From::Start(reopened_after_latest(self.opened_ms));
        }
        at
    }

    /// SubscribeToShard where the last one left off.
    async fn subscribe(&mut self) -> Result<Box<dyn ShardEvents>, Failure> {
        let at = self.position();
        let sent = self
            .api
            .subscribe(&self.consumer.arn, &self.shard, &at)
            .await;
        sent.map_err(|e| match e.kind {
            ApiErrorKind::InUse => Failure::InUse(e.failed(self.call())),
            ApiErrorKind::LimitExceeded => Failure::Throttled(SourceError::Throttled(self.call())),
            _ => Failure::Other(e.failed_needing(self.call(), "kinesis:SubscribeToShard")),
        })
    }

    /// Reads one subscription's events until it ends. The question whether the shard ended
    /// runs beside them.
    async fn pump(&mut self, mut events: Box<dyn ShardEvents>) -> Outcome {
        let mut asking: Option<Asking> = None;
        let mut silent_at = Instant::now() + SILENCE;
        loop {
            let received = tokio::select! {
                ended = answer(&mut asking) => {
                    asking = None;
                    if ended {
                        return self.end().await;
                    }
                    continue;
                }
                received = tokio::time::timeout_at(silent_at, events.next()) => received,
            };
            let event = match received {
                Err(_) => {
                    let silent = format!("no event for {SILENCE:?}");
                    let e = SourceError::Service {
                        call: self.call(),
                        source: silent.into(),
                    };
                    return Outcome::Failed(Failure::Other(e));
                }
                Ok(Ok(Some(event))) => event,
                Ok(Ok(None)) => return Outcome::Again,
                Ok(Err(e)) => return Outcome::Failed(self.stream_failure(e)),
            };
            self.failures = 0;
            silent_at = Instant::now() + SILENCE;
            match self.take(event).await {
                Flow::Go => {}
                Flow::Ask(continuation) => {
                    if asking.is_none() {
                        asking = Some(Box::pin(closed_and_read(self.asker(), continuation)));
                    }
                }
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

    fn stream_failure(&self, e: ApiError) -> Failure {
        match e.kind {
            ApiErrorKind::InUse => Failure::InUse(e.failed(self.call())),
            ApiErrorKind::Throttled => Failure::Throttled(SourceError::Throttled(self.call())),
            _ => Failure::Other(e.failed(self.call())),
        }
    }
}

/// What to do after an event.
enum Flow {
    Go,
    /// Go on, and ask (beside the events) whether the shard ended after this continuation.
    Ask(String),
    Stop(Outcome),
    /// The queue stayed full: this is the event to push once there is room.
    Stalled(Pushed),
}

impl Subscription {
    /// One event: its records pushed (after what was handled already), the continuation kept,
    /// the end of the shard noticed.
    async fn take(&mut self, event: ShardEvent) -> Flow {
        let continuation = event.continuation;
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
            millis_behind_latest: event.millis_behind_latest,
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
                            Ok(()) => Flow::Stop(self.end().await),
                            Err(_) => Flow::Stop(Outcome::Done),
                        };
                    }
                    Err(_) => return Flow::Stalled(pushed),
                }
            }
        }
        if ended {
            return Flow::Stop(self.end().await);
        }
        if idle && self.probe.due(Instant::now()) {
            return Flow::Ask(continuation);
        }
        Flow::Go
    }

    /// Tells the reader the shard ended.
    async fn end(&self) -> Outcome {
        tracing::debug!("the subscription reached the end of the shard");
        let _ = self.tx.send(Ok(Pushed::End)).await;
        Outcome::Done
    }

    /// What the question whether the shard ended needs.
    fn asker(&self) -> Asker {
        Asker {
            api: self.api.clone(),
            stream: self.stream.clone(),
            shard: self.shard.clone(),
            call: self.call(),
        }
    }
}

/// The wait after the `failures`th failed subscription in a row: 1 s doubling up to 10 s.
fn backoff(failures: u32) -> Duration {
    SUBSCRIBE_EVERY
        .saturating_mul(1 << failures.saturating_sub(1).min(8))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_subscriptions_wait_one_second_doubling_up_to_ten() {
        let waits: Vec<u64> = (1..=6).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
    }
}
