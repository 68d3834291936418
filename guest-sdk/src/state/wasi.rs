//! State through the host: `wasi:keyvalue` (store, atomics, batch) and
//! `shardhost:handler/conditional`. Each bucket is opened on its first use and kept, by name,
//! for the instance's life.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::__private::bindings::shardhost::handler::conditional;
use crate::__private::bindings::wasi::keyvalue::{atomics, batch, store};

use super::contract::Error;

thread_local! {
    /// The buckets opened so far, by name. A failed open is not kept: the next use tries again.
    static OPEN: RefCell<HashMap<String, Rc<store::Bucket>>> = RefCell::new(HashMap::new());
}

impl From<store::Error> for Error {
    fn from(e: store::Error) -> Error {
        match e {
            store::Error::NoSuchStore => Error::NoSuchStore,
            store::Error::AccessDenied => Error::AccessDenied,
            store::Error::Other(message) => Error::Other(message),
        }
    }
}

/// Runs `op` on the bucket `name`, opening it first if this instance has not yet.
fn with<T>(
    name: &str,
    op: impl FnOnce(&store::Bucket) -> Result<T, store::Error>,
) -> Result<T, Error> {
    let open = OPEN.with_borrow(|open| open.get(name).cloned());
    let bucket = match open {
        Some(bucket) => bucket,
        None => {
            let bucket = Rc::new(store::open(name)?);
            OPEN.with_borrow_mut(|open| open.insert(name.to_owned(), bucket.clone()));
            bucket
        }
    };
    Ok(op(&bucket)?)
}

pub(super) fn get(bucket: &str, key: &str) -> Result<Option<Vec<u8>>, Error> {
    with(bucket, |b| b.get(key))
}

pub(super) fn set(bucket: &str, key: &str, value: &[u8]) -> Result<(), Error> {
    with(bucket, |b| b.set(key, value))
}

pub(super) fn delete(bucket: &str, key: &str) -> Result<(), Error> {
    with(bucket, |b| b.delete(key))
}

pub(super) fn exists(bucket: &str, key: &str) -> Result<bool, Error> {
    with(bucket, |b| b.exists(key))
}

pub(super) fn increment(bucket: &str, key: &str, delta: u64) -> Result<u64, Error> {
    with(bucket, |b| atomics::increment(b, key, delta))
}

pub(super) fn set_if_absent(bucket: &str, key: &str, value: &[u8]) -> Result<bool, Error> {
    with(bucket, |b| conditional::set_if_absent(b, key, value))
}

pub(super) fn compare_and_set(
    bucket: &str,
    key: &str,
    expected: &[u8],
    value: &[u8],
) -> Result<bool, Error> {
    with(bucket, |b| {
        conditional::compare_and_set(b, key, expected, value)
    })
}

/// The values in the order of `keys`: the host answers one entry per key, by position.
pub(super) fn get_many(bucket: &str, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, Error> {
    let entries = with(bucket, |b| batch::get_many(b, keys))?;
    if entries.len() != keys.len() {
        return Err(Error::Other(format!(
            "the host answered {} entries for {} keys",
            entries.len(),
            keys.len()
        )));
    }
    Ok(entries
        .into_iter()
        .map(|entry| entry.map(|(_, value)| value))
        .collect())
}

pub(super) fn set_many(bucket: &str, entries: &[(String, Vec<u8>)]) -> Result<(), Error> {
    with(bucket, |b| batch::set_many(b, entries))
}

pub(super) fn delete_many(bucket: &str, keys: &[String]) -> Result<(), Error> {
    with(bucket, |b| batch::delete_many(b, keys))
}
