//! The simulated streams (the read stream, and a retry stream of its own): shards over a hash
//! range, records routed by hash to the open shard whose range holds it, sequence numbers
//! growing over the whole stream (a KPL aggregate's user records share one, with sub-sequence
//! numbers), and resharding (a split closes a shard and opens two children; a merge closes two
//! adjacent shards and opens one). Each instance reaches them through its
//! own view of them (`view.rs`).

use std::sync::{Arc, Mutex};

use shardhost::lease::now_ms;
use shardhost::record::Record;
use shardhost::source::StartPosition;

use crate::log::{Log, Pos};
use crate::params::Plan;

pub(crate) struct Shard {
    pub(crate) id: String,
    pub(crate) parents: Vec<String>,
    pub(crate) closed: bool,
    /// Inclusive hash range.
    lo: u64,
    hi: u64,
    pub(crate) records: Vec<Record>,
}

/// The stream's state.
pub struct Stream {
    pub(crate) name: String,
    pub(crate) shards: Mutex<Vec<Shard>>,
    next_seq: Mutex<u64>,
    /// The number of its first shard's id (shard ids are unique across the streams).
    first_id: usize,
    pub(crate) log: Arc<Mutex<Log>>,
}

/// A record's partition key: its hash, and for a KPL user record its place in the aggregate.
fn key_of(hash: u64, sub: Option<u32>) -> String {
    match sub {
        Some(i) => format!("k{hash:x}.{i}"),
        None => format!("k{hash:x}"),
    }
}

/// The hash a partition key routes by (a KPL aggregate's, for its user records).
fn hash_of(key: &str) -> u64 {
    let hex = key.trim_start_matches('k');
    u64::from_str_radix(hex.split('.').next().unwrap_or(hex), 16).unwrap_or(0)
}

/// A record's position as the log compares it.
pub fn pos_of(record: &Record) -> Pos {
    let seq = record.sequence_number.parse().unwrap_or(u64::MAX);
    (seq, record.sub_sequence_number)
}

/// A record's data: its logical record's id.
pub fn data_of(logical: u64) -> Vec<u8> {
    logical.to_le_bytes().to_vec()
}

/// The logical record a record's data names.
pub fn logical_of(data: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(data.get(..8)?.try_into().ok()?))
}

fn shard_id(n: usize) -> String {
    format!("shardId-{n:012}")
}

/// Sequence numbers: fixed width, so they also compare as text.
pub(crate) fn seq_text(n: u64) -> String {
    format!("{n:021}")
}

impl Stream {
    pub fn new(name: &str, shards: u32, first_id: usize, log: Arc<Mutex<Log>>) -> Arc<Stream> {
        let n = u64::from(shards.max(1));
        let width = u64::MAX / n;
        let list: Vec<Shard> = (0..n)
            .map(|i| Shard {
                id: shard_id(first_id + i as usize),
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
                if name == crate::params::RETRY_STREAM {
                    l.retry_shards.insert(s.id.clone());
                }
            }
        }
        Arc::new(Stream {
            name: name.to_owned(),
            shards: Mutex::new(list),
            next_seq: Mutex::new(1_000),
            first_id,
            log,
        })
    }

    /// Puts the producer's records `users` (logical id and plan each) under the hash `hash`:
    /// one record, or a KPL aggregate of several (one sequence number, sub-sequence numbers).
    pub fn put(&self, hash: u64, users: &[(u64, Plan)]) {
        let aggregate = users.len() > 1;
        let mut shards = self.shards.lock().unwrap();
        let (shard, seq) = self.place(&mut shards, hash);
        let mut log = self.log.lock().unwrap();
        for (i, &(logical, plan)) in users.iter().enumerate() {
            let sub = aggregate.then_some(i as u32);
            let record = self.record(key_of(hash, sub), seq, sub, data_of(logical));
            let pos = pos_of(&record);
            log.produced(
                logical,
                plan,
                &shard.id,
                pos,
                record.approximate_arrival_timestamp,
            );
            shard.records.push(record);
        }
    }

    /// Puts a retry copy (`data`: its envelope) of the logical record `logical`.
    pub fn put_copy(&self, key: &str, data: Vec<u8>, logical: u64, attempt: u32) -> String {
        let mut shards = self.shards.lock().unwrap();
        let (shard, seq) = self.place(&mut shards, hash_of(key));
        let record = self.record(key.to_owned(), seq, None, data);
        let pos = pos_of(&record);
        self.log
            .lock()
            .unwrap()
            .put(&shard.id, pos, logical, attempt);
        shard.records.push(record);
        seq_text(seq)
    }

    /// The open shard that takes `hash`, and the next sequence number.
    fn place<'s>(&self, shards: &'s mut [Shard], hash: u64) -> (&'s mut Shard, u64) {
        let shard = shards
            .iter_mut()
            .find(|s| !s.closed && s.lo <= hash && hash <= s.hi)
            .expect("the open shards cover the hash range");
        let mut next = self.next_seq.lock().unwrap();
        *next += 1 + hash % 3;
        (shard, *next)
    }

    fn record(&self, key: String, seq: u64, sub: Option<u32>, data: Vec<u8>) -> Record {
        Record {
            partition_key: Arc::from(key),
            sequence_number: seq_text(seq),
            sub_sequence_number: sub.unwrap_or(0),
            approximate_arrival_timestamp: now_ms(),
            data,
        }
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
            let id = shard_id(self.first_id + shards.len());
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
        let id = shard_id(self.first_id + shards.len());
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
    pub(crate) fn start_index(&self, shard: usize, start: &StartPosition) -> usize {
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
