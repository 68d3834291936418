//! Publishing retry copies and dead letters: what is due (a batch's copies and letters, a
//! `retry-after` delay over, a failed publish to try again) goes out together, in read order,
//! one `put_many` (PutRecords) per stream per [`PUT_MANY_RECORDS`] records or
//! [`PUT_MANY_BYTES`]. A record is settled once its copy or letter is out. The first failure
//! stops the turn: what failed waits a back-off (1 s doubling to 30 s) and what was not tried
//! waits as long, so a stream that is down costs one call's wait per turn, not one per record.
//! A stop or a lost lease ends a call at once; what is not out stays unsettled and the shard's
//! next reader delivers it again.

use tokio::time::Instant;

use super::Run;
use super::retry::{Delayed, publish_backoff};
use crate::config::RetryPolicy;
use crate::envelope::{self, Header, Kind};
use crate::record::Outcome;
use crate::source::{PUT_MANY_BYTES, PUT_MANY_RECORDS, PutAnswers, PutEntry, SourceError};

/// A copy or letter ready to go: where, what, and the publish it is (kept if it fails).
struct Outgoing {
    entry: PutEntry,
    /// A dead letter too large to carry the record: the envelope alone.
    reference: bool,
    publish: Delayed,
}

/// How one call ended.
enum Sent {
    /// Every record of it is out.
    All,
    /// Some or all failed (or were not tried): the turn stops.
    Failed,
    /// A stop or a lost lease came first.
    Interrupted,
}

impl Run<'_> {
    /// Publishes the copies and dead letters that are due, together and in read order, and
    /// settles each record whose copy or letter is out. After a failure the rest of this turn
    /// wait with it; after a stop or a lost lease they stay unsettled.
    pub(super) async fn flush_delayed(&mut self) {
        let now = Instant::now();
        // Copies wait only under a cap.
        let Some(policy) = &self.worker.plan.retry else {
            return;
        };
        if !self.delayed.iter().any(|d| d.due <= now) {
            return;
        }
        let (mut due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|d| d.due <= now);
        self.delayed = waiting;
        due.sort_by_cached_key(|d| d.record.position());
        let outgoing: Vec<Outgoing> = due.into_iter().map(|d| self.outgoing(policy, d)).collect();
        let (copies, letters): (Vec<_>, Vec<_>) = outgoing
            .into_iter()
            .partition(|o| o.publish.letter.is_none());
        let size = |o: &Outgoing| o.entry.size();
        let copies = chunks(copies, size).into_iter();
        let letters = chunks(letters, size).into_iter();
        let mut calls = copies
            .map(|c| (policy.retry_stream.as_str(), c))
            .chain(letters.map(|c| (policy.dead_letter.as_str(), c)));
        while let Some((stream, call)) = calls.next() {
            match self.send(policy, stream, call).await {
                Sent::All => continue,
                Sent::Failed => {
                    // The stream is down or throttles: what is left waits as long as what failed.
                    let until = self.delayed.last().map_or_else(Instant::now, |f| f.due);
                    let rest = calls.flat_map(|(_, c)| c).map(|o| Delayed {
                        due: until,
                        ..o.publish
                    });
                    self.delayed.extend(rest);
                }
                Sent::Interrupted => {
                    self.delayed
                        .extend(calls.flat_map(|(_, c)| c).map(|o| o.publish));
                }
            }
            return;
        }
    }

    /// The envelope of a copy or letter. A copy too large to carry its envelope within
    /// Kinesis' record limit cannot be retried: its attempts end and it becomes a dead letter
    /// (a reference, as is any letter too large to carry the record), so a cap always ends a
    /// record.
    fn outgoing(&self, policy: &RetryPolicy, mut d: Delayed) -> Outgoing {
        let w = self.worker;
        let key = w.plan.envelopes.current();
        if d.letter.is_none() {
            let header = Header {
                kind: Kind::Retry,
                subscription: w.plan.name.to_string(),
                attempt: d.attempt + 1,
                origin: d.origin.clone(),
                reason: None,
                handler_version: None,
                data_omitted: None,
            };
            let data = envelope::wrap(key, &header, &d.record.data);
            if envelope::fits(&data, &d.record.partition_key) {
                let entry = entry(&d, data);
                return Outgoing {
                    entry,
                    reference: false,
                    publish: d,
                };
            }
            w.plan.metrics.contained(&w.plan.name, "oversized-copy");
            d.letter = Some(format!(
                "a record of {} bytes is too large for a retry copy (with its envelope it passes \
                 Kinesis' {} byte limit); attempt {} of {} was its last",
                d.record.data.len(),
                envelope::MAX_RECORD_BYTES,
                d.attempt,
                policy.max_attempts
            ));
        }
        let reason = d.letter.as_deref().unwrap_or_default();
        let mut header = Header {
            kind: Kind::DeadLetter,
            subscription: w.plan.name.to_string(),
            attempt: d.attempt,
            origin: d.origin.clone(),
            reason: Some(envelope::short_reason(reason)),
            handler_version: Some(self.version.to_string()),
            data_omitted: None,
        };
        let mut data = envelope::wrap(key, &header, &d.record.data);
        if !envelope::fits(&data, &d.record.partition_key) {
            header.data_omitted = Some(d.record.data.len() as u64);
            data = envelope::wrap(key, &header, &[]);
            w.plan
                .metrics
                .contained(&w.plan.name, "dead-letter-reference");
        }
        Outgoing {
            entry: entry(&d, data),
            reference: header.data_omitted.is_some(),
            publish: d,
        }
    }

    /// One `put_many` call; settles what went out and keeps the rest among the delayed
    /// publishes (what failed after a back-off, what was not tried as long).
    async fn send(&mut self, policy: &RetryPolicy, stream: &str, call: Vec<Outgoing>) -> Sent {
        let interrupts = self.interrupts.clone();
        if interrupts.now().is_some() {
            self.delayed.extend(call.into_iter().map(|o| o.publish));
            return Sent::Interrupted;
        }
        let entries = call.iter().map(|o| o.entry.clone()).collect();
        let put = self.source.put_many(stream, entries);
        let answers = tokio::select! {
            biased;
            _ = interrupts.wait() => {
                self.delayed.extend(call.into_iter().map(|o| o.publish));
                return Sent::Interrupted;
            }
            answers = put => answers,
        };
        self.answered(policy, stream, call, answers)
    }

    /// Settles each record of a call that is out; keeps the others: what failed (all of them
    /// when the call failed as a whole) after a back-off, what was not tried as long.
    fn answered(
        &mut self,
        policy: &RetryPolicy,
        stream: &str,
        call: Vec<Outgoing>,
        answers: Result<PutAnswers, SourceError>,
    ) -> Sent {
        let w = self.worker;
        let n = call.len();
        let (mut answers, mut error) = match answers {
            Ok(answers) => (answers.into_iter(), None),
            Err(e) => (Vec::new().into_iter(), Some(e)),
        };
        let whole = error.is_some();
        // The first failure's try count, how many failed, and when they are tried again.
        let mut failed: Option<(u32, usize, Instant)> = None;
        for o in call {
            let answer = answers.next();
            if let Some(Ok(seq)) = &answer {
                self.out(policy, o, seq);
                continue;
            }
            let mut d = o.publish;
            match answer {
                Some(Err(e)) => {
                    error.get_or_insert(e);
                }
                // Not tried: due with the first that failed.
                None if !whole => {
                    d.due = failed.map_or_else(Instant::now, |(_, _, due)| due);
                    self.delayed.push(d);
                    continue;
                }
                _ => {}
            }
            d.failures += 1;
            d.due = Instant::now() + publish_backoff(d.failures);
            w.plan.metrics.contained(&w.plan.name, "publish-failed");
            let first = failed.get_or_insert((d.failures, 0, d.due));
            first.1 += 1;
            self.delayed.push(d);
        }
        let (Some((failures, failed, _)), Some(e)) = (failed, error) else {
            return Sent::All;
        };
        // The first failure and then one in ten: an outage does not flood the log.
        if failures % 10 == 1 {
            tracing::error!(
                failures,
                failed,
                of = n,
                "cannot publish to `{stream}`: {e}; the records wait (the checkpoint stays in \
                 front of them) and are published again in {:?}",
                publish_backoff(failures)
            );
        }
        Sent::Failed
    }

    /// A copy or letter is out: its record is settled.
    fn out(&mut self, policy: &RetryPolicy, o: Outgoing, seq: &str) {
        let w = self.worker;
        let d = o.publish;
        self.tracker.settle(d.ticket, Outcome::Drop);
        let (record, attempt) = (&d.record, d.attempt);
        match &d.letter {
            None => {
                w.plan.metrics.retry_copy(&w.plan.name);
                tracing::info!(
                    sequence_number = %record.position(), partition_key = %record.partition_key,
                    retry_stream = %policy.retry_stream, copy = %seq,
                    "retry: attempt {} of {} published", attempt + 1, policy.max_attempts
                );
            }
            Some(reason) => {
                let reference = o.reference;
                w.plan.metrics.dead_letter(&w.plan.name);
                tracing::warn!(
                    sequence_number = %record.position(), partition_key = %record.partition_key,
                    dead_letter = %policy.dead_letter, letter = %seq, attempts = attempt, reference,
                    "dead-lettered{}: {reason}",
                    if reference { " (a reference: the record is too large to carry)" } else { "" }
                );
            }
        }
    }
}

/// The record's put: its partition key and `data` (its envelope).
fn entry(d: &Delayed, data: Vec<u8>) -> PutEntry {
    PutEntry {
        partition_key: d.record.partition_key.to_string(),
        data,
    }
}

/// `items` (in read order) in calls of at most [`PUT_MANY_RECORDS`] records and
/// [`PUT_MANY_BYTES`], each item `size` bytes.
fn chunks<T>(items: Vec<T>, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut calls: Vec<Vec<T>> = Vec::new();
    let mut bytes = 0;
    for item in items {
        let n = size(&item);
        match calls.last_mut() {
            Some(call) if call.len() < PUT_MANY_RECORDS && bytes + n <= PUT_MANY_BYTES => {
                bytes += n;
                call.push(item);
            }
            _ => {
                bytes = n;
                calls.push(vec![item]);
            }
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_takes_at_most_500_records_and_5_mib_in_read_order() {
        let calls = chunks((0..1_201).collect(), |_| 10);
        let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
        assert_eq!(sizes, [500, 500, 201]);
        assert_eq!(calls.concat(), (0..1_201).collect::<Vec<_>>());
        // Records of 1 MiB: five to a call.
        let calls = chunks(vec![1 << 20; 11], |n| *n);
        let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
        assert_eq!(sizes, [5, 5, 1]);
    }
}
