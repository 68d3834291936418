//! Reading the records counters back: what the status page's history samples.

use super::{Metrics, RecordLabels, ShardLabels, SubscriptionLabels};

/// Records answered per outcome, summed over some shards of one subscription.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OutcomeTotals {
    pub ack: u64,
    pub drop: u64,
    pub retry: u64,
    pub retry_after: u64,
}

impl OutcomeTotals {
    /// What was counted between `earlier` and `self` (a counter never goes down; a shard no
    /// longer counted here contributes nothing rather than a negative).
    pub fn since(&self, earlier: &OutcomeTotals) -> OutcomeTotals {
        OutcomeTotals {
            ack: self.ack.saturating_sub(earlier.ack),
            drop: self.drop.saturating_sub(earlier.drop),
            retry: self.retry.saturating_sub(earlier.retry),
            retry_after: self.retry_after.saturating_sub(earlier.retry_after),
        }
    }
}

impl Metrics {
    /// `records_total` of `subscription`, summed over `shards`, per outcome.
    pub fn outcome_totals<'a>(
        &self,
        subscription: &str,
        shards: impl IntoIterator<Item = &'a str>,
    ) -> OutcomeTotals {
        let mut totals = OutcomeTotals::default();
        for shard in shards {
            for (outcome, total) in [
                ("ack", &mut totals.ack),
                ("drop", &mut totals.drop),
                ("retry", &mut totals.retry),
                ("retry-after", &mut totals.retry_after),
            ] {
                let labels = RecordLabels {
                    subscription: subscription.to_owned(),
                    shard: shard.to_owned(),
                    outcome,
                };
                if let Some(counter) = self.records.get(&labels) {
                    *total += counter.get();
                }
            }
        }
        totals
    }

    /// `records_failed_total` of `subscription`, summed over `shards`: records whose call
    /// failed (counted as retry in [`Metrics::outcome_totals`] too).
    pub fn failed_records<'a>(
        &self,
        subscription: &str,
        shards: impl IntoIterator<Item = &'a str>,
    ) -> u64 {
        shards
            .into_iter()
            .filter_map(|shard| {
                let labels = ShardLabels {
                    subscription: subscription.to_owned(),
                    shard: shard.to_owned(),
                };
                self.records_failed.get(&labels).map(|c| c.get())
            })
            .sum()
    }

    /// The retry copies and dead letters `subscription` published.
    pub fn copies_and_dead_letters(&self, subscription: &str) -> (u64, u64) {
        let labels = SubscriptionLabels {
            subscription: subscription.to_owned(),
        };
        let copies = self.retry_copies.get(&labels).map_or(0, |c| c.get());
        let letters = self.dead_letters.get(&labels).map_or(0, |c| c.get());
        (copies, letters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;

    #[test]
    fn totals_sum_the_shards_asked_for_per_outcome() {
        let m = Metrics::new();
        m.shard("ship", "a")
            .outcomes(&[Outcome::Ack, Outcome::Ack, Outcome::Drop]);
        m.shard("ship", "b")
            .outcomes(&[Outcome::Ack, Outcome::Retry]);
        m.shard("other", "a").outcomes(&[Outcome::Ack]);
        let t = m.outcome_totals("ship", ["a", "b", "never-read"]);
        assert_eq!(
            t,
            OutcomeTotals {
                ack: 3,
                drop: 1,
                retry: 1,
                retry_after: 0
            }
        );
        let later = m.outcome_totals("ship", ["b"]);
        assert_eq!(later.since(&t).ack, 0, "never negative");
    }

    #[test]
    fn failed_records_count_as_retry_and_as_failed_and_copies_and_letters_per_subscription() {
        let m = Metrics::new();
        m.shard("ship", "a").failed(2);
        m.shard("ship", "b").failed(1);
        m.shard("other", "a").failed(5);
        m.retry_copy("ship");
        m.dead_letter("ship");
        m.dead_letter("ship");
        assert_eq!(m.outcome_totals("ship", ["a", "b"]).retry, 3);
        assert_eq!(m.failed_records("ship", ["a", "b", "never-read"]), 3);
        assert_eq!(m.copies_and_dead_letters("ship"), (1, 2));
        assert_eq!(m.copies_and_dead_letters("other"), (0, 0));
    }
}
