//! One schedule: a seed's stream, instances and faults on a current-thread runtime with a
//! paused clock (minutes of lease time in milliseconds). A fault phase (records put over time,
//! reshards, crashes, stops, restarts, outages, faulty calls), then a healing phase without
//! faults until every shard's checkpoint reaches its end, then the checks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardhost::lease::simulated_clock;
use shardhost::testing::envelope::EnvelopeKey;
use tokio::time::{Instant, sleep};

use crate::check;
use crate::faults::Faults;
use crate::instance::{Running, Shared, Slot};
use crate::kinesis::INJECTED_PANIC;
use crate::log::{Log, Violation};
use crate::params::{BASE_MS, Params, RETRY_STREAM, STREAM};
use crate::rng::Rng;
use crate::stream::Stream;
use crate::table::Table;

/// What one schedule did and found.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    pub faults: u64,
    pub records: u64,
    pub violations: Vec<Violation>,
    /// The schedule's events (with `verbose`).
    pub trace: Vec<String>,
    /// Virtual time the schedule took.
    pub virtual_time: Duration,
}

/// Runs the schedule of `seed` on this thread.
pub fn run(seed: u64, verbose: bool) -> Report {
    quiet_injected_panics();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let report = rt.block_on(async move {
        let _clock = simulated_clock(BASE_MS);
        Sim::new(seed, verbose).run().await
    });
    // Whatever a killed instance left pending is dropped with the runtime.
    rt.shutdown_background();
    report
}

/// Keeps the injected panics of subscriptions' event streams out of the output (installed
/// once per process; any other panic shows as before).
fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let shown = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let injected = payload.downcast_ref::<String>().map(String::as_str)
                == Some(INJECTED_PANIC)
                || payload.downcast_ref::<&str>() == Some(&INJECTED_PANIC);
            if !injected {
                shown(info);
            }
        }));
    });
}

pub(crate) struct Sim {
    pub(crate) shared: Arc<Shared>,
    pub(crate) slots: Vec<Slot>,
    /// Runs still stopping whose slot started a new instance (under a new owner id).
    orphans: Vec<Running>,
    rng: Rng,
}

impl Sim {
    fn new(seed: u64, verbose: bool) -> Sim {
        let params = Params::draw(seed);
        let log = Arc::new(Mutex::new(Log::new(seed, verbose, &params)));
        log.lock().unwrap().note(|| format!("{params:?}"));
        let faults = Arc::new(Faults::new(
            seed,
            params.rates.clone(),
            params.ttl,
            log.clone(),
        ));
        let shared = Arc::new(Shared {
            table: Table::new(log.clone()),
            streams: vec![
                Stream::new(STREAM, params.shards, 0, log.clone()),
                Stream::new(RETRY_STREAM, 1, 100, log.clone()),
            ],
            params,
            log,
            faults,
            keys: Arc::new(EnvelopeKey::from_bytes([7; 32]).into()),
        });
        let slots = (0..shared.params.instances).map(Slot::new).collect();
        Sim {
            shared,
            slots,
            orphans: Vec::new(),
            rng: Rng::derived(seed, 3),
        }
    }

    async fn run(mut self) -> Report {
        let started = Instant::now();
        for i in 0..self.slots.len() {
            self.slots[i].start(&self.shared, false);
            sleep(Duration::from_millis(self.rng.below(2000))).await;
        }
        let producer = tokio::spawn(produce(self.shared.clone()));
        self.fault_phase().await;
        self.shared.faults.heal();
        self.shared.log.lock().unwrap().note(|| "healing".into());
        let _ = producer.await;
        self.heal().await;
        self.stop_all(Duration::from_secs(120)).await;
        let mut log = self.shared.log.lock().unwrap();
        check::after(&mut log, self.shared.params.ttl.as_millis() as u64);
        Report {
            seed: log.seed,
            faults: log.faults,
            records: log.records.len() as u64,
            violations: log.violations.clone(),
            trace: log.take_trace(),
            virtual_time: started.elapsed(),
        }
    }

    pub(crate) async fn reap(&mut self) {
        for slot in &mut self.slots {
            slot.reap(&self.shared.log).await;
        }
        let mut left = Vec::new();
        for r in std::mem::take(&mut self.orphans) {
            left.extend(r.reap(&self.shared.log).await);
        }
        self.orphans = left;
    }

    /// Crashes, stops, restarts and outages, until the fault phase's end.
    async fn fault_phase(&mut self) {
        let p = &self.shared.params;
        let (end, ttl, rate) = (Instant::now() + p.fault_phase, p.ttl, p.rates.action);
        while Instant::now() < end {
            sleep(Duration::from_millis(self.rng.range(300, 6000))).await;
            self.reap().await;
            if !self.rng.chance(rate) {
                continue;
            }
            let n = self.slots.len() as u64;
            let slot = self.rng.below(n) as usize;
            let log = &self.shared.log;
            match self.rng.below(8) {
                0 | 1 => self.slots[slot].kill(log),
                2 => self.slots[slot].stop(log),
                3..=5 if self.slots[slot].running.is_none() => {
                    let new_owner = self.rng.chance(0.4);
                    self.slots[slot].start(&self.shared, new_owner);
                }
                3..=5 if self.slots[slot].stopping => {
                    // Still stopping: a restart under the same owner id must wait (two running
                    // instances never share one); one under a new id may start beside it.
                    self.orphans.extend(self.slots[slot].detach());
                    self.slots[slot].start(&self.shared, true);
                }
                6 => {
                    let until = Instant::now() + ttl.mul_f64(0.3 + self.rng.unit() * 2.2);
                    let stall = self.rng.chance(0.5);
                    self.shared.faults.table_outage(until, stall);
                    let left = until - Instant::now();
                    log.lock()
                        .unwrap()
                        .fault(|| format!("lease table outage for {left:?} (stall: {stall})"));
                }
                7 => {
                    let left = Duration::from_millis(self.rng.range(1000, 30_000));
                    self.shared.faults.source_outage(Instant::now() + left);
                    log.lock()
                        .unwrap()
                        .fault(|| format!("stream outage for {left:?}"));
                }
                _ => {}
            }
        }
    }

    /// Starts every slot that runs nothing (waiting for one still stopping).
    pub(crate) async fn start_idle(&mut self) {
        self.wait_stopped(Duration::from_secs(60)).await;
        for i in 0..self.slots.len() {
            if self.slots[i].running.is_none() {
                self.slots[i].start(&self.shared, false);
            }
        }
    }

    /// Stops every instance gracefully and waits for them.
    pub(crate) async fn stop_all(&mut self, within: Duration) {
        for slot in &mut self.slots {
            slot.stop(&self.shared.log);
        }
        self.wait_stopped(within).await;
    }

    /// Waits for the stopping instances; one still running after `within` is a violation (a
    /// stop without faults never takes that long) and is killed.
    async fn wait_stopped(&mut self, within: Duration) {
        let until = Instant::now() + within;
        while (self.slots.iter().any(|s| s.stopping) || !self.orphans.is_empty())
            && Instant::now() < until
        {
            sleep(Duration::from_millis(100)).await;
            self.reap().await;
        }
        for slot in &mut self.slots {
            if slot.stopping {
                let mut log = self.shared.log.lock().unwrap();
                let inc = slot.running.as_ref().map_or(0, |r| r.inc);
                let who = log.who(inc);
                log.violate(
                    "stop-hangs",
                    format!("{who} did not stop within {within:?} of a graceful stop"),
                );
                drop(log);
                slot.kill(&self.shared.log);
            }
        }
        for r in std::mem::take(&mut self.orphans) {
            r.kill(&self.shared.log);
        }
    }
}

/// Puts the seed's records over the fault phase (the rest at once when it ends), resharding
/// at drawn points; some puts are KPL aggregates of several records.
async fn produce(shared: Arc<Shared>) {
    let p = &shared.params;
    let mut rng = Rng::derived(p.seed, 4);
    let mut kpl = Rng::derived(p.seed, 7);
    let gap_ms = (p.fault_phase.as_millis() as u64 * 2 / p.records.max(1) as u64).max(1);
    let reshard_at: Vec<usize> = (0..p.reshards)
        .map(|_| rng.below(p.records as u64) as usize)
        .collect();
    let end = Instant::now() + p.fault_phase;
    let mut i = 0;
    while i < p.records {
        if Instant::now() < end {
            sleep(Duration::from_millis(rng.below(gap_ms))).await;
        }
        let users = if p.paths.kpl > 0.0 && kpl.chance(p.paths.kpl) {
            kpl.range(2, 4) as usize
        } else {
            1
        }
        .min(p.records - i);
        for _ in reshard_at
            .iter()
            .filter(|&&at| (i..i + users).contains(&at))
        {
            reshard(&shared.streams[0], &mut rng);
        }
        let records: Vec<_> = (i..i + users)
            .map(|k| (k as u64, p.record_plan(k)))
            .collect();
        shared.streams[0].put(rng.next_u64(), &records);
        i += users;
    }
}

fn reshard(stream: &Stream, rng: &mut Rng) {
    let open = stream.open_shards();
    let pick = open[rng.below(open.len() as u64) as usize];
    if open.len() >= 6 || (open.len() > 1 && rng.chance(0.5) && stream.merge(pick)) {
        if open.len() >= 6 {
            stream.merge(pick);
        }
        return;
    }
    stream.split(pick);
}
