//! The fault simulation's fixed seeds (as many as fit in about a minute of a debug build), and
//! every regression seed: no violation. Seeds of known, unfixed defects are skipped (listed in
//! `shardhost_sim::KNOWN_FAILURES`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use shardhost_sim::{KNOWN_FAILURES, REGRESSIONS, replay_command, run};

/// Seeds `0..FIXED` run in CI.
const FIXED: u64 = 4_000;

fn run_all(seeds: &[u64]) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(&seed) = seeds.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let report = run(seed, false);
                    let mut f = failures.lock().unwrap();
                    for v in report.violations {
                        f.push(format!("{v}\n  replay: {}", replay_command(seed)));
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

#[test]
fn fixed_seeds_and_regressions_break_no_invariant() {
    let known: Vec<u64> = KNOWN_FAILURES.iter().map(|(s, _)| *s).collect();
    let seeds: Vec<u64> = (0..FIXED)
        .chain(REGRESSIONS.iter().copied())
        .filter(|s| !known.contains(s))
        .collect();
    let failures = run_all(&seeds);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_seed_draws_the_same_schedule_every_time() {
    let a = shardhost_sim::params::Params::draw(42);
    let b = shardhost_sim::params::Params::draw(42);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let first = run(42, false);
    let again = run(42, false);
    assert_eq!(first.records, again.records);
    assert!(first.records > 0 && first.violations.is_empty());
}
