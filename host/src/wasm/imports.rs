//! What a guest reaches through the host: the store's data ([`HostState`]) and its
//! implementation of the generated `shardhost:handler/host` trait (`log`, `max-log-level`,
//! `publish`, `seek`), of `wasi:config/store` (the subscription's `[subscription.config]`),
//! and its view of `wasi:http` (`http/`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::wasi::config::store;
use super::bindings::{Host, Level};
use super::guest_log::{GuestLog, Stdio};
use super::http::{HttpGate, HttpHooks};
use super::limits::{InstanceLimiter, MAX_HOST_RESOURCES, MemoryBudget};
use super::state::access::StateAccess;
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
    /// What `wasi:config/store` answers.
    config: Arc<BTreeMap<String, String>>,
    http_ctx: WasiHttpCtx,
    http: HttpHooks,
    /// The subscription's state (`state/`); none: every state call is refused.
    pub(super) state: Option<StateAccess>,
    /// The deadline of the call in which a state call ran out of time: the rest of that call's
    /// state calls fail at once instead of each waiting out its timeout.
    pub(super) state_stalled: Option<Instant>,
}

/// What an instance is granted besides computing (from `[subscription.wasi]`, `.http` and
/// `.config`), resolved once per component.
#[derive(Default)]
pub(super) struct Granted {
    pub(super) env: Vec<(String, String)>,
    pub(super) config: Arc<BTreeMap<String, String>>,
    /// None: every request is denied.
    pub(super) http: Option<Arc<HttpGate>>,
    /// None: no state.
    pub(super) state: Option<StateAccess>,
}

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
        wasi.envs(&granted.env);
        wasi.stdout(log.stream(Stdio::Stdout));
        wasi.stderr(log.stream(Stdio::Stderr));
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HOST_RESOURCES);
        let memory = MemoryBudget::new(memory);
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
            config: granted.config.clone(),
            http_ctx: WasiHttpCtx::new(),
            http: HttpHooks::new(granted.http.clone(), ctx, deadline, memory),
            state: granted.state.clone().map(|state| match &ctx.effects {
                // On trial: reads see the store (with the trial's own permits), writes stay in
                // the run's overlay.
                Some(effects) => StateAccess {
                    store: effects.overlaid(state.trial_store.clone()),
                    ..state
                },
                None => state,
            }),
            state_stalled: None,
        }
    }

    /// Drops the response bodies the guest has not read: at the end of every call, and before
    /// the first (what start-up code asked for).
    pub(super) fn drop_unread_responses(&mut self) {
        self.http.end_call();
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        // Requests made from here on end by the current call's deadline.
        self.http.deadline = self.deadline;
        WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http,
        }
    }
}

impl store::Host for HostState {
    fn get(&mut self, key: String) -> Result<Option<String>, store::Error> {
        let value = self.config.get(&key).cloned();
        if let Some(m) = &self.ctx.metrics {
            m.config_read(&self.ctx.subscription, value.is_some());
        }
        Ok(value)
    }

    fn get_all(&mut self) -> Result<Vec<(String, String)>, store::Error> {
        Ok(self
            .config
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
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
