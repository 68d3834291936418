//! A shadow: a candidate version that runs on every batch after the current one, on trial
//! (its publishes, seeks, HTTP requests and state writes recorded, never performed; see
//! [`crate::effects`]), whose answers are compared with the current version's and counted,
//! never settled. `deploy --shadow` sets one, `deploy --promote` makes it current as a deploy
//! does, `deploy --shadow-off` drops it.
//!
//! The current version pays nothing it can see: a shard worker hands a copy of each batch and
//! its answers to its shadow task through a queue of one (`dispatch/shadow.rs`); a batch that
//! finds the queue full is not compared (counted as dropped). Shadow tasks run on one thread
//! of their own at the lowest CPU priority ([`pool`]), so they take what the shards leave.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::effects::{Effects, HttpAnswer};
use crate::handler::HandlerFactory;

pub mod pool;

/// How many differing records a shadow keeps to show (the log says them too).
pub const FIRST_DIFFERENCES: usize = 20;

/// How much a shadow's state overlay holds, per subscription.
pub const OVERLAY_LIMIT: u64 = 32 << 20;

/// A candidate version in shadow.
pub struct Shadow {
    pub factory: Arc<dyn HandlerFactory>,
    /// Its component, for `--promote`.
    pub bytes: Vec<u8>,
    pub effects: Arc<Effects>,
    pub stats: ShadowStats,
    /// ms since the Unix epoch.
    pub since_ms: u64,
    /// The fleet's shadow this is (its `shadow_id`), when it came from the lease table.
    pub fleet_id: Option<String>,
}

impl Shadow {
    pub fn new(factory: Arc<dyn HandlerFactory>, bytes: Vec<u8>) -> Shadow {
        Shadow {
            factory,
            bytes,
            effects: Effects::new(false, OVERLAY_LIMIT),
            stats: ShadowStats::default(),
            since_ms: crate::lease::now_ms(),
            fleet_id: None,
        }
    }

    /// Its unsent HTTP requests answered `answer` (`deploy --shadow --http-answer`), not 503.
    pub fn answering(mut self, answer: Option<HttpAnswer>) -> Shadow {
        self.effects = Effects::answering(false, OVERLAY_LIMIT, answer);
        self
    }

    /// The fleet's shadow `id`.
    pub fn of_fleet(mut self, id: &str) -> Shadow {
        self.fleet_id = Some(id.to_owned());
        self
    }

    pub fn version(&self) -> String {
        self.factory.version()
    }

    /// What `status` shows.
    pub fn report(&self) -> ShadowReport {
        let s = &self.stats;
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let pairs = s.pairs.lock().unwrap_or_else(|p| p.into_inner());
        ShadowReport {
            version: self.version(),
            since_ms: self.since_ms,
            agree: n(&s.agree),
            differ: n(&s.differ),
            trapped: n(&s.trapped),
            timed_out: n(&s.timed_out),
            skipped: n(&s.skipped),
            batches_compared: n(&s.batches_compared),
            batches_dropped: n(&s.batches_dropped),
            records_dropped: n(&s.records_dropped),
            held_records: n(&s.held_records),
            held_bytes: n(&s.held_bytes),
            differences: pairs
                .iter()
                .map(|((current, candidate), records)| DifferenceCount {
                    current: current.to_string(),
                    candidate: candidate.to_string(),
                    records: *records,
                })
                .collect(),
            first_differences: s.first.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            http_answer: self.effects.answer().map(HttpAnswer::describe),
            effects: self
                .effects
                .recorded()
                .counts
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        }
    }
}

/// What one record's comparison found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compared {
    /// Both answered the same outcome.
    Agree,
    /// They answered different outcomes (current, candidate).
    Differ(&'static str, &'static str),
    /// The candidate's call trapped or failed on the record.
    Trapped,
    /// The candidate's call ran out of time on the record.
    TimedOut,
    /// The candidate did not answer (the shard stopped, or it sought).
    Skipped,
}

impl Compared {
    /// Its name in metrics: `agree`, `differ`, `trapped`, `timed-out` or `skipped`.
    pub fn name(self) -> &'static str {
        match self {
            Compared::Agree => "agree",
            Compared::Differ(..) => "differ",
            Compared::Trapped => "trapped",
            Compared::TimedOut => "timed-out",
            Compared::Skipped => "skipped",
        }
    }
}

/// A shadow's counts since it was set.
#[derive(Default)]
pub struct ShadowStats {
    agree: AtomicU64,
    differ: AtomicU64,
    trapped: AtomicU64,
    timed_out: AtomicU64,
    skipped: AtomicU64,
    batches_compared: AtomicU64,
    batches_dropped: AtomicU64,
    records_dropped: AtomicU64,
    pairs: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    first: Mutex<Vec<FirstDifference>>,
    /// Records and bytes of the batch copies it holds now (queued or being compared).
    held_records: AtomicU64,
    held_bytes: AtomicU64,
}

impl ShadowStats {
    pub fn count(&self, compared: Compared) {
        let counter = match compared {
            Compared::Agree => &self.agree,
            Compared::Differ(current, candidate) => {
                let mut pairs = self.pairs.lock().unwrap_or_else(|p| p.into_inner());
                *pairs.entry((current, candidate)).or_default() += 1;
                &self.differ
            }
            Compared::Trapped => &self.trapped,
            Compared::TimedOut => &self.timed_out,
            Compared::Skipped => &self.skipped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Keeps `d` if it is among the first; answers whether it was (to log it).
    pub fn first_difference(&self, d: FirstDifference) -> bool {
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.len() >= FIRST_DIFFERENCES {
            return false;
        }
        first.push(d);
        true
    }

    /// A batch copy of `records` holding `bytes` is made for it.
    pub fn hold(&self, records: usize, bytes: u64) {
        self.held_records
            .fetch_add(records as u64, Ordering::Relaxed);
        self.held_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The copy [`hold`](Self::hold) counted is dropped.
    pub fn release(&self, records: usize, bytes: u64) {
        self.held_records
            .fetch_sub(records as u64, Ordering::Relaxed);
        self.held_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Counts a batch of `records` compared, or dropped (the shadow was busy, or its copy did
    /// not fit the shard's in-flight bound).
    pub fn batch(&self, compared: bool, records: u64) {
        if compared {
            self.batches_compared.fetch_add(1, Ordering::Relaxed);
        } else {
            self.batches_dropped.fetch_add(1, Ordering::Relaxed);
            self.records_dropped.fetch_add(records, Ordering::Relaxed);
        }
    }
}

/// A record the candidate answered differently (or failed on).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstDifference {
    pub shard_id: String,
    pub sequence_number: String,
    pub partition_key: String,
    pub current: String,
    pub candidate: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How many records got one pair of answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DifferenceCount {
    pub current: String,
    pub candidate: String,
    pub records: u64,
}

/// A subscription's shadow, as `status` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowReport {
    pub version: String,
    pub since_ms: u64,
    pub agree: u64,
    pub differ: u64,
    pub trapped: u64,
    pub timed_out: u64,
    pub skipped: u64,
    pub batches_compared: u64,
    pub batches_dropped: u64,
    /// Records of the dropped batches (never compared).
    #[serde(default)]
    pub records_dropped: u64,
    /// Records and bytes of the batch copies it holds now, counted in the in-flight bound
    /// (`limits.in_flight_records`, `in_flight_bytes`) of the shards that made them.
    #[serde(default)]
    pub held_records: u64,
    #[serde(default)]
    pub held_bytes: u64,
    pub differences: Vec<DifferenceCount>,
    pub first_differences: Vec<FirstDifference>,
    /// What it would have done, by kind (`publish`, `seek`, `http-not-sent`, `state-write`).
    pub effects: BTreeMap<String, u64>,
    /// What its unsent HTTP requests are answered when it was told (`--http-answer`), e.g.
    /// `201 (stubbed)`; none: 503 with no body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_answer: Option<String>,
}
