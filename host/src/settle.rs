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
mod tests {
    use super::*;

    fn pos(n: u32) -> Position {
        Position::new(&format!("{:056}", n), 0)
    }

    fn at(n: u32) -> Option<Checkpoint> {
        Some(Checkpoint::At(pos(n)))
    }

    #[test]
    fn seeking_back_to_a_held_record_lets_it_settle_and_the_checkpoint_move_on() {
        let mut t = Tracker::new(None);
        let a = t.deliver(pos(1));
        let b = t.deliver(pos(2));
        let c = t.deliver(pos(3));
        t.settle(a, Outcome::Ack);
        t.settle(b, Outcome::Retry);
        t.settle(c, Outcome::Ack);
        assert_eq!(t.take_checkpoint(), at(1));
        assert_eq!(t.blocked_at(), Some(&pos(2)));
        t.seek(&pos(2));
        assert_eq!(t.blocked_at(), None, "the held record is read again");
        let b2 = t.deliver(pos(2));
        let c2 = t.deliver(pos(3));
        t.settle(b2, Outcome::Ack);
        t.settle(c2, Outcome::Ack);
        assert_eq!(t.take_checkpoint(), at(3));
    }

    #[test]
    fn a_seek_forgets_what_was_delivered_from_there_and_never_moves_the_checkpoint_back() {
        let mut t = Tracker::new(at(10));
        let tickets: Vec<_> = (11..=14).map(|n| t.deliver(pos(n))).collect();
        t.settle(tickets[0], Outcome::Ack);
        t.seek(&pos(12));
        // A late outcome for a forgotten delivery changes nothing.
        t.settle(tickets[3], Outcome::Ack);
        assert_eq!(t.take_checkpoint(), at(11));
        // Seek back behind the checkpoint: records read again do not drag it back.
        t.seek(&pos(5));
        let again = t.deliver(pos(5));
        t.settle(again, Outcome::Ack);
        assert_eq!(t.take_checkpoint(), None);
        assert_eq!(t.checkpoint(), at(11).as_ref());
        // Held behind the checkpoint: it freezes nothing.
        let behind = t.deliver(pos(6));
        t.settle(behind, Outcome::Retry);
        assert_eq!(t.blocked_at(), None);
        let later = t.deliver(pos(12));
        t.settle(later, Outcome::Ack);
        assert_eq!(t.take_checkpoint(), at(12));
    }

    #[test]
    fn ack_and_drop_move_the_checkpoint_over_the_settled_run() {
        let mut t = Tracker::new(None);
        let tickets: Vec<_> = (1..=3).map(|n| t.deliver(pos(n))).collect();
        t.settle(tickets[0], Outcome::Ack);
        t.settle(tickets[1], Outcome::Drop);
        assert_eq!(t.take_checkpoint(), at(2));
        assert_eq!(t.take_checkpoint(), None, "answered once per move");
        t.settle(tickets[2], Outcome::Ack);
        assert_eq!(t.take_checkpoint(), at(3));
    }

    #[test]
    fn a_record_settled_out_of_order_moves_nothing_until_those_before_it_settle() {
        let mut t = Tracker::new(None);
        let a = t.deliver(pos(1));
        let b = t.deliver(pos(2));
        t.settle(b, Outcome::Ack);
        assert_eq!(t.take_checkpoint(), None);
        assert_eq!(t.checkpoint(), None);
        t.settle(a, Outcome::Ack);
        assert_eq!(t.take_checkpoint(), at(2));
    }

    #[test]
    fn retry_holds_the_checkpoint_in_front_of_the_record_while_later_records_are_handled() {
        let mut t = Tracker::new(at(0));
        let tickets: Vec<_> = (1..=5).map(|n| t.deliver(pos(n))).collect();
        t.settle(tickets[0], Outcome::Ack);
        assert!(!t.settle(tickets[1], Outcome::Retry));
        for &k in &tickets[2..] {
            assert!(
                t.settle(k, Outcome::Ack),
                "records behind a held one are handled"
            );
        }
        assert_eq!(t.checkpoint(), at(1).as_ref());
        assert_eq!(t.blocked_at(), Some(&pos(2)));
        assert_eq!(
            t.counts(),
            Counts {
                delivered: 5,
                settled: 4,
                held: 1
            }
        );
        // Still blocked, and the tracker no longer remembers what is behind the held record.
        for n in 6..1000 {
            let k = t.deliver(pos(n));
            t.settle(k, Outcome::Ack);
        }
        assert_eq!(t.checkpoint(), at(1).as_ref());
        assert!(t.slots.is_empty());
    }

    #[test]
    fn the_held_record_that_stops_the_checkpoint_is_named_by_its_key_until_a_seek_reads_it_again() {
        let mut t = Tracker::new(None);
        let tickets: Vec<_> = (1..=4).map(|n| t.deliver(pos(n))).collect();
        assert!(!t.hold(tickets[2], Outcome::RetryAfter(0), "order-3"));
        assert!(!t.hold(tickets[1], Outcome::Retry, "order-2"));
        assert_eq!(t.blocked_key(), None, "record 1 is still in flight");
        assert!(t.hold(tickets[0], Outcome::Ack, "order-1"));
        assert_eq!(t.blocked_at(), Some(&pos(2)));
        assert_eq!(t.blocked_key(), Some("order-2"), "the first held one");
        t.seek(&pos(2));
        assert_eq!((t.blocked_at(), t.blocked_key()), (None, None));
    }

    #[test]
    fn a_record_that_waits_keeps_every_record_after_it_until_it_settles_a_held_one_none() {
        let mut t = Tracker::new(None);
        let first = t.deliver(pos(1));
        for n in 2..=100 {
            let k = t.deliver(pos(n));
            t.settle(k, Outcome::Ack);
        }
        assert_eq!(t.span(), 100, "the first waits: all are kept");
        assert_eq!(t.first_unsettled(), Some(&pos(1)));
        t.settle(first, Outcome::Ack);
        assert_eq!((t.span(), t.span_bytes()), (0, 0));
        assert_eq!(t.take_checkpoint(), at(100));
        // Held at the front: nothing is kept behind it.
        let held = t.deliver(pos(101));
        t.settle(held, Outcome::Retry);
        for n in 102..=200 {
            let k = t.deliver(pos(n));
            t.settle(k, Outcome::Ack);
        }
        assert_eq!(t.span(), 0);
    }

    #[test]
    fn shard_end_is_reached_only_after_every_delivery_is_settled() {
        let mut t = Tracker::new(None);
        let a = t.deliver(pos(1));
        t.mark_read_to_end();
        assert!(!t.is_complete());
        t.settle(a, Outcome::Ack);
        assert!(t.is_complete());
        assert_eq!(t.take_checkpoint(), Some(Checkpoint::ShardEnd));
    }

    #[test]
    fn a_held_record_in_a_closed_shard_keeps_it_from_ending() {
        let mut t = Tracker::new(None);
        let a = t.deliver(pos(1));
        let b = t.deliver(pos(2));
        t.settle(a, Outcome::Retry);
        t.settle(b, Outcome::Ack);
        t.mark_read_to_end();
        assert!(!t.is_complete());
        assert_eq!(t.checkpoint(), None);
    }

    #[test]
    fn an_empty_closed_shard_ends_at_once() {
        let mut t = Tracker::new(at(9));
        t.mark_read_to_end();
        assert!(t.is_complete());
    }
}
