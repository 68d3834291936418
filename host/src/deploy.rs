//! Replacing a subscription's handler while records flow: deploy (new bytes), rollback (the
//! version before), and watch (the handler file changed on disk).
//!
//! A new component is validated first, exactly as at start (it compiles, implements the world and
//! instantiates under the subscription's limits); only then does it go into the subscription's
//! [`HandlerSlot`]. Shard workers pick it up at their next batch boundary. A component that fails
//! validation never replaces the one serving.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::config::{Limits, WasiGrants};
use crate::handler::{HandlerFactory, HandlerSlot, Swapped};
use crate::metrics::Metrics;
use crate::wasm::{LoadError, Runtime, short_version, version_of};

/// How often a watched handler file is looked at.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// Why a swap did not happen. The old handler keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("no subscription `{name}` (this host runs: {})", quoted(.known))]
    UnknownSubscription {
        name: String,
        /// The subscriptions this host runs.
        known: Vec<String>,
    },
    #[error("subscription `{subscription}`: {source}; the handler serving is unchanged")]
    Invalid {
        subscription: String,
        source: LoadError,
    },
    #[error("subscription `{0}`: no earlier handler to roll back to")]
    NothingToRollBack(String),
}

/// `a`, `b`
fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One subscription's handler, as deploys see it.
struct Target {
    slot: Arc<HandlerSlot>,
    limits: Limits,
    wasi: WasiGrants,
    /// The configured handler file (watched when `watch`).
    path: PathBuf,
    watch: bool,
    /// One swap at a time per subscription (validation runs outside the slot's lock).
    swapping: tokio::sync::Mutex<()>,
    /// The last refused swap, for `status`; cleared by a successful one.
    last_error: Mutex<Option<String>>,
}

/// What `status` shows about a subscription's handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandlerState {
    pub version: String,
    pub previous_version: Option<String>,
    /// Why the last deploy, rollback or reload was refused, if it was.
    pub last_deploy_error: Option<String>,
}

/// Swaps handlers for every subscription of a host.
pub struct Deployer {
    runtime: Arc<Runtime>,
    metrics: Arc<Metrics>,
    targets: BTreeMap<String, Target>,
}

impl Deployer {
    pub fn new(runtime: Arc<Runtime>, metrics: Arc<Metrics>) -> Self {
        Deployer {
            runtime,
            metrics,
            targets: BTreeMap::new(),
        }
    }

    /// Adds a subscription whose handler lives in `slot`.
    pub fn add(
        &mut self,
        subscription: &str,
        slot: Arc<HandlerSlot>,
        limits: Limits,
        wasi: WasiGrants,
        path: PathBuf,
        watch: bool,
    ) {
        self.metrics
            .handler_version(subscription, None, &slot.version());
        self.targets.insert(
            subscription.to_owned(),
            Target {
                slot,
                limits,
                wasi,
                path,
                watch,
                swapping: tokio::sync::Mutex::new(()),
                last_error: Mutex::new(None),
            },
        );
    }

    fn target(&self, name: &str) -> Result<&Target, DeployError> {
        self.targets
            .get(name)
            .ok_or_else(|| DeployError::UnknownSubscription {
                name: name.to_owned(),
                known: self.targets.keys().cloned().collect(),
            })
    }

    /// Validates `bytes` as `subscription`'s handler and, only if they pass, makes them the
    /// version its shards switch to at their next batch. `origin` names the bytes in errors
    /// and logs (an upload, a file).
    pub async fn deploy(
        &self,
        subscription: &str,
        bytes: &[u8],
        origin: &str,
    ) -> Result<Swapped, DeployError> {
        let target = self.target(subscription)?;
        let _one_at_a_time = target.swapping.lock().await;
        let current = target.slot.version();
        if version_of(bytes) == current {
            // Already serving: nothing to swap, and the rollback target stays what it was.
            return Ok(Swapped {
                old: current.clone(),
                new: current,
            });
        }
        let loaded = self
            .runtime
            .load_bytes(origin, bytes, target.limits, &target.wasi)
            .await;
        let component = match loaded {
            Ok(c) => c,
            Err(source) => {
                let e = DeployError::Invalid {
                    subscription: subscription.to_owned(),
                    source,
                };
                tracing::error!(subscription, "handler refused: {e}");
                *target.last_error.lock().expect("deployer poisoned") = Some(e.to_string());
                self.metrics.swap(subscription, false);
                return Err(e);
            }
        };
        let swapped = target.slot.swap(component as Arc<dyn HandlerFactory>);
        self.swapped(subscription, target, &swapped, origin);
        Ok(swapped)
    }

    /// Restores the version `subscription` ran before its last swap.
    pub async fn rollback(&self, subscription: &str) -> Result<Swapped, DeployError> {
        let target = self.target(subscription)?;
        let _one_at_a_time = target.swapping.lock().await;
        let swapped = target
            .slot
            .rollback()
            .ok_or_else(|| DeployError::NothingToRollBack(subscription.to_owned()))?;
        self.swapped(subscription, target, &swapped, "rollback");
        Ok(swapped)
    }

    fn swapped(&self, subscription: &str, target: &Target, swapped: &Swapped, origin: &str) {
        tracing::info!(
            subscription, from = short_version(&swapped.old), to = short_version(&swapped.new),
            version = %swapped.new, origin,
            "handler swapped; shards switch at their next batch"
        );
        *target.last_error.lock().expect("deployer poisoned") = None;
        self.metrics.swap(subscription, true);
        self.metrics
            .handler_version(subscription, Some(&swapped.old), &swapped.new);
    }

    /// Every subscription's handler, by name.
    pub fn handlers(&self) -> BTreeMap<String, HandlerState> {
        self.targets
            .iter()
            .map(|(name, t)| {
                let state = HandlerState {
                    version: t.slot.version(),
                    previous_version: t.slot.previous_version(),
                    last_deploy_error: t.last_error.lock().expect("deployer poisoned").clone(),
                };
                (name.clone(), state)
            })
            .collect()
    }

    /// Whether any subscription has `watch = true`.
    pub fn watches(&self) -> bool {
        self.targets.values().any(|t| t.watch)
    }

    /// Reloads each watched handler when its file changes on disk (size or modification time),
    /// validated like a deploy. A file caught half-written fails validation and is tried again
    /// at its next change. Runs until `stop` fires.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let mut seen: BTreeMap<&str, Option<(u64, SystemTime)>> = self
            .targets
            .iter()
            .filter(|(_, t)| t.watch)
            .map(|(name, t)| (name.as_str(), stamp(&t.path)))
            .collect();
        let mut tick = tokio::time::interval(WATCH_EVERY);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            for (name, last) in seen.iter_mut() {
                let target = &self.targets[*name];
                let now = stamp(&target.path);
                if now == *last || now.is_none() {
                    continue;
                }
                *last = now;
                let bytes = match std::fs::read(&target.path) {
                    Ok(b) => b,
                    Err(e) => {
                        tracing::warn!(subscription = name, file = %target.path.display(), "cannot read the watched handler: {e}");
                        continue;
                    }
                };
                tracing::info!(subscription = name, file = %target.path.display(), "handler file changed; reloading");
                // A refused reload is logged and shown in status by `deploy`.
                let _ = self
                    .deploy(name, &bytes, &target.path.display().to_string())
                    .await;
            }
        }
    }
}

fn stamp(path: &std::path::Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}
