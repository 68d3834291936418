//! The retry copies in a replayed stream, taken as a host of the subscription takes them: a copy
//! of its own (made under one of the fleet's keys, for this subscription, on its retry stream)
//! is replayed as its original record at the copy's attempt; another subscription's copy, and a
//! copy no key of the fleet authenticates, are skipped (a host never hands either to this
//! handler); anything else is an ordinary record.

use crate::envelope::{self, EnvelopeKeys, Kind, Rejected};
use crate::record::Record;

/// How a replay tells retry copies from records.
pub struct Copies {
    keys: EnvelopeKeys,
    subscription: String,
    /// Copies of this subscription are put into the replayed stream (its `retry_stream`).
    ours_here: bool,
}

/// What a read record is to the replay.
pub enum Taken {
    /// Replayed: the record (a copy unwrapped to its original) and its attempt.
    Replayed(Record, u32),
    /// Not handed to the handler, and why.
    Skipped(&'static str),
}

/// Why a record was skipped: another subscription's copy.
pub const FOREIGN: &str = "another subscription's retry copy";
/// Why a record was skipped: a copy no key of the fleet authenticates.
pub const UNAUTHENTICATED: &str = "a retry copy no key of the fleet authenticates";

impl Copies {
    pub fn new(keys: EnvelopeKeys, subscription: &str, ours_here: bool) -> Copies {
        Copies {
            keys,
            subscription: subscription.to_owned(),
            ours_here,
        }
    }

    pub fn take(&self, mut record: Record) -> Taken {
        let (header, at) = match envelope::unwrap(&self.keys, &record.data) {
            Ok(Some((h, original))) if h.kind == Kind::Retry => {
                let at = record.data.len() - original.len();
                (h, at)
            }
            Err(Rejected::Unauthenticated { .. }) => return Taken::Skipped(UNAUTHENTICATED),
            // A dead letter, or a record that only looks like an envelope: a record.
            _ => return Taken::Replayed(record, 1),
        };
        if header.subscription != self.subscription {
            return Taken::Skipped(FOREIGN);
        }
        if !self.ours_here {
            return Taken::Replayed(record, 1);
        }
        record.data.drain(..at);
        Taken::Replayed(record, header.attempt.max(1))
    }
}
