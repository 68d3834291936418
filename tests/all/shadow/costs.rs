//! What a shadow may cost the version that settles records: nothing it waits on. A shadow stuck
//! on its state reads holds none of the permits (`[subscription.state] max_in_flight`) the live
//! version's state calls need (dynalite, behind a proxy that holds one read's answer); a
//! shadow's batch copies count in the shard's in-flight bound while it holds them, and `status`
//! shows them (a native handler, on the embedded stream).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use shardhost::capability::http::{HttpGrant, Origin};
use shardhost::capability::state::{StateGrant, StateStoreKind};
use shardhost::config::{Limits, WasiGrants};
use shardhost::handler::{CallContext, CallError, Handler, HandlerFactory, outcomes_per_record};
use shardhost::record::{BatchInfo, BatchOutcome, Outcome, Record};
use shardhost::shadow::Shadow;
use shardhost::source::{ReadBatch, ShardReader, SourceError};
use shardhost::testing::{InFlight, MemoryStreams, Runtime};

use crate::state::state_table;
use crate::support::dynamo::Dynamo;
use crate::support::native::{Answer, Native, NativeRun, Plan};
use crate::support::proxy::LateAnswerProxy;
use crate::support::reads::WrappedReads;
use crate::support::{dynamodb_endpoint, guest};

/// The conformance handler's grants: state in `table` at `endpoint` with one DynamoDB request
/// in flight at most, HTTP to nowhere.
fn one_permit(table: &str, endpoint: &str) -> WasiGrants {
    WasiGrants::default()
        .with(StateGrant {
            store: StateStoreKind::Dynamo {
                table: table.to_owned(),
                endpoint: Some(endpoint.to_owned()),
                region: None,
                test_credentials: true,
            },
            ttl: None,
            buckets: Vec::new(),
            namespace: "permits/test/".to_owned(),
            max_in_flight: 1,
            timeout: Duration::from_secs(8),
            commit: Default::default(),
        })
        .with(HttpGrant {
            allow: vec![Origin::parse("http://127.0.0.1:9").unwrap()],
            timeout: Duration::from_secs(2),
            max_body: 1 << 20,
            max_in_flight: 4,
            ca_file: None,
            allow_private: false,
        })
}

/// One call of a fresh instance with `ctx` over one `state` record; its outcome.
async fn state_call(
    handler: Arc<dyn HandlerFactory>,
    ctx: CallContext,
    op: serde_json::Value,
) -> Outcome {
    let info = BatchInfo {
        stream: "permits".into(),
        shard_id: "shardId-000000000000".into(),
        millis_behind_latest: Some(0),
        attempt: 1,
    };
    let record = Record {
        partition_key: Arc::from("state"),
        sequence_number: format!("4959{:052}", 1),
        sub_sequence_number: 0,
        approximate_arrival_timestamp: 1_700_000_000_000,
        data: op.to_string().into_bytes(),
    };
    let mut instance = handler.instantiate(&ctx).await.unwrap();
    let answer = instance.handle(&info, &[record]).await.unwrap();
    outcomes_per_record(answer, 1, instance.version()).unwrap()[0]
}

#[test]
fn a_shadow_stuck_on_a_state_read_holds_none_of_the_live_versions_permits() {
    let Some(endpoint) = dynamodb_endpoint() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let table = state_table(&Dynamo::new(&endpoint), &rt);
    // The shadow's read of `stall` gets its answer 20 s late (its attempt times out after 3 s).
    let proxy = LateAnswerProxy::start(&endpoint, "GetItem", "stall", Duration::from_secs(20));
    proxy.arm();
    let grants = one_permit(&table, &proxy.url());
    let runtime = Runtime::new(None, false).unwrap();
    let limits = Limits {
        timeout: Duration::from_secs(10),
        ..Limits::default()
    };
    let handler: Arc<dyn HandlerFactory> = rt
        .block_on(runtime.load_file(&guest("conformance"), limits, &grants))
        .unwrap();
    let shadow = Shadow::new(handler.clone(), Vec::new());
    let ctx = |shadowing: bool| CallContext {
        subscription: Arc::from("permits"),
        stream: Arc::from("permits"),
        shard_id: Arc::from("shardId-000000000000"),
        publisher: None,
        delivered: None,
        metrics: None,
        log_budget: Default::default(),
        effects: shadowing.then(|| shadow.effects.clone()),
        pending: None,
    };

    let stuck = rt.spawn(state_call(
        handler.clone(),
        ctx(true),
        json!({"op": "get", "key": "stall", "expect": null}),
    ));
    crate::support::wait_until("the shadow's read held", Duration::from_secs(10), || {
        proxy.late_answers() == 1
    });
    let started = Instant::now();
    let live = rt.block_on(state_call(
        handler.clone(),
        ctx(false),
        json!({"op": "set", "key": "live", "value": "v", "expect": null}),
    ));
    let took = started.elapsed();
    assert_eq!(live, Outcome::Ack, "the live version's write");
    assert!(
        !stuck.is_finished(),
        "the live version's call waited {took:?}, until the shadow's read was answered"
    );
    // The shadow's read is answered in the end (its attempt timed out and was sent again).
    assert_eq!(rt.block_on(stuck).unwrap(), Outcome::Ack);
}

/// A shadow whose calls wait until `release` has permits; `holding` once one has its batch.
struct StuckShadow {
    holding: Arc<AtomicBool>,
    release: Arc<tokio::sync::Semaphore>,
}

struct StuckInstance {
    holding: Arc<AtomicBool>,
    release: Arc<tokio::sync::Semaphore>,
}

#[async_trait::async_trait]
impl Handler for StuckInstance {
    fn version(&self) -> &str {
        "stuck"
    }

    async fn handle(
        &mut self,
        _: &BatchInfo,
        records: &[Record],
    ) -> Result<BatchOutcome, CallError> {
        self.holding.store(true, Ordering::SeqCst);
        let _ = self.release.acquire().await;
        Ok(BatchOutcome::Each(vec![Outcome::Ack; records.len()]))
    }
}

#[async_trait::async_trait]
impl HandlerFactory for StuckShadow {
    fn version(&self) -> String {
        "stuck".into()
    }

    async fn instantiate(&self, _: &CallContext) -> Result<Box<dyn Handler>, CallError> {
        Ok(Box::new(StuckInstance {
            holding: self.holding.clone(),
            release: self.release.clone(),
        }))
    }
}

/// A reader that notes how many records each read asks for.
struct Noted {
    inner: Box<dyn ShardReader>,
    asked: Arc<Mutex<Vec<usize>>>,
}

#[async_trait::async_trait]
impl ShardReader for Noted {
    async fn read(&mut self, limit: usize) -> Result<ReadBatch, SourceError> {
        self.asked.lock().unwrap().push(limit);
        self.inner.read(limit).await
    }
}

#[tokio::test]
async fn a_shadows_batch_copy_counts_in_the_shards_in_flight_bound_while_it_holds_it() {
    const RECORDS: usize = 100;
    let streams = MemoryStreams::new();
    streams.create("s", 1);
    for _ in 0..RECORDS {
        streams.put_now("s", "k", vec![b'x'; 1000]).unwrap();
    }
    let asked = Arc::new(Mutex::new(Vec::new()));
    let noted = asked.clone();
    let source = Arc::new(WrappedReads::new(
        Arc::new(streams),
        None,
        move |inner, _, _| {
            Box::new(Noted {
                inner,
                asked: noted.clone(),
            })
        },
    ));
    let live = Native::new(|records: &[Record]| Answer::each(vec![Outcome::Ack; records.len()]));
    let plan = Plan {
        read_limit: 10,
        call_batch: 10,
        poll_interval: Duration::from_millis(20),
        in_flight: InFlight {
            records: 15,
            bytes: 1 << 30,
        },
        ..Plan::default()
    };
    let run = NativeRun::start(source, "s", live, plan);
    let (holding, release) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(tokio::sync::Semaphore::new(0)),
    );
    let stuck = StuckShadow {
        holding: holding.clone(),
        release: release.clone(),
    };
    run.slot
        .set_shadow(Some(Arc::new(Shadow::new(Arc::new(stuck), Vec::new()))));
    let report = || run.slot.shadow().1.expect("a shadow").report();

    // The live version settles every record while the shadow holds its first batch.
    let settled = run
        .wait(Duration::from_secs(30), |r| {
            holding.load(Ordering::SeqCst) && r.settled.lock().unwrap().len() == RECORDS
        })
        .await;
    assert!(settled, "{:?}", run.settled.lock().unwrap().len());
    // Status shows the copy it holds: 10 records of 1 000 bytes and a 1-byte key.
    let held = report();
    assert_eq!(
        (held.held_records, held.held_bytes),
        (10, 10 * 1001),
        "{held:?}"
    );
    // The reads from now on (the shard caught up, polling) leave it room: 15 - 10.
    asked.lock().unwrap().clear();
    let polled = run
        .wait(Duration::from_secs(30), |_| {
            asked.lock().unwrap().len() >= 3
        })
        .await;
    assert!(polled);
    let polls = asked.lock().unwrap().clone();
    assert!(polls.iter().all(|&n| n <= 5), "reads asked for {polls:?}");

    // Released, the shadow compares its batch and holds nothing more.
    release.add_permits(1000);
    let freed = run
        .wait(Duration::from_secs(30), |_| {
            let r = report();
            r.batches_compared >= 1 && r.held_records == 0 && r.held_bytes == 0
        })
        .await;
    assert!(freed, "{:?}", report());
    run.stop().await;
}
