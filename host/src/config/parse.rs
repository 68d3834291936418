//! The TOML walk: one function per table of `shardhost.toml`, each reporting every problem it
//! finds and filling in defaults, so that one pass lists everything wrong with a config.

mod ca;
mod grants;
mod lease_key;
mod read;
mod state;

pub use state::{is_bucket_name, namespace as state_namespace};
mod interpolate;
mod trust;
mod walk;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Path;
use std::time::Duration;

use toml::de::{DeTable, DeValue};

use super::{
    AdminConfig, Config, ConfigError, FleetConfig, HostConfig, KinesisConfig, KinesisEndpoint,
    LeaseConfig, LeaseStoreKind, Limits, RetryPolicy, StartAt, SubscriptionConfig, WasiGrants,
    defaults,
};
use crate::lease::LeaseRows;
use interpolate::Lookup;
pub use walk::timestamp_millis;
use walk::{Field, Section, Walker, describe, is_name, is_url, parse_listen, quote};

const ROOT_KEYS: &[&str] = &[
    "host",
    "kinesis",
    "leases",
    "fleet",
    "admin",
    "subscription",
];
const HOST_KEYS: &[&str] = &[
    "name",
    "owner_id",
    "cache_dir",
    "cache_max",
    "retry_key",
    "retry_keys_previous",
];
const KINESIS_KEYS: &[&str] = &["endpoint", "region", "test_credentials", "ca_file"];
const LEASES_KEYS: &[&str] = &[
    "store",
    "table",
    "endpoint",
    "legacy_stream",
    "checkpoint_every",
    "balance",
    "ttl",
    "renew_every",
    "list_every",
    "region",
    "test_credentials",
];
const FLEET_KEYS: &[&str] = &[
    "poll",
    "heartbeat",
    "max_component_size",
    "trusted_keys",
    "trusted_keys_file",
];
const ADMIN_KEYS: &[&str] = &["listen", "token", "max_upload"];
const SUBSCRIPTION_KEYS: &[&str] = &[
    "name",
    "stream",
    "handler",
    "watch",
    "feed",
    "create_if_missing",
    "start_at",
    "batch",
    "read_limit",
    "poll_interval",
    "read",
    "consumer",
    "lanes",
    "lease_key",
    "max_attempts",
    "dead_letter",
    "retry_stream",
    "in_place_max_delay",
    "publish_to",
    "limits",
    "wasi",
    "http",
    "config",
    "state",
];
const LIMITS_KEYS: &[&str] = &[
    "memory",
    "timeout",
    "fuel",
    "in_flight_records",
    "in_flight_bytes",
];
const START_AT_KEYS: &[&str] = &["timestamp"];

/// The range of `limits.memory` (also `invoke --memory`).
pub const MIN_MEMORY: u64 = 1 << 20;
pub const MAX_MEMORY: u64 = 4 << 30;

/// Parses and validates config text read from `path`, its `${VAR}`s looked up in `env`.
pub(super) fn parse(path: &Path, text: &str, env: Lookup<'_>) -> Result<Config, ConfigError> {
    let mut w = Walker::new(path, text);
    let mut doc = match DeTable::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            let message = e.message().trim_end().replace('\n', "; ");
            w.report(e.span(), "(syntax)", format!("invalid TOML: {message}"));
            return Err(ConfigError {
                problems: w.finish(),
            });
        }
    };
    interpolate::resolve(&mut w, doc.get_mut(), env);
    let root = w.root(doc.get_ref(), ROOT_KEYS);
    let host = host(&mut w, &root);
    let (kinesis, endpoint_ok) = kinesis(&mut w, &root);
    let leases = leases(&mut w, &root, &kinesis);
    let fleet = fleet(&mut w, &root, &leases);
    let admin = admin(&mut w, &root);
    // `feed` is checked against the endpoint only when the endpoint itself is fine.
    let memory = endpoint_ok.then_some(kinesis.endpoint == KinesisEndpoint::Memory);
    let signed = !fleet.trusted_keys.is_empty();
    let cx = state::StateContext {
        service: &host.name,
        leases: &leases.store,
        kinesis: &kinesis,
    };
    let subscriptions = subscriptions(&mut w, &root, memory, signed, &cx);
    let problems = w.finish();
    if !problems.is_empty() {
        return Err(ConfigError { problems });
    }
    Ok(Config {
        path: path.to_owned(),
        host,
        kinesis,
        leases,
        fleet,
        admin,
        subscriptions,
    })
}

fn host(w: &mut Walker<'_>, root: &Section<'_, '_>) -> HostConfig {
    let mut host = HostConfig::default();
    let Some(sec) = w.table(root, "host", HOST_KEYS) else {
        return host;
    };
    if let Some(name) = sec.get("name").and_then(|f| w.text(&f)) {
        host.name = name;
    }
    host.owner_id = sec.get("owner_id").and_then(|f| w.text(&f));
    host.cache_dir = sec.get("cache_dir").and_then(|f| w.path(&f));
    if let Some(f) = sec.get("cache_max")
        && let Some(bytes) = w.size(&f)
    {
        if bytes < 1 << 20 {
            w.report_at(&f, "`cache_max` must be at least 1MiB");
        } else {
            host.cache_max = bytes;
        }
    }
    if let Some(f) = sec.get("retry_key")
        && let Some(key) = w.text(&f)
    {
        if key.chars().count() < 16 {
            w.report_at(&f, "`retry_key` must be at least 16 characters".to_owned());
        } else {
            host.retry_key = Some(key);
        }
    }
    host.retry_keys_previous = retry_keys_previous(w, &sec);
    host
}

/// `retry_keys_previous`: earlier `retry_key` secrets, each 16 characters or more.
fn retry_keys_previous(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> Vec<String> {
    let mut keys = Vec::new();
    for item in sec
        .get("retry_keys_previous")
        .and_then(|f| w.array(&f))
        .unwrap_or_default()
    {
        match w.text(&item) {
            Some(key) if key != crate::envelope::key::LEASE_TABLE && key.chars().count() < 16 => w.report_at(
                &item,
                "each of `retry_keys_previous` must be at least 16 characters (or \"lease-table\": \
                 the key kept in the lease table)",
            ),
            Some(key) => keys.push(key),
            None => {}
        }
    }
    keys
}

/// `[kinesis]`, and whether its endpoint was valid.
fn kinesis(w: &mut Walker<'_>, root: &Section<'_, '_>) -> (KinesisConfig, bool) {
    let mut kinesis = KinesisConfig {
        endpoint: KinesisEndpoint::Aws,
        region: None,
        test_credentials: false,
        ca_file: None,
    };
    let Some(sec) = w.table(root, "kinesis", KINESIS_KEYS) else {
        return (kinesis, !root.has("kinesis"));
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
    kinesis.ca_file = sec.get("ca_file").and_then(|f| ca::ca_file(w, &f));
    if let Some(f) = sec.get("test_credentials") {
        kinesis.test_credentials = w.boolean(&f).unwrap_or(false);
        if kinesis.test_credentials && !sec.has("endpoint") {
            w.report_at(
                &f,
                "test_credentials sends dummy keys, meant for a local stack, but no `endpoint` \
                 is set, so they would go to AWS: set `endpoint` (e.g. \"http://127.0.0.1:4567\") \
                 or remove test_credentials",
            );
        }
    }
    (kinesis, endpoint_ok)
}

fn leases(w: &mut Walker<'_>, root: &Section<'_, '_>, kinesis: &KinesisConfig) -> LeaseConfig {
    let mut leases = LeaseConfig {
        store: LeaseStoreKind::Memory,
        legacy_stream: None,
        ttl: defaults::LEASE_TTL,
        renew_every: defaults::RENEW_EVERY,
        list_every: defaults::LIST_EVERY,
        checkpoint_every: defaults::CHECKPOINT_EVERY,
        balance: true,
    };
    let Some(sec) = w.table(root, "leases", LEASES_KEYS) else {
        return leases;
    };
    if let Some(store) = lease_store(w, &sec, kinesis) {
        leases.store = store;
    }
    leases.legacy_stream = sec.get("legacy_stream").and_then(|f| w.stream_name(&f));
    let ttl = duration_or(w, &sec, "ttl", leases.ttl);
    let renew_every = duration_or(w, &sec, "renew_every", leases.renew_every);
    let list_every = duration_or(w, &sec, "list_every", leases.list_every);
    // A holder gives its lease up four fifths of `ttl` after it sent its last renewal (the
    // lease handle's fence), and sends the next one `renew_every` after that one answered: a
    // renewal must leave a fifth of `ttl` for its own round trip, or the lease is lost at the
    // first renewal.
    if let (Some(ttl), Some(renew)) = (ttl, renew_every)
        && renew > ttl * 3 / 5
    {
        let why = "a holder gives its lease up four fifths of ttl after it sent its last renewal, \
                   and the next renewal needs time to answer";
        if let Some(f) = sec.get("renew_every") {
            let message = format!(
                "renew_every ({renew:?}) must be at most {:?}, three fifths of ttl ({ttl:?}): {why}",
                ttl * 3 / 5
            );
            w.report_at(&f, message);
        } else if let Some(f) = sec.get("ttl") {
            let message = format!(
                "ttl ({ttl:?}) must be at least {:?}, five thirds of renew_every ({renew:?} by \
                 default): {why}; set a shorter renew_every",
                renew * 5 / 3
            );
            w.report_at(&f, message);
        }
    }
    leases.ttl = ttl.unwrap_or(leases.ttl);
    leases.renew_every = renew_every.unwrap_or(leases.renew_every);
    leases.list_every = list_every.unwrap_or(leases.list_every);
    if let Some(every) = sec.get("checkpoint_every")
        && let Some(d) = w.duration(&every, MAX_INTERVAL)
    {
        leases.checkpoint_every = d;
    }
    if let Some(f) = sec.get("balance") {
        leases.balance = w.boolean(&f).unwrap_or(true);
    }
    leases
}

/// `[leases] store` and the keys of a DynamoDB store; `None` when the store is unknown (reported).
fn lease_store(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    kinesis: &KinesisConfig,
) -> Option<LeaseStoreKind> {
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
    match store? {
        "dynamodb" => {
            let table = w.required(sec, "table").and_then(|f| w.text(&f));
            let endpoint = sec.get("endpoint").and_then(|f| w.url(&f));
            // The lease table's region and credentials default to the stream's.
            let region = match sec.get("region") {
                Some(f) => w.text(&f),
                None => kinesis.region.clone(),
            };
            let test_credentials = match sec.get("test_credentials") {
                Some(f) => w.boolean(&f).unwrap_or(false),
                None => kinesis.test_credentials,
            };
            if test_credentials && !sec.has("endpoint") {
                let (f, whose) = match sec.get("test_credentials") {
                    Some(f) => (Some(f), "test_credentials sends"),
                    None => (sec.get("store"), "[kinesis] test_credentials would send"),
                };
                if let Some(f) = f {
                    let message = format!(
                        "{whose} dummy keys, meant for a local stack, but [leases] has no \
                         `endpoint`, so they would go to AWS DynamoDB: set [leases] endpoint \
                         (e.g. \"http://127.0.0.1:4568\") or [leases] test_credentials = false"
                    );
                    w.report_at(&f, message);
                }
            }
            Some(LeaseStoreKind::Dynamo {
                table: table.unwrap_or_default(),
                endpoint,
                region,
                test_credentials,
            })
        }
        _ => {
            let only_dynamo = ["table", "endpoint", "region", "test_credentials"];
            for f in only_dynamo.into_iter().filter_map(|k| sec.get(k)) {
                let message = format!(
                    "`{}` is only used with store = \"dynamodb\" (the store here is \"memory\")",
                    f.name
                );
                w.report_at(&f, message);
            }
            Some(LeaseStoreKind::Memory)
        }
    }
}

/// The longest `ttl`, `renew_every`, `list_every`, `checkpoint_every` and `poll_interval`: a
/// bound that keeps every deadline the host computes from them far from overflowing.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3_600);

/// The longest `limits.timeout` of a handler call.
pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// A duration that defaults when absent; `None` when present but invalid (already reported).
/// `[fleet]`: only with a DynamoDB lease table (the memory store has no fleet).
fn fleet(w: &mut Walker<'_>, root: &Section<'_, '_>, leases: &LeaseConfig) -> FleetConfig {
    let mut fleet = FleetConfig::default();
    let Some(sec) = w.table(root, "fleet", FLEET_KEYS) else {
        return fleet;
    };
    if leases.store == LeaseStoreKind::Memory {
        if let Some(f) = root.get("fleet") {
            w.report_at(
                &f,
                "[fleet] needs [leases] store = \"dynamodb\": the fleet's desired versions and \
                 heartbeats live in the lease table (with the memory store a deploy reaches the \
                 one host it is sent to)",
            );
        }
        return fleet;
    }
    fleet.poll = duration_or(w, &sec, "poll", fleet.poll).unwrap_or(fleet.poll);
    fleet.heartbeat = duration_or(w, &sec, "heartbeat", fleet.heartbeat).unwrap_or(fleet.heartbeat);
    for (name, d) in [("poll", fleet.poll), ("heartbeat", fleet.heartbeat)] {
        if d < MIN_FLEET_INTERVAL
            && let Some(f) = sec.get(name)
        {
            w.report_at(
                &f,
                format!("`{name}` must be at least {MIN_FLEET_INTERVAL:?}"),
            );
        }
    }
    if let Some(f) = sec.get("max_component_size")
        && let Some(bytes) = w.size(&f)
    {
        if !(1..=MAX_COMPONENT_SIZE).contains(&bytes) {
            w.report_at(
                &f,
                format!("max_component_size must be between 1 byte and {MAX_COMPONENT_SIZE} bytes (1 GiB)"),
            );
        } else {
            fleet.max_component_size = bytes;
        }
    }
    fleet.trusted_keys = trust::trusted_keys(w, &sec);
    fleet
}

/// The largest `[fleet] max_component_size`.
const MAX_COMPONENT_SIZE: u64 = 1 << 30;

/// The shortest `[fleet]` interval: each poll is a read of the lease table per subscription.
const MIN_FLEET_INTERVAL: Duration = Duration::from_millis(100);

fn duration_or(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    name: &str,
    default: Duration,
) -> Option<Duration> {
    match sec.get(name) {
        Some(f) => w.duration(&f, MAX_INTERVAL),
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
    let mut max_upload = defaults::MAX_UPLOAD;
    if let Some(f) = sec.get("max_upload")
        && let Some(bytes) = w.size(&f)
    {
        if bytes == 0 {
            w.report_at(&f, "max_upload must be more than 0 bytes");
        } else {
            max_upload = bytes;
        }
    }
    Some(AdminConfig {
        listen,
        token,
        max_upload,
    })
}

fn subscriptions(
    w: &mut Walker<'_>,
    root: &Section<'_, '_>,
    memory: Option<bool>,
    signed: bool,
    cx: &state::StateContext<'_>,
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
    let mut shared = HashMap::new();
    let mut subscriptions = Vec::new();
    for item in &items {
        if let Some(sec) = w.open(item, SUBSCRIPTION_KEYS) {
            let mut s = subscription(w, &sec, memory, signed, cx, &mut names);
            lease_key::read(w, &sec, &mut s, &mut shared);
            subscriptions.push(s);
        }
    }
    let rows = lease_key::resolve(&subscriptions);
    for (s, rows) in subscriptions.iter_mut().zip(rows) {
        s.lease_rows = rows;
    }
    subscriptions
}

/// One `[[subscription]]`; `names` maps the names seen so far to their lines.
fn subscription(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    memory: Option<bool>,
    signed: bool,
    cx: &state::StateContext<'_>,
    names: &mut HashMap<String, usize>,
) -> SubscriptionConfig {
    let name = w
        .required(sec, "name")
        .and_then(|f| subscription_name(w, &f, names));
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
    // The embedded stream has nothing else to create streams.
    let create_if_missing = match memory {
        Some(true) => Some(create_if_missing.unwrap_or(defaults::EMBEDDED_SHARDS)),
        _ => create_if_missing,
    };
    // A fed embedded stream is read from its beginning, so the feed is read.
    let start_at = sec
        .get("start_at")
        .and_then(|f| start_at(w, &f))
        .unwrap_or(if feed.is_some() {
            StartAt::TrimHorizon
        } else {
            StartAt::Latest
        });
    let max_read = super::MAX_READ_RECORDS as i64;
    let limits = w
        .table(sec, "limits", LIMITS_KEYS)
        .map_or_else(Limits::default, |limits| self::limits(w, &limits));
    let poll_interval = sec
        .get("poll_interval")
        .and_then(|f| w.duration(&f, MAX_INTERVAL))
        .unwrap_or(defaults::POLL_INTERVAL);
    SubscriptionConfig {
        handler: handler.unwrap_or_default(),
        handler_at,
        watch: watch(w, sec, signed),
        feed,
        create_if_missing,
        start_at,
        batch: int(w, "batch", 1, max_read).map_or(defaults::BATCH, |n| n as usize),
        read_limit: int(w, "read_limit", 1, max_read).map_or(defaults::READ_LIMIT, |n| n as usize),
        poll_interval,
        read: read::read_mode(
            w,
            sec,
            cx.service,
            name.as_deref().unwrap_or_default(),
            memory,
        ),
        lanes: int(w, "lanes", 1, 64).map_or(defaults::LANES, |n| n as u32),
        lease_key: None,
        lease_rows: LeaseRows::Stream,
        retry: retry_policy(w, sec, stream.as_deref()),
        in_place_max_delay: in_place_max_delay(w, sec),
        publish_to: publish_to(w, sec),
        limits,
        wasi: WasiGrants {
            state: state::state(
                w,
                sec,
                name.as_deref().unwrap_or_default(),
                cx,
                limits.timeout,
            ),
            ..grants::grants(w, sec)
        },
        name: name.unwrap_or_default(),
        stream: stream.unwrap_or_default(),
    }
}

/// A subscription's `name`: valid, and not used before.
fn subscription_name(
    w: &mut Walker<'_>,
    f: &Field<'_, '_>,
    names: &mut HashMap<String, usize>,
) -> Option<String> {
    let name = w.text(f)?;
    if !is_name(&name) {
        let message = format!(
            "{} is not a valid subscription name; use 1 to 128 letters, digits, `_`, `.` or `-`",
            quote(&name)
        );
        w.report_at(f, message);
    }
    match names.entry(name.clone()) {
        Entry::Vacant(entry) => {
            entry.insert(w.line(f.span.start));
        }
        Entry::Occupied(entry) => {
            let message = format!(
                "duplicate subscription name {} (first used on line {})",
                quote(&name),
                entry.get()
            );
            w.report_at(f, message);
        }
    }
    Some(name)
}

/// `max_attempts`, `dead_letter` and `retry_stream`: the policy needs all its parts, a cap and
/// somewhere for the last attempt to go; the streams mean nothing without a cap.
fn retry_policy(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    stream: Option<&str>,
) -> Option<RetryPolicy> {
    let max_attempts = sec
        .get("max_attempts")
        .and_then(|f| w.integer(&f, 1, 1000))
        .map(|n| n as u32);
    let dead_letter = sec.get("dead_letter").and_then(|f| w.stream_name(&f));
    let retry_stream = sec.get("retry_stream").and_then(|f| w.stream_name(&f));
    if let Some(f) = sec.get("max_attempts")
        && !sec.has("dead_letter")
    {
        w.report_at(
            &f,
            "max_attempts needs `dead_letter`: the stream a record goes to after its last attempt",
        );
    }
    for key in ["dead_letter", "retry_stream"] {
        if let Some(f) = sec.get(key)
            && !sec.has("max_attempts")
        {
            w.report_at(
                &f,
                format!(
                    "`{key}` is only used with `max_attempts` (without a cap, retry holds the record)"
                ),
            );
        }
    }
    Some(RetryPolicy {
        max_attempts: max_attempts?,
        own_retry_stream: retry_stream.is_some(),
        retry_stream: retry_stream.unwrap_or_else(|| stream.unwrap_or_default().to_owned()),
        dead_letter: dead_letter.unwrap_or_default(),
    })
}

/// `in_place_max_delay`: without a cap only (under one, retry-after publishes a copy), from
/// [`defaults::IN_PLACE_MIN_DELAY`] to [`defaults::IN_PLACE_MAX_DELAY_BOUND`].
fn in_place_max_delay(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> Duration {
    let Some(f) = sec.get("in_place_max_delay") else {
        return defaults::IN_PLACE_MAX_DELAY;
    };
    if sec.has("max_attempts") {
        w.report_at(
            &f,
            "`in_place_max_delay` is only used without `max_attempts` (under a cap, retry-after \
             publishes a copy once the delay is over)",
        );
    }
    let d = w.duration(&f, defaults::IN_PLACE_MAX_DELAY_BOUND);
    if let Some(d) = d
        && d < defaults::IN_PLACE_MIN_DELAY
    {
        let message = format!(
            "`in_place_max_delay` must be at least {}",
            humantime::format_duration(defaults::IN_PLACE_MIN_DELAY)
        );
        w.report_at(&f, message);
    }
    d.unwrap_or(defaults::IN_PLACE_MAX_DELAY)
        .max(defaults::IN_PLACE_MIN_DELAY)
}

/// `watch`: not with trusted keys (a changed file is deployed unsigned, and refused).
fn watch(w: &mut Walker<'_>, sec: &Section<'_, '_>, signed: bool) -> bool {
    let Some(f) = sec.get("watch") else {
        return false;
    };
    let watch = w.boolean(&f).unwrap_or(false);
    if watch && signed {
        w.report_at(
            &f,
            "watch = true cannot be used with [fleet] trusted_keys: a changed file would be \
             deployed unsigned; deploy with `shardhost deploy --sign-key FILE` instead",
        );
    }
    watch
}

/// `publish_to`: the streams a handler may publish to.
fn publish_to(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> Vec<String> {
    let mut streams = Vec::new();
    if let Some(items) = sec.get("publish_to").and_then(|f| w.array(&f)) {
        for item in &items {
            if let Some(name) = w.stream_name(item) {
                streams.push(name);
            }
        }
    }
    streams
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
    if let Some(timeout) = sec
        .get("timeout")
        .and_then(|f| w.duration(&f, MAX_CALL_TIMEOUT))
    {
        limits.timeout = timeout;
    }
    if let Some(f) = sec.get("fuel") {
        limits.fuel = w.integer(&f, 1, i64::MAX).map(|n| n as u64);
    }
    if let Some(n) = sec
        .get("in_flight_records")
        .and_then(|f| w.integer(&f, 1, 1_000_000))
    {
        limits.in_flight_records = n as usize;
    }
    if let Some(f) = sec.get("in_flight_bytes")
        && let Some(bytes) = w.size(&f)
    {
        if (MIN_MEMORY..=MAX_MEMORY).contains(&bytes) {
            limits.in_flight_bytes = bytes;
        } else {
            w.report_at(&f, "in_flight_bytes must be from 1MiB to 4GiB");
        }
    }
    limits
}

#[cfg(test)]
mod tests;
