//! The healing phase: no faults, every slot runs, until every shard's checkpoint reaches its
//! end. A record held without a retry cap comes back only with a new reader, so when no
//! checkpoint moves for a while every instance is restarted (gracefully) — but first each
//! shard that stands still is looked at: one whose holder is alive and renewing, and whose
//! first record after the checkpoint does not wait with it (held, waiting for a retry-after, a
//! copy not out yet), is stuck, and that is a violation the restart does not heal away.

use std::collections::HashSet;
use std::time::Duration;

use shardhost::lease::now_ms;
use tokio::time::{Instant, sleep};

use crate::check;
use crate::schedule::Sim;

/// The longest the healing phase may take before the schedule counts as stuck.
const HEAL_DEADLINE: Duration = Duration::from_secs(1800);

impl Sim {
    pub(crate) async fn heal(&mut self) {
        let p = &self.shared.params;
        let stall = (p.ttl * 3).max(p.list_every * 2) + Duration::from_secs(10);
        let deadline = Instant::now() + HEAL_DEADLINE;
        self.start_idle().await;
        let mut progress = (u64::MAX, Instant::now());
        let mut reported = HashSet::new();
        loop {
            sleep(Duration::from_secs(1)).await;
            self.reap().await;
            let checkpoints = self.shared.table.checkpoints();
            let complete = check::complete(&self.shared.log.lock().unwrap(), &checkpoints);
            let Err(why) = complete else {
                return;
            };
            if Instant::now() >= deadline {
                self.shared.log.lock().unwrap().violate(
                    "stuck",
                    format!("no end after {HEAL_DEADLINE:?} of healing: {why}"),
                );
                return;
            }
            let writes = self.shared.log.lock().unwrap().checkpoint_writes;
            if writes != progress.0 {
                progress = (writes, Instant::now());
            } else if progress.1.elapsed() >= stall {
                self.stuck(stall, &mut reported);
                self.shared
                    .log
                    .lock()
                    .unwrap()
                    .note(|| "no progress: restarting every instance".into());
                self.stop_all(Duration::from_secs(60)).await;
                self.start_idle().await;
                progress = (writes, Instant::now());
            }
        }
    }

    /// Reports each shard that stands still under a live, renewing holder with nothing
    /// waiting at its front (once per shard).
    fn stuck(&self, stall: Duration, reported: &mut HashSet<String>) {
        let live: Vec<u32> = self
            .slots
            .iter()
            .filter(|s| s.live())
            .filter_map(|s| s.running.as_ref().map(|r| r.inc))
            .collect();
        let holders = self.shared.table.holders();
        let now = now_ms();
        let mut log = self.shared.log.lock().unwrap();
        let mut found = Vec::new();
        for (shard, (holder, expiry, cp)) in holders {
            let Some(inc) = holder.filter(|i| live.contains(i)) else {
                continue;
            };
            if expiry <= now || check::shard_done(&log, &shard, cp) || reported.contains(&shard) {
                continue;
            }
            let Some(take) = log.take_of(inc, &shard) else {
                continue;
            };
            if let Err(why) = log.waiting(&shard, take, cp) {
                found.push((shard, inc, why));
            }
        }
        found.sort();
        for (shard, inc, why) in found {
            let who = log.who(inc);
            log.violate(
                "stuck",
                format!(
                    "shard {shard}: no checkpoint moved for {stall:?} while {who} held it, alive and renewing: {why}"
                ),
            );
            reported.insert(shard);
        }
    }
}
