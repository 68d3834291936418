//! The lease coordinator of one subscription: lists the stream's shards, takes the lease of every
//! shard it may read, starts a [`ShardWorker`] on each, renews what it holds, and on stop lets
//! every worker finish its batch and write its checkpoint before it releases the leases.
//!
//! A shard split or merged from others starts only after all its parents reached SHARD_END.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::StartAt;
use crate::dispatch::{ShardWorker, SubscriptionPlan, WorkerExit};
use crate::lease::{
    Checkpoint, HANDOFF_REQUESTED, Lease, LeaseError, LeaseHandle, LeaseKey, LeaseStore, now_ms,
};
use crate::source::{ShardInfo, StreamSource};
use crate::status::StatusBoard;

/// How a shard came to its end, for its children's start position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Read to SHARD_END (here or by another instance).
    Read,
    /// Closed and never read (start_at = latest).
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

impl Coordinator {
    /// Runs until `stop` fires, then stops every worker gracefully and releases every lease.
    pub async fn run(self, stop: CancellationToken) {
        let mut held: HashMap<String, Held> = HashMap::new();
        // Shards this instance asked their holders for (balancing), and when.
        let mut requested: HashMap<String, Instant> = HashMap::new();
        // Shards this instance handed over on request, and when: not taken back for a while.
        let mut yielded: HashMap<String, Instant> = HashMap::new();
        let mut ended: HashMap<String, Ended> = HashMap::new();
        let mut workers: JoinSet<(String, WorkerExit)> = JoinSet::new();
        let mut list = tokio::time::interval(self.timings.list_every);
        let mut renew = tokio::time::interval(self.timings.renew_every);
        renew.tick().await;
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                Some(done) = workers.join_next() => {
                    let (shard, exit) = done.expect("shard workers do not panic");
                    if self.worker_ended(&shard, exit, &mut held, &mut ended, &mut yielded).await {
                        // A shard ended: its children may start now, not at the next listing.
                        list.reset_immediately();
                    }
                }
                _ = list.tick() => {
                    let mut next_look = None;
                    let shards = self
                        .take_shards(&mut held, &mut ended, &mut workers, &mut requested, &mut yielded, &mut next_look)
                        .await;
                    if let Some(at) = next_look {
                        let wait = Duration::from_millis(at.saturating_sub(now_ms()));
                        if wait < self.timings.list_every {
                            list.reset_after(wait);
                        }
                    }
                    if self.timings.balance
                        && let Some(shards) = shards
                    {
                        self.balance(&shards, &held, &ended, &mut requested).await;
                    }
                }
                _ = renew.tick() => self.renew(&mut held).await,
            }
            self.plan
                .metrics
                .set_leases_held(&self.plan.name, held.len());
        }
        for h in held.values() {
            h.stop.cancel();
        }
        while let Some(done) = workers.join_next().await {
            let (shard, exit) = done.expect("shard workers do not panic");
            tracing::debug!(subscription = %self.plan.name, shard, ?exit, "worker stopped");
        }
        for (shard, h) in held.drain() {
            match h.lease.release().await {
                Ok(()) => tracing::info!(subscription = %self.plan.name, shard, "lease released"),
                Err(e) => {
                    tracing::warn!(subscription = %self.plan.name, shard, error = %e, "cannot release lease")
                }
            }
        }
        self.plan.metrics.set_leases_held(&self.plan.name, 0);
    }

    /// Answers whether the shard reached SHARD_END.
    async fn worker_ended(
        &self,
        shard: &str,
        exit: WorkerExit,
        held: &mut HashMap<String, Held>,
        ended: &mut HashMap<String, Ended>,
        yielded: &mut HashMap<String, Instant>,
    ) -> bool {
        match exit {
            WorkerExit::HeldAtEnd => {
                if let Some(h) = held.get_mut(shard) {
                    h.reading = false;
                }
                false
            }
            WorkerExit::ShardEnded => {
                ended.insert(shard.to_owned(), Ended::Read);
                if let Some(h) = held.remove(shard) {
                    let _ = h.lease.release().await;
                }
                true
            }
            WorkerExit::LeaseLost => {
                held.remove(shard);
                false
            }
            WorkerExit::Stopped | WorkerExit::Failed(_) => {
                // Let the shard go; the next listing may take it again (unless it was handed
                // over on request: then leave it to the instance that asked).
                if let Some(h) = held.remove(shard) {
                    if h.lease.handoff().is_cancelled() {
                        yielded.insert(shard.to_owned(), Instant::now());
                    }
                    match h.lease.release().await {
                        Ok(()) if h.lease.handoff().is_cancelled() => {
                            tracing::info!(subscription = %self.plan.name, shard, "shard handed over: final checkpoint written, lease released");
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

    async fn take_shards(
        &self,
        held: &mut HashMap<String, Held>,
        ended: &mut HashMap<String, Ended>,
        workers: &mut JoinSet<(String, WorkerExit)>,
        requested: &mut HashMap<String, Instant>,
        yielded: &mut HashMap<String, Instant>,
        next_look: &mut Option<u64>,
    ) -> Option<Vec<ShardInfo>> {
        yielded.retain(|_, at| at.elapsed() < self.timings.ttl * 2);
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
            if held.contains_key(id) || ended.contains_key(id) || yielded.contains_key(id) {
                continue;
            }
            let Some(after_parents) = self.parents_ended(shard, &listed, ended).await else {
                continue;
            };
            let key = LeaseKey::new(&self.plan.stream, id);
            // A row this instance asked for (lease_expiry = HANDOFF_REQUESTED) looks expired,
            // but its holder may still be reading up to its next batch boundary: wait for it to
            // release the row (for at most a ttl, in case it died meanwhile). Taking it now
            // would read records the holder is handling.
            if let Some(at) = requested.get(id)
                && at.elapsed() < self.timings.ttl
                && let Ok(Some(row)) = self.store.read(&key).await
                && row.expiry_ms == HANDOFF_REQUESTED
                && row.owner.as_deref().is_some_and(|o| o != &*self.owner)
            {
                // The holder notices at its next write (a renewal at the latest): look again then.
                let at = now_ms() + self.timings.renew_every.as_millis() as u64;
                *next_look = Some(next_look.map_or(at, |n: u64| n.min(at)));
                continue;
            }
            let lease = match self
                .store
                .acquire(&key, &self.owner, self.timings.ttl)
                .await
            {
                Ok(Some(lease)) => lease,
                Ok(None) => {
                    // Held elsewhere: look again just after it would expire, not a whole
                    // listing period later, so a dead holder's shards move quickly.
                    if let Ok(Some(row)) = self.store.read(&key).await
                        && row.expiry_ms > HANDOFF_REQUESTED
                    {
                        let at = row.expiry_ms + 50;
                        *next_look = Some(next_look.map_or(at, |n: u64| n.min(at)));
                    }
                    continue;
                }
                Err(LeaseError::Refused(why)) => {
                    // Said once per shard: it stays refused until the table is fixed.
                    let cell = self.status.shard(&self.plan.name, id);
                    if cell.get().last_error.as_deref() != Some(why.as_str()) {
                        tracing::error!(subscription = %self.plan.name, shard = %id, "shard not started: {why}");
                        cell.update(|s| {
                            s.state = "refused".into();
                            s.last_error = Some(why);
                        });
                    }
                    continue;
                }
                Err(e) => {
                    tracing::warn!(subscription = %self.plan.name, shard = %id, error = %e, "cannot take lease");
                    continue;
                }
            };
            let handle = Arc::new(LeaseHandle::new(self.store.clone(), lease.clone()));
            // A closed shard nobody read, under start_at = latest, holds nothing new: its
            // children start at the tip as well.
            let skip = lease.checkpoint.is_none()
                && shard.closed
                && !after_parents
                && self.plan.start_at == StartAt::Latest;
            if lease.checkpoint == Some(Checkpoint::ShardEnd) || skip {
                ended.insert(id.clone(), if skip { Ended::Skipped } else { Ended::Read });
                let _ = handle.release().await;
                continue;
            }
            requested.remove(id);
            tracing::info!(subscription = %self.plan.name, shard = %id, owner = %self.owner, "lease taken");
            let stop = CancellationToken::new();
            let worker = ShardWorker::new(
                self.plan.clone(),
                id,
                handle.clone(),
                self.status.clone(),
                stop.clone(),
            )
            .from_trim_horizon(after_parents);
            let source = self.source.clone();
            let shard_id = id.clone();
            workers.spawn(async move { (shard_id, worker.run(source).await) });
            held.insert(
                id.clone(),
                Held {
                    lease: handle,
                    stop,
                    reading: true,
                },
            );
        }
        Some(shards)
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
    /// release), and takes them once released. Only the instance short of shards asks, so
    /// instances converge without flapping.
    async fn balance(
        &self,
        shards: &[ShardInfo],
        held: &HashMap<String, Held>,
        ended: &HashMap<String, Ended>,
        requested: &mut HashMap<String, Instant>,
    ) {
        requested.retain(|_, at| at.elapsed() < self.timings.ttl * 2);
        let now = now_ms();
        let mut others: HashMap<String, Vec<Lease>> = HashMap::new();
        let mut open = 0;
        for shard in shards {
            if ended.contains_key(&shard.shard_id) {
                continue;
            }
            open += 1;
            if held.contains_key(&shard.shard_id) {
                continue;
            }
            let key = LeaseKey::new(&self.plan.stream, &shard.shard_id);
            if let Ok(Some(row)) = self.store.read(&key).await
                && let Some(owner) = row.owner.clone()
                && owner != *self.owner
                && (row.expiry_ms > now || row.expiry_ms == HANDOFF_REQUESTED)
            {
                others.entry(owner).or_default().push(row);
            }
        }
        if others.is_empty() {
            return;
        }
        let owners = others.len() + 1;
        let (floor, ceil) = (open / owners, open.div_ceil(owners));
        let mut want = floor.saturating_sub(held.len() + requested.len());
        while want > 0 {
            let Some((victim, rows)) = others.iter_mut().max_by_key(|(_, rows)| rows.len()) else {
                break;
            };
            if rows.len() <= ceil {
                break;
            }
            let Some(row) = rows.pop() else { break };
            if requested.contains_key(&row.key.shard_id) || row.expiry_ms == HANDOFF_REQUESTED {
                continue;
            }
            match self.store.request_handoff(&row).await {
                Ok(true) => {
                    tracing::info!(subscription = %self.plan.name, shard = %row.key.shard_id, holder = %victim, "asked for the shard (balancing)");
                    requested.insert(row.key.shard_id.clone(), Instant::now());
                    want -= 1;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(subscription = %self.plan.name, shard = %row.key.shard_id, error = %e, "cannot ask for the shard");
                }
            }
        }
    }

    /// Renews every held lease. Any failed renewal fences the shard at once: its worker stops
    /// without writing another checkpoint.
    async fn renew(&self, held: &mut HashMap<String, Held>) {
        let mut dropped = Vec::new();
        for (shard, h) in held.iter() {
            if let Err(e) = h.lease.renew(self.timings.ttl).await {
                tracing::warn!(subscription = %self.plan.name, shard, error = %e, "lease renewal failed; the shard stops at once");
                self.plan.metrics.renewal_failed(&self.plan.name);
                h.lease.fence();
                if !h.reading {
                    dropped.push(shard.clone());
                }
            }
        }
        for shard in dropped {
            held.remove(&shard);
        }
    }
}
