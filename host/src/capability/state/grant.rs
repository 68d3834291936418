//! `[subscription.state]`: the key-value store a subscription grants its handler, read from the
//! config (every problem with file, line and key) and shown by `check`. Without the table, a
//! handler gets no state (a component importing `wasi:keyvalue` is refused).

use std::collections::HashMap;
use std::time::Duration;

use toml::de::DeValue;

use super::{State, StateGrant, StateStoreKind};
use crate::config::walk::{Field, Section, Walker, quote};
use crate::config::{
    Grant, GrantTable, Grants, LeaseStoreKind, MAX_CALL_TIMEOUT, TableContext, defaults,
};
use crate::state::Commit;

const STATE_KEYS: &[&str] = &[
    "store",
    "table",
    "ttl",
    "buckets",
    "max_in_flight",
    "timeout",
    "endpoint",
    "region",
    "test_credentials",
    "commit",
];

/// The longest `ttl`: ten years (DynamoDB keeps an expiry as seconds since the epoch).
const MAX_TTL: Duration = Duration::from_secs(10 * 365 * 86_400);

/// The most `max_in_flight`.
const MAX_IN_FLIGHT: i64 = 1024;

/// The longest namespace (`SERVICE/SUBSCRIPTION/BUCKET/`): with a key of up to 1 KiB it stays
/// inside DynamoDB's 2 KiB partition key.
const MAX_NAMESPACE: usize = 900;

impl GrantTable for State {
    fn keys(&self) -> &'static [&'static str] {
        &["state"]
    }

    fn read(
        &self,
        w: &mut Walker<'_>,
        sub: &Section<'_, '_>,
        cx: &TableContext<'_>,
        grants: &mut Grants,
    ) {
        if let Some(grant) = state(w, sub, cx) {
            grants.insert(grant);
        }
    }
}

impl Grant for StateGrant {
    fn describe(&self) -> Vec<String> {
        let store = match &self.store {
            StateStoreKind::Memory => "memory".to_owned(),
            StateStoreKind::Dynamo { table, .. } => format!("dynamodb table {table}"),
        };
        let ttl = self.ttl.map_or("never".to_owned(), |t| {
            humantime::format_duration(t).to_string()
        });
        let buckets: Vec<&str> = std::iter::once("default")
            .chain(self.buckets.iter().map(String::as_str))
            .collect();
        let commit = match self.commit {
            Commit::Immediate => "",
            Commit::WithCheckpoint => ", committed with the checkpoint",
        };
        vec![format!(
            "  state: {store}, buckets {} (keys under {}, expire {ttl}, timeout {}, {} in \
             flight{commit})",
            buckets.join(", "),
            self.namespace,
            humantime::format_duration(self.timeout),
            self.max_in_flight
        )]
    }
}

/// `[subscription.state]` of the subscription, if it has one.
fn state(w: &mut Walker<'_>, sub: &Section<'_, '_>, cx: &TableContext<'_>) -> Option<StateGrant> {
    let call_timeout = cx.limits.timeout;
    let sec = w.table(sub, "state", STATE_KEYS)?;
    let store = store(w, &sec, cx);
    let ttl = sec.get("ttl").and_then(|f| ttl(w, &f)).flatten();
    let buckets = sec
        .get("buckets")
        .map(|f| buckets(w, &f))
        .unwrap_or_default();
    let max_in_flight = sec
        .get("max_in_flight")
        .and_then(|f| w.integer(&f, 1, MAX_IN_FLIGHT))
        .map_or(defaults::STATE_MAX_IN_FLIGHT, |n| n as u32);
    let timeout = match sec.get("timeout") {
        Some(f) => w.duration(&f, MAX_CALL_TIMEOUT).inspect(|t| {
            if *t >= call_timeout {
                let message = format!(
                    "timeout ({}) must be shorter than the call's [subscription.limits] timeout \
                     ({}): a stalled store would leave the handler no time to answer",
                    humantime::format_duration(*t),
                    humantime::format_duration(call_timeout)
                );
                w.report_at(&f, message);
            }
        }),
        // At most half the call's: the handler keeps time to answer.
        None => Some(defaults::STATE_TIMEOUT.min(call_timeout / 2)),
    }
    .unwrap_or(defaults::STATE_TIMEOUT);
    let commit = commit(w, &sec, cx, store.as_ref());
    let namespace = namespace(cx.service, cx.subscription);
    let longest = buckets.iter().map(String::len).max().unwrap_or(0).max(7);
    if namespace.len() + longest + 1 > MAX_NAMESPACE
        && let Some(f) = sub.get("state")
    {
        let message = format!(
            "the service and subscription names are too long to key state by ({} bytes with \
             the longest bucket; at most {MAX_NAMESPACE}): shorten [host] name",
            namespace.len() + longest + 1
        );
        w.report_at(&f, message);
    }
    Some(StateGrant {
        store: store?,
        ttl,
        buckets,
        namespace,
        max_in_flight,
        timeout,
        commit,
    })
}

/// `commit`: `"immediate"` (the default) or `"with-checkpoint"`, which needs the state where
/// the checkpoints are: a DynamoDB state table beside a DynamoDB lease table (the same endpoint
/// and region: one transaction writes both), or memory state beside memory leases.
fn commit(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    cx: &TableContext<'_>,
    store: Option<&StateStoreKind>,
) -> Commit {
    let Some(f) = sec.get("commit") else {
        return Commit::Immediate;
    };
    let commit = match w.string(&f) {
        Some("immediate") => return Commit::Immediate,
        Some("with-checkpoint") => Commit::WithCheckpoint,
        Some(other) => {
            let message = format!(
                "unknown commit {}; expected \"immediate\" or \"with-checkpoint\"",
                quote(other)
            );
            w.report_at(&f, message);
            return Commit::Immediate;
        }
        None => return Commit::Immediate,
    };
    let apart = match (store, cx.leases) {
        (Some(StateStoreKind::Memory), LeaseStoreKind::Memory) | (None, _) => None,
        (
            Some(StateStoreKind::Dynamo {
                endpoint, region, ..
            }),
            LeaseStoreKind::Dynamo {
                endpoint: lease_endpoint,
                region: lease_region,
                ..
            },
        ) => (endpoint != lease_endpoint || region != lease_region).then_some(
            "the state table and the lease table must be on the same DynamoDB endpoint and \
             region (one transaction writes both): drop [subscription.state] endpoint and \
             region, or make them the lease table's",
        ),
        (Some(StateStoreKind::Dynamo { .. }), LeaseStoreKind::Memory) => Some(
            "the checkpoints are kept in memory ([lease] store = \"memory\"), so state \
             committed with them to DynamoDB would outlive them: use a DynamoDB lease table, or \
             store = \"memory\" for state",
        ),
        (Some(StateStoreKind::Memory), LeaseStoreKind::Dynamo { .. }) => None,
    };
    if let Some(why) = apart {
        w.report_at(&f, format!("commit = \"with-checkpoint\": {why}"));
    }
    commit
}

/// `SERVICE/SUBSCRIPTION/`, the service name's `%` and `/` escaped (a subscription name has
/// neither), so no two services or subscriptions share a prefix.
pub fn namespace(service: &str, subscription: &str) -> String {
    let service = service.replace('%', "%25").replace('/', "%2F");
    format!("{service}/{subscription}/")
}

/// `store` and the keys of a DynamoDB store.
fn store(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    cx: &TableContext<'_>,
) -> Option<StateStoreKind> {
    let lease_table = match cx.leases {
        LeaseStoreKind::Dynamo { table, .. } => Some(table.as_str()),
        LeaseStoreKind::Memory => None,
    };
    let kind = match sec.get("store") {
        None if lease_table.is_some() => "dynamodb",
        None => "memory",
        Some(f) => match w.string(&f) {
            Some(s @ ("memory" | "dynamodb")) => s,
            Some(s) => {
                let message = format!(
                    "unknown state store {}; expected \"memory\" or \"dynamodb\"",
                    quote(s)
                );
                w.report_at(&f, message);
                return None;
            }
            None => return None,
        },
    };
    if kind == "memory" {
        for f in ["table", "endpoint", "region", "test_credentials"]
            .into_iter()
            .filter_map(|k| sec.get(k))
        {
            let message = format!(
                "`{}` is only used with store = \"dynamodb\" (the store here is \"memory\")",
                f.name
            );
            w.report_at(&f, message);
        }
        if lease_table.is_some()
            && let Some(f) = sec.get("store")
        {
            w.report_at(
                &f,
                "store = \"memory\" keeps state in each instance's own memory, but the lease \
                 table is shared by every instance: a shard that moves would forget what it \
                 marked. Use store = \"dynamodb\" with a state table",
            );
        }
        return Some(StateStoreKind::Memory);
    }
    dynamo(w, sec, cx, lease_table)
}

/// The keys of a DynamoDB state store: its table (never the lease table), and where DynamoDB
/// is (the state table's own keys, else the lease table's, else the stream's).
fn dynamo(
    w: &mut Walker<'_>,
    sec: &Section<'_, '_>,
    cx: &TableContext<'_>,
    lease_table: Option<&str>,
) -> Option<StateStoreKind> {
    let table = w.required(sec, "table").and_then(|f| {
        let table = w.text(&f)?;
        if Some(table.as_str()) == lease_table {
            let message = format!(
                "the state table {} is the lease table: give state a table of its own \
                 (partition key `key`, a string)",
                quote(&table)
            );
            w.report_at(&f, message);
        }
        Some(table)
    });
    let (lease_endpoint, lease_region, lease_creds) = match cx.leases {
        LeaseStoreKind::Dynamo {
            endpoint,
            region,
            test_credentials,
            ..
        } => (endpoint.clone(), region.clone(), *test_credentials),
        LeaseStoreKind::Memory => (None, cx.kinesis.region.clone(), cx.kinesis.test_credentials),
    };
    let endpoint = match sec.get("endpoint") {
        Some(f) => w.url(&f),
        None => lease_endpoint,
    };
    let region = match sec.get("region") {
        Some(f) => w.text(&f),
        None => lease_region,
    };
    let test_credentials = match sec.get("test_credentials") {
        Some(f) => w.boolean(&f).unwrap_or(false),
        None => lease_creds,
    };
    if test_credentials
        && endpoint.is_none()
        && let Some(f) = sec.get("test_credentials").or_else(|| sec.get("store"))
    {
        w.report_at(
            &f,
            "test_credentials sends dummy keys, meant for a local stack, but the state store \
             has no `endpoint`, so they would go to AWS DynamoDB: set [subscription.state] \
             endpoint or test_credentials = false",
        );
    }
    Some(StateStoreKind::Dynamo {
        table: table?,
        endpoint,
        region,
        test_credentials,
    })
}

/// `ttl`: a duration, or `"0"` / `0` for never. `Some(None)`: never.
fn ttl(w: &mut Walker<'_>, f: &Field<'_, '_>) -> Option<Option<Duration>> {
    match f.value {
        DeValue::Integer(i) if i.as_str() == "0" => return Some(None),
        DeValue::String(s) if s.trim() == "0" => return Some(None),
        _ => {}
    }
    let ttl = w.duration(f, MAX_TTL)?;
    if ttl < Duration::from_secs(1) {
        w.report_at(
            f,
            "`ttl` must be at least 1s (expiry is kept in whole seconds), or \"0\" for never",
        );
        return None;
    }
    Some(Some(ttl))
}

/// `buckets`: names, each once; `default` is always open and need not be listed.
fn buckets(w: &mut Walker<'_>, field: &Field<'_, '_>) -> Vec<String> {
    let mut buckets = Vec::new();
    let Some(items) = w.array(field) else {
        return buckets;
    };
    let mut seen = HashMap::new();
    for item in &items {
        let Some(name) = w.string(item) else {
            continue;
        };
        if !is_bucket_name(name) {
            let message = format!(
                "{} is not a bucket name; use 1 to 64 letters, digits, `_`, `.` or `-`",
                quote(name)
            );
            w.report_at(item, message);
            continue;
        }
        if name == "default" {
            w.report_at(
                item,
                "the bucket \"default\" is always open: list only the buckets besides it",
            );
            continue;
        }
        if let Some(first) = seen.insert(name.to_owned(), w.line(item.span.start)) {
            let message = format!("{} is listed twice (first on line {first})", quote(name));
            w.report_at(item, message);
            continue;
        }
        buckets.push(name.to_owned());
    }
    buckets
}

/// A bucket name: 1 to 64 letters, digits, `_`, `.` or `-`.
pub fn is_bucket_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}
