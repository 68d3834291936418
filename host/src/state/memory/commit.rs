//! The memory store's side of state committed with the checkpoint: versioned reads, and a
//! commit checked and applied in one step under the store's lock.

use std::time::Instant;

use super::{Items, MemoryStore, Value};
use crate::state::commit::{CommitSet, CommitWrite, Conflict, Held, Seen, Versioned};

impl MemoryStore {
    /// What `key` holds now, and its version.
    pub(super) fn versioned(items: &mut Items, key: &str, now: Instant) -> Versioned {
        match items.live(key, now) {
            None => Versioned {
                held: Held::Absent,
                seen: Seen::Absent,
            },
            Some(item) => Versioned {
                held: match &item.value {
                    Value::Bytes(b) => Held::Bytes(b.clone()),
                    Value::Counter(n) => Held::Counter(*n),
                },
                seen: Seen::Version(item.version),
            },
        }
    }

    /// Checks every key's version, then writes them all, under one lock; answers the set
    /// that undoes it.
    pub(super) fn commit(&self, set: &CommitSet) -> Result<CommitSet, Conflict> {
        let now = Instant::now();
        let mut items = self.items();
        let mut undo = CommitSet::default();
        for w in &set.writes {
            let before = Self::versioned(&mut items, &w.key, now);
            if w.expect.is_some_and(|seen| seen != before.seen) {
                return Err(Conflict { key: w.key.clone() });
            }
            undo.writes.push(CommitWrite {
                key: w.key.clone(),
                to: before.held,
                expect: None,
            });
        }
        for w in &set.writes {
            let written = match &w.to {
                Held::Absent => {
                    items.remove(&w.key);
                    Ok(())
                }
                Held::Bytes(b) => items.put(&w.key, Value::Bytes(b.clone()), self.expires(now)),
                Held::Counter(n) => items.put(&w.key, Value::Counter(*n), self.expires(now)),
            };
            if let Err(e) = written {
                tracing::warn!(error = %e, "state commit could not be applied");
                drop(items);
                let _ = self.commit(&undo);
                return Err(Conflict { key: w.key.clone() });
            }
        }
        Ok(undo)
    }
}
