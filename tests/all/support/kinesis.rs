//! A plain aws-sdk-kinesis client for arranging emulator tests (independent of the host's own
//! source), and a KPL aggregate encoder.

use std::time::Duration;

use super::wait_until;

use aws_sdk_kinesis::Client;
use aws_sdk_kinesis::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::StreamStatus;

/// One shard as ListShards answers it.
pub struct ShardRow {
    pub id: String,
    pub start: u128,
    pub end: u128,
    pub parent: Option<String>,
}

/// A client with its own runtime, for synchronous test code.
pub struct Kinesis {
    rt: tokio::runtime::Runtime,
    pub client: Client,
}

impl Kinesis {
    pub fn new(endpoint: &str) -> Kinesis {
        let config = aws_sdk_kinesis::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(shardhost::testing::http_client())
            .endpoint_url(endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .build();
        Kinesis {
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap(),
            client: Client::from_conf(config),
        }
    }

    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The status of stream consumer `name` of `stream`; `None` when it is not registered.
    pub fn consumer(
        &self,
        stream: &str,
        name: &str,
    ) -> Option<aws_sdk_kinesis::types::ConsumerStatus> {
        self.block_on(async {
            let summary = self
                .client
                .describe_stream_summary()
                .stream_name(stream)
                .send()
                .await
                .unwrap();
            let arn = summary
                .stream_description_summary()
                .unwrap()
                .stream_arn()
                .to_owned();
            match self
                .client
                .describe_stream_consumer()
                .stream_arn(arn)
                .consumer_name(name)
                .send()
                .await
            {
                Ok(out) => out
                    .consumer_description()
                    .map(|c| c.consumer_status().clone()),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    None
                }
                Err(e) => panic!("describe consumer {name}: {e:?}"),
            }
        })
    }

    /// Creates a stream and waits until it is ACTIVE.
    pub fn create(&self, stream: &str, shards: i32) {
        self.block_on(
            self.client
                .create_stream()
                .stream_name(stream)
                .shard_count(shards)
                .send(),
        )
        .unwrap();
        self.wait_active(stream);
    }

    pub fn wait_active(&self, stream: &str) {
        wait_until(
            &format!("stream {stream} to become ACTIVE"),
            Duration::from_secs(30),
            || {
                let out = self
                    .block_on(
                        self.client
                            .describe_stream_summary()
                            .stream_name(stream)
                            .send(),
                    )
                    .unwrap();
                out.stream_description_summary().unwrap().stream_status() == &StreamStatus::Active
            },
        );
    }

    /// Puts one record; answers (shard id, sequence number).
    pub fn put(
        &self,
        stream: &str,
        partition_key: &str,
        data: impl Into<Vec<u8>>,
    ) -> (String, String) {
        let out = self
            .block_on(
                self.client
                    .put_record()
                    .stream_name(stream)
                    .partition_key(partition_key)
                    .data(Blob::new(data.into()))
                    .send(),
            )
            .unwrap();
        (out.shard_id().to_owned(), out.sequence_number().to_owned())
    }

    /// Puts records with PutRecords, 500 a request, each sent again until every record is in;
    /// answers (shard id, sequence number) of each, in order.
    pub fn put_many(&self, stream: &str, records: &[(String, Vec<u8>)]) -> Vec<(String, String)> {
        use aws_sdk_kinesis::types::PutRecordsRequestEntry;
        let mut out = vec![(String::new(), String::new()); records.len()];
        for (chunk_at, chunk) in records.chunks(500).enumerate() {
            let mut todo: Vec<usize> = (0..chunk.len()).collect();
            while !todo.is_empty() {
                let entries = todo
                    .iter()
                    .map(|&i| {
                        PutRecordsRequestEntry::builder()
                            .partition_key(&chunk[i].0)
                            .data(Blob::new(chunk[i].1.clone()))
                            .build()
                            .unwrap()
                    })
                    .collect();
                let answer = self
                    .block_on(
                        self.client
                            .put_records()
                            .stream_name(stream)
                            .set_records(Some(entries))
                            .send(),
                    )
                    .unwrap();
                let mut again = Vec::new();
                for (&i, r) in todo.iter().zip(answer.records()) {
                    match (r.shard_id(), r.sequence_number()) {
                        (Some(shard), Some(seq)) => {
                            out[chunk_at * 500 + i] = (shard.to_owned(), seq.to_owned());
                        }
                        _ => again.push(i),
                    }
                }
                todo = again;
            }
        }
        out
    }

    /// Every record of the stream, shard by shard from the oldest: (partition key, sequence
    /// number, data).
    pub fn read_all(&self, stream: &str) -> Vec<(String, String, Vec<u8>)> {
        let mut out = Vec::new();
        for shard in self.shards(stream) {
            let mut iterator = self
                .block_on(
                    self.client
                        .get_shard_iterator()
                        .stream_name(stream)
                        .shard_id(&shard.id)
                        .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
                        .send(),
                )
                .unwrap()
                .shard_iterator
                .unwrap();
            loop {
                let page = self
                    .block_on(self.client.get_records().shard_iterator(&iterator).send())
                    .unwrap();
                if page.records().is_empty() {
                    break;
                }
                for r in page.records() {
                    out.push((
                        r.partition_key.clone().unwrap_or_default(),
                        r.sequence_number.clone(),
                        r.data.as_ref().to_vec(),
                    ));
                }
                match page.next_shard_iterator() {
                    Some(next) => iterator = next.to_owned(),
                    None => break,
                }
            }
        }
        out
    }

    /// Every shard of the stream, as listed.
    pub fn shards(&self, stream: &str) -> Vec<ShardRow> {
        let out = self
            .block_on(self.client.list_shards().stream_name(stream).send())
            .unwrap();
        out.shards()
            .iter()
            .map(|s| {
                let r = s.hash_key_range().unwrap();
                ShardRow {
                    id: s.shard_id().to_owned(),
                    start: r.starting_hash_key().parse().unwrap(),
                    end: r.ending_hash_key().parse().unwrap(),
                    parent: s.parent_shard_id().map(str::to_owned),
                }
            })
            .collect()
    }

    /// Splits a shard in the middle of its hash key range and waits until the stream is ACTIVE.
    pub fn split(&self, stream: &str, shard_id: &str) {
        let row = self
            .shards(stream)
            .into_iter()
            .find(|s| s.id == shard_id)
            .unwrap();
        let middle = row.start + (row.end - row.start) / 2;
        self.block_on(
            self.client
                .split_shard()
                .stream_name(stream)
                .shard_to_split(shard_id)
                .new_starting_hash_key(middle.to_string())
                .send(),
        )
        .unwrap();
        self.wait_active(stream);
    }

    /// Merges two adjacent shards and waits until the stream is ACTIVE.
    pub fn merge(&self, stream: &str, shard: &str, adjacent: &str) {
        self.block_on(
            self.client
                .merge_shards()
                .stream_name(stream)
                .shard_to_merge(shard)
                .adjacent_shard_to_merge(adjacent)
                .send(),
        )
        .unwrap();
        self.wait_active(stream);
    }
}

/// The KPL aggregation format: magic, protobuf `AggregatedRecord`, MD5 of the protobuf.
pub fn aggregate(records: &[(&str, &[u8])]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn field(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
        varint(out, number << 3 | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    let mut keys: Vec<&str> = Vec::new();
    let mut body = Vec::new();
    for (key, _) in records {
        if !keys.contains(key) {
            keys.push(key);
        }
    }
    for key in &keys {
        field(&mut body, 1, key.as_bytes());
    }
    for (key, data) in records {
        let mut r = Vec::new();
        varint(&mut r, 1 << 3);
        varint(&mut r, keys.iter().position(|k| k == key).unwrap() as u64);
        field(&mut r, 3, data);
        field(&mut body, 3, &r);
    }
    use md5::{Digest, Md5};
    let mut out = vec![0xF3, 0x89, 0x9A, 0xC2];
    out.extend_from_slice(&body);
    out.extend_from_slice(&Md5::digest(&body));
    out
}
