//! The status page's routes through plain HTTP: its files come without the token and under a
//! strict Content-Security-Policy, the data routes still want the token, the same-origin rules
//! hold for the page too, and `/status/history` charts the records that flow.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hyper::{Method, StatusCode};

use super::{TOKEN, keep_records_flowing, start};
use crate::support::{Running, Scratch, wait_until_else};

/// One raw request (HTTP/1.1, `Connection: close`): the status, the head's lines, the body.
fn raw_get(host: &Running, path: &str, headers: &[&str]) -> (u16, String, String) {
    let addr = host.admin.unwrap();
    let mut conn = TcpStream::connect(addr).unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    let has_host = headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"));
    if has_host {
        request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    }
    for h in headers {
        request.push_str(h);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    conn.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[test]
fn the_page_and_its_files_are_served_without_the_token_under_a_strict_policy() {
    let dir = Scratch::new("status-page-files");
    let host = start(&dir);
    for (path, content_type, marker) in [
        ("/", "text/html", "<title>shardhost status</title>"),
        ("/page/status.js", "text/javascript", "sessionStorage"),
        ("/page/status.css", "text/css", "svg.chart"),
    ] {
        let (status, head, body) = raw_get(&host, path, &[]);
        assert_eq!(status, 200, "{path}: {body}");
        assert!(
            head.contains(&format!("content-type: {content_type}")),
            "{path}: {head}"
        );
        assert!(
            head.contains("content-security-policy: default-src 'self'; script-src 'self'"),
            "{path}: {head}"
        );
        assert!(head.contains("x-content-type-options: nosniff"), "{head}");
        assert!(body.contains(marker), "{path}");
        assert!(
            !body.contains(TOKEN) && !body.contains("shardId-"),
            "no data"
        );
    }
    host.stop();
}

#[test]
fn the_data_routes_still_refuse_a_request_without_the_token() {
    let dir = Scratch::new("status-page-token");
    let host = start(&dir);
    for path in ["/status", "/status/history", "/metrics"] {
        for token in [None, Some("wrong")] {
            let answer = host
                .block_on(host.admin(token).send(Method::GET, path, Vec::new()))
                .unwrap();
            assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{path} {token:?}");
        }
        let answer = host
            .block_on(host.admin(Some(TOKEN)).send(Method::GET, path, Vec::new()))
            .unwrap();
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{path}: {}",
            answer.message()
        );
    }
    host.stop();
}

#[test]
fn the_page_obeys_the_same_origin_rules_as_every_route() {
    let dir = Scratch::new("status-page-origin");
    let host = start(&dir);
    for path in ["/", "/page/status.js", "/status/history"] {
        let (status, _, body) = raw_get(&host, path, &["Origin: http://evil.example"]);
        assert_eq!(status, 403, "{path} from another page: {body}");
        let (status, _, body) = raw_get(&host, path, &["Host: evil.example:9750"]);
        assert_eq!(status, 403, "{path} for another host name: {body}");
    }
    host.stop();
}

#[test]
fn the_history_shows_outcomes_per_second_and_lag_of_flowing_records() {
    let dir = Scratch::new("status-page-history");
    let host = start(&dir);
    let flowing = keep_records_flowing(&host, false);
    let client = host.admin(Some(TOKEN));
    let history = || -> serde_json::Value {
        let answer = host
            .block_on(client.send(Method::GET, "/status/history", Vec::new()))
            .unwrap();
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.message());
        serde_json::from_slice(&answer.body).unwrap()
    };
    let points = |h: &serde_json::Value| h["subscriptions"][0]["points"].as_array().cloned();
    wait_until_else(
        "a point with acked and dropped records per second",
        Duration::from_secs(60),
        || {
            points(&history()).is_some_and(|p| {
                p.iter().any(|p| {
                    p["per_second"]["ack"].as_f64() > Some(0.0)
                        && p["per_second"]["drop"].as_f64() > Some(0.0)
                        && p["max_lag_ms"].is_u64()
                })
            })
        },
        || history().to_string(),
    );
    let h = history();
    assert_eq!(h["every_ms"], 5000);
    assert_eq!(h["subscriptions"][0]["name"], "orders");
    // One record in four is dropped: wherever both show, more were acked.
    for p in points(&h).unwrap() {
        let (ack, drop) = (
            p["per_second"]["ack"].as_f64().unwrap(),
            p["per_second"]["drop"].as_f64().unwrap(),
        );
        assert!(drop == 0.0 || ack > drop, "{p}");
    }
    flowing.cancel();
    host.stop();
}
