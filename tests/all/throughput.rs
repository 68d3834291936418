//! Reading at a shard's limit: against a source that allows what Kinesis allows (5 reads per
//! second per shard, at most 10 000 records and 10 MB per read), a backlog drains in full-size
//! reads without a throttle, a caught-up shard asks for few records until a backlog appears, and
//! an idle shard is read ever less often.
//!
//! With the old defaults (reads of `batch` = 100 records, one every 200 ms at most) the
//! 60 000-record backlog below needed 600 reads: two minutes.

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::reads::WrappedReads;
use crate::support::{HostToml, Running, Scratch, Subscription, guest, metric};
use async_trait::async_trait;
use shardhost::source::{Call, ReadBatch, ShardReader, SourceError, StartPosition, StreamSource};

/// The most bytes (data and partition keys) one GetRecords call answers.
const MAX_READ_BYTES: usize = 10 << 20;
/// Kinesis allows 5 reads per second per shard.
const MIN_READ_GAP: Duration = Duration::from_millis(200);

#[derive(Default)]
struct ReadLog {
    /// Reads answered with records or empty (not throttled).
    reads: AtomicU64,
    throttles: AtomicU64,
    /// When each shard's last answered read started.
    last: Mutex<HashMap<String, Instant>>,
    /// Every answered read.
    answered: Mutex<Vec<Answered>>,
}

/// One answered read.
#[derive(Clone, Copy, Debug)]
struct Answered {
    started: Instant,
    at: Instant,
    /// The records it asked for.
    limit: usize,
    records: usize,
}

/// A shard's reads held to Kinesis' read limits, and logged.
struct PacedReader {
    inner: Box<dyn ShardReader>,
    source: Arc<dyn StreamSource>,
    stream: String,
    shard: String,
    log: Arc<ReadLog>,
}

impl PacedReader {
    fn call(&self) -> Call {
        Call::ReadShard {
            stream: self.stream.clone(),
            shard: self.shard.clone(),
        }
    }
}

#[async_trait]
impl ShardReader for PacedReader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        if limit > 10_000 {
            return Err(SourceError::Service {
                call: self.call(),
                source: format!("limit {limit} is more than 10000").into(),
            });
        }
        let started = Instant::now();
        {
            let mut last = self.log.last.lock().unwrap();
            if last
                .get(&self.shard)
                .is_some_and(|t| started.duration_since(*t) < MIN_READ_GAP)
            {
                self.log.throttles.fetch_add(1, Ordering::Relaxed);
                return Err(SourceError::Throttled(self.call()));
            }
            last.insert(self.shard.clone(), started);
        }
        let mut batch = self.inner.read(limit).await?;
        // Past 10 MB the read stops; the next one goes on from its last record.
        let mut bytes = 0;
        let fits = batch.records.iter().position(|r| {
            bytes += r.data.len() + r.partition_key.len();
            bytes > MAX_READ_BYTES
        });
        if let Some(cut) = fits {
            batch.records.truncate(cut);
            batch.end_of_shard = false;
            let after = StartPosition::After(batch.records[cut - 1].position());
            self.inner = self.source.open(&self.stream, &self.shard, &after).await?;
        }
        self.log.reads.fetch_add(1, Ordering::Relaxed);
        self.log.answered.lock().unwrap().push(Answered {
            started,
            at: Instant::now(),
            limit,
            records: batch.records.len(),
        });
        Ok(batch)
    }
}

/// A host on the embedded stream with one subscription (`drain`, 1 shard, the `always_ack`
/// handler, defaults otherwise plus what `extra` sets), reading through the paced wrapper.
fn paced_host(
    dir: &Scratch,
    extra: impl FnOnce(Subscription) -> Subscription,
) -> (Running, Arc<ReadLog>) {
    let config = HostToml::memory().subscription(extra(Subscription::new(
        "drain",
        "s",
        guest("always_ack"),
    )));
    let log = Arc::new(ReadLog::default());
    let shared = log.clone();
    let host = Running::start_with(dir, config, move |h| {
        let inner = h.source();
        let source = inner.clone();
        let paced = WrappedReads::new(inner, Some(2 << 20), move |inner, stream, shard| {
            Box::new(PacedReader {
                inner,
                source: source.clone(),
                stream: stream.into(),
                shard: shard.into(),
                log: shared.clone(),
            })
        });
        h.use_source(Arc::new(paced));
    });
    (host, log)
}

#[test]
fn a_backlog_drains_in_full_reads_within_the_shards_read_limit() {
    const N: usize = 60_000;
    let dir = Scratch::new("throughput");
    // 100-byte records, all waiting before the host starts reading.
    let lines: Vec<_> = (0..N)
        .map(|i| support::text_record(&format!("k{}", i % 50), &format!("{i:0>100}")))
        .collect();
    dir.write("feed.ndjson", lines.join("\n"));
    let (host, log) = paced_host(&dir, |s| s.feed("feed.ndjson"));
    host.wait_for("the backlog settled", |b| {
        b.totals("drain").settled == N as u64
    });
    let metrics = host.metrics();
    let answered = log.answered.lock().unwrap().clone();
    host.stop();

    let full: Vec<_> = answered.iter().filter(|r| r.records > 0).collect();
    let sizes: Vec<_> = full.iter().map(|r| r.records).collect();
    // Reads start small and double while the read interval paces them (read_size.rs).
    let behind = sizes
        .iter()
        .position(|&n| n == 10_000)
        .unwrap_or_else(|| panic!("no read of the service maximum: {sizes:?}"));
    assert!(
        behind <= 6,
        "the reads reach the service maximum within seven reads: {sizes:?}"
    );
    let (rest, last) = (&full[behind..full.len() - 1], full[full.len() - 1]);
    assert!(
        rest.iter()
            .all(|r| r.limit == 10_000 && r.records == 10_000),
        "once behind, every read asks for and answers 10 000 records: {sizes:?}"
    );
    assert_eq!(last.limit, 10_000, "the last read too: {sizes:?}");
    assert_eq!(
        log.throttles.load(Ordering::Relaxed),
        0,
        "no read throttled"
    );
    let sub = ["subscription=\"drain\""];
    assert_eq!(
        metric(&metrics, "shardhost_read_records_sum", &sub),
        N as f64
    );
    assert_eq!(
        metric(&metrics, "shardhost_read_throttles_total", &sub),
        0.0
    );
    assert!(metric(&metrics, "shardhost_reads_total", &sub) >= 6.0);

    let (first, last) = (full[0].started, full[full.len() - 1].at);
    let secs = last.duration_since(first).as_secs_f64();
    println!(
        "drained {N} records in {} reads over {secs:.2} s of reading: {:.0} records/s",
        full.len(),
        N as f64 / secs
    );
}

#[test]
fn an_idle_shard_is_read_once_per_poll_interval_and_less_while_it_stays_empty() {
    let dir = Scratch::new("idle");
    let (host, log) = paced_host(&dir, |s| s.poll_interval("250ms"));
    // Empty reads wait 250, 500, then 1000 ms (the most): six reads take 3.75 s.
    host.wait_for("six empty reads", |_| {
        log.reads.load(Ordering::Relaxed) >= 6
    });
    let answered = log.answered.lock().unwrap().clone();
    host.put("s", "k", b"wakes the shard".to_vec());
    host.wait_for("the new record settled", |b| b.totals("drain").settled == 1);
    host.stop();

    let gaps: Vec<_> = answered
        .windows(2)
        .map(|w| w[1].started.duration_since(w[0].started))
        .collect();
    let wanted = [250, 500, 1000, 1000, 1000].map(Duration::from_millis);
    for (gap, at_least) in gaps.iter().zip(wanted) {
        assert!(
            *gap >= at_least,
            "gaps between empty reads {gaps:?}, each at least {wanted:?}"
        );
    }
    assert_eq!(log.throttles.load(Ordering::Relaxed), 0);
}

#[test]
fn a_caught_up_shard_asks_for_few_records_and_for_more_when_a_backlog_appears() {
    const N: usize = 60_000;
    let dir = Scratch::new("adaptive");
    let (host, log) = paced_host(&dir, |s| s.poll_interval("100ms"));
    host.wait_for("five reads of the empty shard", |_| {
        log.reads.load(Ordering::Relaxed) >= 5
    });
    let caught_up: Vec<_> = log
        .answered
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.limit)
        .collect();
    // A backlog: records put faster than the shard is read.
    for i in 0..N {
        host.put(
            "s",
            &format!("k{}", i % 50),
            format!("{i:0>100}").into_bytes(),
        );
    }
    host.wait_for("the backlog settled", |b| {
        b.totals("drain").settled == N as u64
    });
    let answered = log.answered.lock().unwrap().clone();
    host.stop();

    assert!(
        caught_up.iter().all(|&n| n <= 1000),
        "reads of a caught-up shard ask for at most a tenth of read_limit: {caught_up:?}"
    );
    let backlog: Vec<_> = answered[caught_up.len()..]
        .iter()
        .map(|r| (r.limit, r.records))
        .collect();
    assert!(
        backlog.contains(&(10_000, 10_000)),
        "behind, the reads grow to read_limit: {backlog:?}"
    );
    assert_eq!(log.throttles.load(Ordering::Relaxed), 0);
}
