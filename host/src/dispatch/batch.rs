//! One batch: the handler version it runs on, records registered with the tracker and split
//! into lanes by partition key, the lanes run (side by side when there are several), then every
//! record resolved by its answer, in read order: settled, left for the next reader, or handed to
//! the retry policy ([`retry`](super::retry)), whose copies and dead letters are then published
//! together ([`outbox`](super::outbox)).

use std::sync::Arc;

use tracing::Instrument;

use super::copies::{Copy, Unbelieved};
use super::lane::{Answer, Lane, LaneEnv};
use super::retry::Delivery;
use super::{Run, Settled};
use crate::record::{Outcome, Position, Record};
use crate::version::short_version;

/// What the batch keeps about each record while the lanes run.
pub(super) struct Meta {
    pub delivery: Delivery,
    /// The lane it runs in.
    pub lane: usize,
}

/// The lane of a partition key (FNV-1a): one key always goes to the same lane.
pub(super) fn lane_of(key: &str, lanes: usize) -> usize {
    if lanes == 1 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % lanes as u64) as usize
}

impl Run<'_> {
    /// Hands one batch to the handler and resolves every record. The whole batch runs on the
    /// version current when it starts; a swap takes effect at the next one.
    pub(super) async fn dispatch(&mut self, records: Vec<Record>) {
        self.take_current_version();
        let (lanes, metas, unbelieved) = self.split_into_lanes(records);
        self.run_and_resolve(lanes, metas, unbelieved).await;
    }

    /// Runs the lanes and resolves every record by its answer, in read order (and follows a
    /// seek).
    pub(super) async fn run_and_resolve(
        &mut self,
        lanes: Vec<Lane>,
        metas: Vec<Meta>,
        unbelieved: Vec<Unbelieved>,
    ) {
        let lanes = self.run_lanes(lanes).await;
        // Guest log lines the batch lost to the shard's budget are said once, here.
        self.worker
            .ctx
            .log_budget
            .report(short_version(&self.version));
        let (lanes, seek) = self.collect_seek(lanes);
        // Committed state: a batch not wholly settled is read again, from its first record.
        let seek = self.settle_state(&lanes, seek.as_ref()).or(seek);
        self.offer_shadow(&lanes);
        self.count_arm(&lanes);
        let mut error = None;
        for u in unbelieved {
            // Past a seek it is read again (its ticket forgotten by the seek): dealt with then.
            if seek.as_ref().is_some_and(|at| u.record.position() >= *at) {
                continue;
            }
            error = Some(self.not_a_copy(u).await);
        }
        let mut answers = Vec::with_capacity(lanes.len());
        for lane in lanes {
            answers.push(lane.records.into_iter().zip(lane.answers));
        }
        // Resolved in read order: each lane holds its records in read order.
        for meta in &metas {
            let (record, answer) = answers[meta.lane]
                .next()
                .expect("every record was in a lane");
            let delivery = &meta.delivery;
            if let Some(e) = self.resolve(record, delivery, answer, seek.as_ref()).await {
                error = Some(e);
            }
        }
        if let Some(at) = seek {
            tracing::info!(sequence_number = %at, "the handler sought; reading again from there");
            self.tracker.seek(&at);
            self.forget_delayed_from(&at);
            self.forget_waiting_from(&at);
            self.seek_to = Some(at);
        }
        // The batch's copies and dead letters go out together.
        self.flush_delayed().await;
        self.report(error);
    }

    /// Looks at the subscription's handler slot: a new generation drops the old instances
    /// (in-flight work of the old version is done: batches run one at a time).
    pub(super) fn take_current_version(&mut self) {
        let slot = &self.worker.plan.handler;
        if slot.generation() == self.generation {
            return;
        }
        let (generation, factory, arm) = slot.current_for(&self.worker.ctx.shard_id);
        self.generation = generation;
        self.arm = arm;
        if factory.version() == self.factory.version() {
            // A rollout began or ended elsewhere: this shard's version is unchanged.
            self.env = None;
            return;
        }
        tracing::info!(
            from = short_version(&self.factory.version()),
            to = short_version(&factory.version()),
            "handler swapped; this shard switches at this batch"
        );
        self.factory = factory;
        self.version = self.factory.version().into();
        self.handlers.iter_mut().for_each(|h| *h = None);
        self.env = None;
    }

    /// Registers every record with the tracker, unwraps retry copies (another subscription's
    /// copy is not ours: settled at once; one claiming to be ours that does not authenticate is
    /// set aside), and puts each record into the lane of its key.
    fn split_into_lanes(
        &mut self,
        records: Vec<Record>,
    ) -> (Vec<Lane>, Vec<Meta>, Vec<Unbelieved>) {
        let w = self.worker;
        let n_lanes = self.handlers.len();
        let per_lane = records.len().div_ceil(n_lanes);
        let mut lanes: Vec<Lane> = self
            .handlers
            .iter_mut()
            .map(|h| Lane::new(h.take(), per_lane))
            .collect();
        if let (Some(delivered), Some(first), Some(last)) =
            (&w.ctx.delivered, records.first(), records.last())
        {
            delivered.extend(first, last);
        }
        let mut metas = Vec::with_capacity(records.len());
        let mut unbelieved = Vec::new();
        for mut record in records {
            let ticket = self.tracker.deliver(record.position());
            let (attempt, origin) = match self.copy_of(&record) {
                Copy::Foreign => {
                    // Another subscription's retry copy on a shared stream: not ours to handle.
                    self.tracker.settle(ticket, Outcome::Drop);
                    continue;
                }
                Copy::Ours(h, at) => {
                    record.data.drain(..at);
                    (h.attempt.max(1), Some(h.origin))
                }
                Copy::No => (1, None),
                Copy::Unauthenticated(why) => {
                    unbelieved.push(Unbelieved {
                        record,
                        ticket,
                        why,
                    });
                    continue;
                }
            };
            let lane = lane_of(&record.partition_key, n_lanes);
            lanes[lane].records.push(record);
            lanes[lane].attempts.push(attempt);
            let delivery = Delivery {
                ticket,
                attempt,
                origin,
                waited: std::time::Duration::ZERO,
            };
            metas.push(Meta { delivery, lane });
        }
        (lanes, metas, unbelieved)
    }

    /// Runs the lanes: the first on this task, the others side by side on tasks of their own
    /// (other threads too); each lane has its own instance. Answers them in lane order.
    async fn run_lanes(&mut self, lanes: Vec<Lane>) -> Vec<Lane> {
        let env = self
            .env
            .get_or_insert_with(|| {
                let arm = self.arm.clone();
                Arc::new(self.worker.lane_env(&self.factory, &self.interrupts, arm))
            })
            .clone();
        let info = self.info.clone();
        let mut lanes = lanes.into_iter();
        let first = lanes.next().expect("a shard has at least one lane");
        let others: Vec<_> = lanes
            .map(|lane| {
                let (env, info) = (env.clone(), info.clone());
                tokio::spawn(async move { lane.run(&env, &info).await }.in_current_span())
            })
            .collect();
        let mut done = Vec::with_capacity(1 + others.len());
        done.push(first.run(&env, &info).await);
        for lane in others {
            match lane.await {
                Ok(lane) => done.push(lane),
                // A bug in the host, not the handler (a guest's trap is an answer): the
                // worker fails as a whole and the coordinator reports it.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("a lane task was cancelled: {e}"),
            }
        }
        done
    }

    /// Takes each lane's instance back for the next batch, and answers where to read again if
    /// a handler sought: the earliest target, or the first record before it that no call
    /// answered (a lane stopped at its seek, or was interrupted), so that is read again too.
    fn collect_seek(&mut self, mut lanes: Vec<Lane>) -> (Vec<Lane>, Option<Position>) {
        let mut seek: Option<Position> = None;
        for (k, lane) in lanes.iter_mut().enumerate() {
            self.handlers[k] = lane.handler.take();
            if let Some(at) = lane.seek.take() {
                seek = Some(match seek {
                    Some(s) if s < at => s,
                    _ => at,
                });
            }
        }
        if let Some(at) = &seek
            && let Some(first) = lanes
                .iter()
                .flat_map(|l| l.records.iter().zip(&l.answers))
                .filter(|(r, a)| matches!(a, Answer::Unanswered) && r.position() < *at)
                .map(|(r, _)| r.position())
                .min()
        {
            seek = Some(first);
        }
        (lanes, seek)
    }

    /// What becomes of one record by its answer: settled (ack, drop), left for whoever reads
    /// next (unanswered, or at or past a seek target), held (a failure that is the handler's,
    /// not the record's), or handed to the retry policy. Answers a failed call's error, for
    /// the shard's status.
    async fn resolve(
        &mut self,
        record: Record,
        meta: &Delivery,
        answer: Answer,
        seek: Option<&Position>,
    ) -> Option<String> {
        if seek.is_some_and(|at| record.position() >= *at) {
            return None;
        }
        match answer {
            Answer::Outcome(o) if o.settles() => self.complete(&record, meta, o),
            // Interrupted: it stays unsettled and is read again by whoever reads next.
            Answer::Unanswered => {}
            Answer::Outcome(o) => self.retry(record, meta, o, None).await,
            Answer::Failed(e) => {
                let error = e.to_string();
                if e.may_be_a_record() {
                    self.retry(record, meta, Outcome::Retry, Some(e)).await;
                } else {
                    // The handler's fault (a bad answer, an instance that cannot start), not
                    // the record's: held whatever the retry policy, so no attempts are used up.
                    self.tap(&record, Outcome::Retry);
                    self.tracker
                        .hold(meta.ticket, Outcome::Retry, &record.partition_key);
                }
                return Some(error);
            }
        }
        None
    }

    /// A record handled (ack) or retired (drop): settled, and the checkpoint may pass it.
    fn complete(&mut self, record: &Record, meta: &Delivery, o: Outcome) {
        self.tap(record, o);
        self.tracker.settle(meta.ticket, o);
        tracing::debug!(
            sequence_number = %record.position(), partition_key = %record.partition_key,
            handler = short_version(&self.version), attempt = meta.attempt, "{o}"
        );
    }

    /// Shows the batch's result in the shard's status (and since when a record is held, in
    /// the metrics); also once more when the worker ends, for what settled after the last batch
    /// (a delayed copy published, the shard's end).
    pub(super) fn report(&mut self, error: Option<String>) {
        let counts = self.tracker.counts();
        let blocked = self.tracker.blocked_at();
        if self.held.as_ref().map(|(at, _)| at) != blocked {
            self.held = blocked.map(|at| (at.clone(), std::time::SystemTime::now()));
            let since = self.held.as_ref().map(|(_, since)| *since);
            self.worker.metrics.held_since(since);
        }
        let held_at = self.tracker.blocked_at().map(|p| p.to_string());
        let held_key = self.tracker.blocked_key().map(str::to_owned);
        let held_since_ms = self.held.as_ref().map(|(_, since)| {
            since
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        });
        let version = &self.version;
        let retrying = self.retrying();
        self.worker.status.update(|s| {
            s.retrying = retrying;
            s.counts = counts;
            s.held_at = held_at;
            s.held_key = held_key;
            s.held_since_ms = held_since_ms;
            if *s.handler_version != **version {
                s.handler_version = version.to_string();
            }
            if error.is_some() {
                s.last_error = error;
            }
        });
    }

    /// Tells the subscription's tap (if any) a record's outcome.
    pub(super) fn tap(&self, record: &Record, outcome: Outcome) {
        let w = self.worker;
        if let Some(tap) = &w.plan.tap {
            tap(&Settled {
                subscription: &w.plan.name,
                shard_id: &w.ctx.shard_id,
                record,
                outcome,
                version: &self.version,
            });
        }
    }
}

impl Run<'_> {
    /// Counts the batch's answers into the rollout arm this shard belongs to, if a rollout runs.
    fn count_arm(&self, lanes: &[Lane]) {
        let Some(arm) = &self.arm else {
            return;
        };
        let (mut records, mut failed, mut retried) = (0, 0, 0);
        for answer in lanes.iter().flat_map(|l| &l.answers) {
            match answer {
                Answer::Unanswered => continue,
                Answer::Failed(_) => failed += 1,
                Answer::Outcome(o) if !o.settles() => retried += 1,
                Answer::Outcome(_) => {}
            }
            records += 1;
        }
        arm.records(records, failed, retried);
    }
}

impl super::ShardWorker {
    /// What the lanes of this shard share while `factory` is its version.
    fn lane_env(
        &self,
        factory: &Arc<dyn crate::handler::HandlerFactory>,
        interrupts: &Arc<super::interrupt::Interrupts>,
        arm: Option<Arc<crate::canary::ArmStats>>,
    ) -> LaneEnv {
        LaneEnv {
            arm,
            factory: factory.clone(),
            ctx: self.ctx.clone(),
            call_batch: self.plan.call_batch,
            metrics: self.metrics.clone(),
            all_metrics: self.plan.metrics.clone(),
            interrupts: interrupts.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::lane_of;

    #[test]
    fn a_key_always_goes_to_the_same_lane_and_keys_spread_over_lanes() {
        let lanes: Vec<_> = (0..400).map(|i| lane_of(&format!("key-{i}"), 4)).collect();
        for (i, lane) in lanes.iter().enumerate() {
            assert_eq!(lane_of(&format!("key-{i}"), 4), *lane);
        }
        for lane in 0..4 {
            let n = lanes.iter().filter(|l| **l == lane).count();
            assert!((50..150).contains(&n), "lane {lane} got {n} of 400 keys");
        }
    }
}
