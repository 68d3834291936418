//! Everything a guest writes to the host's log: `host.log` lines and its stdout and stderr
//! (Python's `print` and tracebacks, `console.log`, a Rust panic message), one line at a time,
//! tagged with the handler version (the subscription and shard are the spans the call runs in),
//! cut at [`MAX_LOG_LINE`] bytes and held to the shard's [`LogBudget`] (not the instance's: a
//! fresh instance does not start it over). The last lines of stderr and the last error-level
//! line are kept for the report of a trap.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::runtime_noise::{Noise, Said};
use crate::bindings::Level;
use crate::handler::CallContext;
use crate::log_budget::{LogBudget, Take, report_dropped};
use crate::version::short_version;

/// The longest guest log line kept, in bytes; longer ones are cut (and say so).
pub const MAX_LOG_LINE: usize = 4096;
/// Lines of stderr kept for a trap report (the end of a Python traceback, say).
const STDERR_TAIL_LINES: usize = 3;

/// One instance's log: shared by its `host.log` import and its stdout and stderr streams.
#[derive(Clone)]
pub struct GuestLog(Arc<Mutex<Inner>>);

struct Inner {
    ctx: CallContext,
    version: Arc<str>,
    /// The shard's, shared with every other instance it makes.
    budget: LogBudget,
    /// Bytes of a line not ended yet, per stream (stdout, stderr).
    partial: [Vec<u8>; 2],
    /// Since the current call started: the last error-level line and the last stderr lines.
    last_error: Option<String>,
    stderr_tail: VecDeque<String>,
    /// The runtime's dying words on stderr, told from the guest's own.
    noise: Noise,
    /// This instance repeats a failed call's records to find the ones that fail (bisecting):
    /// what it logs was said by the first call, so it goes at debug.
    replaying: bool,
}

/// What a guest said about its failed call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    pub text: String,
    /// Its error line went to the log (not its stderr, not while replaying).
    pub logged: bool,
}

/// Which of the guest's output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdio {
    Stdout = 0,
    Stderr = 1,
}

impl Stdio {
    fn name(self) -> &'static str {
        match self {
            Stdio::Stdout => "stdout",
            Stdio::Stderr => "stderr",
        }
    }
}

impl GuestLog {
    pub fn new(ctx: &CallContext, version: &str) -> GuestLog {
        GuestLog(Arc::new(Mutex::new(Inner {
            ctx: ctx.clone(),
            version: Arc::from(version),
            budget: ctx.log_budget.clone(),
            partial: [Vec::new(), Vec::new()],
            last_error: None,
            stderr_tail: VecDeque::new(),
            noise: Noise::default(),
            replaying: false,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves nothing half-written that matters for a log.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A line the guest logged through `host.log`.
    pub fn line(&self, level: Level, message: &str) {
        let mut inner = self.lock();
        let kept = inner.emit(level, None, message);
        if level == Level::Error {
            inner.last_error = Some(kept);
        }
    }

    /// Bytes the guest wrote to stdout or stderr: each complete line goes to the log; a line
    /// longer than [`MAX_LOG_LINE`] goes in pieces of that length (so nothing is held long).
    pub fn write(&self, stdio: Stdio, bytes: &[u8]) {
        let mut inner = self.lock();
        let i = stdio as usize;
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            let (text, ended) = match piece.strip_suffix(b"\n") {
                Some(text) => (text, true),
                None => (piece, false),
            };
            inner.partial[i].extend_from_slice(text);
            while inner.partial[i].len() > MAX_LOG_LINE {
                let rest = inner.partial[i].split_off(MAX_LOG_LINE);
                inner.end_line(stdio);
                inner.partial[i] = rest;
            }
            if ended {
                inner.end_line(stdio);
            }
        }
    }

    /// A new call starts: forgets what the last one left for a trap report.
    pub fn start_call(&self) {
        let mut inner = self.lock();
        inner.last_error = None;
        inner.stderr_tail.clear();
        inner.noise.reset();
    }

    /// This instance's calls repeat records of a failed call (bisecting): its lines go at
    /// debug, as the first call's already went to the log.
    pub fn replaying(&self) {
        self.lock().replaying = true;
    }

    /// A call ended: lines not ended yet go to the log as they are.
    pub fn end_call(&self) {
        let mut inner = self.lock();
        for stdio in [Stdio::Stdout, Stdio::Stderr] {
            if !inner.partial[stdio as usize].is_empty() {
                inner.end_line(stdio);
            }
        }
        if let Some(said) = inner.noise.end() {
            inner.stderr(said);
        }
    }

    /// What the guest said about its failure in the current call: its last error-level line,
    /// else the last lines it wrote to stderr (joined by ` | `).
    pub fn guest_reason(&self) -> Option<Reason> {
        self.end_call();
        let inner = self.lock();
        if let Some(e) = &inner.last_error {
            return Some(Reason {
                text: e.clone(),
                logged: !inner.replaying,
            });
        }
        let tail: Vec<&str> = inner.stderr_tail.iter().map(String::as_str).collect();
        (!tail.is_empty()).then(|| Reason {
            text: tail.join(" | "),
            logged: false,
        })
    }

    /// An output stream for the guest's stdout or stderr.
    pub fn stream(&self, stdio: Stdio) -> GuestOutput {
        GuestOutput {
            log: self.clone(),
            stdio,
        }
    }
}

impl Inner {
    fn end_line(&mut self, stdio: Stdio) {
        let bytes = std::mem::take(&mut self.partial[stdio as usize]);
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        match stdio {
            Stdio::Stdout => {
                self.emit(Level::Info, Some(stdio), text);
            }
            Stdio::Stderr => {
                let said = self.noise.line(text, self.last_error.as_deref());
                for said in said {
                    self.stderr(said);
                }
            }
        }
    }

    /// A stderr line: the guest's own at warn (and kept for a trap report), the runtime's at
    /// debug.
    fn stderr(&mut self, said: Said) {
        match said {
            Said::Loud(text) => {
                let kept = self.emit(Level::Warn, Some(Stdio::Stderr), &text);
                if !kept.trim().is_empty() {
                    if self.stderr_tail.len() == STDERR_TAIL_LINES {
                        self.stderr_tail.pop_front();
                    }
                    self.stderr_tail.push_back(kept);
                }
            }
            Said::Quiet(text) => {
                self.emit(Level::Debug, Some(Stdio::Stderr), &text);
            }
        }
    }

    /// Writes one line (if the rate allows); answers it cleaned and cut, as it was or would
    /// have been written (a trap report names it even when the rate dropped it).
    fn emit(&mut self, level: Level, stdio: Option<Stdio>, message: &str) -> String {
        let (message, cut) = clean_log_line(message);
        if cut {
            self.ctx.contained("guest-log-truncated");
        }
        let handler = short_version(&self.version);
        let level = if self.replaying && level != Level::Trace {
            Level::Debug
        } else {
            level
        };
        // A line the host's log level leaves out costs the shard's budget nothing: a lane
        // chattering at debug must not silence another lane's errors.
        let written = match level {
            Level::Trace => tracing::enabled!(target: "shardhost::guest", tracing::Level::TRACE),
            Level::Debug => tracing::enabled!(target: "shardhost::guest", tracing::Level::DEBUG),
            Level::Info => tracing::enabled!(target: "shardhost::guest", tracing::Level::INFO),
            Level::Warn => tracing::enabled!(target: "shardhost::guest", tracing::Level::WARN),
            Level::Error => tracing::enabled!(target: "shardhost::guest", tracing::Level::ERROR),
        };
        if !written {
            return message;
        }
        match self.budget.take(message.len(), Instant::now()) {
            Take::Write(dropped) => report_dropped(dropped, handler),
            Take::Drop { first } => {
                if first {
                    self.ctx.contained("guest-log-rate");
                }
                return message;
            }
        }
        macro_rules! emit {
            ($lvl:ident) => {
                match stdio {
                    Some(s) => tracing::$lvl!(target: "shardhost::guest", handler, stream = s.name(), "{message}"),
                    None => tracing::$lvl!(target: "shardhost::guest", handler, "{message}"),
                }
            };
        }
        match level {
            Level::Trace => emit!(trace),
            Level::Debug => emit!(debug),
            Level::Info => emit!(info),
            Level::Warn => emit!(warn),
            Level::Error => emit!(error),
        }
        message
    }
}

/// The guest's stdout or stderr: always ready, never blocks, never fails.
pub struct GuestOutput {
    log: GuestLog,
    stdio: Stdio,
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.log.stream(self.stdio))
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.log.stream(self.stdio))
    }
}

#[async_trait::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.log.write(self.stdio, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.log.write(self.stdio, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
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
mod tests;
