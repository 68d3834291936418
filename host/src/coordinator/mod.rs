//! The lease coordinator of one subscription: lists the stream's shards, takes the lease of every
//! shard it may read, starts a [`ShardWorker`] and a keep-alive on each, and on stop lets every
//! worker finish its batch and write its checkpoint before it releases the leases.
//!
//! A shard split or merged from others starts only after all its parents reached SHARD_END.
//! Renewals run on a schedule of their own (one keep-alive task per lease), so nothing the
//! coordinator does — listing, balancing, a slow store — delays them, also during a stop.

mod balance;
mod shards;
mod take;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;

use crate::dispatch::{SubscriptionPlan, WorkerExit};
use crate::handler::CallError;
use crate::lease::{KeepAlive, LeaseStore, now_ms};
use crate::source::StreamSource;
use crate::status::{Failure, StatusBoard};
use crate::task::panic_message;
use shards::{Ended, Event, Shards};

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

impl Coordinator {
    /// Runs until `stop` fires, then stops every worker gracefully and releases every lease.
    /// A failed worker stops the subscription the same way and answers why.
    pub async fn run(self, stop: CancellationToken) -> Result<(), TaskFailed> {
        let mut s = Shards::default();
        self.plan
            .metrics
            .subscription_started(&self.plan.name, &CallError::KINDS);
        let mut list = tokio::time::interval(self.timings.list_every);
        // What this coordinator added to the subscription's leases-held gauge (a subscription
        // with a retry stream of its own has two coordinators adding to it).
        let mut counted = 0;
        let failure = loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break None,
                event = s.next_event() => match event {
                    Event::WorkerEnded(shard, exit) => {
                        if self.worker_ended(&shard, exit, &mut s).await {
                            // A shard ended: its children may start now, not at the next listing.
                            list.reset_immediately();
                        }
                    }
                    Event::WorkerPanicked(shard, e) => {
                        break Some(self.worker_panicked(shard, e, &mut s).await);
                    }
                    Event::RenewalEnded(shard, end) => self.renewal_ended(&shard, end, &mut s),
                    Event::RenewalPanicked(e) => break Some(self.failed(None, "lease keep-alive", e)),
                },
                _ = list.tick() => self.look(&mut s, &mut list).await,
            }
            counted = self.count_leases_held(counted, s.held());
        };
        let failure = self.drain(&mut s).await.or(failure);
        self.count_leases_held(counted, 0);
        failure.map_or(Ok(()), Err)
    }

    /// Moves the subscription's leases-held gauge from this coordinator's `counted` leases to
    /// `held`; answers `held`.
    fn count_leases_held(&self, counted: usize, held: usize) -> usize {
        let delta = held as i64 - counted as i64;
        if delta != 0 {
            self.plan.metrics.add_leases_held(&self.plan.name, delta);
        }
        held
    }

    /// Lists the shards, takes what this instance may, balances; looks again sooner than the
    /// listing period when a shard may be takeable sooner.
    async fn look(&self, s: &mut Shards, list: &mut tokio::time::Interval) {
        let shards = self.take_shards(s).await;
        if let Some(at) = s.take_look_again() {
            let wait = Duration::from_millis(at.saturating_sub(now_ms()));
            if wait < self.timings.list_every {
                list.reset_after(wait);
            }
        }
        if self.timings.balance
            && let Some(shards) = shards
        {
            self.balance(&shards, s).await;
        }
    }

    /// Stops every worker at its next batch boundary, waits for them (their leases are renewed
    /// meanwhile), then releases every lease. Answers a worker that failed meanwhile.
    async fn drain(&self, s: &mut Shards) -> Option<TaskFailed> {
        s.stop_all();
        let mut failure = None;
        while let Some(event) = s.next_stopped().await {
            match event {
                Event::WorkerPanicked(shard, e) => {
                    failure = Some(self.worker_panicked(shard, e, s).await);
                }
                Event::WorkerEnded(shard, exit) => {
                    tracing::debug!(shard, ?exit, "worker stopped");
                }
                Event::RenewalEnded(..) | Event::RenewalPanicked(_) => {}
            }
        }
        for (shard, h) in s.remove_all() {
            match h.lease.release().await {
                Ok(()) => tracing::info!(shard, "lease released"),
                Err(e) => tracing::warn!(shard, error = %e, "cannot release lease"),
            }
        }
        s.stop_renewals().await;
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
        let held = shard.as_ref().and_then(|id| s.remove(id));
        let failed = self.failed(shard, "shard worker", e);
        if let Some(h) = held {
            let _ = h.lease.release().await;
        }
        failed
    }

    /// Logs a failed task, marks the host unhealthy and answers the failure.
    fn failed(&self, shard: Option<String>, what: &str, e: JoinError) -> TaskFailed {
        let reason = format!("{what} failed: {}", panic_message(e));
        tracing::error!(
            shard = shard.as_deref().unwrap_or("-"),
            "{reason}; the subscription stops and the host exits"
        );
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
        tracing::warn!(shard, error = %why, "lease renewal failed; the shard stops at once");
        self.plan.metrics.renewal_failed(&self.plan.name);
        s.renewal_failed(shard);
    }

    /// Answers whether the shard reached SHARD_END.
    async fn worker_ended(&self, shard: &str, exit: WorkerExit, s: &mut Shards) -> bool {
        match exit {
            WorkerExit::HeldAtEnd => {
                s.worker_idle(shard);
                false
            }
            WorkerExit::ShardEnded => {
                s.mark_ended(shard, Ended::Read);
                if let Some(h) = s.remove(shard) {
                    let _ = h.lease.release().await;
                }
                true
            }
            WorkerExit::LeaseLost => {
                s.remove(shard);
                false
            }
            WorkerExit::Stopped | WorkerExit::Failed(_) => {
                // Let the shard go; the next listing may take it again (unless it was handed
                // over on request: then it is reserved for the instance that asked).
                if let Some((lease, handed_over)) = s.worker_stopped(shard) {
                    match lease.release().await {
                        Ok(()) if handed_over => {
                            tracing::info!(
                                shard,
                                "shard handed over: final checkpoint written, lease released to the instance that asked"
                            );
                        }
                        Ok(()) => {}
                        Err(e) => tracing::warn!(shard, error = %e, "cannot release lease"),
                    }
                }
                false
            }
        }
    }
}
