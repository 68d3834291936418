//! The read loop of one shard: take a read, start the next one, hand the records to the handler
//! a call's worth per lane at a time ([`batch`](super::batch)), reopen the reader after a seek,
//! end the shard, and write the checkpoint when it moved.

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use super::checkpoint::Flush;
use super::interrupt::Interrupt;
use super::read::{self, Reads};
use super::read_size::{Answered, ReadSize};
use super::retry::Delayed;
use super::{Run, WorkerExit};
use crate::record::{Position, Record};
use crate::source::{ReadBatch, ShardReader, SourceError, StartPosition};
use crate::version::short_version;

/// The longest wait between failed reads of a shard.
pub(super) const MAX_READ_BACKOFF: Duration = Duration::from_secs(10);

/// The wait after the `failures`th failed read in a row: the poll interval (at least 100 ms),
/// doubling with each failure, up to [`MAX_READ_BACKOFF`].
fn read_backoff(poll_interval: Duration, failures: u32) -> Duration {
    let first = poll_interval.max(Duration::from_millis(100));
    first
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(MAX_READ_BACKOFF)
}

/// When the loop reads next and how much, and the runs that stretch its waits.
struct Pacing {
    /// When the next read may start (a wait after an empty or caught-up read, a backoff).
    next_at: tokio::time::Instant,
    /// How many records the next read asks for (fewer if the in-flight bound says so).
    size: ReadSize,
    /// Reads failed in a row (the stream service is down or throttles): waits grow.
    failures: u32,
    /// Empty reads in a row: the wait between them grows.
    empties: u32,
    /// Batches in a row that ended in a seek.
    seeks: u32,
}

impl Run<'_> {
    /// Reads the shard until it ends, the worker is interrupted, or reading fails for good.
    pub async fn read_loop(&mut self, reader: Box<dyn ShardReader>) -> WorkerExit {
        let w = self.worker;
        let mut reads = Reads::new(
            reader,
            self.source.read_interval(),
            self.source.read_bytes_per_second(),
            w.metrics.clone(),
        );
        let mut pacing = Pacing {
            next_at: tokio::time::Instant::now(),
            size: if self.source.pushes() {
                ReadSize::fixed(w.plan.read_limit)
            } else {
                ReadSize::new(w.plan.read_limit)
            },
            failures: 0,
            empties: 0,
            seeks: 0,
        };
        loop {
            if let Some(exit) = self.drain_in_flight().await {
                return exit;
            }
            // A record called again while the loop waited sought: read from there first.
            if let Some(at) = self.seek_to.take() {
                match self.follow_seek(at, &mut pacing, &mut reads).await {
                    Some(exit) => return exit,
                    None => continue,
                }
            }
            // This turn's read: started ahead while the last batch ran, or now; at least one
            // record (what the shard keeps fills the bound here only when nothing waits that
            // would let it go, or with the shadow's copies, and a shadow never stops the shard).
            let room = self.read_limit(0, 0).max(1);
            reads.start(room.min(pacing.size.get()), pacing.next_at);
            let batch = match self.next_read(&mut reads).await {
                Err(interrupt) => return self.exit(interrupt).await,
                Ok(None) => continue,
                // A reader that can never answer again: the worker fails (status, log), and
                // the shard is let go, to be taken up again with a new reader.
                Ok(Some(Err(e))) if e.ends_reader() => return w.fail(e),
                Ok(Some(Err(e))) => {
                    self.read_failed(e, &mut pacing);
                    continue;
                }
                Ok(Some(Ok(batch))) => batch,
            };
            if let Some(exit) = self.take_read(batch, &mut pacing, &mut reads).await {
                return exit;
            }
        }
    }

    /// Waits for the read in flight, publishing retry-after copies and calling waiting records
    /// again as they fall due meanwhile. `None` when such a call sought (the read in flight is
    /// dropped: the loop follows the seek first).
    async fn next_read(
        &mut self,
        reads: &mut Reads,
    ) -> Result<Option<Result<ReadBatch, SourceError>>, Interrupt> {
        let interrupts = self.interrupts.clone();
        loop {
            let due = self.next_due();
            tokio::select! {
                biased;
                i = interrupts.wait() => return Err(i),
                read = reads.next() => return Ok(Some(read)),
                // Retry-after copies go out, and waiting records are called, on time while the
                // read waits.
                _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    self.run_due().await;
                    if self.seek_to.is_some() {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// A failed read: note it, and wait longer before the next one.
    fn read_failed(&self, e: SourceError, pacing: &mut Pacing) {
        let w = self.worker;
        let throttled = matches!(e, SourceError::Throttled(_));
        if throttled {
            pacing.size.throttled();
        }
        pacing.failures += 1;
        let failures = pacing.failures;
        // A throttle is the shard's shared limit at work (another consumer read it, or the
        // bytes of a big read are not paid for yet): try again a poll interval on, without
        // doubling, which would overshoot the moment the limit allows the next read.
        let wait = if self.source.pushes() {
            // A pushing source paces its own subscriptions: the next read waits for them.
            Duration::ZERO
        } else {
            read_backoff(w.plan.poll_interval, if throttled { 1 } else { failures })
        };
        // The first failure and then one in ten: an outage does not flood the log.
        // Throttles are the shard's shared read limit at work, not a fault.
        if throttled {
            tracing::debug!(failures, "read throttled; trying again in {wait:?}");
        } else {
            if failures % 10 == 1 {
                tracing::warn!(error = %e, failures, "read failed; trying again in {wait:?}");
            }
            w.status.update(|s| s.last_error = Some(e.to_string()));
        }
        pacing.next_at = tokio::time::Instant::now() + wait;
    }

    /// Everything one read leads to: its records handled (reading ahead meanwhile), a seek
    /// followed, the shard ended, the checkpoint written. Answers how the worker ends, if it does.
    async fn take_read(
        &mut self,
        mut batch: ReadBatch,
        pacing: &mut Pacing,
        reads: &mut Reads,
    ) -> Option<WorkerExit> {
        let w = self.worker;
        if pacing.failures > 0 {
            tracing::info!(
                failures = pacing.failures,
                "reading again after failed reads"
            );
            pacing.failures = 0;
        }
        w.status
            .update(|s| s.millis_behind_latest = batch.millis_behind_latest);
        w.metrics.millis_behind(batch.millis_behind_latest);
        let empty = batch.records.is_empty();
        pacing.empties = if empty { pacing.empties + 1 } else { 0 };
        let (asked, poll) = (reads.asked(), w.plan.poll_interval);
        // A pushed read waited for its records itself, and hands out what was pushed, whatever
        // its size: no poll wait, no read size to adapt. A polled one waits for the next poll.
        let wait = if self.source.pushes() {
            Duration::ZERO
        } else {
            pacing.size.answered(Answered {
                asked,
                got: batch.records.len(),
                caught_up: !read::behind(&batch, asked, poll),
                pace: reads.pace(),
                took: reads.took(),
            });
            read::wait_after(&batch, asked, poll, pacing.empties)
        };
        pacing.next_at = tokio::time::Instant::now() + wait;
        if !empty {
            // Read ahead while the handler works on this batch, within the in-flight bound.
            if !batch.end_of_shard {
                let bytes = batch.records.iter().map(Delayed::record_bytes).sum();
                let limit = self
                    .read_limit(batch.records.len(), bytes)
                    .min(pacing.size.get());
                if limit > 0 {
                    reads.start(limit, pacing.next_at);
                }
            }
            let records = std::mem::take(&mut batch.records);
            if let Some(exit) = self.handle(records, batch.millis_behind_latest).await {
                return Some(exit);
            }
        }
        self.run_due().await;
        if self.seek_to.is_none() && !empty {
            pacing.seeks = 0;
        }
        if let Some(at) = self.seek_to.take() {
            return self.follow_seek(at, pacing, reads).await;
        }
        if batch.end_of_shard {
            return self.end_shard(pacing, reads).await;
        }
        self.write_checkpoint(Flush::Due)
            .await
            .err()
            .map(|e| self.lease_error(e))
    }

    /// Hands a read to the handler a call's worth per lane at a time, settling and
    /// checkpointing as it goes, so a large read does not hold back outcomes and checkpoints.
    /// Stops early at a seek (the rest is read again), and answers how the worker ends if it
    /// is interrupted meanwhile.
    async fn handle(
        &mut self,
        records: Vec<Record>,
        millis_behind_latest: Option<u64>,
    ) -> Option<WorkerExit> {
        let w = self.worker;
        // One `BatchInfo` serves every call of the shard: no allocation per batch.
        if self.info.millis_behind_latest != millis_behind_latest {
            Arc::make_mut(&mut self.info).millis_behind_latest = millis_behind_latest;
        }
        let step = w.plan.call_batch.max(1) * self.handlers.len().max(1);
        let step = self.call_step.map_or(step, |s| s.min(step));
        let mut rest = records.len();
        let mut records = records.into_iter();
        while rest > 0 {
            let take = rest.min(step);
            let part: Vec<Record> = records.by_ref().take(take).collect();
            rest -= take;
            self.dispatch(part).await;
            // State committed with the checkpoint: checkpoint now, rather than hold more writes
            // than a commit takes.
            if self.seek_to.is_none()
                && w.ctx.pending.as_ref().is_some_and(|p| {
                    p.half_full()
                        || (p.held_keys() > 0 && w.plan.state_conflicts.commit_each_batch())
                })
                && let Err(e) = self.write_checkpoint(Flush::Soon).await
            {
                return Some(self.lease_error(e));
            }
            if self.seek_to.is_some() {
                return None;
            }
            // Interrupted while the handler ran: some records may be unanswered, so the read
            // ends here (never as a shard's end); a lost lease settles nothing more.
            if let Some(interrupt) = self.interrupts.now() {
                return Some(self.exit(interrupt).await);
            }
            if self.seek_to.is_some() {
                return None;
            }
            if rest > 0 {
                self.run_due().await;
                if let Some(interrupt) = self.interrupts.now() {
                    return Some(self.exit(interrupt).await);
                }
                // A record called again sought: the rest of the read is read again from there.
                if self.seek_to.is_some() {
                    return None;
                }
                if let Err(e) = self.write_checkpoint(Flush::Due).await {
                    return Some(self.lease_error(e));
                }
                // A state commit conflicted: the rest is read again.
                if self.seek_to.is_some() {
                    return None;
                }
            }
        }
        None
    }

    /// Reopens the reader where a handler sought (the rest of this read, and the shard's end if
    /// it came, is read again; a read ahead of the old position is dropped). A handler that
    /// seeks batch after batch reads the same records over and over, on the shard's read limit
    /// every consumer shares: each seek in a row waits twice as long.
    async fn follow_seek(
        &mut self,
        at: Position,
        pacing: &mut Pacing,
        reads: &mut Reads,
    ) -> Option<WorkerExit> {
        let w = self.worker;
        pacing.seeks += 1;
        if pacing.seeks > 1 {
            let wait = read_backoff(w.plan.poll_interval, pacing.seeks - 1);
            w.plan.metrics.contained(&w.plan.name, "seek-backoff");
            if pacing.seeks == 2 {
                tracing::warn!(
                    handler = short_version(&self.version), sequence_number = %at,
                    "the handler seeks again and again; reading again after {wait:?}, waits doubling up to {MAX_READ_BACKOFF:?}"
                );
            }
            let interrupts = self.interrupts.clone();
            tokio::select! {
                i = interrupts.wait() => return Some(self.exit(i).await),
                _ = tokio::time::sleep(wait) => {}
            }
        }
        if let Some(delivered) = &w.ctx.delivered {
            delivered.rewind(&at);
        }
        match self
            .source
            .open(&w.plan.stream, &w.ctx.shard_id, &StartPosition::At(at))
            .await
        {
            Ok(r) => reads.reopen(r),
            Err(e) => return Some(w.fail(e)),
        }
        pacing.next_at = tokio::time::Instant::now();
        None
    }

    /// The shard is closed and read to its end: once the retry-after copies still waiting are
    /// out and the records waiting to be called again are answered, write SHARD_END, unless a
    /// held record keeps it from ending. (A record called again that seeks reads on from there.)
    async fn end_shard(&mut self, pacing: &mut Pacing, reads: &mut Reads) -> Option<WorkerExit> {
        let interrupts = self.interrupts.clone();
        while let Some(due) = self.next_due() {
            tokio::select! {
                biased;
                i = interrupts.wait() => return Some(self.exit(i).await),
                _ = tokio::time::sleep_until(due) => self.run_due().await,
            }
            if let Some(at) = self.seek_to.take() {
                return self.follow_seek(at, pacing, reads).await;
            }
            if let Err(e) = self.write_checkpoint(Flush::Due).await {
                return Some(self.lease_error(e));
            }
            // A state commit conflicted: read again from there.
            if let Some(at) = self.seek_to.take() {
                return self.follow_seek(at, pacing, reads).await;
            }
        }
        self.tracker.mark_read_to_end();
        if let Err(e) = self.write_checkpoint(Flush::Now).await {
            return Some(self.lease_error(e));
        }
        Some(if self.tracker.is_complete() {
            tracing::info!("shard ended (SHARD_END written)");
            WorkerExit::ShardEnded
        } else {
            tracing::warn!("closed shard read to its end, but a held record keeps it from ending");
            WorkerExit::HeldAtEnd
        })
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
