//! One lane of a batch: its records, in shard order, through one handler instance. Calls take
//! up to `call_batch` records of the same attempt number; a call that fails in a way a record
//! may cause (trap, timeout, memory, fuel) is bisected on fresh instances until the records
//! that fail on their own are found. A lane answers for each record and never touches the
//! shard's settlement: the batch does that once every lane is back.

use std::ops::Range;
use std::sync::Arc;
use tokio::time::Instant;

use super::interrupt::Interrupts;
use crate::handler::{CallContext, CallError, Handler, HandlerFactory, outcomes_per_record};
use crate::metrics::{Metrics, ShardMetrics};
use crate::record::{BatchInfo, Outcome, Position, Record};
use crate::version::short_version;

/// How long a stop lets a call in flight go on before ending it (the call's own timeout may
/// end it sooner).
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// What became of one record of a lane.
#[derive(Clone, Debug)]
pub(super) enum Answer {
    Outcome(Outcome),
    /// Its call failed and bisecting left it failing on its own.
    Failed(CallError),
    /// Not called: the shard was interrupted (lease lost, stop, handoff) or sought elsewhere.
    Unanswered,
}

/// What a lane needs that outlives the batch (lanes may run on other threads).
#[derive(Clone)]
pub(super) struct LaneEnv {
    pub factory: Arc<dyn HandlerFactory>,
    pub ctx: CallContext,
    pub call_batch: usize,
    pub metrics: ShardMetrics,
    pub all_metrics: Arc<Metrics>,
    /// Any of these stops the lane before its next call.
    pub interrupts: Arc<Interrupts>,
    /// The rollout arm whose call times this lane counts, while a rollout runs.
    pub arm: Option<Arc<crate::canary::ArmStats>>,
}

/// A lane's work and, once run, its answers.
pub(super) struct Lane {
    pub handler: Option<Box<dyn Handler>>,
    pub records: Vec<Record>,
    /// The delivery number of each record (1 unless it is a retry copy).
    pub attempts: Vec<u32>,
    pub answers: Vec<Answer>,
    /// A handler asked to seek here; records from it on are left unanswered.
    pub seek: Option<Position>,
}

impl Lane {
    /// An empty lane with room for about `records` records.
    pub fn new(handler: Option<Box<dyn Handler>>, records: usize) -> Self {
        Lane {
            handler,
            records: Vec::with_capacity(records),
            attempts: Vec::with_capacity(records),
            answers: Vec::new(),
            seek: None,
        }
    }

    fn interrupted(env: &LaneEnv) -> bool {
        env.interrupts.now().is_some()
    }

    /// Calls the handler over every record of the lane.
    pub async fn run(mut self, env: &LaneEnv, info: &BatchInfo) -> Lane {
        let n = self.records.len();
        self.answers = vec![Answer::Unanswered; n];
        let mut budget = TimeoutBudget::for_records(n);
        let mut start = 0;
        while start < n && self.seek.is_none() {
            if start > 0 && Self::interrupted(env) {
                break;
            }
            // A run of at most `call_batch` records with one attempt number.
            let attempt = self.attempts[start];
            let mut end = start + 1;
            while end < n && end - start < env.call_batch.max(1) && self.attempts[end] == attempt {
                end += 1;
            }
            if attempt == info.attempt {
                self.call_isolating(env, info, start..end, &mut budget)
                    .await;
            } else {
                let info = BatchInfo {
                    attempt,
                    ..info.clone()
                };
                self.call_isolating(env, &info, start..end, &mut budget)
                    .await;
            }
            start = end;
        }
        self
    }

    /// Calls the records in `range`; on a failure a record may cause, calls each half again
    /// (in record order, so per-key order holds) down to single records.
    async fn call_isolating(
        &mut self,
        env: &LaneEnv,
        info: &BatchInfo,
        range: Range<usize>,
        budget: &mut TimeoutBudget,
    ) {
        let mut todo = vec![range];
        // The first failure of this run of records, once it was reported.
        let mut first: Option<CallError> = None;
        let mut isolated = Vec::new();
        while let Some(range) = todo.pop() {
            if first.is_some() {
                // Each part on a fresh instance: what an earlier part left behind (memory,
                // state) must not make a record look guilty.
                self.handler = None;
            }
            let replaying = first.is_some();
            let Some((result, seek)) = self.call(env, info, range.clone(), replaying).await else {
                env.all_metrics
                    .contained(&env.ctx.subscription, "call-interrupted");
                tracing::warn!(
                    handler = short_version(&env.factory.version()),
                    records = range.len(),
                    "a call in flight was ended by a stop or a lost lease; its records are read again by the shard's next reader"
                );
                return;
            };
            match result {
                // A seek asked for by a call that then failed is not followed.
                Ok(outcomes) if seek.is_some() => {
                    self.answer_until_seek(range, &outcomes, seek.as_deref().unwrap_or_default());
                    return;
                }
                Ok(outcomes) => {
                    env.metrics.outcomes(&outcomes);
                    for (i, o) in range.zip(outcomes) {
                        self.answers[i] = Answer::Outcome(o);
                    }
                }
                Err(e) => {
                    let split = self.should_split(env, &e, &range, budget, first.is_some());
                    first.get_or_insert_with(|| e.clone());
                    if split {
                        let mid = range.start + range.len() / 2;
                        todo.push(mid..range.end);
                        todo.push(range.start..mid);
                    } else {
                        env.metrics.failed(range.len());
                        isolated.push((range.start, e.clone()));
                        for i in range {
                            self.answers[i] = Answer::Failed(e.clone());
                        }
                    }
                }
            }
            if !todo.is_empty() && Self::interrupted(env) {
                return;
            }
        }
        if let Some(first) = first {
            self.report_isolated(env, &first, &isolated);
        }
    }

    /// Once bisecting is over: which records fail on their own, and why when that is not what
    /// the first failure said (the guest's lines while bisecting went at debug).
    fn report_isolated(&self, env: &LaneEnv, first: &CallError, isolated: &[(usize, CallError)]) {
        let version = env.factory.version();
        let handler = short_version(&version);
        for (i, e) in isolated {
            let record = &self.records[*i];
            let (seq, key) = (&record.sequence_number, &record.partition_key);
            // Named in the message, not as fields: `sequence_number` and `partition_key`
            // fields are the per-record outcome lines'.
            if e.to_string() == first.to_string() {
                tracing::warn!(
                    handler,
                    "the record that failed the call: sequence number {seq}, partition key {key}"
                );
            } else {
                tracing::warn!(
                    handler,
                    "a record fails on its own: sequence number {seq}, partition key {key}: {e}"
                );
            }
        }
    }

    /// A call that asked to seek: its answers for records before the target stand; records at
    /// or after it are read again.
    fn answer_until_seek(&mut self, range: Range<usize>, outcomes: &[Outcome], seq: &str) {
        let at = Position::new(seq, 0);
        for (i, o) in range.zip(outcomes) {
            if self.records[i].position() < at {
                self.answers[i] = Answer::Outcome(*o);
            }
        }
        self.seek = Some(at);
    }

    /// Whether a failed call's records are called again in halves: when there is more than
    /// one, a record may have caused the failure, and the timeout budget is not spent (past it,
    /// a part that times out fails as it is; the parts not yet called still are, once).
    fn should_split(
        &self,
        env: &LaneEnv,
        e: &CallError,
        range: &Range<usize>,
        budget: &mut TimeoutBudget,
        bisecting: bool,
    ) -> bool {
        env.all_metrics.trap(&env.ctx.subscription, e.kind());
        if range.len() <= 1 || !e.may_be_a_record() {
            return false;
        }
        let first = self.records[range.start].position();
        if budget.spend(e) {
            env.all_metrics
                .contained(&env.ctx.subscription, "isolation-budget");
            tracing::warn!(
                handler = short_version(&env.factory.version()), records = range.len(),
                first_sequence_number = %first,
                "{e}; the isolation budget of {} timeouts per batch is spent: these records fail without being split further",
                budget.limit
            );
            return false;
        }
        match bisecting {
            // Halving goes on: said at the first failure.
            true => tracing::debug!(
                records = range.len(), first_sequence_number = %first,
                "{e}; calling the records again in halves"
            ),
            // The handler's own error line said why: not again.
            false if e.said_by_the_handler() => tracing::warn!(
                handler = short_version(&env.factory.version()), records = range.len(),
                first_sequence_number = %first,
                "a call failed ({}: the handler's error line above says why); calling the records again in halves to find the ones that fail",
                e.kind()
            ),
            false => tracing::warn!(
                records = range.len(), first_sequence_number = %first,
                "{e}; calling the records again in halves to find the ones that fail"
            ),
        }
        true
    }

    /// One handler call, and the seek it asked for; `None` when a lost lease or a stop ended
    /// it. A failed call drops the instance: the next call gets a fresh one.
    async fn call(
        &mut self,
        env: &LaneEnv,
        info: &BatchInfo,
        range: Range<usize>,
        replaying: bool,
    ) -> Option<(Result<Vec<Outcome>, CallError>, Option<String>)> {
        // A lease found lost while this lane waited (say, on a checkpoint write that stalled
        // past the fence and then answered) ends the lane before the handler sees anything.
        if env.interrupts.lease_lost() {
            return None;
        }
        let records = &self.records[range];
        let mut handler = match self.handler.take() {
            Some(h) => h,
            None => match env.factory.instantiate(&env.ctx).await {
                Ok(mut h) => {
                    if replaying {
                        h.replaying();
                    }
                    h
                }
                Err(e) => return Some((Err(e), None)),
            },
        };
        let started = Instant::now();
        let (lost, stop) = (&env.interrupts.lost, &env.interrupts.stop);
        // A lost lease ends a call in flight at once, a stop after a grace period: its records
        // stay unanswered (read again by whoever reads the shard next) and the instance is
        // thrown away.
        let stopped = async {
            stop.cancelled().await;
            tokio::time::sleep(STOP_GRACE).await;
        };
        let answer = {
            let mut call = handler.handle(info, records);
            match crate::handler::poll_once(call.as_mut()).await {
                Some(answer) => answer,
                None => tokio::select! {
                    biased;
                    answer = call => answer,
                    _ = lost.cancelled() => return None,
                    _ = stopped => return None,
                },
            }
        };
        env.metrics.call(started.elapsed());
        if let Some(arm) = &env.arm {
            arm.call(started.elapsed().as_secs_f64());
        }
        // The wasm import refuses a seek the reader did not deliver at the call; a native
        // handler is held to the same rule here.
        let seek = handler.take_seek().filter(|at| {
            let refused = env.ctx.delivered.as_ref().and_then(|d| d.check(at).err());
            if let Some(why) = &refused {
                tracing::warn!(sequence_number = %at, "a seek was not followed: {why}");
            }
            refused.is_none()
        });
        let outcomes =
            answer.and_then(|a| outcomes_per_record(a, records.len(), handler.version()));
        if outcomes.is_ok() {
            self.handler = Some(handler);
        }
        Some((outcomes, seek))
    }
}

/// How many timeouts a lane may spend isolating records in one batch: as many as it takes to
/// find one slow record by halving (`1 + ⌈log₂ n⌉`). Past the budget, a part that times out
/// fails as it is instead of being split: a handler slow on every record costs about
/// `2·⌈log₂ n⌉` timeouts per batch, not `2n − 1`.
pub(super) struct TimeoutBudget {
    spent: u32,
    limit: u32,
}

impl TimeoutBudget {
    pub fn for_records(n: usize) -> Self {
        let n = n.max(1) as u64;
        TimeoutBudget {
            spent: 0,
            limit: 1 + (64 - (n - 1).leading_zeros()),
        }
    }

    /// Counts a failed call that would be split; answers whether the budget is spent, so that
    /// it is not (only timeouts count: traps and limits fail fast).
    fn spend(&mut self, e: &CallError) -> bool {
        if !matches!(e, CallError::Timeout { .. }) {
            return false;
        }
        self.spent += 1;
        self.spent > self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_budget_is_what_halving_down_to_one_record_takes() {
        let limit = |n| TimeoutBudget::for_records(n).limit;
        assert_eq!(limit(0), 1);
        assert_eq!(limit(1), 1);
        assert_eq!(limit(2), 2);
        assert_eq!(limit(100), 8);
        assert_eq!(limit(128), 8);
        assert_eq!(limit(129), 9);
    }
}
