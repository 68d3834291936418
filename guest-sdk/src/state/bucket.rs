//! [`Bucket`]: a bucket of the subscription's store by name, and its operations (the module's
//! functions are those of the default bucket).

use std::borrow::Cow;

use super::contract::{DEFAULT_BUCKET, DONE_MARK, Error};
#[cfg(not(target_arch = "wasm32"))]
use super::native as imp;
#[cfg(target_arch = "wasm32")]
use super::wasi as imp;

/// A bucket of the subscription's store, by name: made by [`bucket`]. It has the module's
/// functions as methods. Making one opens nothing: the bucket is opened on its first
/// operation, then kept open for the instance's life.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bucket {
    name: Cow<'static, str>,
}

pub(super) const DEFAULT: Bucket = Bucket {
    name: Cow::Borrowed(DEFAULT_BUCKET),
};

/// The bucket `name`. Unless it is [`DEFAULT_BUCKET`], the subscription's grant must list it
/// (`[subscription.state] buckets`), or every operation on it fails with
/// [`Error::AccessDenied`].
pub fn bucket(name: impl Into<String>) -> Bucket {
    Bucket {
        name: Cow::Owned(name.into()),
    }
}

impl Bucket {
    /// The bucket's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value of `key`, or `None` when it holds none. A counter reads as its decimal text.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        imp::get(&self.name, key)
    }

    /// Sets `key` to `value`, whatever it held.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn set(&self, key: &str, value: impl AsRef<[u8]>) -> Result<(), Error> {
        imp::set(&self.name, key, value.as_ref())
    }

    /// Removes `key` (nothing happens when it holds no value).
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn delete(&self, key: &str) -> Result<(), Error> {
        imp::delete(&self.name, key)
    }

    /// Whether `key` holds a value.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn exists(&self, key: &str) -> Result<bool, Error> {
        imp::exists(&self.name, key)
    }

    /// Adds `delta` to the counter `key` (a key without a value starts from 0), atomically in
    /// the store, and answers the new value.
    ///
    /// # Errors
    ///
    /// See [`Error`]; [`Error::Other`] when the key holds a value [`set`](Self::set) wrote.
    pub fn increment(&self, key: &str, delta: u64) -> Result<u64, Error> {
        imp::increment(&self.name, key, delta)
    }

    /// Sets `key` to `value` only if it holds no value, in one atomic step; answers whether it
    /// wrote.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn set_if_absent(&self, key: &str, value: impl AsRef<[u8]>) -> Result<bool, Error> {
        imp::set_if_absent(&self.name, key, value.as_ref())
    }

    /// Sets `key` to `value` only if it still holds exactly `expected` (as [`get`](Self::get)
    /// reads it), in one atomic step; answers whether it wrote. A key without a value never
    /// matches.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn compare_and_set(
        &self,
        key: &str,
        expected: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<bool, Error> {
        imp::compare_and_set(&self.name, key, expected.as_ref(), value.as_ref())
    }

    /// The values of `keys`, in their order: `None` for a key that holds none.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn get_many(&self, keys: &[impl AsRef<str>]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        let keys: Vec<String> = keys.iter().map(|k| k.as_ref().to_owned()).collect();
        imp::get_many(&self.name, &keys)
    }

    /// Sets every key to its value. Not atomic: when it fails, some keys may have been written.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn set_many<K, V>(&self, entries: impl IntoIterator<Item = (K, V)>) -> Result<(), Error>
    where
        K: AsRef<str>,
        V: AsRef<[u8]>,
    {
        let entries: Vec<(String, Vec<u8>)> = entries
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_vec()))
            .collect();
        imp::set_many(&self.name, &entries)
    }

    /// Removes every key. Not atomic: when it fails, some keys may have been removed.
    ///
    /// # Errors
    ///
    /// See [`Error`].
    pub fn delete_many<K: AsRef<str>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<(), Error> {
        let keys: Vec<String> = keys.into_iter().map(|k| k.as_ref().to_owned()).collect();
        imp::delete_many(&self.name, &keys)
    }

    /// Runs `effect` unless `key` is marked done; marks it done when the effect succeeds.
    /// Answers `Ok(true)` when the effect ran now, `Ok(false)` when the key was already marked
    /// (the effect did not run). See [the module's docs](super#once) for what it promises.
    ///
    /// # Errors
    ///
    /// The effect's error (the key stays unmarked), or the store's: reading the key (the
    /// effect did not run) or marking it (the effect ran, and runs again on the next
    /// delivery).
    pub fn once<E: From<Error>>(
        &self,
        key: &str,
        effect: impl FnOnce() -> Result<(), E>,
    ) -> Result<bool, E> {
        if self.get(key)?.is_some() {
            return Ok(false);
        }
        effect()?;
        match self.set_if_absent(key, DONE_MARK) {
            Ok(true) => {}
            Ok(false) => crate::warn!(
                "state: once({key:?}) in bucket {}: the key was marked done while the effect \
                 ran here: the effect may have run twice",
                self.name
            ),
            Err(e) => {
                crate::warn!(
                    "state: once({key:?}) in bucket {}: the effect ran but its mark was not \
                     written ({e}): it runs again on the next delivery",
                    self.name
                );
                return Err(e.into());
            }
        }
        Ok(true)
    }
}
