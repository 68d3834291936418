//! `[subscription.http]` and `[subscription.config]`: every accepted form and every refusal.

use super::*;
use crate::capability::config::ConfigValue;
use crate::capability::http::{HttpGrant, Origin};

const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

/// `MINIMAL` followed by some TOML, the line of that TOML the problem is on, its key (`sub.`
/// for `subscription[0].`) and a part of its message.
#[rustfmt::skip]
const GRANT_PROBLEMS: &[(&str, usize, &str, &str)] = &[
    ("http = 5", 1, "sub.http", "expected a table, found the integer 5"),
    ("[subscription.http]\ntimeout = \"1s\"", 1, "sub.http.allow", "missing required key `allow`"),
    ("[subscription.http]\nallow = []", 2, "sub.http.allow", "allow is empty: a [subscription.http] table with no origin grants nothing; remove the table or list origins"),
    ("[subscription.http]\nallow = \"https://x.example\"", 2, "sub.http.allow", "expected an array, found the string \"https://x.example\""),
    ("[subscription.http]\nallow = [5]", 2, "sub.http.allow[0]", "expected a string, found the integer 5"),
    ("[subscription.http]\nallow = [\"https://x.example/api\"]", 2, "sub.http.allow[0]", "\"https://x.example/api\": an origin has no path; write \"https://x.example\""),
    ("[subscription.http]\nallow = [\"https://x.example?q=1\"]", 2, "sub.http.allow[0]", "an origin has no query; write \"https://x.example\""),
    ("[subscription.http]\nallow = [\"https://x.example#f\"]", 2, "sub.http.allow[0]", "an origin has no fragment"),
    ("[subscription.http]\nallow = [\"https://me@x.example\"]", 2, "sub.http.allow[0]", "an origin has no user name or password; write \"https://x.example\""),
    ("[subscription.http]\nallow = [\"https://*.x.example\"]", 2, "sub.http.allow[0]", "wildcards are not supported"),
    ("[subscription.http]\nallow = [\"ws://x.example\"]", 2, "sub.http.allow[0]", "the scheme must be http or https, not \"ws\""),
    ("[subscription.http]\nallow = [\"x.example\"]", 2, "sub.http.allow[0]", "an origin is scheme://host[:port]"),
    ("[subscription.http]\nallow = [\"http://x.example:0\"]", 2, "sub.http.allow[0]", "the port must be a number from 1 to 65535"),
    ("[subscription.http]\nallow = [\n  \"https://x.example\",\n  \"HTTPS://X.Example:443\",\n]", 4, "sub.http.allow[1]", "\"HTTPS://X.Example:443\" is listed twice: it is the origin https://x.example, first on line 7"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\ntimeout = \"0s\"", 3, "sub.http.timeout", "`timeout` must be longer than zero"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\ntimeout = \"16m\"", 3, "sub.http.timeout", "`timeout` must be at most 15m"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\ntimeout = 5", 3, "sub.http.timeout", "a bare number is ambiguous as a duration"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nmax_body = 0", 3, "sub.http.max_body", "`max_body` must be from 1 byte to 1GiB"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nmax_body = \"2GiB\"", 3, "sub.http.max_body", "`max_body` must be from 1 byte to 1GiB"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nmax_body = \"lots\"", 3, "sub.http.max_body", "\"lots\" is not a size"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nmax_in_flight = 0", 3, "sub.http.max_in_flight", "0 is out of range; `max_in_flight` must be from 1 to 1024"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nmax_in_flight = 1025", 3, "sub.http.max_in_flight", "must be from 1 to 1024"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nca_file = \"gone.pem\"", 3, "sub.http.ca_file", "CA file not found: "),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nca_file = \"feed.ndjson\"", 3, "sub.http.ca_file", "feed.ndjson holds no PEM certificate (a \"-----BEGIN CERTIFICATE-----\" block)"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\norigins = []", 3, "sub.http.origins", "unknown key `origins`; expected one of: allow, timeout, max_body, max_in_flight, ca_file, allow_private"),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nallow_private = \"yes\"", 3, "sub.http.allow_private", "expected a boolean (true or false), found the string \"yes\""),
    ("[subscription.http]\nallow = [\"https://x.example\"]\nallow_private = 1", 3, "sub.http.allow_private", "expected a boolean (true or false), found the integer 1"),
    ("config = 5", 1, "sub.config", "expected a table, found the integer 5"),
    ("[subscription.config]\nport = 8090", 2, "sub.config.port", "config values are strings: write \"8090\""),
    ("[subscription.config]\ndebug = true", 2, "sub.config.debug", "config values are strings: write \"true\""),
    ("[subscription.config]\nratio = 0.5", 2, "sub.config.ratio", "config values are strings: write \"0.5\""),
    ("[subscription.config]\nhosts = [\"a\"]", 2, "sub.config.hosts", "config values are strings, found an array"),
    ("[subscription.config]\ncarrier.url = \"x\"", 2, "sub.config.carrier", "config values are strings, found a table (a dotted name makes one: quote it, as in \"carrier.url\" = \"...\")"),
    ("[subscription.config]\n\"a b\" = \"x\"", 2, "sub.config.\"a b\"", "\"a b\" is not a config name; use letters, digits, `_`, `-` or `.`"),
];

#[test]
fn each_bad_grant_is_reported_with_its_line_key_and_reason() {
    for &(extra, line, key, message) in GRANT_PROBLEMS {
        let problems = Scratch::new().problems(&format!("{MINIMAL}{extra}\n"));
        let key = key.replacen("sub.", "subscription[0].", 1);
        assert_eq!(
            places(&problems),
            [(4 + line, key.as_str())],
            "{extra}: {problems:#?}"
        );
        assert!(
            problems[0].message.contains(message),
            "{extra}: {}",
            problems[0]
        );
    }
}

#[test]
fn without_http_or_config_tables_nothing_is_granted() {
    let wasi = load("").subscriptions[0].wasi.clone();
    assert_eq!((wasi.http(), wasi.config().is_empty()), (None, true));
}

#[test]
fn an_http_grant_reads_its_origins_and_bounds() {
    let s = Scratch::new();
    fs::write(s.touch("certs/ca.pem"), PEM).unwrap();
    let config = s.load(&format!(
        "{MINIMAL}[subscription.http]\n\
         allow = [\"https://API.Carrier.example\", \"http://127.0.0.1:8090\", \"http://[::1]:80\"]\n\
         timeout = \"2500ms\"\nmax_body = \"1MiB\"\nmax_in_flight = 4\nca_file = \"certs/ca.pem\"\n\
         allow_private = true\n"
    ));
    let origin = |scheme: &str, host: &str, port| Origin {
        scheme: scheme.into(),
        host: host.into(),
        port,
    };
    let wanted = HttpGrant {
        allow: vec![
            origin("https", "api.carrier.example", 443),
            origin("http", "127.0.0.1", 8090),
            origin("http", "[::1]", 80),
        ],
        timeout: Duration::from_millis(2500),
        max_body: 1 << 20,
        max_in_flight: 4,
        ca_file: Some(s.0.join("certs/ca.pem")),
        allow_private: true,
    };
    assert_eq!(config.subscriptions[0].wasi.http(), Some(wanted));
}

#[test]
fn an_http_grant_with_only_origins_takes_the_default_bounds() {
    let http = load("[subscription.http]\nallow = [\"https://x.example\"]").subscriptions[0]
        .wasi
        .http()
        .clone()
        .expect("a grant");
    let bounds = (
        http.timeout,
        http.max_body,
        http.max_in_flight,
        http.ca_file,
        http.allow_private,
    );
    assert_eq!(bounds, (Duration::from_secs(5), 10 << 20, 16, None, false));
    let http = load("[subscription.http]\nallow = [\"https://x.example\"]\nmax_body = 1\nmax_in_flight = 1024\ntimeout = \"15m\"")
        .subscriptions[0]
        .wasi
        .http()
        .clone()
        .unwrap();
    let bounds = (http.timeout, http.max_body, http.max_in_flight);
    assert_eq!(bounds, (Duration::from_secs(900), 1, 1024));
}

#[test]
fn every_bad_origin_of_a_grant_is_reported() {
    let text = format!(
        "{MINIMAL}[subscription.http]\nallow = [\n  \"https://a.example/x\",\n  \"https://b.example\",\n  \
         \"ftp://c.example\",\n  \"https://b.example:443\",\n]\nmax_in_flight = 0\n"
    );
    let problems = Scratch::new().problems(&text);
    let wanted = [
        (7, "subscription[0].http.allow[0]"),
        (9, "subscription[0].http.allow[2]"),
        (10, "subscription[0].http.allow[3]"),
        (12, "subscription[0].http.max_in_flight"),
    ];
    assert_eq!(places(&problems), wanted, "{problems:#?}");
}

#[test]
fn config_values_are_strings_by_name() {
    let config = load(
        "[subscription.config]\ncarrier_url = \"https://api.carrier.example\"\n\
         \"carrier.region\" = \"eu-1\"\nretry-after = \"\"\nPORT_2 = '8090'",
    );
    let literal = |value: &str| ConfigValue {
        value: value.into(),
        from_env: false,
    };
    let config = &config.subscriptions[0].wasi.config();
    let names: Vec<_> = config.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["PORT_2", "carrier.region", "carrier_url", "retry-after"]
    );
    assert_eq!(
        config["carrier_url"],
        literal("https://api.carrier.example")
    );
    assert_eq!(config["carrier.region"], literal("eu-1"));
    assert_eq!(config["retry-after"], literal(""));
    assert_eq!(config["PORT_2"], literal("8090"));
}

#[test]
fn every_grant_problem_of_a_subscription_is_listed_at_once() {
    let text = format!(
        "{MINIMAL}[subscription.wasi]\nenv = [\"1X\"]\n[subscription.http]\nallow = []\n\
         [subscription.config]\nport = 1\nok = \"yes\"\n"
    );
    let problems = Scratch::new().problems(&text);
    let wanted = [
        (6, "subscription[0].wasi.env[0]"),
        (8, "subscription[0].http.allow"),
        (10, "subscription[0].config.port"),
    ];
    assert_eq!(places(&problems), wanted, "{problems:#?}");
}
