//! One read batch: the handler version it runs on, retry copies unwrapped, records split into
//! lanes by partition key, the lanes run (side by side when there are several), then every
//! record settled by its answer under the subscription's retry policy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::lane::{Answer, Lane, LaneEnv};
use super::{Run, Settled};
use crate::envelope::{self, Header, Kind, Origin};
use crate::handler::CallError;
use crate::record::{BatchInfo, Outcome, Position, Record};
use crate::settle::Ticket;
use crate::wasm::short_version;

/// What the batch keeps about each record while the lanes run.
pub(super) struct Meta {
    ticket: Ticket,
    /// 1 for a first delivery; a retry copy's number.
    attempt: u32,
    /// Where a retry copy was first read.
    origin: Option<Origin>,
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

/// What a read record is to this subscription.
enum Copy {
    /// An ordinary record (or one that only looks like a copy: handled as it is).
    No,
    /// A retry copy this fleet made for another subscription reading the same stream.
    Foreign,
    /// A retry copy of ours: its header, and where the original data starts.
    Ours(Box<Header>, usize),
}

/// The longest retry-after delay honoured under a cap (one hour); longer ones wait this long.
const MAX_RETRY_AFTER_MS: u64 = 3_600_000;

/// The lane of a partition key (FNV-1a): one key always goes to the same lane.
fn lane_of(key: &str, lanes: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % lanes as u64) as usize
}

impl Run<'_> {
    /// Hands one read batch to the handler and settles every record. The whole batch runs on
    /// the version current when it starts; a swap takes effect at the next one.
    pub(super) async fn dispatch(&mut self, info: BatchInfo, records: Vec<Record>) {
        let w = self.worker;
        if w.plan.handler.generation() != self.generation {
            let (generation, factory) = w.plan.handler.current();
            tracing::info!(
                subscription = %w.plan.name, shard = %w.ctx.shard_id,
                from = short_version(&self.factory.version()),
                to = short_version(&factory.version()),
                "handler swapped; this shard switches at this batch"
            );
            self.generation = generation;
            self.factory = factory;
            self.version = self.factory.version().into();
            // In-flight work of the old version is done (batches run one at a time).
            self.handlers.iter_mut().for_each(|h| *h = None);
            self.env = None;
        }
        let n_lanes = self.handlers.len();
        let per_lane = records.len().div_ceil(n_lanes);
        let mut lanes: Vec<Lane> = self
            .handlers
            .iter_mut()
            .map(|h| Lane::new(h.take(), per_lane))
            .collect();
        if let (Some(delivered), Some(first), Some(last)) =
            (&w.ctx.delivered, records.first(), records.last())
        {
            delivered.extend(first, last);
        }
        let mut metas = Vec::with_capacity(records.len());
        for mut record in records {
            let ticket = self.tracker.deliver(record.position());
            let (attempt, origin) = match self.copy_of(&record) {
                Copy::Foreign => {
                    // Another subscription's retry copy on a shared stream: not ours to handle.
                    self.tracker.settle(ticket, Outcome::Drop);
                    continue;
                }
                Copy::Ours(h, at) => {
                    record.data.drain(..at);
                    (h.attempt.max(1), Some(h.origin))
                }
                Copy::No => (1, None),
            };
            let lane = if n_lanes == 1 {
                &mut lanes[0]
            } else {
                let lane = &mut lanes[lane_of(&record.partition_key, n_lanes)];
                // Where to put its answer back (one lane answers in read order already).
                lane.indices.push(metas.len());
                lane
            };
            lane.records.push(record);
            lane.attempts.push(attempt);
            metas.push(Meta {
                ticket,
                attempt,
                origin,
            });
        }
        if self.env.is_none() {
            self.env = Some(Arc::new(self.lane_env()));
        }
        let env = self.env.clone().expect("made above");
        let done: Vec<Lane> = if n_lanes == 1 {
            let lane = lanes.pop().expect("one lane");
            vec![lane.run(&env, &info).await]
        } else {
            // Lanes run side by side, on other threads too; each has its own instance.
            let info = Arc::new(info);
            let running: Vec<_> = lanes
                .into_iter()
                .map(|lane| {
                    let (env, info) = (env.clone(), info.clone());
                    tokio::spawn(async move { lane.run(&env, &info).await })
                })
                .collect();
            let mut done = Vec::with_capacity(running.len());
            for lane in running {
                match lane.await {
                    Ok(lane) => done.push(lane),
                    // A bug in the host, not the handler (a guest's trap is an answer): the
                    // worker fails as a whole and the coordinator reports it.
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(e) => panic!("a lane task was cancelled: {e}"),
                }
            }
            done
        };
        let mut done = done;
        let mut seek: Option<Position> = None;
        for (k, lane) in done.iter_mut().enumerate() {
            self.handlers[k] = lane.handler.take();
            if let Some(at) = lane.seek.take() {
                seek = Some(match seek {
                    Some(s) if s < at => s,
                    _ => at,
                });
            }
        }
        // Records before the seek target that no call answered (a lane stopped at its seek,
        // or was interrupted) are read again too: the seek moves back to the first of them.
        if let Some(at) = &seek
            && let Some(first) = done
                .iter()
                .flat_map(|l| l.records.iter().zip(&l.answers))
                .filter(|(r, a)| matches!(a, Answer::Unanswered) && r.position() < *at)
                .map(|(r, _)| r.position())
                .min()
        {
            seek = Some(first);
        }
        // Settle in read order.
        let mut error = None;
        if n_lanes == 1 {
            let lane = done.pop().expect("one lane");
            for ((meta, record), answer) in metas.iter().zip(lane.records).zip(lane.answers) {
                self.settle_one(record, meta, answer, seek.as_ref(), &mut error)
                    .await;
            }
        } else {
            let mut answered: Vec<Option<(Record, Answer)>> =
                (0..metas.len()).map(|_| None).collect();
            for lane in done {
                for ((i, record), answer) in
                    lane.indices.into_iter().zip(lane.records).zip(lane.answers)
                {
                    answered[i] = Some((record, answer));
                }
            }
            for (meta, slot) in metas.iter().zip(answered) {
                let (record, answer) = slot.expect("every record was in a lane");
                self.settle_one(record, meta, answer, seek.as_ref(), &mut error)
                    .await;
            }
        }
        if let Some(at) = seek {
            tracing::info!(subscription = %w.plan.name, shard = %w.ctx.shard_id, sequence_number = %at, "the handler sought; reading again from there");
            self.tracker.seek(&at);
            self.delayed.retain(|d| d.record.position() < at);
            self.seek_to = Some(at);
        }
        let counts = self.tracker.counts();
        let held_at = self.tracker.blocked_at().map(|p| p.to_string());
        let version = &self.version;
        w.status.update(|s| {
            s.counts = counts;
            s.held_at = held_at;
            if *s.handler_version != **version {
                s.handler_version = version.to_string();
            }
            if error.is_some() {
                s.last_error = error;
            }
        });
    }

    /// Whether `record` is a retry copy to unwrap: made under the fleet's key, for this
    /// subscription, on its retry stream. A record that looks like one but is not is an ordinary
    /// record (logged and counted); a dead letter read by a subscription is an ordinary record.
    fn copy_of(&self, record: &Record) -> Copy {
        let w = self.worker;
        let reject = |why: &dyn std::fmt::Display| {
            w.plan.metrics.envelope_rejected(&w.plan.name);
            tracing::warn!(
                subscription = %w.plan.name, shard = %w.ctx.shard_id,
                sequence_number = %record.position(),
                "a record that looks like a retry copy is handled as an ordinary record: {why}"
            );
            Copy::No
        };
        let (header, original) = match envelope::unwrap(&w.plan.envelopes, &record.data) {
            Ok(Some((h, original))) if h.kind == Kind::Retry => (h, original),
            Ok(_) => return Copy::No,
            Err(why) => return reject(&why),
        };
        if *header.subscription != *w.plan.name {
            return Copy::Foreign;
        }
        match &w.plan.retry {
            Some(policy) if *policy.retry_stream == *w.plan.stream => {
                let at = record.data.len() - original.len();
                Copy::Ours(Box::new(header), at)
            }
            _ => reject(&"it is not on this subscription's retry stream"),
        }
    }

    fn lane_env(&self) -> LaneEnv {
        let w = self.worker;
        LaneEnv {
            factory: self.factory.clone(),
            ctx: w.ctx.clone(),
            call_batch: w.plan.call_batch,
            metrics: w.metrics.clone(),
            all_metrics: w.plan.metrics.clone(),
            interrupts: [
                w.lease.lost().clone(),
                w.stop.clone(),
                w.lease.handoff().clone(),
            ],
        }
    }

    /// Settles one record of the batch, unless a seek sends the reader back over it (then it
    /// is read again). Notes a failed call's error for the shard's status.
    async fn settle_one(
        &mut self,
        record: Record,
        meta: &Meta,
        answer: Answer,
        seek: Option<&Position>,
        error: &mut Option<String>,
    ) {
        if seek.is_some_and(|at| record.position() >= *at) {
            return;
        }
        match answer {
            // The common case, without the retry machinery.
            Answer::Outcome(o) if o.settles() => self.settled(&record, meta, o),
            Answer::Failed(e) => {
                *error = Some(e.to_string());
                self.settle(record, meta, Answer::Failed(e)).await;
            }
            other => self.settle(record, meta, other).await,
        }
    }

    fn settled(&mut self, record: &Record, meta: &Meta, o: Outcome) {
        let w = self.worker;
        self.tap(record, o);
        self.tracker.settle(meta.ticket, o);
        tracing::debug!(
            subscription = %w.plan.name, shard = %w.ctx.shard_id,
            sequence_number = %record.position(), partition_key = %record.partition_key,
            handler = short_version(&self.version), attempt = meta.attempt, "{o}"
        );
    }

    /// Settles one record by its answer.
    async fn settle(&mut self, record: Record, meta: &Meta, answer: Answer) {
        match answer {
            // Interrupted: it stays unsettled and is read again by whoever reads next.
            Answer::Unanswered => {}
            Answer::Outcome(o) if o.settles() => self.settled(&record, meta, o),
            Answer::Outcome(o) => self.retry(record, meta, o, None).await,
            Answer::Failed(e) if !e.may_be_a_record() => {
                // The handler's fault (a bad answer, an instance that cannot start), not the
                // record's: held whatever the retry policy, so no attempts are used up.
                self.tap(&record, Outcome::Retry);
                self.tracker.settle(meta.ticket, Outcome::Retry);
            }
            Answer::Failed(e) => self.retry(record, meta, Outcome::Retry, Some(e)).await,
        }
    }

    /// A record the handler could not handle (it answered retry, or its call failed on it).
    /// Without a cap it is held; under a cap a copy is published for another attempt, or after
    /// the last attempt the record goes to the dead-letter stream.
    async fn retry(
        &mut self,
        record: Record,
        meta: &Meta,
        outcome: Outcome,
        error: Option<CallError>,
    ) {
        let w = self.worker;
        self.tap(&record, outcome);
        let Some(policy) = w.plan.retry.clone() else {
            self.tracker.settle(meta.ticket, outcome);
            tracing::warn!(
                subscription = %w.plan.name, shard = %w.ctx.shard_id,
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
            self.dead_letter(record, meta.ticket, meta.attempt, origin, reason)
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
            self.publish_copy(record, meta.ticket, meta.attempt, origin)
                .await;
        }
    }

    /// Publishes the next attempt of a record and settles this one; if the copy cannot be
    /// published, the record is held instead (nothing is lost). A record too large to carry an
    /// envelope within Kinesis' record limit cannot be retried by a copy: its attempts end here
    /// and it is dead-lettered (as a reference), so a cap always ends a record.
    async fn publish_copy(&mut self, record: Record, ticket: Ticket, attempt: u32, origin: Origin) {
        let w = self.worker;
        let policy = w.plan.retry.clone().expect("a retry policy");
        let header = Header {
            kind: Kind::Retry,
            subscription: w.plan.name.to_string(),
            attempt: attempt + 1,
            origin,
            reason: None,
            handler_version: None,
            data_omitted: None,
        };
        let data = envelope::wrap(&w.plan.envelopes, &header, &record.data);
        if !envelope::fits(&data, &record.partition_key) {
            let reason = format!(
                "a record of {} bytes is too large for a retry copy (with its envelope it passes \
                 Kinesis' {} byte limit); attempt {attempt} of {} was its last",
                record.data.len(),
                envelope::MAX_RECORD_BYTES,
                policy.max_attempts
            );
            w.plan.metrics.contained(&w.plan.name, "oversized-copy");
            self.dead_letter(record, ticket, attempt, header.origin, reason)
                .await;
            return;
        }
        if let Some(seq) = self
            .publish(&policy.retry_stream, data, &record, ticket)
            .await
        {
            w.plan.metrics.retry_copy(&w.plan.name);
            tracing::info!(
                subscription = %w.plan.name, shard = %w.ctx.shard_id,
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
    async fn dead_letter(
        &mut self,
        record: Record,
        ticket: Ticket,
        attempt: u32,
        origin: Origin,
        reason: String,
    ) {
        let w = self.worker;
        let policy = w.plan.retry.clone().expect("a retry policy");
        let mut header = Header {
            kind: Kind::DeadLetter,
            subscription: w.plan.name.to_string(),
            attempt,
            origin,
            reason: Some(envelope::short_reason(&reason)),
            handler_version: Some(self.version.to_string()),
            data_omitted: None,
        };
        let mut data = envelope::wrap(&w.plan.envelopes, &header, &record.data);
        if !envelope::fits(&data, &record.partition_key) {
            header.data_omitted = Some(record.data.len() as u64);
            data = envelope::wrap(&w.plan.envelopes, &header, &[]);
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
                subscription = %w.plan.name, shard = %w.ctx.shard_id,
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
        let w = self.worker;
        match self.source.put(stream, &record.partition_key, data).await {
            Ok(seq) => {
                self.tracker.settle(ticket, Outcome::Drop);
                Some(seq)
            }
            Err(e) => {
                self.tracker.settle(ticket, Outcome::Retry);
                tracing::error!(
                    subscription = %w.plan.name, shard = %w.ctx.shard_id,
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
        if !self.delayed.iter().any(|d| d.due <= now) {
            return;
        }
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|d| d.due <= now);
        self.delayed = waiting;
        for d in due {
            self.publish_copy(d.record, d.ticket, d.attempt, d.origin)
                .await;
        }
    }

    /// When the next delayed copy is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.delayed.iter().map(|d| d.due).min()
    }

    pub(super) fn tap(&self, record: &Record, outcome: Outcome) {
        let w = self.worker;
        if let Some(tap) = &w.plan.tap {
            tap(&Settled {
                subscription: &w.plan.name,
                shard_id: &w.ctx.shard_id,
                record,
                outcome,
                version: &self.version,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::lane_of;

    #[test]
    fn a_key_always_goes_to_the_same_lane_and_keys_spread_over_lanes() {
        let lanes: Vec<_> = (0..400).map(|i| lane_of(&format!("key-{i}"), 4)).collect();
        for (i, lane) in lanes.iter().enumerate() {
            assert_eq!(lane_of(&format!("key-{i}"), 4), *lane);
        }
        for lane in 0..4 {
            let n = lanes.iter().filter(|l| **l == lane).count();
            assert!((50..150).contains(&n), "lane {lane} got {n} of 400 keys");
        }
    }
}
