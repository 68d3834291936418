//! What the components of one runtime share, by type: each capability keeps its own there
//! (HTTP a TLS client per grant, state a store per table).

use std::any::Any;
use std::sync::{Arc, Mutex};

/// One value of each type a capability asks for, made on first use.
#[derive(Default)]
pub struct Shared(Mutex<Vec<Arc<dyn Any + Send + Sync>>>);

impl Shared {
    /// The runtime's `S`.
    pub fn get<S: Any + Default + Send + Sync>(&self) -> Arc<S> {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = all.iter().find_map(|s| s.clone().downcast::<S>().ok()) {
            return found;
        }
        let made = Arc::new(S::default());
        all.push(made.clone());
        made
    }
}
