//! Hooks for the behaviour tests (`tests/all`) and the benchmarks: internals they build on or
//! look into, not part of the library's interface.

pub use crate::allocator::release_large_buffers;
pub use crate::aws::http_client;
pub use crate::coordinator::{Coordinator, LeaseSettings};
pub use crate::dispatch::{InFlight, SubscriptionPlan};
pub use crate::fleet::{Fleet, Sign};
pub use crate::source::memory::{MemoryStreams, hash_key};
pub use crate::version::version_of;
pub use crate::wasm::Runtime;

/// Retry copies and dead letters as they are written.
pub mod envelope {
    pub use crate::envelope::{EnvelopeKey, EnvelopeKeys, Header, Kind, Origin, unwrap, wrap};
}

/// The Kinesis calls the shard readers make, as a trait a simulated stream implements, and the
/// real polling and fan-out readers opened over it.
pub mod kinesis_api {
    pub use crate::source::kinesis::api::{
        ApiError, ApiErrorKind, GotRecords, IteratorAt, KinesisApi, ShardEvent, ShardEvents,
    };
    pub use crate::source::kinesis::{open_fan_out, open_polling};
}
