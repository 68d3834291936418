//! State in native builds (a handler's unit tests): an in-memory store per thread, with the
//! host's rules.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use super::contract::{DEFAULT_BUCKET, Error, MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// What a key holds: bytes `set` wrote, or a counter `increment` made.
#[derive(Clone, Debug)]
enum Stored {
    Bytes(Vec<u8>),
    Counter(u64),
}

impl Stored {
    /// The value as `get` reads it: a counter as its decimal text.
    fn read(&self) -> Vec<u8> {
        match self {
            Stored::Bytes(bytes) => bytes.clone(),
            Stored::Counter(n) => n.to_string().into_bytes(),
        }
    }
}

#[derive(Default)]
struct Store {
    buckets: HashMap<String, HashMap<String, Stored>>,
    /// The buckets granted besides `default`; `None`: every bucket.
    granted: Option<BTreeSet<String>>,
    /// The error every operation answers, when set.
    failure: Option<Error>,
}

thread_local! {
    static STORE: RefCell<Store> = RefCell::new(Store::default());
}

/// Empties the calling thread's store, grants every bucket again and makes operations succeed
/// again. Each test runs on its own thread and so starts with an empty store; call this to
/// start over within one test.
pub fn clear() {
    STORE.with_borrow_mut(|store| *store = Store::default());
}

/// Grants only `default` and these buckets (as `[subscription.state] buckets = [...]` does):
/// operations on any other fail with [`Error::AccessDenied`]. [`clear`] grants every bucket
/// again.
pub fn grant_only(buckets: &[&str]) {
    let granted = buckets.iter().map(|b| (*b).to_owned()).collect();
    STORE.with_borrow_mut(|store| store.granted = Some(granted));
}

/// Makes every operation fail with `error` (a store that is down: `Some(Error::Other(..))`),
/// or succeed again (`None`).
pub fn fail_with(error: Option<Error>) {
    STORE.with_borrow_mut(|store| store.failure = error);
}

fn check_key(key: &str) -> Result<(), Error> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::Other(format!(
            "the key is {} bytes; keys are at most {MAX_KEY_BYTES} bytes",
            key.len()
        )));
    }
    Ok(())
}

fn check_value(key: &str, value: &[u8]) -> Result<(), Error> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::Other(format!(
            "the value of {key:?} is {} bytes; values are at most {MAX_VALUE_BYTES} bytes",
            value.len()
        )));
    }
    Ok(())
}

/// Runs `op` on the bucket `name` after the checks the host makes: the grant, then the keys
/// and values, then whether the store answers.
/// The most keys of one batch call, as the host allows.
const MAX_MANY: usize = 10_000;

fn with<T>(
    name: &str,
    keys: &[&str],
    values: &[(&str, &[u8])],
    op: impl FnOnce(&mut HashMap<String, Stored>) -> Result<T, Error>,
) -> Result<T, Error> {
    STORE.with_borrow_mut(|store| {
        if let Some(granted) = &store.granted
            && name != DEFAULT_BUCKET
            && !granted.contains(name)
        {
            return Err(Error::AccessDenied);
        }
        if keys.len() > MAX_MANY {
            return Err(Error::Other(format!(
                "{} keys in one call: at most {MAX_MANY}",
                keys.len()
            )));
        }
        keys.iter().try_for_each(|k| check_key(k))?;
        values.iter().try_for_each(|(k, v)| check_value(k, v))?;
        if let Some(error) = &store.failure {
            return Err(error.clone());
        }
        op(store.buckets.entry(name.to_owned()).or_default())
    })
}

pub(super) fn get(bucket: &str, key: &str) -> Result<Option<Vec<u8>>, Error> {
    with(bucket, &[key], &[], |b| Ok(b.get(key).map(Stored::read)))
}

pub(super) fn set(bucket: &str, key: &str, value: &[u8]) -> Result<(), Error> {
    with(bucket, &[key], &[(key, value)], |b| {
        b.insert(key.to_owned(), Stored::Bytes(value.to_vec()));
        Ok(())
    })
}

pub(super) fn delete(bucket: &str, key: &str) -> Result<(), Error> {
    with(bucket, &[key], &[], |b| {
        b.remove(key);
        Ok(())
    })
}

pub(super) fn exists(bucket: &str, key: &str) -> Result<bool, Error> {
    with(bucket, &[key], &[], |b| Ok(b.contains_key(key)))
}

pub(super) fn increment(bucket: &str, key: &str, delta: u64) -> Result<u64, Error> {
    with(bucket, &[key], &[], |b| {
        let now = match b.get(key) {
            None => delta,
            Some(Stored::Counter(n)) => n
                .checked_add(delta)
                .ok_or_else(|| Error::Other(format!("the counter {key:?} would pass 2^64 - 1")))?,
            Some(Stored::Bytes(_)) => {
                return Err(Error::Other(format!(
                    "{key:?} is not a counter: it holds a value `set` wrote"
                )));
            }
        };
        b.insert(key.to_owned(), Stored::Counter(now));
        Ok(now)
    })
}

pub(super) fn set_if_absent(bucket: &str, key: &str, value: &[u8]) -> Result<bool, Error> {
    with(bucket, &[key], &[(key, value)], |b| {
        if b.contains_key(key) {
            return Ok(false);
        }
        b.insert(key.to_owned(), Stored::Bytes(value.to_vec()));
        Ok(true)
    })
}

pub(super) fn compare_and_set(
    bucket: &str,
    key: &str,
    expected: &[u8],
    value: &[u8],
) -> Result<bool, Error> {
    with(bucket, &[key], &[(key, value)], |b| {
        match b.get(key) {
            Some(now) if now.read() == expected => {}
            _ => return Ok(false),
        }
        b.insert(key.to_owned(), Stored::Bytes(value.to_vec()));
        Ok(true)
    })
}

pub(super) fn get_many(bucket: &str, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, Error> {
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    with(bucket, &names, &[], |b| {
        Ok(keys.iter().map(|k| b.get(k).map(Stored::read)).collect())
    })
}

pub(super) fn set_many(bucket: &str, entries: &[(String, Vec<u8>)]) -> Result<(), Error> {
    let names: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    let values: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    with(bucket, &names, &values, |b| {
        for (key, value) in entries {
            b.insert(key.clone(), Stored::Bytes(value.clone()));
        }
        Ok(())
    })
}

pub(super) fn delete_many(bucket: &str, keys: &[String]) -> Result<(), Error> {
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    with(bucket, &names, &[], |b| {
        for key in keys {
            b.remove(key);
        }
        Ok(())
    })
}
