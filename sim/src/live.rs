//! The log's events that settle records, and the checks that must hold the moment they happen:
//! a handler's answers, a copy or dead letter published, a read handed out (the shard's
//! memory stays within its in-flight bound), a checkpoint written (it never moves backwards,
//! and passes only records its holder's own reader delivered and its handler answered).

use shardhost::record::Outcome;

use crate::log::{Ans, Cp, End, Log, Pos, passed, show};
use crate::params::Plan;

/// What a publish carried, as the simulation's stream saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// A retry copy for this attempt.
    Copy(u32),
    /// A dead letter after this many attempts.
    Letter(u32),
}

impl Log {
    /// The handler's answers for one call of `inc` on `shard` (each record's position and
    /// logical id), as the records' plans say: a trap for all when any of them traps now.
    pub fn answer_call(&mut self, inc: u32, shard: &str, recs: &[(Pos, u64)]) -> Vec<Ans> {
        let take = self.take_of(inc, shard);
        let mut trapping = false;
        for (pos, logical) in recs {
            match self.records.get_mut(logical) {
                Some(rec) => {
                    if let Plan::TrapThenAck(n) = rec.plan
                        && rec.unsettled < n
                    {
                        rec.unsettled += 1;
                        trapping = true;
                    }
                }
                None => self.violate(
                    "unknown-record",
                    format!(
                        "shard {shard}: the handler got {} (record {logical}), which was never put",
                        show(*pos)
                    ),
                ),
            }
        }
        let answers: Vec<Ans> = recs
            .iter()
            .map(|&(_, logical)| {
                if trapping {
                    return Ans::Trap;
                }
                let Some(rec) = self.records.get_mut(&logical) else {
                    return Ans::Out(Outcome::Ack);
                };
                let outcome = match rec.plan {
                    Plan::Ack | Plan::TrapThenAck(_) => Outcome::Ack,
                    Plan::Drop => Outcome::Drop,
                    Plan::RetryThenAck(n) if rec.unsettled < n => Outcome::Retry,
                    Plan::RetryAfterThenAck(n, ms) if rec.unsettled < n => Outcome::RetryAfter(ms),
                    Plan::RetryThenAck(_) | Plan::RetryAfterThenAck(..) => Outcome::Ack,
                };
                if !outcome.settles() {
                    rec.unsettled += 1;
                }
                Ans::Out(outcome)
            })
            .collect();
        let now = self.now();
        for (&(pos, logical), &ans) in recs.iter().zip(&answers) {
            if let Some(take) = take {
                self.answered(shard, pos, take, ans);
            }
            if let (Ans::Out(o @ (Outcome::Ack | Outcome::Drop)), Some(rec)) =
                (ans, self.records.get_mut(&logical))
                && rec.settled.is_none()
            {
                let end = if o == Outcome::Ack {
                    End::Ack
                } else {
                    End::Drop
                };
                rec.settled = Some((end, now));
            }
        }
        answers
    }

    /// An entry answered under `take`: settled by it, or waiting with it.
    fn answered(&mut self, shard: &str, pos: Pos, take: usize, ans: Ans) {
        let now = self.now();
        let Some(entry) = self.entries.get_mut(&(shard.to_owned(), pos)) else {
            return;
        };
        if ans.settles() {
            entry.settled_at = now;
            entry.waits.remove(&take);
            if !entry.settled_by.contains(&take) {
                entry.settled_by.push(take);
            }
        } else {
            // When its copy may go out: at once; after a retry-after delay, at a moment the log
            // does not know exactly (it runs from when every lane of the batch is back).
            entry.ready_at = match ans {
                Ans::Out(Outcome::RetryAfter(_)) => u64::MAX,
                _ => now,
            };
            entry.waits.insert(take, ans);
        }
    }

    /// `inc` published a copy or a dead letter of the logical record `logical`: the entry it
    /// answered for (the delivery before the copy's attempt, or the letter's last) is settled
    /// by its take. Answers where that entry is, if it knows it.
    pub fn published(&mut self, inc: u32, logical: u64, what: Published) -> Option<(String, Pos)> {
        match what {
            Published::Copy(_) => self.copies += 1,
            Published::Letter(_) => self.letters += 1,
        }
        let now = self.now();
        if let (Published::Letter(_), Some(rec)) = (what, self.records.get_mut(&logical))
            && rec.settled.is_none()
        {
            rec.settled = Some((End::DeadLetter, now));
        }
        let found = self.put_for(inc, logical, what);
        self.note(|| format!("#{inc} published {what:?} of record {logical} (for {found:?})"));
        let (shard, pos, take) = found?;
        self.answered(&shard, pos, take, Ans::Out(Outcome::Drop));
        Some((shard, pos))
    }

    /// The entry a publish by `inc` of `what` for `logical` answers for, and the take that
    /// publishes it: the delivery the copy follows, or the letter's last.
    pub fn put_for(&self, inc: u32, logical: u64, what: Published) -> Option<(String, Pos, usize)> {
        let attempt = match what {
            Published::Copy(a) => a.saturating_sub(1),
            Published::Letter(a) => a,
        };
        let candidates = self.by_logical.get(&logical)?;
        candidates.iter().rev().find_map(|(shard, pos)| {
            let take = self.take_of(inc, shard)?;
            let e = &self.entries[&(shard.clone(), *pos)];
            (e.attempt == attempt && e.waits.contains_key(&take))
                .then(|| (shard.clone(), *pos, take))
        })
    }

    /// A put of a copy or letter of `take` into `stream`, for the entry at `pos`, starts: not
    /// the moment one of its own there failed when this one was ready before that one started
    /// (a batch's copies go out together, or wait together after a failure, as the delayed
    /// ones do, rather than each spending the SDK's whole budget on a stream that is down).
    pub fn put_started(&mut self, take: usize, shard: &str, pos: Pos, stream: &str) -> u64 {
        let now = self.now();
        let key = (take, stream.to_owned());
        let Some(&(started, failed)) = self.put_failures.get(&key) else {
            return now;
        };
        let ready = self
            .entries
            .get(&(shard.to_owned(), pos))
            .map_or(u64::MAX, |e| e.ready_at);
        if now != failed || ready > started || !self.put_reported.insert(take) {
            return now;
        }
        let who = self.who(self.takes[take].inc);
        self.violate(
            "put-after-failure",
            format!(
                "shard {shard}: {who} put a copy or letter of {} into {stream} the moment another one there failed (at {failed} ms), though both were ready when that one was sent (at {started} ms): each spends the SDK's whole budget",
                show(pos)
            ),
        );
        now
    }

    /// A put of `take` into `stream` for the entry at `pos`, sent at `started`, failed now: it
    /// is tried again after a back-off (at least a second).
    pub fn put_failed(
        &mut self,
        take: usize,
        (shard, pos): (&str, Pos),
        stream: &str,
        started: u64,
    ) {
        let now = self.now();
        if let Some(e) = self.entries.get_mut(&(shard.to_owned(), pos)) {
            e.ready_at = now + 1001;
        }
        self.note(|| format!("the put of {shard}/{} into {stream} failed", show(pos)));
        self.put_failures
            .insert((take, stream.to_owned()), (started, now));
    }

    /// `shard` was opened at `latest` with its first visible entry at `index`.
    pub fn opened_latest(&mut self, shard: &str, index: usize) {
        self.note(|| format!("{shard} opened at latest (from entry {index})"));
        self.latest_from.entry(shard.to_owned()).or_insert(index);
    }

    /// A reader of `take` handed out `handed` and now stands at entry `next` of `shard`: what it
    /// holds beyond the first record its take has not settled stays within the in-flight bound
    /// (a record held without a cap freezes the front: nothing behind it is kept).
    pub fn read(&mut self, take: Option<usize>, shard: &str, handed: &[Pos], next: usize) {
        let Some(take) = take else {
            return;
        };
        let set = self.handed.entry(take).or_default();
        set.extend(handed.iter().copied());
        let Some(seqs) = self.shards.get(shard) else {
            return;
        };
        let set = &self.handed[&take];
        let key = |p: &Pos| (shard.to_owned(), *p);
        let front = seqs[..next.min(seqs.len())]
            .iter()
            .position(|p| set.contains(p) && !self.entries[&key(p)].settled_by.contains(&take));
        let Some(front) = front else {
            return;
        };
        let (at, wait) = (
            seqs[front],
            self.entries[&key(&seqs[front])].waits.get(&take).copied(),
        );
        let held = !self.capped && matches!(wait, Some(Ans::Trap | Ans::Out(Outcome::Retry)));
        let kept = next - front;
        if held || kept <= self.memory_bound || !self.over_bound.insert(take) {
            return;
        }
        let inc = self.takes[take].inc;
        let msg = format!(
            "shard {shard}: {} keeps {kept} records read behind {} (waiting: {wait:?}), past the in-flight bound ({} with a read and one ahead)",
            self.who(inc),
            show(at),
            self.memory_bound
        );
        self.violate("in-flight-bound", msg);
    }

    /// A checkpoint write applied to the table: it never moves backwards, passes only records
    /// the writer's own take settled (its reader delivered them and its handler answered, or
    /// their copies went out), and SHARD_END only ends a closed shard.
    pub fn checkpointed(&mut self, inc: u32, shard: &str, old: Option<Cp>, new: Cp) {
        self.checkpoint_writes += 1;
        self.note(|| format!("#{inc} checkpoint {shard} {new}"));
        if let Some(old) = old
            && new < old
        {
            let who = self.who(inc);
            self.violate(
                "checkpoint-backwards",
                format!("shard {shard}: {who} moved the checkpoint back from {old} to {new}"),
            );
        }
        let take = self.take_of(inc, shard);
        let unanswered = self.shards.get(shard).and_then(|seqs| {
            seqs.iter()
                .copied()
                .filter(|&p| new.passes(p) && !passed(old, p))
                .find(|&p| {
                    self.owed(shard, take, p)
                        && take.is_none_or(|t| {
                            !self.entries[&(shard.to_owned(), p)].settled_by.contains(&t)
                        })
                })
        });
        if let Some(pos) = unanswered {
            let msg = self.unanswered(inc, take, shard, pos, new);
            self.violate("checkpoint-past-unanswered", msg);
        }
        if new == Cp::End {
            if !self.closed.contains(shard) {
                let who = self.who(inc);
                self.violate(
                    "shard-end-of-open-shard",
                    format!("shard {shard}: {who} wrote SHARD_END but the shard is open"),
                );
            }
            let now = self.now();
            self.shard_ends.entry(shard.to_owned()).or_insert(now);
        }
    }

    fn unanswered(&self, inc: u32, take: Option<usize>, shard: &str, pos: Pos, new: Cp) -> String {
        let entry = &self.entries[&(shard.to_owned(), pos)];
        let delivered = take.is_some_and(|t| self.handed.get(&t).is_some_and(|h| h.contains(&pos)));
        let elsewhere: Vec<String> = entry
            .settled_by
            .iter()
            .map(|&t| self.who(self.takes[t].inc))
            .collect();
        format!(
            "shard {shard}: {} wrote checkpoint {new}, past record {} (record {}, attempt {}), which its reader {} and its handler did not settle ({}; settled by {elsewhere:?})",
            self.who(inc),
            show(pos),
            entry.logical,
            entry.attempt,
            if delivered {
                "delivered"
            } else {
                "never delivered"
            },
            match take.and_then(|t| entry.waits.get(&t)) {
                Some(a) => format!("its answer: {a:?}"),
                None => "no answer".into(),
            }
        )
    }

    /// Whether `take` owes the entry at `pos` an answer before a checkpoint passes it: it must
    /// be delivered, or `take`'s reader delivered it anyway (under `latest` or `at_timestamp`).
    fn owed(&self, shard: &str, take: Option<usize>, pos: Pos) -> bool {
        self.entry_required(shard, pos)
            || take.is_some_and(|t| self.handed.get(&t).is_some_and(|h| h.contains(&pos)))
    }

    /// Why `shard`, held by `take` with checkpoint `cp`, may stand still: a record after the
    /// checkpoint waits with its holder (held, waiting for a retry-after, a copy not out yet;
    /// reading may pause on it), or the first one was settled just now (its checkpoint is
    /// due). `Err` says why it may not.
    pub fn waiting(&self, shard: &str, take: usize, cp: Option<Cp>) -> Result<(), String> {
        let seqs = self
            .shards
            .get(shard)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let waits = |p: &Pos| {
            let e = &self.entries[&(shard.to_owned(), *p)];
            e.waits.contains_key(&take) && !e.settled_by.contains(&take)
        };
        if seqs.iter().any(|p| !passed(cp, *p) && waits(p)) {
            return Ok(());
        }
        let first = seqs
            .iter()
            .copied()
            .find(|&p| !passed(cp, p) && self.owed(shard, Some(take), p));
        let Some(pos) = first else {
            return Err(format!(
                "every record is answered, but its checkpoint {} does not reach its end",
                cp.map_or("none".into(), |c| c.to_string())
            ));
        };
        let entry = &self.entries[&(shard.to_owned(), pos)];
        let settled = entry.settled_by.contains(&take);
        if settled && self.now() < entry.settled_at + 15_000 {
            return Ok(());
        }
        let handed = self.handed.get(&take).is_some_and(|h| h.contains(&pos));
        Err(format!(
            "its first record after checkpoint {} is {} (record {}), which its holder {}",
            cp.map_or("none".into(), |c| c.to_string()),
            show(pos),
            entry.logical,
            match (handed, settled) {
                (false, _) => "never read".to_owned(),
                (true, true) => format!("settled at {} ms", entry.settled_at),
                (true, false) => "read but never answered".to_owned(),
            }
        ))
    }
}
