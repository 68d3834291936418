//! Signed fleet deploys: who may make a version the fleet's desired one.
//!
//! Every row that can make code run on a fleet is signed, with an ed25519 key, as one
//! [`Statement`] bound to its lease table, service and subscription: a deploy (*the component
//! whose sha256 is V is generation G of lineage D*), a rollout (*rollout C runs V on exactly these
//! shards, this share, from T for W, judged by R*) and a shadow (*shadow S runs V on trial*). An
//! instance with `[fleet] trusted_keys` runs a row's bytes only when the statement, rebuilt from
//! the row it read and its own table, service and subscription names, verifies against one of its
//! keys: a signature copied onto another table, subscription, service, version, generation,
//! lineage, shard list or window does not.
//!
//! Keys: a private key is a PKCS#8 PEM file (`shardhost keygen`, or
//! `openssl genpkey -algorithm ed25519`); a public key is one line `ed25519:<base64 of its 32
//! bytes>`. The signing is ed25519-dalek's; nothing here is hand-written cryptography.

use std::fmt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

/// The prefix of a public key's text form.
const PREFIX: &str = "ed25519:";

/// Why a key or a signature is not usable.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("`{0}` is not a public key: expected `ed25519:` and the base64 of 32 bytes")]
    Public(String),
    #[error("cannot read the private key {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not an ed25519 private key in PKCS#8 PEM (`shardhost keygen` writes one)")]
    Private { path: String },
    #[error("cannot write the private key {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make a random key: {0}")]
    Random(String),
}

/// A public key a fleet trusts.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// Reads `ed25519:<base64>`.
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        let bad = || KeyError::Public(text.to_owned());
        let b64 = text.trim().strip_prefix(PREFIX).ok_or_else(bad)?;
        let bytes: [u8; 32] = BASE64
            .decode(b64)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(bad)?;
        VerifyingKey::from_bytes(&bytes)
            .map(PublicKey)
            .map_err(|_| bad())
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", BASE64.encode(self.0.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A private key that signs deploys.
pub struct SignKey(SigningKey);

impl SignKey {
    /// A new random key.
    pub fn generate() -> Result<SignKey, KeyError> {
        let mut seed = zeroize::Zeroizing::new([0u8; 32]);
        getrandom::getrandom(seed.as_mut()).map_err(|e| KeyError::Random(e.to_string()))?;
        Ok(SignKey(SigningKey::from_bytes(&seed)))
    }

    /// Reads a PKCS#8 PEM file.
    pub fn read(path: &Path) -> Result<SignKey, KeyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: shown.clone(),
            source,
        })?;
        SigningKey::from_pkcs8_pem(&text)
            .map(SignKey)
            .map_err(|_| KeyError::Private { path: shown })
    }

    /// Writes the key to a new file `path`, readable by its owner only (0600); an existing file
    /// is never overwritten.
    pub fn write_new(&self, path: &Path) -> Result<(), KeyError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let write_error = |source| KeyError::Write {
            path: path.display().to_string(),
            source,
        };
        let pem = self
            .0
            .to_pkcs8_pem(Default::default())
            .map_err(|e| write_error(std::io::Error::other(e.to_string())))?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(write_error)?;
        file.write_all(pem.as_bytes()).map_err(write_error)
    }

    /// Its public key.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// Signs `statement`.
    pub fn sign(&self, statement: &Statement<'_>) -> Signed {
        Signed {
            key: self.public().to_string(),
            signature: BASE64.encode(self.0.sign(&statement.bytes()).to_bytes()),
        }
    }
}

/// Where a signature holds: one subscription of one service in one lease table. A signature made
/// for a staging table does not verify in production, even under the same key and names.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    pub table: &'a str,
    pub service: &'a str,
    pub subscription: &'a str,
}

/// What a signature says: everything that decides which bytes run where.
#[derive(Clone, Copy, Debug)]
pub enum Statement<'a> {
    /// The component whose sha256 is `version` is generation `generation` of the desired row of
    /// lineage `deploy_id`.
    Deploy {
        scope: Scope<'a>,
        version: &'a str,
        generation: u64,
        deploy_id: &'a str,
    },
    /// Rollout `canary_id` runs `version` on exactly `shards` (`share_permille` of them), from
    /// `started_at_ms` for `window_ms`, judged by `abort_on`.
    Rollout {
        scope: Scope<'a>,
        canary_id: &'a str,
        version: &'a str,
        shards: &'a [String],
        share_permille: u32,
        started_at_ms: u64,
        window_ms: u64,
        abort_on: &'a str,
    },
    /// Shadow `shadow_id` runs `version` beside the current version (on trial), its unsent
    /// HTTP requests answered `http_answer` (none: 503).
    Shadow {
        scope: Scope<'a>,
        shadow_id: &'a str,
        version: &'a str,
        http_answer: Option<&'a crate::effects::HttpAnswer>,
    },
}

impl Statement<'_> {
    /// The signed bytes: a JSON array led by the statement's kind, so no field can run into the
    /// next and no statement of one kind reads as another.
    fn bytes(&self) -> Vec<u8> {
        let at = |s: &Scope<'_>| serde_json::json!([s.table, s.service, s.subscription]);
        let value = match self {
            Statement::Deploy {
                scope,
                version,
                generation,
                deploy_id,
            } => serde_json::json!([
                "shardhost-deploy-v2",
                at(scope),
                version,
                generation,
                deploy_id
            ]),
            Statement::Rollout {
                scope,
                canary_id,
                version,
                shards,
                share_permille,
                started_at_ms,
                window_ms,
                abort_on,
            } => serde_json::json!([
                "shardhost-rollout-v1",
                at(scope),
                canary_id,
                version,
                shards,
                share_permille,
                started_at_ms,
                window_ms,
                abort_on
            ]),
            Statement::Shadow {
                scope,
                shadow_id,
                version,
                http_answer: None,
            } => serde_json::json!(["shardhost-shadow-v1", at(scope), shadow_id, version]),
            // The answer is part of what is vouched for: it decides what the shadow's report
            // shows, on which a promotion is decided.
            Statement::Shadow {
                scope,
                shadow_id,
                version,
                http_answer: Some(a),
            } => serde_json::json!([
                "shardhost-shadow-v2",
                at(scope),
                shadow_id,
                version,
                a.status,
                a.content_type,
                crate::version::version_of(&a.body)
            ]),
        };
        serde_json::to_vec(&value).expect("strings and numbers serialize")
    }
}

/// A signature as stored in a row: the signing key's public text and the signature.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Signed {
    pub key: String,
    /// base64 of the 64 signature bytes.
    pub signature: String,
}

/// A deploy signature with the generation and lineage of the desired row it was made for: what
/// a signed deploy sends through the admin API, what a signed rollout keeps for its promotion,
/// and what a desired row keeps of the version before it (so a rollback re-verifies it).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Intent {
    pub generation: u64,
    pub deploy_id: String,
    pub signed: Signed,
}

/// Why a desired version is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Untrusted {
    #[error(
        "it is not signed, and this instance runs only versions signed by a key in \
         [fleet] trusted_keys (deploy with `shardhost deploy --sign-key FILE`)"
    )]
    Unsigned,
    #[error("it is signed by {0}, which is not in [fleet] trusted_keys")]
    UnknownKey(String),
    #[error(
        "its signature does not verify for this lease table, service, subscription and what the \
         row says (a deploy's version, generation and deploy id; a rollout's shards, share and \
         window; a shadow's id): a signature made for something else"
    )]
    BadSignature,
}

/// The keys an instance trusts; empty: any writer of the lease table may deploy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedKeys(Vec<PublicKey>);

impl TrustedKeys {
    pub fn new(keys: Vec<PublicKey>) -> TrustedKeys {
        TrustedKeys(keys)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether `key` is one of these.
    pub fn contains(&self, key: &PublicKey) -> bool {
        self.0.contains(key)
    }

    /// These keys and `key`: what a signer vouches by (the fleet's keys and its own).
    pub fn and(&self, key: PublicKey) -> TrustedKeys {
        let mut keys = self.0.clone();
        if !keys.contains(&key) {
            keys.push(key);
        }
        TrustedKeys(keys)
    }

    /// Whether `signed` is a signature of `statement` by one of these keys.
    pub fn verify(
        &self,
        statement: &Statement<'_>,
        signed: Option<&Signed>,
    ) -> Result<(), Untrusted> {
        let signed = signed.ok_or(Untrusted::Unsigned)?;
        let key = PublicKey::parse(&signed.key)
            .ok()
            .filter(|k| self.0.contains(k))
            .ok_or_else(|| Untrusted::UnknownKey(cut(&signed.key)))?;
        let signature: [u8; 64] = BASE64
            .decode(&signed.signature)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or(Untrusted::BadSignature)?;
        key.0
            .verify(&statement.bytes(), &Signature::from_bytes(&signature))
            .map_err(|_| Untrusted::BadSignature)
    }
}

/// A key text from the table, cut for a message.
fn cut(text: &str) -> String {
    text.chars().take(60).collect()
}

#[cfg(test)]
mod tests;
