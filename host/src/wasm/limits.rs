//! What one handler instance may take from the host. `limits.memory` bounds the whole
//! instance, not one linear memory: every memory and every table element of every core
//! instance inside the component count against it, and the counts of instances, memories and
//! tables, and of the host resources a guest holds (WASI streams, pollables), are capped.

use wasmtime::ResourceLimiter;

/// Core instances one component instance may create (a Rust handler makes a handful, a Python
/// one a few dozen).
pub const MAX_INSTANCES: usize = 500;
/// Linear memories one component instance may create.
pub const MAX_MEMORIES: usize = 50;
/// Tables one component instance may create.
pub const MAX_TABLES: usize = 500;
/// Host resources (WASI streams, pollables, ...) one instance may hold at once.
pub const MAX_HOST_RESOURCES: usize = 10_000;
/// What one table element costs the host (a pointer, in Wasmtime).
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// Counts the bytes of every memory and table of an instance against one budget.
pub struct InstanceLimiter {
    budget: usize,
    used: usize,
    /// The first growth refused, for the error report.
    denied: Option<String>,
}

impl InstanceLimiter {
    pub fn new(budget: u64) -> Self {
        InstanceLimiter {
            budget: usize::try_from(budget).unwrap_or(usize::MAX),
            used: 0,
            denied: None,
        }
    }

    /// Why the instance was stopped at its limit, if it was.
    pub fn denied(&self) -> Option<&str> {
        self.denied.as_deref()
    }

    fn grow(&mut self, what: &str, more: usize) -> wasmtime::Result<bool> {
        match self
            .used
            .checked_add(more)
            .filter(|&total| total <= self.budget)
        {
            Some(total) => {
                self.used = total;
                Ok(true)
            }
            None => {
                let message = format!(
                    "growing a {what} by {more} bytes would take the instance past its limit of {} bytes ({} in use)",
                    self.budget, self.used
                );
                self.denied = Some(message.clone());
                // An error traps the guest where it grew (not a -1 it could ignore and retry).
                Err(wasmtime::format_err!(message))
            }
        }
    }
}

impl ResourceLimiter for InstanceLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow("memory", desired.saturating_sub(current))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let more = desired
            .saturating_sub(current)
            .saturating_mul(TABLE_ELEMENT_BYTES);
        self.grow("table", more)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut l = InstanceLimiter::new(1000);
        assert!(l.memory_growing(0, 600, None).unwrap());
        assert!(
            l.table_growing(0, 50, None).unwrap(),
            "400 bytes of table fit"
        );
        assert!(
            l.memory_growing(0, 1, None).is_err(),
            "a second memory does not"
        );
        assert!(l.denied().unwrap().contains("limit of 1000 bytes"));
        assert!(l.table_growing(0, usize::MAX, None).is_err(), "no overflow");
    }
}
