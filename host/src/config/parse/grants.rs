//! What a subscription grants its handler: `[subscription.wasi]` (environment variables),
//! `[subscription.http]` (outbound HTTP to listed origins) and `[subscription.config]` (values
//! it reads by name). Without a table, nothing of its kind is granted.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use toml::de::DeValue;

use super::super::{ConfigValue, HttpGrant, Origin, WasiGrants, defaults};
use super::MAX_CALL_TIMEOUT;
use super::walk::{Field, Section, Walker, is_env_name, quote};

const WASI_KEYS: &[&str] = &["env"];
const HTTP_KEYS: &[&str] = &[
    "allow",
    "timeout",
    "max_body",
    "max_in_flight",
    "ca_file",
    "allow_private",
];

/// The largest `[subscription.http] max_body`.
const MAX_HTTP_BODY: u64 = 1 << 30;

/// The most `[subscription.http] max_in_flight`.
const MAX_HTTP_IN_FLIGHT: i64 = 1024;

/// The grants of one `[[subscription]]`.
pub(super) fn grants(w: &mut Walker<'_>, sub: &Section<'_, '_>) -> WasiGrants {
    let env = w
        .table(sub, "wasi", WASI_KEYS)
        .map(|wasi| self::env(w, &wasi))
        .unwrap_or_default();
    let http = w
        .table(sub, "http", HTTP_KEYS)
        .map(|http| self::http(w, &http));
    let config = sub
        .get("config")
        .map(|f| self::config(w, &f))
        .unwrap_or_default();
    WasiGrants {
        env,
        http,
        config,
        state: None,
    }
}

/// `[subscription.wasi] env`: `"NAME"` or `"NAME=value"`, each name once.
fn env(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> Vec<String> {
    let mut env = Vec::new();
    let Some(items) = sec.get("env").and_then(|f| w.array(&f)) else {
        return env;
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
        match seen.entry(name) {
            Entry::Vacant(first) => {
                first.insert(w.line(item.span.start));
                env.push(entry.to_owned());
            }
            Entry::Occupied(first) => {
                let message = format!(
                    "`{name}` is listed twice in env (first on line {})",
                    first.get()
                );
                w.report_at(item, message);
            }
        }
    }
    env
}

/// `[subscription.http]`: `allow` (required, not empty) and the bounds, defaulted.
fn http(w: &mut Walker<'_>, sec: &Section<'_, '_>) -> HttpGrant {
    let mut grant = HttpGrant {
        allow: Vec::new(),
        timeout: defaults::HTTP_TIMEOUT,
        max_body: defaults::HTTP_MAX_BODY,
        max_in_flight: defaults::HTTP_MAX_IN_FLIGHT,
        ca_file: None,
        allow_private: false,
    };
    if let Some(f) = w.required(sec, "allow") {
        grant.allow = allow(w, &f);
    }
    if let Some(timeout) = sec
        .get("timeout")
        .and_then(|f| w.duration(&f, MAX_CALL_TIMEOUT))
    {
        grant.timeout = timeout;
    }
    if let Some(f) = sec.get("max_body")
        && let Some(bytes) = w.size(&f)
    {
        if (1..=MAX_HTTP_BODY).contains(&bytes) {
            grant.max_body = bytes;
        } else {
            w.report_at(&f, "`max_body` must be from 1 byte to 1GiB");
        }
    }
    if let Some(n) = sec
        .get("max_in_flight")
        .and_then(|f| w.integer(&f, 1, MAX_HTTP_IN_FLIGHT))
    {
        grant.max_in_flight = n as u32;
    }
    grant.ca_file = sec.get("ca_file").and_then(|f| super::ca::ca_file(w, &f));
    if let Some(yes) = sec.get("allow_private").and_then(|f| w.boolean(&f)) {
        grant.allow_private = yes;
    }
    grant
}

/// `allow`: origins, each once (after normalization), at least one.
fn allow(w: &mut Walker<'_>, field: &Field<'_, '_>) -> Vec<Origin> {
    let Some(items) = w.array(field) else {
        return Vec::new();
    };
    if items.is_empty() {
        w.report_at(
            field,
            "allow is empty: a [subscription.http] table with no origin grants nothing; remove \
             the table or list origins",
        );
    }
    let mut seen: HashMap<Origin, usize> = HashMap::new();
    let mut origins = Vec::new();
    for item in &items {
        let Some(text) = w.string(item) else {
            continue;
        };
        let origin = match Origin::parse(text) {
            Ok(origin) => origin,
            Err(message) => {
                w.report_at(item, message);
                continue;
            }
        };
        match seen.entry(origin) {
            Entry::Vacant(first) => {
                origins.push(first.key().clone());
                first.insert(w.line(item.span.start));
            }
            Entry::Occupied(first) => {
                let message = format!(
                    "{} is listed twice: it is the origin {}, first on line {}",
                    quote(text),
                    first.key(),
                    first.get()
                );
                w.report_at(item, message);
            }
        }
    }
    origins
}

/// `[subscription.config]`: names the handler reads, each a string.
fn config(w: &mut Walker<'_>, field: &Field<'_, '_>) -> BTreeMap<String, ConfigValue> {
    let mut config = BTreeMap::new();
    let Some(entries) = w.entries(field) else {
        return config;
    };
    for entry in &entries {
        if !is_config_name(&entry.name) {
            let message = format!(
                "{} is not a config name; use letters, digits, `_`, `-` or `.`",
                quote(&entry.name)
            );
            w.report_at(entry, message);
            continue;
        }
        let written = match entry.value {
            DeValue::String(value) => {
                let value = ConfigValue {
                    value: value.to_string(),
                    from_env: w.took_env(entry),
                };
                config.insert(entry.name.clone(), value);
                continue;
            }
            DeValue::Integer(i) => i.to_string(),
            DeValue::Float(f) => f.to_string(),
            DeValue::Boolean(b) => b.to_string(),
            DeValue::Datetime(d) => d.to_string(),
            DeValue::Array(_) => {
                w.report_at(
                    entry,
                    "config values are strings, found an array: write the value as one string",
                );
                continue;
            }
            DeValue::Table(_) => {
                w.report_at(
                    entry,
                    "config values are strings, found a table (a dotted name makes one: quote \
                     it, as in \"carrier.url\" = \"...\")",
                );
                continue;
            }
        };
        let message = format!("config values are strings: write {}", quote(&written));
        w.report_at(entry, message);
    }
    config
}

/// A `[subscription.config]` name: letters, digits, `_`, `-` or `.`.
fn is_config_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}
