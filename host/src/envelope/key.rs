//! The key that authenticates envelopes, and where a host finds it. Every instance that reads a
//! subscription's retry stream must be able to open the copies the others make: they share the
//! current key, or have it among their previous keys while it is rotated.
//!
//! The current key, in order: `[host] retry_key` (or `SHARDHOST_RETRY_KEY`), a secret the
//! operator sets; with the DynamoDB lease store, a random key kept in the lease table itself
//! (made once, shared by the whole fleet, readable by whoever can read the table); else a random
//! key in the file `envelope.key` of the cache directory (made once, mode 0600), right for one
//! instance on one machine. Previous keys (`[host] retry_keys_previous`, or one in
//! `SHARDHOST_RETRY_KEY_PREVIOUS`) open envelopes but never make them.
//!
//! Every envelope names the key it was made under by its [`EnvelopeKey::id`], a short hash that
//! tells keys apart without telling anything about them.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The environment variable that gives the key when the config does not.
pub const ENV: &str = "SHARDHOST_RETRY_KEY";
/// The environment variable that gives one previous key when the config names none.
pub const ENV_PREVIOUS: &str = "SHARDHOST_RETRY_KEY_PREVIOUS";
/// The shortest secret taken for a key.
pub const MIN_SECRET_CHARS: usize = 16;
/// A previous key that is not a secret but the key kept in the lease table (shorter than any
/// secret, so never one): for moving a fleet from that key to a configured one.
pub const LEASE_TABLE: &str = "lease-table";

/// 32 secret bytes. `Debug` shows none of them.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvelopeKey([u8; 32]);

impl std::fmt::Debug for EnvelopeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvelopeKey(..)")
    }
}

/// Why no key could be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("envelope key file {path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("envelope key file {0} does not hold 32 bytes; delete it to make a new one")]
    Malformed(PathBuf),
    #[error("cannot make a random envelope key: {0}")]
    Random(String),
    #[error("{0} must be at least {MIN_SECRET_CHARS} characters")]
    ShortSecret(&'static str),
}

impl EnvelopeKey {
    pub fn from_bytes(bytes: [u8; 32]) -> EnvelopeKey {
        EnvelopeKey(bytes)
    }

    /// The key of an operator's secret (any length; the config asks for 16 characters or more).
    pub fn from_secret(secret: &str) -> EnvelopeKey {
        let mut h = Sha256::new();
        h.update(b"shardhost envelope key\0");
        h.update(secret.as_bytes());
        EnvelopeKey(h.finalize().into())
    }

    /// A fresh random key.
    pub fn random() -> Result<EnvelopeKey, KeyError> {
        let mut bytes = [0u8; 32];
        getrandom::getrandom(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(EnvelopeKey(bytes))
    }

    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key's public name, written into every envelope made under it: 8 hex digits of a
    /// hash of the key (one-way: it tells keys apart and nothing about them).
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"shardhost envelope key id\0");
        h.update(self.0);
        hex::encode(&h.finalize()[..4])
    }

    /// The configured previous keys, else the one in `SHARDHOST_RETRY_KEY_PREVIOUS`; and
    /// whether the lease table's key is one of them ([`LEASE_TABLE`]).
    pub fn configured_previous(secrets: &[String]) -> Result<Previous, KeyError> {
        let from_env;
        let secrets = if secrets.is_empty() {
            from_env = std::env::var(ENV_PREVIOUS).ok().filter(|s| !s.is_empty());
            if from_env
                .as_deref()
                .is_some_and(|s| s != LEASE_TABLE && s.chars().count() < MIN_SECRET_CHARS)
            {
                return Err(KeyError::ShortSecret(ENV_PREVIOUS));
            }
            from_env.as_slice()
        } else {
            secrets
        };
        Ok(Previous {
            keys: secrets
                .iter()
                .filter(|s| *s != LEASE_TABLE)
                .map(|s| Self::from_secret(s))
                .collect(),
            lease_table: secrets.iter().any(|s| s == LEASE_TABLE),
        })
    }

    /// The configured secret, else `SHARDHOST_RETRY_KEY`.
    pub fn configured(secret: Option<&str>) -> Option<EnvelopeKey> {
        match secret {
            Some(s) => Some(Self::from_secret(s)),
            None => std::env::var(ENV)
                .ok()
                .filter(|s| !s.is_empty())
                .map(|s| Self::from_secret(&s)),
        }
    }

    /// The key in `dir/envelope.key`, if there is one (never makes one).
    pub fn stored_in_dir(dir: &Path) -> Result<Option<EnvelopeKey>, KeyError> {
        Self::read(&dir.join("envelope.key"))
    }

    /// The key in `dir/envelope.key`, made (0600, random) when there is none. Two processes
    /// making it at once end up with the same key: the file appears whole or not at all.
    pub fn in_dir(dir: &Path) -> Result<EnvelopeKey, KeyError> {
        let path = dir.join("envelope.key");
        let io = |source| KeyError::File {
            path: path.clone(),
            source,
        };
        if let Some(key) = Self::read(&path)? {
            return Ok(key);
        }
        std::fs::create_dir_all(dir).map_err(io)?;
        let key = Self::random()?;
        let temp = dir.join(format!(
            ".envelope.key.{}.{:x}",
            std::process::id(),
            u64::from_le_bytes(Self::random()?.0[..8].try_into().expect("8 bytes"))
        ));
        let mut file = private_file(&temp).map_err(io)?;
        file.write_all(&key.0).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        // A hard link fails when the name exists: whoever linked first made the key.
        let linked = std::fs::hard_link(&temp, &path);
        let _ = std::fs::remove_file(&temp);
        match linked {
            Ok(()) => Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::read(&path)?.ok_or_else(|| KeyError::Malformed(path.clone()))
            }
            Err(e) => Err(io(e)),
        }
    }

    fn read(path: &Path) -> Result<Option<EnvelopeKey>, KeyError> {
        match std::fs::read(path) {
            Ok(bytes) => <[u8; 32]>::try_from(bytes.as_slice())
                .map(|b| Some(EnvelopeKey(b)))
                .map_err(|_| KeyError::Malformed(path.to_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(KeyError::File {
                path: path.to_owned(),
                source,
            }),
        }
    }
}

/// The previous keys a host is configured with.
#[derive(Debug, Default)]
pub struct Previous {
    /// Of the secrets.
    pub keys: Vec<EnvelopeKey>,
    /// The lease table's key is one too.
    pub lease_table: bool,
}

impl AsRef<[EnvelopeKey]> for EnvelopeKey {
    fn as_ref(&self) -> &[EnvelopeKey] {
        std::slice::from_ref(self)
    }
}

/// The keys a host opens envelopes with: the current one (every envelope it makes is made
/// under it) first, then the previous ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvelopeKeys(Vec<EnvelopeKey>);

impl EnvelopeKeys {
    /// `current`, and the `previous` keys that are not it.
    pub fn new(current: EnvelopeKey, previous: Vec<EnvelopeKey>) -> EnvelopeKeys {
        let mut keys = vec![current];
        for k in previous {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        EnvelopeKeys(keys)
    }

    /// The key new envelopes are made under.
    pub fn current(&self) -> &EnvelopeKey {
        &self.0[0]
    }

    /// The keys that still open envelopes but make none.
    pub fn previous(&self) -> &[EnvelopeKey] {
        &self.0[1..]
    }
}

impl From<EnvelopeKey> for EnvelopeKeys {
    fn from(current: EnvelopeKey) -> Self {
        EnvelopeKeys(vec![current])
    }
}

impl AsRef<[EnvelopeKey]> for EnvelopeKeys {
    fn as_ref(&self) -> &[EnvelopeKey] {
        &self.0
    }
}

fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_made_once_private_and_then_kept() {
        let dir = std::env::temp_dir().join(format!("shardhost-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = EnvelopeKey::in_dir(&dir).unwrap();
        assert_eq!(EnvelopeKey::in_dir(&dir).unwrap(), first);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.join("envelope.key"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn secrets_give_distinct_keys_and_debug_shows_none() {
        let a = EnvelopeKey::from_secret("correct horse battery");
        assert_ne!(a, EnvelopeKey::from_secret("correct horse batterY"));
        assert_eq!(format!("{a:?}"), "EnvelopeKey(..)");
    }

    #[test]
    fn a_key_id_is_short_stable_and_tells_keys_apart() {
        let a = EnvelopeKey::from_secret("correct horse battery");
        let b = EnvelopeKey::from_secret("correct horse batterY");
        assert_eq!(a.id().len(), 8);
        assert!(a.id().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            a.id(),
            EnvelopeKey::from_secret("correct horse battery").id()
        );
        assert_ne!(a.id(), b.id());
        assert!(
            !hex::encode(a.bytes()).contains(&a.id()),
            "not a piece of the key"
        );
        let keys = EnvelopeKeys::new(a.clone(), vec![b.clone(), a.clone()]);
        assert_eq!(keys.current(), &a);
        assert_eq!(
            keys.previous(),
            [b],
            "the current key is not also a previous one"
        );
    }
}
