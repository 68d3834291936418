//! What a guest reaches through the host: the store's data ([`HostState`]), every
//! capability's part of it (`capability/`: what a capability's host calls reach through
//! [`capability::Host::view`]).

use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::limits::{InstanceLimiter, MAX_HOST_RESOURCES, MemoryBudget};
use crate::capability::log::GuestLog;
use crate::capability::{self, InstanceContext, Part, Parts, Prepared, View};
use crate::handler::CallContext;

/// What the guest's calls into the host see.
pub struct HostState {
    wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limits: InstanceLimiter,
    pub(super) ctx: CallContext,
    /// Its `host.log` lines, stdout and stderr, and what they said about a failure.
    pub(super) log: GuestLog,
    /// When the current call (or instantiation) runs out of time.
    pub(super) deadline: Instant,
    /// Every capability's part of the instance.
    parts: Parts,
}

/// What an instance is granted besides computing: each capability's grant, resolved once per
/// component (`Capability::prepare`), in the registry's order.
pub(super) type Granted = Vec<Box<dyn Prepared>>;

impl HostState {
    /// The state of a new instance: WASI granting what the capabilities put in its context
    /// (the environment, stdout and stderr) and nothing else, a memory budget of `memory`
    /// bytes, and start-up bounded by `deadline`.
    pub(super) fn new(
        ctx: &CallContext,
        version: &str,
        granted: &Granted,
        memory: u64,
        deadline: Instant,
    ) -> HostState {
        let log = GuestLog::new(ctx, version);
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HOST_RESOURCES);
        let memory = MemoryBudget::new(memory);
        let cx = InstanceContext {
            call: ctx,
            deadline,
            memory: &memory,
            log: &log,
        };
        let mut wasi = WasiCtx::builder();
        granted.iter().for_each(|g| g.wasi(&cx, &mut wasi));
        let mut parts = Parts::default();
        granted
            .iter()
            .filter_map(|g| g.instance(&cx))
            .for_each(|p| parts.push(p));
        HostState {
            wasi: wasi.build(),
            table,
            limits: InstanceLimiter::new(memory.clone()),
            ctx: ctx.clone(),
            log,
            deadline,
            parts,
        }
    }

    /// Drops the response bodies the guest has not read: at the end of every call, and before
    /// the first (what start-up code asked for).
    pub(super) fn drop_unread_responses(&mut self) {
        self.parts.end_call();
    }
}

impl capability::Host for HostState {
    fn view<P: Part>(&mut self) -> View<'_, P> {
        View {
            part: self.parts.get_mut::<P>(),
            table: &mut self.table,
            call: &self.ctx,
            deadline: self.deadline,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
