//! A guest that traps, runs past its timeout or its memory limit is contained: the instance is
//! thrown away, the batch's records are held like retry, the error names the handler version, and
//! the host and the other shards go on.

mod support;

use shardhost::status::{ShardStatus, StatusBoard};
use support::{Running, Scratch, guest, key_on_shard, text_record};

fn config(handler: &str) -> String {
    format!(
        r#"
[kinesis]
endpoint = "memory"

[[subscription]]
name = "test"
stream = "s"
handler = "{handler}"
feed = "feed.ndjson"
create_if_missing = 2
batch = 1
poll_interval = "20ms"

[subscription.limits]
timeout = "300ms"
memory = "16MiB"
"#
    )
}

fn status(board: &StatusBoard, shard: usize) -> ShardStatus {
    let id = format!("shardId-{shard:012}");
    board
        .snapshot()
        .into_iter()
        .find(|(_, s, _)| *s == id)
        .map(|(_, _, st)| st)
        .unwrap_or_default()
}

/// Feeds `bad` as the 2nd of 4 records on shard 0 and 4 good records on shard 1; answers both
/// shards' status once all 8 are delivered.
fn run_with_bad_record(bad: &str) -> (ShardStatus, ShardStatus) {
    let dir = Scratch::new("contain");
    let a = key_on_shard(0, 2, "a");
    let b = key_on_shard(1, 2, "b");
    let mut lines = vec![
        text_record(&a, "ack"),
        text_record(&a, bad),
        text_record(&a, "ack"),
        text_record(&a, "ack"),
    ];
    lines.extend((0..4).map(|_| text_record(&b, "ack")));
    dir.write("feed.ndjson", lines.join("\n"));
    let host = Running::start(&dir, &config(guest("scripted").to_str().unwrap()));
    host.wait_for("every delivery", |b| b.totals("test").delivered == 8);
    let board = host.stop();
    (status(&board, 0), status(&board, 1))
}

fn assert_contained(bad: (ShardStatus, ShardStatus), expect_in_error: &str) {
    let (bad, good) = bad;
    assert_eq!(bad.counts.held, 1, "only the failing record is held");
    assert_eq!(
        bad.counts.settled, 3,
        "the shard goes on with a fresh instance after the failure"
    );
    assert_eq!(
        bad.checkpoint.as_deref(),
        Some(format!("4960{:020}{:032}", 0, 1).as_str()),
        "the checkpoint stops in front of the failed record"
    );
    let error = bad.last_error.expect("the failure is reported");
    assert!(
        error.contains(expect_in_error),
        "error `{error}` should mention `{expect_in_error}`"
    );
    assert!(
        error.contains(&bad.handler_version),
        "error `{error}` names the handler version"
    );
    assert_eq!(good.counts.settled, 4, "the other shard is untouched");
    assert_eq!(good.last_error, None);
}

#[test]
fn a_trapping_guest_does_not_stop_the_host() {
    assert_contained(run_with_bad_record("panic"), "poison record");
}

#[test]
fn a_call_past_its_timeout_is_a_trap() {
    assert_contained(run_with_bad_record("spin"), "timeout of 300 ms");
}

#[test]
fn a_guest_past_its_memory_limit_is_a_trap() {
    assert_contained(run_with_bad_record("hog"), "memory limit");
}
