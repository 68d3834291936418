//! Lanes (`lanes = N`): one shard's records are handled by N instances side by side, split by
//! partition key. One key's records keep their order, and the checkpoint still covers only a
//! contiguous settled run of the shard.

use crate::support::{HostToml, Outcomes, Running, Scratch, Subscription, guest, text_record};
use shardhost::record::Outcome;

/// Every record of a stream of the host's embedded source: (partition key, text).
fn read_stream(host: &Running, stream: &str) -> Vec<(String, String)> {
    host.read_stream(stream)
        .into_iter()
        .map(|r| {
            (
                r.partition_key.to_string(),
                String::from_utf8(r.data).unwrap(),
            )
        })
        .collect()
}

#[test]
fn lanes_keep_each_keys_order_and_the_checkpoint_never_passes_an_unsettled_record() {
    let dir = Scratch::new("lanes");
    // 16 keys, 10 records each, interleaved; each record sleeps 0-3 ms, then publishes
    // "KEY #i" to `order`, so `order` shows the order the handler saw each key's records in.
    let mut lines = Vec::new();
    let mut rng: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..10 {
        for k in 0..16 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let key = format!("key-{k}");
            let text = format!("sleep:{};publish:order:{key} #{i}", rng % 4);
            lines.push(text_record(&key, &text));
        }
    }
    // One record that is held (no retry cap), in the middle.
    lines[77] = text_record("key-13", "retry");
    dir.write("feed.ndjson", lines.join("\n"));
    let config = HostToml::memory().subscription(
        Subscription::new("laned", "s", guest("scripted"))
            .feed("feed.ndjson")
            .batch(40)
            .lanes(4)
            .poll_interval("20ms")
            .set("publish_to", vec!["order"]),
    );
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("every record answered", |_| seen.len() == 160);
    let order = read_stream(&host, "order");
    let board = host.stop();

    let all = seen.all();
    let held: Vec<_> = all.iter().filter(|s| s.outcome != Outcome::Ack).collect();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].data, "retry");
    // Per key, the handler saw the records in shard order.
    assert_eq!(order.len(), 159);
    for k in 0..16 {
        let key = format!("key-{k}");
        let seen_order: Vec<u32> = order
            .iter()
            .filter(|(pk, _)| *pk == key)
            .map(|(_, text)| text.rsplit('#').next().unwrap().parse().unwrap())
            .collect();
        let mut sorted = seen_order.clone();
        sorted.sort();
        assert_eq!(seen_order, sorted, "{key} was handled out of order");
    }
    // Lanes really ran side by side: some key's record was handled before an earlier record
    // of another key (the publish order is not the shard order).
    let shard_order: Vec<String> = (0..10)
        .flat_map(|i| (0..16).map(move |k| format!("key-{k} #{i}")))
        .filter(|t| t != "key-13 #4")
        .collect();
    let publish_order: Vec<String> = order.iter().map(|(_, t)| t.clone()).collect();
    assert_ne!(publish_order, shard_order, "lanes interleave");
    // The checkpoint stops in front of the held record, though later ones all settled.
    let status = &board.shards_of("laned")[0].status;
    let mut by_seq = all.clone();
    by_seq.sort_by(|a, b| a.sequence_number.cmp(&b.sequence_number));
    assert_eq!(by_seq[77].data, "retry");
    assert_eq!(
        status.checkpoint.as_ref(),
        Some(&by_seq[76].sequence_number),
        "the checkpoint covers only the contiguous settled run"
    );
    assert_eq!((status.counts.settled, status.counts.held), (159, 1));
}
