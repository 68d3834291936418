//! A shadow told `--http-answer` through the admin API: its unsent requests get that answer,
//! so the records put into the embedded stream compare its success path with the current
//! version's (which books for real).

use std::time::Duration;

use shardhost::shadow::{DifferenceCount, ShadowReport};

use super::{TOKEN, cli, start_sub, text};
use crate::support::{HttpServer, Scratch, Subscription, guest, wait_until_else};

#[test]
fn a_shadow_told_http_answer_201_compares_the_success_path_of_the_records_put() {
    let dir = Scratch::new("put-shadow-answer");
    let carrier = HttpServer::start();
    let sub = Subscription::new("orders", "orders", guest("ship"))
        .nested("http", "allow", vec![carrier.origin()])
        .nested(
            "config",
            "carrier_url",
            format!("{}/carrier", carrier.origin()),
        )
        .nested("state", "store", "memory");
    let (host, seen) = start_sub(&dir, sub);
    // A release that counts only the carrier's 200 as booked; the carrier answers 201.
    let strict = guest("ship_strict");
    let strict = strict.to_str().unwrap();
    let shadow_args = [
        "deploy",
        "orders",
        "--shadow",
        strict,
        "--http-answer",
        "201",
    ];
    let out = cli(&host, Some(TOKEN), &shadow_args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("unsent requests answered 201 (stubbed)"),
        "{}",
        text(&out.stdout)
    );
    let lines: String = (1..=3)
        .map(|id| {
            let shipment = format!(r#"{{"id":{id},"address":"Main St {id}","carrier":"ups"}}"#);
            let line =
                serde_json::json!({ "partition_key": format!("order-{id}"), "data": shipment });
            format!("{line}\n")
        })
        .collect();
    let records = dir.write("shipments.ndjson", lines);
    let out = cli(
        &host,
        Some(TOKEN),
        &["put", "orders", records.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    host.wait_for("3 shipments settled", |_| seen.len() >= 3);

    let shadow = || -> Option<ShadowReport> {
        let report = host.block_on(host.admin(Some(TOKEN)).status()).unwrap();
        report.subscriptions[0].shadow.clone()
    };
    wait_until_else(
        "the shadow to compare the 3 shipments put",
        Duration::from_secs(60),
        || shadow().is_some_and(|s| s.agree + s.differ + s.records_dropped >= 3),
        || format!("{:#?}", shadow()),
    );
    let s = shadow().unwrap();
    assert_eq!(s.http_answer.as_deref(), Some("201 (stubbed)"), "{s:#?}");
    // One batch of 3: compared whole unless the shadow was busy (counted as dropped).
    if s.records_dropped == 0 {
        let acked_not_booked = DifferenceCount {
            current: "ack".into(),
            candidate: "drop".into(),
            records: 3,
        };
        assert_eq!(s.differences, [acked_not_booked], "{s:#?}");
        assert_eq!(s.effects.get("http-not-sent"), Some(&3), "{s:#?}");
    }
    // Only the current version booked: the shadow's requests were answered, never sent.
    assert_eq!(carrier.requests(), 3, "{:?}", carrier.bookings());
    let out = cli(&host, Some(TOKEN), &["status"]);
    let status = text(&out.stdout);
    assert!(
        status.contains("unsent requests answered 201 (stubbed)"),
        "{status}"
    );
    host.stop();
}
