//! The tables of `shardhost.toml` besides the subscriptions: `[host]`, `[kinesis]`,
//! `[leases]`, `[fleet]` and `[admin]`.

use std::time::Duration;

use super::walk::{Section, Walker, is_url, parse_listen, quote};
use super::{MAX_INTERVAL, ca, trust};
use crate::config::{
    AdminConfig, FleetConfig, HostConfig, KinesisConfig, KinesisEndpoint, LeaseConfig,
    LeaseStoreKind, defaults,
};

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

pub(super) fn host(w: &mut Walker<'_>, root: &Section<'_, '_>) -> HostConfig {
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
pub(super) fn kinesis(w: &mut Walker<'_>, root: &Section<'_, '_>) -> (KinesisConfig, bool) {
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

pub(super) fn leases(
    w: &mut Walker<'_>,
    root: &Section<'_, '_>,
    kinesis: &KinesisConfig,
) -> LeaseConfig {
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

/// `[fleet]`: only with a DynamoDB lease table (the memory store has no fleet).
pub(super) fn fleet(
    w: &mut Walker<'_>,
    root: &Section<'_, '_>,
    leases: &LeaseConfig,
) -> FleetConfig {
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

/// A duration that defaults when absent; `None` when present but invalid (already reported).
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

pub(super) fn admin(w: &mut Walker<'_>, root: &Section<'_, '_>) -> Option<AdminConfig> {
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
