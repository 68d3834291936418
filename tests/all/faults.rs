//! Outages (reliability goals R2 and R3), with real `shardhost` processes: the lease table or the
//! stream service stops answering for 30 s (its emulator process is paused) while records flow.
//! Loopback only; each test is bounded in time and resumes what it paused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::dynamo::Dynamo;
use crate::support::fleet::{HostConfig, Instance, Paused, wait_until};
use crate::support::kinesis::Kinesis;
use crate::support::{
    Scratch, dynamodb_fault_endpoint, guest, kinesis_endpoint, kinesis_fault_endpoint, unique,
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
    let (Some(kinesis), Some((dynamodb, dynalite_pid))) =
        (kinesis_endpoint(), dynamodb_fault_endpoint())
    else {
        return;
    };
    let dir = Scratch::new("tabledown");
    let (stream, table) = (unique("tabledown"), unique("tabledown"));
    let k = Kinesis::new(&kinesis);
    k.create(&stream, 2);
    let d = Dynamo::new(&dynamodb);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(d.create_lease_table(&table));
    let config = HostConfig {
        owner: "a",
        kinesis: &kinesis,
        dynamodb: &dynamodb,
        table: &table,
        stream: &stream,
        handler: guest("scripted"),
        // A 10 s lease renewed every 5 s: when the table stops answering, a lease may expire
        // as soon as 5 s later, and at the latest 10 s later.
        leases: "ttl = \"10s\"\nrenew_every = \"5s\"\nlist_every = \"1s\"\ncheckpoint_every = \"200ms\"",
        subscription: "start_at = \"trim_horizon\"",
    };
    let mut a = Instance::start(&dir, "a", &config.render());
    let producer = Producer::start(&kinesis, &stream);
    a.wait_for("records to flow", Duration::from_secs(60), |i| {
        i.handled().len() >= 20
    });
    // Everything handled so far is under a checkpoint once each shard's checkpoint has moved
    // twice more: none of it may be delivered again.
    let settled: BTreeSet<String> = a.handled().into_iter().map(|(_, t)| t).collect();
    let checkpoint = |shard: &str| {
        rt.block_on(d.row(&table, &format!("{stream}:{shard}")))
            .and_then(|row| row.get("checkpoint").and_then(|v| v.as_s().ok()).cloned())
    };
    for shard in SHARDS {
        let mut seen = vec![checkpoint(shard)];
        wait_until(
            "the checkpoint to move twice",
            Duration::from_secs(30),
            || {
                let now = checkpoint(shard);
                if seen.last() != Some(&now) {
                    seen.push(now);
                }
                seen.len() >= 3
            },
        );
    }

    let outage = Instant::now();
    let paused = Paused::new(dynalite_pid);
    // The readers stop before their leases could have expired (a ttl after the last renewal
    // that got through), and stay stopped: the count of handled records holds still.
    let mut stopped_at = a.handled().len();
    let mut still_since = Instant::now();
    wait_until("the readers to stop", Duration::from_secs(20), || {
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
    std::thread::sleep(OUTAGE.saturating_sub(outage.elapsed()));
    assert_eq!(
        a.handled().len(),
        stopped_at,
        "no record is handled while the readers hold no lease"
    );
    drop(paused);

    std::thread::sleep(Duration::from_secs(3));
    let put = producer.finish();
    a.wait_for(
        "every record to be handled once the table answers again",
        Duration::from_secs(90),
        |i| {
            let seen = counts(&i.handled());
            put.iter().all(|t| seen.contains_key(t))
        },
    );
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

#[test]
fn an_unresponsive_stream_service_is_waited_out_without_a_tight_loop_or_a_loss() {
    let Some((kinesis, kinesis_pid)) = kinesis_fault_endpoint() else {
        return;
    };
    let dir = Scratch::new("streamdown");
    let stream = unique("streamdown");
    let k = Kinesis::new(&kinesis);
    k.create(&stream, 2);
    let config = format!(
        r#"[host]
owner_id = "a"

[kinesis]
endpoint = "{kinesis}"
test_credentials = true

[leases]
list_every = "1s"
checkpoint_every = "200ms"

[[subscription]]
name = "test"
stream = "{stream}"
handler = "{}"
start_at = "trim_horizon"
poll_interval = "100ms"
"#,
        guest("scripted").display()
    );
    let mut a = Instance::start(&dir, "a", &config);
    let producer = Producer::start(&kinesis, &stream);
    a.wait_for("records to flow", Duration::from_secs(60), |i| {
        i.handled().len() >= 20
    });
    let lines_before = a.text().lines().count();
    let paused = Paused::new(kinesis_pid);
    std::thread::sleep(OUTAGE);
    assert!(a.alive(), "the host lives through the outage");
    let logged = a.text().lines().count() - lines_before;
    drop(paused);
    assert!(
        logged < 100,
        "a 30 s outage is logged in a bounded number of lines, not a tight loop: {logged}\n{}",
        a.text()
    );
    std::thread::sleep(Duration::from_secs(3));
    let put = producer.finish();
    a.wait_for(
        "every record to be handled once the stream answers again",
        Duration::from_secs(90),
        |i| {
            let seen = counts(&i.handled());
            put.iter().all(|t| seen.contains_key(t))
        },
    );
    let seen = counts(&a.handled());
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "readers resume where they were: nothing twice {twice:?}"
    );
    assert!(a.alive());
}
