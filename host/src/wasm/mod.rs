//! The wasm runtime: one [`Engine`], components compiled once (and cached on disk by content
//! hash), checked against the `shardhost:handler` world, pre-instantiated, and instantiated per
//! shard with the subscription's limits.
//!
//! - [`Runtime`] owns the engine, the linker (the `types` interface and every registered
//!   capability's interfaces: `capability/`, WASI with nothing granted among them) and the
//!   epoch ticker that enforces call timeouts. `gate.rs` refuses a component that imports what
//!   no one gives, or what a capability gives only with a grant its subscription lacks.
//! - [`HandlerComponent`] is one validated component: a [`HandlerFactory`] whose instances are
//!   reused across calls and thrown away after a trap.

mod cache;
mod compile;
mod gate;
mod imports;
mod instance;
mod limits;
mod ticker;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::Linker;
use wasmtime::error::Context as _;
use wasmtime::{Config, Engine};

use crate::bindings;
use crate::capability::{GrantError, Shared};
use crate::config::{HostConfig, Limits, WasiGrants, defaults};
use crate::effects::Effects;
use crate::handler::{CallContext, CallError, Handler, HandlerFactory};
use crate::log_budget::LogBudget;
use crate::version::version_of;
pub use cache::{CacheDir, human_bytes};
use compile::Compiler;
pub use compile::Urgency;
pub(crate) use compile::lower_priority;
pub use gate::NotGranted;
use gate::{hint, list, not_provided};
pub use imports::HostState;
use instance::InstanceSpec;
pub use instance::{InstantiateError, WasmInstance};
use ticker::Ticker;

/// The world every handler component implements.
pub const WORLD: &str = "shardhost:handler/handler@0.1.2";

/// How much the state overlay of a validation holds: what start-up code may write (and read
/// back) while a component is checked, none of it stored.
const VALIDATION_OVERLAY: u64 = 1 << 20;

/// Why a component cannot serve as a handler.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: cannot read the handler: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{name}: not a WebAssembly file (it does not start with the \\0asm magic bytes)")]
    NotWasm { name: String },
    #[error(
        "{name}: a core WebAssembly module, not a component; build the handler with \
         `--target wasm32-wasip2` (or wrap the module with `wasm-tools component new`)"
    )]
    CoreModule { name: String },
    #[error("{name}: does not compile: {message}")]
    Compile { name: String, message: String },
    #[error(
        "{name}: imports {}, which the host does not provide (it gives handlers WASI 0.2 \
         cli, clocks, filesystem, io, random and sockets, wasi:config/store, wasi:http's \
         outgoing handler and wasi:keyvalue where granted, and shardhost:handler/host){}",
        list(imports),
        hint(imports)
    )]
    MissingImports { name: String, imports: Vec<String> },
    /// Imports what the subscription does not grant: each missing grant is named.
    #[error("{name}: {}", missing.iter().map(NotGranted::to_string).collect::<Vec<_>>().join("; and it "))]
    NotGranted {
        name: String,
        missing: Vec<NotGranted>,
    },
    /// A grant that cannot be made ready (an HTTP grant's CA file).
    #[error("{name}: {source}")]
    Grant {
        name: String,
        #[source]
        source: GrantError,
    },
    #[error("{name}: does not implement the world {WORLD}: {source:#}")]
    WrongWorld {
        name: String,
        source: wasmtime::Error,
    },
    #[error("{name}: does not instantiate under the subscription's limits: {source}")]
    Instantiate {
        name: String,
        source: InstantiateError,
    },
    #[error("wasm engine: {0}")]
    Engine(String),
}

/// The engine, linker and ticker shared by every handler of a host.
pub struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    compiler: Compiler,
    ticker: Arc<Ticker>,
    fuel: bool,
    /// What the capabilities keep for every component (TLS clients, state stores).
    shared: Shared,
}

impl Runtime {
    /// The runtime of a host with this `[host]` section: its cache directory (or the default)
    /// and cap.
    pub fn for_host(host: &HostConfig, fuel: bool) -> Result<Runtime, LoadError> {
        Runtime::with_cache(Runtime::cache_dir_of(host), host.cache_max, fuel)
    }

    /// The cache directory of a host with this `[host]` section: `cache_dir`, else the default.
    pub fn cache_dir_of(host: &HostConfig) -> Option<PathBuf> {
        host.cache_dir.clone().or_else(Runtime::default_cache_dir)
    }

    /// A runtime that caches compiled components under `cache_dir` (none: compile every time),
    /// up to the default cap.
    pub fn new(cache_dir: Option<PathBuf>, fuel: bool) -> Result<Runtime, LoadError> {
        Runtime::with_cache(cache_dir, defaults::CACHE_MAX, fuel)
    }

    /// A runtime that caches compiled components under `cache_dir` (none: compile every time),
    /// up to `cache_max` bytes. With `fuel`, guests are compiled with fuel metering (slower
    /// code) so that subscriptions can set `limits.fuel`; without it, such limits are refused.
    pub fn with_cache(
        cache_dir: Option<PathBuf>,
        cache_max: u64,
        fuel: bool,
    ) -> Result<Runtime, LoadError> {
        let mut config = Config::new();
        config.consume_fuel(fuel);
        // Calls run on fibers (`call_async`); a running guest yields to the async runtime at
        // every epoch tick, and the epoch callback turns the per-call timeout into a trap.
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        let linker = instance::linker(&engine).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        let ticker = Ticker::start(engine.clone())
            .map_err(|e| LoadError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        let cache = cache_dir.map(|dir| cache::CompileCache::new(dir, &engine, cache_max));
        let compiler = Compiler::new(&config, &engine, cache)
            .map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        Ok(Runtime {
            engine,
            linker,
            compiler,
            ticker,
            fuel,
            shared: Shared::default(),
        })
    }

    /// The default cache directory: `$SHARDHOST_CACHE_DIR`, `$XDG_CACHE_HOME/shardhost` or
    /// `$HOME/.cache/shardhost`.
    pub fn default_cache_dir() -> Option<PathBuf> {
        let env = |k| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        env("SHARDHOST_CACHE_DIR")
            .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("shardhost")))
            .or_else(|| env("HOME").map(|d| d.join(".cache").join("shardhost")))
    }

    /// Reads, compiles and validates a handler file.
    pub async fn load_file(
        &self,
        path: &Path,
        limits: Limits,
        wasi: &WasiGrants,
    ) -> Result<Arc<HandlerComponent>, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load_bytes(&path.display().to_string(), &bytes, limits, wasi)
            .await
    }

    /// Compiles and validates handler bytes; `name` names them in errors.
    pub async fn load_bytes(
        &self,
        name: &str,
        bytes: &[u8],
        limits: Limits,
        wasi: &WasiGrants,
    ) -> Result<Arc<HandlerComponent>, LoadError> {
        self.load(name, bytes, limits, wasi, Urgency::Now).await
    }

    /// As [`load_bytes`](Self::load_bytes), compiling as `urgency` says (`Background` while a
    /// version runs: one thread at low priority).
    pub async fn load(
        &self,
        name: &str,
        bytes: &[u8],
        limits: Limits,
        wasi: &WasiGrants,
        urgency: Urgency,
    ) -> Result<Arc<HandlerComponent>, LoadError> {
        let name = name.to_owned();
        self.check_bytes(&name, bytes, &limits)?;
        let version = version_of(bytes);
        let component = self
            .compiler
            .compile(&name, &version, bytes, urgency)
            .await
            .map_err(|message| LoadError::Compile {
                name: name.clone(),
                message,
            })?;
        let wrong_world = |source| LoadError::WrongWorld {
            name: name.clone(),
            source,
        };
        // What it may do, before what it is: a handler that sends HTTP where none is granted
        // is refused for that, whatever else is wrong with it.
        let granted = self.granted(&name, &component, wasi)?;
        let pre = self.linker.instantiate_pre(&component).map_err(|source| {
            let imports = not_provided(&self.engine, &component);
            if imports.is_empty() {
                wrong_world(source)
            } else {
                LoadError::MissingImports {
                    name: name.clone(),
                    imports,
                }
            }
        })?;
        let spec = InstanceSpec {
            version: version.clone(),
            limits,
            metered: self.fuel,
            granted,
            ticker: self.ticker.clone(),
        };
        // Instantiate once under the limits, then check the exports, so a component that
        // cannot serve is refused here and never replaces a good one.
        probe(&name, &pre, &spec).await?;
        let pre = bindings::HandlerPre::new(pre)
            .context(
                "`handle` does not have the type \
                 func(info: batch-info, records: list<kinesis-record>) -> batch-outcome",
            )
            .map_err(wrong_world)?;
        Ok(Arc::new(HandlerComponent { pre, spec }))
    }

    /// Refuses what is no component before compiling it: not wasm, a core module, a fuel limit
    /// the engine cannot meter.
    fn check_bytes(&self, name: &str, bytes: &[u8], limits: &Limits) -> Result<(), LoadError> {
        if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
            return Err(LoadError::NotWasm {
                name: name.to_owned(),
            });
        }
        if bytes[4..8] == [1, 0, 0, 0] {
            return Err(LoadError::CoreModule {
                name: name.to_owned(),
            });
        }
        if limits.fuel.is_some() && !self.fuel {
            return Err(LoadError::Engine(format!(
                "{name}: a fuel limit needs a runtime made with fuel metering"
            )));
        }
        Ok(())
    }
}

/// Instantiates a component once under its limits, on trial.
async fn probe(
    name: &str,
    pre: &wasmtime::component::InstancePre<HostState>,
    spec: &InstanceSpec,
) -> Result<(), LoadError> {
    // On trial: start-up code runs, and what it does to the world is recorded, never done (its HTTP requests
    // answered 503 unsent, its state writes kept in an overlay dropped with it, a publish
    // refused), whatever the component turns out to be (a candidate, a shadow, a deploy
    // refused for want of a signature).
    let probe = CallContext {
        subscription: Arc::from("(check)"),
        stream: Arc::from(""),
        shard_id: Arc::from(""),
        publisher: None,
        delivered: None,
        metrics: None,
        log_budget: LogBudget::default(),
        effects: Some(Effects::new(false, VALIDATION_OVERLAY)),
        pending: None,
    };
    spec.probe(pre, &probe)
        .await
        .map_err(|source| LoadError::Instantiate {
            name: name.to_owned(),
            source,
        })
}

/// One validated handler component, ready to instantiate.
pub struct HandlerComponent {
    /// Checked against the world: its instances have the `handle` export the WIT says.
    pre: bindings::HandlerPre<HostState>,
    spec: InstanceSpec,
}

impl HandlerComponent {
    pub fn version(&self) -> &str {
        &self.spec.version
    }
}

#[async_trait::async_trait]
impl HandlerFactory for HandlerComponent {
    fn version(&self) -> String {
        self.spec.version.clone()
    }

    async fn instantiate(&self, ctx: &CallContext) -> Result<Box<dyn Handler>, CallError> {
        WasmInstance::new(&self.pre, &self.spec, ctx)
            .await
            .map(|i| Box::new(i) as Box<dyn Handler>)
            .map_err(|e| CallError::Instantiate {
                version: self.spec.version.clone(),
                message: e.to_string(),
            })
    }
}
