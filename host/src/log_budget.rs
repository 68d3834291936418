//! How much a guest may write to the host's log: one token bucket of lines and bytes per shard
//! worker, shared by every instance the shard makes (its lanes, the fresh instances a failed
//! batch is bisected on, the instances that replace trapped ones). A new instance never starts
//! the budget over, so a handler that logs a lot and then traps writes at most
//! [`LOG_BURST_BYTES`] plus [`LOG_BYTES_PER_SECOND`] a second, however often it is replaced.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Guest log lines a shard may write per second (on average; bursts of [`LOG_BURST_LINES`]).
pub const LOG_LINES_PER_SECOND: u32 = 1000;
/// Lines of a burst.
pub const LOG_BURST_LINES: u32 = 2000;
/// Guest log bytes (the lines as written, after cutting) a shard may write per second.
pub const LOG_BYTES_PER_SECOND: u64 = 1 << 20;
/// Bytes of a burst.
pub const LOG_BURST_BYTES: u64 = 2 << 20;
/// How often a call that goes on dropping lines says so (the end of its batch always does).
const SAY_DROPPED_EVERY: Duration = Duration::from_secs(10);

/// The guest log budget of one shard worker. Cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct LogBudget(Arc<Mutex<Bucket>>);

/// Lines and bytes dropped since the log last said so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub lines: u64,
    pub bytes: u64,
}

/// What [`LogBudget::take`] decides for one line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Write it; first say what was dropped before it, when that is due (a run of drops is
    /// said at the end of its batch, or every [`SAY_DROPPED_EVERY`] while it goes on).
    Write(Dropped),
    /// Drop it; `first` when it is the first of a run of drops.
    Drop { first: bool },
}

#[derive(Debug)]
struct Bucket {
    lines: f64,
    bytes: f64,
    at: Instant,
    dropped: Dropped,
    /// When the drops not said yet began.
    dropping_since: Option<Instant>,
}

impl Default for Bucket {
    fn default() -> Self {
        Bucket {
            lines: f64::from(LOG_BURST_LINES),
            bytes: LOG_BURST_BYTES as f64,
            at: Instant::now(),
            dropped: Dropped::default(),
            dropping_since: None,
        }
    }
}

impl Bucket {
    fn take_dropped(&mut self) -> Dropped {
        self.dropping_since = None;
        std::mem::take(&mut self.dropped)
    }
}

impl LogBudget {
    fn lock(&self) -> std::sync::MutexGuard<'_, Bucket> {
        // A panic while holding the lock leaves nothing half-written that matters for a log.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a line of `len` bytes may be written at `now`.
    pub(crate) fn take(&self, len: usize, now: Instant) -> Take {
        let mut b = self.lock();
        let secs = now.saturating_duration_since(b.at).as_secs_f64();
        b.lines =
            (b.lines + secs * f64::from(LOG_LINES_PER_SECOND)).min(f64::from(LOG_BURST_LINES));
        b.bytes = (b.bytes + secs * LOG_BYTES_PER_SECOND as f64).min(LOG_BURST_BYTES as f64);
        b.at = b.at.max(now);
        let len = len as f64;
        if b.lines >= 1.0 && b.bytes >= len {
            b.lines -= 1.0;
            b.bytes -= len;
            let due = b
                .dropping_since
                .is_some_and(|since| now.saturating_duration_since(since) >= SAY_DROPPED_EVERY);
            Take::Write(if due {
                b.take_dropped()
            } else {
                Dropped::default()
            })
        } else {
            b.dropping_since.get_or_insert(now);
            b.dropped.lines += 1;
            b.dropped.bytes += len as u64;
            Take::Drop {
                first: b.dropped.lines == 1,
            }
        }
    }

    /// What was dropped since the log last said so, forgotten once answered.
    fn take_dropped(&self) -> Dropped {
        self.lock().take_dropped()
    }

    /// Says in the log what was dropped since it last said so, if anything was (at the end of
    /// a batch, so a batch that lost lines says so once even when no later line gets through).
    pub fn report(&self, handler: &str) {
        report_dropped(self.take_dropped(), handler);
    }
}

/// Says in the log what a shard's guest log budget dropped (when it dropped anything).
pub(crate) fn report_dropped(dropped: Dropped, handler: &str) {
    if dropped.lines == 0 {
        return;
    }
    let (dropped_lines, dropped_bytes) = (dropped.lines, dropped.bytes);
    tracing::warn!(
        target: "shardhost::guest", handler, dropped_lines, dropped_bytes,
        "{dropped_lines} guest log lines ({dropped_bytes} bytes) of this shard were dropped: past \
         {LOG_LINES_PER_SECOND} lines or {LOG_BYTES_PER_SECOND} bytes a second (bursts of \
         {LOG_BURST_LINES} lines, {LOG_BURST_BYTES} bytes)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn log_lines_past_the_rate_are_dropped_and_counted() {
        let budget = LogBudget::default();
        let t = budget.lock().at;
        let let_through = (0..5000)
            .filter(|_| matches!(budget.take(4, t), Take::Write(_)))
            .count();
        assert_eq!(let_through, LOG_BURST_LINES as usize);
        // A second later, a second's worth more. The drops are said at the end of the batch
        // ([`LogBudget::report`]), or by a line let through once they have gone on a while.
        assert_eq!(
            budget.take(4, t + Duration::from_secs(1)),
            Take::Write(Dropped::default())
        );
        let dropped = Dropped {
            lines: 5000 - u64::from(LOG_BURST_LINES),
            bytes: 4 * (5000 - u64::from(LOG_BURST_LINES)),
        };
        assert_eq!(budget.take(4, t + SAY_DROPPED_EVERY), Take::Write(dropped));
        assert_eq!(budget.take_dropped(), Dropped::default(), "said once");
    }

    #[test]
    fn big_lines_are_held_to_the_byte_budget_and_clones_share_it() {
        let budget = LogBudget::default();
        let t = budget.lock().at;
        let other = budget.clone();
        let written: u64 = (0..2000)
            .map(|i| if i % 2 == 0 { &budget } else { &other })
            .filter(|b| matches!(b.take(4000, t), Take::Write(_)))
            .map(|_| 4000)
            .sum();
        assert!(written <= LOG_BURST_BYTES, "{written}");
        assert!(written > LOG_BURST_BYTES - 4000, "{written}");
        assert_eq!(
            LogBudget::default().take(4000, t),
            Take::Write(Dropped::default()),
            "a new budget is a new shard's"
        );
        let dropped = other.take_dropped();
        assert_eq!(dropped.lines, 2000 - written / 4000);
        assert_eq!(other.take_dropped(), Dropped::default(), "said once");
    }
}
