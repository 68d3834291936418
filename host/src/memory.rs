//! One instance's memory budget: its `limits.memory`, shared by the guest's memories and tables
//! (`wasm/limits.rs` counts them) and what the host holds for it (HTTP response bodies not yet
//! read: `capability/http/held.rs`).

use std::sync::{Arc, Mutex};

/// One instance's `limits.memory`, shared by its memories and tables (grown by the guest) and
/// the bytes the host holds for it (response bodies not yet read).
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: Mutex<Used>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Used {
    guest: usize,
    host: usize,
}

/// The host could not take bytes for an instance: they would pass its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    pub limit: usize,
    /// In use before: the guest's memories and tables, and what the host holds.
    pub guest: usize,
    pub host: usize,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget {
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            used: Mutex::new(Used::default()),
        })
    }

    fn used(&self) -> std::sync::MutexGuard<'_, Used> {
        self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `more` bytes for the guest's memories and tables.
    pub(crate) fn grow_guest(&self, more: usize) -> Result<(), OverBudget> {
        let mut used = self.used();
        self.take(&mut used, more)?;
        used.guest += more;
        Ok(())
    }

    /// Takes `more` bytes the host holds for the instance.
    pub fn take_host(&self, more: usize) -> Result<(), OverBudget> {
        let mut used = self.used();
        self.take(&mut used, more)?;
        used.host += more;
        Ok(())
    }

    /// Gives back bytes the host no longer holds.
    pub fn give_back_host(&self, less: usize) {
        let mut used = self.used();
        used.host = used.host.saturating_sub(less);
    }

    /// Bytes the host holds for the instance now.
    #[cfg(test)]
    pub fn host(&self) -> usize {
        self.used().host
    }

    fn take(&self, used: &mut Used, more: usize) -> Result<(), OverBudget> {
        let fits = used
            .guest
            .checked_add(used.host)
            .and_then(|u| u.checked_add(more))
            .is_some_and(|total| total <= self.limit);
        if fits {
            Ok(())
        } else {
            Err(OverBudget {
                limit: self.limit,
                guest: used.guest,
                host: used.host,
            })
        }
    }
}

/// A byte count as people read it: "812 KiB", "34.2 MiB", "1.0 GiB".
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["bytes", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} bytes"),
        1 => format!("{value:.0} {}", UNITS[unit]),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}
