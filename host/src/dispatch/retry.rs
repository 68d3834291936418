//! The retry policy: what becomes of a record the handler could not handle. Without a cap
//! (`max_attempts`) it is held, or after `retry-after` called again in place once the delay is
//! over ([`again`](super::again)); under one, a copy wrapped in an envelope is published for the
//! next attempt (at once, or once a `retry-after` delay is over), and after the last attempt the
//! record goes to the dead-letter stream. Reading side: a copy read back is unwrapped.

use std::time::Duration;
use tokio::time::Instant;

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
    /// Called again after `retry-after` without a cap: how long it waited before this call.
    pub waited: Duration,
}

/// A publish that waits: a `retry-after` under a cap (the copy is published once the delay is
/// over), or a copy or dead letter whose publish failed (tried again after a back-off). Until it
/// is out the record stays unsettled: the checkpoint waits in front of it, and a stop or a lost
/// lease before then delivers it again.
pub(super) struct Delayed {
    pub due: Instant,
    ticket: Ticket,
    record: Record,
    attempt: u32,
    origin: Origin,
    /// A dead letter (why the record's attempts ended), or a retry copy (`None`).
    letter: Option<String>,
    /// Publishes of it that failed so far.
    failures: u32,
}

/// How a publish ended.
enum Published {
    /// Out, under this sequence number; the record is settled.
    Done(String),
    /// It failed; the record is unsettled and waits for another try.
    Failed,
    /// A stop or a lost lease came first; the record is left for the shard's next reader.
    Interrupted,
}

/// The wait before the next try of a publish that failed `failures` times: 1 s, doubling, at
/// most 30 s.
fn publish_backoff(failures: u32) -> Duration {
    Duration::from_secs(1 << failures.saturating_sub(1).min(5)).min(Duration::from_secs(30))
}

impl Delayed {
    /// A publish of `record` not (yet) out, after `failures` failed tries.
    fn pending(
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
            self.publish_copy(policy, record, meta.ticket, meta.attempt, origin, 0)
                .await;
        }
    }

    /// Publishes the next attempt of a record and settles this one; if the copy cannot be
    /// published, it is tried again after a back-off (nothing is lost). A record too large to carry an
    /// envelope within Kinesis' record limit cannot be retried by a copy: its attempts end here
    /// and it is dead-lettered (as a reference), so a cap always ends a record.
    async fn publish_copy(
        &mut self,
        policy: &RetryPolicy,
        record: Record,
        ticket: Ticket,
        attempt: u32,
        origin: Origin,
        failures: u32,
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
            self.dead_letter(policy, record, ticket, attempt, header.origin, (reason, 0))
                .await;
            return;
        }
        let published = self
            .publish(&policy.retry_stream, data, &record, ticket, failures)
            .await;
        let pending = Delayed::pending(ticket, record, attempt, header.origin, None, failures);
        if let Some(record) = self.keep_unless_out(&published, pending)
            && let Published::Done(seq) = &published
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
    /// settles it; if that fails, it is tried again after a back-off. When the record and its envelope do not
    /// fit into one Kinesis record, the letter is a reference: the envelope alone, naming where
    /// the record is and how large it is.
    pub(super) async fn dead_letter(
        &mut self,
        policy: &RetryPolicy,
        record: Record,
        ticket: Ticket,
        attempt: u32,
        origin: Origin,
        (reason, failures): (String, u32),
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
        let published = self
            .publish(&policy.dead_letter, data, &record, ticket, failures)
            .await;
        let letter = Some(reason.clone());
        let pending = Delayed::pending(ticket, record, attempt, header.origin, letter, failures);
        if let Some(record) = self.keep_unless_out(&published, pending)
            && let Published::Done(seq) = &published
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

    /// Puts enveloped `data` into `stream` under the record's key and settles the record. A put
    /// that fails leaves the record unsettled (the caller tries again later); a stop or a lost
    /// lease ends the wait at once and leaves it to the shard's next reader (a put already on
    /// its way may land too: a duplicate copy, the documented cost of a stop).
    async fn publish(
        &mut self,
        stream: &str,
        data: Vec<u8>,
        record: &Record,
        ticket: Ticket,
        failures: u32,
    ) -> Published {
        let interrupts = self.interrupts.clone();
        let put = self.source.put(stream, &record.partition_key, data);
        let answer = tokio::select! {
            biased;
            _ = interrupts.wait() => return Published::Interrupted,
            answer = put => answer,
        };
        match answer {
            Ok(seq) => {
                self.tracker.settle(ticket, Outcome::Drop);
                Published::Done(seq)
            }
            Err(e) => {
                let w = self.worker;
                w.plan.metrics.contained(&w.plan.name, "publish-failed");
                // The first failure and then one in ten: an outage does not flood the log.
                if failures.is_multiple_of(10) {
                    tracing::error!(
                        sequence_number = %record.position(), failures = failures + 1,
                        "cannot publish to `{stream}`: {e}; the record waits (the checkpoint \
                         stays in front of it) and is published again in {:?}",
                        publish_backoff(failures + 1)
                    );
                }
                Published::Failed
            }
        }
    }

    /// After a publish: answers the record when it went out. Otherwise keeps it among the
    /// delayed ones: after a back-off when it failed; due at once when a stop, a lost lease or
    /// a handoff came first (the worker ends then, and the record stays unsettled for the next
    /// reader; kept so nothing waits for it as if it were out).
    fn keep_unless_out(&mut self, published: &Published, mut pending: Delayed) -> Option<Record> {
        match published {
            Published::Done(_) => return Some(pending.record),
            Published::Failed => {
                pending.failures += 1;
                pending.due = Instant::now() + publish_backoff(pending.failures);
            }
            Published::Interrupted => {}
        }
        self.delayed.push(pending);
        None
    }

    /// Publishes the copies and dead letters that are due (a retry-after delay is over, or a
    /// failed publish is to be tried again), one at a time in read order. After one fails, the
    /// rest of this turn wait with it (the stream is down: no point trying each for 30 s); after
    /// a stop or a lost lease, they stay unsettled and are delivered again by the next reader.
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
        let mut due = due.into_iter();
        while let Some(d) = due.next() {
            let waiting = self.delayed.len();
            if self.interrupts.now().is_some() {
                self.delayed.push(d);
                self.delayed.extend(due);
                return;
            }
            match d.letter {
                Some(reason) => {
                    let (record, ticket, origin) = (d.record, d.ticket, d.origin);
                    let letter = (reason, d.failures);
                    self.dead_letter(policy, record, ticket, d.attempt, origin, letter)
                        .await;
                }
                None => {
                    self.publish_copy(policy, d.record, d.ticket, d.attempt, d.origin, d.failures)
                        .await;
                }
            }
            // Put back after a failure (not an interruption, which is due at once): the rest
            // wait as long.
            if let Some(failed) = self.delayed.get(waiting).filter(|f| f.due > now) {
                let until = failed.due;
                self.delayed
                    .extend(due.map(|d| Delayed { due: until, ..d }));
                return;
            }
        }
    }

    /// Forgets the delayed copies a seek reads again (from `at` on).
    pub(super) fn forget_delayed_from(&mut self, at: &Position) {
        self.delayed.retain(|d| d.record.position() < *at);
    }
}
