//! Reading one shard: GetShardIterator at a position, then GetRecords, reopening an expired
//! iterator after the last delivered record; an end of shard is an answer without a next
//! iterator. A reader opened at the tip (`Latest`) that reopens before it delivered a record
//! reopens at the time it first opened, less a margin ([`reopened_after_latest`]), never at the
//! tip again: that would skip what arrived in between.

use std::sync::Arc;

use async_trait::async_trait;

use super::api::{ApiErrorKind, GotRecords, IteratorAt, KinesisApi};
use crate::record::{Position, Record};
use crate::source::OPENED_SLACK_MS;
use crate::source::{Call, ReadBatch, ShardReader, SourceError, StartPosition, kpl};

pub(super) struct KinesisReader {
    api: Arc<dyn KinesisApi>,
    stream: String,
    shard_id: String,
    /// Where the next iterator opens: the original start until a record is delivered (`Latest`
    /// only the first time: see [`reopened_after_latest`]), then just after the last delivered
    /// one.
    start: StartPosition,
    iterator: Option<String>,
    /// Set when an iterator opens at a position: records before it (and, for `After`, the one
    /// at it) were delivered or checkpointed already. Cleared once a later record arrives.
    skip: Option<Skip>,
    ended: bool,
}

/// What a read opened AT a sequence number must drop from its first records.
pub(super) enum Skip {
    /// Records up to and including this one.
    Through(Position),
    /// Records before this one (the sub-records of an aggregate before a seek target).
    Before(Position),
}

/// Where a reader that first opened at the tip at `opened_ms` (this host's clock) opens again
/// while it has delivered nothing: at that time, less [`OPENED_SLACK_MS`] for a clock
/// difference between this host and the service. The tip again would skip every record that
/// arrived in between (its first checkpoint would pass them); what arrived in the margin is
/// delivered, maybe again: duplicates are the documented cost.
pub(super) fn reopened_after_latest(opened_ms: u64) -> StartPosition {
    StartPosition::Timestamp(opened_ms.saturating_sub(OPENED_SLACK_MS))
}

impl Skip {
    /// What a read opened at `start` drops: for `After`, the checkpointed record and all
    /// before it; for `At`, the records before it (the same aggregate's earlier sub-records).
    pub(super) fn of(start: &StartPosition) -> Option<Skip> {
        match start {
            StartPosition::After(p) => Some(Skip::Through(p.clone())),
            StartPosition::At(p) => Some(Skip::Before(p.clone())),
            _ => None,
        }
    }

    /// Drops from `records` what was delivered or checkpointed before the position.
    pub(super) fn apply(&self, records: &mut Vec<Record>) {
        match self {
            Skip::Through(p) => records.retain(|r| r.position() > *p),
            Skip::Before(p) => records.retain(|r| r.position() >= *p),
        }
    }
}

impl KinesisReader {
    /// A reader of `shard_id` at `start`, its iterator opened.
    pub(super) async fn open(
        api: Arc<dyn KinesisApi>,
        stream: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<KinesisReader, SourceError> {
        let mut reader = KinesisReader {
            api,
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
            start: start.clone(),
            iterator: None,
            skip: None,
            ended: false,
        };
        reader.iterator = Some(reader.open_iterator().await?);
        Ok(reader)
    }
}

impl KinesisReader {
    /// This reader's GetRecords call, for errors.
    fn call(&self) -> Call {
        Call::ReadShard {
            stream: self.stream.clone(),
            shard: self.shard_id.clone(),
        }
    }

    async fn open_iterator(&mut self) -> Result<String, SourceError> {
        self.skip = Skip::of(&self.start);
        if self.start == StartPosition::Latest {
            // Opened at the tip once: any later iterator opens at this moment instead.
            self.start = reopened_after_latest(crate::lease::now_ms());
            return self.send_open(&StartPosition::Latest).await;
        }
        let start = self.start.clone();
        self.send_open(&start).await
    }

    /// GetShardIterator at `start`.
    async fn send_open(&self, start: &StartPosition) -> Result<String, SourceError> {
        let call = || Call::OpenShard {
            stream: self.stream.clone(),
            shard: self.shard_id.clone(),
        };
        let at = IteratorAt::of(start);
        let iterator = self
            .api
            .get_shard_iterator(&self.stream, &self.shard_id, &at)
            .await
            .map_err(|e| e.failed(call()))?;
        iterator.ok_or_else(|| SourceError::NoIterator {
            stream: self.stream.clone(),
            shard: self.shard_id.clone(),
        })
    }
}

impl KinesisReader {
    /// One GetRecords on the shard's iterator (opened first if there is none); an expired
    /// iterator is reopened once, after the last delivered record.
    async fn get_records(&mut self, limit: usize) -> Result<GotRecords, SourceError> {
        let mut reopened = false;
        loop {
            let iterator = match self.iterator.take() {
                Some(it) => it,
                None => self.open_iterator().await?,
            };
            let sent = self.api.get_records(&iterator, limit).await;
            match sent {
                Ok(out) => return Ok(out),
                Err(e) if !reopened && e.kind == ApiErrorKind::ExpiredIterator => {
                    tracing::debug!(
                        start = ?self.start,
                        "shard iterator expired; reopening after the last delivered record \
                         (before the first: where the reader first opened)"
                    );
                    reopened = true;
                }
                Err(e) => {
                    // Keep the iterator for the next try unless the error says it is spent.
                    self.iterator = Some(iterator);
                    if e.kind == ApiErrorKind::Throttled {
                        return Err(SourceError::Throttled(self.call()));
                    }
                    return Err(e.failed(self.call()));
                }
            }
        }
    }
}

/// The user records of stored ones: KPL aggregates taken apart (a corrupt one delivered whole,
/// and logged).
pub(super) fn user_records(stored: Vec<Record>) -> Vec<Record> {
    kpl::deaggregate_all(stored, |record, reason| {
        tracing::warn!(
            sequence_number = %record.sequence_number,
            "corrupt KPL aggregate delivered as one plain record: {reason}"
        );
    })
}

#[async_trait]
impl ShardReader for KinesisReader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        if self.ended {
            return Ok(ReadBatch {
                end_of_shard: true,
                ..ReadBatch::default()
            });
        }
        let out = self.get_records(limit).await?;
        let millis_behind_latest = out.millis_behind_latest;
        self.iterator = out.next_iterator;
        self.ended = self.iterator.is_none();
        let mut records = user_records(out.records);
        if let Some(skip) = &self.skip {
            skip.apply(&mut records);
        }
        if let Some(last) = records.last() {
            self.start = StartPosition::After(last.position());
            self.skip = None;
        }
        Ok(ReadBatch {
            records,
            millis_behind_latest,
            end_of_shard: self.ended,
        })
    }
}
