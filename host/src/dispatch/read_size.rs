//! How many records a shard's next read asks for: few while the shard keeps up, more only while
//! the stream's read limits are what hold it back.
//!
//! What a read asks for costs nothing while the shard is caught up (the service answers what
//! there is), but while it is behind, the service builds a response of that size. Kinesis allows
//! 5 reads per second per shard, so there a backlog drains at full speed only in reads of the
//! service maximum (10 000); a server with no such limit, or a busy one (kinesis-mock on a
//! shared core), answers large reads more slowly than in proportion, and drains faster in
//! smaller ones. So a shard's read size:
//!
//! - starts at [`START`];
//! - doubles, up to the subscription's `read_limit`, after a full read that was *paced*
//!   ([`Reads::paced`](super::read::Reads::paced)): the loop waited for it, and it answered
//!   within half the spacing the stream's limits put between reads (the read interval, or its
//!   bytes at the byte rate), so a read twice the size would still answer before the next may
//!   start. The limits, not the server, the handler or the in-flight bound, set the pace: each
//!   read should carry more. Likewise after a throttled read that followed a full one;
//! - halves, down to [`FLOOR`], after a read that found the shard caught up (not full, and not
//!   more than a poll interval behind its tip);
//! - stays as it is otherwise: a full read the loop did not wait for (the handler is the slower
//!   one), or one that took more than half the spacing to answer (the server is the slower one:
//!   a larger read would only answer more slowly). A source without read limits (the embedded
//!   stream) keeps its reads at [`START`].
//!
//! The in-flight bound ([`in_flight`](super::in_flight)) may ask for fewer still.

/// Records the first read of a shard asks for.
pub const START: usize = 500;

/// The fewest records a read asks for (or `read_limit`, when that is less).
pub const FLOOR: usize = 100;

/// One shard's read size.
#[derive(Debug)]
pub(super) struct ReadSize {
    size: usize,
    /// The subscription's `read_limit`.
    cap: usize,
    /// The last answered read was full.
    backlog: bool,
}

/// What the loop saw of one answered read.
#[derive(Clone, Copy, Debug)]
pub(super) struct Answered {
    /// Records the read asked for.
    pub asked: usize,
    /// Records it answered.
    pub got: usize,
    /// It found the shard caught up: not full, and not more than a poll interval behind.
    pub caught_up: bool,
    /// The stream's read limits set its pace ([`Reads::paced`](super::read::Reads::paced)).
    pub paced: bool,
}

impl ReadSize {
    /// A shard's read size under `read_limit` (`cap`).
    pub fn new(cap: usize) -> ReadSize {
        ReadSize {
            size: START.min(cap),
            cap,
            backlog: false,
        }
    }

    /// Always `cap`: for a source that pushes (a read hands out what was pushed).
    pub fn fixed(cap: usize) -> ReadSize {
        ReadSize {
            size: cap,
            cap,
            backlog: false,
        }
    }

    /// Records the next read asks for.
    pub fn get(&self) -> usize {
        self.size
    }

    /// Adapts to an answered read.
    pub fn answered(&mut self, read: Answered) {
        let full = read.got >= read.asked;
        self.backlog = full;
        // A read that asked for less (the in-flight bound) says nothing about the size.
        if full && read.paced && read.asked >= self.size {
            self.grow();
        } else if read.caught_up {
            self.size = (self.size / 2).max(FLOOR).min(self.cap);
        }
    }

    /// Adapts to a read the stream refused (throttled): with a backlog, the next read carries
    /// more, since the shard's reads are what is limited.
    pub fn throttled(&mut self) {
        if self.backlog {
            self.grow();
        }
    }

    fn grow(&mut self) {
        self.size = self.size.saturating_mul(2).min(self.cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full read of the current size.
    fn full(size: &ReadSize, paced: bool) -> Answered {
        Answered {
            asked: size.get(),
            got: size.get(),
            caught_up: false,
            paced,
        }
    }

    fn caught_up(size: &ReadSize, got: usize) -> Answered {
        Answered {
            asked: size.get(),
            got,
            caught_up: true,
            paced: false,
        }
    }

    #[test]
    fn a_shard_starts_with_small_reads_within_its_read_limit() {
        assert_eq!(ReadSize::new(10_000).get(), START);
        assert_eq!(ReadSize::new(50).get(), 50);
    }

    #[test]
    fn full_reads_paced_by_the_stream_double_up_to_the_read_limit() {
        let mut size = ReadSize::new(10_000);
        let mut sizes = vec![size.get()];
        for _ in 0..6 {
            size.answered(full(&size, true));
            sizes.push(size.get());
        }
        assert_eq!(sizes, [500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
    }

    #[test]
    fn full_reads_the_read_limits_did_not_pace_keep_their_size() {
        // The server (or the handler) is the slower one: a larger read would not go faster.
        let mut size = ReadSize::new(10_000);
        for _ in 0..5 {
            size.answered(full(&size, false));
        }
        assert_eq!(size.get(), START);
    }

    #[test]
    fn a_caught_up_shard_halves_its_reads_down_to_the_floor() {
        let mut size = ReadSize::new(10_000);
        for _ in 0..5 {
            size.answered(full(&size, true));
        }
        assert_eq!(size.get(), 10_000);
        let mut sizes = Vec::new();
        for _ in 0..9 {
            size.answered(caught_up(&size, 3));
            sizes.push(size.get());
        }
        assert_eq!(sizes, [5000, 2500, 1250, 625, 312, 156, 100, 100, 100]);
    }

    #[test]
    fn a_short_read_far_behind_the_tip_keeps_the_size() {
        // Kinesis may answer fewer records than asked while the shard is behind.
        let mut size = ReadSize::new(10_000);
        size.answered(full(&size, true));
        size.answered(Answered {
            asked: 1000,
            got: 10,
            caught_up: false,
            paced: true,
        });
        assert_eq!(size.get(), 1000);
    }

    #[test]
    fn a_read_cut_by_the_in_flight_bound_does_not_grow_the_size() {
        let mut size = ReadSize::new(10_000);
        size.answered(Answered {
            asked: 200,
            got: 200,
            caught_up: false,
            paced: true,
        });
        assert_eq!(size.get(), START);
    }

    #[test]
    fn a_throttle_after_a_full_read_grows_the_size() {
        let mut size = ReadSize::new(10_000);
        size.throttled();
        assert_eq!(size.get(), START, "no backlog seen yet");
        size.answered(full(&size, false));
        size.throttled();
        assert_eq!(size.get(), 2 * START);
        size.throttled();
        assert_eq!(
            size.get(),
            4 * START,
            "throttled again: the backlog is still there"
        );
        size.answered(caught_up(&size, 10));
        size.throttled();
        assert_eq!(size.get(), 2 * START, "halved, then no backlog to grow for");
    }

    #[test]
    fn a_read_limit_below_the_floor_is_the_size() {
        let mut size = ReadSize::new(20);
        size.answered(caught_up(&size, 0));
        assert_eq!(size.get(), 20);
        size.answered(full(&size, true));
        assert_eq!(size.get(), 20);
    }
}
