//! The few Kinesis calls the shard readers make, as a trait of our own: [`KinesisApi`]
//! (GetShardIterator, GetRecords, SubscribeToShard) answering our own types. The SDK's client is
//! one implementation (`sdk_api.rs`); a simulated stream is another, so the seeded simulation
//! runs the real polling and fan-out readers ([`open_polling`], [`open_fan_out`]): their
//! iterators, expiry, reopening, skips, subscriptions and end-of-shard rules.
//!
//! What an implementation must do, as Kinesis does:
//! - `get_shard_iterator` answers an iterator at the position (`None`: the service gave none);
//!   `Latest` is the tip when the call is answered, `Timestamp` the first record that arrived at
//!   or after it.
//! - `get_records` answers up to `limit` records after the iterator, as stored (a KPL aggregate
//!   is one record, sub-sequence 0: the readers take it apart), the next iterator (none: the
//!   shard is closed and read to its end), and how far behind the tip the read is. An iterator
//!   past its life answers [`ApiErrorKind::ExpiredIterator`]; a read over the shard's limit
//!   [`ApiErrorKind::Throttled`].
//! - `subscribe` answers a stream of [`ShardEvent`]s from the position: each event's records,
//!   the continuation sequence number the next subscription starts after (empty: the shard
//!   ended; no event follows), and the lag. The stream answers `Ok(None)` when the service ends
//!   the subscription (Kinesis: after 5 minutes), an error when it fails. A second subscription
//!   of the same consumer and shard within 5 s answers [`ApiErrorKind::InUse`].

use std::sync::Arc;

use async_trait::async_trait;

use super::{fanout, reader::KinesisReader, subscription::Consumer};
use crate::record::Record;
use crate::source::{Call, ServiceError, ShardReader, SourceError, StartPosition};

/// Where an iterator or a subscription starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IteratorAt {
    AtSequence(String),
    AfterSequence(String),
    TrimHorizon,
    Latest,
    /// Milliseconds since the epoch.
    Timestamp(u64),
}

impl IteratorAt {
    /// Where a reader at `start` opens: AT a checkpoint's or seek's sequence number, not after
    /// (it may stand inside an aggregate; the reader's skip drops what was handled).
    pub(super) fn of(start: &StartPosition) -> IteratorAt {
        match start {
            StartPosition::After(p) | StartPosition::At(p) => {
                IteratorAt::AtSequence(p.sequence_number().to_owned())
            }
            StartPosition::TrimHorizon => IteratorAt::TrimHorizon,
            StartPosition::Latest => IteratorAt::Latest,
            StartPosition::Timestamp(ms) => IteratorAt::Timestamp(*ms),
        }
    }
}

/// What GetRecords answered.
#[derive(Clone, Debug, Default)]
pub struct GotRecords {
    /// As stored: an aggregate is one record (sub-sequence 0).
    pub records: Vec<Record>,
    /// `None`: the shard is closed and this read reached its end.
    pub next_iterator: Option<String>,
    pub millis_behind_latest: Option<u64>,
}

/// One SubscribeToShard event.
#[derive(Clone, Debug, Default)]
pub struct ShardEvent {
    /// As stored, in shard order (possibly none).
    pub records: Vec<Record>,
    /// Where the next subscription starts (after it); empty: the shard ended.
    pub continuation: String,
    pub millis_behind_latest: u64,
}

/// The events of one subscription.
#[async_trait]
pub trait ShardEvents: Send {
    /// The next event; `Ok(None)` when the service ended the subscription.
    async fn next(&mut self) -> Result<Option<ShardEvent>, ApiError>;
}

/// What kind of failure a call answered: what the readers tell apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// The shard iterator is past its life (Kinesis: 5 minutes).
    ExpiredIterator,
    /// ProvisionedThroughputExceeded or KMS throttling: the shard's (or key's) limit.
    Throttled,
    /// LimitExceeded (SubscribeToShard: more than one a second per shard and consumer).
    LimitExceeded,
    /// ResourceInUse (another subscription of the consumer holds the shard).
    InUse,
    /// AccessDenied: the credentials may not make the call.
    Denied,
    /// Anything else: a transport failure, a missing shard, a timeout.
    Other,
}

/// A failed call: its kind and the service's error, whole (its causes and details).
#[derive(Debug, thiserror::Error)]
#[error("{kind:?}: {source}")]
pub struct ApiError {
    pub kind: ApiErrorKind,
    #[source]
    pub source: ServiceError,
}

impl ApiError {
    pub fn new(kind: ApiErrorKind, source: impl Into<ServiceError>) -> ApiError {
        ApiError {
            kind,
            source: source.into(),
        }
    }

    /// `call` failed with this error (the service's error whole, as the source).
    pub(super) fn failed(self, call: Call) -> SourceError {
        SourceError::Service {
            call,
            source: self.source,
        }
    }

    /// As [`ApiError::failed`], but access denied names the IAM permission `call` needs.
    pub(super) fn failed_needing(self, call: Call, permission: &'static str) -> SourceError {
        match self.kind {
            ApiErrorKind::Denied => SourceError::AccessDenied {
                call: Box::new(call),
                permission,
                source: self.source,
            },
            _ => self.failed(call),
        }
    }
}

/// The Kinesis calls a shard reader makes.
#[async_trait]
pub trait KinesisApi: Send + Sync + 'static {
    async fn get_shard_iterator(
        &self,
        stream: &str,
        shard: &str,
        at: &IteratorAt,
    ) -> Result<Option<String>, ApiError>;

    async fn get_records(&self, iterator: &str, limit: usize) -> Result<GotRecords, ApiError>;

    async fn subscribe(
        &self,
        consumer_arn: &str,
        shard: &str,
        at: &IteratorAt,
    ) -> Result<Box<dyn ShardEvents>, ApiError>;
}

/// The polling reader (GetShardIterator, GetRecords) of `shard` at `start`, its iterator opened.
pub async fn open_polling(
    api: Arc<dyn KinesisApi>,
    stream: &str,
    shard: &str,
    start: &StartPosition,
) -> Result<Box<dyn ShardReader>, SourceError> {
    Ok(Box::new(
        KinesisReader::open(api, stream, shard, start).await?,
    ))
}

/// The enhanced fan-out reader of `shard` at `start` through consumer `consumer` (its ARN
/// `consumer_arn`): its subscription task starts at once (call inside a tokio runtime).
pub fn open_fan_out(
    api: Arc<dyn KinesisApi>,
    consumer: &str,
    consumer_arn: &str,
    stream: &str,
    shard: &str,
    start: &StartPosition,
) -> Box<dyn ShardReader> {
    let consumer = Consumer {
        name: consumer.into(),
        arn: consumer_arn.into(),
    };
    fanout::open(api, &consumer, stream, shard, start)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// One simulated shard: an iterator is a position (an index into `records`); while
    /// `expire` is set every GetRecords answers that its iterator expired.
    #[derive(Default)]
    struct Shard {
        /// (arrival ms, record)
        records: Mutex<Vec<(u64, Record)>>,
        expire: Mutex<bool>,
        opened: Mutex<Vec<IteratorAt>>,
    }

    #[async_trait]
    impl KinesisApi for Shard {
        async fn get_shard_iterator(
            &self,
            _: &str,
            _: &str,
            at: &IteratorAt,
        ) -> Result<Option<String>, ApiError> {
            self.opened.lock().unwrap().push(at.clone());
            let records = self.records.lock().unwrap();
            let index = match at {
                IteratorAt::Latest => records.len(),
                IteratorAt::TrimHorizon => 0,
                IteratorAt::Timestamp(ms) => records.iter().take_while(|r| r.0 < *ms).count(),
                IteratorAt::AtSequence(s) => records
                    .iter()
                    .take_while(|r| r.1.sequence_number != *s)
                    .count(),
                IteratorAt::AfterSequence(s) => {
                    1 + records
                        .iter()
                        .take_while(|r| r.1.sequence_number != *s)
                        .count()
                }
            };
            Ok(Some(index.to_string()))
        }

        async fn get_records(&self, iterator: &str, limit: usize) -> Result<GotRecords, ApiError> {
            if *self.expire.lock().unwrap() {
                return Err(ApiError::new(ApiErrorKind::ExpiredIterator, "expired"));
            }
            let from: usize = iterator.parse().unwrap();
            let records = self.records.lock().unwrap();
            let got: Vec<Record> = records
                .iter()
                .skip(from)
                .take(limit)
                .map(|r| r.1.clone())
                .collect();
            Ok(GotRecords {
                next_iterator: Some((from + got.len()).to_string()),
                records: got,
                millis_behind_latest: Some(0),
            })
        }

        async fn subscribe(
            &self,
            _: &str,
            _: &str,
            _: &IteratorAt,
        ) -> Result<Box<dyn ShardEvents>, ApiError> {
            unimplemented!("polling only")
        }
    }

    #[tokio::test]
    async fn a_polling_reader_at_latest_whose_iterator_expires_before_a_record_reopens_at_its_opening()
     {
        let shard = Arc::new(Shard::default());
        let api = shard.clone() as Arc<dyn KinesisApi>;
        let mut reader = open_polling(api, "s", "shard", &StartPosition::Latest)
            .await
            .unwrap();
        let opened = crate::lease::now_ms();
        *shard.expire.lock().unwrap() = true;
        shard.records.lock().unwrap().push((
            opened,
            Record {
                partition_key: "k".into(),
                sequence_number: "1".into(),
                sub_sequence_number: 0,
                approximate_arrival_timestamp: opened,
                data: b"after the start".to_vec(),
            },
        ));
        assert!(reader.read(10).await.is_err(), "the iterators expired");
        *shard.expire.lock().unwrap() = false;
        let read = reader.read(10).await.unwrap();
        assert_eq!(
            read.records.len(),
            1,
            "the record put after the start is read"
        );
        let reopened = shard.opened.lock().unwrap()[1].clone();
        let IteratorAt::Timestamp(ms) = reopened else {
            panic!("reopened at {reopened:?}, not at a time");
        };
        assert!(ms + crate::dispatch::OPENED_SLACK_MS <= opened);
    }
}
