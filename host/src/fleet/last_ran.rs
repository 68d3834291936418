//! The fleet version an instance ran last, kept on its own disk (in the cache directory, which
//! only its user may write): what it starts on when the table's desired row cannot be used (a
//! bad or untrusted row), rather than the config file's possibly much older handler.
//!
//! `CACHE/fleet/TABLE/SERVICE/SUBSCRIPTION.wasm` and `….json` (version, generation, lineage,
//! signature): keyed by the lease table too, so two fleets on one machine never share a kept
//! version; names are hex-encoded, so no name can reach outside the directory.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fleet_table::Desired;
use crate::signing::Signed;
use crate::version::version_of;

/// What a kept version was, when it was desired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub version: String,
    pub generation: u64,
    pub deploy_id: String,
    pub signature: Option<(String, String)>,
}

impl Kept {
    pub fn of(desired: &Desired) -> Kept {
        Kept {
            version: desired.component.version.clone(),
            generation: desired.generation,
            deploy_id: desired.deploy_id.clone(),
            signature: desired
                .signed
                .as_ref()
                .map(|s| (s.key.clone(), s.signature.clone())),
        }
    }

    pub fn signed(&self) -> Option<Signed> {
        self.signature.as_ref().map(|(key, signature)| Signed {
            key: key.clone(),
            signature: signature.clone(),
        })
    }
}

/// One service's kept versions.
#[derive(Clone, Debug)]
pub struct LastRan {
    dir: PathBuf,
}

impl LastRan {
    /// The versions kept for `service` of the lease table `table`.
    pub fn new(cache: &Path, table: &str, service: &str) -> LastRan {
        LastRan {
            dir: cache
                .join("fleet")
                .join(hex::encode(table))
                .join(hex::encode(service)),
        }
    }

    fn paths(&self, subscription: &str) -> (PathBuf, PathBuf) {
        let name = hex::encode(subscription);
        (
            self.dir.join(format!("{name}.wasm")),
            self.dir.join(format!("{name}.json")),
        )
    }

    /// Keeps `bytes` as what `subscription` runs now; a failure is logged, nothing more.
    pub fn save(&self, subscription: &str, kept: &Kept, bytes: &[u8]) {
        let (wasm, meta) = self.paths(subscription);
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| write_atomically(&wasm, bytes))
            .and_then(|()| {
                let text = serde_json::to_vec(kept).expect("a kept version serializes");
                write_atomically(&meta, &text)
            });
        if let Err(e) = written {
            tracing::warn!(
                subscription,
                dir = %self.dir.display(),
                "cannot keep the running fleet version on disk: {e}"
            );
        }
    }

    /// The version kept for `subscription`, if its bytes still match it.
    pub fn load(&self, subscription: &str) -> Option<(Kept, Vec<u8>)> {
        let (wasm, meta) = self.paths(subscription);
        let kept: Kept = serde_json::from_slice(&std::fs::read(meta).ok()?).ok()?;
        let bytes = std::fs::read(wasm).ok()?;
        (version_of(&bytes) == kept.version).then_some((kept, bytes))
    }
}

/// Writes `path` through a temporary file and a rename, so a reader never sees half of it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_version_reads_back_and_tampered_bytes_do_not() {
        let dir = std::env::temp_dir().join(format!("shardhost-last-ran-{}", std::process::id()));
        let last = LastRan::new(&dir, "leases", "svc/../x");
        let bytes = b"component".to_vec();
        let kept = Kept {
            version: version_of(&bytes),
            generation: 4,
            deploy_id: "d".into(),
            signature: None,
        };
        assert_eq!(last.load("ship"), None);
        last.save("ship", &kept, &bytes);
        assert_eq!(last.load("ship"), Some((kept, bytes)));
        // Another lease table's fleet of the same name keeps its own.
        assert_eq!(LastRan::new(&dir, "other", "svc/../x").load("ship"), None);
        std::fs::write(last.paths("ship").0, b"other").unwrap();
        assert_eq!(last.load("ship"), None);
        assert!(last.dir.starts_with(dir.join("fleet")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
