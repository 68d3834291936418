//! What a version on trial does besides answering: `shardhost replay` runs a handler over a
//! stream's history, a shadow runs beside the current version, and every component is
//! instantiated once to validate it (`wasm::Runtime::load`); what each would have done to the
//! world, from its start-up code on, is recorded here, never performed. A `publish` is
//! recorded and answered with a sequence number no stream has; a `seek` is recorded; an HTTP
//! request to a granted origin is recorded and answered 503 without a connection, or with the
//! [`answer`] it was told to give (`--http-answer`), marked stubbed (with `--http live`, a
//! request that only reads is sent: GET, HEAD, OPTIONS); state reads see the real store
//! (through a store with permits of its own, `state::Stores::trial_of`), and state writes go to
//! an [`overlay`] that later reads of the same run see, never to the store.
//!
//! What the sandbox refuses is still refused, as it is live: a stream outside `publish_to`, an
//! origin outside `[subscription.http] allow`, a bucket outside the grant.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::state::StateStore;

pub mod answer;
pub mod overlay;

pub use answer::{AnswerSpec, HttpAnswer};
pub use overlay::Overlay;

/// How many effects are kept in full; the rest are counted.
pub const KEPT: usize = 1000;

/// The effects of one version over one run.
pub struct Effects {
    http_live: bool,
    /// What an unsent request is answered: `None`, 503 with no body.
    answer: Option<HttpAnswer>,
    log: Mutex<Log>,
    overlay: OnceLock<Arc<Overlay>>,
    overlay_limit: u64,
}

#[derive(Default)]
struct Log {
    kept: Vec<Effect>,
    counts: BTreeMap<&'static str, u64>,
    published: u64,
}

/// One recorded effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    Publish {
        stream: String,
        partition_key: String,
        bytes: usize,
    },
    Seek {
        sequence_number: String,
    },
    Http {
        method: String,
        uri: String,
        /// The status the guest saw: when the request was not sent, 503 or the told answer's.
        status: u16,
        sent: bool,
        /// Not sent, and answered as told (`--http-answer`).
        stubbed: bool,
    },
    StateWrite {
        op: &'static str,
        key: String,
    },
}

impl Effect {
    /// The effect's kind, as the report counts it.
    pub fn kind(&self) -> &'static str {
        match self {
            Effect::Publish { .. } => "publish",
            Effect::Seek { .. } => "seek",
            Effect::Http { sent: true, .. } => "http-sent",
            Effect::Http { .. } => "http-not-sent",
            Effect::StateWrite { .. } => "state-write",
        }
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Effect::Publish {
                stream,
                partition_key,
                bytes,
            } => write!(f, "publish to {stream}, key {partition_key}, {bytes} bytes"),
            Effect::Seek { sequence_number } => write!(f, "seek to {sequence_number}"),
            Effect::Http {
                method,
                uri,
                status,
                sent: true,
                ..
            } => write!(f, "{method} {uri}: {status}"),
            Effect::Http {
                method,
                uri,
                status,
                stubbed: true,
                ..
            } => write!(f, "{method} {uri}: not sent, answered {status} (stubbed)"),
            Effect::Http {
                method,
                uri,
                status,
                ..
            } => write!(f, "{method} {uri}: not sent ({status})"),
            Effect::StateWrite { op, key } => write!(f, "state {op} {key}"),
        }
    }
}

/// What the report says of one version's effects.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// The first [`KEPT`] effects, in the order they happened.
    pub kept: Vec<Effect>,
    /// How many of each kind happened.
    pub counts: BTreeMap<&'static str, u64>,
    /// What the unsent requests were answered when it was told (`None`: 503, no body).
    pub answer: Option<HttpAnswer>,
}

impl Effects {
    /// A recorder; `http_live`: requests that only read are sent. A run's state overlay holds
    /// at most `overlay_limit` bytes of keys and values.
    pub fn new(http_live: bool, overlay_limit: u64) -> Arc<Effects> {
        Effects::answering(http_live, overlay_limit, None)
    }

    /// A recorder whose unsent requests get `answer` (`None`: 503 with no body).
    pub fn answering(
        http_live: bool,
        overlay_limit: u64,
        answer: Option<HttpAnswer>,
    ) -> Arc<Effects> {
        Arc::new(Effects {
            http_live,
            answer,
            log: Mutex::new(Log::default()),
            overlay: OnceLock::new(),
            overlay_limit,
        })
    }

    /// Whether a request with `method` is sent (a read, with `--http live`).
    pub fn sends(&self, method: &str) -> bool {
        self.http_live && matches!(method, "GET" | "HEAD" | "OPTIONS")
    }

    /// What an unsent request is answered, when it was told.
    pub fn answer(&self) -> Option<&HttpAnswer> {
        self.answer.as_ref()
    }

    pub fn record(&self, effect: Effect) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        *log.counts.entry(effect.kind()).or_default() += 1;
        if log.kept.len() < KEPT {
            log.kept.push(effect);
        }
    }

    /// Records a publish; answers the sequence number the guest gets: 56 digits, starting with
    /// `9` and counting up, so no two are alike and none is a real record's.
    pub fn publish(&self, stream: &str, partition_key: &str, bytes: usize) -> String {
        self.record(Effect::Publish {
            stream: stream.to_owned(),
            partition_key: partition_key.to_owned(),
            bytes,
        });
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.published += 1;
        format!("9{:055}", log.published)
    }

    /// The store a version's state calls go to: reads from `real`, writes to this run's
    /// overlay. The first grant seen makes the overlay (a subscription has one store).
    pub fn overlaid(self: &Arc<Self>, real: Arc<dyn StateStore>) -> Arc<dyn StateStore> {
        self.overlay
            .get_or_init(|| Arc::new(Overlay::new(real, self.overlay_limit, self.clone())))
            .clone()
    }

    /// What was recorded so far.
    pub fn recorded(&self) -> Recorded {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        Recorded {
            kept: log.kept.clone(),
            counts: log.counts.clone(),
            answer: self.answer.clone(),
        }
    }
}

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("http_live", &self.http_live)
            .field("answer", &self.answer.as_ref().map(|a| a.status))
            .finish_non_exhaustive()
    }
}
