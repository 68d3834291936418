//! Hot swap under load, against kinesis-mock: records keep flowing into two shards while the
//! handler is swapped 20 times through the admin API. Every record is handled exactly once, by
//! one version, and each shard moves from version to version in deploy order, never back.

use shardhost::status::ShardState;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::kinesis::Kinesis;
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Seen, Subscription, guest, kinesis_endpoint, unique,
};
use hyper::{Method, StatusCode};
use shardhost::record::Outcome;

const TOKEN: &str = "swap-token";
const SWAPS: usize = 20;

#[test]
fn twenty_swaps_under_load_lose_nothing_and_handle_each_record_once() {
    let Some(ep) = kinesis_endpoint() else { return };
    let stream = unique("hotswap");
    Kinesis::new(&ep).create(&stream, 2);
    let dir = Scratch::new("hotswap");
    let (host, seen) = start(&dir, &ep, &stream);
    let producer = Producer::start(&ep, &stream);
    let ack = std::fs::read(guest("always_ack")).unwrap();
    let drop = std::fs::read(guest("always_drop")).unwrap();
    swap_back_and_forth(&host, &ack, &drop);
    let n = producer.finish();
    host.wait_for(&format!("{n} records handled"), |_| seen.len() >= n);
    // Proving something does not happen: no record is handled again in the next 300 ms.
    std::thread::sleep(Duration::from_millis(300));
    host.stop();

    let all = seen.all();
    assert_each_handled_once(&all, n);
    assert_answered_by_their_version(&all, &ack, &drop);
    let runs_total: usize = ["shardId-000000000000", "shardId-000000000001"]
        .into_iter()
        .map(|shard| versions_in_order(&all, shard))
        .sum();
    eprintln!("{n} records, {runs_total} runs of versions over 2 shards");
    assert!(
        runs_total >= SWAPS / 2,
        "the swaps took effect while records flowed ({runs_total} runs of versions)"
    );
}

/// A host on both shards of `stream`, running `always_ack`, with the admin API; waits until it
/// reads both shards.
fn start(dir: &Scratch, ep: &str, stream: &str) -> (Running, Outcomes) {
    let config = HostToml::kinesis(ep)
        .leases("renew_every", "1s")
        .leases("list_every", "300ms")
        .admin_with_token(TOKEN)
        .subscription(
            Subscription::new("tagged", stream, guest("always_ack"))
                .trim_horizon()
                .batch(20)
                .poll_interval("20ms"),
        );
    let seen = Outcomes::default();
    let host = Running::start_with(dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("both shards read", |b| {
        b.shards_of("tagged")
            .iter()
            .filter(|s| s.status.state == ShardState::Reading)
            .count()
            == 2
    });
    (host, seen)
}

/// The load: one producer putting records under random keys until told to stop.
struct Producer {
    stop: Arc<AtomicBool>,
    produced: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<()>,
}

impl Producer {
    fn start(ep: &str, stream: &str) -> Producer {
        let stop = Arc::new(AtomicBool::new(false));
        let produced = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (stop, produced) = (stop.clone(), produced.clone());
            let (stream, ep) = (stream.to_owned(), ep.to_owned());
            std::thread::spawn(move || {
                let k = Kinesis::new(&ep);
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    k.put(&stream, &format!("key-{}", i % 97), format!("r{i}"));
                    i += 1;
                    produced.store(i, Ordering::Relaxed);
                }
            })
        };
        Producer {
            stop,
            produced,
            thread,
        }
    }

    /// Stops; answers how many records were put.
    fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.produced.load(Ordering::Relaxed)
    }
}

/// Deploys `drop`, `ack`, `drop`, ... (the host starts on `ack`), `SWAPS` times, with a broken
/// component refused halfway.
fn swap_back_and_forth(host: &Running, ack: &[u8], drop: &[u8]) {
    let client = host.admin(Some(TOKEN));
    let put = |bytes: Vec<u8>| {
        host.block_on(client.send(Method::PUT, "/subscriptions/tagged/handler", bytes))
            .unwrap()
    };
    for i in 0..SWAPS {
        // The scenario: records flow for 150 ms on each version.
        std::thread::sleep(Duration::from_millis(150));
        if i == SWAPS / 2 {
            let refused = put(b"\0asm\x0d\0\x01\0 broken".to_vec());
            assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
        }
        let bytes = if i % 2 == 0 { drop } else { ack };
        let answer = put(bytes.to_vec());
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.message());
    }
    // The scenario: records flow for 150 ms on the last version too.
    std::thread::sleep(Duration::from_millis(150));
}

fn assert_each_handled_once(all: &[Seen], n: usize) {
    let mut once: HashMap<&str, usize> = HashMap::new();
    for s in all {
        *once.entry(s.data.as_str()).or_default() += 1;
    }
    assert_eq!(once.len(), n, "every record produced was handled");
    assert!(
        once.values().all(|&c| c == 1),
        "no record was handled twice (no lease was lost)"
    );
}

fn assert_answered_by_their_version(all: &[Seen], ack: &[u8], drop: &[u8]) {
    let version = |b: &[u8]| shardhost::testing::version_of(b);
    let (ack_v, drop_v) = (version(ack), version(drop));
    for s in all {
        let expected = if s.version == ack_v {
            Outcome::Ack
        } else if s.version == drop_v {
            Outcome::Drop
        } else {
            panic!("record {} handled by unknown version {}", s.data, s.version)
        };
        assert_eq!(
            s.outcome, expected,
            "record {} answered by its version",
            s.data
        );
    }
}

/// Checks that `shard` moved from version to version in deploy order, never back; answers its
/// number of runs of versions.
fn versions_in_order(all: &[Seen], shard: &str) -> usize {
    let mut records: Vec<_> = all.iter().filter(|s| s.shard_id == shard).collect();
    records.sort_by(|a, b| {
        let key = |s: &Seen| (s.sequence_number.len(), s.sequence_number.clone());
        key(a).cmp(&key(b))
    });
    let mut runs: Vec<&str> = Vec::new();
    for s in &records {
        if runs.last() != Some(&s.version.as_str()) {
            runs.push(&s.version);
        }
    }
    // (A shard may see its first records only after a swap or two, so its first version is not
    // asserted.)
    assert!(
        runs.len() <= SWAPS + 1,
        "{shard} switched versions {} times for {SWAPS} swaps: it went back",
        runs.len() - 1
    );
    runs.len()
}
