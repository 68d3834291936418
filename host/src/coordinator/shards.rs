//! What a coordinator knows about its shards: the leases it holds (each with its worker and
//! keep-alive task), the shards that ended, the ones it asked for or handed over, and when to
//! look again at a shard another instance holds.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::dispatch::WorkerExit;
use crate::lease::{KeepAlive, LeaseHandle};

/// How a shard came to its end, for its children's start position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// Read to SHARD_END (here or by another instance).
    Read,
    /// Closed and never opened by any reader (start_at = latest).
    Skipped,
}

/// A lease this instance holds.
pub(super) struct Held {
    pub lease: Arc<LeaseHandle>,
    /// Tells the shard's worker to stop at its next batch boundary.
    stop: CancellationToken,
    /// The worker is still running (a closed shard held by a record keeps its lease idle).
    reading: bool,
}

/// What happened to one of the coordinator's tasks.
pub(super) enum Event {
    /// A shard's worker ended.
    WorkerEnded(String, WorkerExit),
    /// A shard's worker panicked (the shard, if known).
    WorkerPanicked(Option<String>, JoinError),
    /// A lease's keep-alive ended.
    RenewalEnded(String, KeepAlive),
    /// A keep-alive task panicked.
    RenewalPanicked(JoinError),
}

/// The coordinator's state, one per subscription.
#[derive(Default)]
pub(super) struct Shards {
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
    /// The earliest time (ms since the epoch) a shard that could not be taken may be
    /// takeable: a foreign lease about to expire, a shard asked for.
    look_again_at: Option<u64>,
}

impl Shards {
    /// Leases held now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Whether this instance holds the shard's lease.
    pub fn holds(&self, shard: &str) -> bool {
        self.held.contains_key(shard)
    }

    /// Whether the shard is not to be taken now: held already, ended, or handed over lately.
    pub fn settled(&self, shard: &str) -> bool {
        self.holds(shard) || self.ended.contains_key(shard) || self.yielded.contains_key(shard)
    }

    /// How the shard ended, if it did as far as this instance knows.
    pub fn ended(&self, shard: &str) -> Option<Ended> {
        self.ended.get(shard).copied()
    }

    pub fn mark_ended(&mut self, shard: &str, how: Ended) {
        self.ended.insert(shard.to_owned(), how);
    }

    /// Whether this instance asked the shard's holder for it.
    pub fn asked_for(&self, shard: &str) -> bool {
        self.requested.contains_key(shard)
    }

    /// Shards asked for and not taken yet.
    pub fn asks(&self) -> usize {
        self.requested.len()
    }

    pub fn ask_for(&mut self, shard: &str) {
        self.requested.insert(shard.to_owned(), Instant::now());
    }

    /// Forgets requests and handovers older than `age`: by then the other side acted on
    /// them or never will.
    pub fn forget_older_than(&mut self, age: Duration) {
        self.requested.retain(|_, at| at.elapsed() < age);
        self.yielded.retain(|_, at| at.elapsed() < age);
    }

    /// Notes a time to look at the shards again (the earliest noted wins).
    pub fn look_again(&mut self, at_ms: u64) {
        self.look_again_at = Some(self.look_again_at.map_or(at_ms, |n| n.min(at_ms)));
    }

    /// The earliest time noted since the last call.
    pub fn take_look_again(&mut self) -> Option<u64> {
        self.look_again_at.take()
    }

    /// Runs a shard's worker and its lease's keep-alive, each inside a `shard` span.
    pub fn start(
        &mut self,
        shard: &str,
        lease: Arc<LeaseHandle>,
        stop: CancellationToken,
        worker: impl Future<Output = WorkerExit> + Send + 'static,
        renew_every: Duration,
    ) {
        let span = tracing::info_span!("shard", shard = %shard);
        let task = self.workers.spawn(worker.instrument(span.clone()));
        self.worker_shards.insert(task.id(), shard.to_owned());
        let (renewed, id) = (lease.clone(), shard.to_owned());
        self.renewals
            .spawn(async move { (id, renewed.keep_alive(renew_every).await) }.instrument(span));
        self.requested.remove(shard);
        let reading = true;
        self.held.insert(
            shard.to_owned(),
            Held {
                lease,
                stop,
                reading,
            },
        );
    }

    /// The next worker or keep-alive task to end; waits forever while none runs.
    pub async fn next_event(&mut self) -> Event {
        tokio::select! {
            biased;
            Some(done) = self.workers.join_next_with_id() => match done {
                Ok((id, exit)) => {
                    let shard = self.worker_shards.remove(&id).unwrap_or_default();
                    Event::WorkerEnded(shard, exit)
                }
                Err(e) => Event::WorkerPanicked(self.worker_shards.remove(&e.id()), e),
            },
            Some(done) = self.renewals.join_next() => match done {
                Ok((shard, end)) => Event::RenewalEnded(shard, end),
                Err(e) => Event::RenewalPanicked(e),
            },
            else => std::future::pending().await,
        }
    }

    /// The next worker to end once every worker is told to stop; `None` when none is left.
    pub async fn next_stopped(&mut self) -> Option<Event> {
        let done = self.workers.join_next_with_id().await?;
        Some(match done {
            Ok((id, exit)) => {
                let shard = self.worker_shards.remove(&id).unwrap_or_default();
                Event::WorkerEnded(shard, exit)
            }
            Err(e) => Event::WorkerPanicked(self.worker_shards.remove(&e.id()), e),
        })
    }

    /// Tells every worker to stop at its next batch boundary.
    pub fn stop_all(&self) {
        for h in self.held.values() {
            h.stop.cancel();
        }
    }

    /// Stops renewing: every keep-alive task ends.
    pub async fn stop_renewals(&mut self) {
        self.renewals.shutdown().await;
    }

    /// Lets go of a shard's lease here (the caller releases it in the store if it should).
    pub fn remove(&mut self, shard: &str) -> Option<Held> {
        self.held.remove(shard)
    }

    /// Every lease still held, let go of here.
    pub fn remove_all(&mut self) -> Vec<(String, Held)> {
        self.held.drain().collect()
    }

    /// A worker stopped at a closed shard that a held record keeps from ending: its lease stays
    /// (idle) unless it was lost meanwhile.
    pub fn worker_idle(&mut self, shard: &str) {
        match self.held.get_mut(shard) {
            Some(h) if h.lease.lost().is_cancelled() => {
                self.held.remove(shard);
            }
            Some(h) => h.reading = false,
            None => {}
        }
    }

    /// A worker stopped or failed: its lease is let go of here; when it was handed over on
    /// request, the shard is reserved for the instance that asked for a while. Answers the
    /// lease to release and whether it was handed over.
    pub fn worker_stopped(&mut self, shard: &str) -> Option<(Arc<LeaseHandle>, bool)> {
        let h = self.held.remove(shard)?;
        let handed_over = h.lease.handoff().is_cancelled();
        if handed_over {
            self.yielded.insert(shard.to_owned(), Instant::now());
        }
        Some((h.lease, handed_over))
    }

    /// A keep-alive failed: an idle lease (no worker on it) is dropped here; a reading one is
    /// fenced, and its worker stops at once and ends as `LeaseLost`.
    pub fn renewal_failed(&mut self, shard: &str) {
        if self.held.get(shard).is_some_and(|h| !h.reading) {
            self.held.remove(shard);
        }
    }
}
