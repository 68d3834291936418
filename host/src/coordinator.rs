//! The lease coordinator of one subscription: lists the stream's shards, takes the lease of every
//! shard it may read, starts a [`ShardWorker`] and a keep-alive on each, and on stop lets every
//! worker finish its batch and write its checkpoint before it releases the leases.
//!
//! A shard split or merged from others starts only after all its parents reached SHARD_END.
//! Renewals run on a schedule of their own (one keep-alive task per lease), so nothing the
//! coordinator does — listing, balancing, a slow store — delays them, also during a stop.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::config::StartAt;
use crate::dispatch::{ShardWorker, SubscriptionPlan, WorkerExit};
use crate::lease::{
    Checkpoint, KeepAlive, Lease, LeaseError, LeaseHandle, LeaseKey, LeaseState, LeaseStore, now_ms,
};
use crate::source::{ShardInfo, StreamSource};
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

    /// Lists the shards and takes every lease this instance may; answers the listing.
    async fn take_shards(
        &self,
        s: &mut Shards,
        next_look: &mut Option<u64>,
    ) -> Option<Vec<ShardInfo>> {
        s.yielded
            .retain(|_, at| at.elapsed() < self.timings.ttl * 2);
        let shards = match self.source.list_shards(&self.plan.stream).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(subscription = %self.plan.name, stream = %self.plan.stream, error = %e, "cannot list shards");
                return None;
            }
        };
        let listed: HashSet<&str> = shards.iter().map(|s| s.shard_id.as_str()).collect();
        for shard in &shards {
            let id = &shard.shard_id;
            if s.held.contains_key(id) || s.ended.contains_key(id) || s.yielded.contains_key(id) {
                continue;
            }
            let Some(after_parents) = self.parents_ended(shard, &listed, &mut s.ended).await else {
                continue;
            };
            let sent = Instant::now();
            let Some(lease) = self.try_take(id, s, next_look).await else {
                continue;
            };
            let handle = Arc::new(LeaseHandle::new(
                self.store.clone(),
                lease.clone(),
                self.timings.ttl,
                sent,
            ));
            if lease.checkpoint == Some(Checkpoint::ShardEnd) {
                s.ended.insert(id.clone(), Ended::Read);
                let _ = handle.release().await;
                continue;
            }
            if self.skips(shard, &lease, after_parents) {
                tracing::info!(
                    subscription = %self.plan.name, shard = %id,
                    "shard skipped: it is closed and no reader ever opened it, and start_at = latest; its children start at the tip"
                );
                s.ended.insert(id.clone(), Ended::Skipped);
                let _ = handle.release().await;
                continue;
            }
            s.requested.remove(id);
            tracing::info!(subscription = %self.plan.name, shard = %id, owner = %self.owner, "lease taken");
            self.start(id, handle, after_parents, s);
        }
        Some(shards)
    }

    /// A closed shard with no checkpoint that no reader ever opened, under start_at = latest,
    /// holds nothing to read: skip it. One that was opened is read from where it was opened.
    fn skips(&self, shard: &ShardInfo, lease: &Lease, after_parents: bool) -> bool {
        lease.checkpoint.is_none()
            && lease.opened_ms.is_none()
            && shard.closed
            && !after_parents
            && self.plan.start_at == StartAt::Latest
    }

    /// Tries to take one shard's lease; `None` when it is not takeable now (held elsewhere,
    /// refused, or the store failed), noting when to look again.
    async fn try_take(&self, id: &str, s: &Shards, next_look: &mut Option<u64>) -> Option<Lease> {
        let key = LeaseKey::new(&self.plan.stream, id);
        let mut look_at = |at: u64| *next_look = Some(next_look.map_or(at, |n: u64| n.min(at)));
        match self
            .store
            .acquire(&key, &self.owner, self.timings.ttl)
            .await
        {
            Ok(Some(lease)) => {
                self.clear_refusal(id);
                Some(lease)
            }
            Ok(None) if s.requested.contains_key(id) => {
                // Asked for: its holder notices at its next write (a renewal at the latest),
                // then releases it to this instance at a batch boundary.
                look_at(now_ms().saturating_add(self.renew_ms()));
                None
            }
            Ok(None) => {
                // Held elsewhere: look again just after it would expire, not a whole listing
                // period later, so a dead holder's shards move quickly.
                match self.store.read(&key).await {
                    Ok(Some(row)) if row.state(now_ms()) != LeaseState::Free => {
                        look_at(row.expiry_ms.saturating_add(50));
                    }
                    Err(LeaseError::Malformed(why)) => self.refuse(id, why),
                    _ => {}
                }
                None
            }
            Err(LeaseError::Refused(why) | LeaseError::Malformed(why)) => {
                self.refuse(id, why);
                None
            }
            Err(e) => {
                tracing::warn!(subscription = %self.plan.name, shard = %id, error = %e, "cannot take lease");
                None
            }
        }
    }

    fn renew_ms(&self) -> u64 {
        u64::try_from(self.timings.renew_every.as_millis()).unwrap_or(u64::MAX)
    }

    /// A shard that cannot be taken until its row is fixed: said once, shown in status.
    fn refuse(&self, id: &str, why: String) {
        let cell = self.status.shard(&self.plan.name, id);
        if cell.get().last_error.as_deref() != Some(why.as_str()) {
            tracing::error!(subscription = %self.plan.name, shard = %id, "shard not started: {why}");
            cell.update(|s| {
                s.state = "refused".into();
                s.last_error = Some(why);
            });
        }
    }

    fn clear_refusal(&self, id: &str) {
        let cell = self.status.shard(&self.plan.name, id);
        if cell.get().state == "refused" {
            cell.update(|s| {
                s.state = String::new();
                s.last_error = None;
            });
        }
    }

    /// Starts a shard's worker and its lease's keep-alive.
    fn start(&self, id: &str, handle: Arc<LeaseHandle>, after_parents: bool, s: &mut Shards) {
        let stop = CancellationToken::new();
        let worker = ShardWorker::new(
            self.plan.clone(),
            id,
            handle.clone(),
            self.status.clone(),
            stop.clone(),
        )
        .from_trim_horizon(after_parents);
        let task = s.workers.spawn(worker.run(self.source.clone()));
        s.worker_shards.insert(task.id(), id.to_owned());
        let (lease, every, shard) = (handle.clone(), self.timings.renew_every, id.to_owned());
        s.renewals
            .spawn(async move { (shard, lease.keep_alive(every).await) });
        s.held.insert(
            id.to_owned(),
            Held {
                lease: handle,
                stop,
                reading: true,
            },
        );
    }

    /// Whether a shard may start: `None` while a parent is still to be read; otherwise whether
    /// any parent was read to its end (then the shard, a continuation of its parents, opens at
    /// its beginning when it has no checkpoint of its own).
    async fn parents_ended(
        &self,
        shard: &ShardInfo,
        listed: &HashSet<&str>,
        ended: &mut HashMap<String, Ended>,
    ) -> Option<bool> {
        let mut any_read = false;
        for parent in &shard.parents {
            if let Some(how) = ended.get(parent) {
                any_read |= *how == Ended::Read;
                continue;
            }
            let key = LeaseKey::new(&self.plan.stream, parent);
            match self.store.read(&key).await {
                Ok(Some(row)) if row.checkpoint == Some(Checkpoint::ShardEnd) => {
                    ended.insert(parent.clone(), Ended::Read);
                    any_read = true;
                }
                // Aged out of the stream and never read here.
                Ok(_) if !listed.contains(parent.as_str()) => {}
                _ => return None,
            }
        }
        Some(any_read)
    }

    /// Balancing: live instances are the unexpired owners in the table plus this one. When this
    /// instance holds fewer than its fair share and another holds more than its share, it asks
    /// that one to hand shards over (gracefully: a batch boundary, a final checkpoint, a
    /// release reserving the row for this instance), and takes them once released. Only the
    /// instance short of shards asks, so instances converge without flapping.
    async fn balance(&self, shards: &[ShardInfo], s: &mut Shards) {
        s.requested
            .retain(|_, at| at.elapsed() < self.timings.ttl * 2);
        let now = now_ms();
        let mut others: HashMap<String, Vec<Lease>> = HashMap::new();
        let mut open = 0;
        for shard in shards {
            if s.ended.contains_key(&shard.shard_id) {
                continue;
            }
            open += 1;
            if s.held.contains_key(&shard.shard_id) {
                continue;
            }
            let key = LeaseKey::new(&self.plan.stream, &shard.shard_id);
            let Ok(Some(row)) = self.store.read(&key).await else {
                continue;
            };
            let holder = match row.state(now) {
                LeaseState::Held { owner } | LeaseState::HandoffRequested { owner, .. } => owner,
                LeaseState::Free | LeaseState::Reserved { .. } => continue,
            };
            if holder != &*self.owner {
                others.entry(holder.to_owned()).or_default().push(row);
            }
        }
        if others.is_empty() {
            return;
        }
        let owners = others.len() + 1;
        let (floor, ceil) = (open / owners, open.div_ceil(owners));
        let mut want = floor.saturating_sub(s.held.len() + s.requested.len());
        while want > 0 {
            let Some((victim, rows)) = others.iter_mut().max_by_key(|(_, rows)| rows.len()) else {
                break;
            };
            if rows.len() <= ceil {
                break;
            }
            let Some(row) = rows.pop() else { break };
            if s.requested.contains_key(&row.key.shard_id) || row.handoff_to.is_some() {
                continue;
            }
            match self.store.request_handoff(&row, &self.owner).await {
                Ok(true) => {
                    tracing::info!(subscription = %self.plan.name, shard = %row.key.shard_id, holder = %victim, "asked for the shard (balancing)");
                    s.requested.insert(row.key.shard_id.clone(), Instant::now());
                    want -= 1;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(subscription = %self.plan.name, shard = %row.key.shard_id, error = %e, "cannot ask for the shard");
                }
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
