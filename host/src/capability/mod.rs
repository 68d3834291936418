//! What a handler may reach beyond computing, one room per capability: `wasi/` (WASI 0.2:
//! clocks, random and the rest, granting nothing), `env.rs` (environment variables,
//! `[subscription.wasi]`), `log/` (`host.log`, stdout and stderr), `publish/` (`publish` and
//! `seek`), `http/` (outbound HTTP), `config.rs` (values read by name), `state/`
//! (`wasi:keyvalue`). Each owns its grant type, the reading of its table of a
//! `[[subscription]]` (config's [`GrantTable`]; none for those every handler has), its host
//! implementation, what it reports to the metrics and what it does on trial (a version under
//! `replay`, a shadow or a check: `effects`). `log/` and `publish/` each add their functions
//! to the one `shardhost:handler/host` interface.
//!
//! A capability is a [`Capability`]: the runtime adds every registered one to its linker,
//! refuses a component that imports what a capability gives without its grant, resolves each
//! grant once per component ([`Prepared`]) and gives every instance each capability's
//! [`Part`]. `registry.rs` lists them: adding one is a folder and a line there.

pub mod config;
pub mod env;
pub mod http;
pub mod log;
pub mod publish;
mod registry;
mod shared;
pub mod state;
pub mod wasi;

use std::any::Any;
use std::time::Instant;

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtxBuilder, WasiView};

use crate::config::{GrantTable, Grants};
use crate::handler::CallContext;
use crate::memory::MemoryBudget;
pub(crate) use registry::all;
pub use shared::Shared;

/// One capability, for a store whose data is `T` (the runtime's `HostState`).
pub(crate) trait Capability<T: Host>: GrantTable {
    /// Adds the interfaces it gives to the linker; every instance reaches its [`Part`] through
    /// [`Host::view`].
    fn add_to_linker(&self, linker: &mut Linker<T>) -> wasmtime::Result<()>;
    /// Whether it gives the import `package` (`wasi:http/types`) at `version` (`0.2.3`).
    fn provides(&self, package: &str, version: &str) -> bool;
    /// Why a component importing `imports` (its whole list) is refused under `grants`: it
    /// imports what this capability gives only with a grant, and there is none. The message
    /// follows "{component}: " (or "; and it ").
    fn refusal(&self, imports: &[String], grants: &Grants) -> Option<String> {
        let _ = (imports, grants);
        None
    }
    /// Resolves its grant in `grants` (if any) once per component: what each of its instances
    /// is made with. `shared` holds what the runtime's components share (a TLS client per
    /// grant, a store per table).
    fn prepare(&self, grants: &Grants, shared: &Shared) -> Result<Box<dyn Prepared>, GrantError>;
}

/// A grant that cannot be made ready (its CA file does not parse): the component is refused.
pub type GrantError = Box<dyn std::error::Error + Send + Sync>;

/// A capability's grant, resolved for the instances of one component.
pub trait Prepared: Send + Sync {
    /// Sets what it gives through the instance's WASI context (environment variables,
    /// stdout and stderr).
    fn wasi(&self, cx: &InstanceContext<'_>, wasi: &mut WasiCtxBuilder) {
        let _ = (cx, wasi);
    }
    /// The part of one new instance; on trial (`cx.call.effects`), wrapped so that what it
    /// does to the world is recorded, not done. `None`: it keeps nothing per instance.
    fn instance(&self, cx: &InstanceContext<'_>) -> Option<Box<dyn Part>>;
}

/// What a new instance is made in.
pub struct InstanceContext<'a> {
    pub call: &'a CallContext,
    /// When its start-up runs out of time.
    pub deadline: Instant,
    /// Its `limits.memory`, which what the host holds for it counts against too.
    pub memory: &'a std::sync::Arc<MemoryBudget>,
    /// Where its `host.log` lines, stdout and stderr go.
    pub log: &'a log::GuestLog,
}

/// What one instance keeps for one capability.
pub trait Part: Any + Send {
    /// A call (or the instantiation) ended: drop what it may not keep (unread response bodies).
    fn end_call(&mut self) {}
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Every capability's part of one instance.
#[derive(Default)]
pub struct Parts(Vec<Box<dyn Part>>);

impl Parts {
    pub fn push(&mut self, part: Box<dyn Part>) {
        self.0.push(part);
    }

    /// The part of type `P`. Every registered capability's part is in every instance.
    pub fn get_mut<P: Part>(&mut self) -> &mut P {
        self.0
            .iter_mut()
            .find_map(|p| p.as_any_mut().downcast_mut::<P>())
            .expect("every capability's part is made with its instance")
    }

    pub fn end_call(&mut self) {
        self.0.iter_mut().for_each(|p| p.end_call());
    }
}

/// The store's data as a capability's host calls reach it; WASI's interfaces reach its WASI
/// context (`wasi/`).
pub trait Host: WasiView + Send + 'static {
    fn view<P: Part>(&mut self) -> View<'_, P>;
}

/// One capability's view of an instance's store: its part, the resource table every
/// interface shares, the call, and when the current call runs out of time.
pub struct View<'a, P> {
    pub part: &'a mut P,
    pub table: &'a mut ResourceTable,
    pub call: &'a CallContext,
    pub deadline: Instant,
}

/// Imports as a message lists them: `` `a`, `b` ``.
pub fn list(imports: &[String]) -> String {
    imports
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The imports in `imports` that start with one of `prefixes`.
pub(crate) fn imports_of(imports: &[String], prefixes: &[&str]) -> Vec<String> {
    imports
        .iter()
        .filter(|name| prefixes.iter().any(|p| name.starts_with(p)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
