//! One instance's way to the simulated streams: a [`StreamView`] that injects throttles,
//! expired iterators, errors, slow answers and outages, and fails or slows puts; a put of a
//! retry copy or a dead letter is opened and recorded in the log as what settles the record it
//! carries (the dead-letter stream only counts them). Its [`Reader`]s log what they hand out.

use std::sync::Arc;

use async_trait::async_trait;
use shardhost::lease::now_ms;
use shardhost::source::{
    Call, ReadBatch, ShardInfo, ShardReader, SourceError, StartPosition, StreamSource,
};
use shardhost::testing::envelope::{EnvelopeKeys, Kind, unwrap};
use shardhost::testing::kinesis_api::{open_fan_out, open_polling};
use tokio_util::sync::CancellationToken;

use crate::faults::Faults;
use crate::kinesis::SimKinesis;
use crate::live::Published;
use crate::log::{Log, Pos};
use crate::logged::Logged;
use crate::params::{DEAD_LETTER, ReaderKind};
use crate::stream::{Stream, logical_of, pos_of, seq_text};

/// One instance's way to the streams.
pub struct StreamView {
    /// The read stream first, then the retry stream of its own.
    pub streams: Vec<Arc<Stream>>,
    pub inc: u32,
    pub faults: Arc<Faults>,
    pub killed: CancellationToken,
    /// Opens retry copies and dead letters as they are published.
    pub keys: Arc<EnvelopeKeys>,
    pub reader: ReaderKind,
}

impl StreamView {
    /// Waits `delay`; a killed instance's calls never answer.
    async fn wait(&self, delay: std::time::Duration) {
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = self.killed.cancelled() => std::future::pending().await,
        }
        if self.killed.is_cancelled() {
            std::future::pending::<()>().await;
        }
    }

    /// Faults of one call; `Err` when it fails.
    async fn enter(&self, what: &str, read: bool, call: Call) -> Result<(), SourceError> {
        let f = self.faults.source(self.inc, what, read);
        self.wait(f.delay).await;
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

    fn stream(&self, name: &str) -> Result<&Arc<Stream>, SourceError> {
        self.streams
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| SourceError::NoSuchStream(name.to_owned()))
    }

    fn find(&self, stream: &Stream, shard_id: &str) -> Result<usize, SourceError> {
        let shards = stream.shards.lock().unwrap();
        shards
            .iter()
            .position(|s| s.id == shard_id)
            .ok_or_else(|| SourceError::NoSuchShard {
                stream: stream.name.clone(),
                shard: shard_id.to_owned(),
            })
    }

    /// What a copy or dead letter carries: its logical record, and which it is.
    fn opened(&self, data: &[u8]) -> Option<(u64, Published)> {
        let (header, original) = unwrap(&*self.keys, data).ok()??;
        let logical = logical_of(original)?;
        let what = match header.kind {
            Kind::Retry => Published::Copy(header.attempt),
            Kind::DeadLetter => Published::Letter(header.attempt),
        };
        Some((logical, what))
    }

    /// The host's polling or fan-out reader over Kinesis' calls on the simulated stream.
    async fn open_real(
        &self,
        name: &str,
        shard_id: &str,
        start: &StartPosition,
    ) -> Result<Box<dyn ShardReader>, SourceError> {
        let stream = self.stream(name)?.clone();
        let shard = self.find(&stream, shard_id)?;
        let next = stream.start_index(shard, start);
        let api = Arc::new(SimKinesis {
            stream: stream.clone(),
            inc: self.inc,
            faults: self.faults.clone(),
            killed: self.killed.clone(),
        });
        let take = self.stream_log().take_of(self.inc, shard_id);
        let inner = match self.reader {
            ReaderKind::FanOut => open_fan_out(api, "sim", "arn:sim", name, shard_id, start),
            _ => open_polling(api, name, shard_id, start).await?,
        };
        Ok(Box::new(Logged::new(
            inner,
            stream.log.clone(),
            shard_id,
            take,
            next,
        )))
    }

    fn stream_log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.streams[0].log.lock().unwrap()
    }
}

#[async_trait]
impl StreamSource for StreamView {
    fn pushes(&self) -> bool {
        self.reader == ReaderKind::FanOut
    }

    async fn ensure_stream(&self, stream: &str, _: Option<u32>) -> Result<(), SourceError> {
        self.stream(stream).map(drop)
    }

    async fn list_shards(&self, stream: &str) -> Result<Vec<ShardInfo>, SourceError> {
        let call = Call::ListShards {
            stream: stream.to_owned(),
        };
        self.enter("list", false, call).await?;
        let shards = self.stream(stream)?.shards.lock().unwrap();
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
        if self.reader != ReaderKind::Sim {
            return self.open_real(stream, shard_id, start).await;
        }
        self.enter("open", false, call).await?;
        let stream = self.stream(stream)?.clone();
        let shard = self.find(&stream, shard_id)?;
        let next = stream.start_index(shard, start);
        let take = {
            let mut log = self.stream_log();
            if *start == StartPosition::Latest {
                log.opened_latest(shard_id, next);
            }
            log.take_of(self.inc, shard_id)
        };
        Ok(Box::new(Reader {
            view: StreamView {
                streams: vec![stream],
                inc: self.inc,
                faults: self.faults.clone(),
                killed: self.killed.clone(),
                keys: self.keys.clone(),
                reader: self.reader,
            },
            shard,
            shard_id: shard_id.to_owned(),
            next,
            take,
        }))
    }

    async fn put(&self, stream: &str, key: &str, data: Vec<u8>) -> Result<String, SourceError> {
        let Some((logical, what)) = self.opened(&data) else {
            self.stream_log().violate(
                "unknown-publish",
                format!(
                    "#{} put a record that is no copy or letter into {stream}",
                    self.inc
                ),
            );
            return Ok(seq_text(0));
        };
        let by = {
            let mut log = self.stream_log();
            let by = log.put_for(self.inc, logical, what);
            by.map(|(shard, pos, take)| {
                let started = log.put_started(take, &shard, pos, stream);
                (take, shard, pos, started)
            })
        };
        let (delay, fail) = self.faults.put(self.inc, stream);
        self.wait(delay).await;
        if fail {
            if let Some((take, shard, pos, started)) = by {
                self.stream_log()
                    .put_failed(take, (&shard, pos), stream, started);
            }
            return Err(SourceError::Service {
                call: Call::Put {
                    stream: stream.to_owned(),
                },
                source: "injected: ProvisionedThroughputExceededException".into(),
            });
        }
        let target = if stream == DEAD_LETTER {
            None
        } else {
            Some(self.stream(stream)?.clone())
        };
        self.stream_log().published(self.inc, logical, what);
        Ok(match (target, what) {
            (Some(s), Published::Copy(attempt)) => s.put_copy(key, data, logical, attempt),
            _ => seq_text(0),
        })
    }
}

/// A reader on one shard. An expired iterator is reopened where the reader was (as the Kinesis
/// reader does), so it only costs a failed read. What it hands out is logged under the take it
/// was opened for.
struct Reader {
    view: StreamView,
    shard: usize,
    shard_id: String,
    next: usize,
    take: Option<usize>,
}

#[async_trait]
impl ShardReader for Reader {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        let stream = self.view.streams[0].clone();
        let call = Call::ReadShard {
            stream: stream.name.clone(),
            shard: self.shard_id.clone(),
        };
        self.view.enter("read", true, call).await?;
        let shards = stream.shards.lock().unwrap();
        let shard = &shards[self.shard];
        let end = (self.next + limit.max(1)).min(shard.records.len());
        let records = shard.records[self.next..end].to_vec();
        self.next = end;
        let end_of_shard = shard.closed && end == shard.records.len();
        let millis_behind_latest = match shard.records.get(end) {
            Some(r) => Some(now_ms().saturating_sub(r.approximate_arrival_timestamp)),
            None => Some(0),
        };
        drop(shards);
        let handed: Vec<Pos> = records.iter().map(pos_of).collect();
        stream
            .log
            .lock()
            .unwrap()
            .read(self.take, &self.shard_id, &handed, end);
        Ok(ReadBatch {
            records,
            millis_behind_latest,
            end_of_shard,
        })
    }
}
