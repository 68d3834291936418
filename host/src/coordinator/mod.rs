//! The lease coordinator of one subscription: lists the stream's shards, takes the lease of every
//! shard it may read, starts a [`ShardWorker`] and a keep-alive on each, and on stop lets every
//! worker finish its batch and write its checkpoint before it releases the leases.
//!
//! A shard split or merged from others starts only after all its parents reached SHARD_END.
//! Renewals run on a schedule of their own (one keep-alive task per lease), so nothing the
//! coordinator does — listing, balancing, a slow store — delays them, also during a stop.

mod balance;
mod take;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::dispatch::{SubscriptionPlan, WorkerExit};
use crate::lease::{KeepAlive, LeaseHandle, LeaseStore, now_ms};
use crate::source::StreamSource;
use crate::status::{Failure, StatusBoard};

/// How a shard came to its end, for its children's start position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Read to SHARD_END (here or by another instance).
    Read,
    /// Closed and never opened by any reader (start_at = latest).
    Skipped,
}

/// `[leases]` timings and balancing.
#[derive(Clone, Copy, Debug)]
pub struct LeaseSettings {
    pub ttl: Duration,
    pub renew_every: Duration,
    pub list_every: Duration,
    /// Ask instances holding more than their fair share to hand shards over.
    pub balance: bool,
}

/// A task of a subscription failed (a panic): the subscription stopped what it could and
/// released its leases; the host must stop and be restarted.
#[derive(Debug, thiserror::Error)]
#[error("subscription `{}`{}: {}", .0.subscription, .0.shard.as_ref().map(|s| format!(", shard `{s}`")).unwrap_or_default(), .0.reason)]
pub struct TaskFailed(pub Failure);

/// Runs one subscription's shards.
pub struct Coordinator {
    pub plan: Arc<SubscriptionPlan>,
    pub source: Arc<dyn StreamSource>,
    pub store: Arc<dyn LeaseStore>,
    pub owner: Arc<str>,
    pub timings: LeaseSettings,
    pub status: StatusBoard,
}

struct Held {
    lease: Arc<LeaseHandle>,
    /// Tells the shard's worker to stop at its next batch boundary.
    stop: CancellationToken,
    /// The worker is still running (a closed shard held by a record keeps its lease idle).
    reading: bool,
}

/// What the coordinator knows about its shards.
#[derive(Default)]
struct Shards {
    held: HashMap<String, Held>,
    /// Shards this instance asked their holders for (balancing), and when.
    requested: HashMap<String, Instant>,
    /// Shards this instance handed over on request, and when: not taken back for a while.
    yielded: HashMap<String, Instant>,
    ended: HashMap<String, Ended>,
    workers: JoinSet<WorkerExit>,
    /// The shard of each worker task.
    worker_shards: HashMap<tokio::task::Id, String>,
    renewals: JoinSet<(String, KeepAlive)>,
}

impl Coordinator {
    /// Runs until `stop` fires, then stops every worker gracefully and releases every lease.
    /// A failed worker stops the subscription the same way and answers why.
    pub async fn run(self, stop: CancellationToken) -> Result<(), TaskFailed> {
        let mut s = Shards::default();
        let mut list = tokio::time::interval(self.timings.list_every);
        let failure = loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break None,
                Some(done) = s.workers.join_next_with_id() => match done {
                    Ok((id, exit)) => {
                        let shard = s.worker_shards.remove(&id).unwrap_or_default();
                        if self.worker_ended(&shard, exit, &mut s).await {
                            // A shard ended: its children may start now, not at the next listing.
                            list.reset_immediately();
                        }
                    }
                    Err(e) => {
                        let shard = s.worker_shards.remove(&e.id());
                        break Some(self.worker_panicked(shard, e, &mut s).await);
                    }
                },
                Some(done) = s.renewals.join_next() => match done {
                    Ok((shard, end)) => self.renewal_ended(&shard, end, &mut s),
                    Err(e) => break Some(self.failed(None, "lease keep-alive", e)),
                },
                _ = list.tick() => {
                    let mut next_look = None;
                    let shards = self.take_shards(&mut s, &mut next_look).await;
                    if let Some(at) = next_look {
                        let wait = Duration::from_millis(at.saturating_sub(now_ms()));
                        if wait < self.timings.list_every {
                            list.reset_after(wait);
                        }
                    }
                    if self.timings.balance
                        && let Some(shards) = shards
                    {
                        self.balance(&shards, &mut s).await;
                    }
                }
            }
            self.plan
                .metrics
                .set_leases_held(&self.plan.name, s.held.len());
        };
        let failure = self.drain(&mut s).await.or(failure);
        self.plan.metrics.set_leases_held(&self.plan.name, 0);
        failure.map_or(Ok(()), Err)
    }

    /// Stops every worker at its next batch boundary, waits for them (their leases are renewed
    /// meanwhile), then releases every lease. Answers a worker that failed meanwhile.
    async fn drain(&self, s: &mut Shards) -> Option<TaskFailed> {
        for h in s.held.values() {
            h.stop.cancel();
        }
        let mut failure = None;
        while let Some(done) = s.workers.join_next_with_id().await {
            match done {
                Ok((id, exit)) => {
                    let shard = s.worker_shards.remove(&id).unwrap_or_default();
                    tracing::debug!(subscription = %self.plan.name, shard, ?exit, "worker stopped");
                }
                Err(e) => {
                    let shard = s.worker_shards.remove(&e.id());
                    failure = Some(self.worker_panicked(shard, e, s).await);
                }
            }
        }
        for (shard, h) in s.held.drain() {
            match h.lease.release().await {
                Ok(()) => tracing::info!(subscription = %self.plan.name, shard, "lease released"),
                Err(e) => {
                    tracing::warn!(subscription = %self.plan.name, shard, error = %e, "cannot release lease")
                }
            }
        }
        s.renewals.shutdown().await;
        failure
    }

    /// A worker task panicked: its batch is abandoned (its records are read again from the last
    /// checkpoint by whoever reads the shard next) and its lease released.
    async fn worker_panicked(
        &self,
        shard: Option<String>,
        e: JoinError,
        s: &mut Shards,
    ) -> TaskFailed {
        let held = shard.as_ref().and_then(|id| s.held.remove(id));
        let failed = self.failed(shard, "shard worker", e);
        if let Some(h) = held {
            let _ = h.lease.release().await;
        }
        failed
    }

    /// Logs a failed task, marks the host unhealthy and answers the failure.
    fn failed(&self, shard: Option<String>, what: &str, e: JoinError) -> TaskFailed {
        let reason = format!("{what} failed: {}", panic_message(e));
        tracing::error!(subscription = %self.plan.name, shard = shard.as_deref().unwrap_or("-"), "{reason}; the subscription stops and the host exits");
        let failure = Failure {
            subscription: self.plan.name.to_string(),
            shard,
            reason,
        };
        self.status.fail(failure.clone());
        TaskFailed(failure)
    }

    /// A lease's keep-alive ended. When it failed, the lease is fenced (its worker stops at
    /// once); an idle lease (a closed shard held by a record) is dropped here.
    fn renewal_ended(&self, shard: &str, end: KeepAlive, s: &mut Shards) {
        let why = match end {
            KeepAlive::Ended => return,
            KeepAlive::Failed(e) => e.to_string(),
            KeepAlive::TimedOut => "no renewal answered before the lease could expire".to_owned(),
        };
        tracing::warn!(subscription = %self.plan.name, shard, error = %why, "lease renewal failed; the shard stops at once");
        self.plan.metrics.renewal_failed(&self.plan.name);
        if s.held.get(shard).is_some_and(|h| !h.reading) {
            s.held.remove(shard);
        }
    }

    /// Answers whether the shard reached SHARD_END.
    async fn worker_ended(&self, shard: &str, exit: WorkerExit, s: &mut Shards) -> bool {
        match exit {
            WorkerExit::HeldAtEnd => {
                match s.held.get_mut(shard) {
                    Some(h) if h.lease.lost().is_cancelled() => {
                        s.held.remove(shard);
                    }
                    Some(h) => h.reading = false,
                    None => {}
                }
                false
            }
            WorkerExit::ShardEnded => {
                s.ended.insert(shard.to_owned(), Ended::Read);
                if let Some(h) = s.held.remove(shard) {
                    let _ = h.lease.release().await;
                }
                true
            }
            WorkerExit::LeaseLost => {
                s.held.remove(shard);
                false
            }
            WorkerExit::Stopped | WorkerExit::Failed(_) => {
                // Let the shard go; the next listing may take it again (unless it was handed
                // over on request: then it is reserved for the instance that asked).
                if let Some(h) = s.held.remove(shard) {
                    let handed_over = h.lease.handoff().is_cancelled();
                    if handed_over {
                        s.yielded.insert(shard.to_owned(), Instant::now());
                    }
                    match h.lease.release().await {
                        Ok(()) if handed_over => {
                            tracing::info!(subscription = %self.plan.name, shard, "shard handed over: final checkpoint written, lease released to the instance that asked");
                        }
                        Ok(()) => {}
                        Err(e) => {
                            tracing::warn!(subscription = %self.plan.name, shard, error = %e, "cannot release lease")
                        }
                    }
                }
                false
            }
        }
    }
}

/// What a panicked task said, or why it was cancelled.
pub fn panic_message(e: JoinError) -> String {
    if !e.is_panic() {
        return e.to_string();
    }
    let payload = e.into_panic();
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_owned()
    }
}
