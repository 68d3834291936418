//! What a handler asks of the host: `publish` to a stream listed in `publish_to` (any other is
//! refused), and `seek` to read its shard again from a record (a held record comes back without
//! a restart).

use crate::support::{HostToml, Outcomes, Running, Scratch, Subscription, guest, text_record};
use shardhost::record::Outcome;

fn start(dir: &Scratch, records: &[&str], batch: u32) -> (Running, Outcomes) {
    let lines: Vec<_> = records.iter().map(|t| text_record("k", t)).collect();
    dir.write("feed.ndjson", lines.join("\n"));
    let config = HostToml::memory().subscription(
        Subscription::new("calls", "s", guest("scripted"))
            .feed("feed.ndjson")
            .batch(batch)
            .poll_interval("20ms")
            .set("publish_to", vec!["out"]),
    );
    let seen = Outcomes::default();
    let host = Running::start_with(dir, config, |h| h.on_outcome(seen.tap()));
    (host, seen)
}

#[test]
fn publish_reaches_listed_streams_and_is_refused_elsewhere() {
    let dir = Scratch::new("publish");
    let (host, seen) = start(&dir, &["publish:out:hello", "publish:s2:nope"], 10);
    host.wait_for("both answered", |_| seen.len() == 2);
    let out = host.read_stream("out");
    host.stop();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (&*out[0].partition_key, &out[0].data[..]),
        ("k", &b"hello"[..])
    );
    let outcomes: Vec<_> = seen.all().iter().map(|s| s.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Ack, Outcome::Retry],
        "the guest got Ok with a sequence number, then the refusal"
    );
}

#[test]
fn seek_back_delivers_a_held_record_again() {
    let dir = Scratch::new("seek");
    let first = format!("4960{:020}{:032}", 0, 1);
    let seek = format!("seek-once:{first}");
    let (host, seen) = start(&dir, &["retry-once", &seek, "ack"], 1);
    host.wait_for("the held record handled on its second delivery", |_| {
        seen.all().iter().filter(|s| s.data == "ack").count() == 1
            && seen
                .all()
                .iter()
                .any(|s| s.data == "retry-once" && s.outcome == Outcome::Ack)
    });
    let board = host.stop();
    let first_record: Vec<_> = seen
        .all()
        .iter()
        .filter(|s| s.data == "retry-once")
        .map(|s| s.outcome)
        .collect();
    assert_eq!(
        first_record,
        [Outcome::Retry, Outcome::Ack],
        "held, then read again"
    );
    let status = &board.shards_of("calls")[0].status;
    assert_eq!(
        status.checkpoint.as_deref(),
        Some(format!("4960{:020}{:032}", 0, 3).as_str()),
        "the checkpoint moved past the once-held record"
    );
    assert_eq!(status.held_at, None);
}

#[test]
fn a_seek_to_something_that_is_not_a_sequence_number_is_refused() {
    let dir = Scratch::new("seek-bad");
    let (host, seen) = start(&dir, &["seek:not-a-number", "ack"], 10);
    host.wait_for("both answered", |_| seen.len() == 2);
    host.stop();
    let outcomes: Vec<_> = seen.all().iter().map(|s| s.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Retry, Outcome::Ack],
        "refused: the guest answered retry"
    );
}
