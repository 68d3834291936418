//! `retry-after` without a retry cap: the record is called again in its shard once the delay is
//! over (its attempt number one higher each time), each further `retry-after` waiting twice as
//! long as the last, up to `in_place_max_delay`. Until it is answered otherwise it stays
//! unsettled: the checkpoint waits in front of it, and a stop, a handoff or a lost lease leaves
//! it to whoever reads the shard next (from the checkpoint, so it is read again). Records after
//! it, of its key too, are handled meanwhile, as they are past a held record. Plain `retry`
//! still holds (`retry.rs`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

use super::Run;
use super::batch::{Meta, lane_of};
use super::lane::Lane;
use super::retry::Delivery;
use crate::config::defaults::IN_PLACE_MIN_DELAY;
use crate::record::{Position, Record};
use crate::settle::Ticket;
use crate::status::Retrying;

/// A record waiting to be called again.
pub(super) struct Waiting {
    pub due: Instant,
    pub ticket: Ticket,
    pub record: Record,
    /// The calls it had so far (the attempt number of the last).
    pub attempt: u32,
    /// How long it waits before its next call.
    pub delay: Duration,
}

/// The wait before calling again a record answered `retry-after(ms)` that waited `last` before
/// this call (zero before its first): what it asks, and at least twice the last wait and
/// [`IN_PLACE_MIN_DELAY`], at most `max`.
pub(super) fn next_delay(ms: u64, last: Duration, max: Duration) -> Duration {
    Duration::from_millis(ms)
        .max(last.saturating_mul(2))
        .max(IN_PLACE_MIN_DELAY)
        .min(max)
}

impl Run<'_> {
    /// A record answered `retry-after(ms)` without a cap: it waits here, unsettled, and is
    /// called again once its delay is over.
    pub(super) fn wait_in_place(&mut self, record: Record, meta: &Delivery, ms: u64) {
        let delay = next_delay(ms, meta.waited, self.worker.plan.in_place_max_delay);
        tracing::debug!(
            sequence_number = %record.position(), partition_key = %record.partition_key,
            attempt = meta.attempt,
            "retry-after({ms} ms): called again in {delay:?}; the checkpoint waits in front of it"
        );
        self.waiting.push(Waiting {
            due: Instant::now() + delay,
            ticket: meta.ticket,
            record,
            attempt: meta.attempt,
            delay,
        });
    }

    /// Calls again the waiting records whose delay is over, in read order, through the lanes
    /// (one key stays in one lane). Not after a stop, a handoff or a lost lease: they are left
    /// to the shard's next reader.
    pub(super) async fn call_waiting(&mut self) {
        let now = Instant::now();
        if self.interrupts.now().is_some() || !self.waiting.iter().any(|w| w.due <= now) {
            return;
        }
        let (mut due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|w| w.due <= now);
        self.waiting = waiting;
        due.sort_by_cached_key(|w| w.record.position());
        self.dispatch_again(due).await;
    }

    /// Calls again records that waited out a `retry-after` delay (no cap), in read order, each
    /// with its next attempt number, on the version current now; resolves them as any record.
    async fn dispatch_again(&mut self, waiting: Vec<Waiting>) {
        self.take_current_version();
        let n_lanes = self.handlers.len();
        let per_lane = waiting.len().div_ceil(n_lanes);
        let mut lanes: Vec<Lane> = self
            .handlers
            .iter_mut()
            .map(|h| Lane::new(h.take(), per_lane))
            .collect();
        let mut metas = Vec::with_capacity(waiting.len());
        for w in waiting {
            let lane = lane_of(&w.record.partition_key, n_lanes);
            let attempt = w.attempt.saturating_add(1);
            lanes[lane].records.push(w.record);
            lanes[lane].attempts.push(attempt);
            let delivery = Delivery {
                ticket: w.ticket,
                attempt,
                origin: None,
                waited: w.delay,
            };
            metas.push(Meta { delivery, lane });
        }
        self.run_and_resolve(lanes, metas, Vec::new()).await;
    }

    /// What is due now: retry copies and dead letters to publish (under a cap), records to call
    /// again (without one).
    pub(super) async fn run_due(&mut self) {
        self.flush_delayed().await;
        self.call_waiting().await;
    }

    /// When the next delayed publish or call again is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        let copies = self.delayed.iter().map(|d| d.due);
        let calls = self.waiting.iter().map(|w| w.due);
        copies.chain(calls).min()
    }

    /// Forgets the waiting records a seek reads again (from `at` on).
    pub(super) fn forget_waiting_from(&mut self, at: &Position) {
        self.waiting.retain(|w| w.record.position() < *at);
    }

    /// The first waiting record (in read order), as the shard's status shows it.
    pub(super) fn retrying(&self) -> Option<Retrying> {
        let first = self.waiting.iter().min_by_key(|w| w.record.position())?;
        let wall = SystemTime::now() + first.due.saturating_duration_since(Instant::now());
        Some(Retrying {
            at: first.record.position().to_string(),
            key: first.record.partition_key.to_string(),
            attempts: first.attempt,
            next_try_ms: wall
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            records: self.waiting.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_retry_after_waits_twice_the_last_up_to_the_bound() {
        let max = Duration::from_secs(1);
        let mut last = Duration::ZERO;
        let mut waits = Vec::new();
        for _ in 0..6 {
            last = next_delay(100, last, max);
            waits.push(last.as_millis());
        }
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        // A longer delay asked for is honoured, up to the bound; a zero one waits the least.
        assert_eq!(
            next_delay(700, Duration::from_millis(100), max).as_millis(),
            700
        );
        assert_eq!(next_delay(5_000, Duration::ZERO, max), max);
        assert_eq!(next_delay(0, Duration::ZERO, max), IN_PLACE_MIN_DELAY);
    }
}
