//! What a subscription's shard workers share: the plan the supervisor makes of its config
//! ([`SubscriptionPlan`]), what its reader is for ([`Role`]) and the in-flight bound of each of
//! its shards ([`InFlight`]).

use std::sync::Arc;
use std::time::Duration;

use super::OutcomeTap;
use crate::config::{RetryPolicy, StartAt};
use crate::lease::{LeaseKey, LeaseRows};
use crate::metrics::Metrics;
use crate::publish::Publisher;
use crate::slot::HandlerSlot;

/// What a subscription's shard workers share.
pub struct SubscriptionPlan {
    pub name: Arc<str>,
    pub stream: Arc<str>,
    /// Whose lease rows the subscription reads through (`lease_key`): the shared `stream:shard`
    /// or its own `stream:shard#SUBSCRIPTION`.
    pub rows: LeaseRows,
    /// The most records a read asks for (`read_limit`): the read size adapts below it
    /// ([`read_size`]), and the in-flight bound may leave less room.
    pub read_limit: usize,
    /// Records per handler call (`batch`).
    pub call_batch: usize,
    /// At most one checkpoint write per shard per this period (always on stop and SHARD_END).
    pub checkpoint_every: Duration,
    pub poll_interval: Duration,
    pub start_at: StartAt,
    /// The handler new batches run; swapped by deploy, rollback and watch.
    pub handler: Arc<HandlerSlot>,
    /// Parallel lanes per shard (1: none).
    pub lanes: usize,
    /// Records and bytes a shard may keep waiting for a retry-after delay before it stops
    /// reading (`limits.in_flight_records`, `limits.in_flight_bytes`).
    pub in_flight: InFlight,
    /// What retry does under a cap (none: retry holds the record, and retry-after calls it
    /// again in this shard after the delay).
    pub retry: Option<RetryPolicy>,
    /// Without a cap, the longest wait before a record answered retry-after is called again
    /// (the waits double up to it).
    pub in_place_max_delay: Duration,
    /// What the handler's `publish` may reach.
    pub publisher: Option<Arc<Publisher>>,
    /// Authenticates retry copies and dead letters (the fleet's current key, and the previous
    /// ones that still open copies).
    pub envelopes: Arc<crate::envelope::EnvelopeKeys>,
    /// The name of every subscription of the host's config: a retry copy that names none of
    /// them (a subscription renamed or removed) is logged and counted.
    pub subscriptions: Arc<[Arc<str>]>,
    pub metrics: Arc<Metrics>,
    pub tap: Option<OutcomeTap>,
    /// What this plan's reader is for: the subscription's stream, or its retry copies on a
    /// `retry_stream` of their own.
    pub role: Role,
    /// `[subscription.state] commit = "with-checkpoint"`: each shard keeps its state writes and
    /// commits them with its checkpoint (`state::commit`).
    pub commit_state: bool,
    /// When one of its shards' commits last conflicted: its shards then commit after every
    /// batch for a while, so two shards writing one key stop failing each other's commits.
    pub state_conflicts: crate::state::commit::Conflicts,
}

/// What a subscription's reader reads for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// Its stream's records (and its own retry copies, when they go to that stream).
    #[default]
    Records,
    /// Its retry copies on a `retry_stream` of their own, which the host that runs the
    /// subscription reads too (rows of its own, `RETRY:shard#SUBSCRIPTION`, from the stream's
    /// beginning): anything there that is not one of its copies is skipped, counted and logged.
    RetryCopies,
}

impl SubscriptionPlan {
    /// The key of the row through which this subscription reads `shard`.
    pub fn lease_key(&self, shard: &str) -> LeaseKey {
        LeaseKey::of(&self.stream, shard, &self.name, self.rows)
    }

    /// How status and metrics name one of its shards: the shard id; on a retry stream of its
    /// own, `RETRY:shard` (the subscription's two streams may have shards of the same id).
    pub fn shard_label(&self, shard: &str) -> String {
        match self.role {
            Role::Records => shard.to_owned(),
            Role::RetryCopies => format!("{}:{shard}", self.stream),
        }
    }

    /// The plan of the reader of this subscription's retry copies, when they go to a stream of
    /// their own: that stream, through the subscription's own rows, from its beginning.
    pub fn retry_copies(&self) -> Option<SubscriptionPlan> {
        let policy = self.retry.as_ref()?;
        if policy.retry_stream == *self.stream {
            return None;
        }
        Some(SubscriptionPlan {
            stream: Arc::from(policy.retry_stream.as_str()),
            rows: LeaseRows::Subscription,
            start_at: StartAt::TrimHorizon,
            role: Role::RetryCopies,
            name: self.name.clone(),
            read_limit: self.read_limit,
            call_batch: self.call_batch,
            checkpoint_every: self.checkpoint_every,
            poll_interval: self.poll_interval,
            handler: self.handler.clone(),
            lanes: self.lanes,
            in_flight: self.in_flight,
            retry: self.retry.clone(),
            in_place_max_delay: self.in_place_max_delay,
            publisher: self.publisher.clone(),
            envelopes: self.envelopes.clone(),
            subscriptions: self.subscriptions.clone(),
            metrics: self.metrics.clone(),
            tap: self.tap.clone(),
            commit_state: self.commit_state,
            state_conflicts: self.state_conflicts.clone(),
        })
    }
}

/// How much a shard may hold in memory beyond the batch it reads.
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    pub records: usize,
    pub bytes: u64,
}

impl Default for InFlight {
    fn default() -> Self {
        let limits = crate::config::Limits::default();
        InFlight {
            records: limits.in_flight_records,
            bytes: limits.in_flight_bytes,
        }
    }
}
