use std::path::Path;

use super::names::{TimestampError, epoch_millis};
use super::*;

#[test]
fn lines_count_from_one() {
    let w = Walker::new(Path::new("x.toml"), "a = 1\nb = 2\n\nc = 3");
    let lines: Vec<_> = [0, 5, 6, 12, 13, 17].map(|offset| w.line(offset)).into();
    assert_eq!(lines, [1, 1, 2, 3, 4, 4]);
}

#[test]
fn listen_takes_ip_and_port_or_a_loopback_port() {
    let ok = |s: &str| parse_listen(s).unwrap().to_string();
    assert_eq!(ok("127.0.0.1:9750"), "127.0.0.1:9750");
    assert_eq!(ok(":9750"), "127.0.0.1:9750");
    assert_eq!(ok("localhost:80"), "127.0.0.1:80");
    assert_eq!(ok("[::1]:9750"), "[::1]:9750");
    for bad in ["9750", "localhost", "example.com:80", ":99999", "127.0.0.1"] {
        let err = parse_listen(bad).unwrap_err();
        assert!(
            err.starts_with(&format!("\"{bad}\" is not a listen address")),
            "{err}"
        );
    }
}

#[test]
fn timestamps_become_milliseconds_since_the_epoch() {
    let ms = |s: &str| epoch_millis(&s.parse().unwrap()).ok();
    assert_eq!(ms("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(ms("2026-12-01T00:00:00Z"), Some(1_796_083_200_000));
    assert_eq!(ms("2000-02-29T12:34:56.789Z"), Some(951_827_696_789));
    assert_eq!(ms("2024-03-01T00:30:00-02:30"), Some(1_709_262_000_000));
    assert_eq!(ms("1969-12-31T23:00:00Z"), None);
    assert_eq!(ms("2026-12-01T00:00:00"), None);
    assert_eq!(ms("2026-12-01"), None);
    assert!(matches!(
        epoch_millis(&"2016-12-31T23:59:60Z".parse().unwrap()),
        Err(TimestampError::NoSuchTime)
    ));
}

#[test]
fn names_urls_and_env_names_follow_their_rules() {
    assert!(is_name("shipments.dead-2_x") && !is_name("") && !is_name("a b"));
    assert!(is_name(&"a".repeat(128)) && !is_name(&"a".repeat(129)));
    assert!(is_url("http://127.0.0.1:4567") && is_url("https://kinesis.aws"));
    assert!(!is_url("http://") && !is_url("ftp://x") && !is_url("localhost:4567"));
    assert!(is_env_name("RUST_LOG") && is_env_name("_x1"));
    assert!(!is_env_name("1X") && !is_env_name("A-B") && !is_env_name(""));
}
