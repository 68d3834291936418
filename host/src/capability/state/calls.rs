//! The calls of `wasi:keyvalue` (`store`, `atomics`, `batch`) and of
//! `shardhost:handler/conditional`: a handler's state, as its subscription's
//! `[subscription.state]` grants it.
//!
//! Every call is checked here before the store sees it: the bucket was opened by name from the
//! grant's list (`default` always), keys are at most [`MAX_KEY`] bytes and values at most
//! [`MAX_VALUE`], and the key gets the bucket's prefix (`SERVICE/SUBSCRIPTION/BUCKET/`), so no
//! two subscriptions ever see each other's keys. A call runs within what is left of the call's
//! timeout; every failure (a refusal, the store's error, the deadline) comes back to the guest
//! as a `wasi:keyvalue` error it can answer with retry-after, never as a trap or a silent
//! success. Each call is counted by operation and result, and timed.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::Resource;

use super::StateView;
use super::access::Bucket;
use crate::bindings::wasi::keyvalue::store;
use crate::state::{MAX_KEY, MAX_MANY, MAX_VALUE, Meter, StateStore, StoreError};

pub(super) type Answer<T> = wasmtime::Result<Result<T, store::Error>>;

/// Why a call was refused before the store saw it.
fn refused(message: String) -> store::Error {
    store::Error::Other(message)
}

pub(super) fn check_key(key: &str) -> Result<(), store::Error> {
    if key.len() > MAX_KEY {
        return Err(refused(format!(
            "a key of {} bytes is longer than the largest, {MAX_KEY} bytes",
            key.len()
        )));
    }
    Ok(())
}

pub(super) fn check_value(key: &str, value: &[u8]) -> Result<(), store::Error> {
    if value.len() > MAX_VALUE {
        return Err(refused(format!(
            "the value for `{}` ({} bytes) is larger than the largest, {MAX_VALUE} bytes (350 KiB)",
            shown(key),
            value.len()
        )));
    }
    Ok(())
}

pub(super) fn check_many(n: usize) -> Result<(), store::Error> {
    if n > MAX_MANY {
        return Err(refused(format!("{n} keys in one call: at most {MAX_MANY}")));
    }
    Ok(())
}

/// A key as error messages show it: at most 64 characters.
pub(super) fn shown(key: &str) -> String {
    match key.char_indices().nth(64) {
        Some((at, _)) => format!("{}…", &key[..at]),
        None => key.to_owned(),
    }
}

impl StateView<'_> {
    /// The bucket's prefix, or the refusal for a guest without state.
    pub(super) fn prefix(&self, bucket: &Resource<Bucket>) -> wasmtime::Result<String> {
        Ok(self.table.get(bucket)?.prefix.clone())
    }

    /// The store, or `access-denied` (a component without a grant never loads; this is the
    /// second lock on the door).
    pub(super) fn store(&self) -> Result<Arc<dyn StateStore>, store::Error> {
        match &self.part.access {
            Some(access) => Ok(access.store.clone()),
            None => Err(store::Error::AccessDenied),
        }
    }

    /// Runs one store call within the call's deadline; counts it.
    pub(super) async fn run<T>(
        &mut self,
        op: &'static str,
        meter: &Meter,
        call: impl Future<Output = Result<T, StoreError>>,
        conflict: impl FnOnce(&T) -> bool,
    ) -> Result<T, store::Error> {
        let start = Instant::now();
        if self.part.stalled == Some(self.deadline) {
            self.count(op, "timeout", start, 0);
            return Err(store::Error::Other(format!(
                "state {op}: the store did not answer an earlier state call of this handler \
                 call; answer retry-after"
            )));
        }
        // Within the grant's timeout, and never past the call's: a stalled store leaves the
        // handler the time to answer.
        let limit = self.part.access.as_ref().map(|a| a.grant.timeout);
        let until = limit.map_or(self.deadline, |t| self.deadline.min(start + t));
        let answer = tokio::time::timeout_at(until.into(), call).await;
        let (result, label) = match answer {
            Ok(Ok(value)) => {
                let label = if conflict(&value) { "conflict" } else { "ok" };
                (Ok(value), label)
            }
            Ok(Err(e)) => {
                tracing::debug!(op, error = %e, "state call failed");
                let label = e.metric();
                let error = match e {
                    StoreError::Denied { .. } => store::Error::AccessDenied,
                    StoreError::NoTable { .. } => store::Error::NoSuchStore,
                    e => store::Error::Other(format!("state {op}: {e}")),
                };
                (Err(error), label)
            }
            Err(_) => {
                let within = match limit {
                    Some(t) if start + t <= self.deadline => format!(
                        "[subscription.state] timeout ({})",
                        humantime::format_duration(t)
                    ),
                    _ => "the call's timeout".to_owned(),
                };
                let message = format!("state {op} did not finish within {within}");
                self.part.stalled = Some(self.deadline);
                (Err(store::Error::Other(message)), "timeout")
            }
        };
        self.count(op, label, start, meter.requests());
        result
    }

    pub(super) fn count(
        &self,
        op: &'static str,
        label: &'static str,
        start: Instant,
        requests: u64,
    ) {
        if let Some(m) = &self.call.metrics {
            m.state_call(
                &self.call.subscription,
                op,
                label,
                start.elapsed().as_secs_f64(),
            );
            if requests > 0 {
                m.state_requests(&self.call.subscription, requests);
            }
        }
    }

    /// A refusal before the store: counted, and given to the guest.
    pub(super) fn refuse<T>(&self, op: &'static str, error: store::Error) -> Answer<T> {
        self.count(op, "refused", Instant::now(), 0);
        Ok(Err(error))
    }
}

impl store::Host for StateView<'_> {
    async fn open(&mut self, identifier: String) -> Answer<Resource<Bucket>> {
        let Some(access) = &self.part.access else {
            return self.refuse("open", store::Error::AccessDenied);
        };
        let name = if identifier.is_empty() {
            "default"
        } else {
            identifier.as_str()
        };
        let grant = &access.grant;
        if name != "default" && !grant.buckets.iter().any(|b| b == name) {
            if let Some(unlogged) = access.refusals.may_log() {
                tracing::warn!(
                    target: "shardhost::guest",
                    subscription = %self.call.subscription,
                    shard = %self.call.shard_id,
                    unlogged,
                    "state: the handler opened the bucket `{}`, which [subscription.state] \
                     buckets does not list (it lists default{}): refused",
                    shown(name),
                    grant.buckets.iter().map(|b| format!(", {b}")).collect::<String>()
                );
            }
            self.call.contained("state-bucket-refused");
            return self.refuse("open", store::Error::AccessDenied);
        }
        let bucket = Bucket {
            name: name.to_owned(),
            prefix: format!("{}{name}/", grant.namespace),
        };
        self.count("open", "ok", Instant::now(), 0);
        Ok(Ok(self.table.push(bucket)?))
    }
}

impl store::HostBucket for StateView<'_> {
    async fn get(&mut self, bucket: Resource<Bucket>, key: String) -> Answer<Option<Vec<u8>>> {
        let prefix = self.prefix(&bucket)?;
        let (store, meter) = match (self.store(), check_key(&key)) {
            (Ok(store), Ok(())) => (store, Meter::default()),
            (Err(e), _) | (_, Err(e)) => return self.refuse("get", e),
        };
        let full = prefix + &key;
        Ok(self
            .run("get", &meter, store.get(&meter, &full), |_| false)
            .await)
    }

    async fn set(&mut self, bucket: Resource<Bucket>, key: String, value: Vec<u8>) -> Answer<()> {
        let prefix = self.prefix(&bucket)?;
        let checked = self
            .store()
            .and_then(|s| check_key(&key).and(check_value(&key, &value)).map(|()| s));
        let store = match checked {
            Ok(store) => store,
            Err(e) => return self.refuse("set", e),
        };
        let meter = Meter::default();
        let full = prefix + &key;
        Ok(self
            .run("set", &meter, store.set(&meter, &full, value), |_| false)
            .await)
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Answer<()> {
        let prefix = self.prefix(&bucket)?;
        let store = match self.store().and_then(|s| check_key(&key).map(|()| s)) {
            Ok(store) => store,
            Err(e) => return self.refuse("delete", e),
        };
        let meter = Meter::default();
        let full = prefix + &key;
        Ok(self
            .run("delete", &meter, store.delete(&meter, &full), |_| false)
            .await)
    }

    async fn exists(&mut self, bucket: Resource<Bucket>, key: String) -> Answer<bool> {
        let prefix = self.prefix(&bucket)?;
        let store = match self.store().and_then(|s| check_key(&key).map(|()| s)) {
            Ok(store) => store,
            Err(e) => return self.refuse("exists", e),
        };
        let meter = Meter::default();
        let full = prefix + &key;
        let got = self.run("exists", &meter, store.get(&meter, &full), |_| false);
        Ok(got.await.map(|v| v.is_some()))
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> Answer<store::KeyResponse> {
        let prefix = self.prefix(&bucket)?;
        let store = match self.store() {
            Ok(store) => store,
            Err(e) => return self.refuse("list_keys", e),
        };
        let meter = Meter::default();
        let listed = self
            .run(
                "list_keys",
                &meter,
                store.list_keys(&meter, &prefix, cursor),
                |_| false,
            )
            .await;
        Ok(listed.map(|(keys, cursor)| store::KeyResponse {
            keys: keys
                .into_iter()
                .map(|k| k[prefix.len()..].to_owned())
                .collect(),
            cursor,
        }))
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        let bucket = self.table.delete(bucket)?;
        tracing::trace!(bucket = %bucket.name, "state bucket closed");
        Ok(())
    }
}
