//! `shardhost put`: the records put into the embedded stream through the admin API, and the
//! puts refused.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{Metrics, SubscriptionLabels};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PutLabels {
    subscription: String,
    /// `ok` or `refused`.
    result: &'static str,
}

/// The families of puts.
#[derive(Debug, Default)]
pub(super) struct PutFamilies {
    puts: Family<PutLabels, Counter>,
    records: Family<SubscriptionLabels, Counter>,
}

impl PutFamilies {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "admin_puts",
            "Puts into the embedded stream through the admin API (shardhost put), by result (ok, refused)",
            self.puts.clone(),
        );
        registry.register(
            "admin_put_records",
            "Records put into the embedded stream through the admin API (shardhost put)",
            self.records.clone(),
        );
    }
}

impl Metrics {
    /// Counts a put through the admin API: `Some(records)` put, or `None`, refused.
    pub fn put(&self, subscription: &str, records: Option<u64>) {
        let labels = PutLabels {
            subscription: subscription.to_owned(),
            result: if records.is_some() { "ok" } else { "refused" },
        };
        self.put.puts.get_or_create(&labels).inc();
        if let Some(n) = records {
            let labels = SubscriptionLabels {
                subscription: subscription.to_owned(),
            };
            self.put.records.get_or_create(&labels).inc_by(n);
        }
    }
}
