//! What the store and its callers agree on: the bucket every grant opens, the limits of keys and
//! values, the mark of [`once`](super::once), and the errors.

use std::fmt;

/// The bucket the module's functions use. Every `[subscription.state]` grant includes it.
pub const DEFAULT_BUCKET: &str = "default";

/// The longest key the host takes, in bytes (of its UTF-8).
pub const MAX_KEY_BYTES: usize = 1024;

/// The largest value the host takes, in bytes.
pub const MAX_VALUE_BYTES: usize = 350 * 1024;

/// The value [`once`](super::once) marks a key done with. Any value under the key counts as done.
pub const DONE_MARK: &[u8] = b"done";

/// Why a state operation failed: the `wasi:keyvalue` error the host answered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// The host has no such store.
    NoSuchStore,
    /// The bucket is not granted to this subscription (not in `[subscription.state] buckets`).
    AccessDenied,
    /// Anything else, in the host's words: a key or value too large, the store unreachable or
    /// throttled, an increment of a key that holds a value `set` wrote.
    Other(String),
}

impl Error {
    /// The error's case as the WIT names it: `no-such-store`, `access-denied` or `other`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::NoSuchStore => "no-such-store",
            Error::AccessDenied => "access-denied",
            Error::Other(_) => "other",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoSuchStore => f.write_str(
                "no such store: the host has no key-value store for this subscription \
                 (see the host's log)",
            ),
            Error::AccessDenied => f.write_str(
                "access denied by the host: the bucket is not granted to this subscription \
                 ([subscription.state] buckets; see the host's log)",
            ),
            Error::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}
