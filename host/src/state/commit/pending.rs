//! One shard's uncommitted state: the writes of the batch running now, the writes of the
//! batches kept since the last commit, and the versions first read, which a commit is
//! conditioned on. [`PendingView`] is the store the shard's instances see: reads through to the
//! real store, writes kept here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;

use super::{CommitSet, CommitWrite, Held, MAX_BYTES, MAX_ITEMS, Seen, Versioned};
use crate::record::Position;
use crate::state::{MAX_ANSWER, Meter, StateStore, StoreError};

/// A shard's writes not yet committed (`commit = "with-checkpoint"`).
#[derive(Default)]
pub struct Pending {
    inner: Mutex<Inner>,
    /// The store the writes are committed to (set by the first instance that sees it).
    real: OnceLock<Arc<dyn StateStore>>,
}

#[derive(Default)]
struct Inner {
    /// The running batch's writes.
    current: HashMap<String, Held>,
    /// The kept batches' writes, in read order, each with its first and last record.
    kept: Vec<Kept>,
    /// What the store held at each key when first read since the last commit.
    seen: HashMap<String, Versioned>,
    /// A write of the running batch did not fit in one commit.
    overflowed: bool,
}

/// One kept batch.
struct Kept {
    first: Position,
    last: Position,
    writes: HashMap<String, Held>,
}

impl Inner {
    /// What `key` holds for the shard now, if known without asking the store.
    fn effective(&self, key: &str) -> Option<Held> {
        self.current
            .get(key)
            .or_else(|| self.kept.iter().rev().find_map(|k| k.writes.get(key)))
            .cloned()
            .or_else(|| self.seen.get(key).map(|v| v.held.clone()))
    }

    /// What the kept batches and the running one hold at `key`, latest first.
    fn written(&self, key: &str) -> Option<&Held> {
        self.current
            .get(key)
            .or_else(|| self.kept.iter().rev().find_map(|k| k.writes.get(key)))
    }

    /// Every key written by the kept batches and the running one, each once, with what it
    /// holds now.
    fn all_written(&self) -> HashMap<&str, &Held> {
        let mut all = HashMap::new();
        for kept in &self.kept {
            all.extend(kept.writes.iter().map(|(k, v)| (k.as_str(), v)));
        }
        all.extend(self.current.iter().map(|(k, v)| (k.as_str(), v)));
        all
    }

    /// The items and bytes a commit of everything held (with `key` holding `to`) would write.
    fn size_with(&self, key: &str, to: &Held) -> (usize, u64) {
        let mut items = 1;
        let mut bytes = key.len() as u64 + to.size();
        for (k, v) in self.all_written().into_iter().filter(|(k, _)| *k != key) {
            items += 1;
            bytes += k.len() as u64 + v.size();
        }
        (items, bytes)
    }

    fn write(&mut self, key: &str, to: Held) -> Result<(), StoreError> {
        let (items, bytes) = self.size_with(key, &to);
        if items > MAX_ITEMS || bytes > MAX_BYTES {
            self.overflowed = true;
            return Err(StoreError::CommitFull { items, bytes });
        }
        self.current.insert(key.to_owned(), to);
        Ok(())
    }
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("held_keys", &self.held_keys())
            .finish()
    }
}

impl Pending {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store the shard's instances see, over `real` (the grant's store).
    pub fn view(self: &Arc<Self>, real: Arc<dyn StateStore>) -> Arc<dyn StateStore> {
        let _ = self.real.set(real.clone());
        Arc::new(PendingView {
            pending: self.clone(),
            real,
        })
    }

    /// The store commits go to, once an instance has seen it.
    pub fn store(&self) -> Option<&Arc<dyn StateStore>> {
        self.real.get()
    }

    /// Ends the running batch: `span` is its first and last record when every record of it
    /// settled (its writes are kept, to be committed with the checkpoint that covers the last);
    /// `None` discards them. Answers whether a write of the batch did not fit in one commit.
    pub fn end_batch(&self, span: Option<(Position, Position)>) -> bool {
        let mut inner = self.inner();
        let writes = std::mem::take(&mut inner.current);
        if let Some((first, last)) = span
            && !writes.is_empty()
        {
            inner.kept.push(Kept {
                first,
                last,
                writes,
            });
        }
        std::mem::take(&mut inner.overflowed)
    }

    /// Whether what is kept fills half a commit: the shard checkpoints now rather than later.
    pub fn half_full(&self) -> bool {
        let inner = self.inner();
        let all = inner.all_written();
        let bytes: u64 = all.iter().map(|(k, v)| k.len() as u64 + v.size()).sum();
        all.len() * 2 >= MAX_ITEMS || bytes * 2 >= MAX_BYTES
    }

    /// The writes a checkpoint at `at` commits (`None`: the shard's end, all of them): those of
    /// the kept batches it covers, merged. `None`: nothing to commit with this checkpoint.
    pub fn to_commit(&self, at: Option<&Position>) -> Option<CommitSet> {
        let inner = self.inner();
        let batches = inner
            .kept
            .iter()
            .take_while(|k| at.is_none_or(|at| k.last <= *at))
            .count();
        if batches == 0 {
            return None;
        }
        let mut merged: HashMap<&String, &Held> = HashMap::new();
        for kept in &inner.kept[..batches] {
            merged.extend(kept.writes.iter());
        }
        let mut writes: Vec<CommitWrite> = merged
            .into_iter()
            .map(|(key, to)| CommitWrite {
                key: key.clone(),
                to: to.clone(),
                expect: inner.seen.get(key).map(|v| v.seen),
            })
            .collect();
        writes.sort_by(|a, b| a.key.cmp(&b.key));
        Some(CommitSet { writes, batches })
    }

    /// `set` is durable: what it wrote is now what the store holds, at the next version.
    pub fn committed(&self, set: &CommitSet) {
        let mut inner = self.inner();
        let batches = set.batches.min(inner.kept.len());
        inner.kept.drain(..batches);
        // Reads are asked again after a commit, except for keys a later batch still holds
        // (their commit is conditioned on what was read).
        let still: std::collections::HashSet<String> = inner
            .kept
            .iter()
            .flat_map(|k| k.writes.keys().cloned())
            .chain(inner.current.keys().cloned())
            .collect();
        inner.seen.retain(|k, _| still.contains(k));
        for w in &set.writes {
            let seen = match (&w.to, w.expect) {
                (Held::Absent, _) => Seen::Absent,
                (_, Some(Seen::Version(v))) => Seen::Version(v + 1),
                (_, Some(Seen::Absent)) => Seen::Version(1),
                // Written without reading: its version is unknown until read.
                (_, None) => continue,
            };
            inner.seen.insert(
                w.key.clone(),
                Versioned {
                    held: w.to.clone(),
                    seen,
                },
            );
        }
    }

    /// The first record whose writes are kept and not committed: where the shard reads again
    /// from when a commit conflicts.
    pub fn first_uncommitted(&self) -> Option<Position> {
        self.inner().kept.first().map(|k| k.first.clone())
    }

    /// Forgets everything not committed (a conflict, a rewind to the checkpoint).
    pub fn discard(&self) {
        *self.inner() = Inner::default();
    }

    /// Keys kept and written by the running batch, for status and tests.
    pub fn held_keys(&self) -> usize {
        self.inner().all_written().len()
    }
}

/// The store a shard's instance sees with `commit = "with-checkpoint"`.
pub struct PendingView {
    pending: Arc<Pending>,
    real: Arc<dyn StateStore>,
}

impl PendingView {
    /// Makes sure the shard knows what `key` holds (reading the store once since the last
    /// commit), then runs `f` on the shard's writes with it, atomically.
    async fn with<T>(
        &self,
        m: &Meter,
        key: &str,
        f: impl FnOnce(&mut Inner, Held) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.pending.inner().effective(key).is_none() {
            let read = self.real.read_versioned(m, key).await?;
            self.pending
                .inner()
                .seen
                .entry(key.to_owned())
                .or_insert(read);
        }
        let mut inner = self.pending.inner();
        let held = inner.effective(key).unwrap_or(Held::Absent);
        f(&mut inner, held)
    }

    fn blind(&self, key: &str, to: Held) -> Result<(), StoreError> {
        self.pending.inner().write(key, to)
    }
}

#[async_trait]
impl StateStore for PendingView {
    async fn get(&self, m: &Meter, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.with(m, key, |_, held| Ok(held.value())).await
    }

    async fn set(&self, _: &Meter, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.blind(key, Held::Bytes(value))
    }

    async fn delete(&self, _: &Meter, key: &str) -> Result<(), StoreError> {
        self.blind(key, Held::Absent)
    }

    async fn increment(&self, m: &Meter, key: &str, delta: u64) -> Result<u64, StoreError> {
        self.with(m, key, |inner, held| {
            let next = held.counted(delta, false)?;
            inner.write(key, Held::Counter(next))?;
            Ok(next)
        })
        .await
    }

    async fn set_if_absent(
        &self,
        m: &Meter,
        key: &str,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        self.with(m, key, |inner, held| {
            if held != Held::Absent {
                return Ok(false);
            }
            inner.write(key, Held::Bytes(value))?;
            Ok(true)
        })
        .await
    }

    async fn compare_and_set(
        &self,
        m: &Meter,
        key: &str,
        expected: &[u8],
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        self.with(m, key, |inner, held| {
            let holds = held.holds(expected);
            if holds {
                inner.write(key, Held::Bytes(value))?;
            }
            Ok(holds)
        })
        .await
    }

    async fn get_many(
        &self,
        m: &Meter,
        keys: &[String],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut values = Vec::with_capacity(keys.len());
        let mut bytes = 0;
        for key in keys {
            let value = self.get(m, key).await?;
            bytes += value.as_ref().map_or(0, Vec::len);
            if bytes > MAX_ANSWER {
                return Err(StoreError::AnswerTooLarge);
            }
            values.push(value);
        }
        Ok(values)
    }

    async fn set_many(&self, _: &Meter, entries: Vec<(String, Vec<u8>)>) -> Result<(), StoreError> {
        let mut inner = self.pending.inner();
        for (key, value) in entries {
            inner.write(&key, Held::Bytes(value))?;
        }
        Ok(())
    }

    async fn delete_many(&self, _: &Meter, keys: &[String]) -> Result<(), StoreError> {
        let mut inner = self.pending.inner();
        for key in keys {
            inner.write(key, Held::Absent)?;
        }
        Ok(())
    }

    /// The store's page without the keys the shard deleted; the first page also lists the keys
    /// it wrote that the store does not hold yet.
    async fn list_keys(
        &self,
        m: &Meter,
        prefix: &str,
        cursor: Option<u64>,
    ) -> Result<(Vec<String>, Option<u64>), StoreError> {
        let (mut keys, next) = self.real.list_keys(m, prefix, cursor).await?;
        let inner = self.pending.inner();
        let all = inner.all_written();
        super::merge_listing(
            &mut keys,
            cursor.is_none(),
            prefix,
            |k| inner.written(k),
            all.into_iter(),
        );
        Ok((keys, next))
    }

    async fn read_versioned(&self, m: &Meter, key: &str) -> Result<Versioned, StoreError> {
        self.real.read_versioned(m, key).await
    }
}
