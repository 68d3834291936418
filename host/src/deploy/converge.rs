//! Following the fleet: when the desired version of a subscription moves to a new generation,
//! this instance fetches it, checks it, validates it under its own limits and swaps it in, or
//! refuses it (keeping its version and saying why in its heartbeat).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{DeployError, Deployer, Target};
use crate::fleet::{Fleet, FleetError};
use crate::handler::{HandlerFactory, Swapped};
use crate::lease::Desired;
use crate::status::fleet::Refusal;
use crate::wasm::short_version;

/// What a subscription runs, for the heartbeat: version, fleet generation, refusal.
pub type FleetState = (String, u64, Option<Refusal>);

impl Deployer {
    /// Converges `subscription` on `desired` if its generation is new to this instance. A
    /// version that cannot be fetched is tried again at the next poll; one that fails validation
    /// is refused until the next generation.
    pub async fn converge(&self, fleet: &Fleet, subscription: &str, desired: &Desired) {
        let Ok(target) = self.target(subscription) else {
            return;
        };
        if desired.generation <= target.generation.load(Ordering::Acquire) {
            return;
        }
        let _one_at_a_time = target.swapping.lock().await;
        if desired.generation <= target.generation.load(Ordering::Acquire) {
            return;
        }
        let version = short_version(&desired.component.version);
        tracing::info!(
            subscription, version, generation = desired.generation, by = %desired.deployed_by,
            "the fleet's desired handler changed; converging"
        );
        if let Err(e) = self.apply(fleet, subscription, target, desired).await {
            tracing::error!(
                subscription,
                version,
                generation = desired.generation,
                "{e}"
            );
        }
    }

    /// Makes `desired` current in `target` (the caller holds its swap lock).
    pub(super) async fn apply(
        &self,
        fleet: &Fleet,
        subscription: &str,
        target: &Target,
        desired: &Desired,
    ) -> Result<Swapped, DeployError> {
        let want = &desired.component.version;
        let current = target.slot.version();
        let origin = format!("fleet generation {}", desired.generation);
        let swapped = if *want == current {
            Swapped {
                old: current.clone(),
                new: current,
            }
        } else if target.slot.previous_version().as_ref() == Some(want) {
            let swapped = target.slot.rollback().expect("a previous version");
            self.swapped(subscription, target, &swapped, &origin);
            swapped
        } else {
            let bytes = match fleet.fetch(subscription, &desired.component).await {
                Ok(bytes) => bytes,
                // The table did not answer: the next poll tries again.
                Err(e @ FleetError::Table(_)) => return Err(DeployError::Fleet(e)),
                // Bytes gone or not matching their version: refused until the next generation.
                Err(e) => {
                    let e = DeployError::Fleet(e);
                    *target.last_error.lock().expect("deployer poisoned") = Some(e.to_string());
                    self.refused(target, desired, &e);
                    return Err(e);
                }
            };
            match self.validate(subscription, target, &bytes, &origin).await {
                Ok(component) => {
                    let swapped = target.slot.swap(component as Arc<dyn HandlerFactory>);
                    self.swapped(subscription, target, &swapped, &origin);
                    swapped
                }
                Err(e) => {
                    self.refused(target, desired, &e);
                    return Err(e);
                }
            }
        };
        target
            .generation
            .store(desired.generation, Ordering::Release);
        *target.refusal.lock().expect("deployer poisoned") = None;
        self.changed.notify_one();
        Ok(swapped)
    }

    /// Records that `desired` is refused here: not tried again until the next generation.
    fn refused(&self, target: &Target, desired: &Desired, e: &DeployError) {
        target
            .generation
            .store(desired.generation, Ordering::Release);
        *target.refusal.lock().expect("deployer poisoned") = Some(Refusal {
            version: desired.component.version.clone(),
            generation: desired.generation,
            error: e.to_string(),
        });
        self.changed.notify_one();
    }

    /// Records the fleet state a subscription started in: the generation its version belongs
    /// to, and the desired version it refused at start, if it did.
    pub fn started_at(&self, subscription: &str, generation: u64, refusal: Option<Refusal>) {
        if let Some(target) = self.targets.get(subscription) {
            target.generation.store(generation, Ordering::Release);
            if let Some(r) = &refusal {
                *target.last_error.lock().expect("deployer poisoned") = Some(r.error.clone());
            }
            *target.refusal.lock().expect("deployer poisoned") = refusal;
        }
    }

    /// Every subscription's version, fleet generation and refusal, by name.
    pub fn fleet_states(&self) -> BTreeMap<String, FleetState> {
        self.targets
            .iter()
            .map(|(name, t)| {
                let state = (
                    t.slot.version(),
                    t.generation.load(Ordering::Acquire),
                    t.refusal.lock().expect("deployer poisoned").clone(),
                );
                (name.clone(), state)
            })
            .collect()
    }
}

impl From<FleetError> for DeployError {
    fn from(e: FleetError) -> Self {
        DeployError::Fleet(e)
    }
}
