//! Dispatch: one worker per leased shard reads batches, calls the handler, settles each record
//! by its outcome and writes the checkpoint when it moves.
//!
//! One batch at a time per shard, so a shard's records reach the handler in order. Calls run on
//! the async runtime: a wasm guest yields back at every epoch tick, so a slow handler holds up
//! only its own shard. This file is the read loop and the checkpoint; [`call`] is what happens
//! to one batch (the handler version it runs on, lanes, the retry policy, seeks, settling) and
//! [`lane`] runs one lane's calls (bisecting a failed call).

mod call;
mod lane;
mod read;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::config::StartAt;
use crate::handler::{CallContext, Handler, HandlerFactory, HandlerSlot};
use crate::lease::{Checkpoint, LeaseError, LeaseHandle, now_ms};
use crate::metrics::{Metrics, ShardMetrics};
use crate::publish::Publisher;
use crate::record::{BatchInfo, Outcome, Position, Record};
use crate::settle::Tracker;
use crate::source::{ShardReader, SourceError, StartPosition, StreamSource};
use crate::status::{ShardCell, ShardState, StatusBoard};
use crate::wasm::short_version;
use call::Delayed;

/// A shard read before but never checkpointed is opened this long before the time its first
/// reader opened it, so that a clock difference between this host and Kinesis loses nothing
/// (what arrived in that margin is delivered again: the documented cost is duplicates).
pub const OPENED_SLACK_MS: u64 = 30_000;

/// When a moved checkpoint is written to the lease store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flush {
    /// Once `checkpoint_every` has passed since the last write.
    Due,
    /// Now (a stop, a handoff, the end of a shard).
    Now,
}

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

/// What a subscription's shard workers share.
pub struct SubscriptionPlan {
    pub name: Arc<str>,
    pub stream: Arc<str>,
    /// Records a read asks for (`read_limit`; fewer when the in-flight bound leaves less room).
    pub read_limit: usize,
    /// Records per handler call (`batch`).
    pub call_batch: usize,
    /// At most one checkpoint write per shard per this period (always on stop and SHARD_END).
    pub checkpoint_every: Duration,
    pub poll_interval: Duration,
    pub start_at: StartAt,
    /// The handler new batches run; swapped by deploy, rollback and watch.
    pub handler: Arc<HandlerSlot>,
    /// Parallel lanes per shard (1: none).
    pub lanes: usize,
    /// Records and bytes a shard may keep waiting for a retry-after delay before it stops
    /// reading (`limits.in_flight_records`, `limits.in_flight_bytes`).
    pub in_flight: InFlight,
    /// What retry does under a cap (none: retry holds the record).
    pub retry: Option<RetryPolicy>,
    /// What the handler's `publish` may reach.
    pub publisher: Option<Arc<Publisher>>,
    /// Authenticates retry copies and dead letters (the fleet's key).
    pub envelopes: Arc<crate::envelope::EnvelopeKey>,
    pub metrics: Arc<Metrics>,
    pub tap: Option<OutcomeTap>,
}

/// How much a shard may hold in memory beyond the batch it reads.
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    pub records: usize,
    pub bytes: u64,
}

impl Default for InFlight {
    fn default() -> Self {
        let limits = crate::config::Limits::default();
        InFlight {
            records: limits.in_flight_records,
            bytes: limits.in_flight_bytes,
        }
    }
}

/// `max_attempts`, `retry_stream` and `dead_letter` of a subscription.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Deliveries a record gets; after the last one it goes to `dead_letter`.
    pub max_attempts: u32,
    /// Where retry copies go (the subscription's stream unless configured).
    pub retry_stream: Arc<str>,
    pub dead_letter: Arc<str>,
}

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
    from_trim_horizon: bool,
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
        };
        ShardWorker {
            status: status.shard(&plan.name, shard_id),
            metrics: plan.metrics.shard(&plan.name, shard_id),
            plan,
            ctx,
            lease,
            stop,
            from_trim_horizon: false,
        }
    }

    /// Opens the shard at its beginning when it has no checkpoint (a child whose parents were
    /// read to their end), whatever `start_at` says.
    pub fn from_trim_horizon(mut self, yes: bool) -> Self {
        self.from_trim_horizon = yes;
        self
    }

    /// Runs the shard to its end.
    pub async fn run(self, source: Arc<dyn StreamSource>) -> WorkerExit {
        let shard = self.ctx.shard_id.clone();
        let lease = self.lease.current().await;
        let start = match &lease.checkpoint {
            Some(Checkpoint::ShardEnd) => return WorkerExit::ShardEnded,
            Some(Checkpoint::At(p)) => StartPosition::After(p.clone()),
            None if self.from_trim_horizon => StartPosition::TrimHorizon,
            None => match self.plan.start_at {
                StartAt::Latest => match lease.opened_ms {
                    Some(opened) => {
                        let at = opened.saturating_sub(OPENED_SLACK_MS);
                        tracing::info!(
                            subscription = %self.plan.name, shard = %shard, opened_ms = opened,
                            "rewinding shard to when a reader first opened it: it was read but has no checkpoint (start_at = latest would skip what arrived since)"
                        );
                        StartPosition::Timestamp(at)
                    }
                    None => {
                        // Remember this opening before reading anything: whoever reads the shard
                        // next without a checkpoint starts here, never at the tip.
                        if let Err(e) = self.lease.mark_opened(now_ms()).await {
                            return self.lease_error(e);
                        }
                        StartPosition::Latest
                    }
                },
                StartAt::TrimHorizon => StartPosition::TrimHorizon,
                StartAt::Timestamp(ms) => StartPosition::Timestamp(ms),
            },
        };
        tracing::info!(
            subscription = %self.plan.name, shard = %shard, start = ?start,
            "reading shard"
        );
        let reader = match source.open(&self.plan.stream, &shard, &start).await {
            Ok(r) => r,
            Err(e) => return self.fail(e),
        };
        let owner = lease.owner.clone().unwrap_or_default();
        self.status.update(|s| {
            s.owner = owner;
            s.checkpoint = lease.checkpoint.as_ref().map(Checkpoint::to_stored);
            s.state = ShardState::Reading;
        });
        let (generation, factory) = self.plan.handler.current();
        let mut run = Run {
            tracker: Tracker::new(lease.checkpoint),
            pending: None,
            last_write: Instant::now(),
            generation,
            version: factory.version().into(),
            factory,
            handlers: (0..self.plan.lanes.max(1)).map(|_| None).collect(),
            env: None,
            delayed: Vec::new(),
            seek_to: None,
            source: source.clone(),
            worker: &self,
        };
        let exit = run.loop_(reader, &source).await;
        let state = match &exit {
            WorkerExit::Stopped => ShardState::Stopped,
            WorkerExit::ShardEnded => ShardState::Ended,
            WorkerExit::HeldAtEnd => ShardState::HeldAtEnd,
            WorkerExit::LeaseLost => ShardState::LeaseLost,
            WorkerExit::Failed(_) => ShardState::Failed,
        };
        self.status.update(|s| s.state = state);
        exit
    }

    fn lease_error(&self, e: LeaseError) -> WorkerExit {
        match e {
            LeaseError::Lost { .. } => {
                tracing::warn!(subscription = %self.plan.name, shard = %self.ctx.shard_id, "lease lost: stopped reading at once, no checkpoint written");
                WorkerExit::LeaseLost
            }
            other => {
                tracing::error!(subscription = %self.plan.name, shard = %self.ctx.shard_id, error = %other, "cannot write to the lease store");
                WorkerExit::Failed(other.to_string())
            }
        }
    }

    fn fail(&self, e: SourceError) -> WorkerExit {
        tracing::error!(subscription = %self.plan.name, shard = %self.ctx.shard_id, error = %e, "cannot read shard");
        self.status.update(|s| {
            s.last_error = Some(e.to_string());
        });
        WorkerExit::Failed(e.to_string())
    }
}

/// The longest wait between failed reads of a shard.
const MAX_READ_BACKOFF: Duration = Duration::from_secs(10);

/// The wait after the `failures`th failed read in a row: the poll interval (at least 100 ms),
/// doubling with each failure, up to [`MAX_READ_BACKOFF`].
fn read_backoff(poll_interval: Duration, failures: u32) -> Duration {
    let first = poll_interval.max(Duration::from_millis(100));
    first
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(MAX_READ_BACKOFF)
}

struct Run<'w> {
    tracker: Tracker,
    /// A moved checkpoint not written yet (coalescing).
    pending: Option<Checkpoint>,
    last_write: Instant,
    /// The slot generation `factory` came from.
    generation: u64,
    /// The handler version this shard's batches run on; the slot is looked at between batches.
    factory: Arc<dyn HandlerFactory>,
    /// `factory`'s version.
    version: Arc<str>,
    /// A live instance of `factory` per lane, reused across calls until one fails.
    handlers: Vec<Option<Box<dyn Handler>>>,
    /// What lanes share (made once per handler version).
    env: Option<Arc<lane::LaneEnv>>,
    /// Retry-after copies waiting for their delay (under a cap).
    delayed: Vec<call::Delayed>,
    /// A handler sought here: the reader reopens at it after the batch.
    seek_to: Option<Position>,
    /// For retry copies and dead letters.
    source: Arc<dyn StreamSource>,
    worker: &'w ShardWorker,
}

impl Run<'_> {
    async fn loop_(
        &mut self,
        reader: Box<dyn ShardReader>,
        source: &Arc<dyn StreamSource>,
    ) -> WorkerExit {
        let w = self.worker;
        let lost = w.lease.lost().clone();
        let handoff = w.lease.handoff().clone();
        let poll = w.plan.poll_interval;
        let mut reads = read::Reads::new(reader, source.read_interval(), w.metrics.clone());
        // When the next read may start (a wait after an empty or caught-up read, a backoff).
        let mut next_at = tokio::time::Instant::now();
        // Reads failed in a row (the stream service is down or throttles): waits grow.
        let mut failures = 0u32;
        // Empty reads in a row: the wait between them grows.
        let mut empties = 0u32;
        // Batches in a row that ended in a seek.
        let mut seeks = 0u32;
        loop {
            if self.over_in_flight()
                && let Some(exit) = self.drain_in_flight(&lost, &handoff).await
            {
                return exit;
            }
            // This turn's read: started ahead while the last batch ran, or now.
            reads.start(self.read_limit(0, 0), next_at);
            let read = loop {
                let due = self.next_due();
                tokio::select! {
                    biased;
                    _ = lost.cancelled() => return self.lease_lost(),
                    _ = w.stop.cancelled() => return self.finish().await,
                    _ = handoff.cancelled() => return self.finish().await,
                    read = reads.next() => break read,
                    // Retry-after copies go out on time while the read waits.
                    _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now).into()), if due.is_some() => {
                        self.flush_delayed().await;
                    }
                }
            };
            let mut batch = match read {
                Ok(b) => {
                    if failures > 0 {
                        tracing::info!(subscription = %w.plan.name, shard = %w.ctx.shard_id, failures, "reading again after failed reads");
                        failures = 0;
                    }
                    b
                }
                Err(e) => {
                    failures += 1;
                    let wait = read_backoff(poll, failures);
                    let throttled = matches!(e, SourceError::Throttled(_));
                    // The first failure and then one in ten: an outage does not flood the log.
                    // Throttles are the shard's shared read limit at work, not a fault.
                    if throttled {
                        tracing::debug!(subscription = %w.plan.name, shard = %w.ctx.shard_id, failures, "read throttled; trying again in {wait:?}");
                    } else if failures % 10 == 1 {
                        tracing::warn!(subscription = %w.plan.name, shard = %w.ctx.shard_id, error = %e, failures, "read failed; trying again in {wait:?}");
                    }
                    if !throttled {
                        w.status.update(|s| s.last_error = Some(e.to_string()));
                    }
                    next_at = tokio::time::Instant::now() + wait;
                    continue;
                }
            };
            w.status
                .update(|s| s.millis_behind_latest = batch.millis_behind_latest);
            w.metrics.millis_behind(batch.millis_behind_latest);
            let empty = batch.records.is_empty();
            empties = if empty { empties + 1 } else { 0 };
            next_at = tokio::time::Instant::now()
                + read::wait_after(&batch, reads.asked(), poll, empties);
            if !empty {
                // Read ahead while the handler works on this batch, within the in-flight bound.
                if !batch.end_of_shard {
                    let bytes = batch.records.iter().map(Delayed::record_bytes).sum();
                    let limit = self.read_limit(batch.records.len(), bytes);
                    if limit > 0 {
                        reads.start(limit, next_at);
                    }
                }
                let (records, behind) = (
                    std::mem::take(&mut batch.records),
                    batch.millis_behind_latest,
                );
                if let Some(exit) = self.handle(records, behind, &lost, &handoff).await {
                    return exit;
                }
            }
            self.flush_delayed().await;
            if self.seek_to.is_none() && !empty {
                seeks = 0;
            }
            if let Some(at) = self.seek_to.take() {
                // A handler that seeks batch after batch reads the same records over and over,
                // on the shard's read limit that every consumer shares: back off, doubling.
                seeks += 1;
                if seeks > 1 {
                    let wait = read_backoff(poll, seeks - 1);
                    w.plan.metrics.contained(&w.plan.name, "seek-backoff");
                    if seeks == 2 {
                        tracing::warn!(
                            subscription = %w.plan.name, shard = %w.ctx.shard_id,
                            handler = short_version(&self.version), sequence_number = %at,
                            "the handler seeks again and again; reading again after {wait:?}, waits doubling up to {MAX_READ_BACKOFF:?}"
                        );
                    }
                    if Self::pause(w, &lost, wait).await {
                        return if lost.is_cancelled() {
                            self.lease_lost()
                        } else {
                            self.finish().await
                        };
                    }
                }
                // The rest of this read (and the shard's end, if it came) is read again; a read
                // ahead of the old position is dropped.
                match source
                    .open(&w.plan.stream, &w.ctx.shard_id, &StartPosition::At(at))
                    .await
                {
                    Ok(r) => reads.reopen(r),
                    Err(e) => return w.fail(e),
                }
                next_at = tokio::time::Instant::now();
                continue;
            }
            if batch.end_of_shard {
                // Retry-after copies still waiting must go out before the shard can end.
                while let Some(due) = self.next_due() {
                    tokio::select! {
                        biased;
                        _ = lost.cancelled() => return self.lease_lost(),
                        _ = w.stop.cancelled() => return self.finish().await,
                        _ = handoff.cancelled() => return self.finish().await,
                        _ = tokio::time::sleep_until(due.into()) => self.flush_delayed().await,
                    }
                }
                self.tracker.mark_read_to_end();
                if let Err(e) = self.write_checkpoint(Flush::Now).await {
                    return self.lease_error(e);
                }
                return if self.tracker.is_complete() {
                    tracing::info!(subscription = %w.plan.name, shard = %w.ctx.shard_id, "shard ended (SHARD_END written)");
                    WorkerExit::ShardEnded
                } else {
                    tracing::warn!(subscription = %w.plan.name, shard = %w.ctx.shard_id, "closed shard read to its end, but a held record keeps it from ending");
                    WorkerExit::HeldAtEnd
                };
            }
            if let Err(e) = self.write_checkpoint(Flush::Due).await {
                return self.lease_error(e);
            }
        }
    }

    /// Hands a read to the handler a call's worth per lane at a time, settling and
    /// checkpointing as it goes, so a large read does not hold back outcomes and checkpoints.
    /// Stops early at a seek (the rest is read again), and answers how the worker ends if the
    /// lease is lost or it is told to stop meanwhile.
    async fn handle(
        &mut self,
        records: Vec<Record>,
        millis_behind_latest: Option<u64>,
        lost: &CancellationToken,
        handoff: &CancellationToken,
    ) -> Option<WorkerExit> {
        let w = self.worker;
        let step = w.plan.call_batch.max(1) * self.handlers.len().max(1);
        let mut rest = records.len();
        let mut records = records.into_iter();
        while rest > 0 {
            let take = rest.min(step);
            let part: Vec<Record> = records.by_ref().take(take).collect();
            rest -= take;
            let info = BatchInfo {
                stream: w.plan.stream.to_string(),
                shard_id: w.ctx.shard_id.to_string(),
                millis_behind_latest,
                attempt: 1,
            };
            self.dispatch(info, part).await;
            // A lease lost while the handler ran: settle nothing more into the table.
            if lost.is_cancelled() {
                return Some(self.lease_lost());
            }
            // Told to stop (or to hand over) while the handler ran: some records may be
            // unanswered, so the read ends here (never as a shard's end).
            if w.stop.is_cancelled() || handoff.is_cancelled() {
                return Some(self.finish().await);
            }
            if self.seek_to.is_some() {
                return None;
            }
            if rest > 0 {
                self.flush_delayed().await;
                if let Err(e) = self.write_checkpoint(Flush::Due).await {
                    return Some(self.lease_error(e));
                }
            }
        }
        None
    }

    /// How many records the next read may ask for: the subscription's read limit, less what
    /// the shard already holds in memory (`records` and `bytes` besides the retry-after copies
    /// waiting) under its in-flight bound; 0 when there is no room.
    fn read_limit(&self, records: usize, bytes: u64) -> usize {
        let limit = self.worker.plan.in_flight;
        let held = records + self.delayed.len();
        let held_bytes = bytes + self.delayed_bytes();
        if held_bytes >= limit.bytes {
            return 0;
        }
        self.worker
            .plan
            .read_limit
            .min(limit.records.saturating_sub(held))
    }

    /// The bytes the records waiting for a retry-after delay hold.
    fn delayed_bytes(&self) -> u64 {
        self.delayed.iter().map(|d| d.bytes()).sum()
    }

    /// Whether the records waiting for a retry-after delay reach the in-flight bound.
    fn over_in_flight(&self) -> bool {
        let limit = self.worker.plan.in_flight;
        if self.delayed.is_empty() {
            return false;
        }
        let bytes = self.delayed_bytes();
        self.delayed.len() >= limit.records || bytes >= limit.bytes
    }

    /// Stops reading until the delayed records drain below the in-flight bound (shown in the
    /// shard's status); answers how the worker ends if it is told to meanwhile.
    async fn drain_in_flight(
        &mut self,
        lost: &CancellationToken,
        handoff: &CancellationToken,
    ) -> Option<WorkerExit> {
        let w = self.worker;
        let limit = w.plan.in_flight;
        w.plan.metrics.contained(&w.plan.name, "in-flight-paused");
        tracing::warn!(
            subscription = %w.plan.name, shard = %w.ctx.shard_id,
            handler = short_version(&self.version), records = self.delayed.len(),
            "reading paused: the records waiting for retry-after reach the in-flight limit ({} records, {} bytes); reading resumes as they go out",
            limit.records, limit.bytes
        );
        w.status.update(|s| s.state = ShardState::PausedInFlight);
        while self.over_in_flight() {
            let due = self
                .next_due()
                .expect("over the limit means something waits");
            tokio::select! {
                biased;
                _ = lost.cancelled() => return Some(self.lease_lost()),
                _ = w.stop.cancelled() => return Some(self.finish().await),
                _ = handoff.cancelled() => return Some(self.finish().await),
                _ = tokio::time::sleep_until(due.into()) => self.flush_delayed().await,
            }
        }
        w.status.update(|s| s.state = ShardState::Reading);
        None
    }

    /// Waits after a failed read; answers whether to stop.
    async fn pause(w: &ShardWorker, lost: &CancellationToken, wait: Duration) -> bool {
        tokio::select! {
            _ = lost.cancelled() => true,
            _ = w.stop.cancelled() => true,
            _ = w.lease.handoff().cancelled() => true,
            _ = tokio::time::sleep(wait) => false,
        }
    }

    /// Writes the checkpoint if it moved, at most once per `checkpoint_every` unless `force`
    /// (release, SHARD_END, stop): a crash re-delivers at most that period's records.
    async fn write_checkpoint(&mut self, flush: Flush) -> Result<(), LeaseError> {
        let w = self.worker;
        if let Some(cp) = self.tracker.take_checkpoint() {
            self.pending = Some(cp);
        }
        if flush == Flush::Due && self.last_write.elapsed() < w.plan.checkpoint_every {
            return Ok(());
        }
        if let Some(cp) = self.pending.take() {
            w.lease.checkpoint(&cp).await?;
            w.metrics.checkpoint_written();
            self.last_write = Instant::now();
            tracing::debug!(subscription = %w.plan.name, shard = %w.ctx.shard_id, checkpoint = %cp, "checkpoint");
            w.status.update(|s| s.checkpoint = Some(cp.to_stored()));
        }
        Ok(())
    }

    /// A graceful stop: nothing is in flight between batches; write the final checkpoint.
    async fn finish(&mut self) -> WorkerExit {
        match self.write_checkpoint(Flush::Now).await {
            Ok(()) => WorkerExit::Stopped,
            Err(e) => self.lease_error(e),
        }
    }

    fn lease_lost(&self) -> WorkerExit {
        self.lease_error(LeaseError::Lost {
            key: crate::lease::LeaseKey::new(&self.worker.plan.stream, &self.worker.ctx.shard_id),
            owner: String::new(),
        })
    }

    fn lease_error(&self, e: LeaseError) -> WorkerExit {
        self.worker.lease_error(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_reads_back_off_doubling_up_to_a_cap() {
        let poll = Duration::from_millis(200);
        let waits: Vec<_> = (1..=8).map(|n| read_backoff(poll, n)).collect();
        assert_eq!(waits[0], poll);
        assert_eq!(waits[1], poll * 2);
        assert_eq!(waits[2], poll * 4);
        assert_eq!(waits[7], MAX_READ_BACKOFF);
        assert_eq!(read_backoff(Duration::ZERO, 1), Duration::from_millis(100));
        assert_eq!(read_backoff(poll, u32::MAX), MAX_READ_BACKOFF);
    }
}
