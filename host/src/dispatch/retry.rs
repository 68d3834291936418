//! The retry policy: what becomes of a record the handler could not handle. Without a cap
//! (`max_attempts`) it is held; under one, a copy wrapped in an envelope is published for the
//! next attempt (at once, or once a `retry-after` delay is over), and after the last attempt the
//! record goes to the dead-letter stream. Reading side: a copy read back is unwrapped.

use std::time::{Duration, Instant};

use super::Run;
use crate::config::RetryPolicy;
use crate::envelope::{self, Header, Kind, Origin};
use crate::handler::CallError;
use crate::record::{Outcome, Position, Record};
use crate::settle::Ticket;
use crate::wasm::short_version;

/// A record as delivered to this subscription: its ticket in the shard's tracker, which
/// attempt this is, and where a retry copy was first read.
pub(super) struct Delivery {
    pub ticket: Ticket,
    /// 1 for a first delivery; a retry copy's number.
    pub attempt: u32,
    /// Where a retry copy was first read.
    pub origin: Option<Origin>,
}

/// A `retry-after` under a cap: the copy is published once the delay is over; until then the
/// record stays unsettled (a stop before that delivers it again).
pub(super) struct Delayed {
    pub due: Instant,
    ticket: Ticket,
    record: Record,
    attempt: u32,
    origin: Origin,
}

impl Delayed {
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
    /// Without a cap it is held; under a cap a copy is published for another attempt, or after
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
            self.tracker.settle(meta.ticket, outcome);
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
            self.dead_letter(policy, record, meta.ticket, meta.attempt, origin, reason)
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
            });
        } else {
            self.publish_copy(policy, record, meta.ticket, meta.attempt, origin)
                .await;
        }
    }

    /// Publishes the next attempt of a record and settles this one; if the copy cannot be
    /// published, the record is held instead (nothing is lost). A record too large to carry an
    /// envelope within Kinesis' record limit cannot be retried by a copy: its attempts end here
    /// and it is dead-lettered (as a reference), so a cap always ends a record.
    async fn publish_copy(
        &mut self,
        policy: &RetryPolicy,
        record: Record,
        ticket: Ticket,
        attempt: u32,
        origin: Origin,
    ) {
        let w = self.worker;
        let header = Header {
            kind: Kind::Retry,
            subscription: w.plan.name.to_string(),
            attempt: attempt + 1,
            origin,
            reason: None,
            handler_version: None,
            data_omitted: None,
        };
        let data = envelope::wrap(w.plan.envelopes.current(), &header, &record.data);
        if !envelope::fits(&data, &record.partition_key) {
            let reason = format!(
                "a record of {} bytes is too large for a retry copy (with its envelope it passes \
                 Kinesis' {} byte limit); attempt {attempt} of {} was its last",
                record.data.len(),
                envelope::MAX_RECORD_BYTES,
                policy.max_attempts
            );
            w.plan.metrics.contained(&w.plan.name, "oversized-copy");
            self.dead_letter(policy, record, ticket, attempt, header.origin, reason)
                .await;
            return;
        }
        if let Some(seq) = self
            .publish(&policy.retry_stream, data, &record, ticket)
            .await
        {
            w.plan.metrics.retry_copy(&w.plan.name);
            tracing::info!(
                sequence_number = %record.position(), partition_key = %record.partition_key,
                retry_stream = %policy.retry_stream, copy = %seq,
                "retry: attempt {} of {} published", attempt + 1, policy.max_attempts
            );
        }
    }

    /// Publishes a record that used up its attempts to the dead-letter stream, with why, and
    /// settles it; if that fails, the record is held. When the record and its envelope do not
    /// fit into one Kinesis record, the letter is a reference: the envelope alone, naming where
    /// the record is and how large it is.
    pub(super) async fn dead_letter(
        &mut self,
        policy: &RetryPolicy,
        record: Record,
        ticket: Ticket,
        attempt: u32,
        origin: Origin,
        reason: String,
    ) {
        let w = self.worker;
        let mut header = Header {
            kind: Kind::DeadLetter,
            subscription: w.plan.name.to_string(),
            attempt,
            origin,
            reason: Some(envelope::short_reason(&reason)),
            handler_version: Some(self.version.to_string()),
            data_omitted: None,
        };
        let mut data = envelope::wrap(w.plan.envelopes.current(), &header, &record.data);
        if !envelope::fits(&data, &record.partition_key) {
            header.data_omitted = Some(record.data.len() as u64);
            data = envelope::wrap(w.plan.envelopes.current(), &header, &[]);
            w.plan
                .metrics
                .contained(&w.plan.name, "dead-letter-reference");
        }
        let reference = header.data_omitted.is_some();
        if let Some(seq) = self
            .publish(&policy.dead_letter, data, &record, ticket)
            .await
        {
            w.plan.metrics.dead_letter(&w.plan.name);
            tracing::warn!(
                sequence_number = %record.position(), partition_key = %record.partition_key,
                dead_letter = %policy.dead_letter, letter = %seq, attempts = attempt, reference,
                "dead-lettered{}: {reason}",
                if reference { " (a reference: the record is too large to carry)" } else { "" }
            );
        }
    }

    /// Puts enveloped `data` into `stream` under the record's key and settles the record; when
    /// the put fails (after the SDK's retries) the record is held instead. Answers the new
    /// sequence number.
    async fn publish(
        &mut self,
        stream: &str,
        data: Vec<u8>,
        record: &Record,
        ticket: Ticket,
    ) -> Option<String> {
        match self.source.put(stream, &record.partition_key, data).await {
            Ok(seq) => {
                self.tracker.settle(ticket, Outcome::Drop);
                Some(seq)
            }
            Err(e) => {
                self.tracker.settle(ticket, Outcome::Retry);
                tracing::error!(
                    sequence_number = %record.position(),
                    "cannot publish to `{stream}`: {e}; the record is held"
                );
                None
            }
        }
    }

    /// Publishes the copies whose retry-after delay is over.
    pub(super) async fn flush_delayed(&mut self) {
        let now = Instant::now();
        // Copies wait only under a cap.
        let Some(policy) = &self.worker.plan.retry else {
            return;
        };
        if !self.delayed.iter().any(|d| d.due <= now) {
            return;
        }
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|d| d.due <= now);
        self.delayed = waiting;
        for d in due {
            self.publish_copy(policy, d.record, d.ticket, d.attempt, d.origin)
                .await;
        }
    }

    /// When the next delayed copy is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.delayed.iter().map(|d| d.due).min()
    }

    /// Forgets the delayed copies a seek reads again (from `at` on).
    pub(super) fn forget_delayed_from(&mut self, at: &Position) {
        self.delayed.retain(|d| d.record.position() < *at);
    }
}
