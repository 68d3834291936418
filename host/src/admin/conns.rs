//! The admin API's open connections, and which one to close when there are too many.
//!
//! A connection is *waiting* (still reading its first request head, or idle between requests)
//! or has a request *in flight* (its head was read and the router has not answered yet). Only
//! a waiting one may be closed to make room, the one waiting longest first: an honest client
//! sends its head at once, so it is the newest waiting connection for the moment it takes its
//! head to arrive, and then in flight.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use tokio_util::sync::CancellationToken;

/// The state of a connection with a request in flight.
const IN_FLIGHT: u64 = u64::MAX;
/// The state of a connection chosen to be closed.
const CLOSING: u64 = u64::MAX - 1;

/// Orders the moments connections began to wait: each takes the next number.
type Clock = Arc<AtomicU64>;

fn tick(clock: &Clock) -> u64 {
    clock.fetch_add(1, Ordering::Relaxed)
}

/// One open connection, shared by its task and by [`Conns`].
pub(super) struct Conn {
    /// [`IN_FLIGHT`], [`CLOSING`], or since when it waits (a tick of `clock`).
    state: AtomicU64,
    clock: Clock,
    /// Fires when the connection is to be closed to make room.
    close: CancellationToken,
}

impl Conn {
    fn new(clock: Clock) -> Conn {
        Conn {
            state: AtomicU64::new(tick(&clock)),
            clock,
            close: CancellationToken::new(),
        }
    }

    /// Marks a request in flight until the answer is dropped; `None` when the connection is
    /// already being closed (then it must not answer).
    pub(super) fn begin(self: &Arc<Conn>) -> Option<InFlight> {
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s != CLOSING).then_some(IN_FLIGHT)
            })
            .ok()
            .map(|_| InFlight(self.clone()))
    }

    /// Fires when the connection was chosen to be closed to make room.
    pub(super) fn closing(&self) -> &CancellationToken {
        &self.close
    }

    /// Since when it waits, unless a request is in flight or it is being closed.
    fn waiting_since(&self) -> Option<u64> {
        Some(self.state.load(Ordering::Acquire)).filter(|s| *s < CLOSING)
    }

    /// Closes it if it still waits since `since`.
    fn close_if_waiting_since(&self, since: u64) -> bool {
        let closed = self
            .state
            .compare_exchange(since, CLOSING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if closed {
            self.close.cancel();
        }
        closed
    }
}

/// A request in flight on a connection; when dropped, the connection waits again.
pub(super) struct InFlight(Arc<Conn>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = tick(&self.0.clock);
        self.0.state.store(now, Ordering::Release);
    }
}

/// Whether a new connection may stay open.
pub(super) enum Admitted {
    /// It may; `made_room` says whether a waiting connection was closed for it.
    Yes { conn: Arc<Conn>, made_room: bool },
    /// Every open connection has a request in flight: the new one is to be closed.
    Full,
}

/// The open connections (each task holds its [`Conn`]; a dropped one is gone).
pub(super) struct Conns {
    clock: Clock,
    cap: usize,
    open: Vec<Weak<Conn>>,
}

impl Conns {
    pub(super) fn new(cap: usize) -> Conns {
        Conns {
            clock: Clock::default(),
            cap,
            open: Vec::with_capacity(cap),
        }
    }

    /// Admits a new connection. When `cap` are open (not counting those being closed), first
    /// closes the one that has waited longest; when none waits, refuses the new one.
    pub(super) fn admit(&mut self) -> Admitted {
        self.open.retain(|c| {
            c.upgrade()
                .is_some_and(|c| c.state.load(Ordering::Acquire) != CLOSING)
        });
        let made_room = self.open.len() >= self.cap;
        if made_room && !self.close_longest_waiting() {
            return Admitted::Full;
        }
        let conn = Arc::new(Conn::new(self.clock.clone()));
        self.open.push(Arc::downgrade(&conn));
        Admitted::Yes { conn, made_room }
    }

    /// Closes the connection waiting longest; false when none waits.
    fn close_longest_waiting(&mut self) -> bool {
        loop {
            let longest = self
                .open
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some((c.upgrade()?.waiting_since()?, i)))
                .min();
            let Some((since, i)) = longest else {
                return false;
            };
            // It may have begun a request meanwhile: then look again.
            if let Some(conn) = self.open[i].upgrade()
                && conn.close_if_waiting_since(since)
            {
                self.open.remove(i);
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(conns: &mut Conns) -> (Arc<Conn>, bool) {
        match conns.admit() {
            Admitted::Yes { conn, made_room } => (conn, made_room),
            Admitted::Full => panic!("refused"),
        }
    }

    #[test]
    fn past_the_cap_the_longest_waiting_connection_is_closed() {
        let mut conns = Conns::new(3);
        let (a, _) = admit(&mut conns);
        let (b, _) = admit(&mut conns);
        let (c, made_room) = admit(&mut conns);
        assert!(!made_room);
        let busy = a.begin().expect("a request on the oldest");
        let (_d, made_room) = admit(&mut conns);
        assert!(made_room);
        assert!(!a.closing().is_cancelled(), "a request in flight is kept");
        assert!(b.closing().is_cancelled(), "the longest waiting goes first");
        assert!(b.begin().is_none(), "a closing connection takes no request");
        assert!(!c.closing().is_cancelled());
        drop(busy);
        let (_e, _) = admit(&mut conns);
        assert!(
            c.closing().is_cancelled(),
            "c waits since before a's request ended"
        );
        assert!(!a.closing().is_cancelled());
    }

    #[test]
    fn when_every_connection_has_a_request_in_flight_a_new_one_is_refused() {
        let mut conns = Conns::new(2);
        let (a, _) = admit(&mut conns);
        let (b, _) = admit(&mut conns);
        let _busy = (a.begin().unwrap(), b.begin().unwrap());
        assert!(matches!(conns.admit(), Admitted::Full));
    }

    #[test]
    fn a_closed_connection_frees_its_place() {
        let mut conns = Conns::new(1);
        let (a, _) = admit(&mut conns);
        let _busy = a.begin().unwrap();
        drop((a, _busy));
        let (_b, made_room) = admit(&mut conns);
        assert!(!made_room);
    }
}
