//! The registered capabilities, and the config entry points that read their tables.

use std::path::Path;

use super::{Capability, Host, config, env, http, log, publish, state, wasi};
use crate::config::{Config, ConfigError, GrantTable};

/// Lists the capabilities once, for both lists below, in the order their tables are read and
/// `check` lists their grants.
macro_rules! registered {
    ($($capability:path),* $(,)?) => {
        /// Every capability's table of a `[[subscription]]`.
        pub(crate) fn tables() -> Vec<&'static dyn GrantTable> {
            vec![$(&$capability),*]
        }

        /// Every capability, for a store whose data is `T`.
        pub(crate) fn all<T: Host>() -> Vec<&'static dyn Capability<T>> {
            vec![$(&$capability),*]
        }
    };
}

registered![
    wasi::Wasi,
    env::Env,
    log::Log,
    publish::Publish,
    http::Http,
    config::Values,
    state::State,
];

/// A config read with every registered capability's table (config itself knows none).
impl Config {
    /// Reads and validates a config file. Checks that handler and feed files exist, but does
    /// not load components (see `wasm::Runtime::load`).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_with(path, &tables())
    }

    /// Validates config text as if read from `path` (relative paths resolve against its
    /// directory), its `${VAR}` references taken from the process's environment.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        Config::parse_with(path, text, &|name| std::env::var(name), &tables())
    }

    /// [`Config::parse`] with the environment `${VAR}` references are looked up in given as a
    /// function (`std::env::var`'s shape), e.g. a map in a test.
    pub fn parse_with_env(
        path: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Result<String, std::env::VarError>,
    ) -> Result<Config, ConfigError> {
        Config::parse_with(path, text, env, &tables())
    }
}
