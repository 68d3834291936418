//! What one handler instance may take from the host. `limits.memory` bounds the whole
//! instance, not one linear memory: every memory and every table element of every core
//! instance inside the component count against it, and so do the response bodies the host
//! holds for it until it reads them ([`MemoryBudget`]); the counts of instances, memories and
//! tables, and of the host resources a guest holds (WASI streams, pollables, HTTP requests and
//! responses), are capped.

use std::sync::Arc;

use wasmtime::ResourceLimiter;

pub use crate::memory::MemoryBudget;
#[cfg(test)]
use crate::memory::OverBudget;

/// Core instances one component instance may create (a Rust handler makes a handful, a Python
/// one a few dozen).
pub const MAX_INSTANCES: usize = 500;
/// Linear memories one component instance may create.
pub const MAX_MEMORIES: usize = 50;
/// Tables one component instance may create.
pub const MAX_TABLES: usize = 500;
/// Host resources (WASI streams, pollables, HTTP fields, requests and responses, ...) one
/// instance may hold at once: enough for a few hundred requests in flight from one call, few
/// enough that what each may hold outside the memory budget (a header map of up to 128 KiB)
/// stays small.
pub const MAX_HOST_RESOURCES: usize = 1_000;
/// What one table element costs the host (a pointer, in Wasmtime).
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// Counts the bytes of every memory and table of an instance against its [`MemoryBudget`].
pub struct InstanceLimiter {
    budget: Arc<MemoryBudget>,
    /// The first growth refused, for the error report.
    denied: Option<String>,
}

impl InstanceLimiter {
    pub fn new(budget: Arc<MemoryBudget>) -> Self {
        InstanceLimiter {
            budget,
            denied: None,
        }
    }

    /// Why the instance was stopped at its limit, if it was.
    pub fn denied(&self) -> Option<&str> {
        self.denied.as_deref()
    }

    fn grow(&mut self, what: &str, more: usize) -> wasmtime::Result<bool> {
        match self.budget.grow_guest(more) {
            Ok(()) => Ok(true),
            Err(over) => {
                let held = match over.host {
                    0 => String::new(),
                    host => format!(
                        ", {host} of them response bodies the host holds until the handler reads them"
                    ),
                };
                let message = format!(
                    "growing a {what} by {more} bytes would take the instance past its limit of {} bytes ({} in use{held})",
                    over.limit,
                    over.guest + over.host
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
        let mut l = InstanceLimiter::new(MemoryBudget::new(1000));
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

    #[test]
    fn bytes_the_host_holds_count_against_the_same_budget() {
        let budget = MemoryBudget::new(1000);
        let mut l = InstanceLimiter::new(budget.clone());
        assert!(l.memory_growing(0, 600, None).unwrap());
        budget.take_host(300).unwrap();
        assert_eq!(
            budget.take_host(101),
            Err(OverBudget {
                limit: 1000,
                guest: 600,
                host: 300
            })
        );
        assert!(l.memory_growing(600, 700, None).unwrap(), "100 bytes fit");
        let refused = l.memory_growing(700, 701, None).unwrap_err().to_string();
        assert!(
            refused.contains("1000 in use, 300 of them response bodies"),
            "{refused}"
        );
        budget.give_back_host(300);
        assert_eq!(budget.host(), 0);
        assert!(l.memory_growing(700, 1000, None).unwrap());
    }
}
