//! Where a host is, in words: per subscription how its records were answered since the host
//! started ([`Totals`], read back from the metrics and the status board), and per shard where
//! its checkpoint stands and which record holds it. A stopped `run` logs these lines
//! ([`stop_summary`]); `shardhost status` shows the same while the host runs.

use std::fmt;
use std::time::Duration;

use super::{ShardState, ShardStatus, StatusBoard};
use crate::lease::SHARD_END;
use crate::metrics::Metrics;

/// How a subscription's records were answered since this instance started, over every shard it
/// read. A record answered more than once (read again after a seek, a retry copy read back)
/// counts each time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Totals {
    /// Every answer: `ack + drop + retry + retry_after + failed`.
    pub records: u64,
    pub ack: u64,
    pub drop: u64,
    /// Answered `retry` by the handler.
    pub retry: u64,
    pub retry_after: u64,
    /// Records whose handler call failed (a trap, a timeout, a limit, a wrong answer): not
    /// settled, like a retry.
    pub failed: u64,
    /// What became of the records not settled: held by this instance (no retry cap, or a
    /// failure of the handler rather than the record) ...
    pub held: u64,
    /// ... a retry copy published for the next attempt (under a cap) ...
    pub copied: u64,
    /// ... or sent to the dead-letter stream after the last attempt.
    pub dead_lettered: u64,
}

impl Totals {
    /// `subscription`'s totals: the outcomes counted in `metrics` over the shards `board`
    /// knows, and the records its shards' trackers held.
    pub fn of(subscription: &str, board: &StatusBoard, metrics: &Metrics) -> Totals {
        let shards: Vec<String> = board
            .shards_of(subscription)
            .into_iter()
            .map(|s| s.shard_id)
            .collect();
        let ids = || shards.iter().map(String::as_str);
        let answered = metrics.outcome_totals(subscription, ids());
        // `records_total` counts a failed record as retry.
        let failed = metrics.failed_records(subscription, ids());
        let (copied, dead_lettered) = metrics.copies_and_dead_letters(subscription);
        let retry = answered.retry.saturating_sub(failed);
        Totals {
            records: answered.ack + answered.drop + retry + answered.retry_after + failed,
            ack: answered.ack,
            drop: answered.drop,
            retry,
            retry_after: answered.retry_after,
            failed,
            held: board.totals(subscription).held,
            copied,
            dead_lettered,
        }
    }
}

/// `10 records: 8 ack, 1 drop, 1 retry (1 held)`: retry-after and failed only when there are
/// some, and what became of the unsettled ones in brackets.
impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.records == 1 { "" } else { "s" };
        write!(
            f,
            "{} record{plural}: {} ack, {} drop, {} retry",
            self.records, self.ack, self.drop, self.retry
        )?;
        if self.retry_after > 0 {
            write!(f, ", {} retry-after", self.retry_after)?;
        }
        if self.failed > 0 {
            write!(f, ", {} failed", self.failed)?;
        }
        let fates: Vec<String> = [
            (self.held, "held"),
            (self.copied, "copied"),
            (self.dead_lettered, "dead-lettered"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if !fates.is_empty() {
            write!(f, " ({})", fates.join(", "))?;
        }
        Ok(())
    }
}

/// Where a shard's checkpoint stands: `checkpoint at 4960…05`, `checkpoint at SHARD_END (read
/// to its end)` or `nothing checkpointed`.
pub fn checkpoint(status: &ShardStatus) -> String {
    match status.checkpoint.as_deref() {
        None => "nothing checkpointed".to_owned(),
        Some(SHARD_END) => format!("checkpoint at {SHARD_END} (read to its end)"),
        Some(at) => format!("checkpoint at {at}"),
    }
}

/// The held record that stops a shard's checkpoint, if one does: `4960…06 (order-1006) for
/// 12s` (its position, its partition key, how long it has been held at `now_ms`).
pub fn held(status: &ShardStatus, now_ms: u64) -> Option<String> {
    let at = status.held_at.as_deref()?;
    let mut out = at.to_owned();
    if let Some(key) = &status.held_key {
        out += &format!(" ({key})");
    }
    if let Some(since) = status.held_since_ms {
        let secs = now_ms.saturating_sub(since) / 1000;
        out += &format!(
            " for {}",
            humantime::format_duration(Duration::from_secs(secs))
        );
    }
    Some(out)
}

/// The first record a shard calls again after `retry-after` (no retry cap), if one waits:
/// `4960…06 (order-1006) after 3 calls, next in 2s` (and how many wait, when more than one).
pub fn retrying(status: &ShardStatus, now_ms: u64) -> Option<String> {
    let r = status.retrying.as_ref()?;
    let next = Duration::from_secs(r.next_try_ms.saturating_sub(now_ms).div_ceil(1000));
    let calls = if r.attempts == 1 { "call" } else { "calls" };
    let mut out = format!(
        "{} ({}) after {} {calls}, next in {}",
        r.at,
        r.key,
        r.attempts,
        humantime::format_duration(next)
    );
    if r.records > 1 {
        out += &format!(" ({} records wait)", r.records);
    }
    Some(out)
}

/// `shard shardId-0 of ship: checkpoint at 4960…05; held: 4960…06 (order-1006) for 12s`; a
/// shard that ended otherwise than by the stop or its end says how.
pub fn shard_line(subscription: &str, shard_id: &str, status: &ShardStatus, now_ms: u64) -> String {
    let how = match status.state {
        ShardState::Stopped | ShardState::Ended | ShardState::Reading => String::new(),
        ShardState::Starting => " (never read)".to_owned(),
        other => format!(" ({other})"),
    };
    let held =
        held(status, now_ms).map_or_else(|| "nothing held".to_owned(), |h| format!("held: {h}"));
    format!(
        "shard {shard_id} of {subscription}{how}: {}; {held}",
        checkpoint(status)
    )
}

/// What a stopped `run` says, per subscription: a line per shard this instance read, then the
/// subscription's totals.
pub fn stop_summary(
    board: &StatusBoard,
    metrics: &Metrics,
    subscriptions: &[String],
    now_ms: u64,
) -> Vec<String> {
    let mut lines = Vec::new();
    for name in subscriptions {
        for shard in board.shards_of(name) {
            lines.push(shard_line(name, &shard.shard_id, &shard.status, now_ms));
        }
        lines.push(format!(
            "subscription {name}: {}",
            Totals::of(name, board, metrics)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;

    const NOW: u64 = 1_700_000_012_000;

    fn stopped(checkpoint: Option<&str>) -> ShardStatus {
        ShardStatus {
            checkpoint: checkpoint.map(str::to_owned),
            state: ShardState::Stopped,
            ..ShardStatus::default()
        }
    }

    #[test]
    fn a_record_called_again_is_shown_with_its_calls_and_next_try() {
        let mut s = ShardStatus::default();
        assert_eq!(retrying(&s, NOW), None);
        s.retrying = Some(crate::status::Retrying {
            at: "496".into(),
            key: "order-1006".into(),
            attempts: 3,
            next_try_ms: NOW + 1_500,
            records: 2,
        });
        assert_eq!(
            retrying(&s, NOW).as_deref(),
            Some("496 (order-1006) after 3 calls, next in 2s (2 records wait)")
        );
    }

    #[test]
    fn a_shard_line_says_where_the_checkpoint_stands_and_what_holds_it() {
        let mut s = stopped(Some("495"));
        assert_eq!(
            shard_line("ship", "shardId-0", &s, NOW),
            "shard shardId-0 of ship: checkpoint at 495; nothing held"
        );
        s.held_at = Some("496".into());
        s.held_key = Some("order-1006".into());
        s.held_since_ms = Some(NOW - 125_400);
        assert_eq!(
            shard_line("ship", "shardId-0", &s, NOW),
            "shard shardId-0 of ship: checkpoint at 495; held: 496 (order-1006) for 2m 5s"
        );
        s.held_key = None;
        s.held_since_ms = None;
        assert_eq!(held(&s, NOW).as_deref(), Some("496"), "only what is known");
        assert_eq!(
            shard_line("ship", "shardId-1", &stopped(None), NOW),
            "shard shardId-1 of ship: nothing checkpointed; nothing held"
        );
        let ended = ShardStatus {
            state: ShardState::Ended,
            ..stopped(Some(SHARD_END))
        };
        assert_eq!(
            shard_line("ship", "shardId-2", &ended, NOW),
            "shard shardId-2 of ship: checkpoint at SHARD_END (read to its end); nothing held"
        );
        let lost = ShardStatus {
            state: ShardState::LeaseLost,
            ..stopped(Some("7"))
        };
        assert_eq!(
            shard_line("ship", "shardId-3", &lost, NOW),
            "shard shardId-3 of ship (lease lost): checkpoint at 7; nothing held"
        );
    }

    #[test]
    fn totals_name_every_outcome_and_what_became_of_the_unsettled_records() {
        let t = Totals {
            records: 10,
            ack: 8,
            drop: 1,
            retry: 1,
            held: 1,
            ..Totals::default()
        };
        assert_eq!(t.to_string(), "10 records: 8 ack, 1 drop, 1 retry (1 held)");
        let t = Totals {
            records: 7,
            ack: 2,
            drop: 0,
            retry: 2,
            retry_after: 1,
            failed: 2,
            held: 1,
            copied: 3,
            dead_lettered: 1,
        };
        assert_eq!(
            t.to_string(),
            "7 records: 2 ack, 0 drop, 2 retry, 1 retry-after, 2 failed \
             (1 held, 3 copied, 1 dead-lettered)"
        );
        let one = Totals {
            records: 1,
            ack: 1,
            ..Totals::default()
        };
        assert_eq!(one.to_string(), "1 record: 1 ack, 0 drop, 0 retry");
    }

    #[test]
    fn totals_read_the_metrics_of_the_shards_on_the_board_and_what_their_trackers_held() {
        let (board, metrics) = (StatusBoard::new(), Metrics::new());
        for shard in ["a", "b"] {
            board.shard("ship", shard).update(|s| s.counts.held = 1);
        }
        metrics
            .shard("ship", "a")
            .outcomes(&[Outcome::Ack, Outcome::Drop, Outcome::Retry]);
        metrics.shard("ship", "b").failed(1);
        metrics.shard("other", "a").outcomes(&[Outcome::Ack]);
        metrics.retry_copy("ship");
        let t = Totals::of("ship", &board, &metrics);
        assert_eq!(
            t,
            Totals {
                records: 4,
                ack: 1,
                drop: 1,
                retry: 1,
                retry_after: 0,
                failed: 1,
                held: 2,
                copied: 1,
                dead_lettered: 0,
            }
        );
        let lines = stop_summary(&board, &metrics, &["ship".into(), "idle".into()], NOW);
        assert_eq!(
            lines,
            [
                "shard a of ship (never read): nothing checkpointed; nothing held",
                "shard b of ship (never read): nothing checkpointed; nothing held",
                "subscription ship: 4 records: 1 ack, 1 drop, 1 retry, 1 failed (2 held, 1 copied)",
                "subscription idle: 0 records: 0 ack, 0 drop, 0 retry",
            ]
        );
    }
}
