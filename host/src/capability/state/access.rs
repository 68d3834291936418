//! What a handler's state is made of, apart from the calls on it: an open [`Bucket`] and a
//! subscription's [`StateAccess`]. The generated bindings and the host's state name these
//! types; the calls (`calls.rs`, `many.rs`) implement the bindings' traits on a store's view of its part.

use std::sync::Arc;

use super::refusals::Refusals;
use crate::state::StateGrant;
use crate::state::StateStore;

/// An open bucket: the prefix its keys are stored under.
pub struct Bucket {
    pub(super) name: String,
    pub(super) prefix: String,
}

/// A subscription's state: its grant, the store the grant names, and the log of refused
/// buckets.
#[derive(Clone)]
pub(crate) struct StateAccess {
    pub(crate) grant: Arc<StateGrant>,
    pub(crate) store: Arc<dyn StateStore>,
    /// What an instance on trial reads through (under its run's overlay): the same state, with
    /// permits of its own (`Stores::trial_of`).
    pub(crate) trial_store: Arc<dyn StateStore>,
    pub(crate) refusals: Arc<Refusals>,
}
