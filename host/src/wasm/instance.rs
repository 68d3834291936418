//! One handler instance: a Store with the subscription's limits, the `host` imports, and the
//! typed call into the guest's `handle` export.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use wasmtime::component::{Func, Linker, ResourceTable, TypedFunc};
use wasmtime::{Engine, Store, StoreContextMut, Trap, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::limits::{InstanceLimiter, MAX_HOST_RESOURCES};
use super::{HandlerComponent, short_version};
use crate::config::WasiGrants;
use crate::handler::{CallContext, CallError, Handler};
use crate::record::{BatchInfo, BatchOutcome, Level, Record};

/// What the guest's calls into the host see.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: InstanceLimiter,
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
    log_budget: LogBudget,
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
            // Only back to what this reader delivered: a seek anywhere else would read records
            // this reader never had, or none at all, over and over.
            if let Some(delivered) = &cx.data().ctx.delivered
                && let Err(why) = delivered.check(&sequence_number)
            {
                cx.data().ctx.contained("seek-refused");
                return Ok((Err::<(), String>(format!(
                    "seek: {sequence_number} refused: {why}"
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
    let now = Instant::now();
    let dropped = match state.log_budget.take(now) {
        Ok(dropped) => dropped,
        Err(first_drop) => {
            if first_drop {
                state.ctx.contained("guest-log-rate");
            }
            return;
        }
    };
    let subscription = &*state.ctx.subscription;
    let shard = &*state.ctx.shard_id;
    let handler = short_version(&state.version);
    if dropped > 0 {
        tracing::warn!(
            target: "shardhost::guest", subscription, shard, handler, dropped,
            "{dropped} log lines of this handler instance were dropped: more than {LOG_LINES_PER_SECOND} a second"
        );
    }
    let (message, cut) = clean_log_line(&message);
    if cut {
        state.ctx.contained("guest-log-truncated");
    }
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

/// The longest guest log line kept, in bytes; longer ones are cut (and say so).
pub const MAX_LOG_LINE: usize = 4096;
/// Guest log lines one instance may write per second (on average; bursts of
/// [`LOG_BURST`] lines are let through).
pub const LOG_LINES_PER_SECOND: u32 = 1000;
const LOG_BURST: u32 = 2000;

/// A token bucket for one instance's log lines.
#[derive(Debug)]
struct LogBudget {
    tokens: f64,
    at: Instant,
    dropped: u64,
}

impl LogBudget {
    fn new() -> Self {
        LogBudget {
            tokens: f64::from(LOG_BURST),
            at: Instant::now(),
            dropped: 0,
        }
    }

    /// `Ok(lines dropped since the last line let through)`, or `Err(first drop of a run)`.
    fn take(&mut self, now: Instant) -> Result<u64, bool> {
        let refill = now.duration_since(self.at).as_secs_f64() * f64::from(LOG_LINES_PER_SECOND);
        self.tokens = (self.tokens + refill).min(f64::from(LOG_BURST));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(std::mem::take(&mut self.dropped))
        } else {
            self.dropped += 1;
            Err(self.dropped == 1)
        }
    }
}

/// A guest's log line as the host writes it: control characters (CR and LF among them, which
/// would forge host log lines) escaped, and cut at [`MAX_LOG_LINE`] bytes. Answers whether it
/// was cut.
fn clean_log_line(message: &str) -> (String, bool) {
    let mut out = String::with_capacity(message.len().min(MAX_LOG_LINE + 32));
    let mut cut = false;
    for c in message.chars() {
        if out.len() >= MAX_LOG_LINE {
            cut = true;
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if cut {
        out.push_str(&format!(" … [cut: {} bytes in all]", message.len()));
    }
    (out, cut)
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
    ticker: Arc<super::Ticker>,
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
            table: {
                let mut table = ResourceTable::new();
                table.set_max_capacity(MAX_HOST_RESOURCES);
                table
            },
            limits: InstanceLimiter::new(limits.memory),
            ctx: ctx.clone(),
            version: Arc::from(component.version.as_str()),
            last_error: None,
            deadline: Instant::now() + limits.timeout,
            max_level: None,
            max_level_checked_at: Instant::now(),
            seek: None,
            log_budget: LogBudget::new(),
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
        // Start-up code may wait on the host (a WASI clock, a stream) where no epoch tick
        // reaches it: the host bounds the whole instantiation by the timeout too.
        let deadline = store.data().deadline;
        let _busy = component.ticker.busy();
        let instance = match tokio::time::timeout_at(
            deadline.into(),
            component.pre.instantiate_async(&mut store),
        )
        .await
        {
            Ok(result) => result.map_err(|e| InstantiateError::Other(format!("{e:#}")))?,
            Err(_) => {
                return Err(InstantiateError::Other(format!(
                    "start-up ran past the timeout of {} ms",
                    limits.timeout.as_millis()
                )));
            }
        };
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
            ticker: component.ticker.clone(),
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
        if let Some(denied) = self.store.data().limits.denied() {
            return CallError::MemoryLimit {
                version,
                message: denied.to_owned(),
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
        let deadline = self.store.data().deadline;
        // The epoch deadline stops guest code; a guest that waits on the host (a WASI clock, a
        // publish, a stream) runs no guest code, so the host bounds the whole call as well.
        // Dropping the call leaves the store unusable: the caller throws the instance away.
        // Most calls finish in their first poll: only one that has to wait gets a timer.
        let done = {
            let _busy = self.ticker.busy();
            let mut call = std::pin::pin!(typed.call_async(&mut self.store, (info, records)));
            match crate::handler::poll_once(call.as_mut()).await {
                Some(done) => Ok(done),
                None => tokio::time::timeout_at(deadline.into(), call).await,
            }
        };
        match done {
            Ok(Ok((answer,))) => Ok(answer),
            Ok(Err(e)) => Err(self.classify(e)),
            Err(_) => Err(CallError::Timeout {
                version: self.version.clone(),
                timeout_ms: self.timeout.as_millis() as u64,
            }),
        }
    }

    fn take_seek(&mut self) -> Option<String> {
        self.store.data_mut().seek.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_cannot_forge_host_lines_or_grow_without_bound() {
        let (line, cut) = clean_log_line("ok\r\n2026-12-03 INFO forged\u{1b}[31m");
        assert!(!cut);
        assert!(!line.contains(['\r', '\n', '\u{1b}']), "{line}");
        assert!(line.contains("\\r\\n2026-12-03"), "{line}");
        let (line, cut) = clean_log_line(&"x".repeat(100_000));
        assert!(cut);
        assert!(line.len() < MAX_LOG_LINE + 64, "{}", line.len());
        assert!(line.ends_with("[cut: 100000 bytes in all]"));
    }

    #[test]
    fn log_lines_past_the_rate_are_dropped_and_counted() {
        let mut budget = LogBudget::new();
        let t = budget.at;
        let let_through = (0..5000).filter(|_| budget.take(t).is_ok()).count();
        assert_eq!(let_through, LOG_BURST as usize);
        // A second later, a second's worth more; the first says how many were dropped.
        let later = t + std::time::Duration::from_secs(1);
        assert_eq!(budget.take(later), Ok(5000 - u64::from(LOG_BURST)));
    }
}
