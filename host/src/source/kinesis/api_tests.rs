//! The real polling reader over a simulated shard (`KinesisApi`): what the simulation relies on.

use std::sync::Mutex;

use super::api::*;
use super::open_polling;
use crate::record::Record;
use crate::source::StartPosition;
use async_trait::async_trait;
use std::sync::Arc;

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
    assert!(ms + crate::source::OPENED_SLACK_MS <= opened);
}
