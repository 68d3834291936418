//! Turning a component's bytes into native code: from the cache when it holds the version,
//! else with Cranelift. A compile at start uses every core; a compile while handlers run (a
//! deploy) uses one thread at low priority, so the running version keeps its cores. A compile
//! that takes more than a second says so in the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wasmtime::{Config, Engine};

use super::cache::{CompileCache, human_bytes};

/// How soon a compile must be done, and so what it may take from the running handlers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urgency {
    /// Nothing runs on this version's behalf yet (a start, `check`, `invoke`): every core.
    Now,
    /// A version is running (a deploy): one thread, at low priority.
    Background,
}

/// A compile past this is logged ("compiling …, first use of this version").
const SLOW_COMPILE: Duration = Duration::from_secs(1);

/// Compiles for one engine, with an optional cache.
#[derive(Clone)]
pub(super) struct Compiler {
    engine: Engine,
    /// The same configuration compiling on the calling thread only (for `Background`).
    serial: Engine,
    cache: Option<CompileCache>,
}

impl Compiler {
    pub(super) fn new(
        config: &Config,
        engine: &Engine,
        cache: Option<CompileCache>,
    ) -> wasmtime::Result<Compiler> {
        let mut serial = config.clone();
        serial.parallel_compilation(false);
        Ok(Compiler {
            engine: engine.clone(),
            serial: Engine::new(&serial)?,
            cache,
        })
    }

    /// The component of `version` (whose bytes are `bytes`), named `name` in the log.
    pub(super) async fn compile(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
        urgency: Urgency,
    ) -> Result<Component, String> {
        let compiling = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = {
            let (this, compiling) = (self.clone(), compiling.clone());
            let (version, bytes) = (version.to_owned(), bytes.to_vec());
            move || {
                let _ = tx.send(this.compile_now(&version, &bytes, urgency, &compiling));
            }
        };
        // Off the async threads, so shards and lease renewals go on while this compiles. A
        // background compile gets a thread of its own, whose priority it may lower for good.
        match urgency {
            Urgency::Now => drop(tokio::task::spawn_blocking(job)),
            Urgency::Background => {
                std::thread::Builder::new()
                    .name("shardhost-compile".into())
                    .spawn(job)
                    .map_err(|e| format!("cannot start a compile thread: {e}"))?;
            }
        }
        let started = Instant::now();
        let mut rx = std::pin::pin!(rx);
        let done = match tokio::time::timeout(SLOW_COMPILE, rx.as_mut()).await {
            Ok(done) => done,
            Err(_) => {
                if compiling.load(Ordering::Relaxed) {
                    tracing::info!(
                        "compiling {name} ({}), first use of this version: this takes a while; \
                         the native code is cached for the next start",
                        human_bytes(bytes.len() as u64)
                    );
                }
                rx.await
            }
        };
        let component = done.map_err(|_| "the compile thread failed".to_owned())??;
        if compiling.load(Ordering::Relaxed) && started.elapsed() >= SLOW_COMPILE {
            tracing::info!(
                "compiled {name} in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        Ok(component)
    }

    /// On the calling (blocking) thread: the cache, else a compile (`compiling` set first).
    fn compile_now(
        &self,
        version: &str,
        bytes: &[u8],
        urgency: Urgency,
        compiling: &AtomicBool,
    ) -> Result<Component, String> {
        if let Some(component) = self.cache.as_ref().and_then(|c| c.get(version)) {
            return Ok(component);
        }
        compiling.store(true, Ordering::Relaxed);
        let component = match urgency {
            Urgency::Now => Component::new(&self.engine, bytes),
            Urgency::Background => {
                lower_priority(10);
                self.serial
                    .precompile_component(bytes)
                    // SAFETY: the bytes were just made by `precompile_component` of an engine
                    // with this engine's configuration, in this process.
                    .and_then(|native| unsafe { Component::deserialize(&self.engine, native) })
            }
        }
        .map_err(|e| format!("{e:#}"))?;
        if let Some(cache) = &self.cache {
            cache.put(version, &component);
        }
        Ok(component)
    }
}

/// Lowers the calling thread's scheduling priority to `nice` (a compile during a deploy: 10,
/// so it yields the cores to the handlers that run; a shadow: 19).
pub(crate) fn lower_priority(nice: libc::c_int) {
    // SAFETY: setpriority on the calling thread (its id from gettid) only changes how the
    // scheduler weighs this thread; failure is harmless and ignored.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}
