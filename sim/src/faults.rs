//! The fault injector the simulated table and stream ask before every call: what goes wrong
//! with this one (drawn from the seed), and whether an outage is on. Off in the healing phase.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::log::Log;
use crate::params::FaultRates;
#[cfg(doc)]
use crate::params::ReaderFaults;
use crate::rng::Rng;

/// What happens to one lease-store call.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreFault {
    /// A wait before the call reaches the table.
    pub before: Duration,
    /// The call fails before it reaches the table.
    pub error_before: bool,
    /// A wait after the table applied it, before the answer arrives.
    pub after: Duration,
    /// The answer is lost after the write was applied: the caller sees an error (`Lost` as the
    /// SDK's retry would see it, defect 3 of issue 28, when `as_lost`; else a timeout).
    pub lost_answer: bool,
    pub as_lost: bool,
}

/// What happens to one source call.
#[derive(Clone, Copy, Debug, Default)]
pub struct SourceFault {
    pub delay: Duration,
    pub error: bool,
    pub throttled: bool,
    pub expired: bool,
}

/// The injector of one schedule, shared by every instance's views.
pub struct Faults {
    on: AtomicBool,
    rates: FaultRates,
    rng: Mutex<Rng>,
    ttl: Duration,
    table_outage: Mutex<Option<(Instant, bool)>>,
    source_outage: Mutex<Option<Instant>>,
    /// The real readers' own faults' draws (a stream of their own: the other faults' draws
    /// stay as they were).
    reader_rng: Mutex<Rng>,
    /// When each shard was first called at the tip (`latest`).
    first_latest: Mutex<HashMap<String, Instant>>,
    log: Arc<Mutex<Log>>,
}

impl Faults {
    pub fn new(seed: u64, rates: FaultRates, ttl: Duration, log: Arc<Mutex<Log>>) -> Faults {
        Faults {
            on: AtomicBool::new(true),
            rates,
            rng: Mutex::new(Rng::derived(seed, 2)),
            ttl,
            table_outage: Mutex::new(None),
            source_outage: Mutex::new(None),
            reader_rng: Mutex::new(Rng::derived(seed, 9)),
            first_latest: Mutex::new(HashMap::new()),
            log,
        }
    }

    /// The healing phase: no fault from now on.
    pub fn heal(&self) {
        self.on.store(false, Ordering::Relaxed);
        *self.table_outage.lock().unwrap() = None;
        *self.source_outage.lock().unwrap() = None;
    }

    fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    fn note(&self, what: impl FnOnce() -> String) {
        self.log.lock().unwrap().fault(what);
    }

    /// The lease table stops answering until `until` (stalling calls, or failing them).
    pub fn table_outage(&self, until: Instant, stall: bool) {
        *self.table_outage.lock().unwrap() = Some((until, stall));
    }

    pub fn source_outage(&self, until: Instant) {
        *self.source_outage.lock().unwrap() = Some(until);
    }

    /// What goes wrong with the next lease-store call of `what` by incarnation `inc`.
    pub fn store(&self, inc: u32, what: &str, write: bool) -> StoreFault {
        if !self.on() {
            return StoreFault::default();
        }
        let now = Instant::now();
        if let Some((until, stall)) = *self.table_outage.lock().unwrap()
            && now < until
        {
            return StoreFault {
                before: if stall { until - now } else { Duration::ZERO },
                error_before: !stall,
                ..StoreFault::default()
            };
        }
        let r = &self.rates;
        let ttl_ms = self.ttl.as_millis() as u64;
        let mut g = self.rng.lock().unwrap();
        let mut f = StoreFault::default();
        if g.chance(r.store_delay) {
            // Mostly short, sometimes a good part of the ttl.
            let max = if g.chance(0.2) {
                ttl_ms * 7 / 10
            } else {
                ttl_ms / 10
            };
            f.before = Duration::from_millis(g.below(max + 1));
            f.after = Duration::from_millis(g.below(max + 1));
        }
        if g.chance(r.store_stall) {
            let d = Duration::from_millis(g.range(ttl_ms + 1, ttl_ms * 2));
            if g.chance(0.5) {
                f.before = d;
            } else {
                f.after = d;
            }
        }
        if g.chance(r.store_error) {
            f.error_before = true;
        } else if write && g.chance(r.store_lost_answer) {
            f.lost_answer = true;
            f.as_lost = g.chance(0.5);
        }
        drop(g);
        if f.error_before || f.lost_answer || f.before + f.after > self.ttl / 10 {
            self.note(|| format!("#{inc} {what}: {f:?}"));
        }
        f
    }

    /// What goes wrong with the next source call (`read`: a read, which may be throttled or
    /// find its iterator expired).
    pub fn source(&self, inc: u32, what: &str, read: bool) -> SourceFault {
        if !self.on() {
            return SourceFault::default();
        }
        let now = Instant::now();
        if let Some(until) = *self.source_outage.lock().unwrap()
            && now < until
        {
            return SourceFault {
                error: true,
                delay: Duration::from_millis(self.rng.lock().unwrap().below(3000)),
                ..SourceFault::default()
            };
        }
        let r = &self.rates;
        let mut g = self.rng.lock().unwrap();
        let mut f = SourceFault::default();
        if g.chance(r.source_error) {
            if g.chance(0.5) {
                f.error = true;
            }
            f.delay = Duration::from_millis(g.below(5000));
        }
        if read && g.chance(r.throttle) {
            f.throttled = true;
        } else if read && g.chance(r.expired_iterator) {
            f.expired = true;
        }
        drop(g);
        if f.error || f.expired || f.delay > Duration::from_secs(1) {
            self.note(|| format!("#{inc} {what}: {f:?}"));
        }
        f
    }

    /// What goes wrong with the next put (a retry copy, a dead letter): how long it takes
    /// (a slow one up to the SDK's budget of 30 s), and whether it fails.
    pub fn put(&self, inc: u32, stream: &str) -> (Duration, bool) {
        if !self.on() {
            return (
                Duration::from_millis(self.rng.lock().unwrap().below(20)),
                false,
            );
        }
        let now = Instant::now();
        let outage = self
            .source_outage
            .lock()
            .unwrap()
            .is_some_and(|until| now < until);
        let r = &self.rates;
        let mut g = self.rng.lock().unwrap();
        let delay = if g.chance(r.put_slow) {
            Duration::from_millis(g.range(1000, 30_000))
        } else {
            Duration::from_millis(g.below(50))
        };
        let fail = outage || g.chance(r.put_error);
        drop(g);
        if fail || delay > Duration::from_secs(1) {
            self.note(|| format!("#{inc} put to {stream}: {delay:?}, fails: {fail}"));
        }
        (delay, fail)
    }

    /// A call at the tip (`latest`) of `shard`: the first starts its window of refusals.
    pub fn called_at_latest(&self, shard: &str) {
        let mut first = self.first_latest.lock().unwrap();
        first.entry(shard.to_owned()).or_insert_with(Instant::now);
    }

    /// Whether `shard`'s subscriptions are refused and its iterators expire now: within
    /// [`ReaderFaults::refused_at_start`] of its first call at the tip.
    pub fn refused_at_start(&self, inc: u32, shard: &str, what: &str) -> bool {
        let window = self.rates.reader.refused_at_start;
        if !self.on() || window.is_zero() {
            return false;
        }
        let first = self.first_latest.lock().unwrap().get(shard).copied();
        let refused = first.is_some_and(|at| Instant::now() < at + window);
        if refused {
            self.note(|| {
                format!("#{inc} {what} {shard}: refused within {window:?} of its start at latest")
            });
        }
        refused
    }

    /// Whether a fan-out subscription's event stream panics now (its task dies).
    pub fn task_panics(&self) -> bool {
        let p = self.rates.reader.task_panic;
        self.on() && self.reader_rng.lock().unwrap().chance(p)
    }

    /// How long a fan-out subscription's question whether its shard ended hangs, if it does.
    pub fn probe_hang(&self, inc: u32, shard: &str) -> Option<Duration> {
        let p = self.rates.reader.probe_hang;
        if !self.on() {
            return None;
        }
        let mut g = self.reader_rng.lock().unwrap();
        let hang = g.chance(p).then(|| Duration::from_secs(g.range(30, 300)));
        drop(g);
        if let Some(d) = hang {
            self.note(|| format!("#{inc} the end-of-shard question of {shard} hangs {d:?}"));
        }
        hang
    }

    /// How long a handler call takes.
    pub fn call_time(&self) -> Duration {
        let mut g = self.rng.lock().unwrap();
        if self.on() && g.chance(self.rates.slow_call) {
            Duration::from_millis(g.range(500, 6000))
        } else {
            Duration::from_millis(g.below(40))
        }
    }
}
