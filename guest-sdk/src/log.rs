//! Logging through the host.
//!
//! Each line goes to the host's log, tagged there with the subscription, shard and handler
//! version. The functions take a finished message; the macros [`trace!`](crate::trace),
//! [`debug!`](crate::debug), [`info!`](crate::info), [`warn!`](crate::warn) and
//! [`error!`](crate::error) format one like [`format!`].
//!
//! Outside a shardhost host (a native unit test of a handler) the lines go to standard error.
//!
//! ```
//! use shardhost_guest::log;
//!
//! log::info("starting");
//! let id = 7;
//! shardhost_guest::warn!("shipment {id} has no address");
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};

/// The least severe level the host records, as `Level as u8`; 5 when it records none. Native
/// builds record everything.
static THRESHOLD: AtomicU8 = AtomicU8::new(0);

/// Whether the host records lines of this level now. The log functions and macros check it
/// themselves, so a line the host would drop is never formatted or sent.
pub fn enabled(level: Level) -> bool {
    level as u8 >= THRESHOLD.load(Ordering::Relaxed)
}

/// Asks the host which levels it records: on the first call and every 64th after it (the
/// answer changes only when the host's filter is reloaded), from the export adapters.
#[doc(hidden)]
pub fn refresh_threshold() {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    if CALLS.fetch_add(1, Ordering::Relaxed).is_multiple_of(64) {
        THRESHOLD.store(imp::threshold(), Ordering::Relaxed);
    }
}

/// Sends a line whatever the threshold (the panic hook: the host names it in the trap report).
#[doc(hidden)]
pub fn log_always(level: Level, message: &str) {
    imp::log(level, message);
}

/// How severe a log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the handler dealt with.
    Warn,
    /// Something failed.
    Error,
}

impl Level {
    /// The level's name in lower case.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trace => "trace",
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Writes a line to the host's log at this level.
pub fn log(level: Level, message: &str) {
    if enabled(level) {
        imp::log(level, message);
    }
}

/// Writes a line at [`Level::Trace`].
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Writes a line at [`Level::Debug`].
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Writes a line at [`Level::Info`].
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Writes a line at [`Level::Warn`].
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Writes a line at [`Level::Error`].
pub fn error(message: &str) {
    log(Level::Error, message);
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::Level;
    use crate::__private::wit::host;

    pub(super) fn log(level: Level, message: &str) {
        let level = match level {
            Level::Trace => host::Level::Trace,
            Level::Debug => host::Level::Debug,
            Level::Info => host::Level::Info,
            Level::Warn => host::Level::Warn,
            Level::Error => host::Level::Error,
        };
        host::log(level, message);
    }

    pub(super) fn threshold() -> u8 {
        match host::max_log_level() {
            Some(host::Level::Trace) => Level::Trace as u8,
            Some(host::Level::Debug) => Level::Debug as u8,
            Some(host::Level::Info) => Level::Info as u8,
            Some(host::Level::Warn) => Level::Warn as u8,
            Some(host::Level::Error) => Level::Error as u8,
            None => Level::Error as u8 + 1,
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::Level;

    pub(super) fn log(level: Level, message: &str) {
        eprintln!("[{level:>5}] {message}");
    }

    pub(super) fn threshold() -> u8 {
        0
    }
}

/// Formats a message like [`format!`] and writes it to the host's log at a [`log::Level`].
///
/// ```
/// use shardhost_guest::log::Level;
/// shardhost_guest::log!(Level::Info, "{} records", 3);
/// ```
///
/// [`log::Level`]: crate::log::Level
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {
        if $crate::log::enabled($level) {
            $crate::log::log($level, &::std::format!($($arg)+))
        }
    };
}

/// Formats a message like [`format!`] and logs it at trace level.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => {
        if $crate::log::enabled($crate::log::Level::Trace) {
            $crate::log::trace(&::std::format!($($arg)+))
        }
    };
}

/// Formats a message like [`format!`] and logs it at debug level.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => {
        if $crate::log::enabled($crate::log::Level::Debug) {
            $crate::log::debug(&::std::format!($($arg)+))
        }
    };
}

/// Formats a message like [`format!`] and logs it at info level.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => {
        if $crate::log::enabled($crate::log::Level::Info) {
            $crate::log::info(&::std::format!($($arg)+))
        }
    };
}

/// Formats a message like [`format!`] and logs it at warn level.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => {
        if $crate::log::enabled($crate::log::Level::Warn) {
            $crate::log::warn(&::std::format!($($arg)+))
        }
    };
}

/// Formats a message like [`format!`] and logs it at error level.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => {
        if $crate::log::enabled($crate::log::Level::Error) {
            $crate::log::error(&::std::format!($($arg)+))
        }
    };
}
