//! Replacing a subscription's handler while records flow: deploy (new bytes), rollback (the
//! version before), watch (the handler file changed on disk, `watch.rs`), and, with a DynamoDB
//! lease table, converging on the fleet's desired version (`converge.rs`).
//!
//! A new component is validated first, exactly as at start (it compiles, implements the world and
//! instantiates under the subscription's limits); only then is it written as the fleet's desired
//! version (with a fleet) and put into the subscription's [`HandlerSlot`]. Shard workers pick it
//! up at their next batch boundary. A component that fails validation never replaces the one
//! serving, and is never written as desired.

mod canary;
mod converge;
mod shadow;
mod start;
pub mod sync;
mod take;
mod watch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::config::{Limits, SubscriptionConfig, WasiGrants};
use crate::fleet::last_ran::{Kept, LastRan};
use crate::fleet::{Fleet, FleetError, Sign};
use crate::fleet_table::Desired;
use crate::handler::HandlerFactory;
use crate::metrics::Metrics;
use crate::slot::{HandlerSlot, Swapped};
use crate::status::fleet::Refusal;
use crate::version::{short_version, version_of};
use crate::wasm::{HandlerComponent, LoadError, Runtime, Urgency};
pub use converge::Applied;
pub(crate) use start::StartFailed;

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
    #[error("subscription `{0}` has no shadow (set one with deploy --shadow)")]
    NoShadow(String),
    /// The fleet's desired state could not be written or read; nothing was swapped.
    #[error("{0}; the handler serving is unchanged")]
    Fleet(#[source] FleetError),
}

impl DeployError {
    /// Whether the deploy was refused for want of a trusted signature (or for a signature made
    /// for a generation the row has passed).
    pub fn unsigned(&self) -> bool {
        matches!(
            self,
            DeployError::Fleet(
                FleetError::Untrusted { .. }
                    | FleetError::UntrustedTrial { .. }
                    | FleetError::Unvouched { .. }
            )
        )
    }

    pub fn moved(&self) -> bool {
        matches!(self, DeployError::Fleet(FleetError::Moved { .. }))
    }
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
    /// The fleet generation this instance applied or refused last (0: none).
    applied: Mutex<Applied>,
    /// The last unusable desired row seen (said once in the log, not at every poll).
    bad_row: Mutex<Option<String>>,
    /// The desired version this instance refused, while it runs another.
    refusal: Mutex<Option<Refusal>>,
    /// The rollout whose version this instance could not run (not tried again).
    canary_refused: Mutex<Option<String>>,
    /// The fleet shadow this instance could not run (not tried again).
    shadow_refused: Mutex<Option<String>>,
    /// Why a rollout or the fleet's shadow was refused here, while its row stands (heartbeat).
    refused_trial: Mutex<BTreeMap<Trial, Refusal>>,
}

/// What runs on trial by the fleet's rows beside the desired version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Trial {
    Rollout,
    Shadow,
}

/// What `status` shows about a subscription's handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandlerState {
    pub version: String,
    pub previous_version: Option<String>,
    /// Why the last deploy, rollback or reload was refused, if it was.
    pub last_deploy_error: Option<String>,
    /// The candidate in shadow, and how it compares.
    pub shadow: Option<crate::shadow::ShadowReport>,
}

/// A deploy or rollback that went through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deployed {
    pub swapped: Swapped,
    /// With a fleet: the desired state's generation now.
    pub generation: Option<u64>,
}

/// The fleet a deployer writes to and follows, and who it says deploys.
struct FleetLink {
    fleet: Arc<Fleet>,
    owner: String,
    /// Where the version each subscription runs is kept on disk.
    last_ran: Option<LastRan>,
}

/// Swaps handlers for every subscription of a host.
pub struct Deployer {
    runtime: Arc<Runtime>,
    metrics: Arc<Metrics>,
    targets: BTreeMap<String, Target>,
    fleet: Option<FleetLink>,
    /// Notified when a version or a refusal changes (the heartbeat is written at once).
    changed: Arc<Notify>,
}

impl Deployer {
    pub fn new(runtime: Arc<Runtime>, metrics: Arc<Metrics>) -> Self {
        Deployer {
            runtime,
            metrics,
            targets: BTreeMap::new(),
            fleet: None,
            changed: Arc::new(Notify::new()),
        }
    }

    /// Adds a subscription whose handler lives in `slot`.
    pub fn add(&mut self, s: &SubscriptionConfig, slot: Arc<HandlerSlot>) {
        self.metrics.handler_version(&s.name, None, &slot.version());
        self.targets.insert(
            s.name.clone(),
            Target {
                slot,
                limits: s.limits,
                wasi: s.wasi.clone(),
                path: s.handler.clone(),
                watch: s.watch,
                swapping: tokio::sync::Mutex::new(()),
                last_error: Mutex::new(None),
                applied: Mutex::new(Applied::default()),
                bad_row: Mutex::new(None),
                refusal: Mutex::new(None),
                canary_refused: Mutex::new(None),
                shadow_refused: Mutex::new(None),
                refused_trial: Mutex::new(BTreeMap::new()),
            },
        );
    }

    /// Deploys and rollbacks go to `fleet` (as `owner`) from now on; the version each
    /// subscription runs is kept in `last_ran`.
    pub fn join_fleet(&mut self, fleet: Arc<Fleet>, owner: &str, last_ran: Option<LastRan>) {
        self.fleet = Some(FleetLink {
            fleet,
            owner: owner.to_owned(),
            last_ran,
        });
    }

    /// The subscriptions, by name.
    pub fn subscriptions(&self) -> Vec<String> {
        self.targets.keys().cloned().collect()
    }

    /// Notified whenever a version or a refusal changes.
    pub fn changes(&self) -> Arc<Notify> {
        self.changed.clone()
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
    /// version its shards switch to at their next batch (with a fleet: first writes them as the
    /// fleet's desired version, signed as `sign` says). `origin` names the bytes in errors and
    /// logs (an upload, a file).
    pub async fn deploy(
        &self,
        subscription: &str,
        bytes: &[u8],
        origin: &str,
        sign: &Sign<'_>,
    ) -> Result<Deployed, DeployError> {
        let target = self.target(subscription)?;
        if let Some(link) = &self.fleet {
            // Refused before anything of the bytes runs, even on trial.
            link.fleet.signs(subscription, &version_of(bytes), sign)?;
        }
        let _one_at_a_time = target.swapping.lock().await;
        let current = target.slot.version();
        let component = if version_of(bytes) == current {
            None
        } else {
            Some(self.validate(subscription, target, bytes, origin).await?)
        };
        let generation = match &self.fleet {
            Some(link) => {
                let running = self.running_bytes(target, &current);
                let by = format!("{} ({origin})", link.owner);
                let desired = link
                    .fleet
                    .publish(subscription, bytes, running.as_deref(), &by, sign)
                    .await
                    .map_err(DeployError::Fleet)?;
                *target.applied.lock().expect("deployer poisoned") = Applied::of(&desired);
                *target.refusal.lock().expect("deployer poisoned") = None;
                self.keep(subscription, &desired, bytes);
                Some(desired.generation)
            }
            None => None,
        };
        let swapped = match component {
            Some(component) => {
                let swapped = target.slot.swap(component as Arc<dyn HandlerFactory>);
                self.swapped(subscription, target, &swapped, origin);
                swapped
            }
            // Already serving: nothing to swap, and the rollback target stays what it was.
            None => Swapped {
                old: current.clone(),
                new: current,
            },
        };
        self.changed.notify_one();
        Ok(Deployed {
            swapped,
            generation,
        })
    }

    /// Loads `bytes` under the subscription's limits; a refusal is logged and kept for status.
    async fn validate(
        &self,
        subscription: &str,
        target: &Target,
        bytes: &[u8],
        origin: &str,
    ) -> Result<Arc<HandlerComponent>, DeployError> {
        let loaded = self
            .runtime
            // A version runs: compiling must not take its cores.
            .load(
                origin,
                bytes,
                target.limits,
                &target.wasi,
                Urgency::Background,
            )
            .await;
        loaded.map_err(|source| self.invalid(subscription, target, source))
    }

    /// A component refused by validation: logged, kept for status and counted.
    fn invalid(&self, subscription: &str, target: &Target, source: LoadError) -> DeployError {
        let e = DeployError::Invalid {
            subscription: subscription.to_owned(),
            source,
        };
        tracing::error!(subscription, "handler refused: {e}");
        *target.last_error.lock().expect("deployer poisoned") = Some(e.to_string());
        self.metrics.swap(subscription, false);
        e
    }

    /// The bytes of the version running now, when the configured file still holds it (the
    /// rollback target of a fleet's first deploy).
    fn running_bytes(&self, target: &Target, current: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(&target.path).ok()?;
        (version_of(&bytes) == current).then_some(bytes)
    }

    /// Restores the version `subscription` ran before its last swap; with a fleet, the version
    /// the fleet ran before its last deploy, on every instance (signed as `sign` says).
    pub async fn rollback(
        &self,
        subscription: &str,
        sign: &Sign<'_>,
    ) -> Result<Deployed, DeployError> {
        let target = self.target(subscription)?;
        let _one_at_a_time = target.swapping.lock().await;
        if let Some(link) = &self.fleet {
            let by = format!("{} (rollback)", link.owner);
            let desired =
                link.fleet
                    .rollback(subscription, &by, sign)
                    .await
                    .map_err(|e| match e {
                        FleetError::NothingToRollBack(s) => DeployError::NothingToRollBack(s),
                        e => DeployError::Fleet(e),
                    })?;
            let swapped = self
                .apply(&link.fleet, subscription, target, &desired, false)
                .await?;
            return Ok(Deployed {
                swapped,
                generation: Some(desired.generation),
            });
        }
        let swapped = target
            .slot
            .rollback()
            .ok_or_else(|| DeployError::NothingToRollBack(subscription.to_owned()))?;
        self.swapped(subscription, target, &swapped, "rollback");
        self.changed.notify_one();
        Ok(Deployed {
            swapped,
            generation: None,
        })
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

    /// Keeps `bytes` on disk as the fleet version `subscription` runs (see `fleet::last_ran`).
    fn keep(&self, subscription: &str, desired: &Desired, bytes: &[u8]) {
        if let Some(last_ran) = self.fleet.as_ref().and_then(|l| l.last_ran.as_ref()) {
            last_ran.save(subscription, &Kept::of(desired), bytes);
        }
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
                    shadow: t.slot.shadow().1.map(|s| s.report()),
                };
                (name.clone(), state)
            })
            .collect()
    }
}
