//! The host's real readers as the simulation sees them: what each hands out is logged under
//! the take it was opened for, and a reader failing at once read after read is reported
//! (`busy-reads`).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use shardhost::source::{ReadBatch, ShardReader, SourceError};

use crate::log::Log;
use crate::stream::pos_of;

/// Reads failing at once, one after another, before a reader counts as looping on a failure
/// it never recovers from: a subscription reports a failure at most once a second (the reader
/// waits for it), a polling reader's failures take time or back off; a throttle is pacing and
/// not counted.
const INSTANT_FAILURES: u32 = 50;

/// The host's reader, logging what it hands out under the take it was opened for, and
/// catching a reader that fails at once again and again (`busy-reads`).
pub struct Logged {
    inner: Box<dyn ShardReader>,
    log: Arc<Mutex<Log>>,
    shard: String,
    take: Option<usize>,
    /// The index after the last entry handed out.
    next: usize,
    /// Reads in a row that failed the moment they were made (not throttled).
    instant_failures: u32,
    reported: bool,
}

impl Logged {
    pub fn new(
        inner: Box<dyn ShardReader>,
        log: Arc<Mutex<Log>>,
        shard: &str,
        take: Option<usize>,
        next: usize,
    ) -> Logged {
        Logged {
            inner,
            log,
            shard: shard.to_owned(),
            take,
            next,
            instant_failures: 0,
            reported: false,
        }
    }

    /// Counts a read that failed at once; reports a reader looping on a failure once.
    fn failed_at_once(&mut self, e: &SourceError) {
        self.instant_failures += 1;
        if self.reported || self.instant_failures < INSTANT_FAILURES {
            return;
        }
        self.reported = true;
        let mut log = self.log.lock().unwrap();
        let who = self
            .take
            .map_or("an instance".to_owned(), |t| log.who(log.takes[t].inc));
        let msg = format!(
            "shard {}: {who}'s reader failed at once {INSTANT_FAILURES} reads in a row, a loop that never reads again (the last: {e})",
            self.shard
        );
        log.violate("busy-reads", msg);
    }
}

#[async_trait]
impl ShardReader for Logged {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        let asked = tokio::time::Instant::now();
        let read = self.inner.read(limit).await;
        match &read {
            Err(SourceError::Throttled(_)) => {}
            Err(e) if asked.elapsed().is_zero() => self.failed_at_once(e),
            _ => self.instant_failures = 0,
        }
        let batch = read?;
        let handed: Vec<_> = batch.records.iter().map(pos_of).collect();
        let mut log = self.log.lock().unwrap();
        if let Some(last) = handed.last()
            && let Some(e) = log.entries.get(&(self.shard.clone(), *last))
        {
            self.next = e.index + 1;
        }
        log.read(self.take, &self.shard, &handed, self.next);
        Ok(batch)
    }
}
