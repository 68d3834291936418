//! State committed with the checkpoint (`[subscription.state] commit = "with-checkpoint"`).
//!
//! A shard's writes stay in its [`Pending`] (visible at once to its later records) and become
//! durable together with the checkpoint that covers the records that made them, in one atomic
//! write: the DynamoDB store gives its items ([`CommitSet`] → `TransactWriteItem`s) to the lease
//! store's checkpoint transaction; the memory store applies them in one step beside the memory
//! lease store. Whatever is not committed when the lease is lost, the host is killed or stopped
//! before the checkpoint, is discarded, and the records that made it are delivered again: after
//! any fault the state is the effect of the records before the checkpoint, each applied once.
//!
//! Every key a commit writes after reading it is conditional on the version it read: another
//! shard that wrote the key since makes the commit fail as a whole ([`Conflict`]); the shard
//! then discards what it holds and reads again from its checkpoint.

mod pending;

use super::{StoreError, counter_of};

pub use pending::{Pending, PendingView};

/// The most state items one commit writes: a DynamoDB transaction holds 100 items, one of them
/// the lease row.
pub const MAX_ITEMS: usize = 99;

/// The most bytes of keys and values one commit writes: a transaction holds 4 MB; the rest is
/// the lease row's and the attributes' share.
pub const MAX_BYTES: u64 = 4_000_000 - 64 * 1024;

/// What a store holds at a key, as a commit writes it and a versioned read answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Held {
    Absent,
    Bytes(Vec<u8>),
    Counter(u64),
}

impl Held {
    /// Its value as `get` answers it (a counter as its decimal text).
    pub fn value(&self) -> Option<Vec<u8>> {
        match self {
            Held::Absent => None,
            Held::Bytes(b) => Some(b.clone()),
            Held::Counter(n) => Some(super::counter_text(*n)),
        }
    }

    /// What `increment(delta)` makes of it: a counter `delta` higher (absent counts from 0). A
    /// value `set` wrote is refused, as the stores refuse it, unless `text_counts`: then one
    /// that is a counter's decimal text counts on (a reader that saw the store only through
    /// `get`, which answers a counter as its text, cannot tell the two apart).
    pub fn counted(&self, delta: u64, text_counts: bool) -> Result<u64, StoreError> {
        let current = match self {
            Held::Absent => 0,
            Held::Counter(n) => *n,
            Held::Bytes(b) if text_counts => counter_of(b).ok_or(StoreError::NotACounter)?,
            Held::Bytes(_) => return Err(StoreError::NotACounter),
        };
        current.checked_add(delta).ok_or(StoreError::Overflow)
    }

    /// Whether it holds exactly `expected`, as `get` would read it (`compare-and-set`).
    pub fn holds(&self, expected: &[u8]) -> bool {
        match self {
            Held::Bytes(b) => b == expected,
            Held::Counter(n) => counter_of(expected) == Some(*n),
            Held::Absent => false,
        }
    }

    /// The bytes it adds to a commit besides its key.
    pub fn size(&self) -> u64 {
        match self {
            Held::Absent => 0,
            Held::Bytes(b) => b.len() as u64,
            Held::Counter(_) => 20,
        }
    }
}

/// Which version of a key a read saw: a commit writes the key only if it still holds that one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Nothing (or an expired item).
    Absent,
    /// An item of this version (0: an item written by an immediate write, which keeps none).
    Version(u64),
}

/// A read that a commit can be conditioned on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    pub held: Held,
    pub seen: Seen,
}

/// One key of a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitWrite {
    /// The whole (namespaced) key.
    pub key: String,
    /// What it holds after the commit (`Absent`: deleted).
    pub to: Held,
    /// The version it must still hold (the one first read); `None`: written without reading
    /// (`set`, `delete`), whatever it holds.
    pub expect: Option<Seen>,
}

/// The writes one commit makes durable, each key once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitSet {
    pub writes: Vec<CommitWrite>,
    /// How many of the shard's kept batches it commits.
    pub batches: usize,
}

impl CommitSet {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// When a subscription's last commit conflicted; shared by its shards' workers.
#[derive(Clone, Debug, Default)]
pub struct Conflicts(std::sync::Arc<std::sync::atomic::AtomicU64>);

/// How long after a conflict a subscription's shards commit after every batch.
pub const COMMIT_EACH_BATCH_FOR: std::time::Duration = std::time::Duration::from_secs(30);

impl Conflicts {
    /// Notes a conflict now.
    pub fn conflicted(&self) {
        self.0
            .store(crate::lease::now_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a conflict came within [`COMMIT_EACH_BATCH_FOR`]: commit after every batch.
    pub fn commit_each_batch(&self) -> bool {
        let at = self.0.load(std::sync::atomic::Ordering::Relaxed);
        at > 0
            && crate::lease::now_ms().saturating_sub(at) < COMMIT_EACH_BATCH_FOR.as_millis() as u64
    }
}

/// A page of a store's `list-keys` as a writer over that store answers it: without the keys
/// it deleted, and on the first page with the keys it wrote that the store does not hold yet.
pub fn merge_listing<'a>(
    keys: &mut Vec<String>,
    first_page: bool,
    prefix: &str,
    written: impl Fn(&str) -> Option<&'a Held>,
    all_written: impl Iterator<Item = (&'a str, &'a Held)>,
) {
    keys.retain(|k| !matches!(written(k), Some(Held::Absent)));
    if first_page {
        let mut new: Vec<String> = all_written
            .filter(|(k, v)| k.starts_with(prefix) && **v != Held::Absent)
            .filter(|(k, _)| !keys.iter().any(|have| have == k))
            .map(|(k, _)| k.to_owned())
            .collect();
        new.sort();
        new.dedup();
        keys.extend(new);
    }
}

/// A commit refused because a key no longer holds the version its shard read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the state key `{key}` was written by another shard since this shard read it")]
pub struct Conflict {
    pub key: String,
}

#[cfg(test)]
mod tests;
