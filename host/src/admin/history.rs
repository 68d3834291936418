//! The recent past the status page charts (`GET /status/history`): every [`SAMPLE_EVERY`], per
//! subscription, the records answered per outcome (from `records_total`) and the largest lag of
//! the shards it reads; and the errors seen lately (a shard's `last_error`, a refused deploy, a
//! failed task), each noted once when it appears.
//!
//! All of it is in memory and bounded: [`KEEP`] samples per subscription (15 minutes) and
//! [`KEEP_ERRORS`] errors. The sampler runs beside the admin API's accept loop and stops with
//! it; a host restarted starts with no history.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::AdminState;
use crate::metrics::OutcomeTotals;

/// How often the sampler looks.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Samples kept per subscription: 15 minutes of them.
pub const KEEP: usize = 180;
/// Recent errors kept, newest last.
pub const KEEP_ERRORS: usize = 20;

/// `GET /status/history`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryReport {
    /// How far apart the samples are meant to be, in milliseconds.
    pub every_ms: u64,
    /// Each subscription, in config order.
    pub subscriptions: Vec<SubscriptionHistory>,
    /// The errors seen lately, oldest first.
    pub errors: Vec<RecentError>,
}

/// One subscription's points, oldest first: one per interval between two samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionHistory {
    pub name: String,
    pub points: Vec<Point>,
}

/// What happened between the sample before and the one taken at `at_ms`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Unix time in milliseconds.
    pub at_ms: u64,
    /// Records answered per second over the interval, by outcome.
    pub per_second: Rates,
    /// The largest `millis_behind_latest` of the shards read here at `at_ms` (none known: null).
    pub max_lag_ms: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    pub ack: f64,
    pub drop: f64,
    pub retry: f64,
    pub retry_after: f64,
}

/// An error as it appeared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentError {
    /// Unix time in milliseconds of the sample that first saw it.
    pub at_ms: u64,
    pub subscription: String,
    /// The shard it is about; none for a refused deploy or a failed coordinator.
    pub shard: Option<String>,
    pub error: String,
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    at_ms: u64,
    totals: OutcomeTotals,
    max_lag_ms: Option<u64>,
}

/// The samples and errors, shared by the sampler and the route.
#[derive(Debug, Default)]
pub struct History {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Each subscription's samples, in the order they were first recorded.
    samples: Vec<(String, VecDeque<Sample>)>,
    errors: VecDeque<RecentError>,
    /// The last error text seen for each (subscription, where): an error is noted when it
    /// differs from this, so one that stays is noted once.
    seen: HashMap<(String, Option<String>), String>,
}

impl History {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one sample of `subscription`, dropping its oldest past [`KEEP`].
    pub fn record(
        &self,
        subscription: &str,
        at_ms: u64,
        totals: OutcomeTotals,
        max_lag_ms: Option<u64>,
    ) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let index = match inner.samples.iter().position(|(s, _)| s == subscription) {
            Some(i) => i,
            None => {
                inner
                    .samples
                    .push((subscription.to_owned(), VecDeque::with_capacity(KEEP)));
                inner.samples.len() - 1
            }
        };
        let ring = &mut inner.samples[index].1;
        if ring.len() == KEEP {
            ring.pop_front();
        }
        ring.push_back(Sample {
            at_ms,
            totals,
            max_lag_ms,
        });
    }

    /// Notes what is wrong now at (`subscription`, `shard`): `None` when nothing is. A text
    /// different from the last one seen there is a new error, kept (the oldest dropped past
    /// [`KEEP_ERRORS`]).
    pub fn note(&self, at_ms: u64, subscription: &str, shard: Option<&str>, error: Option<&str>) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let key = (subscription.to_owned(), shard.map(str::to_owned));
        let Some(error) = error else {
            inner.seen.remove(&key);
            return;
        };
        if inner.seen.get(&key).is_some_and(|last| last == error) {
            return;
        }
        inner.seen.insert(key, error.to_owned());
        if inner.errors.len() == KEEP_ERRORS {
            inner.errors.pop_front();
        }
        inner.errors.push_back(RecentError {
            at_ms,
            subscription: subscription.to_owned(),
            shard: shard.map(str::to_owned),
            error: error.to_owned(),
        });
    }

    /// The points and errors, as `GET /status/history` answers them.
    pub fn report(&self) -> HistoryReport {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        HistoryReport {
            every_ms: u64::try_from(SAMPLE_EVERY.as_millis()).unwrap_or(u64::MAX),
            subscriptions: inner
                .samples
                .iter()
                .map(|(name, ring)| SubscriptionHistory {
                    name: name.clone(),
                    points: points(ring),
                })
                .collect(),
            errors: inner.errors.iter().cloned().collect(),
        }
    }

    /// Takes one sample of every subscription of the host and notes its errors.
    pub fn sample(&self, state: &AdminState, at_ms: u64) {
        let handlers = state.deployer.handlers();
        let mut shards: BTreeMap<&str, Vec<(String, crate::status::ShardStatus)>> = BTreeMap::new();
        let snapshot = state.status.snapshot();
        for (sub, shard, status) in &snapshot {
            shards
                .entry(sub.as_str())
                .or_default()
                .push((shard.clone(), status.clone()));
        }
        for s in &state.subscriptions {
            let mine = shards.get(s.name.as_str()).map_or(&[][..], Vec::as_slice);
            let totals = state
                .metrics
                .outcome_totals(&s.name, mine.iter().map(|(id, _)| id.as_str()));
            let max_lag_ms = mine
                .iter()
                .filter(|(_, st)| st.state.holds_lease())
                .filter_map(|(_, st)| st.millis_behind_latest)
                .max();
            self.record(&s.name, at_ms, totals, max_lag_ms);
            for (id, st) in mine {
                self.note(at_ms, &s.name, Some(id), st.last_error.as_deref());
            }
            let refused = handlers
                .get(&s.name)
                .and_then(|h| h.last_deploy_error.as_deref());
            self.note(
                at_ms,
                &s.name,
                None,
                refused.map(|e| format!("deploy refused: {e}")).as_deref(),
            );
        }
        for f in state.status.failures() {
            let shard = f.shard.as_deref().or(Some("(task)"));
            self.note(at_ms, &f.subscription, shard, Some(&f.reason));
        }
    }
}

/// One point per pair of consecutive samples.
fn points(ring: &VecDeque<Sample>) -> Vec<Point> {
    ring.iter()
        .zip(ring.iter().skip(1))
        .map(|(before, after)| {
            let secs = after.at_ms.saturating_sub(before.at_ms).max(1) as f64 / 1000.0;
            let d = after.totals.since(&before.totals);
            Point {
                at_ms: after.at_ms,
                per_second: Rates {
                    ack: d.ack as f64 / secs,
                    drop: d.drop as f64 / secs,
                    retry: d.retry as f64 / secs,
                    retry_after: d.retry_after as f64 / secs,
                },
                max_lag_ms: after.max_lag_ms,
            }
        })
        .collect()
}

/// Samples every [`SAMPLE_EVERY`] (the first at once) until `stop` fires.
pub async fn run(
    history: std::sync::Arc<History>,
    state: std::sync::Arc<AdminState>,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => history.sample(&state, crate::lease::now_ms()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(ack: u64, drop: u64) -> OutcomeTotals {
        OutcomeTotals {
            ack,
            drop,
            ..Default::default()
        }
    }

    #[test]
    fn a_point_is_the_rate_between_two_samples() {
        let h = History::new();
        h.record("ship", 10_000, totals(0, 0), None);
        assert!(
            h.report().subscriptions[0].points.is_empty(),
            "one sample: no rate yet"
        );
        h.record("ship", 15_000, totals(50, 10), Some(1200));
        h.record("ship", 20_000, totals(50, 10), Some(0));
        let r = h.report();
        let points = &r.subscriptions[0].points;
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].at_ms, 15_000);
        assert_eq!(points[0].per_second.ack, 10.0);
        assert_eq!(points[0].per_second.drop, 2.0);
        assert_eq!(points[0].max_lag_ms, Some(1200));
        assert_eq!(points[1].per_second.ack, 0.0);
        assert_eq!(r.every_ms, 5000);
    }

    #[test]
    fn samples_are_kept_for_fifteen_minutes_and_no_more() {
        let h = History::new();
        for i in 0..(KEEP as u64 + 50) {
            h.record("ship", i * 5000, totals(i, 0), None);
        }
        let r = h.report();
        let points = &r.subscriptions[0].points;
        assert_eq!(points.len(), KEEP - 1);
        assert_eq!(points.last().unwrap().at_ms, (KEEP as u64 + 49) * 5000);
        assert_eq!(KEEP as u64 * SAMPLE_EVERY.as_secs(), 15 * 60);
    }

    #[test]
    fn an_error_is_noted_once_while_it_stays_and_again_when_it_returns() {
        let h = History::new();
        h.note(1, "ship", Some("s0"), Some("boom"));
        h.note(2, "ship", Some("s0"), Some("boom"));
        h.note(3, "ship", Some("s1"), Some("boom"));
        h.note(4, "ship", Some("s0"), None);
        h.note(5, "ship", Some("s0"), Some("boom"));
        let at: Vec<u64> = h.report().errors.iter().map(|e| e.at_ms).collect();
        assert_eq!(at, [1, 3, 5]);
        for i in 0..100 {
            h.note(10 + i, "ship", None, Some(&format!("refused {i}")));
        }
        let errors = h.report().errors;
        assert_eq!(errors.len(), KEEP_ERRORS);
        assert_eq!(errors.last().unwrap().error, "refused 99");
    }
}
