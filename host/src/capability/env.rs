//! The capability `env`: `[subscription.wasi] env`, the environment variables a handler's
//! WASI environment holds (`"NAME"` passes the host's value through, `"NAME=value"` sets it).
//! Only names are ever shown.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use super::{Capability, GrantError, Host, InstanceContext, Part, Prepared, Shared};
use crate::config::walk::{Section, Walker, is_env_name, quote};
use crate::config::{Grant, GrantTable, Grants, TableContext};

/// The capability: `[subscription.wasi]` (WASI itself is every handler's: `wasi/`).
pub struct Env;

/// `[subscription.wasi] env`, as given. Its `Debug` shows names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EnvGrant(pub Vec<String>);

const WASI_KEYS: &[&str] = &["env"];

impl fmt::Debug for EnvGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.0.iter().map(|e| EnvName(e)).collect();
        f.debug_tuple("EnvGrant").field(&names).finish()
    }
}

/// An `env` entry as shown: `NAME`, or `NAME=…` for one that sets a value.
struct EnvName<'a>(&'a str);

impl fmt::Debug for EnvName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.split_once('=') {
            Some((name, _)) => write!(f, "\"{name}=…\""),
            None => write!(f, "{:?}", self.0),
        }
    }
}

impl GrantTable for Env {
    fn keys(&self) -> &'static [&'static str] {
        &["wasi"]
    }

    fn read(
        &self,
        w: &mut Walker<'_>,
        sub: &Section<'_, '_>,
        _: &TableContext<'_>,
        grants: &mut Grants,
    ) {
        let env = w
            .table(sub, "wasi", WASI_KEYS)
            .map(|wasi| self::env(w, &wasi))
            .unwrap_or_default();
        if !env.is_empty() {
            grants.insert(EnvGrant(env));
        }
    }
}

impl Grant for EnvGrant {
    /// Names only: a value may be a secret.
    fn describe(&self) -> Vec<String> {
        let names: Vec<_> = self
            .0
            .iter()
            .map(|e| e.split_once('=').map_or(e.as_str(), |(name, _)| name))
            .collect();
        vec![format!("  env: {}", names.join(", "))]
    }
}

impl<T: Host> Capability<T> for Env {
    /// WASI's own interfaces are every handler's; this one only fills the environment.
    fn add_to_linker(&self, _: &mut Linker<T>) -> wasmtime::Result<()> {
        Ok(())
    }

    fn provides(&self, _: &str, _: &str) -> bool {
        false
    }

    fn prepare(&self, grants: &Grants, _: &Shared) -> Result<Box<dyn Prepared>, GrantError> {
        let entries = grants.get::<EnvGrant>().map_or(&[][..], |g| &g.0);
        Ok(Box::new(Resolved(resolve(entries))))
    }
}

/// `NAME` passes the host's value through (skipped when unset); `NAME=value` sets it.
fn resolve(entries: &[String]) -> Vec<(String, String)> {
    entries
        .iter()
        .filter_map(|entry| match entry.split_once('=') {
            Some((k, v)) => Some((k.to_owned(), v.to_owned())),
            None => std::env::var(entry).ok().map(|v| (entry.clone(), v)),
        })
        .collect()
}

/// The environment of a component's instances, resolved once.
struct Resolved(Vec<(String, String)>);

impl Prepared for Resolved {
    fn wasi(&self, _: &InstanceContext<'_>, wasi: &mut WasiCtxBuilder) {
        wasi.envs(&self.0);
    }

    fn instance(&self, _: &InstanceContext<'_>) -> Option<Box<dyn Part>> {
        None
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
