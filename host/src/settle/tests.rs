//! The tracker's behaviour, record by record.

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
