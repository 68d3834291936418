//! `shardhost check CONFIG`: validate the config and load every handler in it.

use std::path::Path;

use crate::config::{Config, LeaseStoreKind, SubscriptionConfig};
use crate::envelope::EnvelopeKey;
use crate::envelope::key::KeyError;
use crate::feed;
use crate::lease::{LeaseKey, LeaseRows};
use crate::version::short_version;
use crate::wasm::Runtime;

use super::{CheckProblem, CliError};

pub fn check(path: &Path) -> Result<(), CliError> {
    let config = Config::load(path).map_err(|e| CliError::Check {
        path: path.to_owned(),
        problems: e.problems.into_iter().map(CheckProblem::Config).collect(),
    })?;
    let loaded = super::block_on(load_all(path, &config))?;
    for line in loaded {
        println!("{line}");
    }
    let (keys, warning) = retry_keys(&config).map_err(|e| CliError::Check {
        path: path.to_owned(),
        problems: vec![CheckProblem::RetryKey(e)],
    })?;
    println!("{keys}");
    if let Some(warning) = warning {
        eprintln!("warning: {warning}");
    }
    if matches!(
        config.leases.store,
        crate::config::LeaseStoreKind::Dynamo { .. }
    ) && config.fleet.trusted_keys.is_empty()
    {
        eprintln!(
            "warning: [fleet] trusted_keys is not set: anyone who can write the lease table can \
             deploy a handler to every instance (docs/security.md: \"Signed deploys\")"
        );
    }
    println!("{}: ok", path.display());
    Ok(())
}

/// Which keys retry copies are made and opened under, by id (never a secret), and a warning
/// when the key is the one kept in the lease table; refuses a previous key from the environment
/// that is too short.
fn retry_keys(config: &Config) -> Result<(String, Option<String>), KeyError> {
    let configured = EnvelopeKey::configured_previous(&config.host.retry_keys_previous)?;
    let mut previous: Vec<String> = configured.keys.iter().map(EnvelopeKey::id).collect();
    if configured.lease_table {
        previous.push("(the lease table's key)".to_owned());
    }
    let previous = if previous.is_empty() {
        String::new()
    } else {
        format!(
            "; copies made under key {} are still opened",
            previous.join(", ")
        )
    };
    let Some(current) = EnvelopeKey::configured(config.host.retry_key.as_deref()) else {
        let dynamo = matches!(config.leases.store, LeaseStoreKind::Dynamo { .. });
        let (from, warning) = if dynamo {
            let warning = "retry copies are authenticated with a key kept in the lease table: \
                           whoever can read the table can forge them; set [host] retry_key or \
                           SHARDHOST_RETRY_KEY (docs/concepts/retries.md)";
            ("the lease table", Some(warning.to_owned()))
        } else {
            ("the cache directory", None)
        };
        return Ok((
            format!("retry copies: made under a key kept in {from}{previous}"),
            warning,
        ));
    };
    let line = format!(
        "retry copies: made under key {} ([host] retry_key or SHARDHOST_RETRY_KEY){previous}",
        current.id()
    );
    Ok((line, None))
}

/// Loads every handler and feed of the config (at `path`); answers a line per handler, or every
/// problem found.
async fn load_all(path: &Path, config: &Config) -> Result<Vec<String>, CliError> {
    let runtime =
        Runtime::for_host(&config.host, config.meters_fuel()).map_err(CliError::Engine)?;
    let mut problems = Vec::new();
    let mut loaded = Vec::new();
    for s in &config.subscriptions {
        match runtime.load_file(&s.handler, s.limits, &s.wasi).await {
            Ok(c) => {
                loaded.push(format!(
                    "subscription `{}`: handler {} (version {})",
                    s.name,
                    s.handler.display(),
                    short_version(c.version())
                ));
                loaded.push(format!("  read: {}", s.read.describe()));
                loaded.push(lease_rows(config, s));
                loaded.extend(retry_copies(s));
                loaded.extend(s.wasi.describe());
            }
            Err(source) => problems.push(CheckProblem::Handler {
                at: s.handler_at.clone(),
                source,
            }),
        }
        if let Some(feed_path) = &s.feed
            && let Err(source) = feed::load(feed_path)
        {
            problems.push(CheckProblem::Feed {
                subscription: s.name.clone(),
                source,
            });
        }
    }
    if problems.is_empty() {
        Ok(loaded)
    } else {
        Err(CliError::Check {
            path: path.to_owned(),
            problems,
        })
    }
}

/// The line that says which lease rows a subscription reads through, and why.
fn lease_rows(config: &Config, s: &SubscriptionConfig) -> String {
    let key = LeaseKey::of(&s.stream, "SHARD", &s.name, s.lease_rows);
    let others: Vec<String> = config
        .subscriptions
        .iter()
        .filter(|o| o.stream == s.stream && o.name != s.name)
        .map(|o| format!("`{}`", o.name))
        .collect();
    let why = match (s.lease_key, s.lease_rows) {
        (Some(rows), _) => format!("lease_key = \"{}\"", rows.as_str()),
        (None, LeaseRows::Subscription) => format!(
            "its own: {} read{} stream `{}` too",
            others.join(", "),
            if others.len() == 1 { "s" } else { "" },
            s.stream
        ),
        (None, LeaseRows::Stream) => format!(
            "shared, as ruststream-kinesis and earlier versions key them: the only \
             subscription on stream `{}`",
            s.stream
        ),
    };
    format!("  lease rows: {key} ({why})")
}

/// Under a retry cap, where the subscription's copies go and who reads them.
fn retry_copies(s: &SubscriptionConfig) -> Option<String> {
    let policy = s.retry.as_ref()?;
    let dead = format!(
        "after {} attempts to `{}`",
        policy.max_attempts, policy.dead_letter
    );
    if !policy.own_retry_stream || policy.retry_stream == s.stream {
        return Some(format!(
            "  retries: copies on `{}`, read back as it is read; dead letters {dead}",
            s.stream
        ));
    }
    let rows = LeaseKey::of(
        &policy.retry_stream,
        "SHARD",
        &s.name,
        LeaseRows::Subscription,
    );
    Some(format!(
        "  retries: copies on `{}`, read by this subscription too (lease rows: {rows}); dead \
         letters {dead}",
        policy.retry_stream
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use crate::capability::config::{ConfigGrant, ConfigValue};
    use crate::capability::env::EnvGrant;
    use crate::capability::http::{HttpGrant, Origin};
    use crate::capability::state::{StateGrant, StateStoreKind};
    use crate::config::Grants;

    #[test]
    fn grants_are_listed_by_name_and_origin_never_by_value() {
        let value = |value: &str, from_env| ConfigValue {
            value: value.into(),
            from_env,
        };
        let wasi = Grants::default()
            .with(EnvGrant(vec![
                "RUST_LOG".into(),
                "API_KEY=literal-secret".into(),
            ]))
            .with(HttpGrant {
                allow: ["https://api.carrier.example", "http://127.0.0.1:8090"]
                    .map(|o| Origin::parse(o).unwrap())
                    .into(),
                timeout: Duration::from_secs(5),
                max_body: 10 << 20,
                max_in_flight: 16,
                ca_file: Some("/etc/ca.pem".into()),
                allow_private: false,
            })
            .with(ConfigGrant(BTreeMap::from([
                (
                    "carrier_url".into(),
                    value("https://api.carrier.example/v2", false),
                ),
                ("carrier_token".into(), value("env-secret", true)),
            ])))
            .with(StateGrant {
                store: StateStoreKind::Dynamo {
                    table: "shipping-state".into(),
                    endpoint: None,
                    region: None,
                    test_credentials: false,
                },
                ttl: Some(Duration::from_secs(7 * 86_400)),
                buckets: vec!["orders".into()],
                namespace: "shipping/ship/".into(),
                max_in_flight: 64,
                timeout: std::time::Duration::from_secs(2),
                commit: Default::default(),
            });
        assert_eq!(
            wasi.describe(),
            [
                "  env: RUST_LOG, API_KEY",
                "  http: https://api.carrier.example, http://127.0.0.1:8090 (timeout 5s, \
                 max_body 10 MiB, 16 in flight, CA /etc/ca.pem)",
                "  config: carrier_token (from the environment), carrier_url",
                "  state: dynamodb table shipping-state, buckets default, orders (keys under \
                 shipping/ship/, expire 7days, timeout 2s, 64 in flight)",
            ]
        );
        assert!(Grants::default().describe().is_empty());
    }
}
