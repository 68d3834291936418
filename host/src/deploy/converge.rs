//! Following the fleet: when the desired row of a subscription holds news (a later generation,
//! or a row of another lineage), this instance checks it (with trusted keys: its signature),
//! fetches it, checks its bytes, validates them under its own limits and swaps them in, or
//! refuses it (keeping its version and saying why in its heartbeat). A row that cannot be used
//! at all is refused the same way, and said once in the log.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Applied, DeployError, Deployer, Target};
use crate::fleet::{Fleet, FleetError};
use crate::fleet_table::Desired;
use crate::handler::HandlerFactory;
use crate::slot::Swapped;
use crate::status::fleet::Refusal;
use crate::version::short_version;

/// What a subscription runs, for the heartbeat: version, fleet generation, refusal.
pub type FleetState = (String, u64, Option<Refusal>);

impl Deployer {
    /// Reads `subscription`'s desired row and converges on it.
    pub async fn follow(&self, fleet: &Fleet, subscription: &str) {
        match fleet.desired(subscription).await {
            Ok(Some(desired)) => self.converge(fleet, subscription, &desired).await,
            Ok(None) => {}
            Err(e @ FleetError::BadRow { .. }) => self.bad_row(subscription, e),
            Err(e) => tracing::warn!(subscription, "cannot read the desired handler version: {e}"),
        }
    }

    /// Converges `subscription` on `desired` if it is news to this instance. A version that
    /// cannot be fetched is tried again at the next poll; one that is untrusted or fails
    /// validation is refused until the row changes.
    pub async fn converge(&self, fleet: &Fleet, subscription: &str, desired: &Desired) {
        let Ok(target) = self.target(subscription) else {
            return;
        };
        let was_bad = target.bad_row.lock().expect("deployer poisoned").take();
        if !self.is_news(target, desired) {
            if was_bad.is_some() {
                // The bad row was put back as it was: nothing is refused any more.
                *target.refusal.lock().expect("deployer poisoned") = None;
                self.changed.notify_one();
            }
            return;
        }
        let _one_at_a_time = target.swapping.lock().await;
        if !self.is_news(target, desired) {
            return;
        }
        let version = short_version(&desired.component.version);
        tracing::info!(
            subscription, version, generation = desired.generation, by = %desired.deployed_by,
            "the fleet's desired handler changed; converging"
        );
        let applied = match fleet.trust(subscription, desired) {
            Ok(()) => self.apply(fleet, subscription, target, desired).await,
            Err(e) => {
                let e = DeployError::Fleet(e);
                self.refused(target, desired, &e);
                Err(e)
            }
        };
        if let Err(e) = applied {
            tracing::error!(
                subscription,
                version,
                generation = desired.generation,
                "{e}"
            );
        }
    }

    fn is_news(&self, target: &Target, desired: &Desired) -> bool {
        target
            .applied
            .lock()
            .expect("deployer poisoned")
            .is_older_than(desired)
    }

    /// Records an unusable desired row as a refusal (logged when it first appears or changes).
    fn bad_row(&self, subscription: &str, e: FleetError) {
        let Ok(target) = self.target(subscription) else {
            return;
        };
        let FleetError::BadRow { source, .. } = &e else {
            return;
        };
        let text = e.to_string();
        let mut last = target.bad_row.lock().expect("deployer poisoned");
        if last.as_deref() == Some(text.as_str()) {
            return;
        }
        tracing::error!(subscription, "{text}; this instance keeps its version");
        *last = Some(text.clone());
        *target.refusal.lock().expect("deployer poisoned") = Some(Refusal {
            version: source.version.clone().unwrap_or_default(),
            generation: source.generation.unwrap_or(0),
            error: text,
        });
        self.changed.notify_one();
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
                // Bytes gone or not matching their version: refused until the row changes.
                Err(e) => {
                    let e = DeployError::Fleet(e);
                    self.refused(target, desired, &e);
                    return Err(e);
                }
            };
            match self.validate(subscription, target, &bytes, &origin).await {
                Ok(component) => {
                    let swapped = target.slot.swap(component as Arc<dyn HandlerFactory>);
                    self.swapped(subscription, target, &swapped, &origin);
                    self.keep(subscription, desired, &bytes);
                    swapped
                }
                Err(e) => {
                    self.refused(target, desired, &e);
                    return Err(e);
                }
            }
        };
        *target.applied.lock().expect("deployer poisoned") = Applied::of(desired);
        *target.refusal.lock().expect("deployer poisoned") = None;
        self.changed.notify_one();
        Ok(swapped)
    }

    /// Records that `desired` is refused here: not tried again until the row changes.
    fn refused(&self, target: &Target, desired: &Desired, e: &DeployError) {
        *target.applied.lock().expect("deployer poisoned") = Applied::of(desired);
        *target.last_error.lock().expect("deployer poisoned") = Some(e.to_string());
        *target.refusal.lock().expect("deployer poisoned") = Some(Refusal {
            version: desired.component.version.clone(),
            generation: desired.generation,
            error: e.to_string(),
        });
        self.changed.notify_one();
    }

    /// Records the fleet state a subscription started in: the generation and lineage its
    /// version belongs to (or that it refused), and the refusal, if it refused one (`bad_row`:
    /// because the row could not be used at all).
    pub fn started_at(
        &self,
        subscription: &str,
        applied: Applied,
        refusal: Option<Refusal>,
        bad_row: bool,
    ) {
        if let Some(target) = self.targets.get(subscription) {
            *target.applied.lock().expect("deployer poisoned") = applied;
            if let Some(r) = &refusal {
                *target.last_error.lock().expect("deployer poisoned") = Some(r.error.clone());
                if bad_row {
                    *target.bad_row.lock().expect("deployer poisoned") = Some(r.error.clone());
                }
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
                    t.applied.lock().expect("deployer poisoned").generation,
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
