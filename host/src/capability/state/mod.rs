//! The capability `state`: `[subscription.state]` and the host side of `wasi:keyvalue`
//! (`store`, `atomics`, `batch`) and of `shardhost:handler/conditional` (`calls.rs`,
//! `many.rs`), over the stores of `crate::state`. `grant.rs` reads the table; `access.rs` is
//! what a component's instances share (the grant, the store, the refused buckets' log).
//!
//! On trial (`effects`), an instance reads the store through its run's overlay (with permits of
//! its own) and its writes stay in the overlay.

pub(crate) mod access;
mod calls;
mod grant;
mod many;
mod refusals;

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{HasData, Linker};

use super::{
    Capability, GrantError, Host, InstanceContext, Part, Prepared, Shared, View, imports_of, list,
};
use crate::bindings::shardhost::handler::conditional;
use crate::bindings::wasi::keyvalue::{atomics, batch, store};
use crate::config::Grants;
pub use crate::state::{StateGrant, StateStoreKind};
pub use access::Bucket;
use access::StateAccess;
pub use grant::{is_bucket_name, namespace};

/// The capability: `[subscription.state]`, `wasi:keyvalue` and the conditional writes.
pub struct State;

/// The imports that need a state grant.
const GRANTED: [&str; 2] = ["wasi:keyvalue/", "shardhost:handler/conditional"];

impl<T: Host> Capability<T> for State {
    fn add_to_linker(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        store::add_to_linker::<T, StateData>(linker, view::<T>)?;
        atomics::add_to_linker::<T, StateData>(linker, view::<T>)?;
        batch::add_to_linker::<T, StateData>(linker, view::<T>)?;
        conditional::add_to_linker::<T, StateData>(linker, view::<T>)
    }

    fn provides(&self, package: &str, version: &str) -> bool {
        let keyvalue = [
            "wasi:keyvalue/store",
            "wasi:keyvalue/atomics",
            "wasi:keyvalue/batch",
        ];
        (keyvalue.contains(&package) && version == "0.2.0-draft")
            || (package == "shardhost:handler/conditional" && version == "0.1.2")
    }

    fn refusal(&self, imports: &[String], grants: &Grants) -> Option<String> {
        let keeps = imports_of(imports, &GRANTED);
        (grants.get::<StateGrant>().is_none() && !keeps.is_empty()).then(|| {
            format!(
                "imports {} (it keeps state), but the subscription grants no state: add a \
                 [subscription.state] table (store = \"memory\" for one instance, or \"dynamodb\" \
                 with a table; `shardhost invoke`: --state)",
                list(&keeps)
            )
        })
    }

    fn prepare(&self, grants: &Grants, shared: &Shared) -> Result<Box<dyn Prepared>, GrantError> {
        let stores = shared.get::<crate::state::Stores>();
        let access = grants.get::<StateGrant>().map(|grant| StateAccess {
            store: stores.of(grant),
            trial_store: stores.trial_of(grant),
            grant: Arc::new(grant.clone()),
            refusals: Arc::default(),
        });
        Ok(Box::new(Ready { access }))
    }
}

/// What the state calls of an instance see.
type StateView<'a> = View<'a, StatePart>;

/// The bindings' name for [`StateView`].
struct StateData;

impl HasData for StateData {
    type Data<'a> = StateView<'a>;
}

fn view<T: Host>(store: &mut T) -> StateView<'_> {
    store.view::<StatePart>()
}

/// A component's state: none when it has no grant (every call refused).
struct Ready {
    access: Option<StateAccess>,
}

impl Prepared for Ready {
    fn instance(&self, cx: &InstanceContext<'_>) -> Option<Box<dyn Part>> {
        let access = self.access.clone().map(|access| match &cx.call.effects {
            // On trial: reads see the store (with the trial's own permits), writes stay in the
            // run's overlay.
            Some(effects) => StateAccess {
                store: effects.overlaid(access.trial_store.clone()),
                ..access
            },
            // Committed with the checkpoint: the shard's writes stay with the shard until then.
            None if access.grant.commit == crate::state::Commit::WithCheckpoint => {
                match &cx.call.pending {
                    Some(pending) => StateAccess {
                        store: pending.view(access.store.clone()),
                        ..access
                    },
                    None => access,
                }
            }
            None => access,
        });
        Some(Box::new(StatePart {
            access,
            stalled: None,
        }))
    }
}

/// One instance's state.
struct StatePart {
    /// None: every state call is refused.
    access: Option<StateAccess>,
    /// The deadline of the call in which a state call ran out of time: the rest of that call's
    /// state calls fail at once instead of each waiting out its timeout.
    stalled: Option<Instant>,
}

impl Part for StatePart {
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
