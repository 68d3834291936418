//! What handlers reach outside themselves: outbound HTTP per subscription and origin, and
//! reads of their config values.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Metrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResponseLabels {
    subscription: String,
    /// An allowed origin (`scheme://host[:port]`).
    origin: String,
    /// `2xx` .. `5xx` (`1xx` never reaches a handler).
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    subscription: String,
    /// An allowed origin, or `other` for a denied request (whatever the guest asked for: a
    /// label per denied origin would let a guest grow the metrics without bound).
    origin: String,
    /// `denied` (an origin not allowed, or an allowed name resolving only inside the host's
    /// networks), `timeout`, `connect`, `tls`, `body_too_large`, `memory` (a body past the
    /// instance's memory limit) or `protocol`.
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OriginLabels {
    subscription: String,
    origin: String,
}

fn duration_histogram() -> Histogram {
    // 1 ms .. ~16 s
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConfigLabels {
    subscription: String,
    /// `found` or `missing`.
    result: &'static str,
}

/// The families of what handlers reach outside themselves: outbound HTTP, config reads.
#[derive(Debug)]
pub(super) struct HttpFamilies {
    config_reads: Family<ConfigLabels, Counter>,
    responses: Family<ResponseLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    seconds: Family<OriginLabels, Histogram, fn() -> Histogram>,
}

impl Default for HttpFamilies {
    fn default() -> Self {
        HttpFamilies {
            config_reads: Family::default(),
            responses: Family::default(),
            errors: Family::default(),
            seconds: Family::new_with_constructor(duration_histogram),
        }
    }
}

impl HttpFamilies {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "config_reads",
            "Handlers' reads of their [subscription.config] values, by subscription and result (found, missing)",
            self.config_reads.clone(),
        );
        registry.register(
            "http_responses",
            "Responses to handlers' outbound HTTP requests, by subscription, origin and status class",
            self.responses.clone(),
        );
        registry.register(
            "http_errors",
            "Handlers' outbound HTTP requests that got no response, by subscription, origin and kind (denied, timeout, connect, tls, body_too_large, memory, protocol)",
            self.errors.clone(),
        );
        registry.register(
            "http_request_seconds",
            "Time from a handler's outbound HTTP request to the end of its response body, by subscription and origin",
            self.seconds.clone(),
        );
    }
}

impl Metrics {
    /// Counts a response to an outbound request, and its time to the end of its body.
    pub fn http_response(&self, subscription: &str, origin: &str, status: u16, seconds: f64) {
        let class = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.http
            .responses
            .get_or_create(&ResponseLabels {
                subscription: subscription.to_owned(),
                origin: origin.to_owned(),
                class,
            })
            .inc();
        self.http
            .seconds
            .get_or_create(&OriginLabels {
                subscription: subscription.to_owned(),
                origin: origin.to_owned(),
            })
            .observe(seconds);
    }

    /// Counts a handler's read of a config value.
    pub fn config_read(&self, subscription: &str, found: bool) {
        let result = if found { "found" } else { "missing" };
        self.http
            .config_reads
            .get_or_create(&ConfigLabels {
                subscription: subscription.to_owned(),
                result,
            })
            .inc();
    }

    /// Counts an outbound request that got no (whole) response.
    pub fn http_error(&self, subscription: &str, origin: &str, kind: &'static str) {
        self.http
            .errors
            .get_or_create(&ErrorLabels {
                subscription: subscription.to_owned(),
                origin: origin.to_owned(),
                kind,
            })
            .inc();
    }
}
