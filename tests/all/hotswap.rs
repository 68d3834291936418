//! Hot swap under load, against kinesis-mock: records keep flowing into two shards while the
//! handler is swapped 20 times through the admin API. Every record is handled exactly once, by
//! one version, and each shard moves from version to version in deploy order, never back.

use crate::support;
use shardhost::status::ShardState;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::kinesis::Kinesis;
use crate::support::{Outcomes, Running, Scratch, guest, kinesis_endpoint, unique};
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
    let config = format!(
        r#"
[kinesis]
endpoint = "{ep}"
test_credentials = true

[leases]
renew_every = "1s"
list_every = "300ms"

[admin]
listen = "127.0.0.1:0"
token = "{TOKEN}"

[[subscription]]
name = "tagged"
stream = "{stream}"
handler = "{handler}"
start_at = "trim_horizon"
batch = 20
poll_interval = "20ms"
"#,
        handler = guest("always_ack").display()
    );
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, &config, |h| h.on_outcome(seen.tap()));
    host.wait_for("both shards read", |b| {
        b.shards_of("tagged")
            .iter()
            .filter(|s| s.status.state == ShardState::Reading)
            .count()
            == 2
    });

    // The load: one producer putting records under random keys until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let produced = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (stop, produced, stream, ep) = (stop.clone(), produced.clone(), stream.clone(), ep);
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

    let ack = std::fs::read(guest("always_ack")).unwrap();
    let drop = std::fs::read(guest("always_drop")).unwrap();
    let version = |b: &[u8]| shardhost::wasm::version_of(b);
    let client = host.admin(Some(TOKEN));
    let put = |bytes: Vec<u8>| {
        host.block_on(client.send(Method::PUT, "/subscriptions/tagged/handler", bytes))
            .unwrap()
    };
    // Deploy order: ack (at start), drop, ack, drop, ...
    for i in 0..SWAPS {
        std::thread::sleep(Duration::from_millis(150));
        if i == SWAPS / 2 {
            let refused = put(b"\0asm\x0d\0\x01\0 broken".to_vec());
            assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
        }
        let bytes = if i % 2 == 0 {
            drop.clone()
        } else {
            ack.clone()
        };
        let answer = put(bytes);
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.message());
    }
    std::thread::sleep(Duration::from_millis(150));
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let n = produced.load(Ordering::Relaxed);
    host.wait_for(&format!("{n} records handled"), |_| seen.len() >= n);
    std::thread::sleep(Duration::from_millis(300));
    host.stop();

    let all = seen.all();
    let mut once: HashMap<&str, usize> = HashMap::new();
    for s in &all {
        *once.entry(s.data.as_str()).or_default() += 1;
    }
    assert_eq!(once.len(), n, "every record produced was handled");
    assert!(
        once.values().all(|&c| c == 1),
        "no record was handled twice (no lease was lost)"
    );
    let (ack_v, drop_v) = (version(&ack), version(&drop));
    for s in &all {
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
    let mut runs_total = 0;
    for shard in ["shardId-000000000000", "shardId-000000000001"] {
        let mut records: Vec<_> = all.iter().filter(|s| s.shard_id == shard).collect();
        records.sort_by(|a, b| {
            let key = |s: &support::Seen| (s.sequence_number.len(), s.sequence_number.clone());
            key(a).cmp(&key(b))
        });
        let mut runs: Vec<&str> = Vec::new();
        for s in &records {
            if runs.last() != Some(&s.version.as_str()) {
                runs.push(&s.version);
            }
        }
        // (A shard may see its first records only after a swap or two, so its first version
        // is not asserted.)
        assert!(
            runs.len() <= SWAPS + 1,
            "{shard} switched versions {} times for {SWAPS} swaps: it went back",
            runs.len() - 1
        );
        runs_total += runs.len();
    }
    eprintln!("{n} records, {runs_total} runs of versions over 2 shards");
    assert!(
        runs_total >= SWAPS / 2,
        "the swaps took effect while records flowed ({runs_total} runs of versions)"
    );
}
