//! What happened in one schedule, as the simulation's table, stream and handler saw it: every
//! record put and how it was answered, every handler call, every lease taken and checkpoint
//! written. The checks that must hold at the moment of a write run here as it is applied; the
//! rest run over the whole log at the end (`check`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use shardhost::record::Outcome;
use tokio::time::Instant;

use crate::params::Plan;

/// A checkpoint as the simulation compares it: a sequence number, or the shard's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cp {
    At(u64),
    End,
}

impl Cp {
    /// Whether a reader starting after this checkpoint skips the record `seq`.
    pub fn passes(self, seq: u64) -> bool {
        match self {
            Cp::At(c) => seq <= c,
            Cp::End => true,
        }
    }
}

impl fmt::Display for Cp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cp::At(c) => write!(f, "{c}"),
            Cp::End => f.write_str("SHARD_END"),
        }
    }
}

/// A broken promise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name (`record-lost`, `two-holders`, ...).
    pub check: &'static str,
    pub seed: u64,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seed {}: {}: {}", self.seed, self.check, self.message)
    }
}

/// One record put.
#[derive(Clone, Debug)]
pub struct Rec {
    pub plan: Plan,
    /// `retry` answers given so far.
    pub retries: u32,
    /// The first ack or drop, and when (ms of virtual time).
    pub settled: Option<(Outcome, u64)>,
}

/// One handler call.
#[derive(Clone, Debug)]
pub struct Call {
    /// Its place among the log's events (finer than the ms clock).
    pub order: u64,
    pub inc: u32,
    pub shard: String,
    pub seqs: Vec<u64>,
    pub start: u64,
    /// When it answered or was ended (dropped: a lost lease, a stop's grace, a crash).
    pub end: Option<u64>,
    /// Its answers, when it answered.
    pub outcomes: Option<Vec<Outcome>>,
}

/// A lease taken (an acquire applied to the table).
#[derive(Clone, Debug)]
pub struct Take {
    /// Its place among the log's events.
    pub order: u64,
    pub inc: u32,
    pub shard: String,
    pub at: u64,
    /// The table's checkpoint when it was taken.
    pub cp: Option<Cp>,
}

/// The log of one schedule.
pub struct Log {
    pub seed: u64,
    start: Instant,
    /// Each shard's records in order.
    pub shards: BTreeMap<String, Vec<u64>>,
    /// Each shard's parents.
    pub parents: HashMap<String, Vec<String>>,
    pub closed: HashSet<String>,
    pub records: HashMap<(String, u64), Rec>,
    pub calls: Vec<Call>,
    pub takes: Vec<Take>,
    /// The takes and renewals each incarnation saw succeed, per shard: (answered, sent), in
    /// virtual ms. A holder may act until `sent + 4/5 ttl` of the latest one answered.
    pub grants: HashMap<(u32, String), Vec<(u64, u64)>>,
    /// When SHARD_END was first written, per shard.
    pub shard_ends: HashMap<String, u64>,
    /// The owner id of each incarnation (an instance's run between a start and its end).
    pub owners: Vec<String>,
    pub violations: Vec<Violation>,
    pub faults: u64,
    /// Checkpoints applied (progress, for the healing phase).
    pub checkpoint_writes: u64,
    /// Events so far (takes and calls), to order events of one ms.
    events: u64,
    trace: Option<Vec<String>>,
}

impl Log {
    pub fn new(seed: u64, verbose: bool) -> Log {
        Log {
            seed,
            start: Instant::now(),
            shards: BTreeMap::new(),
            parents: HashMap::new(),
            closed: HashSet::new(),
            records: HashMap::new(),
            calls: Vec::new(),
            takes: Vec::new(),
            grants: HashMap::new(),
            shard_ends: HashMap::new(),
            owners: Vec::new(),
            violations: Vec::new(),
            faults: 0,
            checkpoint_writes: 0,
            events: 0,
            trace: verbose.then(Vec::new),
        }
    }

    /// Virtual ms since the schedule started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Notes an event in the trace (`-v`).
    pub fn note(&mut self, what: impl FnOnce() -> String) {
        let t = self.now();
        if let Some(trace) = &mut self.trace {
            trace.push(format!("{:>10.3}s  {}", t as f64 / 1000.0, what()));
        }
    }

    pub fn take_trace(&mut self) -> Vec<String> {
        self.trace.take().unwrap_or_default()
    }

    pub fn fault(&mut self, what: impl FnOnce() -> String) {
        self.faults += 1;
        self.note(|| format!("fault: {}", what()));
    }

    /// Records a broken invariant (the first few of each kind: one fault tends to break one
    /// invariant many times over).
    pub fn violate(&mut self, check: &'static str, message: String) {
        self.note(|| format!("VIOLATION {check}: {message}"));
        if self.violations.iter().filter(|v| v.check == check).count() >= 5 {
            return;
        }
        self.violations.push(Violation {
            check,
            seed: self.seed,
            message,
        });
    }

    /// Names an incarnation in messages.
    pub fn who(&self, inc: u32) -> String {
        let owner = self.owners.get(inc as usize).map_or("?", String::as_str);
        format!("instance #{inc} (owner {owner})")
    }

    pub fn new_shard(&mut self, shard: &str, parents: &[String]) {
        self.shards.entry(shard.to_owned()).or_default();
        self.parents.insert(shard.to_owned(), parents.to_vec());
    }

    pub fn put(&mut self, shard: &str, seq: u64, plan: Plan) {
        self.shards.entry(shard.to_owned()).or_default().push(seq);
        let rec = Rec {
            plan,
            retries: 0,
            settled: None,
        };
        self.records.insert((shard.to_owned(), seq), rec);
        self.note(|| format!("put {shard}/{seq} ({plan:?})"));
    }

    /// The handler's answer for one record: as its plan says, given the retries so far.
    pub fn answer(&mut self, shard: &str, seq: u64) -> Outcome {
        let now = self.now();
        let Some(rec) = self.records.get_mut(&(shard.to_owned(), seq)) else {
            self.violate(
                "unknown-record",
                format!("shard {shard}: the handler got {seq}, which was never put there"),
            );
            return Outcome::Ack;
        };
        let outcome = match rec.plan {
            Plan::Ack => Outcome::Ack,
            Plan::Drop => Outcome::Drop,
            Plan::RetryThenAck(n) if rec.retries < n => {
                rec.retries += 1;
                Outcome::Retry
            }
            Plan::RetryThenAck(_) => Outcome::Ack,
        };
        if outcome.settles() && rec.settled.is_none() {
            rec.settled = Some((outcome, now));
        }
        outcome
    }

    /// A take or renewal whose success reached its caller.
    pub fn granted(&mut self, inc: u32, shard: &str, sent: u64) {
        let answered = self.now();
        self.grants
            .entry((inc, shard.to_owned()))
            .or_default()
            .push((answered, sent));
    }

    pub fn took(&mut self, inc: u32, shard: &str, cp: Option<Cp>) {
        let at = self.now();
        self.note(|| format!("#{inc} took {shard} (checkpoint {cp:?})"));
        self.events += 1;
        self.takes.push(Take {
            order: self.events,
            inc,
            shard: shard.to_owned(),
            at,
            cp,
        });
    }

    /// A checkpoint write applied to the table: it never moves backwards, never passes a record
    /// without an ack or drop recorded by now, and SHARD_END only ends a closed shard.
    pub fn checkpointed(&mut self, inc: u32, shard: &str, old: Option<Cp>, new: Cp) {
        self.checkpoint_writes += 1;
        self.note(|| format!("#{inc} checkpoint {shard} {new}"));
        if let Some(old) = old
            && new < old
        {
            let who = self.who(inc);
            self.violate(
                "checkpoint-backwards",
                format!("shard {shard}: {who} moved the checkpoint back from {old} to {new}"),
            );
        }
        let unanswered = self.shards.get(shard).and_then(|seqs| {
            seqs.iter()
                .copied()
                .take_while(|&s| new.passes(s))
                .find(|&s| self.records[&(shard.to_owned(), s)].settled.is_none())
        });
        if let Some(seq) = unanswered {
            let who = self.who(inc);
            self.violate(
                "checkpoint-past-unanswered",
                format!(
                    "shard {shard}: {who} wrote checkpoint {new}, past record {seq}, which no call had acked or dropped"
                ),
            );
        }
        if new == Cp::End {
            if !self.closed.contains(shard) {
                let who = self.who(inc);
                self.violate(
                    "shard-end-of-open-shard",
                    format!("shard {shard}: {who} wrote SHARD_END but the shard is open"),
                );
            }
            let now = self.now();
            self.shard_ends.entry(shard.to_owned()).or_insert(now);
        }
    }

    pub fn call_started(&mut self, inc: u32, shard: &str, seqs: Vec<u64>) -> usize {
        let start = self.now();
        self.note(|| format!("#{inc} calls {shard} {seqs:?}"));
        self.events += 1;
        self.calls.push(Call {
            order: self.events,
            inc,
            shard: shard.to_owned(),
            seqs,
            start,
            end: None,
            outcomes: None,
        });
        self.calls.len() - 1
    }

    pub fn call_ended(&mut self, id: usize, outcomes: Option<Vec<Outcome>>) {
        let now = self.now();
        let call = &mut self.calls[id];
        if call.end.is_none() {
            call.end = Some(now);
            call.outcomes = outcomes;
            let (inc, answered) = (call.inc, call.outcomes.clone());
            self.note(|| match answered {
                Some(o) => format!("#{inc} call {id} answered {o:?}"),
                None => format!("#{inc} call {id} ended unanswered"),
            });
        }
    }
}
