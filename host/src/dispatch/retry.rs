//! The retry policy: what becomes of a record the handler could not handle. Without a cap
//! (`max_attempts`) it is held, or after `retry-after` called again in place once the delay is
//! over ([`again`](super::again)); under one, a copy wrapped in an envelope is published for the
//! next attempt (with the batch's other copies, or once a `retry-after` delay is over), and after
//! the last attempt the record goes to the dead-letter stream. Publishing them is
//! [`outbox`](super::outbox). Reading side: a copy read back is unwrapped.

use std::time::Duration;
use tokio::time::Instant;

use super::Run;
use crate::config::RetryPolicy;
use crate::envelope::Origin;
use crate::handler::CallError;
use crate::record::{Outcome, Position, Record};
use crate::settle::Ticket;
use crate::version::short_version;

/// A record as delivered to this subscription: its ticket in the shard's tracker, which
/// attempt this is, and where a retry copy was first read.
pub(super) struct Delivery {
    pub ticket: Ticket,
    /// 1 for a first delivery; a retry copy's number.
    pub attempt: u32,
    /// Where a retry copy was first read.
    pub origin: Option<Origin>,
    /// Called again after `retry-after` without a cap: how long it waited before this call.
    pub waited: Duration,
}

/// A publish that waits: a `retry-after` under a cap (the copy is published once the delay is
/// over), or a copy or dead letter whose publish failed (tried again after a back-off). Until it
/// is out the record stays unsettled: the checkpoint waits in front of it, and a stop or a lost
/// lease before then delivers it again.
pub(super) struct Delayed {
    pub due: Instant,
    pub ticket: Ticket,
    pub record: Record,
    pub attempt: u32,
    pub origin: Origin,
    /// A dead letter (why the record's attempts ended), or a retry copy (`None`).
    pub letter: Option<String>,
    /// Publishes of it that failed so far.
    pub failures: u32,
}

/// The wait before the next try of a publish that failed `failures` times: 1 s, doubling, at
/// most 30 s.
pub(super) fn publish_backoff(failures: u32) -> Duration {
    Duration::from_secs(1 << failures.saturating_sub(1).min(5)).min(Duration::from_secs(30))
}

impl Delayed {
    /// A publish of `record` due now, after `failures` failed tries.
    pub fn pending(
        ticket: Ticket,
        record: Record,
        attempt: u32,
        origin: Origin,
        letter: Option<String>,
        failures: u32,
    ) -> Delayed {
        Delayed {
            due: Instant::now(),
            ticket,
            record,
            attempt,
            origin,
            letter,
            failures,
        }
    }

    /// What it holds in memory (its data and key).
    pub fn bytes(&self) -> u64 {
        Self::record_bytes(&self.record)
    }

    /// What a record holds in memory, as the in-flight bound counts it (its data and key).
    pub fn record_bytes(record: &Record) -> u64 {
        (record.data.len() + record.partition_key.len()) as u64
    }
}

/// The longest retry-after delay honoured under a cap (one hour); longer ones wait this long.
const MAX_RETRY_AFTER_MS: u64 = 3_600_000;

impl Run<'_> {
    /// A record the handler could not handle (it answered retry, or its call failed on it).
    /// Without a cap it is held, or called again in place after a `retry-after` delay; under a
    /// cap a copy is published for another attempt, or after
    /// the last attempt the record goes to the dead-letter stream.
    pub(super) async fn retry(
        &mut self,
        record: Record,
        meta: &Delivery,
        outcome: Outcome,
        error: Option<CallError>,
    ) {
        let w = self.worker;
        self.tap(&record, outcome);
        let Some(policy) = &w.plan.retry else {
            if let (None, Outcome::RetryAfter(ms)) = (&error, outcome) {
                self.wait_in_place(record, meta, ms);
                return;
            }
            self.tracker
                .hold(meta.ticket, outcome, &record.partition_key);
            tracing::warn!(
                sequence_number = %record.position(), partition_key = %record.partition_key,
                handler = short_version(&self.version),
                "{outcome}: record held (no retry cap); the shard's checkpoint waits in front of it"
            );
            return;
        };
        let origin = meta.origin.clone().unwrap_or_else(|| Origin {
            stream: w.plan.stream.to_string(),
            shard_id: w.ctx.shard_id.to_string(),
            sequence_number: record.sequence_number.clone(),
            sub_sequence_number: record.sub_sequence_number,
            partition_key: record.partition_key.to_string(),
        });
        if meta.attempt >= policy.max_attempts {
            let reason = match (&error, outcome) {
                (Some(e), _) => e.to_string(),
                (None, Outcome::RetryAfter(ms)) => format!("handler answered retry-after({ms} ms)"),
                _ => "handler answered retry".to_owned(),
            };
            let attempt = meta.attempt;
            self.dead_letter(policy, record, meta.ticket, attempt, origin, (reason, 0))
                .await;
        } else if let (None, Outcome::RetryAfter(ms)) = (&error, outcome)
            && ms > 0
        {
            self.delayed.push(Delayed {
                due: Instant::now() + Duration::from_millis(ms.min(MAX_RETRY_AFTER_MS)),
                ticket: meta.ticket,
                record,
                attempt: meta.attempt,
                origin,
                letter: None,
                failures: 0,
            });
        } else {
            self.queue_copy(record, meta.ticket, meta.attempt, origin);
        }
    }

    /// Queues the next attempt of a record: its copy goes out with the batch's other copies and
    /// dead letters once the batch is resolved ([`outbox`](super::outbox)), and then this one
    /// is settled.
    fn queue_copy(&mut self, record: Record, ticket: Ticket, attempt: u32, origin: Origin) {
        let copy = Delayed::pending(ticket, record, attempt, origin, None, 0);
        self.delayed.push(copy);
    }

    /// Queues a record that used up its attempts for the dead-letter stream, with why: the
    /// letter goes out with the batch's copies and other letters ([`outbox`](super::outbox)),
    /// and then the record is settled.
    pub(super) async fn dead_letter(
        &mut self,
        policy: &RetryPolicy,
        record: Record,
        ticket: Ticket,
        attempt: u32,
        origin: Origin,
        (reason, failures): (String, u32),
    ) {
        tracing::debug!(
            sequence_number = %record.position(), dead_letter = %policy.dead_letter,
            "the record's attempts ended: {reason}"
        );
        let letter = Delayed::pending(ticket, record, attempt, origin, Some(reason), failures);
        self.delayed.push(letter);
    }

    /// Forgets the delayed copies a seek reads again (from `at` on).
    pub(super) fn forget_delayed_from(&mut self, at: &Position) {
        self.delayed.retain(|d| d.record.position() < *at);
    }
}
