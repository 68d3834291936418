//! The deploy slot: the handler a subscription runs now, swapped while records flow (deploy,
//! rollback, watch), with the rollout (canary) and the shadow beside it. Above the [`handler`]
//! seam: dispatch reads the slot at every batch boundary, deploy writes it.
//!
//! [`handler`]: crate::handler

use std::sync::Arc;

use crate::handler::HandlerFactory;

/// The handler a subscription runs now, replaceable while records flow (deploy, rollback,
/// watch). Shard workers look at it at every batch boundary: a batch runs wholly on the
/// version that was current when it started, and the next batch picks up a new one.
pub struct HandlerSlot {
    state: std::sync::RwLock<SlotState>,
    /// Bumped on every swap, so a worker checks for a new version with one atomic load.
    generation: std::sync::atomic::AtomicU64,
    /// The candidate in shadow, if any (`deploy --shadow`).
    shadow: std::sync::RwLock<Option<Arc<crate::shadow::Shadow>>>,
    /// Bumped whenever the shadow is set or dropped; a shadow change drops no live instance.
    shadow_generation: std::sync::atomic::AtomicU64,
    /// A rollout in progress (`deploy --canary`): its shards run its version.
    canary: std::sync::RwLock<Option<Arc<crate::canary::Canary<dyn HandlerFactory>>>>,
}

struct SlotState {
    current: Arc<dyn HandlerFactory>,
    /// What ran before the last swap, for rollback.
    previous: Option<Arc<dyn HandlerFactory>>,
}

/// The versions on either side of a swap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swapped {
    pub old: String,
    pub new: String,
}

impl HandlerSlot {
    pub fn new(handler: Arc<dyn HandlerFactory>) -> Self {
        HandlerSlot {
            state: std::sync::RwLock::new(SlotState {
                current: handler,
                previous: None,
            }),
            generation: std::sync::atomic::AtomicU64::new(0),
            shadow: std::sync::RwLock::new(None),
            shadow_generation: std::sync::atomic::AtomicU64::new(0),
            canary: std::sync::RwLock::new(None),
        }
    }

    /// The handler `shard` runs, the generation it belongs to, and the rollout arm the shard
    /// counts into while a rollout runs.
    pub fn current_for(
        &self,
        shard: &str,
    ) -> (
        u64,
        Arc<dyn HandlerFactory>,
        Option<Arc<crate::canary::ArmStats>>,
    ) {
        let canary = self.canary.read().expect("handler slot poisoned").clone();
        let (generation, current) = self.current();
        match canary {
            Some(c) if c.runs(shard) => (generation, c.factory.clone(), Some(c.canary.clone())),
            Some(c) => (generation, current, Some(c.base.clone())),
            None => (generation, current, None),
        }
    }

    /// The rollout in progress, if any.
    pub fn canary(&self) -> Option<Arc<crate::canary::Canary<dyn HandlerFactory>>> {
        self.canary.read().expect("handler slot poisoned").clone()
    }

    /// Starts (or with `None` ends) a rollout: its shards switch at their next batch.
    pub fn set_canary(&self, canary: Option<Arc<crate::canary::Canary<dyn HandlerFactory>>>) {
        let mut slot = self.canary.write().expect("handler slot poisoned");
        *slot = canary;
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// Which shadow the slot is at; changes whenever the shadow does.
    pub fn shadow_generation(&self) -> u64 {
        self.shadow_generation
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The shadow and the shadow generation it belongs to.
    pub fn shadow(&self) -> (u64, Option<Arc<crate::shadow::Shadow>>) {
        let shadow = self.shadow.read().expect("handler slot poisoned");
        (self.shadow_generation(), shadow.clone())
    }

    /// Sets (or with `None` drops) the shadow; answers the one it replaces.
    pub fn set_shadow(
        &self,
        shadow: Option<Arc<crate::shadow::Shadow>>,
    ) -> Option<Arc<crate::shadow::Shadow>> {
        let mut slot = self.shadow.write().expect("handler slot poisoned");
        let old = std::mem::replace(&mut *slot, shadow);
        self.shadow_generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        old
    }

    /// Which swap the slot is at; changes whenever the handler does.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The current handler and the generation it belongs to.
    pub fn current(&self) -> (u64, Arc<dyn HandlerFactory>) {
        let state = self.state.read().expect("handler slot poisoned");
        (self.generation(), state.current.clone())
    }

    /// The version new batches run.
    pub fn version(&self) -> String {
        self.current().1.version()
    }

    /// The version a rollback would restore.
    pub fn previous_version(&self) -> Option<String> {
        let state = self.state.read().expect("handler slot poisoned");
        state.previous.as_ref().map(|p| p.version())
    }

    /// Makes `handler` current; the one it replaces is kept for [`HandlerSlot::rollback`].
    pub fn swap(&self, handler: Arc<dyn HandlerFactory>) -> Swapped {
        let mut state = self.state.write().expect("handler slot poisoned");
        self.replace(&mut state, handler)
    }

    /// Restores the handler that ran before the last swap (the current one becomes the one a
    /// second rollback restores). `None` when nothing was swapped yet.
    pub fn rollback(&self) -> Option<Swapped> {
        let mut state = self.state.write().expect("handler slot poisoned");
        let previous = state.previous.take()?;
        Some(self.replace(&mut state, previous))
    }

    /// Makes `handler` current, keeps the replaced one as `previous`, and moves to the next
    /// generation.
    fn replace(&self, state: &mut SlotState, handler: Arc<dyn HandlerFactory>) -> Swapped {
        let old = std::mem::replace(&mut state.current, handler);
        let swapped = Swapped {
            old: old.version(),
            new: state.current.version(),
        };
        state.previous = Some(old);
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        swapped
    }
}
