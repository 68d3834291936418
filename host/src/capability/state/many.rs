//! `wasi:keyvalue/atomics` (increment), `wasi:keyvalue/batch` (the calls over many keys) and
//! `shardhost:handler/conditional` (the writes that hold only under a condition).

use wasmtime::component::Resource;

use super::StateView;
use super::access::Bucket;
use super::calls::{Answer, check_key, check_many, check_value, shown};

/// The keys of one batch call: not too many, none too long.
fn check_keys(keys: &[String]) -> Result<(), store::Error> {
    check_many(keys.len())?;
    keys.iter().try_for_each(|k| check_key(k))
}
use crate::bindings::shardhost::handler::conditional;
use crate::bindings::wasi::keyvalue::{atomics, batch, store};
use crate::state::{MAX_VALUE, Meter};

impl atomics::Host for StateView<'_> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: u64,
    ) -> Answer<u64> {
        let prefix = self.prefix(&bucket)?;
        let store = match self.store().and_then(|s| check_key(&key).map(|()| s)) {
            Ok(store) => store,
            Err(e) => return self.refuse("increment", e),
        };
        let meter = Meter::default();
        let full = prefix + &key;
        let counted = self.run(
            "increment",
            &meter,
            store.increment(&meter, &full, delta),
            |_| false,
        );
        Ok(counted.await.map_err(|e| match e {
            store::Error::Other(m) => store::Error::Other(format!("{m} (key `{}`)", shown(&key))),
            e => e,
        }))
    }
}

impl batch::Host for StateView<'_> {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Answer<Vec<Option<(String, Vec<u8>)>>> {
        let prefix = self.prefix(&bucket)?;
        let checked = self.store().and_then(|s| check_keys(&keys).map(|()| s));
        let store = match checked {
            Ok(store) => store,
            Err(e) => return self.refuse("get_many", e),
        };
        let meter = Meter::default();
        let full: Vec<String> = keys.iter().map(|k| format!("{prefix}{k}")).collect();
        let got = self
            .run("get_many", &meter, store.get_many(&meter, &full), |_| false)
            .await;
        Ok(got.map(|values| {
            keys.into_iter()
                .zip(values)
                .map(|(k, v)| v.map(|v| (k, v)))
                .collect()
        }))
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        entries: Vec<(String, Vec<u8>)>,
    ) -> Answer<()> {
        let prefix = self.prefix(&bucket)?;
        let checked = self.store().and_then(|s| {
            check_many(entries.len())?;
            entries
                .iter()
                .try_for_each(|(k, v)| check_key(k).and(check_value(k, v)))?;
            Ok(s)
        });
        let store = match checked {
            Ok(store) => store,
            Err(e) => return self.refuse("set_many", e),
        };
        let meter = Meter::default();
        let full = entries
            .into_iter()
            .map(|(k, v)| (format!("{prefix}{k}"), v))
            .collect();
        Ok(self
            .run("set_many", &meter, store.set_many(&meter, full), |_| false)
            .await)
    }

    async fn delete_many(&mut self, bucket: Resource<Bucket>, keys: Vec<String>) -> Answer<()> {
        let prefix = self.prefix(&bucket)?;
        let checked = self.store().and_then(|s| check_keys(&keys).map(|()| s));
        let store = match checked {
            Ok(store) => store,
            Err(e) => return self.refuse("delete_many", e),
        };
        let meter = Meter::default();
        let full: Vec<String> = keys.iter().map(|k| format!("{prefix}{k}")).collect();
        Ok(self
            .run(
                "delete_many",
                &meter,
                store.delete_many(&meter, &full),
                |_| false,
            )
            .await)
    }
}

impl conditional::Host for StateView<'_> {
    async fn set_if_absent(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> Answer<bool> {
        let prefix = self.prefix(&bucket)?;
        let checked = self
            .store()
            .and_then(|s| check_key(&key).and(check_value(&key, &value)).map(|()| s));
        let store = match checked {
            Ok(store) => store,
            Err(e) => return self.refuse("set_if_absent", e),
        };
        let meter = Meter::default();
        let full = prefix + &key;
        let wrote = store.set_if_absent(&meter, &full, value);
        Ok(self.run("set_if_absent", &meter, wrote, |w| !w).await)
    }

    async fn compare_and_set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        expected: Vec<u8>,
        value: Vec<u8>,
    ) -> Answer<bool> {
        let prefix = self.prefix(&bucket)?;
        let checked = self
            .store()
            .and_then(|s| check_key(&key).and(check_value(&key, &value)).map(|()| s));
        let store = match checked {
            Ok(store) => store,
            Err(e) => return self.refuse("compare_and_set", e),
        };
        if expected.len() > MAX_VALUE {
            // No key can hold it: the condition cannot hold (and the store need not be asked).
            self.count("compare_and_set", "conflict", std::time::Instant::now(), 0);
            return Ok(Ok(false));
        }
        let meter = Meter::default();
        let full = prefix + &key;
        let wrote = store.compare_and_set(&meter, &full, &expected, value);
        Ok(self.run("compare_and_set", &meter, wrote, |w| !w).await)
    }
}
