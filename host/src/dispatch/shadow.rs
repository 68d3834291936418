//! A shard's side of its subscription's shadow ([`crate::shadow`]): after each batch, a copy of
//! its records and the current version's answers goes to the shard's shadow task, through a
//! queue of one that the batch never waits on (a full queue: the batch is not compared, and
//! that is counted). The task, on the shadow thread, runs the candidate over the same lanes on
//! trial, with instances of its own under the same limits, and compares.
//!
//! The copies count in the shard's in-flight bound (`limits.in_flight_records`,
//! `in_flight_bytes`) from the moment they are made until the task is done with them: reads
//! ask for less while the shadow holds them, and a copy that would not fit beside what the
//! shard already holds is not made (the batch is not compared, counted as dropped).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tracing::Instrument;

use super::Run;
use super::lane::{Answer, Lane, LaneEnv};
use super::retry::Delayed;
use crate::handler::{CallError, Handler};
use crate::metrics::Metrics;
use crate::record::{BatchInfo, Record};
use crate::shadow::{Compared, FirstDifference, Shadow};

/// The shard's link to its shadow task, for one shadow generation of the slot.
#[derive(Default)]
pub(super) struct ShadowLink {
    generation: u64,
    tx: Option<mpsc::Sender<Job>>,
    shadow: Option<Arc<Shadow>>,
    /// What the shard's copies hold, whichever shadow holds them (an old one's too, until its
    /// task is done with them).
    held: Arc<Held>,
}

impl ShadowLink {
    /// The records and bytes the shard's shadow copies hold now.
    pub(super) fn held(&self) -> (usize, u64) {
        (
            self.held.records.load(Ordering::Relaxed),
            self.held.bytes.load(Ordering::Relaxed),
        )
    }
}

/// Records and bytes held in batch copies.
#[derive(Default)]
pub(super) struct Held {
    records: AtomicUsize,
    bytes: AtomicU64,
}

/// One copy's share of what its shard and its shadow hold, given back when it is dropped.
struct HeldCopy {
    records: usize,
    bytes: u64,
    shard: Arc<Held>,
    shadow: Arc<Shadow>,
}

impl HeldCopy {
    fn new(records: usize, bytes: u64, shard: Arc<Held>, shadow: Arc<Shadow>) -> HeldCopy {
        shard.records.fetch_add(records, Ordering::Relaxed);
        shard.bytes.fetch_add(bytes, Ordering::Relaxed);
        shadow.stats.hold(records, bytes);
        HeldCopy {
            records,
            bytes,
            shard,
            shadow,
        }
    }
}

impl Drop for HeldCopy {
    fn drop(&mut self) {
        self.shard
            .records
            .fetch_sub(self.records, Ordering::Relaxed);
        self.shard.bytes.fetch_sub(self.bytes, Ordering::Relaxed);
        self.shadow.stats.release(self.records, self.bytes);
    }
}

/// One batch to compare.
struct Job {
    info: Arc<BatchInfo>,
    lanes: Vec<JobLane>,
    /// Counted until the task is done with the job.
    _held: HeldCopy,
}

struct JobLane {
    records: Vec<Record>,
    attempts: Vec<u32>,
    answers: Vec<Answer>,
}

impl Run<'_> {
    /// Offers the shadow (if one is set) a copy of the batch just answered in `lanes`.
    pub(super) fn offer_shadow(&mut self, lanes: &[Lane]) {
        let slot = &self.worker.plan.handler;
        if slot.shadow_generation() != self.shadow.generation {
            self.relink();
        }
        let (Some(tx), Some(shadow)) = (&self.shadow.tx, &self.shadow.shadow) else {
            return;
        };
        let records: usize = lanes.iter().map(|l| l.records.len()).sum();
        let bytes: u64 = lanes
            .iter()
            .flat_map(|l| &l.records)
            .map(Delayed::record_bytes)
            .sum();
        let permit = match tx.try_reserve() {
            Ok(permit) if self.copy_fits(records, bytes) => permit,
            _ => {
                shadow.stats.batch(false, records as u64);
                self.worker
                    .plan
                    .metrics
                    .shadow_batch(&self.worker.plan.name, false);
                return;
            }
        };
        let held = HeldCopy::new(records, bytes, self.shadow.held.clone(), shadow.clone());
        permit.send(Job {
            info: self.info.clone(),
            _held: held,
            lanes: lanes
                .iter()
                .map(|l| JobLane {
                    records: l.records.clone(),
                    attempts: l.attempts.clone(),
                    answers: l.answers.clone(),
                })
                .collect(),
        });
    }

    /// Whether a copy of `records` holding `bytes` fits the in-flight bound beside the shadow's
    /// copies and the retry-after copies waiting, leaving room for the next read.
    fn copy_fits(&self, records: usize, bytes: u64) -> bool {
        let limit = self.worker.plan.in_flight;
        let (held_records, held_bytes) = self.shadow.held();
        let delayed_bytes: u64 = self.delayed.iter().map(Delayed::bytes).sum();
        held_records + self.delayed.len() + records < limit.records
            && held_bytes + delayed_bytes + bytes < limit.bytes
    }

    /// Follows the slot's shadow: drops the link to the old task (it ends after its job) and
    /// starts a task for the new shadow, if there is one.
    fn relink(&mut self) {
        let (generation, shadow) = self.worker.plan.handler.shadow();
        let held = self.shadow.held.clone();
        self.shadow = ShadowLink {
            generation,
            tx: None,
            shadow: None,
            held: held.clone(),
        };
        let Some(shadow) = shadow else {
            return;
        };
        let w = self.worker;
        // Nothing of the shadow's counts into the live families but its own.
        let quiet = Arc::new(Metrics::new());
        let mut ctx = w.ctx.clone();
        ctx.effects = Some(shadow.effects.clone());
        ctx.metrics = None;
        ctx.log_budget = Default::default();
        let env = LaneEnv {
            factory: shadow.factory.clone(),
            ctx,
            call_batch: w.plan.call_batch,
            metrics: quiet.shard(&w.plan.name, &w.ctx.shard_id),
            all_metrics: quiet,
            interrupts: self.interrupts.clone(),
            arm: None,
        };
        let (tx, rx) = mpsc::channel(1);
        let task = Task {
            env,
            shadow: shadow.clone(),
            handlers: (0..self.handlers.len()).map(|_| None).collect(),
            metrics: w.plan.metrics.clone(),
        };
        let span = tracing::info_span!(
            "shadow",
            version = crate::version::short_version(&shadow.version())
        );
        crate::shadow::pool::handle().spawn(task.run(rx).instrument(span));
        self.shadow = ShadowLink {
            generation,
            tx: Some(tx),
            shadow: Some(shadow),
            held,
        };
    }
}

/// A shard's shadow task.
struct Task {
    env: LaneEnv,
    shadow: Arc<Shadow>,
    /// An instance of the candidate per lane, kept across batches until one fails.
    handlers: Vec<Option<Box<dyn Handler>>>,
    metrics: Arc<Metrics>,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        while let Some(job) = rx.recv().await {
            for (k, live) in job.lanes.into_iter().enumerate() {
                let mut lane = Lane::new(self.handlers[k].take(), 0);
                lane.records = live.records;
                lane.attempts = live.attempts;
                let lane = lane.run(&self.env, &job.info).await;
                self.handlers[k] = lane.handler;
                for ((record, current), candidate) in
                    lane.records.iter().zip(&live.answers).zip(&lane.answers)
                {
                    self.compare(&job.info, record, current, candidate);
                }
            }
            self.shadow.stats.batch(true, 0);
            let name = &self.env.ctx.subscription;
            self.metrics.shadow_batch(name, true);
        }
    }

    fn compare(&self, info: &BatchInfo, record: &Record, current: &Answer, candidate: &Answer) {
        let Some(compared) = compare(current, candidate) else {
            return;
        };
        self.shadow.stats.count(compared);
        let subscription = &self.env.ctx.subscription;
        self.metrics.shadow_record(subscription, compared.name());
        let (now, then) = match compared {
            Compared::Agree | Compared::Skipped => return,
            Compared::Differ(now, then) => (now, then),
            Compared::Trapped | Compared::TimedOut => (name(current).unwrap_or("-"), "failed"),
        };
        let error = match candidate {
            Answer::Failed(e) => Some(e.to_string()),
            _ => None,
        };
        let difference = FirstDifference {
            shard_id: info.shard_id.clone(),
            sequence_number: record.sequence_number.clone(),
            partition_key: record.partition_key.to_string(),
            current: now.to_owned(),
            candidate: then.to_owned(),
            error,
        };
        if self.shadow.stats.first_difference(difference.clone()) {
            tracing::warn!(
                shard_id = %difference.shard_id,
                sequence_number = %difference.sequence_number,
                partition_key = %difference.partition_key,
                current = now,
                candidate = then,
                error = difference.error.as_deref().unwrap_or(""),
                "the shadow answers a record differently"
            );
        }
    }
}

fn name(answer: &Answer) -> Option<&'static str> {
    match answer {
        Answer::Outcome(o) => Some(o.name()),
        Answer::Failed(_) => Some("failed"),
        Answer::Unanswered => None,
    }
}

/// The comparison of one record's answers; `None` when the current version did not answer it
/// (nothing to compare with).
fn compare(current: &Answer, candidate: &Answer) -> Option<Compared> {
    let now = name(current)?;
    Some(match candidate {
        Answer::Unanswered => Compared::Skipped,
        Answer::Failed(CallError::Timeout { .. }) => Compared::TimedOut,
        Answer::Failed(_) => Compared::Trapped,
        Answer::Outcome(o) if o.name() == now => Compared::Agree,
        Answer::Outcome(o) => Compared::Differ(now, o.name()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;

    #[test]
    fn answers_compare_by_outcome_and_a_candidate_failure_by_its_kind() {
        let ack = Answer::Outcome(Outcome::Ack);
        let retry = Answer::Outcome(Outcome::Retry);
        let trap = Answer::Failed(CallError::Trap {
            version: "v".into(),
            message: "boom".into(),
            said: false,
        });
        assert_eq!(compare(&ack, &ack), Some(Compared::Agree));
        assert_eq!(
            compare(&retry, &ack),
            Some(Compared::Differ("retry", "ack"))
        );
        assert_eq!(compare(&ack, &trap), Some(Compared::Trapped));
        assert_eq!(compare(&ack, &Answer::Unanswered), Some(Compared::Skipped));
        assert_eq!(compare(&Answer::Unanswered, &ack), None);
        let after = |ms| Answer::Outcome(Outcome::RetryAfter(ms));
        assert_eq!(compare(&after(10), &after(20)), Some(Compared::Agree));
    }
}
