//! Whether a fan-out subscription's shard ended, asked of GetRecords: kinesis-mock never ends a
//! subscription at the end of a closed shard (it sends empty events forever), so an idle
//! subscription asks, less and less often, whether GetRecords after its continuation answers
//! no records and no next iterator (the rule polling ends a shard by). The question runs beside
//! the subscription's events ([`Asking`]), never in their way.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::api::{IteratorAt, KinesisApi};
use crate::source::Call;

/// An idle subscription first asks whether its shard ended this long after its last records;
/// the wait doubles up to [`PROBE_MAX`].
const PROBE_FIRST: Duration = Duration::from_secs(2);
const PROBE_MAX: Duration = Duration::from_secs(30);

/// The question whether the shard ended, in flight beside the events.
pub(super) type Asking = Pin<Box<dyn Future<Output = bool> + Send>>;

/// The answer of the question in flight; never, when none is.
pub(super) async fn answer(asking: &mut Option<Asking>) -> bool {
    match asking {
        Some(question) => question.await,
        None => std::future::pending().await,
    }
}

/// Who asks whether a shard ended, and about which.
pub(super) struct Asker {
    pub api: Arc<dyn KinesisApi>,
    pub stream: String,
    pub shard: String,
    pub call: Call,
}

/// Whether the shard is closed and read to its end after `continuation`: GetRecords there
/// answers no records and no next iterator. A failed question is "not known yet".
pub(super) async fn closed_and_read(asker: Asker, continuation: String) -> bool {
    let at = IteratorAt::AfterSequence(continuation);
    let iterator = asker
        .api
        .get_shard_iterator(&asker.stream, &asker.shard, &at)
        .await;
    let Some(iterator) = iterator.ok().flatten() else {
        return false;
    };
    match asker.api.get_records(&iterator, 1).await {
        Ok(out) => out.records.is_empty() && out.next_iterator.is_none(),
        Err(e) => {
            tracing::debug!(error = %e.failed(asker.call), "could not ask whether the shard ended");
            false
        }
    }
}

/// When an idle subscription asks whether its shard ended.
#[derive(Default)]
pub(super) struct EndProbe {
    next: Option<Instant>,
    every: Duration,
}

impl EndProbe {
    /// Records came: the shard is not at its end.
    pub fn records(&mut self) {
        self.next = None;
    }

    /// Whether to ask now, after an idle event at `now`.
    pub fn due(&mut self, now: Instant) -> bool {
        let Some(next) = self.next else {
            self.every = PROBE_FIRST;
            self.next = Some(now + PROBE_FIRST);
            return false;
        };
        if now < next {
            return false;
        }
        self.every = (self.every * 2).min(PROBE_MAX);
        self.next = Some(now + self.every);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_shard_is_asked_about_its_end_less_and_less_often_until_records_come() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut probe = EndProbe::default();
        assert!(
            !probe.due(at(0)),
            "the first idle event only starts the wait"
        );
        assert!(!probe.due(at(1)));
        assert!(probe.due(at(2)));
        assert!(!probe.due(at(5)));
        assert!(probe.due(at(6)), "4 s after the first question");
        assert!(probe.due(at(14)), "then 8 s");
        probe.records();
        assert!(!probe.due(at(15)));
        assert!(probe.due(at(17)), "records start the waits over");
    }
}
