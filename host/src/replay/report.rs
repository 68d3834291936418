//! What a replay found: how many records got each answer from each version, and the records
//! the two answered differently.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::effects::Recorded;
use crate::record::{Outcome, Record};

/// One version's answer for one record.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Outcome(Outcome),
    /// The call failed (a trap, the timeout, a wrong answer) on this record on its own: a host
    /// would retry it.
    Failed(String),
    /// Not answered: the handler sought before it.
    Unanswered,
}

impl Answer {
    /// The answer's name: the outcome's (`ack`, `drop`, `retry`, `retry-after`) or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            Answer::Outcome(o) => o.name(),
            Answer::Failed(_) => "failed",
            Answer::Unanswered => "unanswered",
        }
    }

    fn error(&self) -> Option<&str> {
        match self {
            Answer::Failed(e) => Some(e),
            Answer::Outcome(_) | Answer::Unanswered => None,
        }
    }
}

/// A record the two versions answered differently.
#[derive(Clone, Debug)]
pub struct Difference {
    pub shard_id: String,
    pub sequence_number: String,
    pub sub_sequence_number: u32,
    pub partition_key: String,
    pub current: Answer,
    pub candidate: Answer,
}

/// A replay's findings.
#[derive(Clone, Debug)]
pub struct Report {
    pub current: String,
    pub candidate: String,
    /// Records replayed.
    pub records: u64,
    /// By answer name: how many records got it from the current version, and from the
    /// candidate.
    pub outcomes: BTreeMap<&'static str, (u64, u64)>,
    /// The first differing records, in the order they were replayed.
    pub differences: Vec<Difference>,
    /// Every differing record, kept or not.
    pub differences_total: u64,
    /// Records read but not handed to either version (retry copies a host would not hand to
    /// this handler), by why.
    pub skipped: BTreeMap<&'static str, u64>,
    max_differences: usize,
    /// What each version would have done besides answering: current, candidate.
    pub effects: (Recorded, Recorded),
}

impl Report {
    pub fn new(current: String, candidate: String, max_differences: usize) -> Report {
        Report {
            current,
            candidate,
            records: 0,
            outcomes: BTreeMap::new(),
            differences: Vec::new(),
            differences_total: 0,
            skipped: BTreeMap::new(),
            max_differences,
            effects: Default::default(),
        }
    }

    /// Tallies the answers of both versions for `records` of shard `shard_id`. Two answers
    /// differ when their names do (a retry-after's delay and a failure's message may differ
    /// between runs of one version).
    pub fn add(
        &mut self,
        shard_id: &str,
        records: &[(Record, u32)],
        now: Vec<Answer>,
        then: Vec<Answer>,
    ) {
        for (((record, _), current), candidate) in records.iter().zip(now).zip(then) {
            self.records += 1;
            self.outcomes.entry(current.name()).or_default().0 += 1;
            self.outcomes.entry(candidate.name()).or_default().1 += 1;
            if current.name() == candidate.name() {
                continue;
            }
            self.differences_total += 1;
            if self.differences.len() < self.max_differences {
                self.differences.push(Difference {
                    shard_id: shard_id.to_owned(),
                    sequence_number: record.sequence_number.clone(),
                    sub_sequence_number: record.sub_sequence_number,
                    partition_key: record.partition_key.to_string(),
                    current,
                    candidate,
                });
            }
        }
    }

    /// Counts a record read and not replayed.
    pub fn skipped(&mut self, why: &'static str) {
        *self.skipped.entry(why).or_default() += 1;
    }

    pub fn effects(&mut self, current: Recorded, candidate: Recorded) {
        self.effects = (current, candidate);
    }

    /// The report for people: the outcome table, the differing records, the effects.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "current:   {}", self.current);
        let _ = writeln!(out, "candidate: {}", self.candidate);
        let _ = writeln!(out, "{} record(s) replayed", self.records);
        for (why, n) in &self.skipped {
            let _ = writeln!(out, "{n} record(s) skipped: {why}");
        }
        let _ = writeln!(
            out,
            "\n{:<12} {:>10} {:>10}",
            "outcome", "current", "candidate"
        );
        for (name, (current, candidate)) in &self.outcomes {
            let _ = writeln!(out, "{name:<12} {current:>10} {candidate:>10}");
        }
        let _ = writeln!(
            out,
            "\n{} record(s) answered differently",
            self.differences_total
        );
        for d in &self.differences {
            let at = match d.sub_sequence_number {
                0 => d.sequence_number.clone(),
                n => format!("{}/{n}", d.sequence_number),
            };
            let _ = write!(
                out,
                "  {} {at}  key {}  {} -> {}",
                d.shard_id,
                d.partition_key,
                d.current.name(),
                d.candidate.name()
            );
            for e in [d.current.error(), d.candidate.error()]
                .into_iter()
                .flatten()
            {
                let _ = write!(out, "  ({e})");
            }
            out.push('\n');
        }
        let shown = self.differences.len() as u64;
        if self.differences_total > shown {
            let _ = writeln!(out, "  … and {} more", self.differences_total - shown);
        }
        for (who, recorded) in [("current", &self.effects.0), ("candidate", &self.effects.1)] {
            let _ = writeln!(out, "\nrecorded, not performed ({who}):");
            if let Some(answer) = &recorded.answer {
                let _ = writeln!(out, "  unsent requests answered {}", answer.describe());
            }
            if recorded.counts.is_empty() {
                let _ = writeln!(out, "  nothing");
            }
            for (kind, n) in &recorded.counts {
                let _ = writeln!(out, "  {kind}: {n}");
            }
            for effect in recorded.kept.iter().take(20) {
                let _ = writeln!(out, "    {effect}");
            }
        }
        out
    }

    /// The report for tools: one JSON document.
    pub fn json(&self) -> serde_json::Value {
        let outcomes: serde_json::Map<String, serde_json::Value> = self
            .outcomes
            .iter()
            .map(|(name, (c, k))| {
                (
                    (*name).to_owned(),
                    serde_json::json!({ "current": c, "candidate": k }),
                )
            })
            .collect();
        let differences: Vec<serde_json::Value> = self
            .differences
            .iter()
            .map(|d| {
                let mut v = serde_json::json!({
                    "shard_id": d.shard_id,
                    "sequence_number": d.sequence_number,
                    "sub_sequence_number": d.sub_sequence_number,
                    "partition_key": d.partition_key,
                    "current": d.current.name(),
                    "candidate": d.candidate.name(),
                });
                if let Some(e) = d.current.error() {
                    v["current_error"] = e.into();
                }
                if let Some(e) = d.candidate.error() {
                    v["candidate_error"] = e.into();
                }
                v
            })
            .collect();
        let effects = |r: &Recorded| {
            serde_json::json!({
                "counts": r.counts,
                "first": r.kept.iter().map(ToString::to_string).collect::<Vec<_>>(),
                // What the guest got for a request that was not sent.
                "http_answer": match &r.answer {
                    Some(a) => serde_json::json!({
                        "status": a.status,
                        "stubbed": true,
                        "body_bytes": a.body.len(),
                        "content_type": a.content_type,
                    }),
                    None => serde_json::json!({ "status": 503, "stubbed": false }),
                },
            })
        };
        serde_json::json!({
            "current": self.current,
            "candidate": self.candidate,
            "records": self.records,
            "skipped": self.skipped,
            "outcomes": outcomes,
            "differences": differences,
            "differences_total": self.differences_total,
            "effects": {
                "current": effects(&self.effects.0),
                "candidate": effects(&self.effects.1),
            },
        })
    }
}
