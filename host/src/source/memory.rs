//! The embedded stream: an in-process stand-in for Kinesis.
//!
//! Streams have shards that divide the 128-bit hash key space evenly; a record goes to the shard
//! whose range holds the MD5 of its partition key, as in Kinesis, and gets a sequence number that
//! grows within its shard. Nothing leaves the process and nothing is kept after it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use md5::{Digest, Md5};

use super::{
    PutAnswers, PutEntry, ReadBatch, ShardInfo, ShardReader, SourceError, StartPosition,
    StreamSource,
};
use crate::lease::now_ms;
use crate::record::Record;

/// The embedded stream service. Cheap to clone; clones share the streams.
#[derive(Clone, Debug, Default)]
pub struct MemoryStreams {
    streams: Arc<RwLock<HashMap<String, Arc<Stream>>>>,
}

#[derive(Debug)]
struct Stream {
    shards: Vec<Shard>,
}

#[derive(Debug)]
struct Shard {
    id: String,
    index: usize,
    /// Inclusive start of this shard's hash key range.
    hash_start: u128,
    records: RwLock<Vec<Record>>,
}

/// The shard id Kinesis gives the n-th shard of a stream.
pub fn shard_id(n: usize) -> String {
    format!("shardId-{n:012}")
}

/// The Kinesis hash key of a partition key: the MD5 digest as a 128-bit big-endian number.
pub fn hash_key(partition_key: &str) -> u128 {
    u128::from_be_bytes(Md5::digest(partition_key.as_bytes()).into())
}

impl Stream {
    fn new(shard_count: u32) -> Stream {
        let n = shard_count.max(1) as u128;
        let width = u128::MAX / n;
        let shards = (0..shard_count.max(1) as usize)
            .map(|i| Shard {
                id: shard_id(i),
                index: i,
                hash_start: width * i as u128,
                records: RwLock::new(Vec::new()),
            })
            .collect();
        Stream { shards }
    }

    fn shard_for(&self, partition_key: &str) -> &Shard {
        let h = hash_key(partition_key);
        self.shards
            .iter()
            .rev()
            .find(|s| s.hash_start <= h)
            .expect("the first shard starts at 0")
    }
}

impl Shard {
    fn sequence_number(&self, n: usize) -> String {
        // 56 digits, like Kinesis; grows within the shard.
        format!("4960{:020}{:032}", self.index, n + 1)
    }

    fn start_index(&self, start: &StartPosition) -> usize {
        let records = self.records.read().expect("shard poisoned");
        match start {
            StartPosition::TrimHorizon => 0,
            StartPosition::Latest => records.len(),
            StartPosition::Timestamp(ms) => {
                records.partition_point(|r| r.approximate_arrival_timestamp < *ms)
            }
            StartPosition::After(p) => records.partition_point(|r| r.position() <= *p),
            StartPosition::At(p) => records.partition_point(|r| r.position() < *p),
        }
    }
}

impl MemoryStreams {
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates a stream with this many shards (at least one); an existing stream is kept.
    pub fn create(&self, stream: &str, shards: u32) {
        self.streams
            .write()
            .expect("streams poisoned")
            .entry(stream.to_owned())
            .or_insert_with(|| Arc::new(Stream::new(shards)));
    }

    fn stream(&self, stream: &str) -> Result<Arc<Stream>, SourceError> {
        self.streams
            .read()
            .expect("streams poisoned")
            .get(stream)
            .cloned()
            .ok_or_else(|| SourceError::NoSuchStream(stream.to_owned()))
    }

    /// Puts a record without going through async; answers the shard id and sequence number.
    pub fn put_now(
        &self,
        stream: &str,
        partition_key: &str,
        data: Vec<u8>,
    ) -> Result<(String, String), SourceError> {
        let stream = self.stream(stream)?;
        let shard = stream.shard_for(partition_key);
        let mut records = shard.records.write().expect("shard poisoned");
        let sequence_number = shard.sequence_number(records.len());
        records.push(Record {
            partition_key: partition_key.into(),
            sequence_number: sequence_number.clone(),
            sub_sequence_number: 0,
            approximate_arrival_timestamp: now_ms(),
            data,
        });
        Ok((shard.id.clone(), sequence_number))
    }

    /// Every record of one shard, oldest first.
    pub fn records(&self, stream: &str, shard_id: &str) -> Result<Vec<Record>, SourceError> {
        let s = self.stream(stream)?;
        let shard = find_shard(&s, stream, shard_id)?;
        Ok(shard.records.read().expect("shard poisoned").clone())
    }
}

fn find_shard<'a>(
    stream: &'a Stream,
    name: &str,
    shard_id: &str,
) -> Result<&'a Shard, SourceError> {
    stream
        .shards
        .iter()
        .find(|s| s.id == shard_id)
        .ok_or_else(|| SourceError::NoSuchShard {
            stream: name.to_owned(),
            shard: shard_id.to_owned(),
        })
}

#[async_trait]
impl StreamSource for MemoryStreams {
    /// In-process: no read limit.
    fn read_interval(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    fn read_bytes_per_second(&self) -> Option<u64> {
        None
    }

    async fn ensure_stream(&self, stream: &str, create: Option<u32>) -> Result<(), SourceError> {
        match create {
            Some(n) => {
                self.create(stream, n);
                Ok(())
            }
            None => self.stream(stream).map(drop),
        }
    }

    async fn list_shards(&self, stream: &str) -> Result<Vec<ShardInfo>, SourceError> {
        Ok(self
            .stream(stream)?
            .shards
            .iter()
            .map(|s| ShardInfo {
                shard_id: s.id.clone(),
                parents: Vec::new(),
                closed: false,
            })
            .collect())
    }

    async fn open(
        &self,
        stream: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<Box<dyn ShardReader>, SourceError> {
        let s = self.stream(stream)?;
        let index = find_shard(&s, stream, shard_id)?.index;
        let next = s.shards[index].start_index(start);
        Ok(Box::new(MemoryReader {
            stream: s,
            index,
            next,
        }))
    }

    async fn put(
        &self,
        stream: &str,
        partition_key: &str,
        data: Vec<u8>,
    ) -> Result<String, SourceError> {
        self.put_now(stream, partition_key, data)
            .map(|(_, seq)| seq)
    }

    /// Every record is put, in order (a stream that does not exist fails the call).
    async fn put_many(
        &self,
        stream: &str,
        records: Vec<PutEntry>,
    ) -> Result<PutAnswers, SourceError> {
        self.stream(stream)?;
        Ok(records
            .into_iter()
            .map(|r| {
                self.put_now(stream, &r.partition_key, r.data)
                    .map(|(_, seq)| seq)
            })
            .collect())
    }
}

struct MemoryReader {
    stream: Arc<Stream>,
    index: usize,
    next: usize,
}

#[async_trait]
impl ShardReader for MemoryReader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        let records = self.stream.shards[self.index]
            .records
            .read()
            .expect("shard poisoned");
        let end = (self.next + limit.max(1)).min(records.len());
        let batch = records[self.next..end].to_vec();
        self.next = end;
        let millis_behind_latest = match records.get(end) {
            Some(r) => Some(now_ms().saturating_sub(r.approximate_arrival_timestamp)),
            None => Some(0),
        };
        Ok(ReadBatch {
            records: batch,
            millis_behind_latest,
            end_of_shard: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Position;

    #[test]
    fn partition_keys_spread_over_shards_by_md5_and_keep_their_shard() {
        let streams = MemoryStreams::new();
        streams.create("orders", 2);
        let mut seen = std::collections::HashSet::new();
        for i in 0..50 {
            let key = format!("customer-{i}");
            let (a, _) = streams.put_now("orders", &key, vec![1]).unwrap();
            let (b, _) = streams.put_now("orders", &key, vec![2]).unwrap();
            assert_eq!(a, b, "one partition key, one shard");
            seen.insert(a);
        }
        assert_eq!(seen.len(), 2, "50 keys land on both shards");
    }

    #[test]
    fn hash_keys_are_the_md5_of_the_partition_key() {
        // md5("") = d41d8cd98f00b204e9800998ecf8427e
        assert_eq!(hash_key(""), 0xd41d8cd98f00b204e9800998ecf8427e);
    }

    #[tokio::test]
    async fn readers_open_at_trim_horizon_latest_or_after_a_checkpoint() {
        let streams = MemoryStreams::new();
        streams.create("s", 1);
        let seqs: Vec<_> = (0..5)
            .map(|i| streams.put_now("s", "k", vec![i]).unwrap().1)
            .collect();
        let shard = shard_id(0);
        let read = |start: StartPosition| {
            let streams = streams.clone();
            let shard = shard.clone();
            async move {
                let mut r = streams.open("s", &shard, &start).await.unwrap();
                r.read(100).await.unwrap().records
            }
        };
        assert_eq!(read(StartPosition::TrimHorizon).await.len(), 5);
        assert_eq!(read(StartPosition::Latest).await.len(), 0);
        let rest = read(StartPosition::After(Position::new(&seqs[1], 0))).await;
        assert_eq!(rest.first().map(|r| r.data.clone()), Some(vec![2]));
        assert_eq!(rest.len(), 3);
    }

    #[tokio::test]
    async fn put_many_puts_every_record_in_order_and_fails_whole_on_a_missing_stream() {
        let streams = MemoryStreams::new();
        streams.create("s", 1);
        let entries: Vec<PutEntry> = (0..3)
            .map(|i| PutEntry {
                partition_key: "k".into(),
                data: vec![i],
            })
            .collect();
        let answers = streams.put_many("s", entries.clone()).await.unwrap();
        let seqs: Vec<String> = answers.into_iter().map(Result::unwrap).collect();
        let read = streams.records("s", &shard_id(0)).unwrap();
        assert_eq!(
            read.iter()
                .map(|r| r.sequence_number.clone())
                .collect::<Vec<_>>(),
            seqs
        );
        assert_eq!(
            read.iter().map(|r| r.data[0]).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert!(matches!(
            streams.put_many("missing", entries).await,
            Err(SourceError::NoSuchStream(_))
        ));
    }

    #[tokio::test]
    async fn a_reader_goes_on_where_its_last_read_stopped() {
        let streams = MemoryStreams::new();
        streams.create("s", 1);
        for i in 0..5 {
            streams.put_now("s", "k", vec![i]).unwrap();
        }
        let mut r = streams
            .open("s", &shard_id(0), &StartPosition::TrimHorizon)
            .await
            .unwrap();
        let first = r.read(3).await.unwrap();
        assert_eq!(first.records.len(), 3);
        assert!(first.millis_behind_latest.is_some());
        let second = r.read(3).await.unwrap();
        assert_eq!(
            second.records.iter().map(|r| r.data[0]).collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert!(r.read(3).await.unwrap().records.is_empty());
    }
}
