//! Writing a shard's checkpoint: when it moved, at most once per `checkpoint_every` (at once on
//! a stop, a handoff and SHARD_END). A write the lease store fails (it throttles, it cannot be
//! reached) is tried again while the lease is valid, as a renewal is: the worker reads on
//! meanwhile, and the latest checkpoint is written once the store answers. Only a lost lease (or
//! one past its fence: then renewals failed too) ends the worker; reading on costs nothing that
//! a lost lease would not cost anyway, since the lease is fenced within the `ttl` when the
//! store stays down.

use std::time::Duration;
use tokio::time::Instant;

use super::interrupt::Interrupt;
use super::{Run, WorkerExit};
use crate::lease::LeaseError;

/// When a moved checkpoint is written to the lease store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flush {
    /// Once `checkpoint_every` has passed since the last write.
    Due,
    /// Now, whatever `checkpoint_every` says, but otherwise as `Due` (committed state that
    /// fills half a commit, or commits after every batch after a conflict).
    Soon,
    /// Now (a stop, a handoff, the end of a shard).
    Now,
}

/// The wait after the `failures`th checkpoint write in a row that the store failed: 250 ms,
/// doubling, at most 2 s.
fn retry_wait(failures: u32) -> Duration {
    Duration::from_millis(250)
        .saturating_mul(1 << failures.saturating_sub(1).min(3))
        .min(Duration::from_secs(2))
}

impl Run<'_> {
    /// Writes the checkpoint if it moved, at most once per `checkpoint_every` unless
    /// [`Flush::Now`] (release, SHARD_END, stop): a crash re-delivers at most that period's
    /// records. A store error is tried again later ([`Flush::Due`]: at a later turn; `Now`: here,
    /// while the lease is valid as it stands at the first failure); only then is it answered.
    pub async fn write_checkpoint(&mut self, flush: Flush) -> Result<(), LeaseError> {
        let w = self.worker;
        if let Some(cp) = self.tracker.take_checkpoint() {
            self.pending = Some(cp);
        }
        if self.pending.is_none() {
            return Ok(());
        }
        let not_yet = self.last_write.elapsed() < w.plan.checkpoint_every
            || self.retry_write_at.is_some_and(|at| Instant::now() < at);
        if flush == Flush::Due && not_yet {
            return Ok(());
        }
        let mut valid_until = None;
        loop {
            let Err(e) = self.write_pending().await else {
                return Ok(());
            };
            // Committed state that conflicted: read again from its first uncommitted record,
            // unless the worker is ending (then the next reader does).
            if let Some(from) = self.state_conflict.take()
                && flush != Flush::Now
            {
                let committed = w.lease.current().await.checkpoint;
                self.read_state_again(committed, from);
                return Ok(());
            }
            let LeaseError::Store(why) = &e else {
                return Err(e);
            };
            self.write_failed(why);
            if flush != Flush::Now {
                return Ok(());
            }
            let until = *valid_until.get_or_insert_with(|| w.lease.valid_until());
            let at = self.retry_write_at.unwrap_or_else(Instant::now);
            if at >= until {
                return Err(e);
            }
            // A lost lease ends the wait: the next write answers it.
            let lost = w.lease.lost().clone();
            tokio::select! {
                _ = lost.cancelled() => {}
                _ = tokio::time::sleep_until(at) => {}
            }
        }
    }

    /// Writes the pending checkpoint; after a failure it stays pending (a newer one replaces
    /// it when the tracker moves on).
    async fn write_pending(&mut self) -> Result<(), LeaseError> {
        let w = self.worker;
        let Some(cp) = self.pending.take() else {
            return Ok(());
        };
        let written = match w.ctx.pending.clone() {
            Some(state) => self.checkpoint_with_state(&cp, &state).await,
            None => w.lease.checkpoint(&cp).await,
        };
        if let Err(e) = written {
            self.pending = Some(cp);
            return Err(e);
        }
        w.metrics.checkpoint_written();
        self.last_write = Instant::now();
        if self.failed_writes > 0 {
            tracing::info!(
                checkpoint = %cp, failures = self.failed_writes,
                "checkpoint written: the lease store answers again"
            );
            self.failed_writes = 0;
            self.retry_write_at = None;
        }
        tracing::debug!(checkpoint = %cp, "checkpoint");
        w.status.update(|s| s.checkpoint = Some(cp.to_stored()));
        Ok(())
    }

    /// A checkpoint write the store failed: counted, shown in status, logged the first time and
    /// every tenth, and tried again after a pause.
    fn write_failed(&mut self, why: &str) {
        let w = self.worker;
        self.failed_writes += 1;
        let failures = self.failed_writes;
        let wait = retry_wait(failures);
        self.retry_write_at = Some(Instant::now() + wait);
        w.plan.metrics.checkpoint_failed(&w.plan.name);
        if failures % 10 == 1 {
            tracing::warn!(
                failures,
                "checkpoint write failed (lease store: {why}); the shard keeps its lease and \
                 reads on, and the checkpoint is written once the store answers (next try in \
                 {wait:?}, while the lease is valid)"
            );
        }
        w.status.update(|s| {
            s.last_error = Some(format!("checkpoint not written yet: lease store: {why}"));
        });
    }

    /// How an interrupted worker ends: a lost lease at once, writing nothing; a stop or a
    /// handoff with its final checkpoint (nothing is in flight between batches).
    pub(super) async fn exit(&mut self, interrupt: Interrupt) -> WorkerExit {
        match interrupt {
            Interrupt::LeaseLost => self.lease_error(LeaseError::Lost {
                key: self.worker.plan.lease_key(&self.worker.ctx.shard_id),
                owner: String::new(),
            }),
            Interrupt::Stop => match self.write_checkpoint(Flush::Now).await {
                Ok(()) => WorkerExit::Stopped,
                Err(e) => self.lease_error(e),
            },
        }
    }

    pub(super) fn lease_error(&self, e: LeaseError) -> WorkerExit {
        self.worker.lease_error(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_checkpoint_writes_are_tried_again_after_waits_doubling_up_to_two_seconds() {
        let waits: Vec<u128> = (1..=6).map(|n| retry_wait(n).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000]);
    }
}
