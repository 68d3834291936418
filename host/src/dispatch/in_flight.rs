//! The in-flight bound of a shard: what it may hold in memory beyond the batch it reads
//! (`limits.in_flight_records`, `limits.in_flight_bytes`). Reads ask for less as the records
//! waiting for a retry-after delay (a copy to publish under a cap, a call again without one)
//! and its shadow's batch copies fill it, and stop while those retry-after records reach it.

use super::retry::Delayed;
use super::{Run, WorkerExit};
use crate::status::ShardState;
use crate::wasm::short_version;

impl Run<'_> {
    /// How many records the next read may ask for: the subscription's read limit, less what
    /// the shard already holds in memory (`records` and `bytes` besides the retry-after copies
    /// waiting and the shadow's batch copies) under its in-flight bound; 0 when there is no
    /// room.
    pub(super) fn read_limit(&self, records: usize, bytes: u64) -> usize {
        let limit = self.worker.plan.in_flight;
        let (shadow_records, shadow_bytes) = self.shadow.held();
        let held = records + self.waiting_records() + shadow_records;
        let held_bytes = bytes + self.delayed_bytes() + shadow_bytes;
        if held_bytes >= limit.bytes {
            return 0;
        }
        self.worker
            .plan
            .read_limit
            .min(limit.records.saturating_sub(held))
    }

    /// How many records wait for a retry-after delay (copies and calls again).
    fn waiting_records(&self) -> usize {
        self.delayed.len() + self.waiting.len()
    }

    /// The bytes the records waiting for a retry-after delay hold.
    fn delayed_bytes(&self) -> u64 {
        let copies: u64 = self.delayed.iter().map(Delayed::bytes).sum();
        let calls: u64 = self
            .waiting
            .iter()
            .map(|w| Delayed::record_bytes(&w.record))
            .sum();
        copies + calls
    }

    /// Whether the records waiting for a retry-after delay reach the in-flight bound.
    fn over_in_flight(&self) -> bool {
        let limit = self.worker.plan.in_flight;
        let waiting = self.waiting_records();
        waiting > 0 && (waiting >= limit.records || self.delayed_bytes() >= limit.bytes)
    }

    /// While the delayed records reach the in-flight bound, stops reading until they drain
    /// below it (shown in the shard's status); answers how the worker ends if it is
    /// interrupted meanwhile.
    pub(super) async fn drain_in_flight(&mut self) -> Option<WorkerExit> {
        if !self.over_in_flight() {
            return None;
        }
        let w = self.worker;
        let limit = w.plan.in_flight;
        w.plan.metrics.contained(&w.plan.name, "in-flight-paused");
        tracing::warn!(
            handler = short_version(&self.version),
            records = self.waiting_records(),
            "reading paused: the records waiting for retry-after reach the in-flight limit ({} records, {} bytes); reading resumes as they go out",
            limit.records,
            limit.bytes
        );
        w.status.update(|s| s.state = ShardState::PausedInFlight);
        let interrupts = self.interrupts.clone();
        // Until they drain below it, or a record called again seeks (the loop follows it).
        while self.over_in_flight() && self.seek_to.is_none() {
            let due = self
                .next_due()
                .expect("over the limit means something waits");
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
