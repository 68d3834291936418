//! Taking a fleet version: the one sequence by which the table's desired version comes to run
//! on this instance, at start (`start.rs`) and at each poll (`converge.rs`). Trusted first (with
//! trusted keys, its signature), then, unless this instance holds its bytes already, fetched,
//! checked against its version, loaded under the subscription's own limits and kept on disk
//! (`fleet::last_ran`).

use std::sync::Arc;

use super::Deployer;
use crate::config::{Limits, WasiGrants};
use crate::fleet::{Fleet, FleetError};
use crate::fleet_table::Desired;
use crate::wasm::{HandlerComponent, LoadError, Urgency};

/// A desired version to take for one subscription, and how.
pub(super) struct Want<'a> {
    pub subscription: &'a str,
    pub limits: Limits,
    pub wasi: &'a WasiGrants,
    pub desired: &'a Desired,
    /// Whether its signature is checked here (a rollback this instance wrote itself is not).
    pub trust: bool,
    /// How its bytes are compiled: at once at start, in the background while a version runs.
    pub urgency: Urgency,
}

/// How a desired version was taken.
pub(super) enum Taken<H> {
    /// This instance holds its bytes already (`H` says where).
    AtHand(H),
    /// Fetched, checked, loaded and kept on disk.
    Loaded(Arc<HandlerComponent>),
}

/// Why a desired version was not taken.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotTaken {
    /// The table did not answer: tried again at the next poll.
    #[error(transparent)]
    Unreachable(FleetError),
    /// Untrusted, or its bytes gone or not matching their version: refused until the row
    /// changes.
    #[error(transparent)]
    Refused(FleetError),
    /// Its bytes do not load here: refused until the row changes.
    #[error(transparent)]
    Invalid(LoadError),
}

impl Deployer {
    /// Takes `want.desired` from `fleet`: trusted (when `want.trust`), then what `at_hand`
    /// answers (looked at only once trusted), else its bytes fetched, checked, loaded and kept.
    pub(super) async fn take<H>(
        &self,
        fleet: &Fleet,
        want: Want<'_>,
        at_hand: impl FnOnce() -> Option<H>,
    ) -> Result<Taken<H>, NotTaken> {
        let Want {
            subscription,
            desired,
            ..
        } = want;
        if want.trust {
            fleet
                .trust(subscription, desired)
                .map_err(NotTaken::Refused)?;
        }
        if let Some(have) = at_hand() {
            return Ok(Taken::AtHand(have));
        }
        let bytes = match fleet.fetch(subscription, &desired.component).await {
            Ok(bytes) => bytes,
            Err(e @ FleetError::Table(_)) => return Err(NotTaken::Unreachable(e)),
            Err(e) => return Err(NotTaken::Refused(e)),
        };
        let origin = format!("fleet generation {}", desired.generation);
        let component = self
            .runtime
            .load(&origin, &bytes, want.limits, want.wasi, want.urgency)
            .await
            .map_err(NotTaken::Invalid)?;
        self.keep(subscription, desired, &bytes);
        Ok(Taken::Loaded(component))
    }
}
