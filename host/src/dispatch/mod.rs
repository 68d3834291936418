//! Dispatch: one worker per leased shard reads batches, calls the handler, settles each record
//! by its outcome and writes the checkpoint when it moves.
//!
//! One batch at a time per shard, so a shard's records reach the handler in order. Calls run on
//! the async runtime: a wasm guest yields back at every epoch tick, so a slow handler holds up
//! only its own shard.
//!
//! One job per file, in the order a record meets them: [`plan`] is what a subscription's
//! workers share; this file starts a worker at its position; [`run`] is the read loop ([`read`] keeps one read in flight, [`read_size`] says
//! how many records it asks for, [`in_flight`] the shard's memory bound, [`interrupt`] what ends
//! it early, [`checkpoint`] writes the checkpoint); [`batch`] is one batch (the handler version
//! it runs on, lanes, seeks, each record resolved by its answer); [`lane`] runs one lane's calls
//! (bisecting a failed call); [`retry`] is the retry policy (copies, dead letters, retry-after
//! delays), [`outbox`] publishes a batch's copies and dead letters together, [`again`] calls a
//! record answered retry-after without a cap again in place. Settling itself, the checkpoint
//! moving over answered records, is [`crate::settle`]. [`shadow`] hands each batch to the
//! subscription's shadow, if it has one; [`judge`] answers records outside any worker
//! (`replay`), through the same lanes.

mod again;
mod plan;
pub use plan::{InFlight, Role, SubscriptionPlan};
mod batch;
mod checkpoint;
mod commit;
mod copies;
mod in_flight;
mod interrupt;
mod judge;
pub(crate) use judge::{Judge, Judged};
mod lane;
mod outbox;
mod read;
mod read_size;
mod retry;
mod run;
mod shadow;

use std::sync::Arc;
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::config::StartAt;
use crate::handler::{CallContext, Handler, HandlerFactory};
use crate::lease::{Checkpoint, Lease, LeaseError, LeaseHandle, now_ms};
use crate::metrics::ShardMetrics;
use crate::record::{BatchInfo, Outcome, Position, Record};
use crate::settle::Tracker;
use crate::source::{SourceError, StartPosition, StreamSource};
use crate::status::{ShardCell, ShardState, StatusBoard};
use interrupt::Interrupts;
use lane::LaneEnv;
use retry::Delayed;

use crate::source::OPENED_SLACK_MS;

/// One record's outcome, as a tap sees it.
pub struct Settled<'a> {
    pub subscription: &'a str,
    pub shard_id: &'a str,
    pub record: &'a Record,
    pub outcome: Outcome,
    /// The handler version that answered (the batch's version, for a failed call too).
    pub version: &'a str,
}

/// Called with every record's outcome (after settlement), e.g. to observe a host in tests.
pub type OutcomeTap = Arc<dyn Fn(&Settled<'_>) + Send + Sync>;

/// How a shard worker ended.
#[derive(Debug, PartialEq, Eq)]
pub enum WorkerExit {
    /// Asked to stop; its final checkpoint is written.
    Stopped,
    /// The shard is closed and SHARD_END is written: its children may start.
    ShardEnded,
    /// The shard is closed but a held record keeps it from ending; the lease is kept.
    HeldAtEnd,
    /// The lease was lost: the worker stopped at once and wrote nothing after.
    LeaseLost,
    /// The shard could not be read.
    Failed(String),
}

/// Reads one leased shard until told to stop, the shard ends, or the lease is lost.
pub struct ShardWorker {
    plan: Arc<SubscriptionPlan>,
    ctx: CallContext,
    lease: Arc<LeaseHandle>,
    status: ShardCell,
    metrics: ShardMetrics,
    stop: CancellationToken,
    at_trim_horizon: bool,
}

/// A shard worker's state while it reads.
struct Run<'w> {
    tracker: Tracker,
    /// A moved checkpoint not written yet (coalescing, or the store failed its write).
    pending: Option<Checkpoint>,
    last_write: Instant,
    /// Checkpoint writes in a row the lease store failed, and when the next try may go.
    failed_writes: u32,
    retry_write_at: Option<Instant>,
    /// The slot generation `factory` came from.
    generation: u64,
    /// The handler version this shard's batches run on; the slot is looked at between batches.
    factory: Arc<dyn HandlerFactory>,
    /// `factory`'s version.
    version: Arc<str>,
    /// A live instance of `factory` per lane, reused across calls until one fails.
    handlers: Vec<Option<Box<dyn Handler>>>,
    /// What lanes share (made once per handler version).
    env: Option<Arc<LaneEnv>>,
    /// Retry-after copies waiting for their delay (under a cap).
    delayed: Vec<Delayed>,
    /// Records answered retry-after (no cap) waiting to be called again.
    waiting: Vec<again::Waiting>,
    /// A handler sought here: the reader reopens at it after the batch.
    seek_to: Option<Position>,
    /// Records per call when a batch's state writes did not fit in one commit (fewer than the
    /// plan's from then on).
    call_step: Option<usize>,
    /// A state commit conflicted: the first record whose writes it would have committed.
    state_conflict: Option<Position>,
    /// The record that stops the checkpoint, and since when this worker holds it.
    held: Option<(Position, std::time::SystemTime)>,
    /// What every call of this shard is told (the reader's lag updated per read).
    info: Arc<BatchInfo>,
    /// The shard's stream: reads, retry copies and dead letters.
    source: Arc<dyn StreamSource>,
    /// Shared, so that a wait can hold them while the worker's state changes.
    interrupts: Arc<Interrupts>,
    /// The link to the subscription's shadow, when it has one.
    shadow: shadow::ShadowLink,
    /// The rollout arm this shard counts into, while a rollout runs.
    arm: Option<Arc<crate::canary::ArmStats>>,
    worker: &'w ShardWorker,
}

impl ShardWorker {
    pub fn new(
        plan: Arc<SubscriptionPlan>,
        shard_id: &str,
        lease: Arc<LeaseHandle>,
        status: StatusBoard,
        stop: CancellationToken,
    ) -> Self {
        let ctx = CallContext {
            subscription: plan.name.clone(),
            stream: plan.stream.clone(),
            shard_id: Arc::from(shard_id),
            publisher: plan.publisher.clone(),
            delivered: Some(Arc::default()),
            metrics: Some(plan.metrics.clone()),
            log_budget: crate::log_budget::LogBudget::default(),
            effects: None,
            pending: plan.commit_state.then(Arc::default),
        };
        ShardWorker {
            status: status.shard(&plan.name, &plan.shard_label(shard_id)),
            metrics: plan.metrics.shard(&plan.name, &plan.shard_label(shard_id)),
            plan,
            ctx,
            lease,
            stop,
            at_trim_horizon: false,
        }
    }

    /// Opens the shard at its beginning when it has no checkpoint (a child whose parents were
    /// read to their end), whatever `start_at` says.
    pub fn at_trim_horizon(mut self, yes: bool) -> Self {
        self.at_trim_horizon = yes;
        self
    }

    /// Runs the shard to its end.
    pub async fn run(self, source: Arc<dyn StreamSource>) -> WorkerExit {
        let lease = self.lease.current().await;
        let start = match self.start_position(&lease).await {
            Ok(Some(start)) => start,
            Ok(None) => return WorkerExit::ShardEnded,
            Err(e) => return self.lease_error(e),
        };
        tracing::info!(start = ?start, "reading shard");
        let reader = match source
            .open(&self.plan.stream, &self.ctx.shard_id, &start)
            .await
        {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        let owner = lease.owner.clone().unwrap_or_default();
        self.status.update(|s| {
            s.owner = owner;
            s.checkpoint = lease.checkpoint.as_ref().map(Checkpoint::to_stored);
            s.state = ShardState::Reading;
        });
        let (generation, factory, arm) = self.plan.handler.current_for(&self.ctx.shard_id);
        let mut run = Run {
            arm,
            tracker: Tracker::new(lease.checkpoint),
            pending: None,
            last_write: Instant::now(),
            failed_writes: 0,
            retry_write_at: None,
            generation,
            version: factory.version().into(),
            factory,
            handlers: (0..self.plan.lanes.max(1)).map(|_| None).collect(),
            env: None,
            delayed: Vec::new(),
            waiting: Vec::new(),
            seek_to: None,
            call_step: None,
            state_conflict: None,
            held: None,
            info: Arc::new(BatchInfo {
                stream: self.plan.stream.to_string(),
                shard_id: self.ctx.shard_id.to_string(),
                millis_behind_latest: None,
                attempt: 1,
            }),
            source,
            interrupts: Arc::new(Interrupts {
                lost: self.lease.lost().clone(),
                stop: self.stop.clone(),
                handoff: self.lease.handoff().clone(),
                lease: Some(self.lease.clone()),
            }),
            shadow: Default::default(),
            worker: &self,
        };
        let exit = run.read_loop(reader).await;
        // What waited to be called again is left to the shard's next reader.
        run.waiting.clear();
        run.report(None);
        let state = match &exit {
            WorkerExit::Stopped => ShardState::Stopped,
            WorkerExit::ShardEnded => ShardState::Ended,
            WorkerExit::HeldAtEnd => ShardState::HeldAtEnd,
            WorkerExit::LeaseLost => ShardState::LeaseLost,
            WorkerExit::Failed(_) => ShardState::Failed,
        };
        self.status.update(|s| s.state = state);
        // A shard held at its end stays leased here with its record held: its sample stays.
        if !matches!(exit, WorkerExit::HeldAtEnd) {
            self.metrics.held_since(None);
        }
        exit
    }

    /// Where reading starts: after the checkpoint; without one, at the beginning for a child
    /// of read parents, else where `start_at` says. `None` when the shard has ended.
    async fn start_position(&self, lease: &Lease) -> Result<Option<StartPosition>, LeaseError> {
        Ok(Some(match &lease.checkpoint {
            Some(Checkpoint::ShardEnd) => return Ok(None),
            Some(Checkpoint::At(p)) => StartPosition::After(p.clone()),
            None if self.at_trim_horizon => StartPosition::TrimHorizon,
            None => match self.plan.start_at {
                StartAt::Latest => match lease.opened_ms {
                    Some(opened) => {
                        tracing::info!(
                            opened_ms = opened,
                            "rewinding shard to when a reader first opened it: it was read but has no checkpoint (start_at = latest would skip what arrived since)"
                        );
                        StartPosition::Timestamp(opened.saturating_sub(OPENED_SLACK_MS))
                    }
                    None => {
                        // Remember this opening before reading anything: whoever reads the shard
                        // next without a checkpoint starts here, never at the tip.
                        self.lease.mark_opened(now_ms()).await?;
                        StartPosition::Latest
                    }
                },
                StartAt::TrimHorizon => StartPosition::TrimHorizon,
                StartAt::Timestamp(ms) => StartPosition::Timestamp(ms),
            },
        }))
    }

    fn lease_error(&self, e: LeaseError) -> WorkerExit {
        match e {
            LeaseError::Lost { .. } => {
                tracing::warn!("lease lost: stopped reading at once, no checkpoint written");
                WorkerExit::LeaseLost
            }
            other => {
                tracing::error!(error = %other, "cannot write to the lease store");
                WorkerExit::Failed(other.to_string())
            }
        }
    }

    fn fail(&self, e: SourceError) -> WorkerExit {
        tracing::error!(error = %e, "cannot read shard");
        self.status.update(|s| {
            s.last_error = Some(e.to_string());
        });
        WorkerExit::Failed(e.to_string())
    }
}
