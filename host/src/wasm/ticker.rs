//! The epoch ticker: a thread that advances the engine's epoch every [`EPOCH_TICK`] while guest
//! code may run, and sleeps without waking while none does.
//!
//! Call timeouts are counted in epoch ticks (a running guest yields at every tick and traps
//! past its deadline), so ticks matter only during a call or an instantiation. An idle host
//! (caught-up shards, no calls) would otherwise wake 200 times a second for nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances while guest code runs.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Owns the ticker thread; the thread ends when the last holder drops it.
pub struct Ticker {
    shared: Arc<Shared>,
    thread: Thread,
}

struct Shared {
    /// Guest calls and instantiations under way.
    busy: AtomicUsize,
    /// The thread is parked (or about to park) because nothing is busy.
    idle: AtomicBool,
    stop: AtomicBool,
    ticks: AtomicU64,
}

/// Keeps the epoch advancing while it lives: held for the length of a guest call.
pub struct Busy<'a>(&'a Ticker);

impl Ticker {
    pub fn start(engine: Engine) -> std::io::Result<Arc<Ticker>> {
        let shared = Arc::new(Shared {
            busy: AtomicUsize::new(0),
            idle: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("shardhost-epoch".into())
                .spawn(move || tick(&engine, &shared))?
        };
        Ok(Arc::new(Ticker {
            shared,
            thread: thread.thread().clone(),
        }))
    }

    /// Marks guest code as running until the guard is dropped.
    pub fn busy(&self) -> Busy<'_> {
        if self.shared.busy.fetch_add(1, Ordering::AcqRel) == 0 {
            // A wake-up before the thread parks is kept: its park then returns at once.
            self.thread.unpark();
        }
        Busy(self)
    }

    /// Epoch ticks so far.
    #[cfg(test)]
    fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::Acquire)
    }

    #[cfg(test)]
    fn idle(&self) -> bool {
        self.shared.idle.load(Ordering::Acquire)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.shared.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

fn tick(engine: &Engine, shared: &Shared) {
    while !shared.stop.load(Ordering::Acquire) {
        if shared.busy.load(Ordering::Acquire) == 0 {
            shared.idle.store(true, Ordering::Release);
            std::thread::park();
            shared.idle.store(false, Ordering::Release);
            continue;
        }
        std::thread::sleep(EPOCH_TICK);
        engine.increment_epoch();
        shared.ticks.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Waits up to 5 s for `cond`.
    fn eventually(cond: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if cond() {
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    #[test]
    fn the_epoch_advances_only_while_guest_code_runs() {
        let ticker = Ticker::start(Engine::default()).unwrap();
        assert!(eventually(|| ticker.idle()), "an idle ticker parks");
        let parked_at = ticker.ticks();
        {
            let _busy = ticker.busy();
            assert!(
                eventually(|| ticker.ticks() >= parked_at + 3),
                "a busy ticker ticks"
            );
        }
        assert!(
            eventually(|| ticker.idle()),
            "it parks again once the call is over"
        );
        let parked_at = ticker.ticks();
        let _again = ticker.busy();
        assert!(
            eventually(|| ticker.ticks() > parked_at),
            "a new call wakes it"
        );
    }
}
