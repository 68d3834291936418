//! What the host counts, in Prometheus' model (served on `GET /metrics` as OpenMetrics text to
//! a client that asks for it, as Prometheus does, else in the classic text format: `text.rs`).
//!
//! Hot paths never look a label set up per record: a shard worker takes its [`ShardMetrics`]
//! (cheap handles into the families) once, and counts per batch.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod http;
mod outcomes;
mod put;
mod register;
mod shadow;
mod shard;
mod state;
mod text;

pub use outcomes::OutcomeTotals;
pub use shard::ShardMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// `read` or `write`.
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SubscriptionLabels {
    subscription: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShardLabels {
    subscription: String,
    shard: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecordLabels {
    subscription: String,
    shard: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TrapLabels {
    subscription: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ContainedLabels {
    subscription: String,
    event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    subscription: String,
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SwapLabels {
    subscription: String,
    result: &'static str,
}

fn read_histogram() -> Histogram {
    // 1 .. 16 384 records
    Histogram::new(exponential_buckets(1.0, 4.0, 8))
}

fn call_histogram() -> Histogram {
    // 50 µs .. ~13 s
    Histogram::new(exponential_buckets(0.00005, 4.0, 10))
}

/// Every metric of one host.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    records: Family<RecordLabels, Counter>,
    /// Records whose call failed (counted in `records` as retry too).
    records_failed: Family<ShardLabels, Counter>,
    call_seconds: Family<SubscriptionLabels, Histogram, fn() -> Histogram>,
    traps: Family<TrapLabels, Counter>,
    millis_behind: Family<ShardLabels, Gauge>,
    held_since: Family<ShardLabels, Gauge>,
    leases_held: Family<SubscriptionLabels, Gauge>,
    renewal_failures: Family<SubscriptionLabels, Counter>,
    checkpoint_failures: Family<SubscriptionLabels, Counter>,
    checkpoint_writes: Family<ShardLabels, Counter>,
    reads: Family<ShardLabels, Counter>,
    read_records: Family<SubscriptionLabels, Histogram, fn() -> Histogram>,
    read_throttles: Family<ShardLabels, Counter>,
    handler_version: Family<VersionLabels, Gauge>,
    swaps: Family<SwapLabels, Counter>,
    retry_copies: Family<SubscriptionLabels, Counter>,
    retry_copies_unclaimed: Family<SubscriptionLabels, Counter>,
    dead_letters: Family<SubscriptionLabels, Counter>,
    envelopes_rejected: Family<SubscriptionLabels, Counter>,
    contained: Family<ContainedLabels, Counter>,
    fleet_requests: Family<RequestLabels, Counter>,
    http: http::HttpFamilies,
    state: state::StateFamilies,
    shadow: shadow::ShadowFamilies,
    put: put::PutFamilies,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("shardhost");
        let m = Metrics {
            records: Family::default(),
            records_failed: Family::default(),
            call_seconds: Family::new_with_constructor(call_histogram),
            traps: Family::default(),
            millis_behind: Family::default(),
            held_since: Family::default(),
            leases_held: Family::default(),
            renewal_failures: Family::default(),
            checkpoint_failures: Family::default(),
            checkpoint_writes: Family::default(),
            reads: Family::default(),
            read_records: Family::new_with_constructor(read_histogram),
            read_throttles: Family::default(),
            handler_version: Family::default(),
            swaps: Family::default(),
            retry_copies: Family::default(),
            retry_copies_unclaimed: Family::default(),
            dead_letters: Family::default(),
            envelopes_rejected: Family::default(),
            contained: Family::default(),
            fleet_requests: Family::default(),
            http: http::HttpFamilies::default(),
            state: state::StateFamilies::default(),
            shadow: shadow::ShadowFamilies::default(),
            put: put::PutFamilies::default(),
            registry: Registry::default(),
        };
        m.register_handler_metrics(&mut registry);
        m.register_shard_metrics(&mut registry);
        m.register_containment_metrics(&mut registry);
        m.http.register(&mut registry);
        m.state.register(&mut registry);
        m.shadow.register(&mut registry);
        m.put.register(&mut registry);
        Metrics { registry, ..m }
    }

    /// The counters of the fleet's lease-table (reads, writes).
    pub fn fleet_requests(&self) -> (Counter, Counter) {
        let get = |kind| {
            self.fleet_requests
                .get_or_create(&RequestLabels { kind })
                .clone()
        };
        (get("read"), get("write"))
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }

    /// The same metrics in Prometheus' classic text format (0.0.4), which `promtool check
    /// metrics` reads.
    pub fn encode_classic(&self) -> String {
        text::classic(&self.encode())
    }

    /// The handles a shard worker counts with.
    pub fn shard(&self, subscription: &str, shard: &str) -> ShardMetrics {
        let record = |outcome| {
            self.records.get_or_create_owned(&RecordLabels {
                subscription: subscription.to_owned(),
                shard: shard.to_owned(),
                outcome,
            })
        };
        let shard_labels = ShardLabels {
            subscription: subscription.to_owned(),
            shard: shard.to_owned(),
        };
        ShardMetrics {
            ack: record("ack"),
            drop: record("drop"),
            retry: record("retry"),
            failed: self.records_failed.get_or_create_owned(&shard_labels),
            retry_after: record("retry-after"),
            millis_behind: self.millis_behind.get_or_create_owned(&shard_labels),
            held_since: self.held_since.clone(),
            checkpoint_writes: self.checkpoint_writes.get_or_create_owned(&shard_labels),
            reads: self.reads.get_or_create_owned(&shard_labels),
            read_throttles: self.read_throttles.get_or_create_owned(&shard_labels),
            read_records: self.read_records.get_or_create_owned(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            }),
            call_seconds: self.call_seconds.get_or_create_owned(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            }),
            shard: shard_labels,
        }
    }

    /// Counts a failed handler call.
    pub fn trap(&self, subscription: &str, kind: &'static str) {
        self.traps
            .get_or_create(&TrapLabels {
                subscription: subscription.to_owned(),
                kind,
            })
            .inc();
    }

    /// Makes a subscription's failure counters (one per kind in `trap_kinds`) and its leases
    /// gauge exist at 0 from its start, so that `increase()` over them sees the first failure
    /// and a dashboard shows 0 rather than no data.
    pub fn subscription_started(&self, subscription: &str, trap_kinds: &[&'static str]) {
        let labels = SubscriptionLabels {
            subscription: subscription.to_owned(),
        };
        let _ = self.renewal_failures.get_or_create(&labels);
        let _ = self.checkpoint_failures.get_or_create(&labels);
        let _ = self.leases_held.get_or_create(&labels);
        for &kind in trap_kinds {
            let _ = self.traps.get_or_create(&TrapLabels {
                subscription: subscription.to_owned(),
                kind,
            });
        }
    }

    /// Adds `delta` to the leases a subscription holds (each of its coordinators adds its own).
    pub fn add_leases_held(&self, subscription: &str, delta: i64) {
        self.leases_held
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc_by(delta);
    }

    /// A checkpoint write the lease store failed (tried again while the lease is valid).
    pub fn checkpoint_failed(&self, subscription: &str) {
        self.checkpoint_failures
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc();
    }

    pub fn renewal_failed(&self, subscription: &str) {
        self.renewal_failures
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc();
    }

    /// Marks `version` as the one `subscription` runs (and `old`, if any, as not).
    pub fn handler_version(&self, subscription: &str, old: Option<&str>, version: &str) {
        if let Some(old) = old.filter(|o| *o != version) {
            self.handler_version.remove(&VersionLabels {
                subscription: subscription.to_owned(),
                version: old.to_owned(),
            });
        }
        self.handler_version
            .get_or_create(&VersionLabels {
                subscription: subscription.to_owned(),
                version: version.to_owned(),
            })
            .set(1);
    }

    pub fn retry_copy(&self, subscription: &str) {
        self.retry_copies
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc();
    }

    /// A retry copy read by `subscription` that names a subscription this host does not run.
    pub fn retry_copy_unclaimed(&self, subscription: &str) {
        self.retry_copies_unclaimed
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc();
    }

    pub fn envelope_rejected(&self, subscription: &str) {
        self.envelopes_rejected
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc();
    }

    /// Counts a containment event (a call ended at its timeout, a limit reached, a log line
    /// cut, reading paused, ...).
    pub fn contained(&self, subscription: &str, event: &'static str) {
        self.contained
            .get_or_create(&ContainedLabels {
                subscription: subscription.to_owned(),
                event,
            })
            .inc();
    }

    pub fn dead_letter(&self, subscription: &str) {
        self.dead_letters
            .get_or_create(&SubscriptionLabels {
                subscription: subscription.to_owned(),
            })
            .inc();
    }

    pub fn swap(&self, subscription: &str, ok: bool) {
        self.swaps
            .get_or_create(&SwapLabels {
                subscription: subscription.to_owned(),
                result: if ok { "ok" } else { "refused" },
            })
            .inc();
    }
}

#[cfg(test)]
mod tests;
