//! The capability `log`: what a guest writes to the host's log. The `host` interface's `log`
//! and `max-log-level` are here, and the instance's [`GuestLog`] (`guest_log.rs`) where those
//! lines and the guest's stdout and stderr (set in its WASI context here) go: cut, escaped
//! and held to the shard's budget of lines; the runtime reads it for a trap's report.
//! `runtime_noise.rs` tells a dying language runtime's words on stderr from the guest's own.
//! Every handler has it; it has no table.

mod guest_log;
mod runtime_noise;

use std::time::{Duration, Instant};

use wasmtime::StoreContextMut;
use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use super::{Capability, GrantError, Host, InstanceContext, Part, Prepared, Shared};
use crate::bindings::{HOST_INTERFACE, Level};
use crate::config::{GrantTable, Grants};
pub use guest_log::{GuestLog, Stdio};

/// The capability: `log` and `max-log-level` of `shardhost:handler/host`.
pub struct Log;

impl GrantTable for Log {}

impl<T: Host> Capability<T> for Log {
    fn add_to_linker(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        let mut host = linker.instance(HOST_INTERFACE)?;
        host.func_wrap(
            "log",
            |mut store: StoreContextMut<'_, T>, (level, message): (Level, String)| {
                store
                    .data_mut()
                    .view::<LogPart>()
                    .part
                    .log
                    .line(level, &message);
                Ok(())
            },
        )?;
        host.func_wrap(
            "max-log-level",
            |mut store: StoreContextMut<'_, T>, (): ()| {
                Ok((store.data_mut().view::<LogPart>().part.max_level(),))
            },
        )
    }

    fn provides(&self, package: &str, version: &str) -> bool {
        package == "shardhost:handler/host" && matches!(version, "0.1.0" | "0.1.1" | "0.1.2")
    }

    fn prepare(&self, _: &Grants, _: &Shared) -> Result<Box<dyn Prepared>, GrantError> {
        Ok(Box::new(Ready))
    }
}

/// Every component's: its instances' lines go to their own log.
struct Ready;

impl Prepared for Ready {
    /// The guest's stdout and stderr go to its log, line by line.
    fn wasi(&self, cx: &InstanceContext<'_>, wasi: &mut WasiCtxBuilder) {
        wasi.stdout(cx.log.stream(Stdio::Stdout));
        wasi.stderr(cx.log.stream(Stdio::Stderr));
    }

    fn instance(&self, cx: &InstanceContext<'_>) -> Option<Box<dyn Part>> {
        Some(Box::new(LogPart {
            log: cx.log.clone(),
            max_level: None,
            max_level_checked_at: Instant::now(),
        }))
    }
}

/// One instance's `host.log`: its log, and the level last asked of the tracing subscriber.
struct LogPart {
    log: GuestLog,
    max_level: Option<Level>,
    max_level_checked_at: Instant,
}

impl Part for LogPart {
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

impl LogPart {
    /// The most detailed level the host records from guests, asked of the tracing subscriber
    /// at most once a second per instance (the answer only changes when the filter is
    /// reloaded).
    fn max_level(&mut self) -> Option<Level> {
        let now = Instant::now();
        if now >= self.max_level_checked_at {
            self.max_level = guest_max_level();
            self.max_level_checked_at = now + Duration::from_secs(1);
        }
        self.max_level
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
