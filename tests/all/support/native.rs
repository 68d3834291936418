//! A subscription run in process with a native handler (a closure) on the embedded stream or a
//! source wrapped around it, under tokio's paused clock: minutes of reading, throttles and
//! back-offs pass in milliseconds, and what the worker does is measured in virtual time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardhost::config::StartAt;
use shardhost::handler::{CallContext, CallError, Handler, HandlerFactory};
use shardhost::lease::{LeaseStore, MemoryLeaseStore};
use shardhost::record::{BatchInfo, BatchOutcome, Outcome, Record};
use shardhost::slot::HandlerSlot;
use shardhost::source::StreamSource;
use shardhost::status::StatusBoard;
use shardhost::testing::{Coordinator, InFlight, LeaseSettings, MemoryStreams, SubscriptionPlan};
use tokio_util::sync::CancellationToken;

/// What a native handler answers for one call: an outcome per record, and where to seek.
pub struct Answer {
    pub outcomes: Vec<Outcome>,
    pub seek: Option<String>,
}

impl Answer {
    pub fn each(outcomes: Vec<Outcome>) -> Answer {
        Answer {
            outcomes,
            seek: None,
        }
    }
}

type Script = dyn Fn(&BatchInfo, &[Record]) -> Answer + Send + Sync;

/// A handler whose every call runs `script`.
pub struct Native(pub Arc<Script>);

impl Native {
    pub fn new(script: impl Fn(&[Record]) -> Answer + Send + Sync + 'static) -> Arc<Native> {
        Arc::new(Native(Arc::new(move |_: &BatchInfo, r: &[Record]| {
            script(r)
        })))
    }

    /// A handler whose script also sees the call's `BatchInfo` (its attempt number).
    pub fn with_info(
        script: impl Fn(&BatchInfo, &[Record]) -> Answer + Send + Sync + 'static,
    ) -> Arc<Native> {
        Arc::new(Native(Arc::new(script)))
    }
}

struct Instance {
    script: Arc<Script>,
    seek: Option<String>,
}

#[async_trait::async_trait]
impl Handler for Instance {
    fn version(&self) -> &str {
        "native"
    }

    async fn handle(
        &mut self,
        info: &BatchInfo,
        records: &[Record],
    ) -> Result<BatchOutcome, CallError> {
        let answer = (self.script)(info, records);
        self.seek = answer.seek;
        Ok(BatchOutcome::Each(answer.outcomes))
    }

    fn take_seek(&mut self) -> Option<String> {
        self.seek.take()
    }
}

#[async_trait::async_trait]
impl HandlerFactory for Native {
    fn version(&self) -> String {
        "native".into()
    }

    async fn instantiate(&self, _: &CallContext) -> Result<Box<dyn Handler>, CallError> {
        Ok(Box::new(Instance {
            script: self.0.clone(),
            seek: None,
        }))
    }
}

/// Every outcome settled, in order: (shard, sequence number, outcome).
pub type Settlements = Arc<Mutex<Vec<(String, String, Outcome)>>>;

/// One subscription `sub` on stream `stream`, read from its trim horizon by a native handler.
pub struct NativeRun {
    pub status: StatusBoard,
    /// The subscription's handler slot (a shadow is set here).
    pub slot: Arc<HandlerSlot>,
    pub settled: Settlements,
    pub store: Arc<MemoryLeaseStore>,
    pub stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// How a [`NativeRun`] reads and calls.
pub struct Plan {
    pub read_limit: usize,
    pub call_batch: usize,
    pub poll_interval: Duration,
    /// A retry cap (none: retry holds the record).
    pub retry: Option<shardhost::config::RetryPolicy>,
    /// Without a cap, the longest wait before a record answered retry-after is called again.
    pub in_place_max_delay: Duration,
    /// What a shard may hold in memory beyond the batch it reads.
    pub in_flight: InFlight,
    /// The lease store (a new memory store when `None`): pass one run's to restart on it.
    pub store: Option<Arc<MemoryLeaseStore>>,
    /// What the worker writes its leases through, wrapped around the memory store (a store that
    /// fails some writes); the memory store itself when `None`.
    pub wrap_store: Option<StoreWrapper>,
}

/// Wraps the memory store of a [`NativeRun`] (to fail some of its writes).
pub type StoreWrapper = Box<dyn FnOnce(Arc<MemoryLeaseStore>) -> Arc<dyn LeaseStore>>;

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            read_limit: 100,
            call_batch: 100,
            poll_interval: Duration::from_secs(1),
            retry: None,
            in_place_max_delay: shardhost::config::defaults::IN_PLACE_MAX_DELAY,
            in_flight: InFlight::default(),
            store: None,
            wrap_store: None,
        }
    }
}

impl NativeRun {
    pub fn start(
        source: Arc<dyn StreamSource>,
        stream: &str,
        handler: Arc<dyn HandlerFactory>,
        plan: Plan,
    ) -> NativeRun {
        let settled: Settlements = Arc::default();
        let tap_into = settled.clone();
        let status = StatusBoard::new();
        let store = plan
            .store
            .clone()
            .unwrap_or_else(|| Arc::new(MemoryLeaseStore::new()));
        let slot = Arc::new(HandlerSlot::new(handler));
        let coordinator = Coordinator {
            plan: Arc::new(SubscriptionPlan {
                name: Arc::from("sub"),
                stream: Arc::from(stream),
                rows: Default::default(),
                read_limit: plan.read_limit,
                call_batch: plan.call_batch,
                checkpoint_every: Duration::ZERO,
                poll_interval: plan.poll_interval,
                start_at: StartAt::TrimHorizon,
                handler: slot.clone(),
                metrics: Arc::new(shardhost::Metrics::new()),
                lanes: 1,
                in_flight: plan.in_flight,
                retry: plan.retry,
                in_place_max_delay: plan.in_place_max_delay,
                publisher: None,
                envelopes: Arc::new(
                    shardhost::testing::envelope::EnvelopeKey::from_bytes([0; 32]).into(),
                ),
                subscriptions: Arc::new([Arc::from("sub")]),
                role: Default::default(),
                commit_state: false,
                state_conflicts: Default::default(),
                tap: Some(Arc::new(move |s| {
                    tap_into.lock().unwrap().push((
                        s.shard_id.to_owned(),
                        s.record.sequence_number.clone(),
                        s.outcome,
                    ))
                })),
            }),
            source,
            store: match plan.wrap_store {
                Some(wrap) => wrap(store.clone()),
                None => store.clone() as Arc<dyn LeaseStore>,
            },
            owner: Arc::from("native"),
            timings: LeaseSettings {
                ttl: Duration::from_secs(10),
                renew_every: Duration::from_secs(3),
                list_every: Duration::from_secs(10),
                balance: false,
            },
            status: status.clone(),
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move { coordinator.run(stop).await.expect("the subscription ran") }
        });
        NativeRun {
            status,
            slot,
            settled,
            store,
            stop,
            task,
        }
    }

    /// The shard's checkpoint as the status board shows it.
    pub fn checkpoint(&self, shard: &str) -> Option<String> {
        self.status
            .shards_of("sub")
            .into_iter()
            .find(|r| r.shard_id == shard)
            .and_then(|r| r.status.checkpoint)
    }

    /// The shard's status as the status board shows it.
    pub fn shard(&self, shard: &str) -> Option<shardhost::status::ShardStatus> {
        self.status
            .shards_of("sub")
            .into_iter()
            .find(|r| r.shard_id == shard)
            .map(|r| r.status)
    }

    /// Waits (in virtual time, a tick at a time) until `cond` holds, at most `within`.
    pub async fn wait(&self, within: Duration, mut cond: impl FnMut(&NativeRun) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if cond(self) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cond(self)
    }

    pub async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

/// An embedded stream of one shard holding `records` (data: their index as text).
pub fn one_shard(stream: &str, records: usize) -> MemoryStreams {
    let streams = MemoryStreams::new();
    streams.create(stream, 1);
    for i in 0..records {
        streams
            .put_now(stream, "k", i.to_string().into_bytes())
            .unwrap();
    }
    streams
}
