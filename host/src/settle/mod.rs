//! Settlement: per shard, outcomes in, checkpoint out.
//!
//! Records are registered in shard order as they are delivered and settled in any order (a
//! batch, and later parallel lanes, can answer out of order). The checkpoint moves over the
//! contiguous run of settled records at the front, and only there: a record handled out of order
//! moves nothing until every record before it is settled.
//!
//! A record answered `retry` with no cap is *held*: it stays unsettled, the reader goes on, and
//! the checkpoint stops in front of it for as long as this reader holds the shard. Nothing
//! behind a held record can move the checkpoint, so once the held record reaches the front the
//! tracker stops remembering what comes after it. A record that is not settled yet (waiting for
//! a retry-after delay or a publish) keeps every record after it here until it settles: the
//! shard's in-flight bound counts them ([`Tracker::span`]) and stops reading at it.

use std::collections::VecDeque;

use crate::lease::Checkpoint;
use crate::record::{Outcome, Position};

/// The handle of one delivered record inside its shard's tracker.
pub type Ticket = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    InFlight,
    Settled,
    Held,
    /// Delivered, then a seek moved the reader back over it: it will be delivered again.
    Forgotten,
}

#[derive(Debug)]
struct Slot {
    position: Position,
    state: State,
    /// A held record's partition key (for status: the record that stops the checkpoint).
    held_key: Option<Box<str>>,
}

/// What a shard's tracker has seen; kept for status and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub delivered: u64,
    pub settled: u64,
    pub held: u64,
}

/// The settlement state of one shard.
#[derive(Debug)]
pub struct Tracker {
    /// Delivered records the checkpoint has not passed, oldest first; `slots[0]` has ticket `base`.
    slots: VecDeque<Slot>,
    base: Ticket,
    next: Ticket,
    /// A held record reached the front: the checkpoint cannot move again under this reader.
    blocked_at: Option<Position>,
    /// Its partition key, when it was held through [`Tracker::hold`].
    blocked_key: Option<Box<str>>,
    checkpoint: Option<Checkpoint>,
    /// The checkpoint moved since [`Tracker::take_checkpoint`] last answered.
    moved: bool,
    /// The shard is closed and every record in it has been delivered.
    read_to_end: bool,
    counts: Counts,
}

impl Tracker {
    /// A tracker for a shard whose checkpoint (from the lease store) is `start`.
    pub fn new(start: Option<Checkpoint>) -> Self {
        Tracker {
            slots: VecDeque::new(),
            base: 0,
            next: 0,
            blocked_at: None,
            blocked_key: None,
            checkpoint: start,
            moved: false,
            read_to_end: false,
            counts: Counts::default(),
        }
    }

    /// Registers the next delivered record (in shard order) and answers its ticket.
    pub fn deliver(&mut self, position: Position) -> Ticket {
        let ticket = self.next;
        self.next += 1;
        self.counts.delivered += 1;
        if self.blocked_at.is_none() {
            self.slots.push_back(Slot {
                position,
                state: State::InFlight,
                held_key: None,
            });
        }
        ticket
    }

    /// Records a handler's outcome for a delivered record. Answers whether it settled.
    pub fn settle(&mut self, ticket: Ticket, outcome: Outcome) -> bool {
        let settles = outcome.settles();
        if settles {
            self.counts.settled += 1;
        } else {
            self.counts.held += 1;
        }
        if let Some(slot) = self.slot_mut(ticket)
            && slot.state == State::InFlight
        {
            slot.state = if settles { State::Settled } else { State::Held };
        }
        self.advance();
        settles
    }

    /// As [`Tracker::settle`], for a record that `outcome` may hold: its partition key is kept
    /// while it is held, so that status can name the record that stops the checkpoint.
    pub fn hold(&mut self, ticket: Ticket, outcome: Outcome, partition_key: &str) -> bool {
        if !outcome.settles()
            && let Some(slot) = self.slot_mut(ticket)
            && slot.state == State::InFlight
        {
            slot.held_key = Some(partition_key.into());
        }
        self.settle(ticket, outcome)
    }

    fn slot_mut(&mut self, ticket: Ticket) -> Option<&mut Slot> {
        ticket
            .checked_sub(self.base)
            .and_then(|i| self.slots.get_mut(i as usize))
    }

    /// The shard's reader is repositioned at `at` (a handler's seek): what was delivered from
    /// `at` on is forgotten (it will be delivered again, under new tickets; a late outcome for
    /// an old ticket changes nothing), and a held record at or after `at` no longer freezes the
    /// checkpoint. What came before `at` keeps its state, and the checkpoint never moves back.
    pub fn seek(&mut self, at: &Position) {
        for slot in &mut self.slots {
            if slot.position >= *at {
                slot.state = State::Forgotten;
            }
        }
        if self.blocked_at.as_ref().is_some_and(|b| *b >= *at) {
            self.blocked_at = None;
            self.blocked_key = None;
            // Tickets handed out while blocked had no slots; start the slots afresh.
            self.base = self.next;
        }
        self.read_to_end = false;
        self.advance();
    }

    /// Puts the checkpoint back to `committed` (the one the lease store holds), before the
    /// records from `from` on are read again: what settled after it was never made durable
    /// (committed state whose commit conflicted), so the checkpoint moves over them again.
    pub fn rewind(&mut self, committed: Option<Checkpoint>, from: &Position) {
        self.seek(from);
        self.checkpoint = committed;
        self.moved = false;
    }

    /// Notes that the shard is closed and everything in it has been delivered.
    pub fn mark_read_to_end(&mut self) {
        self.read_to_end = true;
        self.advance();
    }

    fn advance(&mut self) {
        while let Some(front) = self.slots.front() {
            match front.state {
                State::InFlight => return,
                State::Settled => {
                    let slot = self.slots.pop_front().expect("front exists");
                    self.base += 1;
                    // Records read again after a seek back may stand before the checkpoint:
                    // it never moves back.
                    let behind =
                        matches!(&self.checkpoint, Some(Checkpoint::At(c)) if *c >= slot.position);
                    if !behind {
                        self.checkpoint = Some(Checkpoint::At(slot.position));
                        self.moved = true;
                    }
                }
                State::Forgotten => {
                    self.slots.pop_front();
                    self.base += 1;
                }
                // Read again after a seek back, behind the checkpoint: a restart would never
                // deliver it again, so it does not freeze the checkpoint either.
                State::Held if matches!(&self.checkpoint, Some(Checkpoint::At(c)) if front.position <= *c) =>
                {
                    self.slots.pop_front();
                    self.base += 1;
                }
                State::Held => {
                    self.blocked_at = Some(front.position.clone());
                    self.blocked_key = front.held_key.clone();
                    self.base += self.slots.len() as u64;
                    self.slots.clear();
                    return;
                }
            }
        }
        if self.read_to_end
            && self.blocked_at.is_none()
            && self.checkpoint != Some(Checkpoint::ShardEnd)
        {
            self.checkpoint = Some(Checkpoint::ShardEnd);
            self.moved = true;
        }
    }

    /// The checkpoint if it moved since the last call (then write it to the lease store).
    pub fn take_checkpoint(&mut self) -> Option<Checkpoint> {
        if std::mem::take(&mut self.moved) {
            self.checkpoint.clone()
        } else {
            None
        }
    }

    /// The checkpoint as it stands: every record up to it is settled.
    #[cfg(test)]
    fn checkpoint(&self) -> Option<&Checkpoint> {
        self.checkpoint.as_ref()
    }

    /// The held record that stops the checkpoint, once it is the first unsettled one.
    pub fn blocked_at(&self) -> Option<&Position> {
        self.blocked_at.as_ref()
    }

    /// The partition key of the record [`Tracker::blocked_at`] names, when it was held
    /// through [`Tracker::hold`].
    pub fn blocked_key(&self) -> Option<&str> {
        self.blocked_key.as_deref()
    }

    /// How many delivered records the tracker keeps: every one from the first unsettled record
    /// on (a record that waits keeps all read after it), none past a held record at the front.
    pub fn span(&self) -> usize {
        self.slots.len()
    }

    /// What the records [`Tracker::span`] counts cost in memory, in bytes.
    pub fn span_bytes(&self) -> u64 {
        (self.slots.len() * std::mem::size_of::<Slot>()) as u64
    }

    /// The first record the checkpoint waits for, while the tracker keeps records behind it.
    pub fn first_unsettled(&self) -> Option<&Position> {
        self.slots
            .iter()
            .find(|s| s.state != State::Settled)
            .map(|s| &s.position)
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The shard is closed and every delivery from it is settled: SHARD_END may be written and
    /// its children may start.
    pub fn is_complete(&self) -> bool {
        self.checkpoint == Some(Checkpoint::ShardEnd)
    }
}

#[cfg(test)]
mod tests;
