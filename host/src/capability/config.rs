//! The capability `config`: `[subscription.config]`, the values a handler reads by name
//! through `wasi:config/store`, each read counted (found or missing). A value that came from
//! the environment (`${VAR}`) is never shown: not by `Debug`, not by `check`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use toml::de::DeValue;
use wasmtime::component::{HasData, Linker};

use super::{Capability, GrantError, Host, InstanceContext, Part, Prepared, Shared, View};
use crate::bindings::wasi::config::store;
use crate::config::walk::{Field, Section, Walker, quote};
use crate::config::{Grant, GrantTable, Grants, TableContext};

/// The capability: `[subscription.config]` and `wasi:config/store`.
pub struct Values;

/// `[subscription.config]`: what `config::get(name)` answers, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigGrant(pub BTreeMap<String, ConfigValue>);

/// One `[subscription.config]` value.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigValue {
    pub value: String,
    /// Some of it came from the environment (`${VAR}`): never logged or shown.
    pub from_env: bool,
}

impl fmt::Debug for ConfigValue {
    /// Never the value of one that came from the environment.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.from_env {
            f.write_str("ConfigValue(<from the environment>)")
        } else {
            write!(f, "ConfigValue({:?})", self.value)
        }
    }
}

impl GrantTable for Values {
    fn keys(&self) -> &'static [&'static str] {
        &["config"]
    }

    fn read(
        &self,
        w: &mut Walker<'_>,
        sub: &Section<'_, '_>,
        _: &TableContext<'_>,
        grants: &mut Grants,
    ) {
        let values = sub.get("config").map(|f| config(w, &f)).unwrap_or_default();
        if !values.is_empty() {
            grants.insert(ConfigGrant(values));
        }
    }
}

impl Grant for ConfigGrant {
    /// Names only, and which came from the environment.
    fn describe(&self) -> Vec<String> {
        let names: Vec<_> = self
            .0
            .iter()
            .map(|(name, value)| {
                if value.from_env {
                    format!("{name} (from the environment)")
                } else {
                    name.clone()
                }
            })
            .collect();
        vec![format!("  config: {}", names.join(", "))]
    }
}

impl<T: Host> Capability<T> for Values {
    fn add_to_linker(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        store::add_to_linker::<T, ConfigData>(linker, |s| s.view::<ConfigPart>())
    }

    fn provides(&self, package: &str, version: &str) -> bool {
        package == "wasi:config/store" && version == "0.2.0-rc.1"
    }

    fn prepare(&self, grants: &Grants, _: &Shared) -> Result<Box<dyn Prepared>, GrantError> {
        let values = grants.get::<ConfigGrant>().map_or_else(BTreeMap::new, |g| {
            g.0.iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect()
        });
        Ok(Box::new(ConfigPart {
            values: Arc::new(values),
        }))
    }
}

impl Prepared for ConfigPart {
    fn instance(&self, _: &InstanceContext<'_>) -> Option<Box<dyn Part>> {
        Some(Box::new(ConfigPart {
            values: self.values.clone(),
        }))
    }
}

/// What `wasi:config/store` answers (empty without a grant).
struct ConfigPart {
    values: Arc<BTreeMap<String, String>>,
}

impl Part for ConfigPart {
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The bindings' name for a store's view of its [`ConfigPart`].
struct ConfigData;

impl HasData for ConfigData {
    type Data<'a> = View<'a, ConfigPart>;
}

impl store::Host for View<'_, ConfigPart> {
    fn get(&mut self, key: String) -> Result<Option<String>, store::Error> {
        let value = self.part.values.get(&key).cloned();
        if let Some(m) = &self.call.metrics {
            m.config_read(&self.call.subscription, value.is_some());
        }
        Ok(value)
    }

    fn get_all(&mut self) -> Result<Vec<(String, String)>, store::Error> {
        Ok(self
            .part
            .values
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
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
