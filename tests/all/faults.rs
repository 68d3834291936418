//! Outages (reliability goals R2 and R3), with real `shardhost` processes: the lease table or the
//! stream service stops answering for 30 s (its emulator process is paused) while records flow.
//! Loopback only; each test is bounded in time and resumes what it paused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::fleet::{Instance, Paused, Stack, stack_on};
use crate::support::kinesis::Kinesis;
use crate::support::{
    HostToml, Scratch, Subscription, dynamodb_fault_endpoint, guest, kinesis_endpoint,
    kinesis_fault_endpoint, unique, wait_until,
};

const OUTAGE: Duration = Duration::from_secs(30);
const SHARDS: [&str; 2] = ["shardId-000000000000", "shardId-000000000001"];

/// Puts `log:p-N` records, one every 50 ms, on a thread of its own until stopped.
struct Producer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl Producer {
    fn start(endpoint: &str, stream: &str) -> Producer {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, endpoint, stream) = (stop.clone(), endpoint.to_owned(), stream.to_owned());
        let thread = std::thread::spawn(move || {
            let k = Kinesis::new(&endpoint);
            let mut put = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let text = format!("p-{}", put.len());
                k.put(
                    &stream,
                    &format!("key-{}", put.len()),
                    format!("log:{text}"),
                );
                put.push(text);
                // Paces the producer: a record every 50 ms.
                std::thread::sleep(Duration::from_millis(50));
            }
            put
        });
        Producer {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and answers every record put.
    fn finish(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// How often each record was handled.
fn counts(handled: &[(String, String)]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (_, text) in handled {
        *counts.entry(text.clone()).or_default() += 1;
    }
    counts
}

#[test]
fn an_unresponsive_lease_table_stops_the_readers_and_loses_nothing() {
    let (Some(kinesis), Some((dynamodb, dynalite_pid, _turn))) =
        (kinesis_endpoint(), dynamodb_fault_endpoint())
    else {
        return;
    };
    let dir = Scratch::new("tabledown");
    let st = stack_on(kinesis, dynamodb, 2);
    // A 10 s lease renewed every 5 s: when the table stops answering, a lease may expire as soon
    // as 5 s later, and at the latest 10 s later.
    let config = st
        .host("a")
        .leases("ttl", "10s")
        .leases("renew_every", "5s")
        .leases("list_every", "1s")
        .leases("checkpoint_every", "200ms")
        .subscription(st.subscription("scripted").trim_horizon());
    let mut a = Instance::start(&dir, "a", config);
    let producer = Producer::start(&st.kinesis, &st.stream);
    a.wait_for("records to flow", Duration::from_secs(60), |i| {
        i.handled().len() >= 20
    });
    let settled = settle_under_checkpoints(&st, &a);
    pause_the_table(dynalite_pid, &a);
    let put = resume_and_finish(producer, &a, "the table");
    let seen = counts(&a.handled());
    let again: Vec<&String> = seen
        .iter()
        .filter(|(t, n)| **n > 1 && settled.contains(*t))
        .map(|(t, _)| t)
        .collect();
    assert!(
        again.is_empty(),
        "records under a checkpoint are not delivered again: {again:?}"
    );
    assert!(a.alive(), "the host rode the outage out");
    let duplicates = seen.values().filter(|n| **n > 1).count();
    eprintln!(
        "table outage: {} records put, 0 lost, {duplicates} delivered again (the replay window)",
        put.len()
    );
}

/// Waits until everything `a` handled so far is under a checkpoint (each shard's checkpoint has
/// moved twice more: none of it may be delivered again); answers those records.
fn settle_under_checkpoints(st: &Stack, a: &Instance) -> BTreeSet<String> {
    let settled: BTreeSet<String> = a.handled().into_iter().map(|(_, t)| t).collect();
    for shard in SHARDS {
        let mut seen = vec![st.checkpoint(shard)];
        wait_until(
            "the checkpoint to move twice",
            Duration::from_secs(30),
            || {
                let now = st.checkpoint(shard);
                if seen.last() != Some(&now) {
                    seen.push(now);
                }
                seen.len() >= 3
            },
        );
    }
    settled
}

/// Pauses the lease table for the whole outage; checks the readers stopped before their leases
/// could have expired (a ttl after the last renewal that got through) and stayed stopped.
fn pause_the_table(dynalite_pid: u32, a: &Instance) {
    let outage = Instant::now();
    let _paused = Paused::new(dynalite_pid);
    // The readers stay stopped: the count of handled records holds still for 3 s.
    let mut stopped_at = a.handled().len();
    let mut still_since = Instant::now();
    wait_until("the readers to stop", Duration::from_secs(20), || {
        // Samples the count every 200 ms (each sample reads the whole log).
        std::thread::sleep(Duration::from_millis(200));
        let now = a.handled().len();
        if std::mem::replace(&mut stopped_at, now) != now {
            still_since = Instant::now();
        }
        still_since.elapsed() >= Duration::from_secs(3)
    });
    let stopped_after = still_since.duration_since(outage);
    assert!(
        stopped_after < Duration::from_secs(10),
        "the readers stopped before their leases could have expired (ttl 10 s): {stopped_after:?}"
    );
    // The scenario: the table stays down for the whole outage.
    std::thread::sleep(OUTAGE.saturating_sub(outage.elapsed()));
    assert_eq!(
        a.handled().len(),
        stopped_at,
        "no record is handled while the readers hold no lease"
    );
}

/// After an outage: lets the producer run 3 s more, stops it, and waits until `a` has handled
/// every record put; answers them.
fn resume_and_finish(producer: Producer, a: &Instance, service: &str) -> Vec<String> {
    // The scenario: records keep arriving for 3 s after the service answers again.
    std::thread::sleep(Duration::from_secs(3));
    let put = producer.finish();
    a.wait_for(
        &format!("every record to be handled once {service} answers again"),
        Duration::from_secs(90),
        |i| {
            let seen = counts(&i.handled());
            put.iter().all(|t| seen.contains_key(t))
        },
    );
    put
}

#[test]
fn an_unresponsive_stream_service_is_waited_out_without_a_tight_loop_or_a_loss() {
    let Some((kinesis, kinesis_pid)) = kinesis_fault_endpoint() else {
        return;
    };
    let dir = Scratch::new("streamdown");
    let stream = unique("streamdown");
    let k = Kinesis::new(&kinesis);
    k.create(&stream, 2);
    let config = HostToml::kinesis(&kinesis)
        .owner("a")
        .leases("list_every", "1s")
        .leases("checkpoint_every", "200ms")
        .subscription(
            Subscription::new("test", &stream, guest("scripted"))
                .trim_horizon()
                .poll_interval("100ms"),
        );
    let mut a = Instance::start(&dir, "a", config);
    let producer = Producer::start(&kinesis, &stream);
    a.wait_for("records to flow", Duration::from_secs(60), |i| {
        i.handled().len() >= 20
    });
    let lines_before = a.text().lines().count();
    let paused = Paused::new(kinesis_pid);
    // The scenario: the stream service stays down for the whole outage.
    std::thread::sleep(OUTAGE);
    assert!(a.alive(), "the host lives through the outage");
    let logged = a.text().lines().count() - lines_before;
    drop(paused);
    assert!(
        logged < 100,
        "a 30 s outage is logged in a bounded number of lines, not a tight loop: {logged}\n{}",
        a.text()
    );
    resume_and_finish(producer, &a, "the stream");
    let seen = counts(&a.handled());
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "readers resume where they were: nothing twice {twice:?}"
    );
    assert!(a.alive());
}
