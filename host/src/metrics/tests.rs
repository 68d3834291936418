use super::*;
use crate::record::Outcome;

#[test]
fn counts_appear_under_their_labels() {
    let m = Metrics::new();
    let s = m.shard("ship", "shardId-000000000000");
    s.outcomes(&[Outcome::Ack, Outcome::Ack, Outcome::Retry]);
    s.failed(2);
    m.handler_version("ship", None, "aaa");
    m.handler_version("ship", Some("aaa"), "bbb");
    let text = m.encode();
    assert!(
        text.contains(
            r#"shardhost_records_total{subscription="ship",shard="shardId-000000000000",outcome="ack"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains(
            r#"shardhost_records_total{subscription="ship",shard="shardId-000000000000",outcome="retry"} 3"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"shardhost_handler_version_info{subscription="ship",version="bbb"} 1"#),
        "{text}"
    );
    assert!(
        !text.contains(r#"version="aaa""#),
        "the old version is gone: {text}"
    );
}

#[test]
fn a_held_record_shows_since_when_until_it_is_no_longer_held() {
    use std::time::{Duration, SystemTime};
    let m = Metrics::new();
    let s = m.shard("ship", "shardId-000000000001");
    s.held_since(Some(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    ));
    let text = m.encode_classic();
    assert!(
        text.contains(
            r#"shardhost_held_since_timestamp_seconds{subscription="ship",shard="shardId-000000000001"} 1700000000"#
        ),
        "{text}"
    );
    s.held_since(None);
    let text = m.encode_classic();
    assert!(
        !text.contains("shardhost_held_since_timestamp_seconds{"),
        "nothing held, no sample: {text}"
    );
}
