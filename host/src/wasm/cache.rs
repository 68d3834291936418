//! Compiled components on disk, keyed by the component's content hash and the engine's
//! compatibility hash, so a handler compiles once per machine and toolchain. The directory is
//! bounded: past its size cap, the entries used longest ago go first (a hit marks an entry used).

pub use crate::memory::human_bytes;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use wasmtime::Engine;
use wasmtime::component::Component;

#[derive(Clone)]
pub(super) struct CompileCache {
    dir: CacheDir,
    engine: Engine,
    engine_key: String,
    max_bytes: u64,
}

impl CompileCache {
    pub(super) fn new(dir: PathBuf, engine: &Engine, max_bytes: u64) -> Self {
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        CompileCache {
            dir: CacheDir::new(&dir),
            engine: engine.clone(),
            engine_key: format!("{:016x}", h.finish()),
            max_bytes,
        }
    }

    fn path(&self, version: &str) -> PathBuf {
        self.dir
            .0
            .join(format!("{version}-{}.cwasm", self.engine_key))
    }

    /// Whether the cache may be used: a directory that someone else could write to is not used
    /// at all (its files are native code). Trouble only costs a compile; it is never an error.
    fn usable(&self) -> bool {
        match self.dir.prepare() {
            Ok(()) => true,
            Err(why) => {
                tracing::error!(dir = %self.dir.0.display(), "compile cache not used: {why}");
                false
            }
        }
    }

    /// The compiled component of `version`, when the cache holds it; marks it used.
    pub(super) fn get(&self, version: &str) -> Option<Component> {
        let path = self.path(version);
        if !self.usable() || !private_file(&path) {
            return None;
        }
        // SAFETY: the file was written by `Component::serialize` of this engine configuration
        // into a directory only this user can write (checked above, and the file's own owner
        // and mode); the name binds it to the content hash and to the engine's compatibility
        // hash, and wasmtime checks the header again.
        match unsafe { Component::deserialize_file(&self.engine, &path) } {
            Ok(c) => {
                tracing::debug!(path = %path.display(), "compiled component from cache");
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(SystemTime::now()));
                Some(c)
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "stale cache entry");
                None
            }
        }
    }

    /// Keeps a freshly compiled component, then trims the cache to its cap.
    pub(super) fn put(&self, version: &str, component: &Component) {
        if !self.usable() {
            return;
        }
        let path = self.path(version);
        if let Err(e) = self.store(&path, component) {
            tracing::debug!(path = %path.display(), error = %e, "cannot cache a compiled component");
        }
        // One line however many go (a line each at debug).
        let gone = self.dir.trim(self.max_bytes, Some(&path));
        for g in &gone {
            tracing::debug!(version = %g.version, bytes = g.bytes, "compile cache entry dropped");
        }
        if !gone.is_empty() {
            let bytes: u64 = gone.iter().map(|g| g.bytes).sum();
            tracing::info!(
                entries = gone.len(),
                "compile cache past its cap of {}: dropped the {} entr{} used longest ago ({})",
                human_bytes(self.max_bytes),
                gone.len(),
                if gone.len() == 1 { "y" } else { "ies" },
                human_bytes(bytes)
            );
        }
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
        let tmp = self.dir.0.join(format!(".tmp-{}", hex::encode(nonce)));
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

/// One compiled component in the cache directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    /// The component's version (sha256 of its bytes).
    pub version: String,
    pub bytes: u64,
    pub last_used: SystemTime,
    pub path: PathBuf,
}

/// The compile cache's directory (`<cache dir>/components`), for listing and clearing.
#[derive(Clone, Debug)]
pub struct CacheDir(PathBuf);

impl CacheDir {
    /// The compiled components under the cache directory `dir`.
    pub fn new(dir: &Path) -> CacheDir {
        CacheDir(dir.join("components"))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Every entry, used longest ago first (none when the directory does not exist).
    pub fn entries(&self) -> std::io::Result<Vec<CacheEntry>> {
        let list = match std::fs::read_dir(&self.0) {
            Ok(list) => list,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut entries = Vec::new();
        for item in list {
            let item = item?;
            let name = item.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".cwasm") else {
                continue;
            };
            let Ok(meta) = item.metadata() else { continue };
            let version = stem.split('-').next().unwrap_or(stem).to_owned();
            entries.push(CacheEntry {
                version,
                bytes: meta.len(),
                last_used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                path: item.path(),
            });
        }
        entries.sort_by_key(|e| e.last_used);
        Ok(entries)
    }

    /// Removes entries used longest ago until the rest fit in `max_bytes` (never `keep`).
    /// Answers what it removed.
    pub fn trim(&self, max_bytes: u64, keep: Option<&Path>) -> Vec<CacheEntry> {
        let Ok(entries) = self.entries() else {
            return Vec::new();
        };
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let mut removed = Vec::new();
        for e in entries {
            if total <= max_bytes {
                break;
            }
            if Some(e.path.as_path()) == keep || std::fs::remove_file(&e.path).is_err() {
                continue;
            }
            total -= e.bytes;
            removed.push(e);
        }
        removed
    }

    /// Removes every entry; answers how many and their bytes.
    pub fn clear(&self) -> std::io::Result<(usize, u64)> {
        let entries = self.entries()?;
        let bytes = entries.iter().map(|e| e.bytes).sum();
        for e in &entries {
            std::fs::remove_file(&e.path)?;
        }
        Ok((entries.len(), bytes))
    }

    /// Creates the directory (mode 0700) if needed, and checks that it and its parent are this
    /// user's and that nobody else may write to them.
    fn prepare(&self) -> Result<(), String> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.0)
            .map_err(|e| format!("cannot create it: {e}"))?;
        for dir in [self.0.parent(), Some(self.0.as_path())]
            .into_iter()
            .flatten()
        {
            check_private(dir)?;
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    /// A cache directory with entries of 100 bytes, used at the given seconds past the epoch.
    fn cache_with(used_at: &[(&str, u64)]) -> (tempdir::Dir, CacheDir) {
        let dir = tempdir::Dir::new();
        let cache = CacheDir::new(dir.path());
        cache.prepare().unwrap();
        for (version, at) in used_at {
            let path = cache
                .path()
                .join(format!("{version}-0123456789abcdef.cwasm"));
            std::fs::write(&path, [0u8; 100]).unwrap();
            let file = std::fs::File::options().append(true).open(&path).unwrap();
            file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(*at))
                .unwrap();
        }
        (dir, cache)
    }

    fn versions(cache: &CacheDir) -> Vec<String> {
        cache
            .entries()
            .unwrap()
            .into_iter()
            .map(|e| e.version)
            .collect()
    }

    #[test]
    fn past_its_cap_the_cache_drops_the_entries_used_longest_ago() {
        let (_dir, cache) = cache_with(&[("b", 2_000), ("a", 1_000), ("c", 3_000), ("d", 4_000)]);
        assert_eq!(versions(&cache), ["a", "b", "c", "d"], "oldest use first");
        let removed: Vec<String> = cache
            .trim(250, None)
            .into_iter()
            .map(|e| e.version)
            .collect();
        assert_eq!(removed, ["a", "b"]);
        assert_eq!(versions(&cache), ["c", "d"]);
        assert!(
            cache.trim(250, None).is_empty(),
            "within the cap: nothing goes"
        );
    }

    #[test]
    fn the_entry_just_written_is_kept_even_when_it_is_the_oldest() {
        let (_dir, cache) = cache_with(&[("new", 1_000), ("old", 2_000)]);
        let keep = cache.path().join("new-0123456789abcdef.cwasm");
        cache.trim(100, Some(&keep));
        assert_eq!(versions(&cache), ["new"]);
    }

    #[test]
    fn clear_removes_every_entry_and_counts_them() {
        let (_dir, cache) = cache_with(&[("a", 1), ("b", 2)]);
        assert_eq!(cache.clear().unwrap(), (2, 200));
        assert!(versions(&cache).is_empty());
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(812), "812 bytes");
        assert_eq!(human_bytes(300 << 10), "300 KiB");
        assert_eq!(human_bytes(35_861_094), "34.2 MiB");
        assert_eq!(human_bytes(2 << 30), "2.0 GiB");
    }

    /// A private temporary directory, removed when dropped.
    mod tempdir {
        use std::path::{Path, PathBuf};

        pub struct Dir(PathBuf);

        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let n = N.fetch_add(1, Ordering::Relaxed);
                let path = std::env::temp_dir()
                    .join(format!("shardhost-cache-test-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&path).unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
                Dir(path)
            }

            pub fn path(&self) -> &Path {
                &self.0
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
