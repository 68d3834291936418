//! A version's answers for records outside any shard worker (`replay`): the same lanes by key,
//! calls of one attempt of at most `call_batch` records, and failed calls bisected down to the
//! records that fail on their own, exactly as a shard's batch is answered, with nothing settled
//! and nothing to interrupt.

use std::sync::Arc;

use super::batch::lane_of;
use super::interrupt::Interrupts;
use super::lane::{Answer, Lane, LaneEnv};
use crate::handler::{CallContext, Handler, HandlerFactory};
use crate::metrics::Metrics;
use crate::record::{BatchInfo, Outcome, Record};

/// One record's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Judged {
    Outcome(Outcome),
    /// Its call failed, and bisecting left it failing on its own.
    Failed(String),
    /// Not answered (the handler sought before it).
    Unanswered,
}

/// A version answering records, lane by lane, with instances kept between calls.
pub struct Judge {
    env: LaneEnv,
    handlers: Vec<Option<Box<dyn Handler>>>,
}

impl Judge {
    /// `factory` called with `ctx`, `call_batch` records a call at most, over `lanes` lanes.
    pub fn new(
        factory: Arc<dyn HandlerFactory>,
        ctx: CallContext,
        call_batch: usize,
        lanes: usize,
    ) -> Judge {
        // Counted nowhere anyone reads: a judge is not a subscription at work.
        let quiet = Arc::new(Metrics::new());
        Judge {
            env: LaneEnv {
                factory,
                metrics: quiet.shard(&ctx.subscription, &ctx.shard_id),
                ctx,
                call_batch: call_batch.max(1),
                all_metrics: quiet,
                interrupts: Arc::new(Interrupts::none()),
                arm: None,
            },
            handlers: (0..lanes.max(1)).map(|_| None).collect(),
        }
    }

    /// The answers for `records` (each with its attempt) of shard `info.shard_id`, in their
    /// order.
    pub async fn judge(&mut self, info: &BatchInfo, records: &[(Record, u32)]) -> Vec<Judged> {
        self.env.ctx.shard_id = Arc::from(info.shard_id.as_str());
        let n = self.handlers.len();
        let mut lanes: Vec<Lane> = self
            .handlers
            .iter_mut()
            .map(|h| Lane::new(h.take(), records.len().div_ceil(n)))
            .collect();
        let mut at = Vec::with_capacity(records.len());
        for (record, attempt) in records {
            let k = lane_of(&record.partition_key, n);
            at.push((k, lanes[k].records.len()));
            lanes[k].records.push(record.clone());
            lanes[k].attempts.push(*attempt);
        }
        let mut done = Vec::with_capacity(n);
        for lane in lanes {
            done.push(lane.run(&self.env, info).await);
        }
        for (k, lane) in done.iter_mut().enumerate() {
            self.handlers[k] = lane.handler.take();
        }
        at.into_iter()
            .map(|(k, i)| match &done[k].answers[i] {
                Answer::Outcome(o) => Judged::Outcome(*o),
                Answer::Failed(e) => Judged::Failed(e.to_string()),
                Answer::Unanswered => Judged::Unanswered,
            })
            .collect()
    }
}
