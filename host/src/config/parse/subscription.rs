//! One `[[subscription]]` and the array of them.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::PathBuf;
use std::time::Duration;

use toml::de::DeValue;

use super::walk::{Field, Section, Walker, describe, is_name, quote};
use super::{MAX_INTERVAL, lease_key, limits, read};
use crate::config::{
    GrantTable, Grants, KinesisConfig, LeaseStoreKind, Limits, Location, RetryPolicy, StartAt,
    SubscriptionConfig, TableContext, defaults,
};
use crate::lease::LeaseRows;

/// What every `[[subscription]]` is read against: the tables above it and the capabilities'
/// grant tables.
pub(super) struct Around<'a> {
    /// The stream is the embedded one (`None`: the endpoint is invalid, already reported).
    pub(super) memory: Option<bool>,
    /// `[fleet] trusted_keys` are set.
    pub(super) signed: bool,
    pub(super) service: &'a str,
    pub(super) leases: &'a LeaseStoreKind,
    pub(super) kinesis: &'a KinesisConfig,
    pub(super) tables: &'a [&'a dyn GrantTable],
}

/// The keys of a `[[subscription]]` besides the capabilities' (`GrantTable::keys`).
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
];
const START_AT_KEYS: &[&str] = &["timestamp"];

pub(super) fn subscriptions(
    w: &mut Walker<'_>,
    root: &Section<'_, '_>,
    around: &Around<'_>,
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
    let known: Vec<&str> = SUBSCRIPTION_KEYS
        .iter()
        .chain(around.tables.iter().flat_map(|t| t.keys()))
        .copied()
        .collect();
    for item in &items {
        if let Some(sec) = w.open(item, &known) {
            let mut s = subscription(w, &sec, around, &mut names);
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
    around: &Around<'_>,
    names: &mut HashMap<String, usize>,
) -> SubscriptionConfig {
    let memory = around.memory;
    let name = w
        .required(sec, "name")
        .and_then(|f| subscription_name(w, &f, names));
    let stream = w.required(sec, "stream").and_then(|f| w.stream_name(&f));
    let (handler, handler_at) = handler(w, sec);
    let feed = feed(w, sec, memory);
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
    let max_read = crate::config::MAX_READ_RECORDS as i64;
    let limits = w
        .table(sec, "limits", limits::LIMITS_KEYS)
        .map_or_else(Limits::default, |table| limits::limits(w, &table));
    let poll_interval = sec
        .get("poll_interval")
        .and_then(|f| w.duration(&f, MAX_INTERVAL))
        .unwrap_or(defaults::POLL_INTERVAL);
    let retry = retry_policy(w, sec, stream.as_deref());
    let wasi = grants(w, sec, around, name.as_deref().unwrap_or_default(), &limits);
    committed_state_without_copies(w, sec, &wasi, retry.is_some());
    SubscriptionConfig {
        handler: handler.unwrap_or_default(),
        handler_at,
        watch: watch(w, sec, around.signed),
        feed,
        create_if_missing,
        start_at,
        batch: int(w, "batch", 1, max_read).map_or(defaults::BATCH, |n| n as usize),
        read_limit: int(w, "read_limit", 1, max_read).map_or(defaults::READ_LIMIT, |n| n as usize),
        poll_interval,
        read: read::read_mode(
            w,
            sec,
            around.service,
            name.as_deref().unwrap_or_default(),
            memory,
        ),
        lanes: int(w, "lanes", 1, 64).map_or(defaults::LANES, |n| n as u32),
        lease_key: None,
        lease_rows: LeaseRows::Stream,
        retry,
        in_place_max_delay: in_place_max_delay(w, sec),
        publish_to: publish_to(w, sec),
        limits,
        wasi,
        name: name.unwrap_or_default(),
        stream: stream.unwrap_or_default(),
    }
}

/// State committed with the checkpoint keeps a record's writes only when it settles in its
/// batch; a retry copy would settle it while its writes are dropped, so the two do not mix (yet).
fn committed_state_without_copies(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    grants: &crate::config::Grants,
    copies: bool,
) {
    let committed = grants
        .get::<crate::state::StateGrant>()
        .is_some_and(|g| g.commit == crate::state::Commit::WithCheckpoint);
    if committed
        && copies
        && let Some(f) = sec.get("max_attempts")
    {
        w.report_at(
            &f,
            "a retry cap (max_attempts, retry copies and dead letters) does not work with \
             [subscription.state] commit = \"with-checkpoint\" yet: a batch whose records do not \
             all settle is read again whole, so drop max_attempts and dead_letter (a record \
             answered retry is then called again with its batch)",
        );
    }
}

/// `handler`: the file (when it exists) and where the key stands, or would.
fn handler(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> (Option<PathBuf>, Location) {
    let field = w.required(sec, "handler");
    let handler = field.as_ref().and_then(|f| w.existing_file(f, "handler"));
    let at = match &field {
        Some(f) => w.at(f),
        None => w.key_location(sec, "handler"),
    };
    (handler, at)
}

/// `feed`: a file, with the embedded stream only.
fn feed(w: &mut Walker<'_>, sec: &Section<'_, '_>, memory: Option<bool>) -> Option<PathBuf> {
    sec.get("feed").and_then(|f| {
        if memory == Some(false) {
            w.report_at(
                &f,
                "`feed` works only with the embedded stream; set [kinesis] endpoint = \"memory\"",
            );
        }
        w.existing_file(&f, "feed")
    })
}

/// What the capabilities' tables of a subscription grant, each read by its own table.
fn grants(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    around: &Around<'_>,
    subscription: &str,
    limits: &Limits,
) -> Grants {
    let cx = TableContext {
        service: around.service,
        subscription,
        leases: around.leases,
        kinesis: around.kinesis,
        limits,
    };
    let mut grants = Grants::default();
    for table in around.tables {
        table.read(w, sec, &cx, &mut grants);
    }
    grants
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
