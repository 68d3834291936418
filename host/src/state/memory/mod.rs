//! The memory store: state in the host process, gone when it stops. For one instance (the
//! embedded stream, the memory lease store) and for `shardhost invoke`.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

mod commit;

use super::commit::{CommitSet, Conflict, Versioned};
use super::{MAX_ANSWER, Meter, StateStore, StoreError, counter_of, counter_text};

/// The most bytes (keys and values) the memory store holds for one host.
pub const MEMORY_MAX: u64 = 256 << 20;

/// Every memory grant's items, by whole key.
#[derive(Debug, Default)]
pub struct Shared {
    items: Mutex<Items>,
}

#[derive(Debug, Default)]
struct Items {
    map: BTreeMap<String, Item>,
    bytes: u64,
}

#[derive(Debug, Clone)]
struct Item {
    value: Value,
    expires: Option<Instant>,
    /// One more with each write of the item, from 1 (as DynamoDB's `ver`, which state
    /// committed with the checkpoint conditions its writes on).
    version: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Bytes(Vec<u8>),
    Counter(u64),
}

/// What an item costs besides its key and value bytes: the map's node share, the `String` and
/// `Vec` headers, the expiry.
const ITEM_OVERHEAD: u64 = 96;

impl Item {
    fn size(key: &str, value: &Value) -> u64 {
        let v = match value {
            Value::Bytes(b) => b.len(),
            Value::Counter(_) => 8,
        };
        (key.len() + v) as u64 + ITEM_OVERHEAD
    }
}

impl Items {
    /// The live item at `key`; an expired one is removed.
    fn live(&mut self, key: &str, now: Instant) -> Option<&Item> {
        let expired = self
            .map
            .get(key)
            .is_some_and(|i| i.expires.is_some_and(|e| e <= now));
        if expired {
            self.remove(key);
        }
        self.map.get(key)
    }

    /// Removes every expired item.
    fn sweep(&mut self, now: Instant) {
        let mut freed = 0;
        self.map.retain(|key, item| {
            let live = item.expires.is_none_or(|e| e > now);
            if !live {
                freed += Item::size(key, &item.value);
            }
            live
        });
        self.bytes -= freed;
    }

    fn remove(&mut self, key: &str) {
        if let Some(old) = self.map.remove(key) {
            self.bytes -= Item::size(key, &old.value);
        }
    }

    fn put(&mut self, key: &str, value: Value, expires: Option<Instant>) -> Result<(), StoreError> {
        let new = Item::size(key, &value);
        let old = |items: &Items| items.map.get(key).map_or(0, |i| Item::size(key, &i.value));
        if self.bytes - old(self) + new > MEMORY_MAX {
            // Expired items are removed only when read: make room from them first.
            self.sweep(Instant::now());
        }
        let old = old(self);
        if self.bytes - old + new > MEMORY_MAX {
            return Err(StoreError::Full { limit: MEMORY_MAX });
        }
        self.bytes = self.bytes - old + new;
        let version = self.map.get(key).map_or(1, |i| i.version + 1);
        self.map.insert(
            key.to_owned(),
            Item {
                value,
                expires,
                version,
            },
        );
        Ok(())
    }
}

/// One grant's view of the memory store: its expiry.
pub struct MemoryStore {
    shared: Arc<Shared>,
    ttl: Option<Duration>,
}

impl MemoryStore {
    pub fn new(shared: Arc<Shared>, ttl: Option<Duration>) -> MemoryStore {
        MemoryStore { shared, ttl }
    }

    fn items(&self) -> std::sync::MutexGuard<'_, Items> {
        self.shared.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn expires(&self, now: Instant) -> Option<Instant> {
        self.ttl.map(|ttl| now + ttl)
    }

    fn read(value: &Value) -> Vec<u8> {
        match value {
            Value::Bytes(b) => b.clone(),
            Value::Counter(n) => counter_text(*n),
        }
    }
}

#[async_trait]
impl StateStore for MemoryStore {
    async fn read_versioned(&self, _: &Meter, key: &str) -> Result<Versioned, StoreError> {
        Ok(Self::versioned(&mut self.items(), key, Instant::now()))
    }

    fn apply_commit(&self, set: &CommitSet) -> Option<Result<CommitSet, Conflict>> {
        Some(self.commit(set))
    }

    async fn get(&self, _: &Meter, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let now = Instant::now();
        Ok(self.items().live(key, now).map(|i| Self::read(&i.value)))
    }

    async fn set(&self, _: &Meter, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        let now = Instant::now();
        self.items()
            .put(key, Value::Bytes(value), self.expires(now))
    }

    async fn delete(&self, _: &Meter, key: &str) -> Result<(), StoreError> {
        self.items().remove(key);
        Ok(())
    }

    async fn increment(&self, _: &Meter, key: &str, delta: u64) -> Result<u64, StoreError> {
        let now = Instant::now();
        let mut items = self.items();
        let current = match items.live(key, now).map(|i| &i.value) {
            None => 0,
            Some(Value::Counter(n)) => *n,
            Some(Value::Bytes(_)) => return Err(StoreError::NotACounter),
        };
        let next = current.checked_add(delta).ok_or(StoreError::Overflow)?;
        items.put(key, Value::Counter(next), self.expires(now))?;
        Ok(next)
    }

    async fn set_if_absent(
        &self,
        _: &Meter,
        key: &str,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut items = self.items();
        if items.live(key, now).is_some() {
            return Ok(false);
        }
        items.put(key, Value::Bytes(value), self.expires(now))?;
        Ok(true)
    }

    async fn compare_and_set(
        &self,
        _: &Meter,
        key: &str,
        expected: &[u8],
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut items = self.items();
        let holds = match items.live(key, now).map(|i| &i.value) {
            Some(Value::Bytes(b)) => b == expected,
            Some(Value::Counter(n)) => counter_of(expected) == Some(*n),
            None => false,
        };
        if holds {
            items.put(key, Value::Bytes(value), self.expires(now))?;
        }
        Ok(holds)
    }

    async fn get_many(
        &self,
        _: &Meter,
        keys: &[String],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let now = Instant::now();
        let mut items = self.items();
        let mut bytes = 0;
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            let value = items.live(key, now).map(|i| Self::read(&i.value));
            bytes += value.as_ref().map_or(0, Vec::len);
            if bytes > MAX_ANSWER {
                return Err(StoreError::AnswerTooLarge);
            }
            values.push(value);
        }
        Ok(values)
    }

    async fn set_many(&self, _: &Meter, entries: Vec<(String, Vec<u8>)>) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut items = self.items();
        for (key, value) in entries {
            items.put(&key, Value::Bytes(value), self.expires(now))?;
        }
        Ok(())
    }

    async fn delete_many(&self, _: &Meter, keys: &[String]) -> Result<(), StoreError> {
        let mut items = self.items();
        let unique: HashSet<&String> = keys.iter().collect();
        for key in unique {
            items.remove(key);
        }
        Ok(())
    }

    async fn list_keys(
        &self,
        _: &Meter,
        prefix: &str,
        cursor: Option<u64>,
    ) -> Result<(Vec<String>, Option<u64>), StoreError> {
        const PAGE: usize = 1000;
        let now = Instant::now();
        let items = self.items();
        let skip = cursor.unwrap_or(0) as usize;
        let mut keys: Vec<String> = items
            .map
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(_, i)| i.expires.is_none_or(|e| e > now))
            .skip(skip)
            .take(PAGE + 1)
            .map(|(k, _)| k.clone())
            .collect();
        let next = (keys.len() > PAGE).then(|| {
            keys.truncate(PAGE);
            (skip + PAGE) as u64
        });
        Ok((keys, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(ttl: Option<Duration>) -> MemoryStore {
        MemoryStore::new(Arc::default(), ttl)
    }

    #[tokio::test]
    async fn counters_read_back_as_decimal_text_and_values_are_not_counters() {
        let (s, m) = (store(None), Meter::default());
        assert_eq!(s.increment(&m, "c", 1).await.unwrap(), 1);
        assert_eq!(s.increment(&m, "c", 5).await.unwrap(), 6);
        assert_eq!(s.get(&m, "c").await.unwrap(), Some(b"6".to_vec()));
        assert!(
            s.compare_and_set(&m, "c", b"6", b"x".to_vec())
                .await
                .unwrap()
        );
        assert!(matches!(
            s.increment(&m, "c", 1).await,
            Err(StoreError::NotACounter)
        ));
        s.set(&m, "max", b"".to_vec()).await.unwrap();
        s.delete(&m, "max").await.unwrap();
        s.increment(&m, "max", u64::MAX).await.unwrap();
        assert!(matches!(
            s.increment(&m, "max", 1).await,
            Err(StoreError::Overflow)
        ));
    }

    #[tokio::test]
    async fn conditional_writes_hold_only_when_their_condition_does() {
        let (s, m) = (store(None), Meter::default());
        assert!(s.set_if_absent(&m, "k", b"a".to_vec()).await.unwrap());
        assert!(!s.set_if_absent(&m, "k", b"b".to_vec()).await.unwrap());
        assert!(
            !s.compare_and_set(&m, "k", b"b", b"c".to_vec())
                .await
                .unwrap()
        );
        assert!(
            s.compare_and_set(&m, "k", b"a", b"c".to_vec())
                .await
                .unwrap()
        );
        assert!(
            !s.compare_and_set(&m, "gone", b"", b"c".to_vec())
                .await
                .unwrap()
        );
        assert_eq!(s.get(&m, "k").await.unwrap(), Some(b"c".to_vec()));
    }

    #[tokio::test]
    async fn expired_items_are_absent() {
        let (s, m) = (store(Some(Duration::from_millis(1))), Meter::default());
        s.set(&m, "k", b"v".to_vec()).await.unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.get(&m, "k").await.unwrap(), None);
        assert!(s.set_if_absent(&m, "k", b"w".to_vec()).await.unwrap());
    }

    #[tokio::test]
    async fn batches_keep_the_order_of_their_keys_and_lists_stay_in_their_prefix() {
        let (s, m) = (store(None), Meter::default());
        let entries = vec![
            ("p/a".to_owned(), b"1".to_vec()),
            ("p/b".to_owned(), b"2".to_vec()),
            ("q/a".to_owned(), b"3".to_vec()),
        ];
        s.set_many(&m, entries).await.unwrap();
        let keys = ["p/b", "p/z", "p/a"].map(str::to_owned);
        let got = s.get_many(&m, &keys).await.unwrap();
        assert_eq!(got, [Some(b"2".to_vec()), None, Some(b"1".to_vec())]);
        let (listed, next) = s.list_keys(&m, "p/", None).await.unwrap();
        assert_eq!(
            (listed, next),
            (vec!["p/a".to_owned(), "p/b".to_owned()], None)
        );
        s.delete_many(&m, &["p/a".to_owned(), "p/a".to_owned()])
            .await
            .unwrap();
        assert_eq!(s.get(&m, "p/a").await.unwrap(), None);
    }

    #[test]
    fn expired_items_make_room_when_the_store_is_full() {
        let mut items = Items::default();
        let past = Instant::now() - Duration::from_secs(1);
        let big = vec![0u8; 300 * 1024];
        let fit = (MEMORY_MAX / Item::size("k0000", &Value::Bytes(big.clone()))) as usize;
        for i in 0..fit {
            let key = format!("k{i:04}");
            items
                .put(&key, Value::Bytes(big.clone()), Some(past))
                .unwrap();
        }
        // Full of items that expired without being read again: a write makes room from them.
        items
            .put("lasting", Value::Bytes(big.clone()), None)
            .unwrap();
        assert_eq!(items.map.len(), 1);
        assert_eq!(items.bytes, Item::size("lasting", &Value::Bytes(big)));
    }

    #[tokio::test]
    async fn the_store_is_bounded() {
        let (s, m) = (store(None), Meter::default());
        let big = vec![0u8; 300 * 1024];
        let mut full = false;
        for i in 0..1000 {
            if let Err(e) = s.set(&m, &format!("k{i}"), big.clone()).await {
                assert!(matches!(e, StoreError::Full { .. }));
                full = true;
                break;
            }
        }
        assert!(full, "the memory store grew past {MEMORY_MAX} bytes");
    }
}
