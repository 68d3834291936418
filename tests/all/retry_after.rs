//! `retry-after` without a retry cap: the record is called again in its shard after the delay,
//! each further `retry-after` waiting twice as long (up to `in_place_max_delay`), while the
//! checkpoint waits in front of it. The shipping example books every shipment once through a
//! carrier outage at start, without a restart (embedded stream in process, and `shardhost run`
//! on kinesis-mock); on tokio's paused clock, the calls and the checkpoint to the millisecond; a
//! stop while a record waits passes nothing, and the record is read again on restart.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardhost::record::{BatchInfo, Outcome, Record};
use tokio::time::Instant;

use crate::state::{shipment, state_table};
use crate::support::fleet::{Instance, stack};
use crate::support::native::{Answer, Native, NativeRun, Plan, one_shard};
use crate::support::{
    HostToml, HttpServer, Running, Scratch, Subscription, guest, wait_until_else,
};

const SHARD: &str = "shardId-000000000000";

/// The carrier's outage: it answers 503 for this long from the first booking it is asked for.
const OUTAGE: Duration = Duration::from_secs(3);

fn bookable(ids: std::ops::RangeInclusive<u64>) -> std::collections::BTreeMap<String, u64> {
    ids.map(|id| (id.to_string(), 1)).collect()
}

/// The shipping example on the embedded stream, its carrier down for the first 3 s: each
/// shipment is answered `retry-after` ("again in 1000 ms") and called again until the carrier
/// books it; every shipment is booked once, and the checkpoint passes them all, in one run.
#[test]
fn the_shipping_example_books_every_shipment_once_after_the_carrier_comes_back() {
    let carrier = HttpServer::start();
    carrier.carrier_down_at_first(OUTAGE);
    let dir = Scratch::new("retry-after-embedded");
    let sub = Subscription::new("ship", "shipments", guest("ship"))
        .create_if_missing(1)
        .trim_horizon()
        .poll_interval("100ms")
        .nested("http", "allow", vec![carrier.origin()])
        .nested(
            "config",
            "carrier_url",
            format!("{}/carrier", carrier.origin()),
        )
        .nested("state", "store", "memory");
    let host = Running::start(
        &dir,
        HostToml::memory()
            .leases("checkpoint_every", "100ms")
            .subscription(sub),
    );
    for id in 1..=5 {
        host.put(
            "shipments",
            &format!("order-{id}"),
            shipment(id, "dhl").into_bytes(),
        );
    }
    wait_until_else(
        "every shipment booked after the outage",
        Duration::from_secs(60),
        || carrier.bookings().len() == 5,
        || format!("{:?}\n{:#?}", carrier.bookings(), host.status.snapshot()),
    );
    assert!(
        carrier.refused() >= 5,
        "the outage refused {}",
        carrier.refused()
    );
    let last = host.read_stream("shipments").pop().unwrap().sequence_number;
    host.wait_for("the checkpoint to pass every shipment", |b| {
        b.shards_of("ship")
            .iter()
            .any(|s| s.status.checkpoint.as_deref() == Some(last.as_str()))
    });
    assert_eq!(carrier.bookings(), bookable(1..=5));
    host.stop();
}

/// The same on kinesis-mock, a `shardhost run` process with its state in dynalite: every
/// shipment booked once, by the one run.
#[test]
fn the_shipping_example_on_kinesis_books_every_shipment_once_after_the_carrier_comes_back() {
    let Some(st) = stack(1) else { return };
    let table = state_table(&st.d, &st.rt);
    let carrier = HttpServer::start();
    carrier.carrier_down_at_first(OUTAGE);
    let dir = Scratch::new("retry-after-kinesis");
    for id in 1..=8 {
        st.k.put(&st.stream, &format!("order-{id}"), shipment(id, "ups"));
    }
    let mut run = Instance::start(&dir, "only", st.shipping("only", &carrier, &table));
    wait_until_else(
        "every shipment booked after the outage",
        Duration::from_secs(60),
        || carrier.bookings().len() == 8,
        || format!("{:?}\n{}", carrier.bookings(), run.text()),
    );
    assert!(
        carrier.refused() >= 8,
        "the outage refused {}",
        carrier.refused()
    );
    assert!(run.logged("again in 1000 ms"), "{}", run.text());
    assert!(run.alive(), "the run ended: {}", run.text());
    assert_eq!(carrier.bookings(), bookable(1..=8));
    assert_eq!(run.interrupt(), Some(0), "{}", run.text());
}

/// One call of record `1`: when (virtual time), with which attempt number.
type Calls = Arc<Mutex<Vec<(Instant, u32)>>>;

/// A handler that answers record `1` with `answer(n)` on its `n`th call (from 0), and acks the
/// rest; its calls of record `1` go into the answered list.
fn one_retried(answer: impl Fn(usize) -> Outcome + Send + Sync + 'static) -> (Arc<Native>, Calls) {
    let calls = Calls::default();
    let seen = calls.clone();
    let handler = Native::with_info(move |info: &BatchInfo, records: &[Record]| {
        let outcomes = records
            .iter()
            .map(|r| {
                if r.data != b"1" {
                    return Outcome::Ack;
                }
                let mut calls = seen.lock().unwrap();
                calls.push((Instant::now(), info.attempt));
                answer(calls.len() - 1)
            })
            .collect();
        Answer::each(outcomes)
    });
    (handler, calls)
}

#[tokio::test(start_paused = true)]
async fn a_record_answered_retry_after_five_times_is_called_six_times_spaced_by_the_doubling() {
    let streams = one_shard("s", 3);
    let seqs: Vec<String> = streams
        .records("s", SHARD)
        .unwrap()
        .into_iter()
        .map(|r| r.sequence_number)
        .collect();
    let (handler, calls) = one_retried(|n| {
        if n < 5 {
            Outcome::RetryAfter(100)
        } else {
            Outcome::Ack
        }
    });
    let run = NativeRun::start(Arc::new(streams), "s", handler, Plan::default());
    // Until the sixth call, the checkpoint stays in front of record 1 (it may reach record 0).
    let mut seen_checkpoints = std::collections::BTreeSet::new();
    let sixth = run
        .wait(Duration::from_secs(30), |r| {
            let n = calls.lock().unwrap().len();
            if n < 6 {
                seen_checkpoints.insert(r.checkpoint(SHARD));
            }
            n >= 6
        })
        .await;
    assert!(sixth, "{:?}", calls.lock().unwrap());
    let in_front: std::collections::BTreeSet<_> = [None, Some(seqs[0].clone())].into();
    assert!(
        seen_checkpoints.is_subset(&in_front),
        "the checkpoint passed the waiting record: {seen_checkpoints:?}"
    );
    let passed = run
        .wait(Duration::from_secs(5), |r| {
            r.checkpoint(SHARD).as_deref() == Some(seqs[2].as_str())
        })
        .await;
    assert!(passed, "checkpoint {:?}", run.checkpoint(SHARD));
    tokio::time::sleep(Duration::from_secs(10)).await;
    run.stop().await;
    let calls = calls.lock().unwrap().clone();
    let attempts: Vec<u32> = calls.iter().map(|(_, a)| *a).collect();
    assert_eq!(attempts, [1, 2, 3, 4, 5, 6], "an attempt number per call");
    let gaps: Vec<u128> = calls
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_millis())
        .collect();
    assert_eq!(gaps, [100, 200, 400, 800, 1600], "waits double from 100 ms");
}

#[tokio::test(start_paused = true)]
async fn retry_after_waits_double_only_up_to_in_place_max_delay() {
    let (handler, calls) = one_retried(|n| {
        if n < 4 {
            Outcome::RetryAfter(1000)
        } else {
            Outcome::Ack
        }
    });
    let plan = Plan {
        in_place_max_delay: Duration::from_millis(2500),
        ..Plan::default()
    };
    let run = NativeRun::start(Arc::new(one_shard("s", 2)), "s", handler, plan);
    let done = run
        .wait(Duration::from_secs(60), |_| {
            calls.lock().unwrap().len() >= 5
        })
        .await;
    run.stop().await;
    assert!(done);
    let calls = calls.lock().unwrap().clone();
    let gaps: Vec<u128> = calls
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_millis())
        .collect();
    assert_eq!(gaps, [1000, 2000, 2500, 2500]);
}

#[tokio::test(start_paused = true)]
async fn a_stop_while_a_record_waits_passes_nothing_and_it_is_read_again_on_restart() {
    let streams = Arc::new(one_shard("s", 3));
    let seqs: Vec<String> = streams
        .records("s", SHARD)
        .unwrap()
        .into_iter()
        .map(|r| r.sequence_number)
        .collect();
    // Record 1 asks to wait ten minutes (a minute, the bound): the stop must not wait for it.
    let (handler, calls) = one_retried(|_| Outcome::RetryAfter(600_000));
    let first = NativeRun::start(streams.clone(), "s", handler, Plan::default());
    let store = first.store.clone();
    let waiting = first
        .wait(Duration::from_secs(10), |r| {
            r.settled.lock().unwrap().len() == 3
                && r.checkpoint(SHARD).as_deref() == Some(seqs[0].as_str())
        })
        .await;
    assert!(waiting, "{:?}", first.settled.lock().unwrap());
    // While it waits, status names it, its calls and its next try.
    let status = first.status.shards_of("sub")[0].status.clone();
    let retrying = status.retrying.expect("the waiting record in status");
    assert_eq!(
        (retrying.at.as_str(), retrying.attempts, retrying.records),
        (seqs[1].as_str(), 1, 1)
    );
    let stopping = Instant::now();
    first.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(1),
        "the stop waited {:?} for the delay",
        stopping.elapsed()
    );
    assert_eq!(calls.lock().unwrap().len(), 1);
    // Restarted on the same lease table: record 1 is read again (a first delivery) and acked.
    let (handler, again) = one_retried(|_| Outcome::Ack);
    let plan = Plan {
        store: Some(store),
        ..Plan::default()
    };
    let second = NativeRun::start(streams, "s", handler, plan);
    let passed = second
        .wait(Duration::from_secs(10), |r| {
            r.checkpoint(SHARD).as_deref() == Some(seqs[2].as_str())
        })
        .await;
    second.stop().await;
    assert!(passed);
    let again = again.lock().unwrap().clone();
    assert_eq!(again.len(), 1, "record 1 read again once: {again:?}");
    assert_eq!(again[0].1, 1, "a first delivery after the restart");
}

#[tokio::test(start_paused = true)]
async fn a_seek_back_over_a_waiting_record_reads_it_again_instead_of_calling_it_again() {
    // Record 1 answers retry-after(1 s) on its first call; in the same call, record 2 seeks
    // back to record 0. Record 1 is read again from there (a first delivery, attempt 1) and
    // acked; its wait is forgotten, so it is not called a third time.
    let streams = one_shard("s", 3);
    let seqs: Vec<String> = streams
        .records("s", SHARD)
        .unwrap()
        .into_iter()
        .map(|r| r.sequence_number)
        .collect();
    let calls = Calls::default();
    let seen = calls.clone();
    let back = seqs[0].clone();
    let handler = Native::with_info(move |info: &BatchInfo, records: &[Record]| {
        let mut calls = seen.lock().unwrap();
        let first = calls.is_empty();
        let mut seek = None;
        let outcomes = records
            .iter()
            .map(|r| match r.data.as_slice() {
                b"1" => {
                    calls.push((Instant::now(), info.attempt));
                    if first {
                        Outcome::RetryAfter(1_000)
                    } else {
                        Outcome::Ack
                    }
                }
                b"2" if first => {
                    seek = Some(back.clone());
                    Outcome::Ack
                }
                _ => Outcome::Ack,
            })
            .collect();
        Answer { outcomes, seek }
    });
    let run = NativeRun::start(Arc::new(streams), "s", handler, Plan::default());
    let passed = run
        .wait(Duration::from_secs(10), |r| {
            r.checkpoint(SHARD).as_deref() == Some(seqs[2].as_str())
        })
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    run.stop().await;
    assert!(passed);
    let attempts: Vec<u32> = calls.lock().unwrap().iter().map(|(_, a)| *a).collect();
    assert_eq!(
        attempts,
        [1, 1],
        "read again after the seek, never called again"
    );
}

#[tokio::test(start_paused = true)]
async fn the_in_flight_limit_bounds_the_records_waiting_to_be_called_again() {
    // Ten records, each answered retry-after(1 s) on its first call and acked on its second,
    // under an in-flight limit of 3 records: never more than 3 wait, reading pauses meanwhile,
    // and every record is acked in the end.
    let streams = one_shard("s", 10);
    let last = streams
        .records("s", SHARD)
        .unwrap()
        .pop()
        .unwrap()
        .sequence_number;
    let called = Arc::new(Mutex::new(std::collections::HashSet::<Vec<u8>>::new()));
    let handler = Native::new(move |records: &[Record]| {
        let mut called = called.lock().unwrap();
        let outcomes = records
            .iter()
            .map(|r| {
                if called.insert(r.data.clone()) {
                    Outcome::RetryAfter(1_000)
                } else {
                    Outcome::Ack
                }
            })
            .collect();
        Answer::each(outcomes)
    });
    let plan = Plan {
        in_flight: shardhost::testing::InFlight {
            records: 3,
            bytes: 1 << 20,
        },
        ..Plan::default()
    };
    let run = NativeRun::start(Arc::new(streams), "s", handler, plan);
    let (mut most, mut paused) = (0, false);
    let done = run
        .wait(Duration::from_secs(60), |r| {
            if let Some(shard) = r.status.shards_of("sub").into_iter().next() {
                let status = shard.status;
                most = most.max(status.retrying.map_or(0, |w| w.records));
                paused |= status.state == shardhost::status::ShardState::PausedInFlight;
            }
            r.checkpoint(SHARD).as_deref() == Some(last.as_str())
        })
        .await;
    run.stop().await;
    assert!(done, "every record acked in the end");
    assert_eq!(most, 3, "at most the in-flight limit waits");
    assert!(paused, "reading paused at the limit");
}
