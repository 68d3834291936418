//! Every default of `shardhost.toml`, by name: what a key is when the config leaves it out.
//! The configuration reference (docs/configuration.md) points here; the parser is the only place that applies
//! them, so the rest of the host reads a [`Config`](super::Config) with nothing left to decide.

use std::time::Duration;

/// `batch`: records per handler call.
pub const BATCH: usize = 100;

/// `read_limit`: the most records one read (GetRecords) asks for, the service maximum (the read
/// size adapts below it: `dispatch/read_size.rs`).
pub const READ_LIMIT: usize = super::MAX_READ_RECORDS;

/// `poll_interval`: the wait after a read that found its shard caught up. What the Kinesis
/// Client Library and Lambda use, so an idle subscription takes one of the shard's five reads a
/// second (fewer while it stays empty) and leaves the rest to other consumers.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// `lanes`: parallel lanes per shard.
pub const LANES: u32 = 1;

/// `create_if_missing` on the embedded stream, which has nothing else to create streams: one
/// shard. (On Kinesis a missing stream is an error unless the key is set.)
pub const EMBEDDED_SHARDS: u32 = 1;

/// `[leases] ttl`.
pub const LEASE_TTL: Duration = Duration::from_secs(10);

/// `[leases] renew_every`.
pub const RENEW_EVERY: Duration = Duration::from_secs(3);

/// `[leases] list_every`.
pub const LIST_EVERY: Duration = Duration::from_secs(10);

/// `[leases] checkpoint_every`.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// `[fleet] poll`: how often an instance reads the desired handler versions (one strongly
/// consistent read per subscription), so a deploy reaches every instance within this plus the
/// time to fetch and validate the component.
pub const FLEET_POLL: Duration = Duration::from_secs(2);

/// `[fleet] heartbeat`: how often an instance writes its heartbeat (and at once after a swap or
/// a refusal); one missing for three periods counts as gone.
pub const FLEET_HEARTBEAT: Duration = Duration::from_secs(10);

/// `[fleet] max_component_size`: the largest handler a desired row may name (64 MiB: a
/// Python or JavaScript handler is ~17 MiB).
pub const MAX_COMPONENT_SIZE: u64 = 64 << 20;

/// `[host] cache_max`: the compile cache's size cap (2 GiB: some 60 Python or JavaScript
/// handler versions of ~35 MiB each, or hundreds of Rust ones).
pub const CACHE_MAX: u64 = 2 << 30;

/// `[admin] max_upload`: the largest handler upload accepted (50 MiB).
pub const MAX_UPLOAD: u64 = 50 << 20;

/// `[subscription.limits] memory`: bytes an instance may grow to (64 MiB).
pub const MEMORY: u64 = 64 << 20;

/// `[subscription.limits] timeout`: per handler call.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// `in_place_max_delay`: without a retry cap, the longest wait before a record answered
/// `retry-after` is called again in its shard (the waits double up to it).
pub const IN_PLACE_MAX_DELAY: Duration = Duration::from_secs(60);

/// The shortest wait before a record answered `retry-after` is called again in its shard (and
/// the least `in_place_max_delay` may be): `retry-after(0)` does not call it again at once.
pub const IN_PLACE_MIN_DELAY: Duration = Duration::from_millis(100);

/// The most `in_place_max_delay` may be (what a retry-after delay is honoured up to under a cap).
pub const IN_PLACE_MAX_DELAY_BOUND: Duration = Duration::from_secs(3600);

/// `[subscription.limits] in_flight_records`: two full reads.
pub const IN_FLIGHT_RECORDS: usize = 20_000;

/// `[subscription.limits] in_flight_bytes` (64 MiB).
pub const IN_FLIGHT_BYTES: u64 = 64 << 20;

/// `[subscription.http] timeout`: per request.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);
/// `[subscription.http] max_body`: the largest response body.
pub const HTTP_MAX_BODY: u64 = 10 * 1024 * 1024;
/// `[subscription.http] max_in_flight`: requests one call may have open at once.
pub const HTTP_MAX_IN_FLIGHT: u32 = 16;

/// `[subscription.state] max_in_flight`: store requests one subscription has open at once.
pub const STATE_MAX_IN_FLIGHT: u32 = 64;
/// `[subscription.state] timeout`: per state call (a stalled store leaves the handler time to
/// answer retry-after within the call's own timeout, 5 s by default).
pub const STATE_TIMEOUT: Duration = Duration::from_secs(2);
