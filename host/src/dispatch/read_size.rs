//! How many records a shard's next read asks for: few while the shard keeps up, more only while
//! larger reads drain it faster.
//!
//! What a read asks for costs nothing while the shard is caught up (the service answers what
//! there is), but while it is behind, the service builds a response of that size. Kinesis allows
//! 5 reads per second per shard, so there a backlog drains at full speed only in reads of the
//! service maximum (10 000); a slow link drains faster in large reads too, since each read pays
//! the round trip once. A server that answers large reads more slowly than in proportion
//! (kinesis-mock past about 1 000 records) drains faster in smaller ones. So a shard's read
//! size, after a full read (it answered all it asked for: the shard is behind):
//!
//! - starts at [`START`];
//! - doubles, up to the subscription's `read_limit`, when the stream's read limits set the pace
//!   ([`Pace::Limits`]): the read answered within half the spacing the limits put between
//!   reads, so a read twice the size would still answer before the next may start. Likewise
//!   after a throttled read that followed a full one;
//! - when the server set the pace ([`Pace::Server`]: it took longer than that), doubles if the
//!   read paid: it answered at least [`PAYS`] times the rate (records a second) of the last full
//!   read of the size before, as behind a long round trip that each read pays once, or there is
//!   no size before to weigh against. Otherwise it stays: a larger read would answer no faster
//!   per record. (It does not shrink: on kinesis-mock, whose larger responses cost more per
//!   record, going back to smaller reads measured under a lighter load drained at half the
//!   rate; BENCHMARKS.md.)
//! - stays as it is when the handler set the pace ([`Pace::Handler`]), or what did is not known
//!   (a source without read limits, such as the embedded stream, keeps its reads at [`START`]).
//!
//! After a read that found the shard caught up (not full, and not more than a poll interval
//! behind its tip) the size halves, down to [`FLOOR`]. The in-flight
//! bound ([`in_flight`](super::in_flight)) may ask for fewer still.

use std::time::Duration;

use super::read::Pace;

/// Records the first read of a shard asks for.
pub const START: usize = 500;

/// The fewest records a read asks for (or `read_limit`, when that is less).
pub const FLOOR: usize = 100;

/// How many times the rate of the next smaller size a larger read must answer at to grow again
/// while the server sets the pace.
pub const PAYS: f64 = 1.25;

/// One shard's read size.
#[derive(Debug)]
pub(super) struct ReadSize {
    size: usize,
    /// The subscription's `read_limit`.
    cap: usize,
    /// The last answered read was full.
    backlog: bool,
    /// The rate (records a second) the last full read of this size answered at, if it was
    /// measured (the stream's limits or the server set its pace).
    rate: Option<f64>,
    /// The size before this one, and the rate its last full read answered at.
    before: Option<(usize, f64)>,
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
    /// What set its pace.
    pub pace: Pace,
    /// How long it took to answer.
    pub took: Duration,
}

impl ReadSize {
    /// A shard's read size under `read_limit` (`cap`).
    pub fn new(cap: usize) -> ReadSize {
        ReadSize {
            size: START.min(cap),
            cap,
            backlog: false,
            rate: None,
            before: None,
        }
    }

    /// Always `cap`: for a source that pushes (a read hands out what was pushed).
    pub fn fixed(cap: usize) -> ReadSize {
        ReadSize {
            size: cap,
            ..ReadSize::new(cap)
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
        if full && read.asked >= self.size {
            let rate = || self.size as f64 / read.took.as_secs_f64().max(1e-6);
            match read.pace {
                Pace::Limits => {
                    self.rate = Some(rate());
                    self.grow();
                }
                Pace::Server => {
                    let rate = rate();
                    self.rate = Some(rate);
                    self.weigh(rate);
                }
                Pace::Handler | Pace::Unknown => {}
            }
        } else if read.caught_up {
            self.resize((self.size / 2).max(FLOOR).min(self.cap));
            self.before = None;
        }
    }

    /// Adapts to a read the stream refused (throttled): with a backlog, the next read carries
    /// more, since the shard's reads are what is limited.
    pub fn throttled(&mut self) {
        if self.backlog {
            self.grow();
        }
    }

    /// A full read the server set the pace of, answered at `rate`: grows if it paid.
    fn weigh(&mut self, rate: f64) {
        match self.before {
            Some((size, before)) if size < self.size && rate < before * PAYS => {}
            _ => self.grow(),
        }
    }

    fn grow(&mut self) {
        self.resize(self.size.saturating_mul(2).min(self.cap));
    }

    fn resize(&mut self, size: usize) {
        if size != self.size {
            self.before = self.rate.map(|rate| (self.size, rate));
            self.rate = None;
            self.size = size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full read of the current size, paced by `pace`, answered in 10 ms.
    fn full(size: &ReadSize, pace: Pace) -> Answered {
        answered_in(size, pace, Duration::from_millis(10))
    }

    /// A full read of the current size, paced by `pace`, answered in `took`.
    fn answered_in(size: &ReadSize, pace: Pace, took: Duration) -> Answered {
        Answered {
            asked: size.get(),
            got: size.get(),
            caught_up: false,
            pace,
            took,
        }
    }

    fn caught_up(size: &ReadSize, got: usize) -> Answered {
        Answered {
            asked: size.get(),
            got,
            caught_up: true,
            pace: Pace::Limits,
            took: Duration::from_millis(10),
        }
    }

    /// The sizes of `reads` full reads from a server that answers `n` records in `answer(n)`,
    /// paced by the server.
    fn from_server(reads: usize, answer: impl Fn(usize) -> Duration) -> Vec<usize> {
        let mut size = ReadSize::new(10_000);
        let mut sizes = vec![size.get()];
        for _ in 0..reads {
            let took = answer(size.get());
            size.answered(answered_in(&size, Pace::Server, took));
            sizes.push(size.get());
        }
        sizes
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
            size.answered(full(&size, Pace::Limits));
            sizes.push(size.get());
        }
        assert_eq!(sizes, [500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
    }

    #[test]
    fn full_reads_the_handler_paced_keep_their_size() {
        // The handler is the slower one: a larger read would not go faster.
        let mut size = ReadSize::new(10_000);
        for _ in 0..5 {
            size.answered(full(&size, Pace::Handler));
            size.answered(full(&size, Pace::Unknown));
        }
        assert_eq!(size.get(), START);
    }

    #[test]
    fn reads_from_a_server_slow_per_call_grow_while_larger_ones_pay() {
        // A long round trip (300 ms) and little per record: each read pays the trip once.
        let sizes = from_server(7, |n| Duration::from_millis(300 + n as u64 / 1000));
        assert_eq!(sizes, [500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000]);
    }

    #[test]
    fn reads_from_a_server_slow_per_record_keep_their_size() {
        // 100 µs a record, whatever the size: a larger read pays nothing, costs nothing.
        let sizes = from_server(5, |n| Duration::from_micros(100 * n as u64));
        assert_eq!(sizes, [500, 1000, 1000, 1000, 1000, 1000]);
    }

    #[test]
    fn reads_grow_no_further_once_a_larger_one_costs_more_per_record() {
        // A server that answers large reads more slowly per record (kinesis-mock past about
        // 1 000): n² × 100 ns, so 1 000 records answer in 100 ms and 2 000 in 400 ms.
        let answer = |n: usize| Duration::from_nanos(100 * (n * n) as u64);
        let mut size = ReadSize::new(10_000);
        let mut sizes = vec![size.get()];
        for _ in 0..6 {
            let took = answer(size.get());
            let pace = if took <= Duration::from_millis(100) {
                Pace::Limits
            } else {
                Pace::Server
            };
            size.answered(answered_in(&size, pace, took));
            sizes.push(size.get());
        }
        assert_eq!(sizes, [500, 1000, 2000, 2000, 2000, 2000, 2000]);
    }

    #[test]
    fn a_caught_up_shard_halves_its_reads_down_to_the_floor() {
        let mut size = ReadSize::new(10_000);
        for _ in 0..5 {
            size.answered(full(&size, Pace::Limits));
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
        size.answered(full(&size, Pace::Limits));
        size.answered(Answered {
            asked: 1000,
            got: 10,
            caught_up: false,
            pace: Pace::Limits,
            took: Duration::from_millis(10),
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
            pace: Pace::Limits,
            took: Duration::from_millis(10),
        });
        assert_eq!(size.get(), START);
    }

    #[test]
    fn a_throttle_after_a_full_read_grows_the_size() {
        let mut size = ReadSize::new(10_000);
        size.throttled();
        assert_eq!(size.get(), START, "no backlog seen yet");
        size.answered(full(&size, Pace::Handler));
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
        size.answered(full(&size, Pace::Limits));
        assert_eq!(size.get(), 20);
    }
}
