//! `shardhost check CONFIG`: validate the config and load every handler in it.

use std::path::Path;

use crate::config::Config;
use crate::feed;
use crate::wasm::{Runtime, short_version};

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
    if matches!(
        config.leases.store,
        crate::config::LeaseStoreKind::Dynamo { .. }
    ) && config.fleet.trusted_keys.is_empty()
    {
        eprintln!(
            "warning: [fleet] trusted_keys is not set: anyone who can write the lease table can \
             deploy a handler to every instance (README: \"Signed deploys\")"
        );
    }
    println!("{}: ok", path.display());
    Ok(())
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
            Ok(c) => loaded.push(format!(
                "subscription `{}`: handler {} (version {})",
                s.name,
                s.handler.display(),
                short_version(c.version())
            )),
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
