//! The memory store: state in the host process, gone when it stops. For one instance (the
//! embedded stream, the memory lease store) and for `shardhost invoke`.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{Meter, StateStore, StoreError, counter_of, counter_text};

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
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Bytes(Vec<u8>),
    Counter(u64),
}

impl Item {
    fn size(key: &str, value: &Value) -> u64 {
        let v = match value {
            Value::Bytes(b) => b.len(),
            Value::Counter(_) => 8,
        };
        (key.len() + v) as u64
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

    fn remove(&mut self, key: &str) {
        if let Some(old) = self.map.remove(key) {
            self.bytes -= Item::size(key, &old.value);
        }
    }

    fn put(&mut self, key: &str, value: Value, expires: Option<Instant>) -> Result<(), StoreError> {
        let old = self.map.get(key).map_or(0, |i| Item::size(key, &i.value));
        let new = Item::size(key, &value);
        if self.bytes - old + new > MEMORY_MAX {
            return Err(StoreError::Full { limit: MEMORY_MAX });
        }
        self.bytes = self.bytes - old + new;
        self.map.insert(key.to_owned(), Item { value, expires });
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
        Ok(keys
            .iter()
            .map(|k| items.live(k, now).map(|i| Self::read(&i.value)))
            .collect())
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
