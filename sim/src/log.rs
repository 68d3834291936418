//! What happened in one schedule, as the simulation's table, stream and handler saw it: every
//! record put (a *logical* record, the producer's, and each *entry* that carries it in a shard:
//! the original, or a retry copy) and how it was answered, every handler call, every lease
//! taken and checkpoint written, every read. The checks that must hold at the moment of a write
//! or a read run as it happens (`live`); the rest run over the whole log at the end (`check`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use shardhost::config::StartAt;
use shardhost::record::Outcome;
use tokio::time::Instant;

use crate::params::Plan;

pub use crate::position::{Cp, Pos, passed, show};

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

/// How a logical record ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Ack,
    Drop,
    DeadLetter,
}

/// One record the producer put (a user record: one of a KPL aggregate's, or a plain one).
#[derive(Clone, Debug)]
pub struct Rec {
    pub plan: Plan,
    /// Its original entry.
    pub shard: String,
    pub pos: Pos,
    /// When it arrived (the simulated wall clock, ms).
    pub arrival: u64,
    /// Answers it got that did not settle it (retry, retry-after, a trap).
    pub unsettled: u32,
    /// The first ack, drop or dead letter, and when (ms of virtual time).
    pub settled: Option<(End, u64)>,
}

/// One record in a shard: a logical record's original, or a retry copy of it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub logical: u64,
    /// 1 for an original; a copy's attempt.
    pub attempt: u32,
    /// Its index among its shard's entries.
    pub index: usize,
    /// The takes under which it was settled (answered ack or drop, or its copy or dead letter
    /// published).
    pub settled_by: Vec<usize>,
    /// When it was last settled (ms of virtual time).
    pub settled_at: u64,
    /// When its last answer that did not settle it lets its copy or letter go out.
    pub ready_at: u64,
    /// Each take's last answer that did not settle it.
    pub waits: HashMap<usize, Ans>,
}

/// One record's answer in a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ans {
    Out(Outcome),
    /// The call trapped.
    Trap,
}

impl Ans {
    pub fn settles(self) -> bool {
        matches!(self, Ans::Out(o) if o.settles())
    }
}

/// One handler call.
#[derive(Clone, Debug)]
pub struct Call {
    /// Its place among the log's events (finer than the ms clock).
    pub order: u64,
    pub inc: u32,
    pub shard: String,
    pub seqs: Vec<Pos>,
    pub start: u64,
    /// When it answered or was ended (dropped: a lost lease, a stop's grace, a crash).
    pub end: Option<u64>,
    /// Its answers, when it answered.
    pub outcomes: Option<Vec<Ans>>,
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
    /// Where the subscription starts a shard without a checkpoint and parents.
    pub start_at: StartAt,
    /// What one shard's reader may hold beyond the record it waits for
    /// ([`crate::params::Params::memory_bound`]).
    pub memory_bound: usize,
    /// The lease ttl (ms).
    pub ttl_ms: u64,
    /// Under a retry cap (a record answered retry is copied, never held).
    pub capped: bool,
    /// The takes already reported past the in-flight bound.
    pub over_bound: HashSet<usize>,
    /// Each shard's entries in order.
    pub shards: BTreeMap<String, Vec<Pos>>,
    /// Each shard's parents.
    pub parents: HashMap<String, Vec<String>>,
    /// The shards a reader marked as opened in the lease table (`start_at = latest`).
    pub marked: HashSet<String>,
    /// The shards of the retry stream of its own.
    pub retry_shards: HashSet<String>,
    pub closed: HashSet<String>,
    /// The logical records, by id (their data).
    pub records: HashMap<u64, Rec>,
    pub entries: HashMap<(String, Pos), Entry>,
    /// Each logical record's entries.
    pub by_logical: HashMap<u64, Vec<(String, Pos)>>,
    /// Where a shard without parents was first opened at `latest`: the index of the first
    /// entry a reader could see (for a first call at the tip that failed, the tip when it was
    /// sent: the reader must not skip what arrives while it tries again).
    pub latest_from: HashMap<String, usize>,
    pub calls: Vec<Call>,
    pub takes: Vec<Take>,
    /// Each incarnation's latest take, per shard.
    pub current: HashMap<(u32, String), usize>,
    /// The entries each take's readers handed out.
    pub handed: HashMap<usize, HashSet<Pos>>,
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
    /// When each take's last put of a copy or letter into a stream that failed was sent, and
    /// when it failed (ms).
    pub put_failures: HashMap<(usize, String), (u64, u64)>,
    pub put_reported: HashSet<usize>,
    /// When each incarnation's fan-out subscription of a shard last panicked (its worker
    /// fails: a release then is no store error's doing).
    pub subscription_panics: HashMap<(u32, String), u64>,
    /// When each incarnation's last checkpoint write of a shard failed with a store error.
    pub checkpoint_errors: HashMap<(u32, String), u64>,
    /// Retry copies and dead letters published.
    pub copies: u64,
    pub letters: u64,
    /// Events so far (takes and calls), to order events of one ms.
    events: u64,
    trace: Option<Vec<String>>,
}

impl Log {
    pub fn new(seed: u64, verbose: bool, params: &crate::params::Params) -> Log {
        Log {
            seed,
            start: Instant::now(),
            start_at: params.paths.start_at,
            memory_bound: params.memory_bound(),
            capped: params.paths.retry.is_some(),
            ttl_ms: params.ttl.as_millis() as u64,
            over_bound: HashSet::new(),
            shards: BTreeMap::new(),
            parents: HashMap::new(),
            retry_shards: HashSet::new(),
            marked: HashSet::new(),
            closed: HashSet::new(),
            records: HashMap::new(),
            entries: HashMap::new(),
            by_logical: HashMap::new(),
            latest_from: HashMap::new(),
            calls: Vec::new(),
            takes: Vec::new(),
            current: HashMap::new(),
            handed: HashMap::new(),
            grants: HashMap::new(),
            shard_ends: HashMap::new(),
            owners: Vec::new(),
            violations: Vec::new(),
            faults: 0,
            checkpoint_writes: 0,
            put_failures: HashMap::new(),
            put_reported: HashSet::new(),
            checkpoint_errors: HashMap::new(),
            subscription_panics: HashMap::new(),
            copies: 0,
            letters: 0,
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

    /// An entry put into `shard` at `pos`: the original of the logical record `logical`, or a
    /// copy of it.
    pub fn put(&mut self, shard: &str, pos: Pos, logical: u64, attempt: u32) {
        let seqs = self.shards.entry(shard.to_owned()).or_default();
        let index = seqs.len();
        seqs.push(pos);
        let entry = Entry {
            logical,
            attempt,
            index,
            settled_by: Vec::new(),
            settled_at: 0,
            ready_at: 0,
            waits: HashMap::new(),
        };
        self.entries.insert((shard.to_owned(), pos), entry);
        self.by_logical
            .entry(logical)
            .or_default()
            .push((shard.to_owned(), pos));
        self.note(|| {
            format!(
                "put {shard}/{} (record {logical}, attempt {attempt})",
                show(pos)
            )
        });
    }

    /// A new logical record, before its original is put.
    pub fn produced(&mut self, logical: u64, plan: Plan, shard: &str, pos: Pos, arrival: u64) {
        let rec = Rec {
            plan,
            shard: shard.to_owned(),
            pos,
            arrival,
            unsettled: 0,
            settled: None,
        };
        self.records.insert(logical, rec);
        self.put(shard, pos, logical, 1);
        self.note(|| format!("  ({plan:?})"));
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
        self.current
            .insert((inc, shard.to_owned()), self.takes.len() - 1);
    }

    /// The latest take of `inc` on `shard`.
    pub fn take_of(&self, inc: u32, shard: &str) -> Option<usize> {
        self.current.get(&(inc, shard.to_owned())).copied()
    }

    pub fn call_started(&mut self, inc: u32, shard: &str, seqs: Vec<Pos>) -> usize {
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

    pub fn call_ended(&mut self, id: usize, outcomes: Option<Vec<Ans>>) {
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
