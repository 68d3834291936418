//! Write shardhost handlers in Rust: one function and one macro line.
//!
//! A handler is a WebAssembly component that shardhost calls with batches of Kinesis records,
//! and that answers with an [`Outcome`] per record: [`Ack`](Outcome::Ack) and
//! [`Drop`](Outcome::Drop) settle a record and let the shard's checkpoint move past it;
//! [`Retry`](Outcome::Retry) and [`RetryAfter`](Outcome::RetryAfter) leave it unhandled (held,
//! or published again under the subscription's retry cap).
//!
//! # The handler crate
//!
//! ```toml
//! [package]
//! name = "shipping"
//! version = "0.1.0"
//! edition = "2024"
//!
//! [lib]
//! crate-type = ["cdylib"]
//! name = "ship"            # the output is ship.wasm
//!
//! [dependencies]
//! shardhost-guest = { path = "../guest-sdk" }   # or a version, once published
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2`; the output,
//! `target/wasm32-wasip2/release/ship.wasm`, is already a component.
//!
//! # One function per record
//!
//! ```no_run
//! use shardhost_guest::serde::Deserialize;
//! use shardhost_guest::{Outcome, Record};
//!
//! const CARRIERS: [&str; 2] = ["dhl", "ups"];
//!
//! #[derive(Deserialize)]
//! #[serde(crate = "shardhost_guest::serde")] // the derive finds serde through the SDK
//! struct Shipment {
//!     id: u64,
//!     address: String,
//!     carrier: String,
//! }
//!
//! fn ship(record: &Record) -> Outcome {
//!     let shipment = match record.json::<Shipment>() {
//!         Ok(s) => s,
//!         Err(e) => {
//!             shardhost_guest::warn!("record {} is not a shipment: {e}", record.sequence_number());
//!             return Outcome::Drop;
//!         }
//!     };
//!     if !CARRIERS.contains(&shipment.carrier.as_str()) {
//!         shardhost_guest::warn!("shipment {}: unknown carrier, held", shipment.id);
//!         return Outcome::Retry;
//!     }
//!     shardhost_guest::info!("shipment {} booked to {}", shipment.id, shipment.address);
//!     Outcome::Ack
//! }
//!
//! shardhost_guest::handler!(ship);
//! ```
//!
//! The handler is called once per record, in shard order, and the outcomes go back to the
//! host in the same order.
//!
//! # One function per batch
//!
//! ```no_run
//! use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};
//!
//! fn count(info: &BatchInfo, records: &[Record]) -> BatchOutcome {
//!     shardhost_guest::debug!("{} records from {}", records.len(), info.shard_id());
//!     if records.iter().any(|r| r.data().is_empty()) {
//!         // one outcome per record, in order
//!         return records
//!             .iter()
//!             .map(|r| if r.data().is_empty() { Outcome::Drop } else { Outcome::Ack })
//!             .collect();
//!     }
//!     BatchOutcome::All(Outcome::Ack) // the same outcome for every record
//! }
//!
//! shardhost_guest::batch_handler!(count);
//! ```
//!
//! # JSON
//!
//! [`Record::json`] reads by the JSON rule every shardhost SDK follows (Rust, Python and
//! JavaScript), written down in `guest-sdk/JSON.md`: serde_json's strict JSON, and in the
//! *whole* document, fields the type does not read included, no key twice in one object, no
//! lone surrogate escape, no number beyond a double's range and nesting at most 128 deep
//! ([`DecodeError::Rule`] otherwise). Integer fields take integer literals only, as serde does
//! (`1.0` and `1e3` are floats). So a handler refuses the same records in every language.
//!
//! # Calling the host
//!
//! - [`log`]: `trace`/`debug`/`info`/`warn`/`error` functions, and the [`trace!`], [`debug!`],
//!   [`info!`], [`warn!`], [`error!`] and [`log!`] macros that format like [`format!`].
//! - [`publish`] puts a record into a stream; [`seek`] restarts reading of the calling shard
//!   at a sequence number.
//!
//! # State
//!
//! [`state`] keeps values between calls, in a key-value store the host keeps for the
//! subscription (granted by its `[subscription.state]`): `get`, `set`, `delete`, `exists`,
//! counters (`increment`), conditional writes (`set_if_absent`, `compare_and_set`), batches
//! (`get_many`, `set_many`, `delete_many`), on the bucket `default` or on a named
//! [`state::bucket`]. Its errors are answers, never traps: answer them with
//! [`Outcome::RetryAfter`]. [`state::once`] runs a side effect once per key, marking the key
//! done after the effect succeeded (see its docs for what that can and cannot promise):
//!
//! ```
//! use shardhost_guest::{Outcome, state};
//!
//! # fn book(_id: u64) -> Result<(), state::Error> { Ok(()) }
//! fn ship(id: u64) -> Outcome {
//!     match state::once(&format!("booked:{id}"), || book(id)) {
//!         Ok(true) => Outcome::Ack,  // booked now
//!         Ok(false) => Outcome::Ack, // booked by an earlier delivery: skipped
//!         Err(e) => {
//!             shardhost_guest::warn!("shipment {id} not booked: {e}");
//!             Outcome::RetryAfter(1000)
//!         }
//!     }
//! }
//! # assert_eq!(ship(7), Outcome::Ack);
//! ```
//!
//! A handler that never calls into [`state`] does not import `wasi:keyvalue`, and needs no
//! grant. `guest-sdk/STATE.md` describes the same API in the Python and JavaScript SDKs.
//!
//! # The contract
//!
//! - **An instance is reused across calls**, so statics and caches live on between calls. Each
//!   lane of each shard has its own instance; none share memory. An instance is thrown away
//!   after any failed call (a panic or trap, a timeout, the memory or fuel limit, a wrong number
//!   of outcomes), when a stop or a lost lease ends its call, and when a new handler version is
//!   swapped in. Nothing in it survives a restart or follows a shard to another host.
//! - **Calls can be replayed**: a failed call is bisected (each half called again on a fresh
//!   instance, down to single records), and records are read again after a crash, a lost lease,
//!   a handoff or a [`seek`]. Delivery is at-least-once and so is every side effect, a
//!   [`publish`] included. **Write handlers to be idempotent**: key side effects by stream,
//!   shard and sequence number (plus [`Record::sub_sequence_number`] for KPL records).
//! - **Order** holds per shard and, with lanes, per partition key.
//! - **[`Record::attempt`]** is 1 on a record's first delivery; under the subscription's retry
//!   cap each `retry` comes back as a copy with the next attempt number, up to `max_attempts`,
//!   then goes to the dead-letter stream. A replay is not a new attempt. A call only ever holds
//!   records of one attempt.
//! - **Each call has a time and memory budget** (`limits.timeout`, 5 s by default, and
//!   `limits.memory`); past either the call fails as a trap does.
//!
//! # Panics
//!
//! A handler that panics traps: the host settles nothing from that call and handles the trap
//! by its own rules. Before the trap, the panic message and location go to the host's log at
//! error level, so the host's report names the panic.
//!
//! # Tests
//!
//! The crate also builds natively, so a handler's function can be unit-tested with
//! [`Record::new`] and [`BatchInfo::new`]. There, logging goes to standard error,
//! [`publish`] and [`seek`] answer an error, and [`state`] is an in-memory store per thread
//! with the host's rules ([`state::testing`] empties it, limits its buckets or makes it fail).

#![deny(missing_docs)]

pub mod config;
mod host;
pub mod http;
mod json_rule;
pub mod log;
mod outcome;
mod record;
pub mod state;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use host::{publish, seek};
pub use json_rule::RuleError;
pub use outcome::{BatchOutcome, Outcome};
pub use record::{BatchInfo, DecodeError, Record};

/// The `serde` crate the SDK uses, for `#[derive(Deserialize)]` without a dependency of one's
/// own: add `#[serde(crate = "shardhost_guest::serde")]` to the type.
pub use serde;
/// The `serde_json` crate the SDK uses (its error is [`DecodeError::Json`]'s).
pub use serde_json;

/// Exports a per-record handler, `fn(&Record) -> Outcome`, as the component's `handle`.
///
/// The argument is a function path or a closure. Use it once per crate (the crate is a
/// `cdylib` built for `wasm32-wasip2`), and not together with [`batch_handler!`].
///
/// ```no_run
/// use shardhost_guest::{Outcome, Record};
///
/// fn handle(record: &Record) -> Outcome {
///     if record.data().is_empty() { Outcome::Drop } else { Outcome::Ack }
/// }
///
/// shardhost_guest::handler!(handle);
/// ```
#[macro_export]
macro_rules! handler {
    ($handler:expr $(,)?) => {
        $crate::__export_handler!(|info, records| {
            $crate::__private::per_record(info, records, $handler)
        });
    };
}

/// Exports a per-batch handler, `fn(&BatchInfo, &[Record]) -> BatchOutcome`, as the
/// component's `handle`.
///
/// The argument is a function path or a closure. Use it once per crate (the crate is a
/// `cdylib` built for `wasm32-wasip2`), and not together with [`handler!`].
///
/// ```no_run
/// use shardhost_guest::{BatchInfo, BatchOutcome, Outcome, Record};
///
/// fn handle(_info: &BatchInfo, _records: &[Record]) -> BatchOutcome {
///     BatchOutcome::All(Outcome::Ack)
/// }
///
/// shardhost_guest::batch_handler!(handle);
/// ```
#[macro_export]
macro_rules! batch_handler {
    ($handler:expr $(,)?) => {
        $crate::__export_handler!(|info, records| {
            $crate::__private::per_batch(info, records, $handler)
        });
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_handler {
    (|$info:ident, $records:ident| $body:block) => {
        const _: () = {
            struct ShardhostHandler;

            impl $crate::__private::wit::Guest for ShardhostHandler {
                fn handle(
                    $info: $crate::__private::wit::BatchInfo,
                    $records: ::std::vec::Vec<$crate::__private::wit::KinesisRecord>,
                ) -> $crate::__private::wit::BatchOutcome {
                    $crate::__private::install_panic_hook();
                    $body
                }
            }

            $crate::__private::bindings::__export!(
                ShardhostHandler with_types_in $crate::__private::bindings
            );
        };
    };
}
