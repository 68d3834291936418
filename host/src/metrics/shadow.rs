//! Shadows (`deploy --shadow`): the records a candidate answered, compared with the current
//! version, and the batches it compared or dropped.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecordLabels {
    subscription: String,
    /// `agree`, `differ`, `trapped`, `timed-out` or `skipped`.
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BatchLabels {
    subscription: String,
    /// `compared`, or `dropped` (the shadow was still busy with the last batch).
    result: &'static str,
}

/// The families of shadows.
#[derive(Debug, Default)]
pub(super) struct ShadowFamilies {
    records: Family<RecordLabels, Counter>,
    batches: Family<BatchLabels, Counter>,
}

impl ShadowFamilies {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "shadow_records",
            "Records a shadow's candidate answered, by how its answer compares with the current version's",
            self.records.clone(),
        );
        registry.register(
            "shadow_batches",
            "Batches offered to a shadow: compared, or dropped because it was still busy",
            self.batches.clone(),
        );
    }
}

impl Metrics {
    /// Counts one record a shadow compared, by its `result` (`agree`, `differ`, `trapped`,
    /// `timed-out` or `skipped`).
    pub fn shadow_record(&self, subscription: &str, result: &'static str) {
        let labels = RecordLabels {
            subscription: subscription.to_owned(),
            result,
        };
        self.shadow.records.get_or_create(&labels).inc();
    }

    /// Counts one batch offered to a shadow.
    pub fn shadow_batch(&self, subscription: &str, compared: bool) {
        let labels = BatchLabels {
            subscription: subscription.to_owned(),
            result: if compared { "compared" } else { "dropped" },
        };
        self.shadow.batches.get_or_create(&labels).inc();
    }
}
