//! State that outlives a call: a key-value store the host keeps for the subscription, through
//! `wasi:keyvalue` (store, atomics, batch) and shardhost's own conditional writes.
//!
//! The subscription must grant it (`[subscription.state]` in `shardhost.toml`); a component
//! that uses this module imports `wasi:keyvalue`, and the host refuses to run it for a
//! subscription without the grant. A handler that never calls into this module imports none of
//! it.
//!
//! - **Keys** are text of at most [`MAX_KEY_BYTES`] (1 KiB); **values** bytes of at most
//!   [`MAX_VALUE_BYTES`] (350 KiB). The host keys them by service and subscription: two
//!   subscriptions never see each other's state.
//! - **Buckets**: the module's functions use the bucket [`DEFAULT_BUCKET`] (`default`), which
//!   every grant includes; [`bucket`] names another one, which the grant must list
//!   (`buckets = [...]`), else its operations fail with [`Error::AccessDenied`]. The same key
//!   in two buckets is two values.
//! - **Counters**: [`increment`] adds to a counter, starting from 0, atomically in the store.
//!   [`get`] reads a counter as its decimal text (`b"6"`); incrementing a key that [`set`]
//!   wrote fails with [`Error::Other`].
//! - **Conditional writes**: [`set_if_absent`] and [`compare_and_set`] are single atomic steps
//!   in the store; `false` means the condition did not hold and nothing was written.
//! - **Batches**: [`get_many`], [`set_many`] and [`delete_many`] take one round trip for many
//!   keys, but are not atomic: a failed batch may have written some of its keys.
//! - **Expiry**: items expire after the grant's `ttl`, when it has one.
//! - **Errors are answers, never traps**: a key or value too large, a store that is down or
//!   throttling, a bucket not granted all come back as an [`Error`]. Answer such a record with
//!   [`Outcome::RetryAfter`](crate::Outcome::RetryAfter) (or `Retry`), not a panic.
//!
//! Buckets are opened on first use and kept open for the instance's life (instances are
//! reused across calls).
//!
//! ```
//! use shardhost_guest::{Outcome, Record, state};
//!
//! fn count(record: &Record) -> Outcome {
//!     let key = format!("seen:{}", record.partition_key());
//!     match state::increment(&key, 1) {
//!         Ok(n) => {
//!             shardhost_guest::info!("{key} seen {n} times");
//!             Outcome::Ack
//!         }
//!         Err(e) => {
//!             shardhost_guest::warn!("state unavailable ({e}): again in 1 s");
//!             Outcome::RetryAfter(1000)
//!         }
//!     }
//! }
//! # state::testing::clear();
//! # assert_eq!(count(&Record::new("k", "1", "")), Outcome::Ack);
//! # assert_eq!(state::get("seen:k").unwrap().as_deref(), Some(&b"1"[..]));
//! ```
//!
//! # Once
//!
//! Delivery is at-least-once: a record can come back after a crash, a lost lease or a failed
//! call. [`once`] runs a side effect at most once *per key that it managed to mark*:
//!
//! ```
//! use shardhost_guest::{Outcome, state};
//!
//! # fn book(_id: u64) -> Result<(), state::Error> { Ok(()) }
//! # state::testing::clear();
//! let id = 42;
//! match state::once(&format!("booked:{id}"), || book(id)) {
//!     Ok(true) => { /* booked now */ }
//!     Ok(false) => { /* booked before: skipped */ }
//!     Err(e) => { /* the booking or the store failed: try again later */ }
//! }
//! # assert_eq!(state::once("booked:42", || book(42)), Ok(false));
//! ```
//!
//! It reads the key: when it holds a value, the effect is done and `once` answers
//! `Ok(false)` without running it. Otherwise it runs the effect, and only when the effect
//! succeeds does it mark the key done ([`set_if_absent`] of [`DONE_MARK`]) and answer
//! `Ok(true)`. A failed effect leaves the key unmarked, so the next delivery tries it again.
//!
//! What it cannot promise:
//!
//! - **The window between the effect and its mark**: a crash (or a trap, a timeout) after the
//!   effect and before the mark, or a mark the store refuses, means the effect runs again when
//!   the record comes back. When the mark fails `once` answers that error: the effect ran.
//! - **Two instances racing**: two instances that read the key before either marked it both
//!   run the effect. The second to mark finds the key marked; `once` then logs a warning that
//!   the effect may have run twice, and still answers `Ok(true)`.
//!
//! Both are closed by the other side: send it an idempotency key (for an HTTP API, the header
//! `Idempotency-Key` with the state key), so a repeat of the same effect is recognised there.
//! `once` then saves the repeat's round trip in the common case, and the idempotency key makes
//! the rare repeat harmless.
//!
//! The mark is written *after* the effect, not before: a scheme that claims the key first and
//! then runs the effect would lose the effect for good when the instance dies between the two
//! (the key says done, the effect never happened). Running twice, which the idempotency key
//! absorbs, is the better failure than never running.
//!
//! # Unit tests
//!
//! Natively (a `cargo test` of the handler crate) the store is in memory, one per thread (each
//! test runs on its own thread, so tests do not see each other's state), with the host's rules:
//! counters as decimal text, conditional writes, the key and value limits. Every bucket is
//! granted. [`testing`] empties it, restricts the buckets and makes operations fail.

mod bucket;
mod contract;
#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
mod wasi;

use bucket::DEFAULT;
pub use bucket::{Bucket, bucket};
pub use contract::{DEFAULT_BUCKET, DONE_MARK, Error, MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// What the store offers unit tests (native builds only).
#[cfg(not(target_arch = "wasm32"))]
pub mod testing {
    pub use super::native::{clear, fail_with, grant_only};
}

/// [`Bucket::get`] on the default bucket: the value of `key`, or `None`.
///
/// # Errors
///
/// See [`Error`].
pub fn get(key: &str) -> Result<Option<Vec<u8>>, Error> {
    DEFAULT.get(key)
}

/// [`Bucket::set`] on the default bucket.
///
/// # Errors
///
/// See [`Error`].
pub fn set(key: &str, value: impl AsRef<[u8]>) -> Result<(), Error> {
    DEFAULT.set(key, value)
}

/// [`Bucket::delete`] on the default bucket.
///
/// # Errors
///
/// See [`Error`].
pub fn delete(key: &str) -> Result<(), Error> {
    DEFAULT.delete(key)
}

/// [`Bucket::exists`] on the default bucket.
///
/// # Errors
///
/// See [`Error`].
pub fn exists(key: &str) -> Result<bool, Error> {
    DEFAULT.exists(key)
}

/// [`Bucket::increment`] on the default bucket: the counter's new value.
///
/// # Errors
///
/// See [`Error`].
pub fn increment(key: &str, delta: u64) -> Result<u64, Error> {
    DEFAULT.increment(key, delta)
}

/// [`Bucket::set_if_absent`] on the default bucket: whether it wrote.
///
/// # Errors
///
/// See [`Error`].
pub fn set_if_absent(key: &str, value: impl AsRef<[u8]>) -> Result<bool, Error> {
    DEFAULT.set_if_absent(key, value)
}

/// [`Bucket::compare_and_set`] on the default bucket: whether it wrote.
///
/// # Errors
///
/// See [`Error`].
pub fn compare_and_set(
    key: &str,
    expected: impl AsRef<[u8]>,
    value: impl AsRef<[u8]>,
) -> Result<bool, Error> {
    DEFAULT.compare_and_set(key, expected, value)
}

/// [`Bucket::get_many`] on the default bucket: the values in the order of `keys`.
///
/// # Errors
///
/// See [`Error`].
pub fn get_many(keys: &[impl AsRef<str>]) -> Result<Vec<Option<Vec<u8>>>, Error> {
    DEFAULT.get_many(keys)
}

/// [`Bucket::set_many`] on the default bucket.
///
/// # Errors
///
/// See [`Error`].
pub fn set_many<K, V>(entries: impl IntoIterator<Item = (K, V)>) -> Result<(), Error>
where
    K: AsRef<str>,
    V: AsRef<[u8]>,
{
    DEFAULT.set_many(entries)
}

/// [`Bucket::delete_many`] on the default bucket.
///
/// # Errors
///
/// See [`Error`].
pub fn delete_many<K: AsRef<str>>(keys: impl IntoIterator<Item = K>) -> Result<(), Error> {
    DEFAULT.delete_many(keys)
}

/// [`Bucket::once`] on the default bucket: runs `effect` unless `key` is marked done, and
/// marks it when the effect succeeds. See [the module's docs](self#once).
///
/// # Errors
///
/// See [`Bucket::once`].
pub fn once<E: From<Error>>(key: &str, effect: impl FnOnce() -> Result<(), E>) -> Result<bool, E> {
    DEFAULT.once(key, effect)
}

#[cfg(test)]
mod tests;
