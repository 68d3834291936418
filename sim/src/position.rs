//! Positions and checkpoints as the simulation compares them.

use std::fmt;

/// A record's place in its shard: sequence number and sub-sequence number (a KPL aggregate's
/// user records share the first).
pub type Pos = (u64, u32);

/// A checkpoint as the simulation compares it: a position, or the shard's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cp {
    At(Pos),
    End,
}

impl Cp {
    /// Whether a reader starting after this checkpoint skips the record at `pos`.
    pub fn passes(self, pos: Pos) -> bool {
        match self {
            Cp::At(c) => pos <= c,
            Cp::End => true,
        }
    }
}

/// Whether a checkpoint (or none) passes `pos`.
pub fn passed(cp: Option<Cp>, pos: Pos) -> bool {
    cp.is_some_and(|c| c.passes(pos))
}

impl fmt::Display for Cp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cp::At((seq, 0)) => write!(f, "{seq}"),
            Cp::At((seq, sub)) => write!(f, "{seq}/{sub}"),
            Cp::End => f.write_str("SHARD_END"),
        }
    }
}

/// A position as messages show it.
pub fn show(pos: Pos) -> String {
    Cp::At(pos).to_string()
}
