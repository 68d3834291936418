//! The TOML walk: one function per table of `shardhost.toml`, each reporting every problem it
//! finds and filling in defaults, so that one pass lists everything wrong with a config.

pub(crate) mod ca;
mod interpolate;
mod lease_key;
mod limits;
mod read;
mod subscription;
mod tables;
mod trust;
pub(crate) mod walk;

use std::path::Path;
use std::time::Duration;

use toml::de::DeTable;

use super::{Config, ConfigError, GrantTable, KinesisEndpoint};
use interpolate::Lookup;
use subscription::{Around, subscriptions};
use tables::{admin, fleet, host, kinesis, leases};
use walk::Walker;
pub use walk::timestamp_millis;

const ROOT_KEYS: &[&str] = &[
    "host",
    "kinesis",
    "leases",
    "fleet",
    "admin",
    "subscription",
];

/// The range of `limits.memory` (also `invoke --memory`).
pub const MIN_MEMORY: u64 = 1 << 20;
pub const MAX_MEMORY: u64 = 4 << 30;

/// The longest `ttl`, `renew_every`, `list_every`, `checkpoint_every` and `poll_interval`: a
/// bound that keeps every deadline the host computes from them far from overflowing.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3_600);

/// The longest `limits.timeout` of a handler call.
pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Parses and validates config text read from `path`, its `${VAR}`s looked up in `env`.
/// Each `[[subscription]]`'s grants are read by `tables`.
pub(super) fn parse(
    path: &Path,
    text: &str,
    env: Lookup<'_>,
    tables: &[&dyn GrantTable],
) -> Result<Config, ConfigError> {
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
    let around = Around {
        memory,
        signed: !fleet.trusted_keys.is_empty(),
        service: &host.name,
        leases: &leases.store,
        kinesis: &kinesis,
        tables,
    };
    let subscriptions = subscriptions(&mut w, &root, &around);
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

#[cfg(test)]
mod tests;
