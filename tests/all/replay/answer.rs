//! `replay --http-answer STATUS[:FILE]`: every request a version on trial does not send is
//! answered as told, so two versions that differ only on their success path are told apart;
//! the report marks those answers stubbed. A bad value is refused before anything runs.

use std::path::{Path, PathBuf};

use super::{json, replay};
use crate::support::{HostToml, Scratch, Subscription, guest};

/// Nothing listens there: a request that reached it would fail, never answer 2xx.
const CARRIER: &str = "http://127.0.0.1:9";

/// The shipping example on the embedded stream, booking with [`CARRIER`], and three shipments.
fn shipping(dir: &Scratch) -> (PathBuf, PathBuf) {
    let sub = Subscription::new("ship", "shipments", guest("ship"))
        .nested("http", "allow", vec![CARRIER.to_owned()])
        .nested("config", "carrier_url", format!("{CARRIER}/book"))
        .nested("state", "store", "memory");
    let config = dir.write(
        "shardhost.toml",
        HostToml::memory().subscription(sub).render(),
    );
    let lines: String = (1..=3)
        .map(|id| {
            let shipment = format!(r#"{{"id":{id},"address":"Main St {id}","carrier":"dhl"}}"#);
            let line =
                serde_json::json!({ "partition_key": format!("order-{id}"), "data": shipment });
            format!("{line}\n")
        })
        .collect();
    (config, dir.write("shipments.ndjson", lines))
}

fn args<'a>(candidate: &'a Path, records: &'a Path, more: &[&'a str]) -> Vec<&'a str> {
    let base = [
        "ship",
        candidate.to_str().unwrap(),
        "--file",
        records.to_str().unwrap(),
    ];
    [&base[..], more].concat()
}

#[test]
fn http_answer_201_makes_the_shipping_handlers_replay_compare_acks() {
    let dir = Scratch::new("replay-answer");
    let (config, records) = shipping(&dir);
    // A release that counts only 200 as booked: it differs from the example on 201 alone.
    let strict = guest("ship_strict");

    // Answered 503 (the default) both versions try every shipment again: nothing differs.
    let out = replay(&config, &args(&strict, &records, &["--json"]));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report = json(&out);
    assert_eq!(report["outcomes"]["retry-after"]["current"], 3, "{report}");
    assert_eq!(
        report["outcomes"]["retry-after"]["candidate"], 3,
        "{report}"
    );
    let answered = &report["effects"]["current"]["http_answer"];
    assert_eq!(
        answered,
        &serde_json::json!({"status": 503, "stubbed": false})
    );
    // The guest saw the 503 itself (its request body taken), not a body it could not write.
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("the carrier answered 503"), "{log}");

    // Answered 201 the example acks every shipment and the strict release retires it.
    let out = replay(
        &config,
        &args(&strict, &records, &["--json", "--http-answer", "201"]),
    );
    assert_eq!(out.status.code(), Some(1), "the acks differ: {out:?}");
    let report = json(&out);
    assert_eq!(report["differences_total"], 3, "{report}");
    let mut keys: Vec<&str> = report["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(
                (&d["current"], &d["candidate"]),
                (&"ack".into(), &"drop".into())
            );
            d["partition_key"].as_str().unwrap()
        })
        .collect();
    keys.sort();
    assert_eq!(keys, ["order-1", "order-2", "order-3"], "{report}");
    for who in ["current", "candidate"] {
        let effects = &report["effects"][who];
        assert_eq!(effects["counts"]["http-not-sent"], 3, "{report}");
        assert_eq!(effects["http_answer"]["status"], 201, "{report}");
        assert_eq!(effects["http_answer"]["stubbed"], true, "{report}");
        assert_eq!(
            effects["first"][0],
            format!("POST {CARRIER}/book: not sent, answered 201 (stubbed)"),
            "{report}"
        );
    }

    // A body from a file; the text report says what was answered. 200: both versions ack.
    let body = dir.write("booked.json", r#"{"booking":"b-1"}"#);
    let told = format!("200:{}", body.display());
    let out = replay(&config, &args(&strict, &records, &["--http-answer", &told]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("unsent requests answered 200 (stubbed), 17 bytes of application/json"),
        "{text}"
    );
    let effect = format!("POST {CARRIER}/book: not sent, answered 200 (stubbed)");
    assert!(text.contains(&effect), "{text}");
}

#[test]
fn a_bad_http_answer_is_refused_naming_the_flag_or_the_file_before_anything_runs() {
    let dir = Scratch::new("replay-answer-bad");
    let (config, records) = shipping(&dir);
    let big = dir.write("big.json", vec![b' '; (1 << 20) + 1]);
    let big_told = format!("201:{}", big.display());
    let ship = guest("ship");
    let cases = [
        ("abc", "STATUS[:FILE]"),
        ("99", "from 200 to 599"),
        ("100", "from 200 to 599"),
        ("201:/missing", "cannot read the answer body /missing"),
        (&big_told, "big.json is 1048577 bytes, more than 1048576"),
    ];
    for (value, says) in cases {
        let out = replay(&config, &args(&ship, &records, &["--http-answer", value]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {stderr}");
        assert!(
            stderr.contains("--http-answer") && stderr.contains(says),
            "{value}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{value}: a report was printed");
    }
    // A shadow's answer body is bounded smaller (it travels in a header and a table row); the
    // admin API is never asked (nothing listens there).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardhost"))
        .args(["deploy", "ship", ship.to_str().unwrap(), "--shadow"])
        .args(["--http-answer", &big_told, "--admin", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("more than 65536 allowed"), "{stderr}");
}
