//! A seeded fault simulation of shardhost's coordinator, leases and checkpoints (issue 28).
//!
//! One *schedule* is one seed: a stream of 1–4 shards (resharded while read, in some), 1–4
//! instances (each a real [`shardhost::testing::Coordinator`] over its own view of one shared
//! simulated lease table and stream), a handler plugged in through the native handler seam,
//! and faults drawn from the seed — lease-store delays, errors, answers lost after the write was
//! applied, stalls past the ttl, clock skew within the documented bound; stream throttles,
//! expired iterators, errors and outages; instances killed, stopped and restarted — all in
//! tokio's paused clock, so minutes of lease time pass in milliseconds. The seed also draws the
//! subscription's paths (issue 49): `start_at`, a retry cap with copies on the read stream or a
//! retry stream of its own, the in-flight bound, KPL aggregates, a handler that retries, answers
//! retry-after and traps, puts that fail, and the reader (its own, or the host's real polling or
//! fan-out reader over simulated Kinesis calls). A healing phase without
//! faults follows, until every shard's checkpoint reaches its end. Then the invariants are
//! checked ([`check`]); each broken one is a [`Violation`] naming the seed, the shard, the
//! record and the instance.
//!
//! `scripts/simulate N [--seed S]` runs N schedules on every core; `--seed S -v` replays one
//! with a trace of its events.

pub mod check;
pub mod faults;
pub mod handler;
mod heal;
pub mod instance;
pub mod kinesis;
pub mod live;
pub mod log;
pub mod logged;
pub mod params;
pub mod position;
mod promise;
pub mod rng;
pub mod schedule;
pub mod stream;
pub mod table;
pub mod view;

pub use log::Violation;
pub use params::Params;
pub use schedule::{Report, run};

/// Seeds that once failed on a host defect since fixed: the CI test runs every one.
///
/// Two holders after a stalled acquire: the coordinator acted on a take whose answer came after
/// the lease's fence (four fifths of the ttl after it was sent), while another instance took
/// the row by its own clock (fixed in `coordinator/take.rs`). A holder acting past its fence:
/// the keep-alive looked at the fence only `renew_every` after the last answer, and a lane
/// called the handler after a stalled checkpoint answered past the fence (fixed in
/// `lease/handle.rs` and `dispatch/lane.rs`; seeds below 3 000 are among the fixed seeds the
/// CI test runs anyway: 42, 262, 1085, 2011, 2032, 2456 showed them).
///
/// Issue 49 (each failed on the host before its fix, with the simulation's own reader): a
/// retry stream of its own that nothing read, its copies lost (`record-lost`: 4, 25, 35); the
/// in-flight bound not counting the records held behind a waiting one (`in-flight-bound`: 26,
/// 50, 57); a batch's copies published one at a time, each the moment the last failed
/// (`put-after-failure`: 37, 48, 87); a checkpoint store error ending the worker, which
/// released its lease (`released-after-store-error`: 1, 11, 31); then copies whose back-offs
/// end at different times each put the moment another put to their stream failed
/// (`put-after-failure`: 36, 138; fixed in `dispatch/outbox.rs`, a back-off holds what falls due
/// for its stream meanwhile).
///
/// Issue 49 through the host's real readers (each failed with the fix taken back): at
/// `latest`, a fan-out reader subscribing at the tip again after its first subscription was
/// cut before an event (8) or its first subscribes were refused (220, 288), and a polling
/// reader reopening at the tip when its iterators expired before the first record (24, 214):
/// what arrived meanwhile lost (`record-lost`; fixed in `source/kinesis/reader.rs` and
/// `subscription.rs`); a fan-out subscription task that panicked, its reader then failing
/// every read at once, for ever (`busy-reads`: 71, 126, 319), and an end-of-shard question
/// that hung inline, the events unread meanwhile (`events-unread`: 224, 6931, 7277, 7927, the
/// only ones in seeds 0..9 000; fixed in `source/kinesis/fanout.rs`, `dispatch/run.rs` and
/// `end_probe.rs`).
pub const REGRESSIONS: &[u64] = &[
    1, 4, 8, 11, 16, 24, 25, 26, 31, 35, 36, 37, 48, 50, 57, 71, 82, 87, 126, 138, 205, 214, 220,
    224, 225, 274, 288, 319, 346, 359, 405, 534, 535, 543, 546, 3095, 6931, 7277, 7927, 18185,
];

/// Seeds that fail on host defects in files being fixed elsewhere (issue 28), each with the
/// defects it shows (`known-failures.txt` says what they are): the CI test skips them until
/// they pass; `scripts/simulate 1 --seed S -v` replays one with its trace.
pub fn known_failures() -> Vec<(u64, &'static str)> {
    include_str!("../known-failures.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (seed, defects) = l.split_once(' ').unwrap_or((l, ""));
            Some((seed.parse().ok()?, defects))
        })
        .collect()
}

/// A host defect being fixed on another branch (issue 49): the checks it breaks, and the
/// schedules it can show in (by what a seed draws).
pub struct KnownDefect {
    pub name: &'static str,
    pub checks: &'static [&'static str],
    pub applies: fn(&Params) -> bool,
}

/// The host defects the simulation finds that are being fixed elsewhere. A seed of the CI set
/// whose every violation is one of these (in a schedule it applies to) is counted and
/// reported, not failed (a regression seed too): a defect may show in many seeds, too many to
/// list one by one. Each has named seeds in `known-failures.txt`; once its fix is merged, its
/// entry goes and those seeds move to [`REGRESSIONS`]. Every other check stays strict.
pub const KNOWN_DEFECTS: &[KnownDefect] = &[];

/// The known defect that explains a violation of a seed with parameters `params`, if one does.
pub fn known_defect(params: &Params, violation: &Violation) -> Option<&'static KnownDefect> {
    KNOWN_DEFECTS
        .iter()
        .find(|d| d.checks.contains(&violation.check) && (d.applies)(params))
}

/// The command that replays one schedule.
pub fn replay_command(seed: u64) -> String {
    format!("scripts/simulate 1 --seed {seed}")
}
