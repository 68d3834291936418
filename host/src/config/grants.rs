//! What a subscription grants its handler, as config holds it without knowing it.
//!
//! Each capability (`capability/`) owns its table of a `[[subscription]]` (`http`, `state`, …):
//! it implements [`GrantTable`] to read that table with the [`Walker`] (every problem reported
//! with file, line and key, like the rest of the file) and puts what it read into the
//! subscription's [`Grants`] as its own [`Grant`] type. Config walks the file and hands each
//! table its subscription; it never names a capability.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::parse::walk::{Section, Walker};
use super::{KinesisConfig, LeaseStoreKind, Limits};

/// What one capability's table grants a subscription's handler. Its `Debug` never shows a
/// secret (a value that came from the environment).
pub trait Grant: GrantValue + fmt::Debug + Send + Sync {
    /// The lines `shardhost check` shows under the handler: names, origins and bounds, never
    /// a value.
    fn describe(&self) -> Vec<String>;
}

/// What a grant is by being a plain value: compared with another grant, and seen as `Any`.
/// Every `PartialEq` type has it; a grant type only implements [`Grant::describe`].
pub trait GrantValue: Any {
    /// `self == other`, for grants of the same type; `false` for any other type.
    fn same(&self, other: &dyn Grant) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<G: Any + PartialEq> GrantValue for G {
    fn same(&self, other: &dyn Grant) -> bool {
        other.as_any().downcast_ref::<G>() == Some(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Everything a subscription grants its handler beyond computing: one [`Grant`] per
/// capability whose table it has, in the order the tables are read. Empty: nothing.
#[derive(Clone, Default)]
pub struct Grants(Vec<Arc<dyn Grant>>);

/// The name the rest of the host knows the grants by.
pub type WasiGrants = Grants;

impl Grants {
    /// The grant of type `G`, if given.
    pub fn get<G: Grant>(&self) -> Option<&G> {
        self.0.iter().find_map(|g| g.as_any().downcast_ref::<G>())
    }

    /// Gives `grant`, in the place of one of its type if there is one.
    pub fn insert<G: Grant>(&mut self, grant: G) {
        match self.0.iter_mut().find(|g| g.as_any().is::<G>()) {
            Some(slot) => *slot = Arc::new(grant),
            None => self.0.push(Arc::new(grant)),
        }
    }

    /// Changes the grant of type `G`, if given.
    pub fn update<G: Grant + Clone>(&mut self, change: impl FnOnce(&mut G)) {
        if let Some(mut grant) = self.get::<G>().cloned() {
            change(&mut grant);
            self.insert(grant);
        }
    }

    /// These grants and `grant`.
    pub fn with<G: Grant>(mut self, grant: G) -> Grants {
        self.insert(grant);
        self
    }

    /// Takes the grant of type `G` away.
    pub fn remove<G: Grant>(&mut self) {
        self.0.retain(|g| !g.as_any().is::<G>());
    }

    /// `check`'s lines for every grant.
    pub fn describe(&self) -> Vec<String> {
        self.0.iter().flat_map(|g| g.describe()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl PartialEq for Grants {
    fn eq(&self, other: &Grants) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .all(|g| other.0.iter().any(|o| g.same(o.as_ref())))
    }
}

impl Eq for Grants {}

impl fmt::Debug for Grants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.0).finish()
    }
}

/// What a table may need besides its own keys: the host's and the subscription's settings.
pub struct TableContext<'a> {
    /// `[host] name`.
    pub service: &'a str,
    /// The subscription's `name` (empty when missing or invalid: already reported).
    pub subscription: &'a str,
    pub leases: &'a LeaseStoreKind,
    pub kinesis: &'a KinesisConfig,
    pub limits: &'a Limits,
}

/// A capability's part of a `[[subscription]]`: the keys it reads and how.
pub(crate) trait GrantTable: Sync {
    /// The keys of a `[[subscription]]` it reads (its table's name, e.g. `http`); none for a
    /// capability every handler has.
    fn keys(&self) -> &'static [&'static str] {
        &[]
    }
    /// Reads its keys of one subscription, reporting every problem on `w`, and puts what they
    /// grant into `grants` (nothing when its table is absent).
    fn read(
        &self,
        w: &mut Walker<'_>,
        sub: &Section<'_, '_>,
        cx: &TableContext<'_>,
        grants: &mut Grants,
    ) {
        let _ = (w, sub, cx, grants);
    }
}
