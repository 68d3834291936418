//! The seed 004 outcome table, end to end in process: embedded stream → coordinator → wasm
//! handler → settlement → memory lease store.

use crate::support::{HostToml, Running, Scratch, Subscription, guest, key_on_shard, text_record};
use shardhost::status::ShardState;
use shardhost::status::StatusBoard;

/// A host on the embedded stream (`shards` shards, fed from `feed.ndjson`) running the guest
/// `handler`, read in batches of `batch`.
fn config(handler: &str, shards: u32, batch: u32) -> HostToml {
    HostToml::memory()
        .leases("renew_every", "1s")
        .leases("list_every", "1s")
        .subscription(
            Subscription::new("test", "s", guest(handler))
                .feed("feed.ndjson")
                .create_if_missing(shards)
                .trim_horizon()
                .batch(batch)
                .poll_interval("20ms")
                .limit("timeout", "2s")
                .limit("memory", "32MiB"),
        )
}

fn shard(n: usize) -> String {
    format!("shardId-{n:012}")
}

fn shard_status(board: &StatusBoard, shard_id: &str) -> shardhost::status::ShardStatus {
    board
        .snapshot()
        .into_iter()
        .find(|(_, s, _)| s == shard_id)
        .map(|(_, _, st)| st)
        .unwrap_or_default()
}

fn delivered(board: &StatusBoard) -> u64 {
    board.totals("test").delivered
}

/// The sequence number the embedded stream gives the n-th record (1-based) of shard `s`.
fn seq(s: usize, n: usize) -> String {
    format!("4960{s:020}{n:032}")
}

#[test]
fn ack_and_drop_move_the_checkpoint_and_retry_holds_it_in_front_of_the_record() {
    let dir = Scratch::new("outcomes");
    let k = key_on_shard(0, 1, "k");
    let lines: Vec<_> = ["ack", "drop", "ack", "retry", "ack", "ack"]
        .iter()
        .map(|t| text_record(&k, t))
        .collect();
    dir.write("feed.ndjson", lines.join("\n"));
    let host = Running::start(&dir, config("scripted", 1, 2));
    host.wait_for("six deliveries", |b| delivered(b) == 6);
    let board = host.stop();
    let st = shard_status(&board, &shard(0));
    assert_eq!(
        st.counts.settled, 5,
        "records behind the held one are handled"
    );
    assert_eq!(st.counts.held, 1);
    assert_eq!(
        st.checkpoint.as_deref(),
        Some(seq(0, 3).as_str()),
        "the checkpoint stops in front of the held record"
    );
    assert_eq!(st.held_at.as_deref(), Some(seq(0, 4).as_str()));
}

#[test]
fn held_record_blocks_only_its_own_shard() {
    let dir = Scratch::new("held");
    let a = key_on_shard(0, 2, "a");
    let b = key_on_shard(1, 2, "b");
    let mut lines = vec![text_record(&a, "ack"), text_record(&a, "retry")];
    for _ in 0..5 {
        lines.push(text_record(&a, "ack"));
        lines.push(text_record(&b, "ack"));
    }
    dir.write("feed.ndjson", lines.join("\n"));
    let host = Running::start(&dir, config("scripted", 2, 3));
    host.wait_for("every delivery", |b| delivered(b) == 12);
    let board = host.stop();
    let held = shard_status(&board, &shard(0));
    let free = shard_status(&board, &shard(1));
    assert_eq!(held.checkpoint.as_deref(), Some(seq(0, 1).as_str()));
    assert_eq!(held.counts.settled, 6);
    assert_eq!(
        free.checkpoint.as_deref(),
        Some(seq(1, 5).as_str()),
        "the other shard's checkpoint reaches its last record"
    );
    assert_eq!(free.held_at, None);
}

#[test]
fn a_batch_outcome_settles_every_record_of_the_batch() {
    let dir = Scratch::new("batchall");
    let k = key_on_shard(0, 1, "k");
    // batchall answers all(first record's outcome): the first batch of 3 is dropped whole,
    // the second held whole.
    let lines: Vec<_> = ["drop", "retry", "retry", "retry", "ack", "ack"]
        .iter()
        .map(|t| text_record(&k, t))
        .collect();
    dir.write("feed.ndjson", lines.join("\n"));
    let host = Running::start(&dir, config("batchall", 1, 3));
    host.wait_for("six deliveries", |b| delivered(b) == 6);
    let st = shard_status(&host.stop(), &shard(0));
    assert_eq!(st.counts.settled, 3);
    assert_eq!(st.counts.held, 3);
    assert_eq!(st.checkpoint.as_deref(), Some(seq(0, 3).as_str()));
}

#[test]
fn per_record_outcomes_move_each_shards_checkpoint_on_its_own() {
    let dir = Scratch::new("each");
    let mut lines = Vec::new();
    for s in 0..2 {
        let k = key_on_shard(s, 2, "k");
        for _ in 0..4 {
            lines.push(text_record(&k, "drop"));
        }
    }
    dir.write("feed.ndjson", lines.join("\n"));
    let host = Running::start(&dir, config("scripted", 2, 3));
    host.wait_for("every delivery", |b| delivered(b) == 8);
    let board = host.stop();
    for s in 0..2 {
        let st = shard_status(&board, &shard(s));
        assert_eq!(st.checkpoint.as_deref(), Some(seq(s, 4).as_str()));
        assert_eq!(st.counts.settled, 4);
    }
}

#[test]
fn a_clean_stop_writes_the_final_checkpoint_and_releases_the_lease() {
    let dir = Scratch::new("stop");
    let k = key_on_shard(0, 1, "k");
    dir.write("feed.ndjson", text_record(&k, "ack"));
    let host = Running::start(&dir, config("always_drop", 1, 10));
    host.wait_for("the record", |b| delivered(b) == 1);
    let host = host.stop_keep();
    let st = shard_status(&host.status, &shard(0));
    let key = shardhost::lease::LeaseKey::new("s", &shard(0));
    let row = host.block_on(host.leases.read(&key)).unwrap().unwrap();
    assert_eq!(row.owner, None, "released");
    assert_eq!(
        row.checkpoint.map(|c| c.to_stored()).as_deref(),
        Some(seq(0, 1).as_str())
    );
    // The handler drops it, and the drop settles it.
    assert_eq!(st.checkpoint.as_deref(), Some(seq(0, 1).as_str()));
    assert_eq!(st.state, ShardState::Stopped);
}
