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
    imp::log(level, message);
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
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::Level;

    pub(super) fn log(level: Level, message: &str) {
        eprintln!("[{level:>5}] {message}");
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
        $crate::log::log($level, &::std::format!($($arg)+))
    };
}

/// Formats a message like [`format!`] and logs it at trace level.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => {
        $crate::log::trace(&::std::format!($($arg)+))
    };
}

/// Formats a message like [`format!`] and logs it at debug level.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => {
        $crate::log::debug(&::std::format!($($arg)+))
    };
}

/// Formats a message like [`format!`] and logs it at info level.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => {
        $crate::log::info(&::std::format!($($arg)+))
    };
}

/// Formats a message like [`format!`] and logs it at warn level.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => {
        $crate::log::warn(&::std::format!($($arg)+))
    };
}

/// Formats a message like [`format!`] and logs it at error level.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => {
        $crate::log::error(&::std::format!($($arg)+))
    };
}
