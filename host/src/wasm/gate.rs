//! The import gate: what the host gives handlers, and which of it a subscription grants. A
//! component importing what no one gives is refused (named); one importing what a capability
//! gives only with a grant its subscription lacks is refused too, every missing grant named at
//! once.

use wasmtime::Engine;
use wasmtime::component::Component;

use super::imports::{Granted, HostState};
use super::{LoadError, Runtime};
use crate::capability;
use crate::config::WasiGrants;

/// A grant a component needs and its subscription does not give: what it imports and what to
/// add (each capability words its own).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotGranted(pub String);

impl Runtime {
    /// What instances of `component` get from `wasi`, each capability's grant resolved; refuses
    /// a component that imports what a capability gives where the subscription does not grant
    /// it (`wasi:http` where no HTTP is granted, state where no state is).
    pub(super) fn granted(
        &self,
        name: &str,
        component: &Component,
        wasi: &WasiGrants,
    ) -> Result<Granted, LoadError> {
        let imports: Vec<String> = component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let capabilities = capability::all::<HostState>();
        let missing: Vec<NotGranted> = capabilities
            .iter()
            .filter_map(|c| c.refusal(&imports, wasi))
            .map(NotGranted)
            .collect();
        if !missing.is_empty() {
            return Err(LoadError::NotGranted {
                name: name.to_owned(),
                missing,
            });
        }
        capabilities
            .iter()
            .map(|c| c.prepare(wasi, &self.shared))
            .collect::<Result<Granted, _>>()
            .map_err(|source| LoadError::Grant {
                name: name.to_owned(),
                source,
            })
    }
}

/// The interfaces the host's linker gives handlers: the `types` interface, and what the
/// capabilities give (WASI 0.2, the `host` interface, and what is used only where granted:
/// [`Runtime::granted`]).
pub(super) fn provided(import: &str) -> bool {
    let (package, version) = import.split_once('@').unwrap_or((import, ""));
    let types =
        package == "shardhost:handler/types" && matches!(version, "0.1.0" | "0.1.1" | "0.1.2");
    types
        || capability::all::<HostState>()
            .iter()
            .any(|c| c.provides(package, version))
}

/// The component's imports the host does not give.
pub(super) fn not_provided(engine: &Engine, component: &Component) -> Vec<String> {
    let ty = component.component_type();
    ty.imports(engine)
        .map(|(name, _)| name)
        .filter(|name| !provided(name))
        .map(str::to_owned)
        .collect()
}

pub(super) use crate::capability::list;

/// How to build without what the host does not give, where we know.
pub(super) fn hint(imports: &[String]) -> &'static str {
    if imports
        .iter()
        .any(|i| i.starts_with("wasi:http/incoming-handler"))
    {
        "; a handler serves no HTTP: build a JavaScript handler with componentize-js's \
         `--disable fetch-event` (jco componentize: `-d fetch-event`)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests;
