//! The TOML walk: one function per table of `shardhost.toml`, each reporting every problem it
//! finds and filling in defaults, so that one pass lists everything wrong with a config.

#[path = "walk.rs"]
mod walk;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use toml::de::{DeTable, DeValue};

use super::{
    AdminConfig, Config, ConfigError, HostConfig, KinesisConfig, KinesisEndpoint, LeaseConfig,
    LeaseStoreKind, Limits, StartAt, SubscriptionConfig, WasiGrants,
};
use walk::{Field, Section, Walker, describe, is_env_name, is_name, is_url, parse_listen, quote};

const ROOT_KEYS: &[&str] = &["host", "kinesis", "leases", "admin", "subscription"];
const HOST_KEYS: &[&str] = &["name", "owner_id", "cache_dir"];
const KINESIS_KEYS: &[&str] = &["endpoint", "region", "test_credentials"];
const LEASES_KEYS: &[&str] = &[
    "store",
    "table",
    "endpoint",
    "legacy_stream",
    "ttl",
    "renew_every",
    "list_every",
];
const ADMIN_KEYS: &[&str] = &["listen", "token"];
const SUBSCRIPTION_KEYS: &[&str] = &[
    "name",
    "stream",
    "handler",
    "feed",
    "create_if_missing",
    "start_at",
    "batch",
    "poll_interval",
    "lanes",
    "max_attempts",
    "dead_letter",
    "limits",
    "wasi",
];
const LIMITS_KEYS: &[&str] = &["memory", "timeout"];
const WASI_KEYS: &[&str] = &["env"];
const START_AT_KEYS: &[&str] = &["timestamp"];

const MIN_MEMORY: u64 = 1 << 20;
const MAX_MEMORY: u64 = 4 << 30;

/// Parses and validates config text read from `path`.
pub(super) fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let mut w = Walker::new(path, text);
    let doc = match DeTable::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            let message = e.message().trim_end().replace('\n', "; ");
            w.report(e.span(), "(syntax)", format!("invalid TOML: {message}"));
            return Err(ConfigError {
                problems: w.finish(),
            });
        }
    };
    let root = w.root(doc.get_ref(), ROOT_KEYS);
    let host = host(&mut w, &root);
    let (kinesis, endpoint_ok) = kinesis(&mut w, &root);
    let leases = leases(&mut w, &root);
    let admin = admin(&mut w, &root);
    // `feed` is checked against the endpoint only when the endpoint itself is fine.
    let memory = endpoint_ok.then_some(kinesis.endpoint == KinesisEndpoint::Memory);
    let subscriptions = subscriptions(&mut w, &root, memory);
    let problems = w.finish();
    if !problems.is_empty() {
        return Err(ConfigError { problems });
    }
    Ok(Config {
        path: path.to_owned(),
        host,
        kinesis,
        leases,
        admin,
        subscriptions,
    })
}

fn host(w: &mut Walker<'_>, root: &Section<'_, '_>) -> HostConfig {
    let mut host = HostConfig {
        name: "shardhost".to_owned(),
        owner_id: None,
        cache_dir: None,
    };
    let Some(sec) = w.table(root, "host", HOST_KEYS) else {
        return host;
    };
    if let Some(name) = sec.get("name").and_then(|f| w.text(&f)) {
        host.name = name;
    }
    host.owner_id = sec.get("owner_id").and_then(|f| w.text(&f));
    host.cache_dir = sec.get("cache_dir").and_then(|f| w.path(&f));
    host
}

/// `[kinesis]`, and whether its endpoint was valid.
fn kinesis(w: &mut Walker<'_>, root: &Section<'_, '_>) -> (KinesisConfig, bool) {
    let mut kinesis = KinesisConfig {
        endpoint: KinesisEndpoint::Aws,
        region: None,
        test_credentials: false,
    };
    let Some(sec) = w.table(root, "kinesis", KINESIS_KEYS) else {
        return (kinesis, true);
    };
    let mut endpoint_ok = true;
    if let Some(f) = sec.get("endpoint") {
        match w.string(&f) {
            Some("memory") => kinesis.endpoint = KinesisEndpoint::Memory,
            Some(s) if is_url(s) => kinesis.endpoint = KinesisEndpoint::Url(s.to_owned()),
            Some(s) => {
                endpoint_ok = false;
                w.report_at(
                    &f,
                    format!(
                        "unknown endpoint {}; expected \"memory\" or an http:// or https:// URL \
                         (omit it for AWS)",
                        quote(s)
                    ),
                );
            }
            None => endpoint_ok = false,
        }
    }
    kinesis.region = sec.get("region").and_then(|f| w.text(&f));
    if let Some(f) = sec.get("test_credentials") {
        kinesis.test_credentials = w.boolean(&f).unwrap_or(false);
    }
    (kinesis, endpoint_ok)
}

fn leases(w: &mut Walker<'_>, root: &Section<'_, '_>) -> LeaseConfig {
    let mut leases = LeaseConfig {
        store: LeaseStoreKind::Memory,
        legacy_stream: None,
        ttl: Duration::from_secs(10),
        renew_every: Duration::from_secs(3),
        list_every: Duration::from_secs(10),
    };
    let Some(sec) = w.table(root, "leases", LEASES_KEYS) else {
        return leases;
    };
    let store = match sec.get("store") {
        None => Some("memory"),
        Some(f) => match w.string(&f) {
            Some(s @ ("memory" | "dynamodb")) => Some(s),
            Some(s) => {
                let message = format!(
                    "unknown lease store {}; expected \"memory\" or \"dynamodb\"",
                    quote(s)
                );
                w.report_at(&f, message);
                None
            }
            None => None,
        },
    };
    match store {
        Some("dynamodb") => {
            let table = w.required(&sec, "table").and_then(|f| w.text(&f));
            let endpoint = sec.get("endpoint").and_then(|f| w.url(&f));
            leases.store = LeaseStoreKind::Dynamo {
                table: table.unwrap_or_default(),
                endpoint,
            };
        }
        Some(_) => {
            for f in ["table", "endpoint"].into_iter().filter_map(|k| sec.get(k)) {
                let message = format!(
                    "`{}` is only used with store = \"dynamodb\" (the store here is \"memory\")",
                    f.name
                );
                w.report_at(&f, message);
            }
        }
        None => {}
    }
    leases.legacy_stream = sec.get("legacy_stream").and_then(|f| w.stream_name(&f));
    let ttl = duration_or(w, &sec, "ttl", leases.ttl);
    let renew_every = duration_or(w, &sec, "renew_every", leases.renew_every);
    let list_every = duration_or(w, &sec, "list_every", leases.list_every);
    if let (Some(ttl), Some(renew)) = (ttl, renew_every)
        && renew >= ttl
    {
        if let Some(f) = sec.get("renew_every") {
            let message = format!("renew_every ({renew:?}) must be shorter than ttl ({ttl:?})");
            w.report_at(&f, message);
        } else if let Some(f) = sec.get("ttl") {
            let message = format!(
                "ttl ({ttl:?}) must be longer than renew_every ({renew:?} by default); \
                 set a shorter renew_every"
            );
            w.report_at(&f, message);
        }
    }
    leases.ttl = ttl.unwrap_or(leases.ttl);
    leases.renew_every = renew_every.unwrap_or(leases.renew_every);
    leases.list_every = list_every.unwrap_or(leases.list_every);
    leases
}

/// A duration that defaults when absent; `None` when present but invalid (already reported).
fn duration_or(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    name: &str,
    default: Duration,
) -> Option<Duration> {
    match sec.get(name) {
        Some(f) => w.duration(&f),
        None => Some(default),
    }
}

fn admin(w: &mut Walker<'_>, root: &Section<'_, '_>) -> Option<AdminConfig> {
    let sec = w.table(root, "admin", ADMIN_KEYS)?;
    let token = sec.get("token").and_then(|f| w.text(&f));
    // Without `listen` the admin API is off.
    let listen_field = sec.get("listen")?;
    let listen = match parse_listen(w.string(&listen_field)?) {
        Ok(addr) => addr,
        Err(message) => {
            w.report_at(&listen_field, message);
            return None;
        }
    };
    if !listen.ip().is_loopback() && !sec.has("token") {
        w.report_at(
            &listen_field,
            format!(
                "a token is required when the admin API listens off loopback ({listen}); \
                 set `token` in [admin]"
            ),
        );
    }
    Some(AdminConfig { listen, token })
}

fn subscriptions(
    w: &mut Walker<'_>,
    root: &Section<'_, '_>,
    memory: Option<bool>,
) -> Vec<SubscriptionConfig> {
    let Some(field) = root.get("subscription") else {
        w.report(
            None,
            "subscription",
            "at least one [[subscription]] is required",
        );
        return Vec::new();
    };
    if let DeValue::Table(_) = field.value {
        w.report_at(
            &field,
            "write [[subscription]] with double brackets: subscriptions are an array of tables",
        );
        return Vec::new();
    }
    let Some(items) = w.array(&field) else {
        return Vec::new();
    };
    if items.is_empty() {
        w.report_at(&field, "at least one [[subscription]] is required");
    }
    let mut names = HashMap::new();
    let mut subscriptions = Vec::new();
    for item in &items {
        if let Some(sec) = w.open(item, SUBSCRIPTION_KEYS) {
            subscriptions.push(subscription(w, &sec, memory, &mut names));
        }
    }
    subscriptions
}

/// One `[[subscription]]`; `names` maps the names seen so far to their lines.
fn subscription(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    memory: Option<bool>,
    names: &mut HashMap<String, usize>,
) -> SubscriptionConfig {
    let name = w.required(sec, "name").and_then(|f| {
        let name = w.text(&f)?;
        if !is_name(&name) {
            let message = format!(
                "{} is not a valid subscription name; use 1 to 128 letters, digits, `_`, `.` \
                 or `-`",
                quote(&name)
            );
            w.report_at(&f, message);
        }
        let line = w.line(f.span.start);
        if let Some(first) = names.insert(name.clone(), line) {
            names.insert(name.clone(), first);
            let message = format!(
                "duplicate subscription name {} (first used on line {first})",
                quote(&name)
            );
            w.report_at(&f, message);
        }
        Some(name)
    });
    let stream = w.required(sec, "stream").and_then(|f| w.stream_name(&f));
    let handler_field = w.required(sec, "handler");
    let handler = handler_field
        .as_ref()
        .and_then(|f| w.existing_file(f, "handler"));
    let handler_at = match &handler_field {
        Some(f) => w.at(f),
        None => w.key_location(sec, "handler"),
    };
    let feed = sec.get("feed").and_then(|f| {
        if memory == Some(false) {
            w.report_at(
                &f,
                "`feed` works only with the embedded stream; set [kinesis] endpoint = \"memory\"",
            );
        }
        w.existing_file(&f, "feed")
    });
    let int = |w: &mut Walker<'_>, name: &str, lo: i64, hi: i64| {
        sec.get(name).and_then(|f| w.integer(&f, lo, hi))
    };
    let create_if_missing = int(w, "create_if_missing", 1, 1000).map(|n| n as u32);
    let start_at = sec.get("start_at").and_then(|f| start_at(w, &f));
    let batch = int(w, "batch", 1, 10_000).map_or(100, |n| n as usize);
    let poll_interval = sec
        .get("poll_interval")
        .and_then(|f| w.duration(&f))
        .unwrap_or(Duration::from_millis(200));
    let lanes = int(w, "lanes", 1, u32::MAX.into()).map_or(1, |n| n as u32);
    let max_attempts = int(w, "max_attempts", 1, u32::MAX.into()).map(|n| n as u32);
    let dead_letter = sec.get("dead_letter").and_then(|f| w.stream_name(&f));
    let limits = w
        .table(sec, "limits", LIMITS_KEYS)
        .map_or_else(Limits::default, |limits| self::limits(w, &limits));
    let wasi = w
        .table(sec, "wasi", WASI_KEYS)
        .map_or_else(WasiGrants::default, |wasi| self::wasi(w, &wasi));
    SubscriptionConfig {
        name: name.unwrap_or_default(),
        stream: stream.unwrap_or_default(),
        handler: handler.unwrap_or_default(),
        handler_at,
        feed,
        create_if_missing,
        start_at,
        batch,
        poll_interval,
        lanes,
        max_attempts,
        dead_letter,
        limits,
        wasi,
    }
}

/// `"latest"`, `"trim_horizon"`, `{ timestamp = "2026-12-01T00:00:00Z" }` or a TOML datetime.
fn start_at(w: &mut Walker<'_>, field: &Field<'_, '_>) -> Option<StartAt> {
    const FORMS: &str = "expected \"latest\", \"trim_horizon\" or \
                         { timestamp = \"2026-12-01T00:00:00Z\" }";
    match field.value {
        DeValue::String(s) => match s.as_ref() {
            "latest" => Some(StartAt::Latest),
            "trim_horizon" => Some(StartAt::TrimHorizon),
            other => {
                w.report_at(field, format!("unknown start_at {}; {FORMS}", quote(other)));
                None
            }
        },
        DeValue::Datetime(_) => w.timestamp(field).map(StartAt::Timestamp),
        DeValue::Table(_) => {
            let sec = w.open(field, START_AT_KEYS)?;
            let ts = w.required(&sec, "timestamp")?;
            w.timestamp(&ts).map(StartAt::Timestamp)
        }
        _ => {
            w.report_at(field, format!("{FORMS}, found {}", describe(field.value)));
            None
        }
    }
}

fn limits(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> Limits {
    let mut limits = Limits::default();
    if let Some(f) = sec.get("memory")
        && let Some(bytes) = w.size(&f)
    {
        if (MIN_MEMORY..=MAX_MEMORY).contains(&bytes) {
            limits.memory = bytes;
        } else {
            let shown = match f.value {
                DeValue::String(s) => quote(s),
                _ => format!("{bytes} bytes"),
            };
            w.report_at(
                &f,
                format!("{shown} is out of range; the memory limit must be from 1MiB to 4GiB"),
            );
        }
    }
    if let Some(timeout) = sec.get("timeout").and_then(|f| w.duration(&f)) {
        limits.timeout = timeout;
    }
    limits
}

fn wasi(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> WasiGrants {
    let mut grants = WasiGrants::default();
    let Some(items) = sec.get("env").and_then(|f| w.array(&f)) else {
        return grants;
    };
    let mut seen = HashMap::new();
    for item in &items {
        let Some(entry) = w.string(item) else {
            continue;
        };
        let name = entry.split_once('=').map_or(entry, |(name, _)| name);
        if !is_env_name(name) {
            let message = format!(
                "{} is not an environment variable; expected \"NAME\" or \"NAME=value\", \
                 where NAME is letters, digits and `_`, not starting with a digit",
                quote(entry)
            );
            w.report_at(item, message);
            continue;
        }
        let line = w.line(item.span.start);
        if let Some(first) = seen.insert(name.to_owned(), line) {
            seen.insert(name.to_owned(), first);
            let message = format!("`{name}` is listed twice in env (first on line {first})");
            w.report_at(item, message);
            continue;
        }
        grants.env.push(entry.to_owned());
    }
    grants
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::Problem;
    use super::*;

    /// A scratch directory under the system temp dir, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("shardhost-config-test-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        /// A scratch dir holding `ship.wasm` and `feed.ndjson`.
        fn with_files() -> Scratch {
            let s = Scratch::new();
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
            match self.load_at("shardhost.toml", text) {
                Ok(config) => config,
                Err(e) => panic!("{e}"),
            }
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

    const MINIMAL: &str = "[[subscription]]\nname = \"ship\"\nstream = \"shipments\"\n\
                           handler = \"ship.wasm\"\n";

    /// The 1-based number of the first line of `text` that contains `needle`.
    fn line_of(text: &str, needle: &str) -> usize {
        text.lines().position(|l| l.contains(needle)).expect(needle) + 1
    }

    /// `MINIMAL` followed by `extra` has exactly one problem: at `key`, on the line holding
    /// `marker`, with a message containing `message`.
    fn check(extra: &str, key: &str, marker: &str, message: &str) {
        let text = format!("{MINIMAL}{extra}");
        let problems = Scratch::with_files().problems(&text);
        assert_eq!(problems.len(), 1, "{extra}: {problems:#?}");
        let p = &problems[0];
        assert_eq!(p.at.key, key, "{p}");
        assert_eq!(p.at.line, Some(line_of(&text, marker)), "{p}");
        assert!(p.message.contains(message), "{extra}: {p}");
    }

    #[test]
    fn a_full_config_reads_every_key() {
        let s = Scratch::new();
        s.touch("handlers/ship.wasm");
        s.touch("data/shipments.ndjson");
        let config = s.load(
            r#"
[host]
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
[[subscription]]
name = "ship"
stream = "shipments"
handler = "handlers/ship.wasm"
feed = "data/shipments.ndjson"
create_if_missing = 2
start_at = "trim_horizon"
batch = 500
poll_interval = "1.5s"
lanes = 4
max_attempts = 4
dead_letter = "shipments.dead"
[subscription.limits]
memory = "128MiB"
timeout = "2s"
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
        };
        assert_eq!(config.leases.store, dynamo);
        assert_eq!(config.leases.legacy_stream.as_deref(), Some("shipments"));
        assert_eq!(config.leases.ttl, Duration::from_secs(20));
        assert_eq!(config.leases.renew_every, Duration::from_secs(5));
        assert_eq!(config.leases.list_every, Duration::from_secs(60));
        let admin = config.admin.as_ref().unwrap();
        assert_eq!(admin.listen, "127.0.0.1:9750".parse().unwrap());
        assert_eq!(admin.token.as_deref(), Some("secret"));
        let sub = config.subscription("ship").unwrap();
        assert_eq!(sub.stream, "shipments");
        assert_eq!(sub.handler, s.0.join("handlers/ship.wasm"));
        assert_eq!(
            (sub.handler_at.line, sub.handler_at.key.as_str()),
            (Some(24), "subscription[0].handler")
        );
        assert_eq!(sub.feed, Some(s.0.join("data/shipments.ndjson")));
        assert_eq!(sub.create_if_missing, Some(2));
        assert_eq!(sub.start_at, Some(StartAt::TrimHorizon));
        assert_eq!((sub.batch, sub.lanes, sub.max_attempts), (500, 4, Some(4)));
        assert_eq!(sub.poll_interval, Duration::from_millis(1500));
        assert_eq!(sub.dead_letter.as_deref(), Some("shipments.dead"));
        assert_eq!(sub.limits.memory, 128 << 20);
        assert_eq!(sub.limits.timeout, Duration::from_secs(2));
        assert_eq!(sub.wasi.env, ["RUST_LOG", "MODE=test"]);
    }

    #[test]
    fn defaults_fill_in_when_keys_are_omitted() {
        let config = Scratch::with_files().load(MINIMAL);
        assert_eq!(config.host.name, "shardhost");
        assert_eq!(
            (&config.host.owner_id, &config.host.cache_dir),
            (&None, &None)
        );
        assert_eq!(config.kinesis.endpoint, KinesisEndpoint::Aws);
        assert!(!config.kinesis.test_credentials);
        assert_eq!(config.leases.store, LeaseStoreKind::Memory);
        let l = &config.leases;
        assert_eq!(
            (l.ttl, l.renew_every, l.list_every),
            (
                Duration::from_secs(10),
                Duration::from_secs(3),
                Duration::from_secs(10)
            )
        );
        assert!(config.admin.is_none());
        let sub = &config.subscriptions[0];
        assert_eq!(
            (sub.batch, sub.lanes, sub.poll_interval),
            (100, 1, Duration::from_millis(200))
        );
        assert_eq!(
            (sub.start_at, sub.create_if_missing, sub.max_attempts),
            (None, None, None)
        );
        assert_eq!((&sub.feed, &sub.dead_letter), (&None, &None));
        assert_eq!(sub.limits, Limits::default());
        assert_eq!(sub.limits.memory, 64 << 20);
        assert_eq!(sub.wasi, WasiGrants::default());
    }

    #[test]
    fn every_problem_is_listed_with_its_line() {
        let text = r#"[host]
owner_id = ""
[kinesis]
endpoint = "kinesis.local"
[leases]
ttl = "10"
[[subscription]]
name = "ship"
handler = "ship.wasm"
batch = 0
[subscription.limits]
memory = "lots"
[[subscription]]
name = "ship"
stream = "more"
handler = "gone.wasm"
"#;
        let s = Scratch::with_files();
        let problems = s.problems(text);
        let got: Vec<_> = problems
            .iter()
            .map(|p| (p.at.line.unwrap(), p.at.key.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (2, "host.owner_id"),
                (4, "kinesis.endpoint"),
                (6, "leases.ttl"),
                (7, "subscription[0].stream"),
                (10, "subscription[0].batch"),
                (12, "subscription[0].limits.memory"),
                (14, "subscription[1].name"),
                (16, "subscription[1].handler"),
            ],
            "{problems:#?}"
        );
        assert!(
            problems
                .iter()
                .all(|p| p.at.file == s.0.join("shardhost.toml"))
        );
    }

    #[test]
    fn unknown_key_names_the_key_and_line() {
        check(
            "[subscription.limits]\nmemroy = \"64MiB\"\n",
            "subscription[0].limits.memroy",
            "memroy",
            "unknown key `memroy`; expected one of: memory, timeout",
        );
        check(
            "bacth = 10\n",
            "subscription[0].bacth",
            "bacth",
            "unknown key `bacth`; expected one of: name, stream, handler,",
        );
        check(
            "[hosts]\nname = \"x\"\n",
            "hosts",
            "[hosts]",
            "expected one of: host, kinesis, leases, admin, subscription",
        );
        check(
            "[admin]\n\"a b\" = 1\n",
            "admin.\"a b\"",
            "a b",
            "unknown key `a b`",
        );
    }

    #[test]
    fn missing_required_keys_point_at_the_table_header() {
        let text = format!("{MINIMAL}\n[[subscription]]\nbatch = 5\n");
        let problems = Scratch::with_files().problems(&text);
        let header = line_of(&text, "batch") - 1;
        for (p, key) in problems.iter().zip(["name", "stream", "handler"]) {
            assert_eq!(p.at.key, format!("subscription[1].{key}"));
            assert_eq!(p.at.line, Some(header));
            assert_eq!(p.message, format!("missing required key `{key}`"));
        }
        assert_eq!(problems.len(), 3, "{problems:#?}");
    }

    #[test]
    fn missing_handler_file_is_reported() {
        let s = Scratch::new();
        let problems = s.problems(MINIMAL);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        let wanted = format!(
            "handler file not found: {}",
            s.0.join("ship.wasm").display()
        );
        assert_eq!(problems[0].message, wanted);
        assert_eq!(problems[0].at.line, Some(4));
        fs::create_dir(s.0.join("ship.wasm")).unwrap();
        let problems = s.problems(MINIMAL);
        assert!(
            problems[0].message.starts_with("handler is not a file: "),
            "{problems:#?}"
        );
    }

    #[test]
    fn limits_that_do_not_parse_are_reported() {
        let text = format!("{MINIMAL}[subscription.limits]\nmemory = \"64M\"\ntimeout = \"5\"\n");
        let problems = Scratch::with_files().problems(&text);
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert_eq!(problems[0].at.key, "subscription[0].limits.memory");
        assert!(
            problems[0]
                .message
                .contains("\"64M\" has an unknown unit \"M\"")
        );
        assert!(problems[0].message.contains("e.g. \"64MiB\""));
        assert_eq!(problems[1].at.key, "subscription[0].limits.timeout");
        assert!(problems[1].message.contains("\"5\" has no unit"));
        let limits = "[subscription.limits]\nmemory";
        let key = "subscription[0].limits.memory";
        check(
            &format!("{limits} = \"512KiB\"\n"),
            key,
            "memory",
            "from 1MiB to 4GiB",
        );
        check(
            &format!("{limits} = \"8GiB\"\n"),
            key,
            "memory",
            "\"8GiB\" is out of range",
        );
        check(
            &format!("{limits} = 1024\n"),
            key,
            "memory",
            "1024 bytes is out of range",
        );
        check(
            &format!("{limits} = true\n"),
            key,
            "memory",
            "expected a size",
        );
        let ok = format!("{MINIMAL}{limits} = 1048576\ntimeout = \"250ms\"\n");
        let limits = Scratch::with_files().load(&ok).subscriptions[0].limits;
        assert_eq!(
            (limits.memory, limits.timeout),
            (1 << 20, Duration::from_millis(250))
        );
    }

    #[test]
    fn malformed_toml_reports_the_line() {
        let text = "[host]\nname = \"shipping\"\nowner_id = = \"x\"\n[[subscription]]\n";
        let problems = Scratch::new().problems(text);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert_eq!(
            (problems[0].at.line, problems[0].at.key.as_str()),
            (Some(3), "(syntax)")
        );
        assert!(
            problems[0].message.starts_with("invalid TOML: "),
            "{problems:#?}"
        );
        let duplicate = format!("{MINIMAL}name = \"again\"\n");
        let problems = Scratch::with_files().problems(&duplicate);
        assert_eq!(problems[0].at.line, Some(5), "{problems:#?}");
        assert!(
            problems[0].message.contains("duplicate key"),
            "{problems:#?}"
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_config_dir() {
        let s = Scratch::new();
        let handler = s.touch("wasm/ship.wasm");
        let feed = s.touch("conf/data/feed.ndjson");
        let absolute = s.touch("abs/other.wasm");
        let text = format!(
            "[host]\ncache_dir = \"cache\"\n[kinesis]\nendpoint = \"memory\"\n\
             [[subscription]]\nname = \"a\"\nstream = \"s\"\nhandler = \"../wasm/ship.wasm\"\n\
             feed = \"data/feed.ndjson\"\n\
             [[subscription]]\nname = \"b\"\nstream = \"s\"\nhandler = \"{}\"\n",
            absolute.display()
        );
        let config = s.load_at("conf/shardhost.toml", &text).unwrap();
        let conf = s.0.join("conf");
        assert_eq!(config.host.cache_dir, Some(conf.join("cache")));
        let a = &config.subscriptions[0];
        assert_eq!(a.handler, conf.join("../wasm/ship.wasm"));
        assert!(a.handler.is_file() && handler.is_file());
        assert_eq!(a.feed.as_deref(), Some(feed.as_path()));
        assert_eq!(config.subscriptions[1].handler, absolute);
    }

    #[test]
    fn wrong_types_name_what_was_expected_and_found() {
        let bool_ = "expected a boolean (true or false), found the string \"yes\"";
        check(
            "[host]\nname = 5\n",
            "host.name",
            "name = 5",
            "expected a string, found the integer 5",
        );
        check(
            "[kinesis]\ntest_credentials = \"yes\"\n",
            "kinesis.test_credentials",
            "yes",
            bool_,
        );
        check(
            "batch = \"100\"\n",
            "subscription[0].batch",
            "batch",
            "expected an integer, found the string \"100\"",
        );
        check(
            "[wasi]\nenv = \"HOME\"\n",
            "wasi",
            "[wasi]",
            "unknown key `wasi`",
        );
        check(
            "wasi = { env = \"HOME\" }\n",
            "subscription[0].wasi.env",
            "wasi",
            "expected an array",
        );
        check(
            "limits = 5\n",
            "subscription[0].limits",
            "limits",
            "expected a table, found the integer 5",
        );
        let text = format!("kinesis = \"memory\"\n{MINIMAL}");
        let problems = Scratch::with_files().problems(&text);
        assert_eq!(
            problems[0].message,
            "expected a table, found the string \"memory\""
        );
    }

    #[test]
    fn a_config_without_subscriptions_is_refused() {
        let problems = Scratch::new().problems("[host]\nname = \"x\"\n");
        assert_eq!(problems.len(), 1);
        assert_eq!(
            (problems[0].at.line, problems[0].at.key.as_str()),
            (None, "subscription")
        );
        assert!(
            problems[0]
                .message
                .contains("at least one [[subscription]]")
        );
        let problems = Scratch::new().problems("subscription = []\n");
        assert_eq!(problems[0].at.line, Some(1));
        let problems = Scratch::new().problems("[subscription]\nname = \"x\"\n");
        assert!(
            problems[0].message.contains("double brackets"),
            "{problems:#?}"
        );
    }

    #[test]
    fn duplicate_subscription_names_are_reported_at_the_second() {
        let text = format!("{MINIMAL}{MINIMAL}");
        let problems = Scratch::with_files().problems(&text);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert_eq!(
            (problems[0].at.line, problems[0].at.key.as_str()),
            (Some(6), "subscription[1].name")
        );
        assert_eq!(
            problems[0].message,
            "duplicate subscription name \"ship\" (first used on line 2)"
        );
    }

    #[test]
    fn feed_is_only_for_the_embedded_stream() {
        let feed = "feed = \"feed.ndjson\"\n";
        check(
            feed,
            "subscription[0].feed",
            "feed",
            "set [kinesis] endpoint = \"memory\"",
        );
        let http = format!("{feed}[kinesis]\nendpoint = \"http://127.0.0.1:4567\"\n");
        check(
            &http,
            "subscription[0].feed",
            "feed",
            "only with the embedded stream",
        );
        let bad = format!("{feed}[kinesis]\nendpoint = \"kinesis\"\n");
        check(
            &bad,
            "kinesis.endpoint",
            "kinesis\"",
            "unknown endpoint \"kinesis\"",
        );
        let memory = format!("{MINIMAL}{feed}[kinesis]\nendpoint = \"memory\"\n");
        let config = Scratch::with_files().load(&memory);
        assert!(config.subscriptions[0].feed.is_some());
        let missing = format!("feed = \"gone.ndjson\"\n[kinesis]\nendpoint = \"memory\"\n");
        check(
            &missing,
            "subscription[0].feed",
            "gone",
            "feed file not found: ",
        );
    }

    #[test]
    fn kinesis_endpoint_is_memory_a_url_or_omitted() {
        let load = |endpoint: &str| {
            let text = format!("{MINIMAL}[kinesis]\nendpoint = \"{endpoint}\"\n");
            Scratch::with_files().load(&text).kinesis.endpoint
        };
        assert_eq!(load("memory"), KinesisEndpoint::Memory);
        let url = "https://kinesis.local:4567";
        assert_eq!(load(url), KinesisEndpoint::Url(url.into()));
        let message = "unknown endpoint \"localhost:4567\"; expected \"memory\" or an http:// or \
                       https:// URL (omit it for AWS)";
        check(
            "[kinesis]\nendpoint = \"localhost:4567\"\n",
            "kinesis.endpoint",
            "endpoint",
            message,
        );
        check(
            "[kinesis]\nendpoint = \"http://\"\n",
            "kinesis.endpoint",
            "endpoint",
            "unknown endpoint",
        );
    }

    #[test]
    fn dynamodb_leases_need_a_table_and_memory_leases_refuse_one() {
        let dynamo = "[leases]\nstore = \"dynamodb\"\n";
        check(
            dynamo,
            "leases.table",
            "[leases]",
            "missing required key `table`",
        );
        let endpoint = format!("{dynamo}table = \"t\"\nendpoint = \"dynamo.local\"\n");
        check(
            &endpoint,
            "leases.endpoint",
            "dynamo.local",
            "not an http:// or https:// URL",
        );
        let table = "[leases]\ntable = \"t\"\n";
        check(
            table,
            "leases.table",
            "table",
            "`table` is only used with store = \"dynamodb\"",
        );
        let endpoint = "[leases]\nstore = \"memory\"\nendpoint = \"http://x\"\n";
        check(
            endpoint,
            "leases.endpoint",
            "http://x",
            "only used with store = \"dynamodb\"",
        );
        let store = "[leases]\nstore = \"redis\"\ntable = \"t\"\n";
        check(
            store,
            "leases.store",
            "redis",
            "unknown lease store \"redis\"",
        );
    }

    #[test]
    fn renew_every_must_be_shorter_than_ttl() {
        let renew = "[leases]\nttl = \"3s\"\nrenew_every = \"3s\"\n";
        check(
            renew,
            "leases.renew_every",
            "renew_every",
            "renew_every (3s) must be shorter than ttl (3s)",
        );
        let ttl = "[leases]\nttl = \"2s\"\n";
        check(
            ttl,
            "leases.ttl",
            "ttl",
            "ttl (2s) must be longer than renew_every (3s by default)",
        );
        let zero = "[leases]\nlist_every = \"0s\"\n";
        check(
            zero,
            "leases.list_every",
            "list_every",
            "`list_every` must be longer than zero",
        );
    }

    #[test]
    fn durations_in_the_config_need_a_unit() {
        let message =
            "a bare number is ambiguous as a duration; write it with a unit, e.g. \"200s\"";
        check(
            "poll_interval = 200\n",
            "subscription[0].poll_interval",
            "poll",
            message,
        );
        check(
            "poll_interval = \"soon\"\n",
            "subscription[0].poll_interval",
            "poll",
            "\"soon\" is not a duration",
        );
    }

    #[test]
    fn admin_off_loopback_needs_a_token() {
        let load = |admin: &str| {
            Scratch::with_files()
                .load(&format!("{MINIMAL}[admin]\n{admin}\n"))
                .admin
        };
        let listen = |admin: &str| load(admin).map(|a| a.listen.to_string());
        assert_eq!(
            listen("listen = \"127.0.0.1:9750\""),
            Some("127.0.0.1:9750".into())
        );
        assert_eq!(listen("listen = \":9750\""), Some("127.0.0.1:9750".into()));
        assert_eq!(
            listen("listen = \"localhost:9751\""),
            Some("127.0.0.1:9751".into())
        );
        assert_eq!(listen("listen = \"[::1]:9750\""), Some("[::1]:9750".into()));
        assert_eq!(
            listen("listen = \"0.0.0.0:9750\"\ntoken = \"t\""),
            Some("0.0.0.0:9750".into())
        );
        assert_eq!(listen("token = \"t\""), None);
        let message = "a token is required when the admin API listens off loopback (0.0.0.0:9750)";
        check(
            "[admin]\nlisten = \"0.0.0.0:9750\"\n",
            "admin.listen",
            "listen",
            message,
        );
        let message = "\"localhost\" is not a listen address; expected \"IP:PORT\"";
        check(
            "[admin]\nlisten = \"localhost\"\n",
            "admin.listen",
            "listen",
            message,
        );
        check(
            "[admin]\nlisten = \":9750\"\ntoken = \"\"\n",
            "admin.token",
            "token",
            "must not be empty",
        );
    }

    #[test]
    fn start_at_takes_latest_trim_horizon_or_a_timestamp() {
        let load = |start_at: &str| {
            let text = format!("{MINIMAL}start_at = {start_at}\n");
            Scratch::with_files().load(&text).subscriptions[0].start_at
        };
        assert_eq!(load("\"latest\""), Some(StartAt::Latest));
        assert_eq!(load("\"trim_horizon\""), Some(StartAt::TrimHorizon));
        let december = Some(StartAt::Timestamp(1_796_083_200_000));
        assert_eq!(load("{ timestamp = \"2026-12-01T00:00:00Z\" }"), december);
        assert_eq!(load("{ timestamp = 2026-12-01T01:00:00+01:00 }"), december);
        assert_eq!(load("2026-12-01T00:00:00Z"), december);
        let key = "subscription[0].start_at";
        check(
            "start_at = \"earliest\"\n",
            key,
            "start_at",
            "unknown start_at \"earliest\"; expected \"latest\", \"trim_horizon\" or { timestamp = \"2026-12-01T00:00:00Z\" }",
        );
        check("start_at = 5\n", key, "start_at", "found the integer 5");
        let ts = "subscription[0].start_at.timestamp";
        check(
            "start_at = { timestamp = \"yesterday\" }\n",
            ts,
            "start_at",
            "\"yesterday\" is not an RFC 3339 timestamp",
        );
        check(
            "start_at = { timestamp = 2026-12-01T00:00:00 }\n",
            ts,
            "start_at",
            "needs a date, a time and a UTC offset",
        );
        check(
            "start_at = { timestamp = \"1969-12-31T23:00:00Z\" }\n",
            ts,
            "start_at",
            "is before 1970",
        );
        check(
            "start_at = {}\n",
            ts,
            "start_at",
            "missing required key `timestamp`",
        );
    }

    #[test]
    fn integers_out_of_range_are_reported() {
        let key = |k: &str| format!("subscription[0].{k}");
        check(
            "batch = 10001\n",
            &key("batch"),
            "batch",
            "10001 is out of range; `batch` must be from 1 to 10000",
        );
        check(
            "lanes = 0\n",
            &key("lanes"),
            "lanes",
            "0 is out of range; `lanes` must be from 1 to 4294967295",
        );
        check(
            "create_if_missing = 1001\n",
            &key("create_if_missing"),
            "create",
            "from 1 to 1000",
        );
        check(
            "max_attempts = -1\n",
            &key("max_attempts"),
            "max_attempts",
            "-1 is out of range",
        );
    }

    #[test]
    fn wasi_env_entries_must_be_variable_names() {
        let text = format!(
            "{MINIMAL}[subscription.wasi]\nenv = [\n  \"HOME\",\n  \"A=b=c\",\n  \"1X\",\n  \"A-B=c\",\n  5,\n  \"HOME=x\",\n]\n"
        );
        let problems = Scratch::with_files().problems(&text);
        let got: Vec<_> = problems
            .iter()
            .map(|p| (p.at.line.unwrap(), p.at.key.as_str()))
            .collect();
        let env = |i: usize| format!("subscription[0].wasi.env[{i}]");
        let wanted = [(9, env(2)), (10, env(3)), (11, env(4)), (12, env(5))];
        assert_eq!(
            got,
            wanted
                .iter()
                .map(|(l, k)| (*l, k.as_str()))
                .collect::<Vec<_>>(),
            "{problems:#?}"
        );
        assert!(
            problems[0]
                .message
                .starts_with("\"1X\" is not an environment variable")
        );
        assert_eq!(
            problems[3].message,
            "`HOME` is listed twice in env (first on line 7)"
        );
    }

    #[test]
    fn names_must_suit_urls_and_streams() {
        let text = "[[subscription]]\nname = \"ship orders\"\nstream = \"a/b\"\nhandler = \"ship.wasm\"\ndead_letter = \"\"\n";
        let problems = Scratch::with_files().problems(text);
        let messages: Vec<_> = problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "\"ship orders\" is not a valid subscription name; use 1 to 128 letters, digits, `_`, `.` or `-`",
                "\"a/b\" is not a valid stream name; use 1 to 128 letters, digits, `_`, `.` or `-`",
                "`dead_letter` must not be empty",
            ]
        );
    }

    #[test]
    fn problems_display_as_file_line_key_and_message() {
        let s = Scratch::with_files();
        let err = s
            .load_at("shardhost.toml", &format!("{MINIMAL}batch = 0\n"))
            .unwrap_err();
        let file = s.0.join("shardhost.toml");
        let wanted = format!(
            "1 problem in the config:\n  {}:5: subscription[0].batch: 0 is out of range; `batch` must be from 1 to 10000\n",
            file.display()
        );
        assert_eq!(err.to_string(), wanted);
    }
}
