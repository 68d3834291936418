//! Compiled components on disk, keyed by the component's content hash and the engine's
//! compatibility hash, so a handler compiles once per machine and toolchain.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

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
    /// cannot be read or written only costs a compile; it is never an error.
    pub(super) fn get_or_compile(
        &self,
        version: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<Component> {
        let path = self.path(version);
        if path.exists() {
            // SAFETY: the file was written by `Component::serialize` of this engine
            // configuration into a directory we own; the name binds it to the content hash and
            // to the engine's compatibility hash, and wasmtime checks the header again.
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
        if let Err(e) = self.store(&path, &component) {
            tracing::debug!(path = %path.display(), error = %e, "cannot cache a compiled component");
        }
        Ok(component)
    }

    fn store(&self, path: &PathBuf, component: &Component) -> std::io::Result<()> {
        let bytes = component
            .serialize()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        std::fs::create_dir_all(&self.dir)?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    }
}
