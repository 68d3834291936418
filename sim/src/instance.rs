//! One instance of the simulated fleet: a [`Coordinator`] over its own views of the shared table
//! and stream, started, stopped gracefully, or killed like `kill -9` (its tasks dropped at
//! once: no release, no final checkpoint; what it had in flight never answers).

use std::sync::{Arc, Mutex};

use shardhost::slot::HandlerSlot;
use shardhost::status::StatusBoard;
use shardhost::testing::envelope::EnvelopeKeys;
use shardhost::testing::{Coordinator, LeaseSettings, SubscriptionPlan};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::faults::Faults;
use crate::handler::Factory;
use crate::log::Log;
use crate::params::{Params, ReaderKind, STREAM};
use crate::stream::Stream;
use crate::table::{Table, TableView};
use crate::view::StreamView;

/// What every instance shares.
pub struct Shared {
    pub params: Params,
    pub log: Arc<Mutex<Log>>,
    pub table: Arc<Table>,
    /// The read stream, then the retry stream of its own.
    pub streams: Vec<Arc<Stream>>,
    pub faults: Arc<Faults>,
    /// What retry copies and dead letters are made under.
    pub keys: Arc<EnvelopeKeys>,
}

/// One run of an instance, from its start to its end.
pub struct Running {
    pub inc: u32,
    stop: CancellationToken,
    killed: CancellationToken,
    task: JoinHandle<Result<(), String>>,
}

/// An instance slot: a machine that runs one instance at a time, under an owner id that stays
/// across restarts unless a restart takes a new one.
pub struct Slot {
    pub index: usize,
    pub owner: String,
    generation: u32,
    pub running: Option<Running>,
    /// Told to stop (gracefully) and not finished yet.
    pub stopping: bool,
}

impl Slot {
    pub fn new(index: usize) -> Slot {
        Slot {
            index,
            owner: format!("i{index}"),
            generation: 0,
            running: None,
            stopping: false,
        }
    }

    /// Running and not told to stop.
    pub fn live(&self) -> bool {
        self.running.is_some() && !self.stopping
    }

    /// Starts an instance (under a new owner id when `new_owner`).
    pub fn start(&mut self, shared: &Shared, new_owner: bool) {
        assert!(self.running.is_none(), "one instance per slot at a time");
        if new_owner {
            self.generation += 1;
            self.owner = format!("i{}g{}", self.index, self.generation);
        }
        let p = &shared.params;
        let inc = {
            let mut log = shared.log.lock().unwrap();
            log.owners.push(self.owner.clone());
            let inc = (log.owners.len() - 1) as u32;
            let owner = &self.owner;
            log.note(|| format!("start #{inc} (owner {owner})"));
            inc
        };
        let killed = CancellationToken::new();
        let stop = CancellationToken::new();
        let factory = Arc::new(Factory {
            inc,
            log: shared.log.clone(),
            faults: shared.faults.clone(),
            killed: killed.clone(),
        });
        let plan = SubscriptionPlan {
            name: Arc::from("sim"),
            stream: Arc::from(STREAM),
            rows: Default::default(),
            read_limit: p.read_limit,
            call_batch: p.call_batch,
            checkpoint_every: p.checkpoint_every,
            poll_interval: p.poll_interval,
            start_at: p.paths.start_at,
            handler: Arc::new(HandlerSlot::new(factory)),
            lanes: p.lanes,
            in_flight: p.paths.in_flight,
            retry: p.paths.retry.clone(),
            in_place_max_delay: shardhost::config::defaults::IN_PLACE_MAX_DELAY,
            publisher: None,
            envelopes: shared.keys.clone(),
            subscriptions: Arc::new([Arc::from("sim")]),
            metrics: Arc::new(shardhost::Metrics::new()),
            role: Default::default(),
            commit_state: false,
            state_conflicts: Default::default(),
            tap: None,
        };
        // The supervisor's way: a subscription whose copies go to a retry stream of their own
        // runs a second coordinator that reads it (same owner, its own rows).
        let copies = plan.retry_copies();
        let make = |plan: SubscriptionPlan| Coordinator {
            // The retry stream's reader polls, whatever the subscription reads by.
            source: Arc::new(StreamView {
                streams: shared.streams.clone(),
                inc,
                faults: shared.faults.clone(),
                killed: killed.clone(),
                keys: shared.keys.clone(),
                reader: match p.paths.reader {
                    ReaderKind::FanOut if *plan.stream != *STREAM => ReaderKind::Polling,
                    r => r,
                },
            }),
            plan: Arc::new(plan),
            store: Arc::new(TableView {
                table: shared.table.clone(),
                inc,
                skew_ms: p.skew_ms[self.index],
                faults: shared.faults.clone(),
                killed: killed.clone(),
                stopping: stop.clone(),
            }),
            owner: Arc::from(self.owner.as_str()),
            timings: LeaseSettings {
                ttl: p.ttl,
                renew_every: p.renew_every,
                list_every: p.list_every,
                balance: p.balance,
            },
            status: StatusBoard::new(),
        };
        let records = make(plan);
        let copies = copies.map(make);
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                let copies = async {
                    match copies {
                        Some(c) => c.run(stop.clone()).await,
                        None => Ok(()),
                    }
                };
                let (a, b) = tokio::join!(records.run(stop.clone()), copies);
                a.and(b).map_err(|e| e.to_string())
            }
        });
        self.running = Some(Running {
            inc,
            stop,
            killed,
            task,
        });
        self.stopping = false;
    }

    /// Asks the instance to stop gracefully (it finishes its batches, writes its final
    /// checkpoints and releases its leases).
    pub fn stop(&mut self, log: &Mutex<Log>) {
        if let Some(r) = &self.running {
            r.stop.cancel();
            self.stopping = true;
            let inc = r.inc;
            log.lock().unwrap().note(|| format!("stop #{inc}"));
        }
    }

    /// Kills the instance: everything it runs ends now, nothing it sent afterwards lands.
    pub fn kill(&mut self, log: &Mutex<Log>) {
        if let Some(r) = self.running.take() {
            r.kill(log);
        }
        self.stopping = false;
    }

    /// Collects a finished run: a coordinator that failed is a violation.
    pub async fn reap(&mut self, log: &Mutex<Log>) {
        if let Some(r) = self.running.take() {
            self.running = r.reap(log).await;
            self.stopping &= self.running.is_some();
        }
    }

    /// Takes the run out of the slot (it goes on stopping elsewhere).
    pub fn detach(&mut self) -> Option<Running> {
        self.stopping = false;
        self.running.take()
    }
}

impl Running {
    /// The run, when it has not finished yet; a finished coordinator that failed is a
    /// violation.
    pub async fn reap(self, log: &Mutex<Log>) -> Option<Running> {
        if !self.task.is_finished() {
            return Some(self);
        }
        let result = self.task.await;
        // A graceful run is over: nothing of it may run on (lane tasks included).
        self.killed.cancel();
        let mut log = log.lock().unwrap();
        let inc = self.inc;
        log.note(|| format!("#{inc} ended"));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let who = log.who(inc);
                log.violate("task-failed", format!("{who}: {e}"));
            }
            Err(e) => {
                let who = log.who(inc);
                log.violate("task-failed", format!("{who}: coordinator panicked: {e}"));
            }
        }
        None
    }

    /// Kills the run.
    pub fn kill(self, log: &Mutex<Log>) {
        self.killed.cancel();
        self.task.abort();
        let inc = self.inc;
        log.lock().unwrap().fault(|| format!("kill -9 #{inc}"));
    }
}
