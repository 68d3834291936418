//! `shardhost replay`: a version on trial over a stream's history (kinesis-mock), next to the
//! version the subscription runs now. The report names exactly the records the two answer
//! differently; nothing is leased, checkpointed, published, booked or stored.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::state::{shipment, state_table};
use crate::support::fleet::stack;
use crate::support::{HostToml, HttpServer, Scratch, Subscription, guest};

mod answer;
mod file;

/// `shardhost replay ARGS… --config CONFIG`.
fn replay(config: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .arg("replay")
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn replay_names_exactly_the_records_a_candidate_answers_differently_and_writes_no_lease() {
    let Some(st) = stack(2) else { return };
    for i in 0..6 {
        st.k.put(&st.stream, &format!("drop-{i}"), "drop");
    }
    for i in 0..4 {
        st.k.put(&st.stream, &format!("retry-{i}"), "retry");
    }
    let dir = Scratch::new("replay-differs");
    let host = st
        .host("replayer")
        .subscription(st.subscription("scripted").trim_horizon().batch(3));
    let config = dir.write("shardhost.toml", host.render());
    let candidate = guest("always_drop");
    let out = replay(&config, &["test", candidate.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1), "something differs: {out:?}");
    let report = json(&out);
    assert_eq!(report["records"], 10, "{report}");
    assert_eq!(report["differences_total"], 4, "{report}");
    let mut keys: Vec<&str> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["current"], "retry", "{d}");
            assert_eq!(d["candidate"], "drop", "{d}");
            assert!(d["sequence_number"].as_str().is_some_and(|s| !s.is_empty()));
            d["partition_key"].as_str().unwrap()
        })
        .collect();
    keys.sort();
    assert_eq!(keys, ["retry-0", "retry-1", "retry-2", "retry-3"]);
    assert_eq!(report["outcomes"]["retry"]["current"], 4, "{report}");
    assert_eq!(report["outcomes"]["drop"]["current"], 6, "{report}");
    assert_eq!(report["outcomes"]["drop"]["candidate"], 10, "{report}");

    // The text report says the same to a person.
    let out = replay(&config, &["test", candidate.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("4 record(s) answered differently"), "{text}");
    assert!(text.contains("retry-2  retry -> drop"), "{text}");

    let rows = st.rt.block_on(st.d.count(&st.table));
    assert_eq!(rows, 0, "replay wrote to the lease table");
}

#[test]
fn replay_records_publishes_and_seeks_and_performs_none() {
    let Some(st) = stack(1) else { return };
    let out_stream = format!("{}-out", st.stream);
    st.k.create(&out_stream, 1);
    st.k.put(&st.stream, "a", format!("publish:{out_stream}:one"));
    let (_, first) =
        st.k.put(&st.stream, "b", format!("publish:{out_stream}:two"));
    st.k.put(&st.stream, "c", format!("seek:{first}"));
    st.k.put(&st.stream, "d", "publish:elsewhere:refused");
    let dir = Scratch::new("replay-effects");
    let sub = st
        .subscription("scripted")
        .trim_horizon()
        .set("publish_to", vec![out_stream.clone()]);
    let config = dir.write(
        "shardhost.toml",
        st.host("replayer").subscription(sub).render(),
    );
    let same = guest("scripted");
    let out = replay(&config, &["test", same.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "nothing differs: {out:?}");
    let report = json(&out);
    for who in ["current", "candidate"] {
        let effects = &report["effects"][who];
        assert_eq!(effects["counts"]["publish"], 2, "{report}");
        assert_eq!(effects["counts"]["seek"], 1, "{report}");
        let first = effects["first"][0].as_str().unwrap();
        assert!(
            first.starts_with(&format!("publish to {out_stream}, key a")),
            "{first}"
        );
    }
    // A stream outside publish_to is refused as a host refuses it: scripted retries.
    assert_eq!(report["outcomes"]["retry"]["current"], 1, "{report}");
    assert!(st.k.read_all(&out_stream).is_empty(), "replay published");
    assert_eq!(
        st.k.read_all(&st.stream).len(),
        4,
        "replay put into its own stream"
    );
}

#[test]
fn replay_books_nothing_and_answers_a_handler_503_for_every_request() {
    let Some(st) = stack(1) else { return };
    let table = state_table(&st.d, &st.rt);
    let carrier = HttpServer::start();
    for id in 1..=3 {
        st.k.put(&st.stream, &format!("order-{id}"), shipment(id, "dhl"));
    }
    let dir = Scratch::new("replay-ship");
    let host: HostToml = st.shipping("replayer", &carrier, &table);
    let config = dir.write("shardhost.toml", host.render());
    let ship = guest("ship");
    for http in ["off", "live"] {
        let out = replay(
            &config,
            &["test", ship.to_str().unwrap(), "--json", "--http", http],
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let report = json(&out);
        let effects = &report["effects"]["current"]["counts"];
        assert_eq!(
            effects["http-not-sent"], 3,
            "a POST is never sent: {report}"
        );
        // The carrier answered nothing: every shipment waits, as it would live.
        assert_eq!(report["outcomes"]["retry-after"]["current"], 3, "{report}");
    }
    assert_eq!(carrier.requests(), 0, "the carrier was called");
    assert_eq!(
        st.rt.block_on(st.d.count(&table)),
        0,
        "the state table was written"
    );
    assert_eq!(
        st.rt.block_on(st.d.count(&st.table)),
        0,
        "the lease table was written"
    );
}

#[test]
fn replay_refuses_what_it_cannot_do_with_exit_code_2() {
    let dir = Scratch::new("replay-usage");
    let handler = guest("scripted");
    let embedded = dir.write(
        "embedded.toml",
        HostToml::memory()
            .subscription(crate::support::Subscription::new(
                "orders",
                "orders",
                handler.clone(),
            ))
            .render(),
    );
    let h = handler.to_str().unwrap();
    let cases: [(&Path, Vec<&str>, &str); 3] = [
        (&embedded, vec!["orders", h], "--file RECORDS.ndjson"),
        (&embedded, vec!["nope", h], "nope"),
        (
            &embedded,
            vec!["orders", h, "--to", "1h", "--records", "5"],
            "cannot be used with",
        ),
    ];
    for (config, args, says) in cases {
        let out = replay(config, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn replay_keeps_state_writes_from_the_store_and_shows_them_to_later_records() {
    let Some(st) = stack(1) else { return };
    let table = state_table(&st.d, &st.rt);
    // The dedup handler marks each partition key once: a, b, then a again (already marked).
    for key in ["a", "b", "a", "a"] {
        st.k.put(&st.stream, key, "x");
    }
    let dir = Scratch::new("replay-state");
    let sub =
        st.subscription("dedup")
            .trim_horizon()
            .batch(1)
            .nested("state", "table", table.as_str());
    let config = dir.write(
        "shardhost.toml",
        st.host("replayer").subscription(sub).render(),
    );
    let dedup = guest("dedup");
    let out = replay(&config, &["test", dedup.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = json(&out);
    for who in ["current", "candidate"] {
        let effects = &report["effects"][who];
        assert_eq!(
            effects["counts"]["state-write"], 2,
            "a and b marked once each, the repeats saw their marks: {report}"
        );
    }
    assert_eq!(report["outcomes"]["ack"]["current"], 4, "{report}");
    assert_eq!(
        st.rt.block_on(st.d.count(&table)),
        0,
        "the state table was written"
    );
}

#[test]
fn replay_compares_with_the_version_the_fleet_deployed_over_the_configs_handler() {
    let Some(st) = stack(1) else { return };
    st.k.put(&st.stream, "r", "retry");
    st.k.put(&st.stream, "a", "ack");
    let dir = Scratch::new("replay-fleet");
    let host = st
        .host("replayer")
        .subscription(st.subscription("scripted").trim_horizon());
    let config = dir.write("shardhost.toml", host.render());
    let scripted = guest("scripted");
    let scripted = scripted.to_str().unwrap();
    // The config names scripted, and so does the candidate: nothing differs.
    let out = replay(&config, &["test", scripted, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // The fleet runs always_drop since a deploy: that is the version to compare with.
    let drop = guest("always_drop");
    let config_arg = config.to_str().unwrap();
    let deployed = crate::support::fleet::shardhost(&[
        "deploy",
        "--config",
        config_arg,
        "test",
        drop.to_str().unwrap(),
    ]);
    assert!(deployed.status.success(), "{deployed:?}");
    let rows = st.rt.block_on(st.d.count(&st.table));
    let out = replay(&config, &["test", scripted, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report = json(&out);
    assert_eq!(report["outcomes"]["drop"]["current"], 2, "{report}");
    assert_eq!(report["differences_total"], 2, "{report}");
    assert_eq!(
        st.rt.block_on(st.d.count(&st.table)),
        rows,
        "replay wrote to the lease table"
    );
}

#[test]
fn replay_hands_over_the_subscriptions_retry_copies_as_a_host_does() {
    use crate::retries::{SECRET, fleet_key, forged_header, unauthenticated};
    use shardhost::testing::envelope::{self, Kind};
    let Some(st) = stack(1) else { return };
    let dead = format!("{}-dead", st.stream);
    st.k.create(&dead, 1);
    let copy = |attempt: u32, subscription: &str| {
        let mut header = forged_header(Kind::Retry, subscription, &st.stream);
        header.attempt = attempt;
        envelope::wrap(&fleet_key(), &header, b"retry-until:3")
    };
    st.k.put(&st.stream, "third", copy(3, "test"));
    st.k.put(&st.stream, "second", copy(2, "test"));
    st.k.put(&st.stream, "theirs", copy(3, "audit"));
    let claimed = forged_header(Kind::Retry, "test", &st.stream);
    st.k.put(
        &st.stream,
        "forged",
        unauthenticated(&claimed, b"retry-until:3"),
    );
    st.k.put(&st.stream, "plain", "retry-until:3");
    let dir = Scratch::new("replay-copies");
    let sub = st
        .subscription("scripted")
        .trim_horizon()
        .max_attempts(3)
        .dead_letter(&dead);
    let host = st
        .host("replayer")
        .set("host", "retry_key", SECRET)
        .subscription(sub);
    let config = dir.write("shardhost.toml", host.render());
    let drop = guest("always_drop");
    let out = replay(&config, &["test", drop.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report = json(&out);
    assert_eq!(report["records"], 3, "{report}");
    let skipped = &report["skipped"];
    assert_eq!(skipped["another subscription's retry copy"], 1, "{report}");
    assert_eq!(
        skipped["a retry copy no key of the fleet authenticates"], 1,
        "{report}"
    );
    let current: std::collections::BTreeMap<&str, &str> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["partition_key"].as_str().unwrap(),
                d["current"].as_str().unwrap(),
            )
        })
        .collect();
    // The third attempt of `retry-until:3` acks; the second and a first one retry.
    let expected = [("plain", "retry"), ("second", "retry"), ("third", "ack")];
    assert_eq!(current, expected.into_iter().collect(), "{report}");
}

#[test]
fn replay_finds_the_one_record_a_candidate_traps_on_as_a_host_would() {
    let Some(st) = stack(1) else { return };
    for i in 0..9 {
        st.k.put(&st.stream, &format!("ok-{i}"), "ack");
    }
    st.k.put(&st.stream, "poison", "panic");
    let dir = Scratch::new("replay-trap");
    let sub = Subscription::new("test", &st.stream, guest("always_ack"))
        .trim_horizon()
        .batch(10);
    let config = dir.write(
        "shardhost.toml",
        st.host("replayer").subscription(sub).render(),
    );
    let scripted = guest("scripted");
    let out = replay(&config, &["test", scripted.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report = json(&out);
    assert_eq!(report["outcomes"]["ack"]["candidate"], 9, "{report}");
    assert_eq!(report["outcomes"]["failed"]["candidate"], 1, "{report}");
    let differences = report["differences"].as_array().unwrap();
    assert_eq!(differences.len(), 1, "{report}");
    assert_eq!(differences[0]["partition_key"], "poison");
    assert_eq!(differences[0]["candidate"], "failed");
    let error = differences[0]["candidate_error"].as_str().unwrap();
    assert!(error.contains("poison record"), "{error}");
}
