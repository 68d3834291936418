//! Tests of the config walk: every behaviour a user sees from `shardhost check`.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::net::SocketAddr;

use super::super::Problem;
use super::*;
use crate::capability::config::{ConfigGrant, ConfigValue};
use crate::capability::env::EnvGrant;
use crate::capability::http::HttpGrant;
use crate::capability::state::StateGrant;
use crate::config::{Grants, ReadMode};

/// Each capability's grant, as the tests look at them.
trait Granted {
    fn env(&self) -> Vec<String>;
    fn http(&self) -> Option<HttpGrant>;
    fn config(&self) -> std::collections::BTreeMap<String, ConfigValue>;
    fn state(&self) -> Option<StateGrant>;
}

impl Granted for Grants {
    fn env(&self) -> Vec<String> {
        self.get::<EnvGrant>()
            .map(|g| g.0.clone())
            .unwrap_or_default()
    }

    fn http(&self) -> Option<HttpGrant> {
        self.get::<HttpGrant>().cloned()
    }

    fn config(&self) -> std::collections::BTreeMap<String, ConfigValue> {
        self.get::<ConfigGrant>()
            .map(|g| g.0.clone())
            .unwrap_or_default()
    }

    fn state(&self) -> Option<StateGrant> {
        self.get::<StateGrant>().cloned()
    }
}
use crate::config::{Config, ConfigError, LeaseStoreKind, Limits, RetryPolicy, StartAt};

/// A scratch directory under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    /// A scratch dir holding `ship.wasm` and `feed.ndjson`.
    fn new() -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("shardhost-config-test-{}-{n}", std::process::id());
        let s = Scratch(std::env::temp_dir().join(name));
        let _ = fs::remove_dir_all(&s.0);
        s.touch("ship.wasm");
        s.touch("feed.ndjson");
        s
    }

    fn touch(&self, relative: &str) -> PathBuf {
        let path = self.0.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b"").unwrap();
        path
    }

    fn load_at(&self, relative: &str, text: &str) -> Result<Config, ConfigError> {
        let path = self.touch(relative);
        fs::write(&path, text).unwrap();
        Config::load(&path)
    }

    fn load(&self, text: &str) -> Config {
        self.load_at("shardhost.toml", text)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn problems(&self, text: &str) -> Vec<Problem> {
        match self.load_at("shardhost.toml", text) {
            Ok(config) => panic!("expected problems, got {config:#?}"),
            Err(e) => e.problems,
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const MINIMAL: &str =
    "[[subscription]]\nname = \"ship\"\nstream = \"s\"\nhandler = \"ship.wasm\"\n";

/// The config `MINIMAL` followed by `extra`.
fn load(extra: &str) -> Config {
    Scratch::new().load(&format!("{MINIMAL}{extra}\n"))
}

/// (line and key) of each problem.
fn places(problems: &[Problem]) -> Vec<(usize, &str)> {
    let line = |p: &Problem| p.at.line.unwrap_or(0);
    problems
        .iter()
        .map(|p| (line(p), p.at.key.as_str()))
        .collect()
}

/// Configs with one problem each: `MINIMAL` followed by some TOML, the line of that TOML the
/// problem is on, its key (`sub.` for `subscription[0].`) and a part of its message.
#[rustfmt::skip]
const ONE_PROBLEM: &[(&str, usize, &str, &str)] = &[
    ("[subscription.limits]\nmemroy = 1", 2, "sub.limits.memroy", "unknown key `memroy`; expected one of: memory, timeout"),
    ("bacth = 10", 1, "sub.bacth", "unknown key `bacth`; expected one of: name, stream, handler,"),
    ("[hosts]", 1, "hosts", "expected one of: host, kinesis, leases, fleet, admin, subscription"),
    ("[admin]\n\"a b\" = 1", 2, "admin.\"a b\"", "unknown key `a b`"),
    ("[host]\nname = 5", 2, "host.name", "expected a string, found the integer 5"),
    ("[host]\nowner_id = \"\"", 2, "host.owner_id", "`owner_id` must not be empty"),
    ("[host]\nretry_key = \"short\"", 2, "host.retry_key", "`retry_key` must be at least 16 characters"),
    ("[host]\nretry_keys_previous = [\"long enough secret\", \"short\"]", 2, "host.retry_keys_previous[1]", "each of `retry_keys_previous` must be at least 16 characters"),
    ("[kinesis]\ntest_credentials = \"yes\"", 2, "kinesis.test_credentials", "expected a boolean (true or false), found the string \"yes\""),
    ("[kinesis]\nendpoint = \"localhost:4567\"", 2, "kinesis.endpoint", "unknown endpoint \"localhost:4567\"; expected \"memory\" or an http:// or https:// URL (omit it for AWS)"),
    ("[kinesis]\nendpoint = \"http://\"", 2, "kinesis.endpoint", "unknown endpoint \"http://\""),
    ("[kinesis]\nca_file = \"gone.pem\"", 2, "kinesis.ca_file", "CA file not found: "),
    ("[kinesis]\nca_file = \"feed.ndjson\"", 2, "kinesis.ca_file", "feed.ndjson holds no PEM certificate"),
    ("batch = \"100\"", 1, "sub.batch", "expected an integer, found the string \"100\""),
    ("batch = 10001", 1, "sub.batch", "10001 is out of range; `batch` must be from 1 to 10000"),
    ("lanes = 0", 1, "sub.lanes", "0 is out of range; `lanes` must be from 1 to 64"),
    ("create_if_missing = 1001", 1, "sub.create_if_missing", "must be from 1 to 1000"),
    ("max_attempts = -1\ndead_letter = \"d\"", 1, "sub.max_attempts", "-1 is out of range"),
    ("limits = 5", 1, "sub.limits", "expected a table, found the integer 5"),
    ("wasi = { env = \"HOME\" }", 1, "sub.wasi.env", "expected an array, found the string \"HOME\""),
    ("poll_interval = 200", 1, "sub.poll_interval", "a bare number is ambiguous as a duration; write it with a unit, e.g. \"200s\" or \"200ms\""),
    ("poll_interval = \"soon\"", 1, "sub.poll_interval", "\"soon\" is not a duration; expected a number with a unit"),
    ("[subscription.limits]\nmemory = \"512KiB\"", 2, "sub.limits.memory", "\"512KiB\" is out of range; the memory limit must be from 1MiB to 4GiB"),
    ("[subscription.limits]\nmemory = \"8GiB\"", 2, "sub.limits.memory", "\"8GiB\" is out of range"),
    ("[subscription.limits]\nmemory = 1024", 2, "sub.limits.memory", "1024 bytes is out of range"),
    ("[subscription.limits]\nmemory = true", 2, "sub.limits.memory", "expected a size like \"64MiB\" or a number of bytes"),
    ("[subscription.limits]\ntimeout = \"0ms\"", 2, "sub.limits.timeout", "`timeout` must be longer than zero"),
    ("feed = \"feed.ndjson\"", 1, "sub.feed", "`feed` works only with the embedded stream; set [kinesis] endpoint = \"memory\""),
    ("feed = \"feed.ndjson\"\n[kinesis]\nendpoint = \"http://127.0.0.1:4567\"", 1, "sub.feed", "only with the embedded stream"),
    ("feed = \"feed.ndjson\"\n[kinesis]\nendpoint = \"kinesis\"", 3, "kinesis.endpoint", "unknown endpoint"),
    ("feed = \"gone.ndjson\"\n[kinesis]\nendpoint = \"memory\"", 1, "sub.feed", "feed file not found: "),
    ("max_attempts = 3\ndead_letter = \"a/b\"", 2, "sub.dead_letter", "\"a/b\" is not a valid stream name; use 1 to 128 letters, digits, `_`, `.` or `-`"),
    ("max_attempts = 3", 1, "sub.max_attempts", "max_attempts needs `dead_letter`"),
    ("dead_letter = \"d\"", 1, "sub.dead_letter", "`dead_letter` is only used with `max_attempts`"),
    ("retry_stream = \"r\"", 1, "sub.retry_stream", "`retry_stream` is only used with `max_attempts`"),
    ("max_attempts = 0\ndead_letter = \"d\"", 1, "sub.max_attempts", "0 is out of range; `max_attempts` must be from 1 to 1000"),
    ("in_place_max_delay = \"10ms\"", 1, "sub.in_place_max_delay", "`in_place_max_delay` must be at least 100ms"),
    ("in_place_max_delay = \"2h\"", 1, "sub.in_place_max_delay", "`in_place_max_delay` must be at most 1h"),
    ("in_place_max_delay = 60", 1, "sub.in_place_max_delay", "a bare number is ambiguous as a duration"),
    ("max_attempts = 3\ndead_letter = \"d\"\nin_place_max_delay = \"5s\"", 3, "sub.in_place_max_delay", "`in_place_max_delay` is only used without `max_attempts`"),
    ("lanes = 65", 1, "sub.lanes", "65 is out of range; `lanes` must be from 1 to 64"),
    ("publish_to = [\"ok\", \"no/pe\"]", 1, "sub.publish_to[1]", "\"no/pe\" is not a valid stream name"),
    ("[leases]\nstore = \"dynamodb\"", 1, "leases.table", "missing required key `table`"),
    ("[kinesis]\ntest_credentials = true", 2, "kinesis.test_credentials", "no `endpoint` is set, so they would go to AWS"),
    ("[leases]\nstore = \"dynamodb\"\ntable = \"t\"\ntest_credentials = true", 4, "leases.test_credentials", "[leases] has no `endpoint`, so they would go to AWS DynamoDB"),
    ("[kinesis]\nendpoint = \"http://127.0.0.1:4567\"\ntest_credentials = true\n[leases]\nstore = \"dynamodb\"\ntable = \"t\"", 5, "leases.store", "[kinesis] test_credentials would send dummy keys"),
    ("[leases]\nregion = \"eu-west-1\"", 2, "leases.region", "`region` is only used with store = \"dynamodb\""),
    ("[leases]\nstore = \"dynamodb\"\ntable = \"t\"\nendpoint = \"dynamo\"", 4, "leases.endpoint", "\"dynamo\" is not an http:// or https:// URL"),
    ("[leases]\ntable = \"t\"", 2, "leases.table", "`table` is only used with store = \"dynamodb\""),
    ("[leases]\nstore = \"memory\"\nendpoint = \"http://x\"", 3, "leases.endpoint", "`endpoint` is only used with store = \"dynamodb\""),
    ("[leases]\nstore = \"redis\"\ntable = \"t\"", 2, "leases.store", "unknown lease store \"redis\"; expected \"memory\" or \"dynamodb\""),
    ("[leases]\nlegacy_stream = \"\"", 2, "leases.legacy_stream", "`legacy_stream` must not be empty"),
    ("[leases]\nttl = \"3s\"\nrenew_every = \"3s\"", 3, "leases.renew_every", "renew_every (3s) must be at most 1.8s, three fifths of ttl (3s)"),
    // Issue 28 (4): passed before, and lost every lease at its first renewal.
    ("[leases]\nttl = \"10s\"\nrenew_every = \"8s\"", 3, "leases.renew_every", "renew_every (8s) must be at most 6s, three fifths of ttl (10s): a holder gives its lease up four fifths of ttl after it sent its last renewal"),
    ("[leases]\nttl = \"4s\"", 2, "leases.ttl", "ttl (4s) must be at least 5s, five thirds of renew_every (3s by default)"),
    ("[leases]\nttl = \"2s\"", 2, "leases.ttl", "ttl (2s) must be at least 5s, five thirds of renew_every (3s by default)"),
    ("[leases]\nlist_every = \"0s\"", 2, "leases.list_every", "`list_every` must be longer than zero"),
    ("[leases]\nttl = \"1000000000h\"", 2, "leases.ttl", "`ttl` must be at most 1h"),
    ("[leases]\nrenew_every = \"2h\"", 2, "leases.renew_every", "`renew_every` must be at most 1h"),
    ("[leases]\nlist_every = \"90000000000000000s\"", 2, "leases.list_every", "`list_every` must be at most 1h"),
    ("[leases]\ncheckpoint_every = \"2h\"", 2, "leases.checkpoint_every", "`checkpoint_every` must be at most 1h"),
    ("poll_interval = \"61m\"", 1, "sub.poll_interval", "`poll_interval` must be at most 1h"),
    ("[subscription.limits]\ntimeout = \"16m\"", 2, "sub.limits.timeout", "`timeout` must be at most 15m"),
    ("[admin]\nlisten = \"0.0.0.0:9750\"", 2, "admin.listen", "a token is required when the admin API listens off loopback (0.0.0.0:9750)"),
    ("[admin]\nlisten = \"localhost\"", 2, "admin.listen", "\"localhost\" is not a listen address; expected \"IP:PORT\""),
    ("[admin]\nlisten = \":1\"\ntoken = \"\"", 3, "admin.token", "`token` must not be empty"),
    ("[admin]\nlisten = \":1\"\nmax_upload = \"0MiB\"", 3, "admin.max_upload", "max_upload must be more than 0 bytes"),
    ("watch = \"yes\"", 1, "sub.watch", "expected a boolean"),
    ("[subscription.limits]\nfuel = 0", 2, "sub.limits.fuel", "0 is out of range; `fuel` must be at least 1"),
    ("start_at = \"earliest\"", 1, "sub.start_at", "unknown start_at \"earliest\"; expected \"latest\", \"trim_horizon\" or { timestamp = \"2026-12-01T00:00:00Z\" }"),
    ("start_at = 5", 1, "sub.start_at", "found the integer 5"),
    ("start_at = { timestamp = \"yesterday\" }", 1, "sub.start_at.timestamp", "\"yesterday\" is not an RFC 3339 timestamp"),
    ("start_at = { timestamp = 2026-12-01T00:00:00 }", 1, "sub.start_at.timestamp", "needs a date, a time and a UTC offset"),
    ("start_at = { timestamp = \"1969-12-31T23:00:00Z\" }", 1, "sub.start_at.timestamp", "is before 1970"),
    ("start_at = {}", 1, "sub.start_at.timestamp", "missing required key `timestamp`"),
    ("start_at = { at = \"latest\", timestamp = 2026-12-01T00:00:00Z }", 1, "sub.start_at.at", "unknown key `at`"),
    ("read = \"push\"", 1, "sub.read", "unknown read \"push\"; expected \"polling\" (GetRecords) or \"fan-out\" (SubscribeToShard through a registered consumer)"),
    ("read = \"fan-out\"\n[kinesis]\nendpoint = \"memory\"", 1, "sub.read", "read = \"fan-out\" needs Kinesis (SubscribeToShard); the embedded stream is read by polling only"),
    ("consumer = \"c\"", 1, "sub.consumer", "`consumer` is only used with read = \"fan-out\""),
    ("read = \"fan-out\"\nconsumer = \"a b\"", 2, "sub.consumer", "\"a b\" is not valid as a consumer name: Kinesis takes 1 to 128 letters, digits, `_`, `.` or `-`"),
    ("read = \"fan-out\"\n[host]\nname = \"my host\"", 1, "sub.read", "\"my host-ship\" is not valid as the default consumer name ([host] name-subscription name): Kinesis takes 1 to 128 letters, digits, `_`, `.` or `-`; set `consumer`"),
];

#[test]
fn each_bad_value_is_reported_with_its_line_key_and_reason() {
    for &(extra, line, key, message) in ONE_PROBLEM {
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
fn every_problem_is_listed_with_its_line() {
    let text = "[host]\nowner_id = \"\"\n[kinesis]\nendpoint = \"kinesis.local\"\n[leases]\n\
                ttl = \"10\"\n[[subscription]]\nname = \"ship\"\nhandler = \"ship.wasm\"\n\
                batch = 0\n[subscription.limits]\nmemory = \"lots\"\n[[subscription]]\n\
                name = \"ship\"\nstream = \"more\"\nhandler = \"gone.wasm\"\n";
    let s = Scratch::new();
    let problems = s.problems(text);
    let wanted = [
        (2, "host.owner_id"),
        (4, "kinesis.endpoint"),
        (6, "leases.ttl"),
        (7, "subscription[0].stream"),
        (10, "subscription[0].batch"),
        (12, "subscription[0].limits.memory"),
        (14, "subscription[1].name"),
        (16, "subscription[1].handler"),
    ];
    assert_eq!(places(&problems), wanted, "{problems:#?}");
    assert!(
        problems
            .iter()
            .all(|p| p.at.file == s.0.join("shardhost.toml"))
    );
    let duplicate = "duplicate subscription name \"ship\" (first used on line 8)";
    assert_eq!(problems[6].message, duplicate);
}

#[test]
fn missing_required_keys_point_at_the_table_header() {
    let problems = Scratch::new().problems(&format!("{MINIMAL}\n[[subscription]]\nbatch = 5\n"));
    let keys = ["name", "stream", "handler"].map(|k| (6, format!("subscription[1].{k}")));
    let keys: Vec<_> = keys.iter().map(|(l, k)| (*l, k.as_str())).collect();
    assert_eq!(places(&problems), keys, "{problems:#?}");
    assert_eq!(problems[1].message, "missing required key `stream`");
}

#[test]
fn missing_handler_file_is_reported() {
    let s = Scratch::new();
    fs::remove_file(s.0.join("ship.wasm")).unwrap();
    let problems = s.problems(MINIMAL);
    assert_eq!(places(&problems), [(4, "subscription[0].handler")]);
    let wanted = format!(
        "handler file not found: {}",
        s.0.join("ship.wasm").display()
    );
    assert_eq!(problems[0].message, wanted);
    fs::create_dir(s.0.join("ship.wasm")).unwrap();
    let problems = s.problems(MINIMAL);
    assert!(
        problems[0].message.starts_with("handler is not a file: "),
        "{problems:#?}"
    );
}

#[test]
fn limits_that_do_not_parse_are_reported() {
    let extra = "[subscription.limits]\nmemory = \"64M\"\ntimeout = \"5\"\n";
    let problems = Scratch::new().problems(&format!("{MINIMAL}{extra}"));
    let wanted = [
        (6, "subscription[0].limits.memory"),
        (7, "subscription[0].limits.timeout"),
    ];
    assert_eq!(places(&problems), wanted);
    assert!(
        problems[0]
            .message
            .starts_with("\"64M\" has an unknown unit \"M\"; expected")
    );
    assert!(
        problems[0]
            .message
            .contains("KiB, MiB, GiB, TiB (powers of 1024), e.g. \"64MiB\"")
    );
    assert!(
        problems[1]
            .message
            .starts_with("\"5\" has no unit; expected a number with a unit")
    );
    let limits = load("[subscription.limits]\nmemory = 1048576\ntimeout = \"250ms\"").subscriptions
        [0]
    .limits;
    assert_eq!(
        (limits.memory, limits.timeout),
        (1 << 20, Duration::from_millis(250))
    );
}

#[test]
fn malformed_toml_reports_the_line() {
    let text = "[host]\nname = \"shipping\"\nowner_id = = \"x\"\n[[subscription]]\n";
    let problems = Scratch::new().problems(text);
    assert_eq!(places(&problems), [(3, "(syntax)")], "{problems:#?}");
    assert!(
        problems[0].message.starts_with("invalid TOML: "),
        "{problems:#?}"
    );
    let problems = Scratch::new().problems(&format!("{MINIMAL}name = \"again\"\n"));
    assert_eq!(places(&problems), [(5, "(syntax)")], "{problems:#?}");
    assert!(
        problems[0].message.contains("duplicate key"),
        "{problems:#?}"
    );
}

#[test]
fn relative_paths_resolve_against_the_config_dir() {
    let s = Scratch::new();
    s.touch("wasm/ship.wasm");
    let feed = s.touch("conf/data/feed.ndjson");
    let absolute = s.touch("abs/other.wasm");
    let text = format!(
        "[host]\ncache_dir = \"cache\"\n[kinesis]\nendpoint = \"memory\"\n[[subscription]]\n\
         name = \"a\"\nstream = \"s\"\nhandler = \"../wasm/ship.wasm\"\nfeed = \"data/feed.ndjson\"\n\
         [[subscription]]\nname = \"b\"\nstream = \"s\"\nhandler = \"{}\"\n",
        absolute.display()
    );
    let config = s.load_at("conf/shardhost.toml", &text).unwrap();
    let conf = s.0.join("conf");
    assert_eq!(config.host.cache_dir, Some(conf.join("cache")));
    assert_eq!(
        config.subscriptions[0].handler,
        conf.join("../wasm/ship.wasm")
    );
    assert_eq!(config.subscriptions[0].feed, Some(feed));
    assert_eq!(config.subscriptions[1].handler, absolute);
}

#[test]
fn a_subscription_shares_its_streams_lease_rows_only_when_it_reads_the_stream_alone() {
    use crate::lease::LeaseRows::{Stream, Subscription};
    let sub = |name: &str, stream: &str, extra: &str| {
        format!(
            "[[subscription]]\nname = \"{name}\"\nstream = \"{stream}\"\nhandler = \"ship.wasm\"\n{extra}"
        )
    };
    let config = Scratch::new().load(
        &[
            sub("one", "orders", ""),
            sub("two", "orders", ""),
            sub("three", "orders", "lease_key = \"stream\"\n"),
            sub("alone", "invoices", ""),
            sub("own", "refunds", "lease_key = \"subscription\"\n"),
        ]
        .concat(),
    );
    let rows: Vec<_> = config
        .subscriptions
        .iter()
        .map(|s| (s.name.as_str(), s.lease_rows))
        .collect();
    assert_eq!(
        rows,
        [
            ("one", Subscription),
            ("two", Subscription),
            ("three", Stream),
            ("alone", Stream),
            ("own", Subscription)
        ]
    );
    let problems = Scratch::new().problems(
        &[
            sub("one", "orders", "lease_key = \"stream\"\n"),
            sub("two", "orders", "lease_key = \"stream\"\n"),
            sub("three", "orders", "lease_key = \"both\"\n"),
        ]
        .concat(),
    );
    assert_eq!(
        places(&problems),
        [
            (10, "subscription[1].lease_key"),
            (15, "subscription[2].lease_key")
        ]
    );
    assert!(
        problems[0]
            .message
            .starts_with("subscriptions `one` (line 5) and `two` both read stream `orders`"),
        "{problems:#?}"
    );
    assert!(
        problems[1]
            .message
            .starts_with("unknown lease_key \"both\"")
    );
}

#[test]
fn a_config_without_subscriptions_is_refused() {
    let problems = Scratch::new().problems("[host]\nname = \"x\"\n");
    assert_eq!(
        (problems[0].at.line, problems[0].at.key.as_str()),
        (None, "subscription")
    );
    assert_eq!(
        problems[0].message,
        "at least one [[subscription]] is required"
    );
    assert_eq!(
        places(&Scratch::new().problems("subscription = []\n")),
        [(1, "subscription")]
    );
    let problems = Scratch::new().problems("[subscription]\nname = \"x\"\n");
    assert!(
        problems[0].message.contains("double brackets"),
        "{problems:#?}"
    );
    let problems = Scratch::new().problems(&format!("kinesis = \"memory\"\n{MINIMAL}"));
    assert_eq!(
        problems[0].message,
        "expected a table, found the string \"memory\""
    );
}

#[test]
fn a_full_config_reads_every_key() {
    let s = Scratch::new();
    s.touch("handlers/ship.wasm");
    s.touch("data/shipments.ndjson");
    let config = s.load(
        r#"[host]
name = "shipping"
owner_id = "pod-a"
cache_dir = "cache"
[kinesis]
endpoint = "memory"
region = "us-east-1"
test_credentials = true
[leases]
store = "dynamodb"
table = "shipping-leases"
endpoint = "http://127.0.0.1:4568"
legacy_stream = "shipments"
ttl = "20s"
renew_every = "5s"
list_every = "1m"
[admin]
listen = "127.0.0.1:9750"
token = "secret"
max_upload = "8MiB"
[[subscription]]
name = "ship"
stream = "shipments"
handler = "handlers/ship.wasm"
watch = true
feed = "data/shipments.ndjson"
create_if_missing = 2
start_at = "trim_horizon"
batch = 500
poll_interval = "1.5s"
lanes = 4
max_attempts = 4
dead_letter = "shipments.dead"
retry_stream = "shipments.retry"
publish_to = ["invoices", "audit"]
[subscription.limits]
memory = "128MiB"
timeout = "2s"
fuel = 1000000
[subscription.wasi]
env = ["RUST_LOG", "MODE=test"]
"#,
    );
    assert_eq!(config.host.name, "shipping");
    assert_eq!(config.host.owner_id.as_deref(), Some("pod-a"));
    assert_eq!(config.host.cache_dir, Some(s.0.join("cache")));
    assert_eq!(config.kinesis.endpoint, KinesisEndpoint::Memory);
    assert_eq!(config.kinesis.region.as_deref(), Some("us-east-1"));
    assert!(config.kinesis.test_credentials);
    let dynamo = LeaseStoreKind::Dynamo {
        table: "shipping-leases".into(),
        endpoint: Some("http://127.0.0.1:4568".into()),
        region: Some("us-east-1".into()),
        test_credentials: true,
    };
    assert_eq!(config.leases.store, dynamo);
    assert_eq!(config.leases.legacy_stream.as_deref(), Some("shipments"));
    assert_eq!(config.leases.ttl, Duration::from_secs(20));
    assert_eq!(config.leases.renew_every, Duration::from_secs(5));
    assert_eq!(config.leases.list_every, Duration::from_secs(60));
    let admin = config.admin.as_ref().unwrap();
    assert_eq!(admin.listen, SocketAddr::from(([127, 0, 0, 1], 9750)));
    assert_eq!(admin.token.as_deref(), Some("secret"));
    assert_eq!(admin.max_upload, 8 << 20);
    let sub = config.subscription("ship").unwrap();
    assert_eq!(sub.stream, "shipments");
    assert_eq!(sub.handler, s.0.join("handlers/ship.wasm"));
    let handler_at = (sub.handler_at.line, sub.handler_at.key.as_str());
    assert_eq!(handler_at, (Some(24), "subscription[0].handler"));
    assert_eq!(sub.feed, Some(s.0.join("data/shipments.ndjson")));
    assert_eq!(sub.create_if_missing, Some(2));
    assert_eq!(sub.start_at, StartAt::TrimHorizon);
    assert_eq!((sub.batch, sub.lanes), (500, 4));
    assert_eq!(sub.poll_interval, Duration::from_millis(1500));
    let retry = RetryPolicy {
        max_attempts: 4,
        retry_stream: "shipments.retry".into(),
        dead_letter: "shipments.dead".into(),
        own_retry_stream: true,
    };
    assert_eq!(sub.retry, Some(retry));
    assert_eq!(sub.publish_to, ["invoices", "audit"]);
    assert_eq!(sub.limits.memory, 128 << 20);
    assert_eq!(sub.limits.timeout, Duration::from_secs(2));
    assert_eq!(sub.limits.fuel, Some(1_000_000));
    assert!(sub.watch);
    assert!(config.meters_fuel());
    assert_eq!(sub.wasi.env(), ["RUST_LOG", "MODE=test"]);
}

#[test]
fn defaults_fill_in_when_keys_are_omitted() {
    let config = load("");
    assert_eq!(config.host.name, "shardhost");
    assert_eq!(
        (&config.host.owner_id, &config.host.cache_dir),
        (&None, &None)
    );
    assert_eq!(config.kinesis.endpoint, KinesisEndpoint::Aws);
    assert_eq!(
        (&config.kinesis.region, config.kinesis.test_credentials),
        (&None, false)
    );
    let leases = &config.leases;
    assert_eq!(
        (&leases.store, &leases.legacy_stream),
        (&LeaseStoreKind::Memory, &None)
    );
    let secs = Duration::from_secs;
    let durations = (leases.ttl, leases.renew_every, leases.list_every);
    assert_eq!(durations, (secs(10), secs(3), secs(10)));
    assert!(config.admin.is_none());
    let sub = &config.subscriptions[0];
    let defaults = (sub.batch, sub.read_limit, sub.lanes, sub.poll_interval);
    assert_eq!(defaults, (100, 10_000, 1, secs(1)));
    assert_eq!(
        (sub.start_at, sub.create_if_missing, &sub.retry),
        (StartAt::Latest, None, &None)
    );
    assert_eq!(sub.feed, None);
    assert_eq!(sub.in_place_max_delay, secs(60));
    assert_eq!(
        sub.limits,
        Limits {
            memory: 64 << 20,
            timeout: secs(5),
            fuel: None,
            in_flight_records: 20_000,
            in_flight_bytes: 64 << 20,
        }
    );
    assert!(sub.wasi.env().is_empty());
    // An [admin] table without `listen` leaves the admin API off.
    assert!(load("[admin]\ntoken = \"t\"").admin.is_none());
}

#[test]
fn kinesis_endpoint_is_memory_a_url_or_omitted() {
    let endpoint = |value: &str| {
        load(&format!("[kinesis]\nendpoint = \"{value}\""))
            .kinesis
            .endpoint
    };
    assert_eq!(endpoint("memory"), KinesisEndpoint::Memory);
    let url = "https://kinesis.local:4567";
    assert_eq!(endpoint(url), KinesisEndpoint::Url(url.into()));
}

#[test]
fn admin_listen_takes_an_address_or_a_bare_port() {
    let listen = |admin: &str| load(&format!("[admin]\n{admin}")).admin.unwrap().listen;
    let local = |port| SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(listen("listen = \"127.0.0.1:9750\""), local(9750));
    assert_eq!(listen("listen = \":9750\""), local(9750));
    assert_eq!(listen("listen = \"localhost:9751\""), local(9751));
    assert_eq!(
        listen("listen = \"[::1]:9750\""),
        "[::1]:9750".parse().unwrap()
    );
    let open = listen("listen = \"0.0.0.0:9750\"\ntoken = \"t\"");
    assert_eq!(open, SocketAddr::from(([0, 0, 0, 0], 9750)));
}

#[test]
fn start_at_takes_latest_trim_horizon_or_a_timestamp() {
    let start_at = |value: &str| load(&format!("start_at = {value}")).subscriptions[0].start_at;
    assert_eq!(start_at("\"latest\""), StartAt::Latest);
    assert_eq!(start_at("\"trim_horizon\""), StartAt::TrimHorizon);
    let december = StartAt::Timestamp(1_796_083_200_000);
    assert_eq!(
        start_at("{ timestamp = \"2026-12-01T00:00:00Z\" }"),
        december
    );
    assert_eq!(
        start_at("{ timestamp = 2026-12-01T01:00:00+01:00 }"),
        december
    );
    assert_eq!(start_at("2026-12-01T00:00:00Z"), december);
}

#[test]
fn the_embedded_stream_is_created_with_one_shard_and_a_feed_is_read_from_its_beginning() {
    let s = Scratch::new();
    let embedded = "[kinesis]\nendpoint = \"memory\"\n";
    let config = s.load(&format!("{MINIMAL}{embedded}"));
    let sub = &config.subscriptions[0];
    assert_eq!(
        (sub.create_if_missing, sub.start_at),
        (Some(1), StartAt::Latest)
    );
    let config = s.load(&format!("{MINIMAL}feed = \"feed.ndjson\"\n{embedded}"));
    let sub = &config.subscriptions[0];
    assert_eq!(
        (sub.create_if_missing, sub.start_at),
        (Some(1), StartAt::TrimHorizon)
    );
    let config = s.load(&format!("{MINIMAL}create_if_missing = 3\n{embedded}"));
    assert_eq!(config.subscriptions[0].create_if_missing, Some(3));
}

#[test]
fn retry_copies_go_to_the_subscriptions_own_stream_unless_retry_stream_is_set() {
    let config = load("max_attempts = 3\ndead_letter = \"dead\"");
    let retry = config.subscriptions[0].retry.clone().expect("a cap");
    assert_eq!(retry.max_attempts, 3);
    assert_eq!(retry.retry_stream, config.subscriptions[0].stream);
    assert_eq!(retry.dead_letter, "dead");
    assert!(!retry.own_retry_stream);
}

#[test]
fn in_place_max_delay_bounds_the_waits_of_retry_after_without_a_cap() {
    let config = load("in_place_max_delay = \"5s\"");
    assert_eq!(
        config.subscriptions[0].in_place_max_delay,
        Duration::from_secs(5)
    );
}

#[test]
fn wasi_env_entries_must_be_variable_names() {
    let text = format!(
        "{MINIMAL}[subscription.wasi]\nenv = [\n  \"HOME\",\n  \"A=b=c\",\n  \"1X\",\n  \
         \"A-B=c\",\n  5,\n  \"HOME=x\",\n]\n"
    );
    let problems = Scratch::new().problems(&text);
    let env = ["2", "3", "4", "5"].map(|i| format!("subscription[0].wasi.env[{i}]"));
    let wanted: Vec<_> = (9..).zip(env.iter().map(String::as_str)).collect();
    assert_eq!(places(&problems), wanted, "{problems:#?}");
    assert!(
        problems[0]
            .message
            .starts_with("\"1X\" is not an environment variable")
    );
    assert_eq!(
        problems[2].message,
        "expected a string, found the integer 5"
    );
    let twice = "`HOME` is listed twice in env (first on line 7)";
    assert_eq!(problems[3].message, twice);
    let env = load("[subscription.wasi]\nenv = [\"HOME\", \"A=b=c\"]").subscriptions[0]
        .wasi
        .env()
        .clone();
    assert_eq!(env, ["HOME", "A=b=c"]);
}

#[test]
fn names_must_suit_urls_and_streams() {
    let text = "[[subscription]]\nname = \"ship orders\"\nstream = \"a/b\"\n\
                handler = \"ship.wasm\"\n";
    let problems = Scratch::new().problems(text);
    let messages: Vec<_> = problems.iter().map(|p| p.message.as_str()).collect();
    let rule = "use 1 to 128 letters, digits, `_`, `.` or `-`";
    let wanted = [
        format!("\"ship orders\" is not a valid subscription name; {rule}"),
        format!("\"a/b\" is not a valid stream name; {rule}"),
    ];
    assert_eq!(messages, wanted);
}

#[test]
fn problems_display_as_file_line_key_and_message() {
    let s = Scratch::new();
    let err = s
        .load_at("shardhost.toml", &format!("{MINIMAL}batch = 0\n"))
        .unwrap_err();
    let wanted = format!(
        "1 problem in the config:\n  {}:5: subscription[0].batch: 0 is out of range; \
         `batch` must be from 1 to 10000\n",
        s.0.join("shardhost.toml").display()
    );
    assert_eq!(err.to_string(), wanted);
}

#[test]
fn read_limit_sets_the_records_a_read_asks_for_up_to_the_service_maximum() {
    let config = load("read_limit = 500\nbatch = 50");
    let sub = &config.subscriptions[0];
    assert_eq!((sub.read_limit, sub.batch), (500, 50));
    let s = Scratch::new();
    let err = s
        .load_at("shardhost.toml", &format!("{MINIMAL}read_limit = 10001\n"))
        .unwrap_err();
    let wanted =
        "subscription[0].read_limit: 10001 is out of range; `read_limit` must be from 1 to 10000";
    assert!(err.to_string().contains(wanted), "{err}");
}

#[test]
fn the_lease_table_takes_the_streams_region_and_credentials_unless_it_has_its_own() {
    let inherited = load(
        "[kinesis]\nendpoint = \"http://127.0.0.1:4567\"\nregion = \"eu-west-1\"\ntest_credentials = true\n\
         [leases]\nstore = \"dynamodb\"\ntable = \"t\"\nendpoint = \"http://127.0.0.1:4568\"",
    );
    let LeaseStoreKind::Dynamo {
        region,
        test_credentials,
        ..
    } = inherited.leases.store
    else {
        panic!("a dynamodb store");
    };
    assert_eq!(
        (region.as_deref(), test_credentials),
        (Some("eu-west-1"), true)
    );
    let own = load(
        "[kinesis]\nendpoint = \"http://127.0.0.1:4567\"\nregion = \"eu-west-1\"\ntest_credentials = true\n\
         [leases]\nstore = \"dynamodb\"\ntable = \"t\"\nregion = \"us-west-2\"\ntest_credentials = false",
    );
    let LeaseStoreKind::Dynamo {
        region,
        test_credentials,
        ..
    } = own.leases.store
    else {
        panic!("a dynamodb store");
    };
    assert_eq!(
        (region.as_deref(), test_credentials),
        (Some("us-west-2"), false)
    );
}

mod env;
mod grants;
mod state;

#[test]
fn a_subscription_reads_by_polling_unless_it_asks_for_fan_out_through_a_named_consumer() {
    assert_eq!(load("").subscriptions[0].read, ReadMode::Polling);
    assert_eq!(
        load("read = \"polling\"").subscriptions[0].read,
        ReadMode::Polling
    );
    let named = load("read = \"fan-out\"\nconsumer = \"billing.v2\"");
    let consumer = "billing.v2".to_owned();
    assert_eq!(named.subscriptions[0].read, ReadMode::FanOut { consumer });
    // The default names the service and the subscription, so two services never share one.
    let default = load("read = \"fan-out\"\n[host]\nname = \"shipping\"");
    let consumer = "shipping-ship".to_owned();
    assert_eq!(default.subscriptions[0].read, ReadMode::FanOut { consumer });
}
