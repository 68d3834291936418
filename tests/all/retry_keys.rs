//! The key retry copies are made under: a copy made under a previous key (`retry_keys_previous`)
//! is still a retry; a copy under a key this host does not have never reaches the handler as
//! if it were a record of its own; a copy naming a subscription no longer in the config is
//! named in the log. On the embedded stream: retries work there as on Kinesis.

use std::time::Duration;

use base64::Engine;

use crate::support::dynamo::Dynamo;
use crate::support::fleet::Instance;
use crate::support::{
    HostToml, Outcomes, Running, Scratch, Subscription, dynamodb_endpoint, guest, metric, unique,
};
use shardhost::fleet_table::FleetTable;
use shardhost::lease::{DynamoLeaseStore, DynamoOptions};
use shardhost::record::Outcome;
use shardhost::testing::envelope::{self, EnvelopeKey, Header, Kind, Origin};

const CURRENT: &str = "retry-keys-current-secret";
const PREVIOUS: &str = "retry-keys-previous-secret";
const STRANGER: &str = "a key no host of this fleet has";

/// A retry copy (attempt 2) of `data` for `subscription`, made under `secret`.
fn copy_under(secret: &str, subscription: &str, data: &str) -> Vec<u8> {
    let header = copy_header(subscription);
    envelope::wrap(&EnvelopeKey::from_secret(secret), &header, data.as_bytes())
}

/// The header of a retry copy (attempt 2) for `subscription`.
fn copy_header(subscription: &str) -> Header {
    Header {
        kind: Kind::Retry,
        subscription: subscription.to_owned(),
        attempt: 2,
        origin: Origin {
            stream: "s".to_owned(),
            shard_id: "shardId-000000000000".to_owned(),
            sequence_number: "1".to_owned(),
            sub_sequence_number: 0,
            partition_key: "origin".to_owned(),
        },
        reason: None,
        handler_version: None,
        data_omitted: None,
    }
}

/// A feed line holding `data` as it is.
fn raw_line(partition_key: &str, data: &[u8]) -> String {
    serde_json::json!({
        "partition_key": partition_key,
        "data_base64": base64::engine::general_purpose::STANDARD.encode(data),
    })
    .to_string()
}

/// Subscription `capped` of stream `s` (fed from `feed.ndjson`), 3 attempts, dead letters to
/// `dead`, on a host whose key is `CURRENT` and which still accepts `PREVIOUS`.
fn config() -> HostToml {
    HostToml::memory()
        .set("host", "retry_key", CURRENT)
        .set("host", "retry_keys_previous", vec![PREVIOUS])
        .subscription(capped())
}

fn capped() -> Subscription {
    Subscription::new("capped", "s", guest("scripted"))
        .feed("feed.ndjson")
        .poll_interval("20ms")
        .max_attempts(3)
        .dead_letter("dead")
}

#[test]
fn a_copy_made_under_the_previous_key_is_handled_as_a_retry_and_copied_again_under_the_current_key()
{
    let dir = Scratch::new("retry-keys-previous");
    // Attempt 2 of 3 answers retry; attempt 3 acks.
    let copy = copy_under(PREVIOUS, "capped", "retry-until:3");
    dir.write("feed.ndjson", raw_line("k", &copy));
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(), |h| h.on_outcome(seen.tap()));
    host.wait_for("the copy handled twice", |_| seen.len() >= 2);
    let stream = host.read_stream("s");
    host.stop();
    let all = seen.all();
    let got: Vec<_> = all.iter().map(|s| (s.data.as_str(), s.outcome)).collect();
    assert_eq!(
        got,
        [
            ("retry-until:3", Outcome::Retry),
            ("retry-until:3", Outcome::Ack)
        ],
        "the handler got the original data, at attempts 2 and 3"
    );
    let (header, original) = envelope::unwrap(&EnvelopeKey::from_secret(CURRENT), &stream[1].data)
        .expect("the new copy is made under the current key")
        .expect("an envelope");
    assert_eq!((header.attempt, original), (3, &b"retry-until:3"[..]));
}

#[test]
fn a_copy_made_under_a_key_this_host_does_not_have_is_dead_lettered_never_handled() {
    let dir = Scratch::new("retry-keys-stranger");
    let copy = copy_under(STRANGER, "capped", "ack");
    let renamed = copy_under(CURRENT, "renamed", "ack");
    let lines = [
        raw_line("stranger", &copy),
        raw_line("renamed", &renamed),
        raw_line("after", b"ack"),
    ];
    dir.write("feed.ndjson", lines.join("\n"));
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config(), |h| h.on_outcome(seen.tap()));
    host.wait_for("the record after it handled", |_| {
        seen.all().iter().any(|s| s.partition_key == "after")
    });
    assert!(
        seen.all().iter().all(|s| s.partition_key == "after"),
        "a copy reached the handler: {:?}",
        seen.all()
    );
    host.wait_for("a dead letter", |_| !host.read_stream("dead").is_empty());
    let dead = host.read_stream("dead");
    let metrics = host.metrics();
    host.stop();
    assert_eq!(dead.len(), 1);
    let (letter, original) = envelope::unwrap(&EnvelopeKey::from_secret(CURRENT), &dead[0].data)
        .unwrap()
        .expect("a dead letter of this fleet");
    assert_eq!(letter.kind, Kind::DeadLetter);
    assert_eq!(
        original,
        &copy[..],
        "the letter holds the copy as it was read"
    );
    let reason = letter.reason.unwrap_or_default();
    assert!(reason.contains("which this host does not have"), "{reason}");
    let rejected = metric(
        &metrics,
        "shardhost_envelopes_rejected_total",
        &["subscription=\"capped\""],
    );
    assert_eq!(rejected, 1.0, "{metrics}");
    let unclaimed = metric(
        &metrics,
        "shardhost_retry_copies_unclaimed_total",
        &["subscription=\"capped\""],
    );
    assert_eq!(unclaimed, 1.0, "the copy for `renamed`: {metrics}");
}

#[test]
fn a_copy_naming_a_subscription_this_host_does_not_run_is_logged_and_counted() {
    let dir = Scratch::new("retry-keys-renamed");
    let copy = copy_under(CURRENT, "renamed", "ack");
    let lines = [raw_line("renamed", &copy), raw_line("after", b"ack")];
    dir.write("feed.ndjson", lines.join("\n"));
    let host = Instance::start(&dir, "host", config());
    host.wait_for(
        "the record after it handled",
        Duration::from_secs(60),
        |h| h.outcomes().iter().any(|(key, _)| key == "after"),
    );
    let warned: Vec<_> = host
        .lines()
        .into_iter()
        .filter(|v| {
            v["level"] == "WARN"
                && v["fields"]["copy_subscription"] == "renamed"
                && v["fields"]["sequence_number"].is_string()
                && v["span"]["shard"] == "shardId-000000000000"
        })
        .collect();
    assert_eq!(warned.len(), 1, "log:\n{}", host.text());
}

#[test]
fn copies_made_under_the_lease_tables_key_still_open_while_it_is_named_a_previous_key() {
    let Some(endpoint) = dynamodb_endpoint() else {
        return;
    };
    let table = unique("retry-keys-table");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let table_key = rt.block_on(async {
        Dynamo::new(&endpoint).create_lease_table(&table).await;
        let store = DynamoLeaseStore::connect(DynamoOptions::local(&table, &endpoint)).await;
        FleetTable::beside(&store).envelope_key().await.unwrap()
    });
    let dir = Scratch::new("retry-keys-table");
    let header = copy_header("capped");
    let copy = envelope::wrap(
        &EnvelopeKey::from_bytes(table_key),
        &header,
        b"retry-until:2",
    );
    dir.write("feed.ndjson", raw_line("k", &copy));
    let config = HostToml::memory()
        .dynamodb_leases(&table, &endpoint)
        .set("host", "retry_key", CURRENT)
        .set("host", "retry_keys_previous", vec!["lease-table"])
        .subscription(capped());
    let seen = Outcomes::default();
    let host = Running::start_with(&dir, config, |h| h.on_outcome(seen.tap()));
    host.wait_for("the copy handled", |_| seen.len() == 1);
    host.stop();
    let got: Vec<_> = seen
        .all()
        .into_iter()
        .map(|s| (s.data, s.outcome))
        .collect();
    assert_eq!(
        got,
        [("retry-until:2".to_owned(), Outcome::Ack)],
        "attempt 2"
    );
}
