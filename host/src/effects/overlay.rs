//! A state store that reads through to the real one and keeps every write to itself: a version
//! on trial sees its own writes (a dedup key it set is there on the next record) and the store
//! sees none. Bounded: past its limit a write fails, as a full store's does.
//!
//! A key only the real store holds counts as a counter when its value is a counter's decimal
//! text (the store answers a counter's `get` so): `increment` of a key the real store holds as
//! such text set by `set` therefore counts on, where the store would refuse it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;

use super::{Effect, Effects};
use crate::state::commit::{Held, merge_listing};
use crate::state::{MAX_ANSWER, Meter, StateStore, StoreError};

/// What a key bytes count besides its key and value.
const ENTRY_OVERHEAD: u64 = 64;

/// The writes of one run over a real store.
pub struct Overlay {
    real: Arc<dyn StateStore>,
    entries: Mutex<Entries>,
    limit: u64,
    effects: Weak<Effects>,
}

#[derive(Default)]
struct Entries {
    map: HashMap<String, Held>,
    bytes: u64,
}

impl Overlay {
    pub(super) fn new(real: Arc<dyn StateStore>, limit: u64, effects: Arc<Effects>) -> Overlay {
        Overlay {
            real,
            entries: Mutex::default(),
            limit,
            effects: Arc::downgrade(&effects),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The overlay's entry for `key`, else the real store's value (as bytes).
    async fn effective(&self, m: &Meter, key: &str) -> Result<Held, StoreError> {
        if let Some(entry) = self.entries().map.get(key) {
            return Ok(entry.clone());
        }
        Ok(match self.real.get(m, key).await? {
            Some(bytes) => Held::Bytes(bytes),
            None => Held::Absent,
        })
    }

    /// Keeps `entry` for `key` (recorded as `op`), within the limit.
    fn put(&self, op: &'static str, key: &str, entry: Held) -> Result<(), StoreError> {
        let mut entries = self.entries();
        let old = entries
            .map
            .get(key)
            .map_or(0, |e| e.size() + key.len() as u64 + ENTRY_OVERHEAD);
        let new = entry.size() + key.len() as u64 + ENTRY_OVERHEAD;
        let bytes = entries.bytes - old + new;
        if bytes > self.limit {
            return Err(StoreError::OverlayFull { limit: self.limit });
        }
        entries.bytes = bytes;
        entries.map.insert(key.to_owned(), entry);
        drop(entries);
        if let Some(effects) = self.effects.upgrade() {
            effects.record(Effect::StateWrite {
                op,
                key: key.to_owned(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl StateStore for Overlay {
    async fn get(&self, m: &Meter, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.effective(m, key).await?.value())
    }

    async fn set(&self, _: &Meter, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        self.put("set", key, Held::Bytes(value))
    }

    async fn delete(&self, _: &Meter, key: &str) -> Result<(), StoreError> {
        self.put("delete", key, Held::Absent)
    }

    async fn increment(&self, m: &Meter, key: &str, delta: u64) -> Result<u64, StoreError> {
        let next = self.effective(m, key).await?.counted(delta, true)?;
        self.put("increment", key, Held::Counter(next))?;
        Ok(next)
    }

    async fn set_if_absent(
        &self,
        m: &Meter,
        key: &str,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        if !matches!(self.effective(m, key).await?, Held::Absent) {
            return Ok(false);
        }
        self.put("set-if-absent", key, Held::Bytes(value))?;
        Ok(true)
    }

    async fn compare_and_set(
        &self,
        m: &Meter,
        key: &str,
        expected: &[u8],
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        let holds = self.effective(m, key).await?.holds(expected);
        if holds {
            self.put("compare-and-set", key, Held::Bytes(value))?;
        }
        Ok(holds)
    }

    async fn get_many(
        &self,
        m: &Meter,
        keys: &[String],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut answers: Vec<Option<Option<Vec<u8>>>> = {
            let entries = self.entries();
            keys.iter()
                .map(|k| entries.map.get(k).map(Held::value))
                .collect()
        };
        let missing: Vec<String> = keys
            .iter()
            .zip(&answers)
            .filter(|(_, a)| a.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        if !missing.is_empty() {
            let mut real = self.real.get_many(m, &missing).await?.into_iter();
            for answer in answers.iter_mut().filter(|a| a.is_none()) {
                *answer = Some(real.next().flatten());
            }
        }
        let values: Vec<Option<Vec<u8>>> = answers.into_iter().map(Option::flatten).collect();
        let bytes: usize = values.iter().flatten().map(Vec::len).sum();
        if bytes > MAX_ANSWER {
            return Err(StoreError::AnswerTooLarge);
        }
        Ok(values)
    }

    async fn set_many(&self, _: &Meter, entries: Vec<(String, Vec<u8>)>) -> Result<(), StoreError> {
        for (key, value) in entries {
            self.put("set", &key, Held::Bytes(value))?;
        }
        Ok(())
    }

    async fn delete_many(&self, _: &Meter, keys: &[String]) -> Result<(), StoreError> {
        for key in keys {
            self.put("delete", key, Held::Absent)?;
        }
        Ok(())
    }

    /// The real store's page without the keys this run deleted; the first page also lists the
    /// keys this run wrote that the store does not hold.
    async fn list_keys(
        &self,
        m: &Meter,
        prefix: &str,
        cursor: Option<u64>,
    ) -> Result<(Vec<String>, Option<u64>), StoreError> {
        let (mut keys, next) = self.real.list_keys(m, prefix, cursor).await?;
        let entries = self.entries();
        merge_listing(
            &mut keys,
            cursor.is_none(),
            prefix,
            |k| entries.map.get(k),
            entries.map.iter().map(|(k, v)| (k.as_str(), v)),
        );
        Ok((keys, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::state::{StateGrant, StateStoreKind, namespace};
    use crate::config::defaults;

    fn real() -> Arc<dyn StateStore> {
        let grant = StateGrant {
            store: StateStoreKind::Memory,
            ttl: None,
            buckets: Vec::new(),
            namespace: namespace("overlay", "test"),
            max_in_flight: defaults::STATE_MAX_IN_FLIGHT,
            timeout: defaults::STATE_TIMEOUT,
            commit: Default::default(),
        };
        crate::state::Stores::default().of(&grant)
    }

    #[tokio::test]
    async fn writes_stay_in_the_overlay_and_later_reads_see_them() {
        let (real, m) = (real(), Meter::default());
        real.set(&m, "seen", b"before".to_vec()).await.unwrap();
        real.increment(&m, "count", 5).await.unwrap();
        let effects = Effects::new(false, 1 << 20);
        let overlay = effects.overlaid(real.clone());

        assert_eq!(
            overlay.get(&m, "seen").await.unwrap(),
            Some(b"before".to_vec())
        );
        assert!(
            !overlay
                .set_if_absent(&m, "seen", b"x".to_vec())
                .await
                .unwrap()
        );
        assert!(
            overlay
                .set_if_absent(&m, "new", b"n".to_vec())
                .await
                .unwrap()
        );
        assert!(
            !overlay
                .set_if_absent(&m, "new", b"again".to_vec())
                .await
                .unwrap()
        );
        assert_eq!(overlay.increment(&m, "count", 2).await.unwrap(), 7);
        overlay.delete(&m, "seen").await.unwrap();
        assert_eq!(overlay.get(&m, "seen").await.unwrap(), None);
        assert!(
            overlay
                .compare_and_set(&m, "new", b"n", b"m".to_vec())
                .await
                .unwrap()
        );
        let many = overlay
            .get_many(
                &m,
                &["new".into(), "seen".into(), "count".into(), "none".into()],
            )
            .await
            .unwrap();
        assert_eq!(many, [Some(b"m".to_vec()), None, Some(b"7".to_vec()), None]);

        // The real store saw none of it.
        assert_eq!(
            real.get(&m, "seen").await.unwrap(),
            Some(b"before".to_vec())
        );
        assert_eq!(real.get(&m, "new").await.unwrap(), None);
        assert_eq!(real.get(&m, "count").await.unwrap(), Some(b"5".to_vec()));
        let counts = effects.recorded().counts;
        assert_eq!(counts.get("state-write"), Some(&4), "{counts:?}");
    }

    #[tokio::test]
    async fn listing_keys_shows_what_the_run_wrote_and_hides_what_it_deleted() {
        let (real, m) = (real(), Meter::default());
        real.set(&m, "p/a", b"1".to_vec()).await.unwrap();
        real.set(&m, "p/b", b"2".to_vec()).await.unwrap();
        let effects = Effects::new(false, 1 << 20);
        let overlay = effects.overlaid(real);
        overlay.delete(&m, "p/a").await.unwrap();
        overlay.set(&m, "p/c", b"3".to_vec()).await.unwrap();
        overlay.set(&m, "q/d", b"4".to_vec()).await.unwrap();
        let (mut keys, _) = overlay.list_keys(&m, "p/", None).await.unwrap();
        keys.sort();
        assert_eq!(keys, ["p/b", "p/c"]);
    }

    #[tokio::test]
    async fn a_write_past_the_overlay_limit_fails_and_keeps_nothing() {
        let (real, m) = (real(), Meter::default());
        let effects = Effects::new(false, 200);
        let overlay = effects.overlaid(real);
        overlay.set(&m, "a", vec![0; 100]).await.unwrap();
        let full = overlay.set(&m, "b", vec![0; 100]).await;
        assert!(
            matches!(full, Err(StoreError::OverlayFull { limit: 200 })),
            "{full:?}"
        );
        assert_eq!(overlay.get(&m, "b").await.unwrap(), None);
        let counted = overlay.increment(&m, "a", 1).await;
        assert!(
            matches!(counted, Err(StoreError::NotACounter)),
            "{counted:?}"
        );
    }
}
