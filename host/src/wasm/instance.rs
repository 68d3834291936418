//! One handler instance: a Store with the subscription's limits, instantiated through the
//! generated `handler` world, and the generated typed call into the guest's `handle` export.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use wasmtime::component::{HasSelf, InstancePre, Linker};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

use super::imports::{Granted, HostState};
use super::ticker::Ticker;
use crate::bindings;
use crate::config::Limits;
use crate::handler::{CallContext, CallError, Handler};
use crate::record::{BatchInfo, BatchOutcome, Record};

/// The linker every handler is instantiated with: the `types` interface (types only) and every
/// registered capability's interfaces (`capability/`: WASI, `host`'s functions, and what is
/// granted, each giving only what the instance's grant allows).
pub(super) fn linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    bindings::types::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
    for capability in crate::capability::all::<HostState>() {
        capability.add_to_linker(&mut linker)?;
    }
    Ok(linker)
}

/// Why an instance could not be made.
#[derive(Debug, thiserror::Error)]
pub enum InstantiateError {
    /// Start-up code (or a wait on the host) ran past the call timeout.
    #[error("start-up ran past the timeout of {timeout_ms} ms")]
    StartTimeout { timeout_ms: u128 },
    /// Instantiation failed: a trap in start-up code, a limit, an import.
    #[error("{source:#}")]
    Start { source: wasmtime::Error },
    #[error("{source:#}")]
    Fuel { source: wasmtime::Error },
}

/// What every instance of one component is made with.
pub(super) struct InstanceSpec {
    pub(super) version: String,
    pub(super) limits: Limits,
    /// The engine meters fuel: every store needs some (unlimited unless `limits.fuel`).
    pub(super) metered: bool,
    pub(super) granted: Granted,
    /// Advances the epoch while this component's guest code runs.
    pub(super) ticker: Arc<Ticker>,
}

impl InstanceSpec {
    /// A store for one instance: the memory cap, the epoch deadline and the fuel per call.
    fn store(
        &self,
        engine: &Engine,
        ctx: &CallContext,
    ) -> Result<(Store<HostState>, Option<u64>), InstantiateError> {
        let deadline = Instant::now() + self.limits.timeout;
        let state = HostState::new(
            ctx,
            &self.version,
            &self.granted,
            self.limits.memory,
            deadline,
        );
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
        let fuel = self.metered.then(|| self.limits.fuel.unwrap_or(u64::MAX));
        if let Some(fuel) = fuel {
            store
                .set_fuel(fuel)
                .map_err(|source| InstantiateError::Fuel { source })?;
        }
        Ok((store, fuel))
    }

    /// Runs an instantiation that must finish by `deadline`. Start-up code may wait on the
    /// host (a WASI clock, a stream) where no epoch tick reaches it: the host bounds the whole
    /// instantiation by the timeout too.
    async fn start<T>(
        &self,
        deadline: Instant,
        instantiate: impl Future<Output = wasmtime::Result<T>>,
    ) -> Result<T, InstantiateError> {
        let _busy = self.ticker.busy();
        match tokio::time::timeout_at(deadline.into(), instantiate).await {
            Ok(result) => result.map_err(|source| InstantiateError::Start { source }),
            Err(_) => Err(InstantiateError::StartTimeout {
                timeout_ms: self.limits.timeout.as_millis(),
            }),
        }
    }

    /// Instantiates `pre` once under the limits, without looking at its exports: a component
    /// that cannot even start is refused for that first.
    pub(super) async fn probe(
        &self,
        pre: &InstancePre<HostState>,
        ctx: &CallContext,
    ) -> Result<(), InstantiateError> {
        let (mut store, _) = self.store(pre.engine(), ctx)?;
        let deadline = store.data().deadline;
        self.start(deadline, pre.instantiate_async(&mut store))
            .await
            .map(drop)
    }
}

/// A live instance of a handler component, reused across calls until it traps.
pub struct WasmInstance {
    store: Store<HostState>,
    exports: bindings::Handler,
    ticker: Arc<Ticker>,
    version: String,
    timeout: std::time::Duration,
    /// Fuel per call, when the engine meters it.
    fuel: Option<u64>,
}

impl WasmInstance {
    pub(super) async fn new(
        pre: &bindings::HandlerPre<HostState>,
        spec: &InstanceSpec,
        ctx: &CallContext,
    ) -> Result<WasmInstance, InstantiateError> {
        let (mut store, fuel) = spec.store(pre.engine(), ctx)?;
        let deadline = store.data().deadline;
        let exports = spec
            .start(deadline, pre.instantiate_async(&mut store))
            .await?;
        Ok(WasmInstance {
            store,
            exports,
            ticker: spec.ticker.clone(),
            version: spec.version.clone(),
            timeout: spec.limits.timeout,
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
        // The limiter, not the error's text, says whether the instance hit its memory limit.
        if let Some(denied) = self.store.data().limits.denied() {
            return CallError::MemoryLimit {
                version,
                message: denied.to_owned(),
            };
        }
        let cause = root_cause(&error);
        // The handler's own words when it said anything; the trap's text (the runtime's
        // `unreachable`, a wasm backtrace) only at debug then: it is the same on every record.
        match self.store.data().log.guest_reason() {
            Some(reason) => {
                tracing::debug!(handler = %crate::version::short_version(&version), "the trap behind the handler's failure: {cause}");
                CallError::Trap {
                    version,
                    message: reason.text,
                    said: reason.logged,
                }
            }
            None => CallError::Trap {
                version,
                message: cause,
                said: false,
            },
        }
    }
}

/// What went wrong, without the wasm backtrace wasmtime wraps a trap in: the trap itself (e.g.
/// "wasm `unreachable` instruction executed"), or the chain of a host-side error.
fn root_cause(error: &wasmtime::Error) -> String {
    if let Some(trap) = error.downcast_ref::<Trap>() {
        return trap.to_string();
    }
    let parts: Vec<String> = error
        .chain()
        .map(|e| e.to_string())
        .filter(|e| !e.starts_with("error while executing at wasm backtrace"))
        .collect();
    parts.join(": ")
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
        state.log.start_call();
        state.drop_unread_responses();
        crate::capability::publish::take_seek(state);
        state.deadline = Instant::now() + self.timeout;
        self.store.set_epoch_deadline(1);
        if let Some(fuel) = self.fuel
            && let Err(e) = self.store.set_fuel(fuel)
        {
            return Err(self.classify(e));
        }
        let deadline = self.store.data().deadline;
        // The epoch deadline stops guest code; a guest that waits on the host (a WASI clock, a
        // publish, a stream) runs no guest code, so the host bounds the whole call as well.
        // Dropping the call leaves the store unusable: the caller throws the instance away.
        // Most calls finish in their first poll: only one that has to wait gets a timer.
        let done = {
            let _busy = self.ticker.busy();
            let call = self.exports.call_handle(&mut self.store, info, records);
            let mut call = std::pin::pin!(call);
            match crate::handler::poll_once(call.as_mut()).await {
                Some(done) => Ok(done),
                None => tokio::time::timeout_at(deadline.into(), call).await,
            }
        };
        // A response the guest has not read by now is dropped: host memory it could keep
        // from call to call.
        self.store.data_mut().drop_unread_responses();
        match done {
            Ok(Ok(answer)) => {
                self.store.data().log.end_call();
                Ok(answer)
            }
            Ok(Err(e)) => Err(self.classify(e)),
            Err(_) => Err(CallError::Timeout {
                version: self.version.clone(),
                timeout_ms: self.timeout.as_millis() as u64,
            }),
        }
    }

    fn take_seek(&mut self) -> Option<String> {
        crate::capability::publish::take_seek(self.store.data_mut())
    }

    fn replaying(&mut self) {
        self.store.data().log.replaying();
    }
}
