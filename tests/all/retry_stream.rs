//! A subscription whose retry copies go to a stream of their own (`retry_stream`), against
//! kinesis-mock: the host that runs the subscription reads that stream too (its own lease rows,
//! `RETRY:shard#SUBSCRIPTION`), so every retried record is handled again or dead-lettered;
//! nothing on the retry stream but the subscription's copies reaches its handler.

use crate::retries::{SECRET, fleet_key};
use crate::support::kinesis::Kinesis;
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Subscription, guest, kinesis_endpoint, unique, wait_until,
};
use shardhost::record::Outcome;
use shardhost::testing::envelope::{self, Kind};

/// `scripted` on `stream` under a cap of 2 attempts, its copies going to `stream.retry`.
fn separate(stream: &str) -> Subscription {
    Subscription::new("shipping", stream, guest("scripted"))
        .create_if_missing(1)
        .trim_horizon()
        .batch(10)
        .poll_interval("50ms")
        .max_attempts(2)
        .dead_letter(&format!("{stream}.dead"))
        .set("retry_stream", format!("{stream}.retry"))
}

#[test]
fn every_record_retried_through_a_separate_retry_stream_is_handled_again_or_dead_lettered() {
    let Some(ep) = kinesis_endpoint() else { return };
    let k = Kinesis::new(&ep);
    let stream = unique("separate");
    let dir = Scratch::new("retry-stream");
    let seen = Outcomes::default();
    let config = HostToml::kinesis(&ep)
        .set("host", "retry_key", SECRET)
        .subscription(separate(&stream));
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    for i in 0..8 {
        k.put(&stream, &format!("k{i}"), "retry");
    }
    for i in 0..4 {
        k.put(&stream, &format!("u{i}"), "retry-until:2");
    }
    // A record someone else put on the retry stream: not a copy of ours, never handled.
    k.put(&format!("{stream}.retry"), "stranger", "ack");
    // 8 × 2 attempts of `retry`, 4 × 2 of `retry-until:2`.
    host.wait_for("every attempt delivered", |_| seen.len() >= 24);
    host.wait_for("the dead letters out", |_| {
        k.read_all(&format!("{stream}.dead")).len() >= 8
    });
    let board = host.stop();
    let all = seen.all();
    let outcomes = |data: &str| -> Vec<Outcome> {
        let mut o: Vec<_> = all
            .iter()
            .filter(|s| s.data == data)
            .map(|s| s.outcome)
            .collect();
        o.sort_by_key(|o| format!("{o:?}"));
        o
    };
    assert_eq!(outcomes("retry"), [Outcome::Retry; 16], "two attempts each");
    let until = outcomes("retry-until:2");
    assert_eq!(
        until.iter().filter(|o| **o == Outcome::Ack).count(),
        4,
        "{until:?}"
    );
    assert!(
        all.iter().all(|s| s.data != "ack"),
        "a record on the retry stream that is not a copy never reaches the handler"
    );
    let dead = k.read_all(&format!("{stream}.dead"));
    assert_eq!(
        dead.len(),
        8,
        "every record that used up its attempts is dead-lettered"
    );
    for (_, _, data) in &dead {
        let (h, original) = envelope::unwrap(&fleet_key(), data).unwrap().unwrap();
        assert_eq!(
            (h.kind, h.attempt, original),
            (Kind::DeadLetter, 2, &b"retry"[..])
        );
        assert_eq!(
            h.origin.stream, stream,
            "the letter names the original's stream"
        );
    }
    let t = board.totals("shipping");
    assert_eq!(t.held, 0);
    assert_eq!(
        t.delivered, t.settled,
        "everything delivered was settled: {t:?}"
    );
    let shards: Vec<_> = board
        .shards_of("shipping")
        .into_iter()
        .map(|s| s.shard_id)
        .collect();
    assert!(
        shards
            .iter()
            .any(|s| s.starts_with(&format!("{stream}.retry:"))),
        "the retry stream's shards show under the subscription, named by their stream: {shards:?}"
    );
}

#[test]
fn check_says_who_reads_a_subscriptions_retry_copies() {
    let dir = Scratch::new("retry-stream-check");
    let config = HostToml::memory()
        .subscription(separate("shipments"))
        .subscription(
            Subscription::new("audit", "orders", guest("scripted"))
                .max_attempts(3)
                .dead_letter("orders.dead"),
        );
    let path = dir.write("shardhost.toml", config.to_string());
    let out = crate::support::fleet::shardhost(&["check", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "retries: copies on `shipments.retry`, read by this subscription too (lease rows: \
         shipments.retry:SHARD#shipping); dead letters after 2 attempts to `shipments.dead`",
        "retries: copies on `orders`, read back as it is read; dead letters after 3 attempts to \
         `orders.dead`",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

/// Two `shardhost` processes on a lease table (dynalite) and kinesis-mock, a subscription whose
/// copies go to a 2-shard retry stream of their own, one process killed (kill -9) while copies
/// are in flight: every record the handler always retries reaches the dead-letter stream, every
/// record it takes on its second attempt is acked, and the retry stream's shards were leased
/// through the subscription's own rows.
#[test]
fn retried_records_survive_a_kill_9_of_one_of_two_hosts_reading_the_retry_stream() {
    use crate::support::fleet::{Instance, stack};
    use std::collections::BTreeSet;
    use std::time::Duration;

    let Some(st) = stack(2) else { return };
    let retry = format!("{}.retry", st.stream);
    let dead = format!("{}.dead", st.stream);
    st.k.create(&retry, 2);
    st.k.create(&dead, 1);
    let dir = Scratch::new("retry-stream-kill9");
    let config = |owner: &str| {
        st.host(owner)
            .set("host", "retry_key", SECRET)
            .leases("ttl", "3s")
            .leases("renew_every", "1s")
            .leases("list_every", "1s")
            .leases("checkpoint_every", "200ms")
            .subscription(
                st.subscription("scripted")
                    .trim_horizon()
                    .batch(5)
                    .max_attempts(2)
                    .dead_letter(&dead)
                    .set("retry_stream", retry.as_str()),
            )
    };
    let mut a = Instance::start(&dir, "a", config("pod-a"));
    let b = Instance::start(&dir, "b", config("pod-b"));
    let (mut always, mut second) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..30 {
        always.insert(st.k.put(&st.stream, &format!("always-{i}"), "retry").1);
        second.insert(format!("second-{i}"));
        st.k.put(&st.stream, &format!("second-{i}"), "retry-until:2");
    }
    wait_until("some dead letters out", Duration::from_secs(60), || {
        !st.k.read_all(&dead).is_empty()
    });
    a.kill9();
    let lettered = || -> BTreeSet<String> {
        st.k.read_all(&dead)
            .iter()
            .map(|(_, _, data)| {
                let (h, _) = envelope::unwrap(&fleet_key(), data).unwrap().unwrap();
                h.origin.sequence_number
            })
            .collect()
    };
    let acked = |i: &Instance| -> BTreeSet<String> {
        i.outcomes()
            .into_iter()
            .filter(|(k, o)| o == "ack" && k.starts_with("second-"))
            .map(|(k, _)| k)
            .collect()
    };
    b.wait_for(
        "every record dead-lettered or acked",
        Duration::from_secs(90),
        |b| {
            let acks: BTreeSet<String> = acked(b).union(&acked(&a)).cloned().collect();
            lettered() == always && acks == second
        },
    );
    let rows = st.rt.block_on(st.d.rows(&st.table));
    for shard in ["shardId-000000000000", "shardId-000000000001"] {
        let key = format!("{retry}:{shard}#test");
        assert!(
            rows.iter()
                .any(|r| r.get("lease_key").and_then(|v| v.as_s().ok()) == Some(&key)),
            "the retry stream's shard {shard} was leased through {key}"
        );
    }
}
