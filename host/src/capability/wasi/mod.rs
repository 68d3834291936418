//! The capability `wasi`: the WASI 0.2 interfaces every handler gets (`wasi:cli`, `clocks`,
//! `filesystem`, `io`, `random`, `sockets`: what `wasmtime_wasi::p2::add_to_linker_async`
//! links), each answering from the instance's WASI context, which grants nothing by default:
//! no preopened directory, no network, no stdin. What the context holds is set by the
//! capabilities that fill it (`env.rs`: the environment; `log/`: stdout and stderr).

use wasmtime::component::Linker;

use super::{Capability, GrantError, Host, InstanceContext, Part, Prepared, Shared};
use crate::config::{GrantTable, Grants};

/// The capability: WASI 0.2 as wasmtime-wasi gives it.
pub struct Wasi;

/// The WASI packages it gives, at any `0.2.x`.
const PACKAGES: [&str; 6] = ["cli", "clocks", "filesystem", "io", "random", "sockets"];

/// None: `[subscription.wasi]` is `env.rs`'s.
impl GrantTable for Wasi {}

impl<T: Host> Capability<T> for Wasi {
    fn add_to_linker(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        wasmtime_wasi::p2::add_to_linker_async(linker)
    }

    fn provides(&self, package: &str, version: &str) -> bool {
        let Some((namespace, _interface)) = package.split_once('/') else {
            return false;
        };
        namespace
            .strip_prefix("wasi:")
            .is_some_and(|p| PACKAGES.contains(&p))
            && version.starts_with("0.2.")
    }

    fn prepare(&self, _: &Grants, _: &Shared) -> Result<Box<dyn Prepared>, GrantError> {
        Ok(Box::new(Ready))
    }
}

/// Nothing per component: the context is the instance's.
struct Ready;

impl Prepared for Ready {
    fn instance(&self, _: &InstanceContext<'_>) -> Option<Box<dyn Part>> {
        None
    }
}
