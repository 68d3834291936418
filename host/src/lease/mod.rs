//! Shard leases and checkpoints.
//!
//! A lease gives one shard of one stream to one owner until it expires; its holder renews it and
//! writes the shard's checkpoint through it. [`LeaseStore`] is the seam: the memory store keeps
//! leases in the process (one instance), the DynamoDB store in a table shared by many.
//!
//! Every write is conditional on the caller still holding the lease *as it last saw it* (owner and
//! counter), so two owners never both hold a shard and a checkpoint lands only while its writer
//! holds the lease. A write that fails that condition answers [`LeaseError::Lost`].

mod dynamo;
mod handle;
mod memory;

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

pub use dynamo::DynamoLeaseStore;
pub use handle::LeaseHandle;
pub use memory::MemoryLeaseStore;

use crate::record::Position;

/// The key of one lease row: `stream:shard`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey {
    pub stream: String,
    pub shard_id: String,
}

impl LeaseKey {
    pub fn new(stream: &str, shard_id: &str) -> Self {
        LeaseKey {
            stream: stream.to_owned(),
            shard_id: shard_id.to_owned(),
        }
    }
}

impl fmt::Display for LeaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.stream, self.shard_id)
    }
}

/// How far a shard has been handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checkpoint {
    /// Every record up to and including this position is settled.
    At(Position),
    /// The shard is closed and every record in it is settled.
    ShardEnd,
}

impl Checkpoint {
    /// The text stored in the lease table's `checkpoint` attribute.
    pub fn to_stored(&self) -> String {
        match self {
            Checkpoint::At(p) => p.to_string(),
            Checkpoint::ShardEnd => SHARD_END.to_owned(),
        }
    }

    /// Reads the `checkpoint` attribute back.
    pub fn from_stored(s: &str) -> Option<Checkpoint> {
        if s == SHARD_END {
            return Some(Checkpoint::ShardEnd);
        }
        let (seq, sub) = match s.split_once('/') {
            Some((seq, sub)) => (seq, sub.parse().ok()?),
            None => (s, 0),
        };
        if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Checkpoint::At(Position::new(seq, sub)))
    }
}

impl fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_stored())
    }
}

/// The `checkpoint` value of a closed, fully settled shard.
pub const SHARD_END: &str = "SHARD_END";

/// One lease row as its holder last saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub key: LeaseKey,
    pub owner: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub expiry_ms: u64,
    /// Bumped by every write; a write expects the value it last saw.
    pub counter: u64,
    pub checkpoint: Option<Checkpoint>,
}

impl Lease {
    /// Whether `owner` may take this lease now: nobody holds it, it has expired, or `owner`
    /// already holds it (a restart under the same owner id regains it at once).
    pub fn takeable_by(&self, owner: &str, now_ms: u64) -> bool {
        match &self.owner {
            None => true,
            Some(o) if o == owner => true,
            Some(_) => self.expiry_ms <= now_ms,
        }
    }
}

/// Why a lease operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Someone else holds the lease now, or it changed since the caller last saw it.
    #[error("lease {key} is no longer held by {owner}")]
    Lost { key: LeaseKey, owner: String },
    /// The store could not be reached or answered an error.
    #[error("lease store: {0}")]
    Store(String),
    /// This shard must not be taken: the message says why and what to do (e.g. an
    /// earlier-version row without `legacy_stream`).
    #[error("{0}")]
    Refused(String),
}

/// Where leases and checkpoints live. Implement it to keep them in another database.
///
/// Each write is conditional: it succeeds only while the row still has the owner and counter of
/// the `lease` passed in, and answers the row as written (with the counter bumped).
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// Takes the lease for `owner` if it is free, expired, or already `owner`'s; answers `None`
    /// when another owner holds it. The checkpoint is kept.
    async fn acquire(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError>;

    /// Extends a held lease.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError>;

    /// Writes the checkpoint of a held lease.
    async fn checkpoint(&self, lease: &Lease, checkpoint: &Checkpoint)
    -> Result<Lease, LeaseError>;

    /// Reads a row without changing it.
    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError>;

    /// Gives a held lease up (the checkpoint stays), so another owner can take it at once.
    async fn release(&self, lease: &Lease) -> Result<(), LeaseError>;

    /// Asks the holder of `lease` (as last read) to hand it over: sets `lease_expiry` to
    /// [`HANDOFF_REQUESTED`] if the row is unchanged. The holder notices at its next write,
    /// stops the shard at a batch boundary, writes its final checkpoint and releases. Answers
    /// whether the request was written. Optional: a store without it (the default) turns
    /// balancing off, and the five calls above are all a store needs.
    async fn request_handoff(&self, _lease: &Lease) -> Result<bool, LeaseError> {
        Ok(false)
    }
}

/// The `lease_expiry` of a lease whose holder is asked to hand it over (see
/// [`LeaseStore::request_handoff`]). Any real expiry is far larger.
pub const HANDOFF_REQUESTED: u64 = 1;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_round_trip_through_their_stored_text() {
        for cp in [
            Checkpoint::ShardEnd,
            Checkpoint::At(Position::new(
                "49590338271490256608559692538361571095921575989136588898",
                0,
            )),
            Checkpoint::At(Position::new("4959", 3)),
        ] {
            assert_eq!(Checkpoint::from_stored(&cp.to_stored()), Some(cp));
        }
        assert_eq!(Checkpoint::from_stored("garbage"), None);
    }

    #[test]
    fn a_lease_is_takeable_when_free_expired_or_already_ours() {
        let mut lease = Lease {
            key: LeaseKey::new("s", "shard-1"),
            owner: Some("a".into()),
            expiry_ms: 1_000,
            counter: 3,
            checkpoint: None,
        };
        assert!(lease.takeable_by("a", 500));
        assert!(!lease.takeable_by("b", 500));
        assert!(lease.takeable_by("b", 1_000));
        lease.owner = None;
        assert!(lease.takeable_by("b", 0));
    }
}
