//! Handlers' state: calls into `wasi:keyvalue` and the conditional writes, by operation and
//! result, their time, and the requests they cost the store.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    subscription: String,
    /// `open`, `get`, `set`, `delete`, `exists`, `list_keys`, `increment`, `set_if_absent`,
    /// `compare_and_set`, `get_many`, `set_many` or `delete_many`.
    op: &'static str,
    /// `ok`, `conflict` (a conditional write whose condition did not hold), `refused` (a
    /// bucket not granted, a key or value too large), `throttled`, `timeout` or `error`.
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    subscription: String,
    op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommitLabels {
    subscription: String,
    /// `ok`, `conflict` (a key another shard wrote since it was read: the shard reads again
    /// from its checkpoint) or `failed` (the lease lost, the store unreachable).
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SubscriptionLabels {
    subscription: String,
}

fn duration_histogram() -> Histogram {
    // 0.1 ms .. ~3 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 15))
}

/// The families of handlers' state calls.
#[derive(Debug)]
pub(super) struct StateFamilies {
    calls: Family<CallLabels, Counter>,
    seconds: Family<OpLabels, Histogram, fn() -> Histogram>,
    requests: Family<SubscriptionLabels, Counter>,
    commits: Family<CommitLabels, Counter>,
    committed_keys: Family<SubscriptionLabels, Counter>,
    discarded: Family<SubscriptionLabels, Counter>,
}

impl Default for StateFamilies {
    fn default() -> Self {
        StateFamilies {
            calls: Family::default(),
            seconds: Family::new_with_constructor(duration_histogram),
            requests: Family::default(),
            commits: Family::default(),
            committed_keys: Family::default(),
            discarded: Family::default(),
        }
    }
}

impl StateFamilies {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "state_calls",
            "Handlers' state calls, by subscription, operation and result (ok, conflict, refused, throttled, timeout, error)",
            self.calls.clone(),
        );
        registry.register(
            "state_call_seconds",
            "Time of handlers' state calls, by subscription and operation",
            self.seconds.clone(),
        );
        registry.register(
            "state_store_requests",
            "Requests handlers' state calls sent to the store (DynamoDB calls; 0 for the memory store), by subscription",
            self.requests.clone(),
        );
        registry.register(
            "state_commits",
            "Checkpoints written with state (commit = \"with-checkpoint\"), by subscription and result (ok, conflict, failed)",
            self.commits.clone(),
        );
        registry.register(
            "state_committed_keys",
            "State keys written by checkpoints written with state, by subscription",
            self.committed_keys.clone(),
        );
        registry.register(
            "state_batches_discarded",
            "Batches whose state writes were discarded because not all of their records settled (commit = \"with-checkpoint\"); each is read again, by subscription",
            self.discarded.clone(),
        );
    }
}

impl Metrics {
    /// Counts one state call and its time.
    pub fn state_call(
        &self,
        subscription: &str,
        op: &'static str,
        result: &'static str,
        seconds: f64,
    ) {
        self.state
            .calls
            .get_or_create(&CallLabels {
                subscription: subscription.to_owned(),
                op,
                result,
            })
            .inc();
        self.state
            .seconds
            .get_or_create(&OpLabels {
                subscription: subscription.to_owned(),
                op,
            })
            .observe(seconds);
    }

    /// Counts requests a state call sent to its store.
    pub fn state_requests(&self, subscription: &str, requests: u64) {
        self.state
            .requests
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc_by(requests);
    }

    /// Counts a checkpoint written with state, and the keys it wrote.
    pub fn state_commit(&self, subscription: &str, result: &'static str, keys: usize) {
        self.state
            .commits
            .get_or_create(&CommitLabels {
                subscription: subscription.to_owned(),
                result,
            })
            .inc();
        if result == "ok" {
            self.state
                .committed_keys
                .get_or_create(&SubscriptionLabels {
                    subscription: subscription.to_owned(),
                })
                .inc_by(keys as u64);
        }
    }

    /// Counts a batch whose state writes were discarded (it is read again).
    pub fn state_batch_discarded(&self, subscription: &str) {
        self.state
            .discarded
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc();
    }
}
