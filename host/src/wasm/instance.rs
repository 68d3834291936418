//! One handler instance: a Store with the subscription's limits, the `host` imports, and the
//! typed call into the guest's `handle` export.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use wasmtime::component::{Func, Linker, ResourceTable, TypedFunc};
use wasmtime::{
    Engine, Store, StoreContextMut, StoreLimits, StoreLimitsBuilder, Trap, UpdateDeadline,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::{HandlerComponent, short_version};
use crate::config::WasiGrants;
use crate::handler::{CallContext, CallError, Handler};
use crate::record::{BatchInfo, BatchOutcome, Level, Record};

/// What the guest's calls into the host see.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    ctx: CallContext,
    version: Arc<str>,
    /// The last error-level line the guest logged during the current call (its panic message,
    /// when the SDK's panic hook ran), to name in a trap report.
    last_error: Option<String>,
    /// When the current call (or instantiation) runs out of time.
    deadline: Instant,
    max_level: Option<Level>,
    max_level_checked_at: Instant,
    /// Where the guest asked its shard to seek during the current call.
    seek: Option<String>,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

type HandleFn<'a> = TypedFunc<(&'a BatchInfo, &'a [Record]), (BatchOutcome,)>;

/// The linker every handler is instantiated with: WASI (granting only what the store's
/// `WasiCtx` grants) and the `shardhost:handler/host` imports.
pub(super) fn linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    linker.instance("shardhost:handler/types@0.1.0")?;
    let mut host = linker.instance("shardhost:handler/host@0.1.0")?;
    host.func_wrap(
        "log",
        |mut cx: StoreContextMut<'_, HostState>, (level, message): (Level, String)| {
            guest_log(cx.data_mut(), level, message);
            Ok(())
        },
    )?;
    host.func_wrap(
        "max-log-level",
        |mut cx: StoreContextMut<'_, HostState>, (): ()| Ok((cx.data_mut().max_log_level(),)),
    )?;
    host.func_wrap_async(
        "publish",
        |cx: StoreContextMut<'_, HostState>, (stream, key, data): (String, String, Vec<u8>)| {
            let publisher = cx.data().ctx.publisher.clone();
            // A publish counts against the call's timeout like guest code does.
            let deadline = cx.data().deadline;
            Box::new(async move {
                let result = match publisher {
                    Some(p) => {
                        tokio::time::timeout_at(deadline.into(), p.publish(&stream, &key, data))
                            .await
                            .unwrap_or_else(|_| {
                                Err(format!(
                                    "publish to `{stream}` did not finish within the call's timeout"
                                ))
                            })
                    }
                    None => Err(format!(
                        "publish to `{stream}` refused: this handler may not publish"
                    )),
                };
                Ok((result,))
            })
        },
    )?;
    host.func_wrap(
        "seek",
        |mut cx: StoreContextMut<'_, HostState>, (sequence_number,): (String,)| {
            let ok = !sequence_number.is_empty()
                && sequence_number.len() <= 128
                && sequence_number.bytes().all(|b| b.is_ascii_digit());
            if !ok {
                return Ok((Err::<(), String>(format!(
                    "seek: `{sequence_number}` is not a sequence number (digits only)"
                )),));
            }
            // Applied when the call returns: the rest of the batch is not settled, and reading
            // restarts at this record.
            cx.data_mut().seek = Some(sequence_number);
            Ok((Ok(()),))
        },
    )?;
    Ok(linker)
}

impl HostState {
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

fn guest_log(state: &mut HostState, level: Level, message: String) {
    let subscription = &*state.ctx.subscription;
    let shard = &*state.ctx.shard_id;
    let handler = short_version(&state.version);
    macro_rules! emit {
        ($lvl:ident) => {
            tracing::$lvl!(target: "shardhost::guest", subscription, shard, handler, "{message}")
        };
    }
    match level {
        Level::Trace => emit!(trace),
        Level::Debug => emit!(debug),
        Level::Info => emit!(info),
        Level::Warn => emit!(warn),
        Level::Error => emit!(error),
    }
    if level == Level::Error {
        state.last_error = Some(message);
    }
}

/// `NAME` passes the host's value through (skipped when unset); `NAME=value` sets it.
pub(super) fn resolve_env(wasi: &WasiGrants) -> Vec<(String, String)> {
    wasi.env
        .iter()
        .filter_map(|entry| match entry.split_once('=') {
            Some((k, v)) => Some((k.to_owned(), v.to_owned())),
            None => std::env::var(entry).ok().map(|v| (entry.clone(), v)),
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub(super) enum InstantiateError {
    /// The `handle` export does not have the world's type.
    #[error("{0}")]
    Type(String),
    #[error("{0}")]
    Other(String),
}

/// A live instance of a handler component, reused across calls until it traps.
pub struct WasmInstance {
    store: Store<HostState>,
    handle: Func,
    version: String,
    timeout: std::time::Duration,
    /// Fuel per call, when the engine meters it.
    fuel: Option<u64>,
}

impl WasmInstance {
    pub(super) async fn new(
        component: &HandlerComponent,
        ctx: &CallContext,
    ) -> Result<WasmInstance, InstantiateError> {
        let engine = component.pre.engine();
        let limits = component.limits;
        let mut wasi = WasiCtx::builder();
        wasi.envs(&component.env);
        let state = HostState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(usize::try_from(limits.memory).unwrap_or(usize::MAX))
                .trap_on_grow_failure(true)
                .build(),
            ctx: ctx.clone(),
            version: Arc::from(component.version.as_str()),
            last_error: None,
            deadline: Instant::now() + limits.timeout,
            max_level: None,
            max_level_checked_at: Instant::now(),
            seek: None,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limits);
        // At every epoch tick a running guest yields to the async runtime, and traps once its
        // call is past the deadline. Start-up code runs under the same timeout as a call.
        store.epoch_deadline_callback(|cx| {
            if Instant::now() >= cx.data().deadline {
                return Ok(UpdateDeadline::Interrupt);
            }
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        });
        store.set_epoch_deadline(1);
        let fuel = component.metered.then(|| limits.fuel.unwrap_or(u64::MAX));
        if let Some(fuel) = fuel {
            store
                .set_fuel(fuel)
                .map_err(|e| InstantiateError::Other(format!("{e:#}")))?;
        }
        let instance = component
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| InstantiateError::Other(format!("{e:#}")))?;
        let handle = instance
            .get_func(&mut store, component.export)
            .ok_or_else(|| InstantiateError::Type("`handle` is not a function".into()))?;
        handle
            .typed::<(&BatchInfo, &[Record]), (BatchOutcome,)>(&store)
            .map_err(|e| {
                InstantiateError::Type(format!(
                    "`handle` does not have the type \
                     func(info: batch-info, records: list<kinesis-record>) -> batch-outcome: {e:#}"
                ))
            })?;
        Ok(WasmInstance {
            store,
            handle,
            version: component.version.clone(),
            timeout: limits.timeout,
            fuel,
        })
    }

    fn classify(&mut self, error: wasmtime::Error) -> CallError {
        let version = self.version.clone();
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => {
                return CallError::Timeout {
                    version,
                    timeout_ms: self.timeout.as_millis() as u64,
                };
            }
            Some(Trap::OutOfFuel) => {
                return CallError::OutOfFuel {
                    version,
                    fuel: self.fuel.unwrap_or(0),
                };
            }
            _ => {}
        }
        let text = format!("{error:#}");
        if text.contains("forcing trap when growing memory") {
            return CallError::MemoryLimit {
                version,
                message: first_line(&text),
            };
        }
        let message = match self.store.data_mut().last_error.take() {
            Some(guest) => format!("{guest} ({})", first_line(&text)),
            None => first_line(&text),
        };
        CallError::Trap { version, message }
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_owned()
}

#[async_trait]
impl Handler for WasmInstance {
    fn version(&self) -> &str {
        &self.version
    }

    async fn handle(
        &mut self,
        info: &BatchInfo,
        records: &[Record],
    ) -> Result<BatchOutcome, CallError> {
        let state = self.store.data_mut();
        state.last_error = None;
        state.seek = None;
        state.deadline = Instant::now() + self.timeout;
        self.store.set_epoch_deadline(1);
        if let Some(fuel) = self.fuel
            && let Err(e) = self.store.set_fuel(fuel)
        {
            return Err(self.classify(e));
        }
        // SAFETY: `new` checked this function's type against exactly these parameter and
        // result types (`Func::typed`); the lifetimes differ per call, the types do not.
        let typed: HandleFn<'_> = unsafe { TypedFunc::new_unchecked(self.handle) };
        match typed.call_async(&mut self.store, (info, records)).await {
            Ok((answer,)) => Ok(answer),
            Err(e) => Err(self.classify(e)),
        }
    }

    fn take_seek(&mut self) -> Option<String> {
        self.store.data_mut().seek.take()
    }
}
