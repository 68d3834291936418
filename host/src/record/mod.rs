//! The values that cross the handler boundary: records in, outcomes out.
//!
//! These types are the host side of `wit/handler.wit` (`interface types`). They derive the
//! component-model traits directly, and the generated bindings (`wasm/bindings.rs`) are mapped
//! onto them, so a batch is lowered into the guest straight from the records the shard source
//! produced, with no intermediate copy (`bindgen!` checks their size and alignment against the
//! WIT when the host compiles).

use std::cmp::Ordering;
use std::fmt;

use wasmtime::component::{ComponentType, Lift, Lower};

mod sequence;
pub use sequence::SequenceNumber;

/// One Kinesis record as a handler sees it (`kinesis-record` in the WIT).
#[derive(Clone, Debug, PartialEq, Eq, ComponentType, Lower, Lift)]
#[component(record)]
pub struct Record {
    /// Shared by the user records of one KPL aggregate.
    #[component(name = "partition-key")]
    pub partition_key: std::sync::Arc<str>,
    #[component(name = "sequence-number")]
    pub sequence_number: String,
    /// Position inside a KPL aggregate; 0 for a plain record.
    #[component(name = "sub-sequence-number")]
    pub sub_sequence_number: u32,
    /// Milliseconds since the Unix epoch.
    #[component(name = "approximate-arrival-timestamp")]
    pub approximate_arrival_timestamp: u64,
    pub data: Vec<u8>,
}

impl Record {
    /// How the record's place compares with `p`, without building a [`Position`].
    pub fn position_cmp(&self, p: &Position) -> Ordering {
        p.sequence_number
            .cmp_text(&self.sequence_number)
            .reverse()
            .then(self.sub_sequence_number.cmp(&p.sub_sequence_number))
    }

    /// The record's place in its shard, for ordering and checkpoints.
    pub fn position(&self) -> Position {
        Position::new(&self.sequence_number, self.sub_sequence_number)
    }
}

/// Where a batch comes from (`batch-info` in the WIT).
#[derive(Clone, Debug, PartialEq, Eq, ComponentType, Lower, Lift)]
#[component(record)]
pub struct BatchInfo {
    pub stream: String,
    #[component(name = "shard-id")]
    pub shard_id: String,
    #[component(name = "millis-behind-latest")]
    pub millis_behind_latest: Option<u64>,
    /// 1 for a first delivery.
    pub attempt: u32,
}

/// What becomes of one record (`outcome` in the WIT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ComponentType, Lower, Lift)]
#[component(variant)]
pub enum Outcome {
    /// Handled.
    #[component(name = "ack")]
    Ack,
    /// Retired without handling; settles like ack.
    #[component(name = "drop")]
    Drop,
    /// Not handled; without a retry cap the record is held.
    #[component(name = "retry")]
    Retry,
    /// As retry, after at least this many milliseconds.
    #[component(name = "retry-after")]
    RetryAfter(u64),
}

impl Outcome {
    /// Whether this outcome settles the record (lets the checkpoint pass it).
    pub fn settles(self) -> bool {
        matches!(self, Outcome::Ack | Outcome::Drop)
    }

    /// The outcome's name as users see it in logs and `invoke --json`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ack => "ack",
            Outcome::Drop => "drop",
            Outcome::Retry => "retry",
            Outcome::RetryAfter(_) => "retry-after",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::RetryAfter(ms) => write!(f, "retry-after({ms}ms)"),
            other => f.write_str(other.name()),
        }
    }
}

/// One outcome for a whole batch, or one per record (`batch-outcome` in the WIT).
#[derive(Clone, Debug, PartialEq, Eq, ComponentType, Lower, Lift)]
#[component(variant)]
pub enum BatchOutcome {
    #[component(name = "all")]
    All(Outcome),
    #[component(name = "each")]
    Each(Vec<Outcome>),
}

/// A place in a shard: a sequence number and, inside a KPL aggregate, a sub-sequence number.
///
/// Kinesis sequence numbers are decimal strings that grow within a shard; they compare as
/// numbers, not as text, and are kept packed ([`SequenceNumber`]): a position is copied and
/// compared without an allocation.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    sequence_number: SequenceNumber,
    sub_sequence_number: u32,
}

impl Position {
    pub fn new(sequence_number: &str, sub_sequence_number: u32) -> Self {
        Position {
            sequence_number: SequenceNumber::new(sequence_number),
            sub_sequence_number,
        }
    }

    /// The sequence number as Kinesis writes it.
    pub fn sequence_number(&self) -> String {
        self.sequence_number.to_string()
    }

    pub fn sub_sequence_number(&self) -> u32 {
        self.sub_sequence_number
    }

    /// Where the Kinesis record holding this position starts (sub-sequence number 0: the first
    /// user record of an aggregate).
    pub fn record_start(&self) -> Position {
        Position {
            sequence_number: self.sequence_number.clone(),
            sub_sequence_number: 0,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sub_sequence_number == 0 {
            write!(f, "{}", self.sequence_number)
        } else {
            write!(f, "{}/{}", self.sequence_number, self.sub_sequence_number)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_compare_as_numbers_not_text() {
        assert!(Position::new("9", 0) < Position::new("10", 0));
        assert_eq!(Position::new("0010", 0), Position::new("10", 0));
        assert!(Position::new("10", 0) < Position::new("10", 1));
        assert!(Position::new("10", 5) < Position::new("11", 0));
    }

    #[test]
    fn only_ack_and_drop_settle() {
        assert!(Outcome::Ack.settles());
        assert!(Outcome::Drop.settles());
        assert!(!Outcome::Retry.settles());
        assert!(!Outcome::RetryAfter(5).settles());
    }
}
