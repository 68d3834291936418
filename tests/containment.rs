//! A guest that traps, runs past its timeout, its memory limit or its fuel is contained: the
//! instance is thrown away, the batch is bisected until the records that fail on their own are
//! found, only those are held like retry, the error names the handler version, and the host and
//! the other shards go on.

mod support;

use shardhost::record::Outcome;
use shardhost::status::{ShardStatus, StatusBoard};
use support::{Outcomes, Running, Scratch, guest, key_on_shard, text_record};

fn config_with(handler: &str, batch: usize, limits: &str) -> String {
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
batch = {batch}
poll_interval = "20ms"

[subscription.limits]
timeout = "300ms"
memory = "16MiB"
{limits}
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
    run_with_bad_record_under(bad, "")
}

fn run_with_bad_record_under(bad: &str, limits: &str) -> (ShardStatus, ShardStatus) {
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
    let host = Running::start(
        &dir,
        &config_with(guest("scripted").to_str().unwrap(), 1, limits),
    );
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

#[test]
fn a_call_that_burns_its_fuel_is_a_trap() {
    // 10 M units: the spinning record burns them in milliseconds, long before the timeout.
    assert_contained(
        run_with_bad_record_under("spin", "fuel = 10_000_000"),
        "burned all its fuel (10000000 units per call)",
    );
}

/// Feeds `records` (texts) to one shard read in batches of `batch`; answers the shard's status
/// and every outcome the host settled, once all are delivered.
fn run_batch(records: &[&str], batch: usize) -> (ShardStatus, Vec<support::Seen>) {
    let dir = Scratch::new("bisect");
    let k = key_on_shard(0, 2, "k");
    let lines: Vec<_> = records.iter().map(|t| text_record(&k, t)).collect();
    dir.write("feed.ndjson", lines.join("\n"));
    let seen = Outcomes::default();
    let host = Running::start_with(
        &dir,
        &config_with(guest("scripted").to_str().unwrap(), batch, ""),
        |h| h.on_outcome(seen.tap()),
    );
    let n = records.len();
    host.wait_for("every record settled or held", |_| seen.len() == n);
    let board = host.stop();
    (status(&board, 0), seen.all())
}

#[test]
fn bisect_isolates_one_poison_record_in_a_batch_of_100() {
    let mut records = vec!["ack"; 100];
    records[37] = "panic";
    let (shard, seen) = run_batch(&records, 100);
    assert_eq!(seen.len(), 100, "every record is answered exactly once");
    let held: Vec<_> = seen
        .iter()
        .filter(|s| s.outcome == Outcome::Retry)
        .collect();
    assert_eq!(held.len(), 1, "only the poison record is held");
    assert_eq!(held[0].data, "panic");
    assert_eq!((shard.counts.settled, shard.counts.held), (99, 1));
    assert_eq!(
        shard.checkpoint.as_ref(),
        Some(&seen[36].sequence_number),
        "the checkpoint stops in front of the poison record"
    );
    let mut order: Vec<_> = seen.iter().map(|s| s.sequence_number.clone()).collect();
    let sorted = {
        let mut o = order.clone();
        o.sort();
        o
    };
    order.dedup();
    assert_eq!(order, sorted, "records are answered in order, once each");
    assert!(
        shard
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("poison record")),
        "{shard:?}"
    );
}

#[test]
fn a_record_past_its_timeout_is_isolated_from_its_batch() {
    let (shard, seen) = run_batch(&["ack", "spin", "ack", "ack", "drop"], 5);
    let outcomes: Vec<_> = seen.iter().map(|s| (s.data.as_str(), s.outcome)).collect();
    assert_eq!(
        outcomes,
        [
            ("ack", Outcome::Ack),
            ("spin", Outcome::Retry),
            ("ack", Outcome::Ack),
            ("ack", Outcome::Ack),
            ("drop", Outcome::Drop),
        ]
    );
    assert_eq!((shard.counts.settled, shard.counts.held), (4, 1));
}

#[test]
fn a_handler_that_traps_on_every_record_holds_them_all_and_the_host_goes_on() {
    let (shard, seen) = run_batch(&["panic"; 16], 16);
    assert_eq!(seen.len(), 16);
    assert!(seen.iter().all(|s| s.outcome == Outcome::Retry));
    assert_eq!((shard.counts.settled, shard.counts.held), (0, 16));
    assert_eq!(
        shard.checkpoint, None,
        "nothing settled, nothing checkpointed"
    );
    assert_eq!(
        shard.state, "stopped",
        "the shard was read until the host stopped"
    );
}
