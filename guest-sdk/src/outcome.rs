//! The answers a handler gives.

use std::time::Duration;

use crate::__private::wit;

/// What becomes of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Handled: the shard's checkpoint may move past the record.
    Ack,
    /// Retired without handling, because it can never succeed: settles like [`Outcome::Ack`].
    Drop,
    /// Not handled now. Without a retry cap on the subscription the record is held: the reader
    /// goes on and the shard's checkpoint stops in front of it. Under a cap the host publishes
    /// a copy for another attempt (and, past the cap, to the dead-letter stream).
    Retry,
    /// As [`Outcome::Retry`], after at least this many milliseconds.
    RetryAfter(u64),
}

impl Outcome {
    /// [`Outcome::RetryAfter`] with this delay, in whole milliseconds (saturating).
    pub fn retry_after(delay: Duration) -> Self {
        Self::RetryAfter(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX))
    }

    /// Whether the outcome settles the record ([`Outcome::Ack`] or [`Outcome::Drop`]).
    pub fn settles(self) -> bool {
        matches!(self, Self::Ack | Self::Drop)
    }

    pub(crate) fn into_wit(self) -> wit::Outcome {
        match self {
            Self::Ack => wit::Outcome::Ack,
            Self::Drop => wit::Outcome::Drop,
            Self::Retry => wit::Outcome::Retry,
            Self::RetryAfter(ms) => wit::Outcome::RetryAfter(ms),
        }
    }
}

/// What becomes of a batch: one outcome for every record, or one per record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BatchOutcome {
    /// This outcome for every record of the batch.
    All(Outcome),
    /// One outcome per record, in the order the records were given: exactly as many as the
    /// batch has records.
    Each(Vec<Outcome>),
}

impl BatchOutcome {
    pub(crate) fn into_wit(self) -> wit::BatchOutcome {
        match self {
            Self::All(o) => wit::BatchOutcome::All(o.into_wit()),
            Self::Each(v) => {
                wit::BatchOutcome::Each(v.into_iter().map(Outcome::into_wit).collect())
            }
        }
    }
}

impl From<Outcome> for BatchOutcome {
    fn from(outcome: Outcome) -> Self {
        Self::All(outcome)
    }
}

impl From<Vec<Outcome>> for BatchOutcome {
    fn from(outcomes: Vec<Outcome>) -> Self {
        Self::Each(outcomes)
    }
}

impl FromIterator<Outcome> for BatchOutcome {
    fn from_iter<I: IntoIterator<Item = Outcome>>(iter: I) -> Self {
        Self::Each(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(
            Outcome::retry_after(Duration::from_millis(1500)),
            Outcome::RetryAfter(1500)
        );
        assert_eq!(
            Outcome::retry_after(Duration::MAX),
            Outcome::RetryAfter(u64::MAX)
        );
        assert!(Outcome::Drop.settles() && !Outcome::Retry.settles());
        let each: BatchOutcome = [Outcome::Ack, Outcome::Retry].into_iter().collect();
        assert_eq!(
            each.into_wit(),
            wit::BatchOutcome::Each(vec![wit::Outcome::Ack, wit::Outcome::Retry])
        );
        assert_eq!(
            BatchOutcome::from(Outcome::RetryAfter(9)).into_wit(),
            wit::BatchOutcome::All(wit::Outcome::RetryAfter(9))
        );
    }
}
