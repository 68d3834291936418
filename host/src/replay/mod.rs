//! `shardhost replay`: a version on trial over a stream's history, next to the version the
//! subscription runs now. Both read the same records in the same batches, each in its own
//! instance with the subscription's limits and grants, and both on trial: what they would do to
//! the world is recorded ([`crate::effects`]), never done. Nothing is leased, checkpointed or
//! put; the stream is read, one read a second per shard at most, so a live fleet keeps its
//! share of the shard's five.
//!
//! A records file (`replay --file`) is replayed the same way, as one pseudo-shard's history
//! ([`replay_records`]).
//!
//! Data flow: [`History`] reads a shard a batch at a time → [`Trial::judge`] answers it for
//! one version → [`report::Report`] tallies both and keeps the records they answer
//! differently.

use std::sync::Arc;
use std::time::Duration;

use crate::dispatch::{Judge, Judged};
use crate::effects::Effects;
use crate::handler::{CallContext, HandlerFactory};
use crate::record::{BatchInfo, Record};
use crate::source::{ShardReader, SourceError, StartPosition, StreamSource};

pub mod copies;
pub mod report;

pub use copies::Copies;
use copies::Taken;
pub use report::{Answer, Report};

/// The time between two reads of one shard.
pub const READ_EVERY: Duration = Duration::from_secs(1);

/// What part of the history to replay.
#[derive(Clone, Debug, Default)]
pub struct Range {
    /// The first record that arrived at or after this time (ms since the epoch); none: the
    /// oldest record kept.
    pub from: Option<u64>,
    /// Records that arrived after this time (ms since the epoch) are not replayed.
    pub to: Option<u64>,
    /// At most this many records, over every shard.
    pub records: Option<u64>,
}

/// One version on trial: its answers come from a [`Judge`] (lanes, bisecting, as a shard's
/// batch), its effects go to its own recorder.
pub struct Trial {
    version: String,
    pub effects: Arc<Effects>,
    judge: Judge,
}

impl Trial {
    /// `factory` on trial for subscription `ctx.subscription`, `call_batch` records a call over
    /// `lanes` lanes; its effects go to `effects`.
    pub fn new(
        factory: Arc<dyn HandlerFactory>,
        mut ctx: CallContext,
        effects: Arc<Effects>,
        call_batch: usize,
        lanes: usize,
    ) -> Trial {
        ctx.effects = Some(effects.clone());
        Trial {
            version: factory.version(),
            effects,
            judge: Judge::new(factory, ctx, call_batch, lanes),
        }
    }

    pub fn version(&self) -> String {
        self.version.clone()
    }

    /// The version's answer for each record of `batch` (with its attempt), in order.
    pub async fn judge(&mut self, info: &BatchInfo, batch: &[(Record, u32)]) -> Vec<Answer> {
        self.judge
            .judge(info, batch)
            .await
            .into_iter()
            .map(|j| match j {
                Judged::Outcome(o) => Answer::Outcome(o),
                Judged::Failed(e) => Answer::Failed(e),
                Judged::Unanswered => Answer::Unanswered,
            })
            .collect()
    }
}

/// What to replay, and how.
#[derive(Clone, Debug)]
pub struct Plan {
    pub stream: String,
    pub range: Range,
    /// Records a handler call.
    pub batch: usize,
    /// Records a read asks for.
    pub read_limit: usize,
    /// How many differing records the report keeps (the rest are counted).
    pub max_differences: usize,
}

/// Replays `plan` through `current` and `candidate`; `copies` tells retry copies from records.
pub async fn replay(
    source: &dyn StreamSource,
    plan: &Plan,
    copies: &Copies,
    current: &mut Trial,
    candidate: &mut Trial,
) -> Result<Report, SourceError> {
    let (stream, range) = (plan.stream.as_str(), &plan.range);
    let mut judging = Judging::new(plan, copies, current, candidate);
    let mut left = range.records.unwrap_or(u64::MAX);
    let start = match range.from {
        Some(ms) => StartPosition::Timestamp(ms),
        None => StartPosition::TrimHorizon,
    };
    for shard in parents_first(source.list_shards(stream).await?) {
        if left == 0 {
            break;
        }
        let reader = source.open(stream, &shard, &start).await?;
        let mut history = History {
            reader,
            to: range.to,
            read_size: plan.read_limit.clamp(1, 10_000),
            last_read: None,
            done: false,
        };
        while left > 0 {
            let Some(mut records) = history.next().await? else {
                break;
            };
            records.truncate(usize::try_from(left).unwrap_or(usize::MAX));
            left -= records.len() as u64;
            judging.read(&shard, records).await;
        }
    }
    Ok(judging.finish())
}

/// Replays `records` (a records file's, in order: one pseudo-shard named `shard`) through
/// `current` and `candidate` exactly as a shard's history: in reads of `plan.read_limit`,
/// each in calls of `plan.batch`. `plan.range.records` bounds them; its times do not apply.
pub async fn replay_records(
    shard: &str,
    mut records: Vec<Record>,
    plan: &Plan,
    copies: &Copies,
    current: &mut Trial,
    candidate: &mut Trial,
) -> Report {
    let mut judging = Judging::new(plan, copies, current, candidate);
    records.truncate(usize::try_from(plan.range.records.unwrap_or(u64::MAX)).unwrap_or(usize::MAX));
    let read_size = plan.read_limit.clamp(1, 10_000);
    let mut records = records.into_iter().peekable();
    while records.peek().is_some() {
        let read: Vec<Record> = records.by_ref().take(read_size).collect();
        judging.read(shard, read).await;
    }
    judging.finish()
}

/// Both versions answering reads, and what they answered.
struct Judging<'a> {
    stream: &'a str,
    batch: usize,
    copies: &'a Copies,
    current: &'a mut Trial,
    candidate: &'a mut Trial,
    report: Report,
}

impl<'a> Judging<'a> {
    fn new(
        plan: &'a Plan,
        copies: &'a Copies,
        current: &'a mut Trial,
        candidate: &'a mut Trial,
    ) -> Judging<'a> {
        let report = Report::new(current.version(), candidate.version(), plan.max_differences);
        Judging {
            stream: &plan.stream,
            batch: plan.batch.max(1),
            copies,
            current,
            candidate,
            report,
        }
    }

    /// One read of `shard`: its records (retry copies taken as a host takes them) in calls of
    /// `batch`, each answered by both versions.
    async fn read(&mut self, shard: &str, records: Vec<Record>) {
        let mut taken = Vec::with_capacity(records.len());
        for record in records {
            match self.copies.take(record) {
                Taken::Replayed(record, attempt) => taken.push((record, attempt)),
                Taken::Skipped(why) => self.report.skipped(why),
            }
        }
        let info = BatchInfo {
            stream: self.stream.to_owned(),
            shard_id: shard.to_owned(),
            millis_behind_latest: None,
            attempt: 1,
        };
        // The subscription's batches: each read's records in calls of `batch` at most.
        for chunk in taken.chunks(self.batch) {
            let now = self.current.judge(&info, chunk).await;
            let then = self.candidate.judge(&info, chunk).await;
            self.report.add(shard, chunk, now, then);
        }
    }

    fn finish(mut self) -> Report {
        let (current, candidate) = (&self.current.effects, &self.candidate.effects);
        self.report
            .effects(current.recorded(), candidate.recorded());
        self.report
    }
}

/// The shard ids of `shards`, every parent before its children (a parent a listing no longer
/// shows, trimmed away, does not hold its children back).
fn parents_first(shards: Vec<crate::source::ShardInfo>) -> Vec<String> {
    let ids: std::collections::HashSet<String> =
        shards.iter().map(|s| s.shard_id.clone()).collect();
    let mut done: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut order = Vec::new();
    let mut rest = shards;
    while !rest.is_empty() {
        let (ready, waiting): (Vec<_>, Vec<_>) = rest.into_iter().partition(|s| {
            s.parents
                .iter()
                .all(|p| done.contains(p) || !ids.contains(p))
        });
        if ready.is_empty() {
            // A cycle cannot happen in Kinesis; take the rest as listed.
            order.extend(waiting.into_iter().map(|s| s.shard_id));
            break;
        }
        for s in ready {
            done.insert(s.shard_id.clone());
            order.push(s.shard_id);
        }
        rest = waiting;
    }
    order
}

/// One shard's history, a read at a time.
struct History {
    reader: Box<dyn ShardReader>,
    to: Option<u64>,
    read_size: usize,
    last_read: Option<tokio::time::Instant>,
    done: bool,
}

impl History {
    /// The next records, or `None` at the end: the shard's end, the end of the range, or the
    /// shard's tip (what arrives after the replay reached it is not replayed).
    async fn next(&mut self) -> Result<Option<Vec<Record>>, SourceError> {
        let mut empty_reads = 0;
        while !self.done {
            if let Some(last) = self.last_read {
                tokio::time::sleep_until(last + READ_EVERY).await;
            }
            self.last_read = Some(tokio::time::Instant::now());
            let batch = match self.reader.read(self.read_size).await {
                Err(SourceError::Throttled(_)) => continue,
                read => read?,
            };
            let mut records = batch.records;
            // A read that is not full and not behind found the tip.
            self.done = batch.end_of_shard
                || (records.len() < self.read_size && batch.millis_behind_latest == Some(0));
            let past = self.to.and_then(|to| {
                records
                    .iter()
                    .position(|r| r.approximate_arrival_timestamp > to)
            });
            if let Some(at) = past {
                records.truncate(at);
                self.done = true;
            }
            if !records.is_empty() {
                return Ok(Some(records));
            }
            empty_reads += 1;
            self.done |= empty_reads >= 3;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::ShardInfo;

    fn shard(id: &str, parents: &[&str]) -> ShardInfo {
        ShardInfo {
            shard_id: id.to_owned(),
            parents: parents.iter().map(|p| p.to_string()).collect(),
            closed: false,
        }
    }

    #[test]
    fn children_are_replayed_after_their_parents() {
        let order = parents_first(vec![
            shard("c1", &["p"]),
            shard("m", &["c1", "c2"]),
            shard("c2", &["p", "gone"]),
            shard("p", &[]),
        ]);
        assert_eq!(order, ["p", "c1", "c2", "m"]);
    }
}
