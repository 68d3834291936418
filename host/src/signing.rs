//! Signed fleet deploys: who may make a version the fleet's desired one.
//!
//! A deploy signs, with an ed25519 key, one statement: *service S, subscription U runs the
//! component whose sha256 is V as generation G of deploy lineage D*. An instance with
//! `[fleet] trusted_keys` runs a desired version only when that statement, rebuilt from the row
//! it read and its own service and subscription names, verifies against one of its keys: a
//! signature copied onto another subscription, service, version, generation or lineage does not.
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

/// What a deploy signature says.
#[derive(Clone, Copy, Debug)]
pub struct Statement<'a> {
    pub service: &'a str,
    pub subscription: &'a str,
    /// The component's sha256 (hex).
    pub version: &'a str,
    pub generation: u64,
    /// The desired row's lineage (`deploy_id`).
    pub deploy_id: &'a str,
}

impl Statement<'_> {
    /// The signed bytes: a JSON array, so no field can run into the next.
    fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&(
            "shardhost-deploy-v1",
            self.service,
            self.subscription,
            self.version,
            self.generation,
            self.deploy_id,
        ))
        .expect("strings and a number serialize")
    }
}

/// A signature as stored in the desired row: the signing key's public text and the signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    pub key: String,
    /// base64 of the 64 signature bytes.
    pub signature: String,
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
        "its signature does not verify for this service, subscription, version, generation \
         and deploy id (a signature made for another deploy)"
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
mod tests {
    use super::*;

    fn statement<'a>(subscription: &'a str, generation: u64) -> Statement<'a> {
        Statement {
            service: "svc",
            subscription,
            version: "ab",
            generation,
            deploy_id: "d1",
        }
    }

    #[test]
    fn a_signature_verifies_only_for_the_statement_it_was_made_for() {
        let key = SignKey::generate().unwrap();
        let trusted = TrustedKeys::new(vec![key.public()]);
        let signed = key.sign(&statement("ship", 3));
        assert_eq!(trusted.verify(&statement("ship", 3), Some(&signed)), Ok(()));
        for other in [
            statement("other", 3),
            statement("ship", 2),
            statement("ship", 4),
        ] {
            assert_eq!(
                trusted.verify(&other, Some(&signed)),
                Err(Untrusted::BadSignature)
            );
        }
        let lineage = Statement {
            deploy_id: "d2",
            ..statement("ship", 3)
        };
        assert_eq!(
            trusted.verify(&lineage, Some(&signed)),
            Err(Untrusted::BadSignature)
        );
        assert_eq!(
            trusted.verify(&statement("ship", 3), None),
            Err(Untrusted::Unsigned)
        );
        let stranger = SignKey::generate().unwrap();
        let theirs = stranger.sign(&statement("ship", 3));
        assert!(matches!(
            trusted.verify(&statement("ship", 3), Some(&theirs)),
            Err(Untrusted::UnknownKey(_))
        ));
        // Their signature under our key's name does not verify either.
        let forged = Signed {
            key: key.public().to_string(),
            signature: theirs.signature,
        };
        assert_eq!(
            trusted.verify(&statement("ship", 3), Some(&forged)),
            Err(Untrusted::BadSignature)
        );
    }

    #[test]
    fn public_keys_round_trip_and_junk_is_refused() {
        let key = SignKey::generate().unwrap();
        let text = key.public().to_string();
        assert!(text.starts_with("ed25519:"));
        assert_eq!(PublicKey::parse(&text).unwrap(), key.public());
        for junk in ["", "ed25519:", "ed25519:AAAA", "rsa:abc", &text[8..]] {
            assert!(PublicKey::parse(junk).is_err(), "{junk}");
        }
    }

    #[test]
    fn a_written_key_is_private_to_its_owner_reads_back_and_is_never_overwritten() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("shardhost-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("deploy.pem");
        let _ = std::fs::remove_file(&path);
        let key = SignKey::generate().unwrap();
        key.write_new(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(SignKey::read(&path).unwrap().public(), key.public());
        assert!(SignKey::generate().unwrap().write_new(&path).is_err());
        std::fs::write(dir.join("junk.pem"), "not a key").unwrap();
        assert!(matches!(
            SignKey::read(&dir.join("junk.pem")),
            Err(KeyError::Private { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
