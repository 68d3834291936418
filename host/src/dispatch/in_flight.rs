//! The in-flight bound of a shard: what it may hold in memory beyond the batch it reads
//! (`limits.in_flight_records`, `limits.in_flight_bytes`). It counts every record the shard's
//! tracker keeps (from the first unsettled one on: a record waiting for a retry-after delay or
//! a publish keeps every record read after it), the records waiting past a held one, and its
//! shadow's batch copies. Reads ask for less as they fill it, and stop while what waits reaches
//! it, until the waiting record settles (a held record at the front keeps nothing: reading goes
//! on behind it).

use super::{Run, WorkerExit};
use crate::status::ShardState;
use crate::version::short_version;

impl Run<'_> {
    /// How many records the next read may ask for: the subscription's read limit, less what
    /// the shard already holds in memory (`records` and `bytes` besides the records it keeps
    /// and the shadow's batch copies) under its in-flight bound; 0 when there is no room.
    pub(super) fn read_limit(&self, records: usize, bytes: u64) -> usize {
        let limit = self.worker.plan.in_flight;
        let (shadow_records, shadow_bytes) = self.shadow.held();
        let held = records + self.held_records() + shadow_records;
        let held_bytes = bytes + self.held_bytes() + shadow_bytes;
        if held_bytes >= limit.bytes {
            return 0;
        }
        self.worker
            .plan
            .read_limit
            .min(limit.records.saturating_sub(held))
    }

    /// How many records the shard keeps between batches: the tracker's (the first unsettled
    /// record and every one after it), or the records waiting for a retry-after delay or a
    /// publish when they stand past a held record (the tracker keeps nothing there).
    fn held_records(&self) -> usize {
        let waiting = self.delayed.len() + self.waiting.len();
        self.tracker.span().max(waiting)
    }

    /// The bytes those hold: the data of the records waiting, and the tracker's entries.
    fn held_bytes(&self) -> u64 {
        let copies: u64 = self.delayed.iter().map(super::retry::Delayed::bytes).sum();
        let calls: u64 = self
            .waiting
            .iter()
            .map(|w| super::retry::Delayed::record_bytes(&w.record))
            .sum();
        copies + calls + self.tracker.span_bytes()
    }

    /// Whether what the shard keeps reaches the in-flight bound while something waits that
    /// will let it go (a copy or letter to publish, a record to call again).
    fn over_in_flight(&self) -> bool {
        let limit = self.worker.plan.in_flight;
        let held = self.held_records();
        held > 0
            && self.next_due().is_some()
            && (held >= limit.records || self.held_bytes() >= limit.bytes)
    }

    /// While the shard keeps as much as the in-flight bound allows behind what waits, stops
    /// reading until it settles (shown in the shard's status, counted and logged once per
    /// pause); answers how the worker ends if it is interrupted meanwhile.
    pub(super) async fn drain_in_flight(&mut self) -> Option<WorkerExit> {
        if !self.over_in_flight() {
            return None;
        }
        let w = self.worker;
        let limit = w.plan.in_flight;
        w.plan.metrics.contained(&w.plan.name, "in-flight-paused");
        let waits_for = self.tracker.first_unsettled().map(|p| p.to_string());
        tracing::warn!(
            handler = short_version(&self.version),
            records = self.held_records(),
            waiting = self.delayed.len() + self.waiting.len(),
            sequence_number = waits_for.as_deref().unwrap_or("-"),
            "reading paused: the records waiting (retry-after, a publish) and those read behind \
             them reach the in-flight limit ({} records, {} bytes); reading resumes once they \
             settle",
            limit.records,
            limit.bytes
        );
        w.status.update(|s| s.state = ShardState::PausedInFlight);
        let interrupts = self.interrupts.clone();
        // Until they drain below it, or a record called again seeks (the loop follows it).
        while self.over_in_flight() && self.seek_to.is_none() {
            let Some(due) = self.next_due() else { break };
            tokio::select! {
                biased;
                i = interrupts.wait() => return Some(self.exit(i).await),
                _ = tokio::time::sleep_until(due) => self.run_due().await,
            }
        }
        w.status.update(|s| s.state = ShardState::Reading);
        None
    }
}
