//! The simulated stream: shards over a hash range, records routed by hash to the open shard
//! whose range holds it, sequence numbers growing over the whole stream, and resharding (a split
//! closes a shard and opens two children; a merge closes two adjacent shards and opens one). Each
//! instance reads it through a [`StreamView`] that injects throttles, expired iterators, errors,
//! slow answers and outages.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use shardhost::lease::now_ms;
use shardhost::record::Record;
use shardhost::source::{
    Call, ReadBatch, ShardInfo, ShardReader, SourceError, StartPosition, StreamSource,
};
use tokio_util::sync::CancellationToken;

use crate::faults::Faults;
use crate::log::Log;
use crate::params::Plan;

struct Shard {
    id: String,
    parents: Vec<String>,
    closed: bool,
    /// Inclusive hash range.
    lo: u64,
    hi: u64,
    records: Vec<Record>,
}

/// The stream's state.
pub struct Stream {
    name: String,
    shards: Mutex<Vec<Shard>>,
    next_seq: Mutex<u64>,
    log: Arc<Mutex<Log>>,
}

fn shard_id(n: usize) -> String {
    format!("shardId-{n:012}")
}

/// Sequence numbers: fixed width, so they also compare as text.
fn seq_text(n: u64) -> String {
    format!("{n:021}")
}

impl Stream {
    pub fn new(name: &str, shards: u32, log: Arc<Mutex<Log>>) -> Arc<Stream> {
        let n = u64::from(shards.max(1));
        let width = u64::MAX / n;
        let list: Vec<Shard> = (0..n)
            .map(|i| Shard {
                id: shard_id(i as usize),
                parents: Vec::new(),
                closed: false,
                lo: width * i,
                hi: if i + 1 == n {
                    u64::MAX
                } else {
                    width * (i + 1) - 1
                },
                records: Vec::new(),
            })
            .collect();
        {
            let mut l = log.lock().unwrap();
            for s in &list {
                l.new_shard(&s.id, &[]);
            }
        }
        Arc::new(Stream {
            name: name.to_owned(),
            shards: Mutex::new(list),
            next_seq: Mutex::new(1_000),
            log,
        })
    }

    /// Puts a record whose partition key hashes to `hash`.
    pub fn put(&self, hash: u64, plan: Plan) {
        let mut shards = self.shards.lock().unwrap();
        let shard = shards
            .iter_mut()
            .find(|s| !s.closed && s.lo <= hash && hash <= s.hi)
            .expect("the open shards cover the hash range");
        let mut next = self.next_seq.lock().unwrap();
        *next += 1 + hash % 3;
        let seq = *next;
        shard.records.push(Record {
            partition_key: Arc::from(format!("k{hash:x}")),
            sequence_number: seq_text(seq),
            sub_sequence_number: 0,
            approximate_arrival_timestamp: now_ms(),
            data: Vec::new(),
        });
        self.log.lock().unwrap().put(&shard.id, seq, plan);
    }

    /// The open shards, by index.
    pub fn open_shards(&self) -> Vec<usize> {
        let shards = self.shards.lock().unwrap();
        (0..shards.len()).filter(|&i| !shards[i].closed).collect()
    }

    /// Splits the open shard `i` in two.
    pub fn split(&self, i: usize) {
        let mut shards = self.shards.lock().unwrap();
        let (lo, hi, parent) = (shards[i].lo, shards[i].hi, shards[i].id.clone());
        if hi - lo < 2 {
            return;
        }
        shards[i].closed = true;
        let mid = lo + (hi - lo) / 2;
        let mut log = self.log.lock().unwrap();
        log.closed.insert(parent.clone());
        for (lo, hi) in [(lo, mid), (mid + 1, hi)] {
            let id = shard_id(shards.len());
            log.new_shard(&id, std::slice::from_ref(&parent));
            shards.push(Shard {
                id,
                parents: vec![parent.clone()],
                closed: false,
                lo,
                hi,
                records: Vec::new(),
            });
        }
        log.note(|| format!("reshard: split {parent}"));
    }

    /// Merges the open shard `i` with the open shard just above its range, if there is one.
    pub fn merge(&self, i: usize) -> bool {
        let mut shards = self.shards.lock().unwrap();
        let Some(above) = shards[i].hi.checked_add(1) else {
            return false;
        };
        let Some(j) = (0..shards.len()).find(|&j| !shards[j].closed && shards[j].lo == above)
        else {
            return false;
        };
        shards[i].closed = true;
        shards[j].closed = true;
        let parents = vec![shards[i].id.clone(), shards[j].id.clone()];
        let (lo, hi) = (shards[i].lo, shards[j].hi);
        let id = shard_id(shards.len());
        let mut log = self.log.lock().unwrap();
        for p in &parents {
            log.closed.insert(p.clone());
        }
        log.new_shard(&id, &parents);
        log.note(|| format!("reshard: merge {parents:?} into {id}"));
        shards.push(Shard {
            id,
            parents,
            closed: false,
            lo,
            hi,
            records: Vec::new(),
        });
        true
    }

    /// Where a reader opens: the index of the first record it hands out.
    fn start_index(&self, shard: usize, start: &StartPosition) -> usize {
        let shards = self.shards.lock().unwrap();
        let records = &shards[shard].records;
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

/// One instance's way to the stream.
pub struct StreamView {
    pub stream: Arc<Stream>,
    pub inc: u32,
    pub faults: Arc<Faults>,
    pub killed: CancellationToken,
}

impl StreamView {
    /// Faults of one call; `Err` when it fails. A killed instance's calls never answer.
    async fn enter(&self, what: &str, read: bool, call: Call) -> Result<(), SourceError> {
        let f = self.faults.source(self.inc, what, read);
        tokio::select! {
            _ = tokio::time::sleep(f.delay) => {}
            _ = self.killed.cancelled() => std::future::pending().await,
        }
        if self.killed.is_cancelled() {
            std::future::pending::<()>().await;
        }
        if f.error {
            return Err(SourceError::Service {
                call,
                source: "injected: the stream service is unavailable".into(),
            });
        }
        if f.throttled {
            return Err(SourceError::Throttled(call));
        }
        if f.expired {
            return Err(SourceError::Service {
                call,
                source: "ExpiredIteratorException (injected; the reader reopens where it was)"
                    .into(),
            });
        }
        Ok(())
    }

    fn find(&self, shard_id: &str) -> Result<usize, SourceError> {
        let shards = self.stream.shards.lock().unwrap();
        shards
            .iter()
            .position(|s| s.id == shard_id)
            .ok_or_else(|| SourceError::NoSuchShard {
                stream: self.stream.name.clone(),
                shard: shard_id.to_owned(),
            })
    }
}

#[async_trait]
impl StreamSource for StreamView {
    async fn ensure_stream(&self, _: &str, _: Option<u32>) -> Result<(), SourceError> {
        Ok(())
    }

    async fn list_shards(&self, stream: &str) -> Result<Vec<ShardInfo>, SourceError> {
        let call = Call::ListShards {
            stream: stream.to_owned(),
        };
        self.enter("list", false, call).await?;
        let shards = self.stream.shards.lock().unwrap();
        Ok(shards
            .iter()
            .map(|s| ShardInfo {
                shard_id: s.id.clone(),
                parents: s.parents.clone(),
                closed: s.closed,
            })
            .collect())
    }

    async fn open(
        &self,
        stream: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<Box<dyn ShardReader>, SourceError> {
        let call = Call::OpenShard {
            stream: stream.to_owned(),
            shard: shard_id.to_owned(),
        };
        self.enter("open", false, call).await?;
        let shard = self.find(shard_id)?;
        let next = self.stream.start_index(shard, start);
        Ok(Box::new(Reader {
            view: StreamView {
                stream: self.stream.clone(),
                inc: self.inc,
                faults: self.faults.clone(),
                killed: self.killed.clone(),
            },
            shard,
            shard_id: shard_id.to_owned(),
            next,
        }))
    }

    async fn put(&self, _: &str, _: &str, _: Vec<u8>) -> Result<String, SourceError> {
        Err(SourceError::Service {
            call: Call::Put {
                stream: self.stream.name.clone(),
            },
            source: "the simulation's handler does not publish".into(),
        })
    }
}

/// A reader on one shard. An expired iterator is reopened where the reader was (as the Kinesis
/// reader does), so it only costs a failed read.
struct Reader {
    view: StreamView,
    shard: usize,
    shard_id: String,
    next: usize,
}

#[async_trait]
impl ShardReader for Reader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        let call = Call::ReadShard {
            stream: self.view.stream.name.clone(),
            shard: self.shard_id.clone(),
        };
        self.view.enter("read", true, call).await?;
        let shards = self.view.stream.shards.lock().unwrap();
        let shard = &shards[self.shard];
        let end = (self.next + limit.max(1)).min(shard.records.len());
        let records = shard.records[self.next..end].to_vec();
        self.next = end;
        let end_of_shard = shard.closed && end == shard.records.len();
        let millis_behind_latest = match shard.records.get(end) {
            Some(r) => Some(now_ms().saturating_sub(r.approximate_arrival_timestamp)),
            None => Some(0),
        };
        Ok(ReadBatch {
            records,
            millis_behind_latest,
            end_of_shard,
        })
    }
}
