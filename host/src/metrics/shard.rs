//! One shard's handles into the metric families, taken once by its worker.

use std::time::{Duration, SystemTime};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use super::ShardLabels;
use crate::record::Outcome;

/// One shard worker's handles into the families.
#[derive(Clone, Debug)]
pub struct ShardMetrics {
    pub(super) ack: Counter,
    pub(super) drop: Counter,
    pub(super) retry: Counter,
    pub(super) retry_after: Counter,
    /// Records whose call failed (also counted as `retry`).
    pub(super) failed: Counter,
    pub(super) millis_behind: Gauge,
    pub(super) checkpoint_writes: Counter,
    pub(super) reads: Counter,
    pub(super) read_records: Histogram,
    pub(super) read_throttles: Counter,
    pub(super) call_seconds: Histogram,
    /// The family itself: a shard with no held record has no sample in it.
    pub(super) held_since: Family<ShardLabels, Gauge>,
    pub(super) shard: ShardLabels,
}

impl ShardMetrics {
    /// Counts one call's outcomes.
    pub fn outcomes(&self, outcomes: &[Outcome]) {
        let (mut ack, mut drop, mut retry, mut after) = (0, 0, 0, 0);
        for o in outcomes {
            match o {
                Outcome::Ack => ack += 1,
                Outcome::Drop => drop += 1,
                Outcome::Retry => retry += 1,
                Outcome::RetryAfter(_) => after += 1,
            }
        }
        for (counter, n) in [
            (&self.ack, ack),
            (&self.drop, drop),
            (&self.retry, retry),
            (&self.retry_after, after),
        ] {
            if n > 0 {
                counter.inc_by(n);
            }
        }
    }

    /// Counts records whose call failed: as retry (their outcome), and as failed.
    pub fn failed(&self, records: usize) {
        self.retry.inc_by(records as u64);
        self.failed.inc_by(records as u64);
    }

    pub fn call(&self, took: Duration) {
        self.call_seconds.observe(took.as_secs_f64());
    }

    pub fn millis_behind(&self, ms: Option<u64>) {
        if let Some(ms) = ms {
            self.millis_behind.set(ms as i64);
        }
    }

    /// Shows since when the record that stops the checkpoint is held; `None` removes the
    /// shard's sample (nothing held, or the shard no longer read here).
    pub fn held_since(&self, since: Option<SystemTime>) {
        match since {
            Some(at) => {
                let secs = at
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                self.held_since
                    .get_or_create(&self.shard)
                    .set(i64::try_from(secs).unwrap_or(i64::MAX));
            }
            None => {
                self.held_since.remove(&self.shard);
            }
        }
    }

    pub fn checkpoint_written(&self) {
        self.checkpoint_writes.inc();
    }

    /// Counts one read that answered with this many records.
    pub fn read(&self, records: usize) {
        self.reads.inc();
        self.read_records.observe(records as f64);
    }

    /// Counts one read the stream service refused for the shard's read limit.
    pub fn throttled(&self) {
        self.read_throttles.inc();
    }
}
