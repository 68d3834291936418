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
mod key;
mod memory;

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

pub use dynamo::{DynamoLeaseStore, DynamoOptions};
pub(crate) use handle::{KeepAlive, LeaseHandle};
pub(crate) use key::claimed_by_another;
pub use key::{LeaseKey, LeaseRows, SUBSCRIPTION_SEPARATOR};
pub use memory::MemoryLeaseStore;

/// What other rows of a DynamoDB lease table share with its lease rows (the fleet table's):
/// the partition key, attribute values, and errors naming the row and the table.
pub(crate) mod dynamo_rows {
    pub(crate) use super::dynamo::row::{Item, KEY, n, s};
    pub(crate) use super::dynamo::sdk_error;
}

use crate::record::Position;

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
    /// Bumped by every write of a holder; a write expects the value it last saw.
    pub counter: u64,
    pub checkpoint: Option<Checkpoint>,
    /// When a reader first opened the shard while it had no checkpoint (ms since the Unix
    /// epoch): a reader that finds no checkpoint but this mark opens there, never at the tip.
    pub opened_ms: Option<u64>,
    /// The owner another instance asked to hand this shard to (balancing). See [`LeaseState`].
    pub handoff_to: Option<String>,
}

/// What a row means for whoever looks at it at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseState<'a> {
    /// Nobody holds it (never taken, released, or expired): anyone may take it.
    Free,
    /// `owner` holds it until it expires or releases it.
    Held { owner: &'a str },
    /// `owner` holds it and `to` asked for it: it stays `owner`'s (nobody else may take it)
    /// until `owner` releases it at a batch boundary, or it expires.
    HandoffRequested { owner: &'a str, to: &'a str },
    /// Released on a handoff request: only `to` may take it until the lease's expiry.
    Reserved { to: &'a str },
}

impl Lease {
    /// A row that has never been written.
    pub fn new(key: LeaseKey) -> Lease {
        Lease {
            key,
            owner: None,
            expiry_ms: 0,
            counter: 0,
            checkpoint: None,
            opened_ms: None,
            handoff_to: None,
        }
    }

    /// What the row means at `now_ms`.
    pub fn state(&self, now_ms: u64) -> LeaseState<'_> {
        if self.expiry_ms <= now_ms {
            return LeaseState::Free;
        }
        match (self.owner.as_deref(), self.handoff_to.as_deref()) {
            (Some(owner), None) => LeaseState::Held { owner },
            (Some(owner), Some(to)) => LeaseState::HandoffRequested { owner, to },
            (None, Some(to)) => LeaseState::Reserved { to },
            (None, None) => LeaseState::Free,
        }
    }

    /// Whether `owner` may take this lease now: it is free, `owner` already holds it (a restart
    /// under the same owner id regains it at once), or it is reserved for `owner`.
    pub fn takeable_by(&self, owner: &str, now_ms: u64) -> bool {
        match self.state(now_ms) {
            LeaseState::Free => true,
            LeaseState::Held { owner: o } | LeaseState::HandoffRequested { owner: o, .. } => {
                o == owner
            }
            LeaseState::Reserved { to } => to == owner,
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
    /// The row holds a value this host cannot use (a checkpoint that is not a sequence number,
    /// an expiry far in the future, ...): the message names the row and the attribute. The
    /// shard is not read until the row is fixed.
    #[error("{0}")]
    Malformed(String),
    /// This shard must not be taken: the message says why and what to do (e.g. an
    /// earlier-version row without `legacy_stream`, or a row another subscription took).
    #[error("{0}")]
    Refused(String),
    /// A checkpoint written with state ([`LeaseStore::checkpoint_with`]) was refused because
    /// the state item at `index` no longer holds the version its shard read: another shard
    /// wrote it. Nothing was written; the lease is still held.
    #[error("state written with the checkpoint conflicts with another shard's (item {index})")]
    StateConflict { index: usize },
}

/// Where leases and checkpoints live. Implement it to keep them in another database.
///
/// Each write of a holder is conditional: it succeeds only while the row still has the owner
/// and counter of the `lease` passed in, bumps the counter, and answers the whole row as written
/// (including a handoff request another instance wrote since: that is how a holder learns of
/// it). A write whose condition fails answers [`LeaseError::Lost`].
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// Takes the lease for `owner` if [`Lease::takeable_by`] says it may (free, expired,
    /// already `owner`'s, or reserved for `owner`); answers `None` otherwise. The expiry becomes
    /// now + `ttl`; a handoff request or reservation is cleared; the checkpoint and the opened
    /// mark are kept.
    async fn acquire(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError>;

    /// Extends a held lease to now + `ttl`.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError>;

    /// Writes the checkpoint of a held lease.
    async fn checkpoint(&self, lease: &Lease, checkpoint: &Checkpoint)
    -> Result<Lease, LeaseError>;

    /// Writes the checkpoint of a held lease and `items` (a DynamoDB state table's, as
    /// `state::commit` makes them) in one transaction: all of it or none. An item whose
    /// condition fails answers [`LeaseError::StateConflict`]. A store that cannot (the default)
    /// refuses.
    async fn checkpoint_with(
        &self,
        _lease: &Lease,
        _checkpoint: &Checkpoint,
        _items: &[aws_sdk_dynamodb::types::TransactWriteItem],
    ) -> Result<Lease, LeaseError> {
        Err(LeaseError::Refused(
            "this lease store cannot write state with its checkpoints: use the DynamoDB lease \
             store"
                .to_owned(),
        ))
    }

    /// Records that a reader opened the held shard at `at_ms` (ms since the Unix epoch) while
    /// it had no checkpoint; keeps an earlier mark if there is one ([`Lease::opened_ms`]).
    async fn mark_opened(&self, lease: &Lease, at_ms: u64) -> Result<Lease, LeaseError>;

    /// Reads a row without changing it.
    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError>;

    /// Gives a held lease up; the checkpoint and the opened mark stay. When `lease` carries a
    /// handoff request, the row is reserved for the requester until the lease's expiry
    /// ([`LeaseState::Reserved`]); otherwise it is free at once.
    async fn release(&self, lease: &Lease) -> Result<(), LeaseError>;

    /// Asks the holder of `lease` (as last read) to hand it over to `requester`: writes
    /// [`Lease::handoff_to`] if the row still has that owner and counter and carries no request
    /// yet. Neither the expiry nor the counter change, so the row stays the holder's (nobody may
    /// take it until the holder releases it or it expires) and the holder's next write succeeds
    /// and answers the request. The holder then stops the shard at a batch boundary, writes its
    /// final checkpoint and releases (reserving the row for `requester`). Answers whether the
    /// request was written. Optional: a store without it (the default) turns balancing off.
    async fn request_handoff(&self, _lease: &Lease, _requester: &str) -> Result<bool, LeaseError> {
        Ok(false)
    }
}

/// Milliseconds since the Unix epoch, now: the system clock, or on a thread that runs a
/// simulation ([`simulated_clock`]) the simulation's virtual clock.
pub fn now_ms() -> u64 {
    if let Some((base_ms, base)) = SIMULATED.get() {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(base);
        return base_ms.saturating_add(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

thread_local! {
    static SIMULATED: std::cell::Cell<Option<(u64, tokio::time::Instant)>> =
        const { std::cell::Cell::new(None) };
}

/// Makes [`now_ms`] on this thread read `base_ms` now and advance with tokio's clock (paused in a
/// simulation, so minutes of lease time pass in milliseconds) until the guard is dropped. Every
/// task of a current-thread runtime on this thread sees it; nothing else does.
#[doc(hidden)]
pub fn simulated_clock(base_ms: u64) -> SimulatedClock {
    SIMULATED.set(Some((base_ms, tokio::time::Instant::now())));
    SimulatedClock(())
}

/// Ends a [`simulated_clock`] when dropped.
#[doc(hidden)]
pub struct SimulatedClock(());

impl Drop for SimulatedClock {
    fn drop(&mut self) {
        SIMULATED.set(None);
    }
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
            owner: Some("a".into()),
            expiry_ms: 1_000,
            counter: 3,
            ..Lease::new(LeaseKey::new("s", "shard-1"))
        };
        assert!(lease.takeable_by("a", 500));
        assert!(!lease.takeable_by("b", 500));
        assert!(lease.takeable_by("b", 1_000));
        lease.owner = None;
        assert!(lease.takeable_by("b", 0));
    }

    #[test]
    fn a_shard_asked_for_stays_its_holders_and_is_then_reserved_for_the_asker() {
        let lease = Lease {
            owner: Some("a".into()),
            expiry_ms: 1_000,
            handoff_to: Some("b".into()),
            ..Lease::new(LeaseKey::new("s", "shard-1"))
        };
        assert_eq!(
            lease.state(500),
            LeaseState::HandoffRequested {
                owner: "a",
                to: "b"
            }
        );
        assert!(lease.takeable_by("a", 500));
        assert!(
            !lease.takeable_by("b", 500),
            "the asker waits for the release"
        );
        assert!(
            !lease.takeable_by("c", 500),
            "a third instance never takes it"
        );
        let released = Lease {
            owner: None,
            ..lease.clone()
        };
        assert_eq!(released.state(500), LeaseState::Reserved { to: "b" });
        assert!(released.takeable_by("b", 500));
        assert!(!released.takeable_by("c", 500));
        assert!(!released.takeable_by("a", 500));
        assert!(
            released.takeable_by("c", 1_000),
            "a reservation ends with the expiry"
        );
        assert!(lease.takeable_by("c", 1_000), "so does a request");
    }
}
