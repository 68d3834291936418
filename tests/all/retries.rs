//! Retry under a cap (`max_attempts`), against kinesis-mock: retry publishes a copy of the
//! record (attempt + 1) and settles the original; after the last attempt the record goes to the
//! dead-letter stream with why; retry-after publishes its copy only once the delay is over, and a
//! stop before that delivers the record again.

use crate::support;
use shardhost::status::ShardState;

use std::time::{Duration, Instant};

use crate::support::kinesis::Kinesis;
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Subscription, guest, kinesis_endpoint, unique,
};
use shardhost::record::Outcome;
use shardhost::testing::envelope::{self, Kind};

/// The fleet secret of these tests' hosts.
pub(crate) const SECRET: &str = "retries-test-secret";

pub(crate) fn fleet_key() -> envelope::EnvelopeKey {
    envelope::EnvelopeKey::from_secret(SECRET)
}

/// A host on kinesis-mock with the fleet secret, running `scripted` on `stream` under a cap of 3
/// attempts.
fn config(ep: &str, stream: &str) -> HostToml {
    HostToml::kinesis(ep)
        .set("host", "retry_key", SECRET)
        .subscription(capped(stream))
}

fn capped(stream: &str) -> Subscription {
    Subscription::new("capped", stream, guest("scripted"))
        .create_if_missing(1)
        .trim_horizon()
        .batch(10)
        .poll_interval("50ms")
        .max_attempts(3)
        .dead_letter(&format!("{stream}-dead"))
}

fn deliveries<'a>(seen: &'a [support::Seen], data: &str) -> Vec<&'a support::Seen> {
    seen.iter().filter(|s| s.data == data).collect()
}

#[test]
fn retry_under_a_cap_publishes_copies_then_dead_letters_the_record() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("capped");
    let dir = Scratch::new("retries");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream), |h| h.on_outcome(seen.tap()));
    let (_, retry_seq) = k.put(&stream, "k1", "retry");
    k.put(&stream, "k2", "retry-until:2");
    k.put(&stream, "k3", "ack");
    // retry: 3 deliveries; retry-until:2: 2; ack: 1.
    host.wait_for("six deliveries", |_| seen.len() >= 6);
    host.wait_for("nothing held or in flight", |b| {
        let t = b.totals("capped");
        t.delivered == 6 && t.settled == 6
    });
    let board = host.stop();
    let all = seen.all();
    let retried = deliveries(&all, "retry");
    assert_eq!(
        retried.len(),
        3,
        "max_attempts deliveries, original data each time"
    );
    assert!(retried.iter().all(|s| s.outcome == Outcome::Retry));
    let until = deliveries(&all, "retry-until:2");
    let outcomes: Vec<_> = until.iter().map(|s| s.outcome).collect();
    assert_eq!(
        outcomes,
        [Outcome::Retry, Outcome::Ack],
        "the handler saw attempt 2"
    );
    assert_eq!(
        board.totals("capped").held,
        0,
        "nothing is held under a cap"
    );
    assert_copies_with_rising_attempts(&k, &stream);
    assert_one_dead_letter(&k, &stream, &retry_seq);
}

/// The stream holds the originals and the copies, with rising attempt numbers.
fn assert_copies_with_rising_attempts(k: &Kinesis, stream: &str) {
    let mut copies: Vec<(String, u32)> = k
        .read_all(stream)
        .into_iter()
        .filter_map(|(_, _, data)| {
            let (h, original) = envelope::unwrap(&fleet_key(), &data).ok()??;
            assert_eq!(h.kind, Kind::Retry);
            Some((String::from_utf8(original.to_vec()).unwrap(), h.attempt))
        })
        .collect();
    copies.sort();
    assert_eq!(
        copies,
        [
            ("retry".to_owned(), 2),
            ("retry".to_owned(), 3),
            ("retry-until:2".to_owned(), 2)
        ]
    );
}

/// The dead letter: the original data, why, the handler version and where it came from.
fn assert_one_dead_letter(k: &Kinesis, stream: &str, retry_seq: &str) {
    let dead = k.read_all(&format!("{stream}-dead"));
    assert_eq!(dead.len(), 1);
    let (key, _, data) = &dead[0];
    assert_eq!(key, "k1");
    let (h, original) = envelope::unwrap(&fleet_key(), data)
        .unwrap()
        .expect("a dead letter is enveloped");
    assert_eq!(h.kind, Kind::DeadLetter);
    assert_eq!(original, b"retry");
    assert_eq!(h.attempt, 3);
    assert_eq!(h.reason.as_deref(), Some("handler answered retry"));
    assert_eq!(
        h.handler_version.as_deref(),
        Some(shardhost::testing::version_of(&std::fs::read(guest("scripted")).unwrap()).as_str())
    );
    assert_eq!(h.origin.stream, stream);
    assert_eq!(
        h.origin.sequence_number, retry_seq,
        "names the original, not a copy"
    );
}

#[test]
fn a_trapping_record_under_a_cap_is_dead_lettered_with_the_trap() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("capped-trap");
    let dir = Scratch::new("retries-trap");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream), |h| h.on_outcome(seen.tap()));
    for text in ["ack", "panic", "ack"] {
        k.put(&stream, "k", text);
    }
    host.wait_for("the poison record's 3 attempts", |_| {
        deliveries(&seen.all(), "panic").len() == 3
    });
    host.wait_for("all settled", |b| b.totals("capped").settled == 5);
    host.stop();
    let dead = k.read_all(&format!("{stream}-dead"));
    assert_eq!(dead.len(), 1);
    let (h, original) = envelope::unwrap(&fleet_key(), &dead[0].2).unwrap().unwrap();
    assert_eq!(original, b"panic");
    let reason = h.reason.unwrap();
    assert!(
        reason.contains("trapped") && reason.contains("poison record"),
        "{reason}"
    );
}

#[test]
fn retry_after_waits_its_delay_and_a_stop_before_it_delivers_the_record_again() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("capped-after");
    let dir = Scratch::new("retries-after");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream), |h| h.on_outcome(seen.tap()));
    let started = Instant::now();
    k.put(&stream, "k", "retry-after:700");
    host.wait_for("the copy's delivery", |_| seen.len() >= 2);
    let all = seen.all();
    assert_eq!(all[0].outcome, Outcome::RetryAfter(700));
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "the copy came after the delay"
    );
    host.stop();

    // A delay longer than the host runs: stop, start again over the same checkpoints.
    let stream2 = unique("capped-after-stop");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream2), |h| h.on_outcome(seen.tap()));
    k.put(&stream2, "k", "retry-after:600000");
    k.put(&stream2, "k", "ack");
    host.wait_for("both delivered", |_| seen.len() >= 2);
    let store2 = host.leases.clone();
    host.stop();
    let seen2 = Outcomes::default();
    let again = Running::start_with(&dir, config(&ep, &stream2), |h| {
        h.use_lease_store(store2.clone());
        h.on_outcome(seen2.tap())
    });
    again.wait_for("the waiting record delivered again", |_| seen2.len() >= 2);
    again.stop();
    let data: Vec<_> = seen2.all().iter().map(|s| s.data.clone()).collect();
    assert_eq!(data[0], "retry-after:600000", "nothing was lost: {data:?}");
    assert!(
        k.read_all(&stream2)
            .iter()
            .all(|(_, _, d)| !d.starts_with(b"\0shardhost/")),
        "no copy was published before the delay"
    );
}

#[test]
fn a_retry_copy_is_handled_only_by_the_subscription_that_published_it() {
    let dir = Scratch::new("retries-shared");
    dir.write("feed.ndjson", support::text_record("k", "retry-until:2"));
    let config = HostToml::memory()
        .subscription(
            Subscription::new("capped", "s", guest("scripted"))
                .feed("feed.ndjson")
                .poll_interval("20ms")
                .max_attempts(3)
                .dead_letter("dead"),
        )
        .subscription(
            Subscription::new("audit", "s", guest("always_ack"))
                .trim_horizon()
                .poll_interval("20ms"),
        );
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("the copy handled", |_| {
        deliveries(&seen.all(), "retry-until:2").len() >= 3
    });
    host.wait_for("both streams' records settled", |b| {
        b.totals("audit").delivered == 2 && b.totals("audit").settled == 2
    });
    // Proving something does not happen: audit handles nothing more in the next 200 ms.
    std::thread::sleep(Duration::from_millis(200));
    host.stop();
    let all = seen.all();
    let by = |sub: &str| -> Vec<Outcome> {
        all.iter()
            .filter(|s| s.subscription == sub)
            .map(|s| s.outcome)
            .collect()
    };
    assert_eq!(
        by("capped"),
        [Outcome::Retry, Outcome::Ack],
        "attempts 1 and 2"
    );
    assert_eq!(
        by("audit"),
        [Outcome::Ack],
        "audit handles the original only; capped's copy on the shared stream is skipped"
    );
}

#[test]
fn a_handler_fault_holds_the_batch_under_a_cap_and_uses_up_no_attempts() {
    let dir = Scratch::new("retries-fault");
    let lines: Vec<_> = (0..3)
        .map(|i| support::text_record("k", &format!("r{i}")))
        .collect();
    dir.write("feed.ndjson", lines.join("\n"));
    let config = HostToml::memory().subscription(
        Subscription::new("faulty", "s", guest("miscount"))
            .feed("feed.ndjson")
            .poll_interval("20ms")
            .max_attempts(2)
            .dead_letter("dead"),
    );
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("the batch answered", |_| seen.len() == 3);
    // Proving something does not happen: no copy, no dead letter, no second answer in 300 ms.
    std::thread::sleep(Duration::from_millis(300));
    let (stream, dead) = (host.read_stream("s").len(), host.read_stream("dead").len());
    let board = host.stop();
    assert!(seen.all().iter().all(|s| s.outcome == Outcome::Retry));
    assert_eq!(seen.len(), 3, "answered once: no retry copies were handled");
    assert_eq!(stream, 3, "no copy was published");
    assert_eq!(dead, 0, "nothing was dead-lettered");
    let status = &board.shards_of("faulty")[0].status;
    assert_eq!(status.counts.held, 3);
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("answered 2 outcomes for a batch of 3 records")),
        "{status:?}"
    );
}

/// A header as a host of the fleet would write it.
pub(crate) fn forged_header(
    kind: Kind,
    subscription: &str,
    origin_stream: &str,
) -> envelope::Header {
    envelope::Header {
        kind,
        subscription: subscription.to_owned(),
        attempt: 3,
        origin: envelope::Origin {
            stream: origin_stream.to_owned(),
            shard_id: "shardId-000000000000".to_owned(),
            sequence_number: "1".to_owned(),
            sub_sequence_number: 0,
            partition_key: "victim-key".to_owned(),
        },
        reason: (kind == Kind::DeadLetter).then(|| "forged".to_owned()),
        handler_version: None,
        data_omitted: None,
    }
}

/// The first release's layout: magic, header length, header, data, and no MAC.
pub(crate) fn unauthenticated(header: &envelope::Header, data: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).unwrap();
    let mut out = b"\0shardhost/1".to_vec();
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(data);
    out
}

#[test]
fn a_forged_retry_copy_never_reaches_the_handler_nor_is_believed() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("forged");
    let dir = Scratch::new("retries-forged");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream), |h| h.on_outcome(seen.tap()));
    let other_fleet = envelope::EnvelopeKey::from_secret("another fleet's secret");
    let ours = forged_header(Kind::Retry, "capped", &stream);
    let theirs = forged_header(Kind::Retry, "audit", &stream);
    let forged = [
        // A last attempt with no MAC: straight to the dead letters as attempt 3, if it were
        // believed.
        ("f1", unauthenticated(&ours, b"retry")),
        // Another subscription's copy (one this host does not run): skipped either way.
        ("f2", unauthenticated(&theirs, b"ack")),
        // The current layout under another key.
        ("f3", envelope::wrap(&other_fleet, &ours, b"retry")),
        ("f4", envelope::wrap(&other_fleet, &theirs, b"ack")),
    ];
    for (key, data) in &forged {
        k.put(&stream, key, data.clone());
    }
    k.put(&stream, "after", "ack");
    let dead_stream = format!("{stream}-dead");
    host.wait_for("the record after them handled", |_| {
        seen.all().iter().any(|s| s.partition_key == "after")
    });
    host.wait_for("two dead letters", |_| k.read_all(&dead_stream).len() >= 2);
    let metrics = host.metrics();
    host.stop();
    assert!(
        seen.all().iter().all(|s| s.partition_key == "after"),
        "a forged copy reached the handler: {:?}",
        seen.all()
    );
    // The copies claiming `capped` are kept as they were put, believed in nothing.
    let mut letters: Vec<(String, u32)> = k
        .read_all(&dead_stream)
        .into_iter()
        .map(|(key, _, data)| {
            let (h, original) = envelope::unwrap(&fleet_key(), &data).unwrap().unwrap();
            let put = &forged.iter().find(|(k, _)| *k == key).unwrap().1;
            assert_eq!(
                original,
                &put[..],
                "{key}: the letter holds the record as put"
            );
            assert!(
                h.reason
                    .unwrap()
                    .contains("no key of this host authenticates")
            );
            (key, h.attempt)
        })
        .collect();
    letters.sort();
    assert_eq!(letters, [("f1".to_owned(), 0), ("f3".to_owned(), 0)]);
    let rejected = support::metric(
        &metrics,
        "shardhost_envelopes_rejected_total",
        &["subscription=\"capped\""],
    );
    assert_eq!(rejected, 4.0, "every forgery is counted: {metrics}");
}

#[test]
fn replaying_dead_letters_writes_only_fleet_letters_into_streams_the_config_reads() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("replay");
    let (dead, victim) = (format!("{stream}-dead"), unique("victim"));
    k.create(&stream, 1);
    k.create(&dead, 1);
    k.create(&victim, 1);
    let fleet = fleet_key();
    let letter = |origin: &str, data: &[u8]| {
        envelope::wrap(
            &fleet,
            &forged_header(Kind::DeadLetter, "capped", origin),
            data,
        )
    };
    k.put(&dead, "a", letter(&stream, b"replay me"));
    k.put(&dead, "b", letter(&victim, b"not into the victim"));
    k.put(
        &dead,
        "c",
        unauthenticated(
            &forged_header(Kind::DeadLetter, "capped", &stream),
            b"forged",
        ),
    );
    let dir = Scratch::new("retries-replay");
    let path = dir.write("shardhost.toml", config(&ep, &stream).render());
    // Listed first, as NDJSON (docs/concepts/retries.md): one object per letter.
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args(["dead-letters", &dead, "--json", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let letters: Vec<serde_json::Value> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    assert!(
        letters.len() >= 2 && letters.iter().all(serde_json::Value::is_object),
        "{letters:?}\n{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args(["dead-letters", &dead, "--replay", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refused letter fails the command: {stderr}"
    );
    assert!(stderr.contains(&victim), "{stderr}");
    assert!(
        k.read_all(&victim).is_empty(),
        "nothing was written into `{victim}`"
    );
    let replayed: Vec<Vec<u8>> = k.read_all(&stream).into_iter().map(|(_, _, d)| d).collect();
    assert_eq!(
        replayed,
        [b"replay me".to_vec()],
        "only the fleet's letter for a read stream"
    );
}

#[test]
fn a_record_too_large_for_an_envelope_is_dead_lettered_as_a_reference_not_held() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("capped-big");
    let dir = Scratch::new("retries-big");
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(&ep, &stream), |h| h.on_outcome(seen.tap()));
    // As large as Kinesis takes (data and key together: 1 MiB), answered retry: neither a retry
    // copy nor a dead letter with the record inside fits.
    let key = "big";
    let filler = "x".repeat((1 << 20) - key.len() - ";retry".len());
    let big = format!("{filler};retry");
    let (_, big_seq) = k.put(&stream, key, big.clone());
    k.put(&stream, "after", "ack");
    host.wait_for("the big record and the next one settled", |b| {
        let t = b.totals("capped");
        t.settled == 2 && t.held == 0
    });
    let metrics = host.metrics();
    host.stop();
    assert_eq!(
        seen.all().iter().filter(|s| s.data == big).count(),
        1,
        "one delivery: no copy could carry it, so its attempts end at once"
    );
    let dead = k.read_all(&format!("{stream}-dead"));
    assert_eq!(dead.len(), 1);
    let (h, data) = envelope::unwrap(&fleet_key(), &dead[0].2).unwrap().unwrap();
    assert!(data.is_empty(), "a reference carries no data");
    assert_eq!(h.data_omitted, Some(big.len() as u64));
    assert_eq!(
        h.origin.sequence_number, big_seq,
        "it names where the record is"
    );
    assert_eq!(h.origin.stream, stream);
    assert!(
        h.reason
            .as_deref()
            .unwrap()
            .contains("too large for a retry copy"),
        "{:?}",
        h.reason
    );
    assert!(
        support::metric(
            &metrics,
            "shardhost_contained_total",
            &["event=\"oversized-copy\""]
        ) >= 1.0
    );
}

#[test]
fn records_waiting_for_retry_after_pause_reading_at_the_in_flight_limit() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("capped-inflight");
    k.create(&stream, 1);
    for _ in 0..5 {
        k.put(&stream, "wait", "retry-after:1500");
    }
    for _ in 0..5 {
        k.put(&stream, "go", "ack");
    }
    let dir = Scratch::new("retries-inflight");
    let config = HostToml::kinesis(&ep)
        .set("host", "retry_key", SECRET)
        .subscription(capped(&stream).limit("in_flight_records", 5));
    let host = Running::start(&dir, config);
    // The first read takes all ten; five wait for their delay, which fills the bound.
    host.wait_for("reading paused", |b| {
        b.snapshot()
            .iter()
            .any(|(_, _, s)| s.state == ShardState::PausedInFlight)
    });
    // Once the copies go out, reading resumes: three attempts each, then dead letters.
    host.wait_for("everything settled", |b| {
        let t = b.totals("capped");
        t.delivered == 20 && t.settled == 20
    });
    let metrics = host.metrics();
    let board = host.stop();
    assert!(
        board
            .snapshot()
            .iter()
            .all(|(_, _, s)| s.state != ShardState::PausedInFlight),
        "no longer paused"
    );
    assert!(
        support::metric(
            &metrics,
            "shardhost_contained_total",
            &["event=\"in-flight-paused\""]
        ) >= 1.0
    );
    assert_eq!(k.read_all(&format!("{stream}-dead")).len(), 5);
}

#[test]
fn reading_dead_letters_makes_no_key_in_the_lease_table_or_the_cache_directory() {
    // A reader cannot open anything sealed under a key it would make: it makes none.
    let Some(stack) = support::fleet::stack(1) else {
        return;
    };
    let dead = format!("{}-dead", stack.stream);
    stack.k.create(&dead, 1);
    let dir = Scratch::new("retries-read-only");
    let cache = dir.0.join("cache");
    let host = stack
        .host("reader")
        .set("host", "cache_dir", cache.to_str().unwrap())
        .subscription(capped(&stack.stream));
    let path = dir.write("shardhost.toml", host.render());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args(["dead-letters", &dead, "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("0 dead letter(s)"), "{stderr}");
    let row = stack
        .rt
        .block_on(stack.d.row(&stack.table, "#shardhost#envelope-key"));
    assert!(row.is_none(), "the lease table has a key row: {row:?}");
    assert!(
        !cache.join("envelope.key").exists(),
        "the cache directory has a key file"
    );
}
