//! What one seed draws before the schedule starts: the stream, the instances, the lease timings
//! (within what `shardhost check` accepts) and how often each kind of fault strikes.

use std::time::Duration;

use shardhost::config::{RetryPolicy, StartAt};
use shardhost::testing::InFlight;

use crate::rng::Rng;

/// The simulated wall clock's start (2026-01-01).
pub const BASE_MS: u64 = 1_767_225_600_000;

/// The stream the instances read.
pub const STREAM: &str = "sim-stream";
/// A retry stream of its own (`retry_stream` set), beside the read stream.
pub const RETRY_STREAM: &str = "sim-retry";
/// The dead-letter stream (its letters are only counted).
pub const DEAD_LETTER: &str = "sim-dead-letters";

/// How a record is answered by the simulation's handler, drawn when it is put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    Ack,
    Drop,
    /// `retry` this many times (the record is held and comes back with the next reader),
    /// then `ack`.
    RetryThenAck(u32),
    /// `retry-after(ms)` this many times, then `ack`.
    RetryAfterThenAck(u32, u64),
    /// Every call holding it traps this many times (bisected down to it), then `ack`.
    TrapThenAck(u32),
}

/// How often each fault strikes (probabilities per call; 0 in a fault-free schedule).
#[derive(Clone, Debug, Default)]
pub struct FaultRates {
    /// A lease-store call waits before it is applied and/or before it answers.
    pub store_delay: f64,
    /// A lease-store call fails before it reaches the table.
    pub store_error: f64,
    /// A lease-store write is applied, but its answer is lost (an error or a timeout).
    pub store_lost_answer: f64,
    /// A lease-store call stalls longer than the ttl.
    pub store_stall: f64,
    /// A read is throttled.
    pub throttle: f64,
    /// A read finds its iterator expired.
    pub expired_iterator: f64,
    /// A source call fails or answers slowly.
    pub source_error: f64,
    /// A handler call takes long (up to several seconds).
    pub slow_call: f64,
    /// The fault phase's actions: crashes, stops, restarts, outages, reshards (per step).
    pub action: f64,
    /// A put (a retry copy, a dead letter) fails.
    pub put_error: f64,
    /// A put takes long (up to the SDK's budget of 30 s).
    pub put_slow: f64,
    /// The host's real readers' own faults (drawn from a stream of their own).
    pub reader: ReaderFaults,
}

/// Faults only the host's real polling and fan-out readers meet (issue 49, #3 and #6): drawn
/// from a stream of their own, and none in a schedule with the simulation's own reader, so
/// those schedules run as they did before these existed.
#[derive(Clone, Debug, Default)]
pub struct ReaderFaults {
    /// Under `latest`: from a shard's first call at the tip, for this long, every
    /// SubscribeToShard of it is refused (denied, limited, in use, failed) and every GetRecords
    /// finds its iterator expired. Zero: never.
    pub refused_at_start: Duration,
    /// A fan-out subscription's event stream panics at an event (its task dies), per event.
    pub task_panic: f64,
    /// A fan-out subscription's question whether its shard ended (GetShardIterator after a
    /// continuation) hangs for 30 s to 5 minutes, per question.
    pub probe_hang: f64,
}

/// How the instances read the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReaderKind {
    /// The simulation's own reader (KPL aggregates come de-aggregated).
    Sim,
    /// The host's polling reader over Kinesis' calls on the simulated stream.
    Polling,
    /// The host's enhanced fan-out reader over simulated subscriptions.
    FanOut,
}

/// What the subscription does on the paths beyond ack: where it starts, its retry policy, its
/// in-flight bound; what the producer writes (KPL aggregates) and how the handler fails.
#[derive(Clone, Debug)]
pub struct Paths {
    pub start_at: StartAt,
    /// A retry cap (copies on the read stream or on `RETRY_STREAM`, dead letters), or none.
    pub retry: Option<RetryPolicy>,
    pub in_flight: InFlight,
    /// The chance that a put is a KPL aggregate of 2–4 user records.
    pub kpl: f64,
    /// Records may be answered retry-after and trap (else only ack, drop and retry).
    pub failing: bool,
    /// The longest retry-after a record is answered with (ms).
    pub retry_after_max_ms: u64,
    pub reader: ReaderKind,
}

/// Everything a seed decides up front.
#[derive(Clone, Debug)]
pub struct Params {
    pub seed: u64,
    pub shards: u32,
    pub records: usize,
    pub instances: usize,
    pub ttl: Duration,
    pub renew_every: Duration,
    pub list_every: Duration,
    pub balance: bool,
    pub checkpoint_every: Duration,
    pub poll_interval: Duration,
    pub read_limit: usize,
    pub call_batch: usize,
    pub lanes: usize,
    /// Each instance's clock, ahead (+) or behind (-) the true time, in ms: any two differ by
    /// less than a fifth of the ttl, the documented bound.
    pub skew_ms: Vec<i64>,
    /// How long the fault phase lasts.
    pub fault_phase: Duration,
    /// Reshards (split or merge) during the fault phase.
    pub reshards: u32,
    pub rates: FaultRates,
    pub paths: Paths,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl Params {
    pub fn draw(seed: u64) -> Params {
        let mut r = Rng::derived(seed, 1);
        let ttl_ms = r.range(20, 200) * 100; // 2 s .. 20 s
        // renew_every at most three fifths of ttl (config refuses more).
        let renew_ms = r.range(ttl_ms / 10, ttl_ms * 3 / 5);
        let instances = r.range(1, 4) as usize;
        // Skews within ±(ttl/10 - 1 ms): any two instances differ by less than ttl/5.
        let bound = ttl_ms / 10 - 1;
        let skew_ms = (0..instances)
            .map(|_| {
                let s = r.range(0, 2 * bound) as i64 - bound as i64;
                if r.chance(0.3) { 0 } else { s }
            })
            .collect();
        let faulty = !r.chance(0.1);
        let f = |r: &mut Rng, max: f64| if faulty { r.unit() * max } else { 0.0 };
        let rates = FaultRates {
            store_delay: f(&mut r, 0.3),
            store_error: f(&mut r, 0.1),
            store_lost_answer: f(&mut r, 0.08),
            store_stall: f(&mut r, 0.02),
            throttle: f(&mut r, 0.3),
            expired_iterator: f(&mut r, 0.1),
            source_error: f(&mut r, 0.1),
            slow_call: f(&mut r, 0.1),
            action: if faulty { 0.3 + r.unit() * 0.6 } else { 0.0 },
            put_error: 0.0,
            put_slow: 0.0,
            reader: ReaderFaults::default(),
        };
        Params {
            seed,
            shards: r.range(1, 4) as u32,
            records: r.range(10, 400) as usize,
            instances,
            ttl: ms(ttl_ms),
            renew_every: ms(renew_ms),
            list_every: ms(r.range(5, 150) * 100),
            balance: r.chance(0.6),
            checkpoint_every: ms(r.range(1, 30) * 100),
            poll_interval: ms(r.range(1, 20) * 100),
            read_limit: r.range(1, 40) as usize,
            call_batch: r.range(1, 10) as usize,
            lanes: r.range(1, 2) as usize,
            skew_ms,
            fault_phase: ms(r.range(20, 240) * 1000),
            reshards: if r.chance(0.4) {
                r.range(1, 3) as u32
            } else {
                0
            },
            rates,
            paths: Paths::default_trim_horizon(),
        }
        .with_paths(faulty)
        .with_reader_faults(faulty)
    }

    /// Draws the real readers' own faults from a stream of their own.
    fn with_reader_faults(mut self, faulty: bool) -> Params {
        let mut r = Rng::derived(self.seed, 8);
        let reader = self.paths.reader;
        if !faulty || reader == ReaderKind::Sim {
            return self;
        }
        let f = &mut self.rates.reader;
        if self.paths.start_at == StartAt::Latest && r.chance(0.5) {
            f.refused_at_start = ms(r.range(1, 20) * 1000);
        }
        if reader == ReaderKind::FanOut {
            if r.chance(0.3) {
                f.task_panic = r.unit() * 0.003;
            }
            if r.chance(0.5) {
                f.probe_hang = 0.2 + r.unit() * 0.6;
            }
        }
        self
    }

    /// Draws the paths from a stream of their own, so a seed's older draws stay as they were.
    fn with_paths(mut self, faulty: bool) -> Params {
        let mut r = Rng::derived(self.seed, 6);
        let fault_ms = self.fault_phase.as_millis() as u64;
        self.paths.start_at = match r.below(10) {
            0..=5 => StartAt::TrimHorizon,
            6..=8 => StartAt::Latest,
            _ => StartAt::Timestamp(BASE_MS + r.below(fault_ms / 2 + 1)),
        };
        if r.chance(0.5) {
            let own = r.chance(0.4);
            self.paths.retry = Some(RetryPolicy {
                max_attempts: r.range(2, 4) as u32,
                retry_stream: if own { RETRY_STREAM } else { STREAM }.to_owned(),
                dead_letter: DEAD_LETTER.to_owned(),
                own_retry_stream: own,
            });
        }
        if r.chance(0.6) {
            self.paths.in_flight.records = r.range(4, 60) as usize;
        }
        self.paths.kpl = if r.chance(0.3) { r.unit() * 0.5 } else { 0.0 };
        self.paths.failing = r.chance(0.6);
        self.paths.retry_after_max_ms = r.range(1, 20) * 1000;
        if faulty {
            self.rates.put_error = r.unit() * 0.5;
            self.rates.put_slow = r.unit() * 0.2;
        }
        self.paths.reader = match r.below(4) {
            0 => ReaderKind::Polling,
            1 => ReaderKind::FanOut,
            _ => ReaderKind::Sim,
        };
        if self.paths.reader != ReaderKind::Sim {
            // The real readers de-aggregate what they read; the stream holds no aggregates.
            self.paths.kpl = 0.0;
        }
        self
    }

    /// How the `i`-th record put is answered.
    pub fn record_plan(&self, i: usize) -> Plan {
        let mut r = Rng::derived(self.seed, 1000 + i as u64);
        let x = r.unit();
        if x < 0.82 {
            Plan::Ack
        } else if x < 0.9 {
            Plan::Drop
        } else if !self.paths.failing {
            Plan::RetryThenAck(r.range(1, 3) as u32)
        } else {
            let n = r.range(1, 3) as u32;
            match r.below(3) {
                0 => Plan::RetryThenAck(n),
                1 => Plan::RetryAfterThenAck(n, r.range(100, self.paths.retry_after_max_ms)),
                _ => Plan::TrapThenAck(n),
            }
        }
    }

    /// The bound on what one shard's reader holds in memory beyond the front record it waits
    /// for: the in-flight bound, a read being handled and one read ahead.
    pub fn memory_bound(&self) -> usize {
        self.paths.in_flight.records + 2 * self.read_limit
    }
}

impl Paths {
    fn default_trim_horizon() -> Paths {
        Paths {
            start_at: StartAt::TrimHorizon,
            retry: None,
            in_flight: InFlight::default(),
            kpl: 0.0,
            failing: false,
            retry_after_max_ms: 1000,
            reader: ReaderKind::Sim,
        }
    }
}
