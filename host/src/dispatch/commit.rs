//! State committed with the checkpoint (`[subscription.state] commit = "with-checkpoint"`), the
//! shard's side. A batch's state writes are kept only when every record of it settled (ack or
//! drop) in its call; otherwise they are discarded and the batch is read again from its first
//! record (a seek, with the seek's growing pause), so no write of a record is ever kept twice or
//! kept for a record that is delivered again. The kept writes are committed with the checkpoint
//! that covers them, in one atomic write (`state::commit`); a key another shard wrote since it
//! was read fails the commit, nothing is written, and the shard reads again from the first
//! record whose writes were discarded (a worker that is ending leaves that to the next reader).

use super::Run;
use super::lane::{Answer, Lane};
use crate::lease::{Checkpoint, LeaseError};
use crate::record::Position;
use crate::state::commit::Pending;

impl Run<'_> {
    /// After a batch's lanes answered, with the handler's seek: keeps the batch's state writes
    /// when all of it settled; else discards them and answers where to read again from.
    pub(super) fn settle_state(
        &mut self,
        lanes: &[Lane],
        seek: Option<&Position>,
    ) -> Option<Position> {
        let pending = self.worker.ctx.pending.as_ref()?;
        let mut positions = lanes.iter().flat_map(|l| &l.records).map(|r| r.position());
        let first = positions.next()?;
        let (first, last) = positions.fold((first.clone(), first), |(lo, hi), p| {
            (lo.min(p.clone()), hi.max(p))
        });
        let settled = lanes
            .iter()
            .flat_map(|l| &l.answers)
            .all(|a| matches!(a, Answer::Outcome(o) if o.settles()));
        let clean = settled && seek.is_none();
        let overflowed = pending.end_batch(clean.then(|| (first.clone(), last.clone())));
        if clean {
            return None;
        }
        let w = self.worker;
        let records: usize = lanes.iter().map(|l| l.records.len()).sum();
        if overflowed && records == 1 {
            // One record whose writes alone do not fit in a commit: its error (the handler saw
            // the state call fail), resolved as its answer says; none of its writes are kept.
            let record = lanes.iter().flat_map(|l| &l.records).next()?;
            let why = format!(
                "record {} (partition key `{}`): its state writes do not fit in one commit with \
                 the checkpoint ({} keys, {} bytes at most); none of them are kept",
                record.position(),
                record.partition_key,
                crate::state::commit::MAX_ITEMS,
                crate::state::commit::MAX_BYTES
            );
            tracing::error!("{why}");
            w.status.update(|s| s.last_error = Some(why));
            return None;
        }
        if overflowed {
            // Smaller calls, so a batch's writes fit in one commit.
            self.call_step = Some((records / 2).max(1));
        }
        w.plan.metrics.state_batch_discarded(&w.plan.name);
        tracing::info!(
            from = %first, records,
            "not every record of the batch settled: its state writes are discarded and it is read again"
        );
        Some(first)
    }

    /// Writes checkpoint `cp` with the state writes it covers, in one atomic write.
    pub(super) async fn checkpoint_with_state(
        &mut self,
        cp: &Checkpoint,
        pending: &Pending,
    ) -> Result<(), LeaseError> {
        let w = self.worker;
        let at = match cp {
            Checkpoint::At(p) => Some(p),
            Checkpoint::ShardEnd => None,
        };
        let (Some(set), Some(store)) = (pending.to_commit(at), pending.store()) else {
            return w.lease.checkpoint(cp).await;
        };
        let keys = set.writes.len();
        let from = pending.first_uncommitted();
        let result = if let Some(items) = store.commit_items(&set) {
            w.lease
                .checkpoint_with(cp, &items)
                .await
                .map_err(|e| match e {
                    LeaseError::StateConflict { index } => {
                        let key = set.writes.get(index).map_or("", |w| w.key.as_str());
                        conflict(key)
                    }
                    e => e,
                })
        } else {
            match store.apply_commit(&set) {
                Some(Ok(undo)) => {
                    let written = w.lease.checkpoint(cp).await;
                    if written.is_err() {
                        let _ = store.apply_commit(&undo);
                    }
                    written
                }
                Some(Err(c)) => Err(conflict(&c.key)),
                None => Err(LeaseError::Refused(
                    "the state store cannot commit with the checkpoint".to_owned(),
                )),
            }
        };
        let label = match &result {
            Ok(()) => {
                pending.committed(&set);
                "ok"
            }
            Err(LeaseError::Refused(_)) => "conflict",
            Err(_) => "failed",
        };
        w.plan.metrics.state_commit(&w.plan.name, label, keys);
        if label == "conflict" {
            pending.discard();
            w.plan.state_conflicts.conflicted();
            self.state_conflict = from;
        }
        result
    }

    /// After a conflicting commit: reads the shard again from the first record whose writes
    /// were discarded, the tracker's checkpoint back at the `committed` one.
    pub(super) fn read_state_again(&mut self, committed: Option<Checkpoint>, from: Position) {
        let w = self.worker;
        tracing::warn!(
            from = %from,
            "state commit conflicted (a key another shard wrote since this shard read it): \
             reading again from the first record whose writes were not committed"
        );
        w.status.update(|s| {
            s.last_error = Some(format!(
                "state commit conflicted with another shard's; read again from {from}"
            ));
        });
        self.pending = None;
        self.tracker.rewind(committed, &from);
        self.forget_delayed_from(&from);
        self.forget_waiting_from(&from);
        self.seek_to = Some(from);
    }
}

/// A conflicting commit (nothing was written): the worker reads again from the first record
/// whose writes were discarded, or when it is ending, the next reader from the checkpoint.
fn conflict(key: &str) -> LeaseError {
    LeaseError::Refused(format!(
        "state commit refused: the key `{key}` was written by another shard since this shard \
         read it (key state by shard to avoid this)"
    ))
}
