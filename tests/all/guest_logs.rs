//! What a guest writes to the log is bounded per shard, not per instance: a failing batch is
//! bisected on fresh instances, and none of them may start the budget over.

use std::time::{Duration, Instant};

use crate::support::fleet::Instance;
use crate::support::{HostToml, Scratch, Subscription, guest, key_on_shard, text_record};

/// The documented bound (docs/security.md, "The sandbox"): a shard's guest log lets through bursts of
/// 2 MiB and 1 MiB a second after that, whatever the number of instances.
const BURST_BYTES: f64 = 2.0 * 1024.0 * 1024.0;
const BYTES_PER_SECOND: f64 = 1024.0 * 1024.0;

#[test]
fn a_bisected_batch_that_logs_big_lines_then_panics_stays_within_the_shards_log_budget() {
    let dir = Scratch::new("guest-log-budget");
    let k = key_on_shard(0, 1, "k");
    // Each record logs 2 000 lines of 4 000 bytes (8 MB), then panics: one batch of 4 is
    // called 7 times on fresh instances while it is bisected, and every record ends held.
    let line = "x".repeat(4000);
    let records: Vec<_> = (0..4)
        .map(|_| text_record(&k, &format!("log-many:2000:{line};panic")))
        .collect();
    dir.write("feed.ndjson", records.join("\n"));
    let sub = Subscription::new("test", "s", guest("scripted"))
        .feed("feed.ndjson")
        .create_if_missing(1)
        .batch(4)
        .poll_interval("20ms")
        .limit("timeout", "5s");
    let started = Instant::now();
    let host = Instance::start(&dir, "host", HostToml::memory().subscription(sub));
    host.wait_for(
        "every record of the batch held",
        Duration::from_secs(120),
        |h| h.outcomes().len() == 4,
    );
    let elapsed = started.elapsed().as_secs_f64();
    let handled = host.handled();
    let logged: usize = handled.iter().map(|(_, m)| m.len()).sum();
    let bound = BURST_BYTES + BYTES_PER_SECOND * elapsed;
    assert!(
        (logged as f64) <= bound,
        "{logged} bytes of guest log ({} lines) in {elapsed:.1} s; the bound is {bound:.0}",
        handled.len()
    );
    let dropped: Vec<_> = host
        .lines()
        .into_iter()
        .filter(|v| v["fields"]["dropped_bytes"].as_u64().is_some_and(|b| b > 0))
        .collect();
    assert_eq!(
        dropped.len(),
        1,
        "the log says once, for the batch, how much it dropped: {dropped:?}"
    );
}
