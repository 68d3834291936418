//! How often a refused bucket is logged.

use std::time::Instant;

/// Refused buckets are logged at most once per [`Refusals::EVERY`] per component, with a count
/// of those not logged: a guest opening refused buckets in a loop cannot flood the log.
#[derive(Default)]
pub(crate) struct Refusals {
    last: std::sync::Mutex<Option<Instant>>,
    unlogged: std::sync::atomic::AtomicU64,
}

impl Refusals {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(10);

    /// `Some(refusals not logged since the last line)` when this one may be logged.
    pub(super) fn may_log(&self) -> Option<u64> {
        use std::sync::atomic::Ordering;
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| now < at + Self::EVERY) {
            self.unlogged.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *last = Some(now);
        Some(self.unlogged.swap(0, Ordering::Relaxed))
    }
}
