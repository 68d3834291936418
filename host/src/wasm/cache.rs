//! Compiled components on disk, keyed by the component's content hash and the engine's
//! compatibility hash, so a handler compiles once per machine and toolchain.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

#[derive(Clone)]
pub(super) struct CompileCache {
    dir: PathBuf,
    engine: Engine,
    engine_key: String,
}

impl CompileCache {
    pub(super) fn new(dir: PathBuf, engine: &Engine) -> Self {
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        CompileCache {
            dir: dir.join("components"),
            engine: engine.clone(),
            engine_key: format!("{:016x}", h.finish()),
        }
    }

    fn path(&self, version: &str) -> PathBuf {
        self.dir
            .join(format!("{version}-{}.cwasm", self.engine_key))
    }

    /// The compiled component for these bytes, from the cache when it holds it. A cache that
    /// cannot be read or written only costs a compile; it is never an error. A cache directory
    /// that someone else could write to is not used at all: its files are native code.
    pub(super) fn get_or_compile(
        &self,
        version: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<Component> {
        let path = self.path(version);
        let usable = match self.prepare() {
            Ok(()) => true,
            Err(why) => {
                tracing::error!(dir = %self.dir.display(), "compile cache not used: {why}");
                false
            }
        };
        if usable && private_file(&path) {
            // SAFETY: the file was written by `Component::serialize` of this engine
            // configuration into a directory only this user can write (checked above, and the
            // file's own owner and mode); the name binds it to the content hash and to the
            // engine's compatibility hash, and wasmtime checks the header again.
            match unsafe { Component::deserialize_file(&self.engine, &path) } {
                Ok(c) => {
                    tracing::debug!(path = %path.display(), "compiled component from cache");
                    return Ok(c);
                }
                Err(e) => {
                    tracing::debug!(path = %path.display(), error = %e, "stale cache entry");
                }
            }
        }
        let component = Component::new(&self.engine, bytes)?;
        if usable && let Err(e) = self.store(&path, &component) {
            tracing::debug!(path = %path.display(), error = %e, "cannot cache a compiled component");
        }
        Ok(component)
    }

    /// Creates the cache directory (mode 0700) if needed, and checks that it and its parent are
    /// this user's and that nobody else may write to them.
    fn prepare(&self) -> Result<(), String> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| format!("cannot create it: {e}"))?;
        for dir in [self.dir.parent(), Some(self.dir.as_path())]
            .into_iter()
            .flatten()
        {
            check_private(dir)?;
        }
        Ok(())
    }

    /// Writes under a name nobody can guess, created exclusively with mode 0600, then renames
    /// into place (readers never see half a file).
    fn store(&self, path: &Path, component: &Component) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let bytes = component
            .serialize()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut nonce = [0u8; 16];
        getrandom::getrandom(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
        let tmp = self.dir.join(format!(".tmp-{}", hex::encode(nonce)));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let written = file.write_all(&bytes).and_then(|()| file.sync_all());
        drop(file);
        match written.and_then(|()| std::fs::rename(&tmp, path)) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// Refuses a directory that is not this user's or that its group or others may write to.
fn check_private(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(format!(
            "{} belongs to user {}, not to this user ({me})",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} may be written by others (mode {:o}); make it private with chmod 700",
            dir.display(),
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

/// Whether `path` is a regular file of this user's that nobody else may write.
fn private_file(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    // SAFETY: as above.
    let me = unsafe { libc::geteuid() };
    meta.file_type().is_file() && meta.uid() == me && meta.mode() & 0o022 == 0
}
