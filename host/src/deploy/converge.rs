//! Following the fleet: when the desired row of a subscription holds news (a later generation,
//! or a row of another lineage), this instance checks it (with trusted keys: its signature),
//! fetches it, checks its bytes, validates them under its own limits and swaps them in, or
//! refuses it (keeping its version and saying why in its heartbeat). A row that cannot be used
//! at all is refused the same way, and said once in the log.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::take::{NotTaken, Taken, Want};
use super::{DeployError, Deployer, Target};
use crate::fleet::{Fleet, FleetError};
use crate::fleet_table::Desired;
use crate::handler::HandlerFactory;
use crate::slot::Swapped;
use crate::status::fleet::Refusal;
use crate::version::short_version;
use crate::wasm::Urgency;

/// Which of the versions a slot holds is the one desired.
enum Hand {
    Current,
    Previous,
}

/// What a subscription runs, for the heartbeat: version, fleet generation, refusal.
pub type FleetState = (String, u64, Option<Refusal>);

/// The fleet generation and lineage a subscription applied (or refused) last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub generation: u64,
    pub deploy_id: String,
}

impl Applied {
    pub fn of(desired: &Desired) -> Applied {
        Applied {
            generation: desired.generation,
            deploy_id: desired.deploy_id.clone(),
        }
    }

    /// Whether `desired` is news to a subscription that applied `self`: a later generation, or
    /// a row that was replaced (another lineage), whatever its generation.
    pub fn is_older_than(&self, desired: &Desired) -> bool {
        desired.deploy_id != self.deploy_id || desired.generation > self.generation
    }
}

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
        let applied = self.apply(fleet, subscription, target, desired, true).await;
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

    /// Makes `desired` current in `target` (the caller holds its swap lock), checking its
    /// signature first when `trust` (see `take.rs`).
    pub(super) async fn apply(
        &self,
        fleet: &Fleet,
        subscription: &str,
        target: &Target,
        desired: &Desired,
        trust: bool,
    ) -> Result<Swapped, DeployError> {
        let want = Want {
            subscription,
            limits: target.limits,
            wasi: &target.wasi,
            desired,
            trust,
            // A version runs: compiling must not take its cores.
            urgency: Urgency::Background,
        };
        let version = &desired.component.version;
        let current = target.slot.version();
        let at_hand = || {
            if *version == current {
                Some(Hand::Current)
            } else if target.slot.previous_version().as_ref() == Some(version) {
                Some(Hand::Previous)
            } else {
                None
            }
        };
        let origin = format!("fleet generation {}", desired.generation);
        let swapped = match self.take(fleet, want, at_hand).await {
            Ok(Taken::AtHand(Hand::Current)) => Swapped {
                old: current.clone(),
                new: current,
            },
            Ok(Taken::AtHand(Hand::Previous)) => {
                let swapped = target.slot.rollback().expect("a previous version");
                self.swapped(subscription, target, &swapped, &origin);
                swapped
            }
            Ok(Taken::Loaded(component)) => {
                let swapped = target.slot.swap(component as Arc<dyn HandlerFactory>);
                self.swapped(subscription, target, &swapped, &origin);
                swapped
            }
            // The table did not answer: the next poll tries again.
            Err(NotTaken::Unreachable(e)) => return Err(DeployError::Fleet(e)),
            Err(NotTaken::Refused(e)) => {
                return Err(self.refused(target, desired, DeployError::Fleet(e)));
            }
            Err(NotTaken::Invalid(source)) => {
                let e = self.invalid(subscription, target, source);
                return Err(self.refused(target, desired, e));
            }
        };
        *target.applied.lock().expect("deployer poisoned") = Applied::of(desired);
        *target.refusal.lock().expect("deployer poisoned") = None;
        self.changed.notify_one();
        Ok(swapped)
    }

    /// Records that `desired` is refused here (not tried again until the row changes); answers
    /// why.
    fn refused(&self, target: &Target, desired: &Desired, e: DeployError) -> DeployError {
        *target.applied.lock().expect("deployer poisoned") = Applied::of(desired);
        *target.last_error.lock().expect("deployer poisoned") = Some(e.to_string());
        *target.refusal.lock().expect("deployer poisoned") = Some(Refusal {
            version: desired.component.version.clone(),
            generation: desired.generation,
            error: e.to_string(),
        });
        self.changed.notify_one();
        e
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
