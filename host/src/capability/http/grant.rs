//! `[subscription.http]`: read from the config (every problem with file, line and key), and
//! shown by `check`.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::{HttpGrant, Origin};
use crate::config::walk::{Field, Section, Walker, quote};
use crate::config::{Grant, GrantTable, Grants, MAX_CALL_TIMEOUT, TableContext, ca, defaults};

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

impl GrantTable for super::Http {
    fn keys(&self) -> &'static [&'static str] {
        &["http"]
    }

    fn read(
        &self,
        w: &mut Walker<'_>,
        sub: &Section<'_, '_>,
        _: &TableContext<'_>,
        grants: &mut Grants,
    ) {
        if let Some(sec) = w.table(sub, "http", HTTP_KEYS) {
            grants.insert(http(w, &sec));
        }
    }
}

impl Grant for HttpGrant {
    fn describe(&self) -> Vec<String> {
        let origins: Vec<_> = self.allow.iter().map(ToString::to_string).collect();
        let mut bounds = format!(
            "timeout {}, max_body {}, {} in flight",
            humantime::format_duration(self.timeout),
            crate::config::show_size(self.max_body),
            self.max_in_flight
        );
        if let Some(ca) = &self.ca_file {
            bounds.push_str(&format!(", CA {}", ca.display()));
        }
        if self.allow_private {
            bounds.push_str(", private addresses allowed");
        }
        vec![format!("  http: {} ({bounds})", origins.join(", "))]
    }
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
    grant.ca_file = sec.get("ca_file").and_then(|f| ca::ca_file(w, &f));
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
