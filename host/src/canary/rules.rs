//! When a canary is rolled back: `--abort-on "traps>0.1%,retry>5%,p99>2x"`. Each rule compares
//! the canary's shards with the others over the same minutes:
//!
//! - `traps>X%`: the share of records the canary failed on (traps, timeouts, bad answers) is
//!   more than X percentage points above the base's;
//! - `retry>X%`: likewise for records answered retry or retry-after;
//! - `p99>Nx`: the canary's 99th percentile call time is more than N times the base's.
//!
//! A rule is judged only once both arms handled [`MIN_RECORDS`] records (the p99 rule: both made
//! [`MIN_RECORDS`] calls), so a handful of records never decides a rollout.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Records (or calls) each arm needs before a rule is judged.
pub const MIN_RECORDS: u64 = 20;

/// The rules a canary is held to; the default when `--abort-on` is not given.
pub const DEFAULT: &str = "traps>0.1%,retry>5%,p99>2x";

/// One rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// Failed-record rate, in percentage points above the base's.
    Traps(f64),
    /// Retry rate, in percentage points above the base's.
    Retry(f64),
    /// The call time's 99th percentile, as a multiple of the base's.
    P99(f64),
}

/// What one arm did since the rollout began (summed over instances).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arm {
    pub records: u64,
    /// Records its calls failed on.
    pub failed: u64,
    /// Records answered retry or retry-after.
    pub retried: u64,
    /// Calls, by time: `calls[i]` took less than `2^(i/4)` ms (the last: longer).
    pub calls: Vec<u64>,
}

/// How many call-time buckets an arm keeps: up to 2^(63/4) ms, about 15 min.
pub const BUCKETS: usize = 64;

/// The bucket of a call that took `ms`.
pub fn bucket(ms: f64) -> usize {
    if ms < 1.0 {
        return 0;
    }
    ((ms.log2() * 4.0).floor() as usize + 1).min(BUCKETS - 1)
}

impl Arm {
    /// Adds another instance's counts (saturating; at most [`BUCKETS`] buckets: counts come
    /// from heartbeats in the table).
    pub fn add(&mut self, other: &Arm) {
        self.records = self.records.saturating_add(other.records);
        self.failed = self.failed.saturating_add(other.failed);
        self.retried = self.retried.saturating_add(other.retried);
        let buckets = other.calls.len().min(BUCKETS);
        if self.calls.len() < buckets {
            self.calls.resize(buckets, 0);
        }
        for (mine, theirs) in self.calls.iter_mut().zip(&other.calls) {
            *mine = mine.saturating_add(*theirs);
        }
    }

    fn rate(part: u64, all: u64) -> f64 {
        if all == 0 {
            0.0
        } else {
            part as f64 * 100.0 / all as f64
        }
    }

    /// How many calls it made (saturating).
    fn call_count(&self) -> u64 {
        self.calls.iter().fold(0, |all, n| all.saturating_add(*n))
    }

    /// The upper bound (ms) of the bucket holding the 99th percentile call; `None` without calls.
    pub fn p99_ms(&self) -> Option<f64> {
        let total = self.call_count();
        if total == 0 {
            return None;
        }
        let want = (total as f64 * 0.99).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.calls.iter().enumerate() {
            seen = n.saturating_add(seen);
            if seen >= want {
                return Some(2f64.powf(i as f64 / 4.0));
            }
        }
        None
    }
}

/// The rules of one canary.
#[derive(Clone, Debug, PartialEq)]
pub struct AbortOn(pub Vec<Rule>);

/// A rule the canary broke: which, and both figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Breach {
    pub rule: String,
    pub canary: f64,
    pub base: f64,
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} broken: canary {:.2}, base {:.2}",
            self.rule, self.canary, self.base
        )
    }
}

impl AbortOn {
    /// `traps>0.1%,retry>5%,p99>2x` (any of them, in any order, each at most once).
    pub fn parse(text: &str) -> Result<AbortOn, String> {
        let mut rules = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, limit) = part.split_once('>').ok_or_else(|| {
                format!("`{part}`: write NAME>LIMIT, e.g. traps>0.1%, retry>5%, p99>2x")
            })?;
            let number = |suffix: &str| {
                limit
                    .trim()
                    .strip_suffix(suffix)
                    .and_then(|n| n.trim().parse::<f64>().ok())
                    .filter(|n| n.is_finite() && *n >= 0.0)
                    .ok_or_else(|| {
                        format!("`{part}`: the limit must be a number followed by `{suffix}`")
                    })
            };
            let rule = match name.trim() {
                "traps" => Rule::Traps(number("%")?),
                "retry" => Rule::Retry(number("%")?),
                "p99" => Rule::P99(number("x")?),
                other => {
                    return Err(format!(
                        "`{other}` is not a rule: use traps>X%, retry>X% or p99>Nx"
                    ));
                }
            };
            if rules
                .iter()
                .any(|r| std::mem::discriminant(r) == std::mem::discriminant(&rule))
            {
                return Err(format!("`{}` is given twice", name.trim()));
            }
            rules.push(rule);
        }
        if rules.is_empty() {
            return Err("no rule: use traps>X%, retry>X% or p99>Nx".into());
        }
        Ok(AbortOn(rules))
    }

    /// The first rule `canary` breaks against `base`, if both arms have enough to judge.
    pub fn breach(&self, canary: &Arm, base: &Arm) -> Option<Breach> {
        if canary.records < MIN_RECORDS || base.records < MIN_RECORDS {
            return None;
        }
        for rule in &self.0 {
            let (name, c, b, broken) = match *rule {
                Rule::Traps(x) => {
                    let (c, b) = (
                        Arm::rate(canary.failed, canary.records),
                        Arm::rate(base.failed, base.records),
                    );
                    (format!("traps>{x}%"), c, b, c - b > x)
                }
                Rule::Retry(x) => {
                    let (c, b) = (
                        Arm::rate(canary.retried, canary.records),
                        Arm::rate(base.retried, base.records),
                    );
                    (format!("retry>{x}%"), c, b, c - b > x)
                }
                Rule::P99(n) => {
                    if canary.call_count() < MIN_RECORDS || base.call_count() < MIN_RECORDS {
                        continue;
                    }
                    let (Some(c), Some(b)) = (canary.p99_ms(), base.p99_ms()) else {
                        continue;
                    };
                    (format!("p99>{n}x"), c, b, c > b * n)
                }
            };
            if broken {
                return Some(Breach {
                    rule: name,
                    canary: c,
                    base: b,
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(records: u64, failed: u64, retried: u64, call_ms: f64) -> Arm {
        let mut calls = vec![0; BUCKETS];
        calls[bucket(call_ms)] = records;
        Arm {
            records,
            failed,
            retried,
            calls,
        }
    }

    #[test]
    fn rules_parse_and_refuse_what_they_cannot_judge() {
        let rules = AbortOn::parse(DEFAULT).unwrap();
        assert_eq!(
            rules.0,
            [Rule::Traps(0.1), Rule::Retry(5.0), Rule::P99(2.0)]
        );
        for bad in [
            "",
            "traps",
            "traps>x%",
            "traps>1",
            "p99>2%",
            "lag>1%",
            "traps>1%,traps>2%",
            "retry>-1%",
        ] {
            assert!(AbortOn::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_canary_breaks_a_rule_only_past_the_base_by_the_limit() {
        let rules = AbortOn::parse("traps>1%,retry>5%,p99>2x").unwrap();
        let base = arm(1000, 5, 20, 4.0);
        assert_eq!(
            rules.breach(&arm(100, 1, 6, 4.0), &base),
            None,
            "1% vs 0.5% traps"
        );
        let traps = rules.breach(&arm(100, 3, 0, 4.0), &base).unwrap();
        assert_eq!(traps.rule, "traps>1%");
        assert!((traps.canary - 3.0).abs() < 1e-9 && (traps.base - 0.5).abs() < 1e-9);
        assert_eq!(
            rules.breach(&arm(100, 0, 8, 4.0), &base).unwrap().rule,
            "retry>5%"
        );
        assert_eq!(
            rules.breach(&arm(100, 0, 0, 20.0), &base).unwrap().rule,
            "p99>2x"
        );
        assert_eq!(rules.breach(&arm(100, 0, 0, 7.0), &base), None, "under 2x");
    }

    #[test]
    fn too_few_records_decide_nothing() {
        let rules = AbortOn::parse("traps>1%").unwrap();
        let base = arm(1000, 0, 0, 1.0);
        assert_eq!(rules.breach(&arm(MIN_RECORDS - 1, 10, 0, 1.0), &base), None);
        assert!(rules.breach(&arm(MIN_RECORDS, 10, 0, 1.0), &base).is_some());
    }

    #[test]
    fn arms_summed_from_absurd_heartbeats_saturate_and_keep_at_most_the_buckets() {
        let absurd = Arm {
            records: u64::MAX,
            failed: u64::MAX,
            retried: u64::MAX,
            calls: vec![u64::MAX; BUCKETS * 100],
        };
        let mut sum = Arm::default();
        sum.add(&absurd);
        sum.add(&absurd);
        assert_eq!((sum.records, sum.failed), (u64::MAX, u64::MAX));
        assert_eq!(sum.calls.len(), BUCKETS);
        assert!(sum.p99_ms().is_some());
        let rules = AbortOn::parse("p99>2x,traps>1%").unwrap();
        assert!(rules.breach(&sum, &arm(1000, 0, 0, 1.0)).is_some());
    }

    #[test]
    fn call_times_fall_in_quarter_powers_of_two() {
        assert_eq!(bucket(0.5), 0);
        assert_eq!(bucket(1.0), 1);
        assert_eq!(bucket(2.0), 5);
        assert_eq!(bucket(1e12), BUCKETS - 1);
        let mut a = Arm::default();
        a.add(&arm(99, 0, 0, 1.0));
        a.add(&arm(1, 0, 0, 100.0));
        assert_eq!(
            a.p99_ms(),
            Some(2f64.powf(0.25)),
            "99 of 100 calls took 1 ms"
        );
    }
}
