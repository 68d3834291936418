//! The invariants checked over a whole schedule once it ended (the ones that must hold at the
//! moment of a checkpoint write run as it is applied, in `log` and `table`):
//!
//! - `record-lost`: every record the subscription must deliver (all, but under `latest` only
//!   those put after its shard was first opened, under `at_timestamp` those that arrived from
//!   then on) got an ack, a drop or a dead letter — wherever its retry copies went.
//! - `redelivery-skipped`: a holder's reader delivers every record after the checkpoint it took
//!   the lease at, up to the furthest it read (checked per take: what an earlier holder acked
//!   without checkpointing is delivered again).
//! - `two-holders`: two incarnations' handler calls for one shard never overlap in virtual time
//!   (a holder acts only until four fifths of the ttl after its last renewal was sent; another
//!   takes the row only once it expired by its own clock, and clocks differ by less than a fifth
//!   of the ttl).
//! - `acting-past-fence`: a holder calls the handler only until four fifths of the ttl after
//!   it sent the last take or renewal that succeeded (`lease/handle.rs`): a call starts before
//!   that fence and ends by it, unless a renewal answered meanwhile moved it.
//! - `handled-without-lease`: a call for a shard comes only from an incarnation that took it.
//! - `duplicate`: a record is handled again only by the documented re-delivery: by a new holder
//!   whose checkpoint, when it took the lease, had not passed the record, or after a `retry`.
//! - `parents-before-children`: a child shard is read only after every parent's SHARD_END.
//!
//! Checked as they happen (`live`, `heal`): `checkpoint-past-unanswered` (a checkpoint passes
//! only records its writer's own take delivered and settled), `checkpoint-backwards`,
//! `in-flight-bound` (a reader keeps at most the in-flight bound behind the record it waits
//! for), `stuck` (a shard whose live, renewing holder stands still with nothing waiting),
//! `busy-reads` (a real reader failing at once read after read: a loop that never reads again),
//! `events-unread` (a fan-out subscription leaving its events unread past 10 s).

use std::collections::HashMap;

use crate::log::{Ans, Cp, Log, Pos, passed, show};

/// Whether `shard`'s checkpoint `cp` reached its end.
pub fn shard_done(log: &Log, shard: &str, cp: Option<Cp>) -> bool {
    if log.skipped(shard) {
        return true;
    }
    let seqs = log.shards.get(shard).map(Vec::as_slice).unwrap_or_default();
    let last = seqs
        .iter()
        .rev()
        .copied()
        .find(|&p| log.entry_required(shard, p));
    done(cp, log.closed.contains(shard), last)
}

/// Whether every shard's checkpoint reached its end; else which did not, and why.
pub fn complete(log: &Log, checkpoints: &HashMap<String, Option<Cp>>) -> Result<(), String> {
    for (shard, seqs) in &log.shards {
        // A retry stream of its own that nothing reads (no lease row): its copies' records are
        // checked as lost, not waited for.
        if log.retry_shards.contains(shard) && !checkpoints.contains_key(shard) {
            continue;
        }
        let cp = checkpoints.get(shard).copied().flatten();
        if !shard_done(log, shard, cp) {
            let first_open = seqs.iter().find(|&&p| {
                let e = &log.entries[&(shard.clone(), p)];
                log.required(e.logical) && log.records[&e.logical].settled.is_none()
            });
            return Err(format!(
                "shard {shard} ({}) has checkpoint {}, last record {:?}, first record without ack, drop or dead letter {:?}",
                if log.closed.contains(shard) {
                    "closed"
                } else {
                    "open"
                },
                cp.map_or("none".into(), |c| c.to_string()),
                seqs.last(),
                first_open
            ));
        }
    }
    Ok(())
}

/// Every check over the whole log.
pub fn after(log: &mut Log, ttl_ms: u64) {
    lost(log);
    overlaps(log);
    fences(log, ttl_ms);
    deliveries(log);
    gaps(log);
    parents_first(log);
}

fn lost(log: &mut Log) {
    let mut missing: Vec<(String, u64, u64)> = log
        .records
        .iter()
        .filter(|(id, r)| r.settled.is_none() && log.required(**id))
        .map(|(id, r)| (r.shard.clone(), r.pos.0, *id))
        .collect();
    missing.sort();
    let total = missing.len();
    for (shard, seq, id) in missing.into_iter().take(5) {
        let copies = log.by_logical[&id].len() - 1;
        log.violate(
            "record-lost",
            format!(
                "shard {shard}: record {seq} (record {id}, {copies} copies; {total} lost in all) never got an ack, a drop or a dead letter"
            ),
        );
    }
}

/// Each take's readers delivered every record after its checkpoint, up to the furthest read.
fn gaps(log: &mut Log) {
    let mut found = Vec::new();
    for (&take, handed) in &log.handed {
        let t = &log.takes[take];
        let Some(&furthest) = handed.iter().max() else {
            continue;
        };
        let seqs = log
            .shards
            .get(&t.shard)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let skipped = seqs.iter().copied().find(|&p| {
            p <= furthest
                && !passed(t.cp, p)
                && !handed.contains(&p)
                && log.entry_required(&t.shard, p)
        });
        if let Some(p) = skipped {
            found.push((t.order, format!(
                "shard {}: {}, which took the lease at checkpoint {}, read up to {} but never delivered {}",
                t.shard,
                log.who(t.inc),
                t.cp.map_or("none".into(), |c| c.to_string()),
                show(furthest),
                show(p)
            )));
        }
    }
    found.sort();
    for (_, msg) in found.into_iter().take(5) {
        log.violate("redelivery-skipped", msg);
    }
}

/// Handler calls of two incarnations on one shard that overlap in time.
fn overlaps(log: &mut Log) {
    let end_of_time = log.now();
    let mut by_shard: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, c) in log.calls.iter().enumerate() {
        by_shard.entry(&c.shard).or_default().push(i);
    }
    let mut found = Vec::new();
    for (shard, ids) in by_shard {
        // `calls` is in start order.
        for (k, &i) in ids.iter().enumerate() {
            let a = &log.calls[i];
            let a_end = a.end.unwrap_or(end_of_time);
            for &j in &ids[k + 1..] {
                let b = &log.calls[j];
                if b.start >= a_end && !(b.start == a.start && a_end == a.start) {
                    break;
                }
                let b_end = b.end.unwrap_or(end_of_time);
                if a.inc != b.inc
                    && b.start < a_end.max(a.start + 1)
                    && a.start < b_end.max(b.start + 1)
                {
                    found.push((shard.to_owned(), i, j));
                }
            }
        }
    }
    found.sort();
    for (shard, i, j) in found.into_iter().take(3) {
        let (a, b) = (&log.calls[i], &log.calls[j]);
        let msg = format!(
            "shard {shard}: {} called the handler with {:?} from {} ms to {:?} while {} called it with {:?} from {} ms to {:?}",
            log.who(a.inc),
            a.seqs,
            a.start,
            a.end,
            log.who(b.inc),
            b.seqs,
            b.start,
            b.end
        );
        log.violate("two-holders", msg);
    }
}

/// Each record's deliveries so far: the take it was delivered under, and its answer.
type Deliveries<'a> = HashMap<(&'a str, crate::log::Pos), Vec<(usize, Option<Ans>)>>;

/// Every delivery of a record is its first, a retry's, or a new holder's from before its
/// checkpoint at the take.
fn deliveries(log: &mut Log) {
    let mut takes: HashMap<(u32, &str), Vec<usize>> = HashMap::new();
    for (i, t) in log.takes.iter().enumerate() {
        takes.entry((t.inc, &t.shard)).or_default().push(i);
    }
    let mut seen: Deliveries<'_> = HashMap::new();
    let mut found = Vec::new();
    for c in &log.calls {
        let take = takes.get(&(c.inc, c.shard.as_str())).and_then(|ts| {
            ts.iter()
                .rev()
                .copied()
                .find(|&t| log.takes[t].order < c.order)
        });
        let Some(take) = take else {
            found.push((
                "handled-without-lease",
                format!(
                    "shard {}: {} called the handler with {:?} at {} ms without having taken the lease",
                    c.shard,
                    log.who(c.inc),
                    c.seqs,
                    c.start
                ),
            ));
            continue;
        };
        let t = &log.takes[take];
        for (k, &seq) in c.seqs.iter().enumerate() {
            let answer = c.outcomes.as_ref().map(|o| o[k]);
            let before = seen.entry((c.shard.as_str(), seq)).or_default();
            let shown = show(seq);
            if let Some(cp) = t.cp
                && cp.passes(seq)
            {
                found.push((
                    "duplicate",
                    format!(
                        "shard {}: {} handled record {shown} at {} ms, but the checkpoint was {cp} when it took the lease at {} ms",
                        c.shard,
                        log.who(c.inc),
                        c.start,
                        t.at
                    ),
                ));
            } else if let Some((_, prev)) = before
                .iter()
                .find(|(tk, prev)| *tk == take && !matches!(prev, Some(a) if !a.settles()))
            {
                found.push((
                    "duplicate",
                    format!(
                        "shard {}: {} handled record {shown} again at {} ms under the same lease (first answer {prev:?}), with no retry asked",
                        c.shard,
                        log.who(c.inc),
                        c.start
                    ),
                ));
            }
            before.push((take, answer));
        }
    }
    for (check, msg) in found.into_iter().take(5) {
        log.violate(check, msg);
    }
}

fn parents_first(log: &mut Log) {
    let mut found = Vec::new();
    for c in &log.calls {
        let parents = log.parents.get(&c.shard).into_iter().flatten();
        for parent in parents.filter(|p| !log.skipped(p)) {
            let ended = log.shard_ends.get(parent);
            if ended.is_none_or(|&at| at > c.start) {
                found.push(format!(
                    "child shard {} was handled ({} at {} ms) before its parent {parent} reached SHARD_END ({:?})",
                    c.shard,
                    log.who(c.inc),
                    c.start,
                    ended
                ));
            }
        }
    }
    for msg in found.into_iter().take(3) {
        log.violate("parents-before-children", msg);
    }
}

/// Every call within its holder's fence.
fn fences(log: &mut Log, ttl_ms: u64) {
    let end_of_time = log.now();
    let reach = ttl_ms * 4 / 5;
    let mut found = Vec::new();
    for c in &log.calls {
        let grants = log.grants.get(&(c.inc, c.shard.clone()));
        // The fence at `x`: from the grants answered by then.
        let fence_at = |x: u64| {
            grants
                .into_iter()
                .flatten()
                .filter(|(answered, _)| *answered <= x)
                .map(|(_, sent)| sent + reach)
                .max()
        };
        let end = c.end.unwrap_or(end_of_time);
        let Some(mut fence) = fence_at(c.start).filter(|&f| f > c.start) else {
            found.push(format!(
                "shard {}: {} called the handler with {:?} at {} ms, past its lease's fence ({:?} ms)",
                c.shard,
                log.who(c.inc),
                c.seqs,
                c.start,
                fence_at(c.start)
            ));
            continue;
        };
        while fence < end {
            match fence_at(fence) {
                Some(next) if next > fence => fence = next,
                _ => {
                    found.push(format!(
                        "shard {}: {}'s call with {:?} from {} ms ran on to {end} ms, past its lease's fence at {fence} ms",
                        c.shard,
                        log.who(c.inc),
                        c.seqs,
                        c.start
                    ));
                    break;
                }
            }
        }
    }
    for msg in found.into_iter().take(5) {
        log.violate("acting-past-fence", msg);
    }
}

/// The checkpoint that completes a shard: SHARD_END when closed, else past its last record
/// that must be delivered.
pub fn done(cp: Option<Cp>, closed: bool, last: Option<Pos>) -> bool {
    match (closed, cp, last) {
        (true, cp, _) => cp == Some(Cp::End),
        (false, _, None) => true,
        (false, Some(cp), Some(last)) => cp.passes(last),
        (false, None, Some(_)) => false,
    }
}
