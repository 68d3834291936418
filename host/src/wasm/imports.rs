//! What a guest reaches through the host: the store's data ([`HostState`]), every
//! capability's part of it (`capability/`: what a capability's host calls reach through
//! [`capability::Host::view`]), and its implementation of the generated
//! `shardhost:handler/host` trait (`log`, `max-log-level`, `publish`, `seek`).

use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::guest_log::{GuestLog, Stdio};
use super::limits::{InstanceLimiter, MAX_HOST_RESOURCES, MemoryBudget};
use crate::bindings::{Host, Level};
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
    max_level: Option<Level>,
    max_level_checked_at: Instant,
    /// Where the guest asked its shard to seek during the current call.
    pub(super) seek: Option<String>,
    /// Every capability's part of the instance.
    parts: Parts,
}

/// What an instance is granted besides computing: each capability's grant, resolved once per
/// component (`Capability::prepare`), in the registry's order.
pub(super) type Granted = Vec<Box<dyn Prepared>>;

impl HostState {
    /// The state of a new instance: WASI granting the environment `env` and nothing else, a
    /// memory budget of `memory` bytes, and start-up bounded by `deadline`.
    pub(super) fn new(
        ctx: &CallContext,
        version: &str,
        granted: &Granted,
        memory: u64,
        deadline: Instant,
    ) -> HostState {
        let log = GuestLog::new(ctx, version);
        let mut wasi = WasiCtx::builder();
        granted.iter().for_each(|g| g.wasi(&mut wasi));
        wasi.stdout(log.stream(Stdio::Stdout));
        wasi.stderr(log.stream(Stdio::Stderr));
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HOST_RESOURCES);
        let memory = MemoryBudget::new(memory);
        let cx = InstanceContext {
            call: ctx,
            deadline,
            memory: &memory,
        };
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
            max_level: None,
            max_level_checked_at: Instant::now(),
            seek: None,
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

impl Host for HostState {
    fn log(&mut self, level: Level, message: String) {
        self.log.line(level, &message);
    }

    /// The most detailed level the host records from guests, asked of the tracing subscriber at
    /// most once a second per instance (the answer only changes when the filter is reloaded).
    fn max_log_level(&mut self) -> Option<Level> {
        let now = Instant::now();
        if now >= self.max_level_checked_at {
            self.max_level = guest_max_level();
            self.max_level_checked_at = now + std::time::Duration::from_secs(1);
        }
        self.max_level
    }

    async fn publish(
        &mut self,
        stream: String,
        partition_key: String,
        data: Vec<u8>,
    ) -> Result<String, String> {
        let Some(publisher) = self.ctx.publisher.clone() else {
            return Err(format!(
                "publish to `{stream}` refused: this handler may not publish"
            ));
        };
        if let Some(effects) = &self.ctx.effects {
            // On trial: recorded, not put.
            publisher.check(&stream)?;
            return Ok(effects.publish(&stream, &partition_key, data.len()));
        }
        // A publish counts against the call's timeout like guest code does.
        tokio::time::timeout_at(
            self.deadline.into(),
            publisher.publish(&stream, &partition_key, data),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "publish to `{stream}` did not finish within the call's timeout"
            ))
        })
    }

    fn seek(&mut self, sequence_number: String) -> Result<(), String> {
        let ok = !sequence_number.is_empty()
            && sequence_number.len() <= 128
            && sequence_number.bytes().all(|b| b.is_ascii_digit());
        if !ok {
            return Err(format!(
                "seek: `{sequence_number}` is not a sequence number (digits only)"
            ));
        }
        // Only back to what this reader delivered: a seek anywhere else would read records
        // this reader never had, or none at all, over and over.
        if let Some(delivered) = &self.ctx.delivered
            && let Err(why) = delivered.check(&sequence_number)
        {
            self.ctx.contained("seek-refused");
            return Err(format!("seek: {sequence_number} refused: {why}"));
        }
        if let Some(effects) = &self.ctx.effects {
            // On trial: recorded; the records go on in order.
            effects.record(crate::effects::Effect::Seek { sequence_number });
            return Ok(());
        }
        // Applied when the call returns: the rest of the batch is not settled, and reading
        // restarts at this record.
        self.seek = Some(sequence_number);
        Ok(())
    }
}

fn guest_max_level() -> Option<Level> {
    macro_rules! on {
        ($lvl:ident) => {
            tracing::enabled!(target: "shardhost::guest", tracing::Level::$lvl)
        };
    }
    if on!(TRACE) {
        Some(Level::Trace)
    } else if on!(DEBUG) {
        Some(Level::Debug)
    } else if on!(INFO) {
        Some(Level::Info)
    } else if on!(WARN) {
        Some(Level::Warn)
    } else if on!(ERROR) {
        Some(Level::Error)
    } else {
        None
    }
}
