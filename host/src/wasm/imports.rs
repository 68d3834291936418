//! What a guest reaches through the host: the store's data ([`HostState`]) and its
//! implementation of the generated `shardhost:handler/host` trait (`log`, `max-log-level`,
//! `publish`, `seek`).

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{Host, Level};
use super::limits::{InstanceLimiter, MAX_HOST_RESOURCES};
use super::short_version;
use crate::handler::CallContext;

/// What the guest's calls into the host see.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(super) limits: InstanceLimiter,
    ctx: CallContext,
    version: Arc<str>,
    /// The last error-level line the guest logged during the current call (its panic message,
    /// when the SDK's panic hook ran), to name in a trap report.
    pub(super) last_error: Option<String>,
    /// When the current call (or instantiation) runs out of time.
    pub(super) deadline: Instant,
    max_level: Option<Level>,
    max_level_checked_at: Instant,
    /// Where the guest asked its shard to seek during the current call.
    pub(super) seek: Option<String>,
    log_budget: LogBudget,
}

impl HostState {
    /// The state of a new instance: WASI granting the environment `env` and nothing else, a
    /// memory budget of `memory` bytes, and start-up bounded by `deadline`.
    pub(super) fn new(
        ctx: &CallContext,
        version: &str,
        env: &[(String, String)],
        memory: u64,
        deadline: Instant,
    ) -> HostState {
        let mut wasi = WasiCtx::builder();
        wasi.envs(env);
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HOST_RESOURCES);
        HostState {
            wasi: wasi.build(),
            table,
            limits: InstanceLimiter::new(memory),
            ctx: ctx.clone(),
            version: Arc::from(version),
            last_error: None,
            deadline,
            max_level: None,
            max_level_checked_at: Instant::now(),
            seek: None,
            log_budget: LogBudget::new(),
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
        guest_log(self, level, message);
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
    // The subscription and shard are the spans the call runs in.
    let handler = short_version(&state.version);
    if dropped > 0 {
        tracing::warn!(
            target: "shardhost::guest", handler, dropped,
            "{dropped} log lines of this handler instance were dropped: more than {LOG_LINES_PER_SECOND} a second"
        );
    }
    let (message, cut) = clean_log_line(&message);
    if cut {
        state.ctx.contained("guest-log-truncated");
    }
    macro_rules! emit {
        ($lvl:ident) => {
            tracing::$lvl!(target: "shardhost::guest", handler, "{message}")
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
