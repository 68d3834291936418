//! One read batch through the handler: pick the version it runs on, call the handler
//! (`call_batch` records per call), bisect a call that failed to find the records that fail on
//! their own, and settle every record by its outcome.

use std::time::Instant;

use super::{Run, Settled};
use crate::handler::{CallError, outcomes_per_record};
use crate::record::{BatchInfo, Outcome, Record};
use crate::settle::Ticket;
use crate::wasm::short_version;

impl Run<'_> {
    /// Hands one read batch to the handler and settles every record by its outcome. The whole
    /// batch runs on the version current when it starts; a swap takes effect at the next one.
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
            self.handler = None;
        }
        let mut first = None;
        for r in &records {
            let t = self.tracker.deliver(r.position());
            first.get_or_insert(t);
        }
        let mut ticket = first.unwrap_or_default();
        let mut error = None;
        for chunk in records.chunks(w.plan.call_batch.max(1)) {
            if let Some(e) = self.call_isolating(&info, chunk, ticket).await {
                error = Some(e.to_string());
            }
            if self.interrupted() {
                break;
            }
            ticket += chunk.len() as u64;
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

    /// The lease is gone or the shard was told to stop: work not begun stays unsettled (it is
    /// read again by whoever reads the shard next).
    fn interrupted(&self) -> bool {
        let w = self.worker;
        w.lease.lost().is_cancelled() || w.stop.is_cancelled() || w.lease.handoff().is_cancelled()
    }

    /// Calls the handler with `records`. When the call fails in a way a record may cause
    /// (trap, timeout, memory, fuel), splits the records in halves and calls each on a fresh
    /// instance, down to single records: only the records that fail on their own are held, the
    /// rest settle by their outcomes. Calls go in record order, so per-key order holds.
    /// Answers the last failure, if any.
    async fn call_isolating(
        &mut self,
        info: &BatchInfo,
        records: &[Record],
        first: Ticket,
    ) -> Option<CallError> {
        let w = self.worker;
        let mut last_error = None;
        // Ranges still to call, the next one on top.
        let mut todo = Vec::new();
        todo.push(0..records.len());
        while let Some(range) = todo.pop() {
            let part = &records[range.clone()];
            let at = first + range.start as u64;
            match self.call(info, part).await {
                Ok(outcomes) => self.settle_all(at, part, &outcomes),
                Err(e) => {
                    w.plan.metrics.trap(&w.plan.name, e.kind());
                    if part.len() > 1 && e.may_be_a_record() {
                        tracing::warn!(
                            subscription = %w.plan.name, shard = %w.ctx.shard_id,
                            records = part.len(),
                            first_sequence_number = %part[0].position(),
                            "{e}; calling the records again in halves to find the ones that fail"
                        );
                        let mid = range.start + part.len() / 2;
                        todo.push(mid..range.end);
                        todo.push(range.start..mid);
                    } else {
                        self.hold_failed(at, part, &e);
                        last_error = Some(e);
                    }
                }
            }
            if !todo.is_empty() && self.interrupted() {
                break;
            }
        }
        last_error
    }

    /// One handler call on this batch's version. A failed call drops the instance: the next
    /// call gets a fresh one.
    async fn call(
        &mut self,
        info: &BatchInfo,
        records: &[Record],
    ) -> Result<Vec<Outcome>, CallError> {
        let w = self.worker;
        let mut handler = match self.handler.take() {
            Some(h) => h,
            None => self.factory.instantiate(&w.ctx).await?,
        };
        let started = Instant::now();
        let answer = handler.handle(info, records).await;
        w.metrics.call(started.elapsed());
        let outcomes =
            answer.and_then(|a| outcomes_per_record(a, records.len(), handler.version()))?;
        self.handler = Some(handler);
        Ok(outcomes)
    }

    fn settle_all(&mut self, first: Ticket, records: &[Record], outcomes: &[Outcome]) {
        let w = self.worker;
        w.metrics.outcomes(outcomes);
        let handler = short_version(&self.version);
        for ((ticket, record), &outcome) in (first..).zip(records).zip(outcomes) {
            self.tap(record, outcome);
            if self.tracker.settle(ticket, outcome) {
                tracing::debug!(
                    subscription = %w.plan.name, shard = %w.ctx.shard_id,
                    sequence_number = %record.position(), partition_key = %record.partition_key,
                    handler, "{outcome}"
                );
            } else {
                tracing::warn!(
                    subscription = %w.plan.name, shard = %w.ctx.shard_id,
                    sequence_number = %record.position(), partition_key = %record.partition_key,
                    handler,
                    "{outcome}: record held (no retry cap); the shard's checkpoint waits in front of it"
                );
            }
        }
    }

    /// The records of a failed call that cannot be split further are held like `retry`.
    fn hold_failed(&mut self, first: Ticket, records: &[Record], error: &CallError) {
        let w = self.worker;
        let first_seq = records
            .first()
            .map(|r| r.position().to_string())
            .unwrap_or_default();
        tracing::error!(
            subscription = %w.plan.name, shard = %w.ctx.shard_id,
            records = records.len(), first_sequence_number = %first_seq,
            "{error}; the record{} held and the instance is replaced",
            if records.len() == 1 { " is" } else { "s are" }
        );
        w.metrics.failed(records.len());
        for (ticket, record) in (first..).zip(records) {
            self.tap(record, Outcome::Retry);
            self.tracker.settle(ticket, Outcome::Retry);
        }
    }

    fn tap(&self, record: &Record, outcome: Outcome) {
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
