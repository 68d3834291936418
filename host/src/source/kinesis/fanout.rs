//! Enhanced fan-out's reader: a shard read through a SubscribeToShard [`Subscription`] of one
//! registered consumer instead of GetRecords ([`KinesisStreams::fan_out`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::Instrument;

#[cfg(doc)]
use super::KinesisStreams;
use super::api::KinesisApi;
use super::subscription::{Consumer, Push, Pushed, Subscription};
use crate::record::Record;
use crate::source::{ReadBatch, ShardReader, SourceError, StartPosition};

/// Events a subscription may hold for its reader: a little ahead, never a backlog (the
/// subscription pauses instead).
const QUEUED_EVENTS: usize = 2;

/// Opens a reader of `shard_id` that takes what `consumer`'s subscriptions push, starting at
/// `start`.
pub(super) fn open(
    api: Arc<dyn KinesisApi>,
    consumer: &Consumer,
    stream: &str,
    shard_id: &str,
    start: &StartPosition,
) -> Box<dyn ShardReader> {
    let (tx, pushes) = mpsc::channel(QUEUED_EVENTS);
    let subscription = Subscription::new(api, stream, shard_id, consumer.clone(), start, tx);
    let task = tokio::spawn(subscription.run().in_current_span());
    Box::new(FanOutReader {
        shard: shard_id.to_owned(),
        pushes,
        buffer: VecDeque::new(),
        millis_behind_latest: None,
        ended: false,
        task: Subscribed(Some(task)),
    })
}

/// The subscription task; dropping the reader cancels it (and so its SubscribeToShard).
/// `None` once it was found gone.
struct Subscribed(Option<JoinHandle<()>>);

impl Subscribed {
    /// Why the task ended, when it ended before the reader (it panicked).
    async fn why(&mut self) -> String {
        let Some(task) = self.0.take() else {
            return "gone before".to_owned();
        };
        // Its queue is closed: the task is ending, if not ended.
        match tokio::time::timeout(Duration::from_secs(1), task).await {
            Ok(Ok(())) => "returned".to_owned(),
            Ok(Err(e)) => crate::task::panic_message(e),
            Err(_) => "closed its queue and hangs".to_owned(),
        }
    }
}

impl Drop for Subscribed {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// One shard's pushed records, handed out as reads.
struct FanOutReader {
    shard: String,
    pushes: mpsc::Receiver<Push>,
    /// Records of an event beyond what a read asked for.
    buffer: VecDeque<Record>,
    millis_behind_latest: Option<u64>,
    ended: bool,
    task: Subscribed,
}

#[async_trait]
impl ShardReader for FanOutReader {
    /// The records pushed since the last read, up to `limit`; waits for the next event when
    /// none are left (an empty event answers an empty read).
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        if self.buffer.is_empty() && !self.ended {
            match self.pushes.recv().await {
                Some(Ok(Pushed::Records {
                    records,
                    millis_behind_latest,
                })) => {
                    self.buffer.extend(records);
                    self.millis_behind_latest = Some(millis_behind_latest);
                }
                Some(Ok(Pushed::End)) => self.ended = true,
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(SourceError::SubscriptionGone {
                        shard: self.shard.clone(),
                        why: self.task.why().await,
                    });
                }
            }
        }
        let n = limit.max(1).min(self.buffer.len());
        let records: Vec<Record> = self.buffer.drain(..n).collect();
        Ok(ReadBatch {
            records,
            millis_behind_latest: self.millis_behind_latest,
            end_of_shard: self.ended && self.buffer.is_empty(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reader_whose_subscription_task_panicked_answers_that_it_can_never_read_again() {
        let (tx, pushes) = mpsc::channel::<Push>(QUEUED_EVENTS);
        let task = tokio::spawn(async move {
            let _tx = tx;
            panic!("a bug in the subscription");
        });
        let mut reader = FanOutReader {
            shard: "shardId-000000000000".into(),
            pushes,
            buffer: VecDeque::new(),
            millis_behind_latest: None,
            ended: false,
            task: Subscribed(Some(task)),
        };
        let e = reader.read(10).await.expect_err("nothing can be read");
        assert!(e.ends_reader(), "{e}");
        assert!(
            e.to_string().contains("a bug in the subscription"),
            "the error says why: {e}"
        );
    }
}
