//! The simulated lease table: one set of rows shared by every instance, each instance reaching
//! it through a [`TableView`] of its own that injects faults and reads that instance's clock.
//! It behaves like the DynamoDB store: every write is conditional on what the caller last saw
//! (owner and counter); an expiry is computed from the *writer's* clock and whether a row may be
//! taken is judged by the *taker's* clock, each read when the call is sent. The table sees every
//! applied write, so the checks that must hold at a write run here, as it is applied.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use shardhost::lease::{Checkpoint, Lease, LeaseError, LeaseKey, LeaseStore, now_ms};
use tokio_util::sync::CancellationToken;

use crate::faults::Faults;
use crate::log::{Cp, Log};

/// One row, and the incarnation that holds it as far as the table knows (set by an acquire,
/// cleared by a release).
struct Row {
    lease: Lease,
    holder: Option<u32>,
}

/// The rows every instance shares.
pub struct Table {
    rows: Mutex<HashMap<LeaseKey, Row>>,
    log: Arc<Mutex<Log>>,
}

/// A checkpoint as the simulation compares it.
pub fn cp_of(c: &Checkpoint) -> Cp {
    match c {
        Checkpoint::ShardEnd => Cp::End,
        Checkpoint::At(p) => Cp::At((
            p.sequence_number().parse().unwrap_or(u64::MAX),
            p.sub_sequence_number(),
        )),
    }
}

impl Table {
    pub fn new(log: Arc<Mutex<Log>>) -> Arc<Table> {
        Arc::new(Table {
            rows: Mutex::new(HashMap::new()),
            log,
        })
    }

    /// Every row's checkpoint, by shard id.
    pub fn checkpoints(&self) -> HashMap<String, Option<Cp>> {
        let rows = self.rows.lock().unwrap();
        rows.iter()
            .map(|(k, r)| (k.shard_id.clone(), r.lease.checkpoint.as_ref().map(cp_of)))
            .collect()
    }

    /// Each row's holder as the table knows it (the incarnation that took it, until a
    /// release), its expiry (ms by the holder's clock) and checkpoint, by shard id.
    pub fn holders(&self) -> HashMap<String, (Option<u32>, u64, Option<Cp>)> {
        let rows = self.rows.lock().unwrap();
        rows.iter()
            .map(|(k, r)| {
                let cp = r.lease.checkpoint.as_ref().map(cp_of);
                (k.shard_id.clone(), (r.holder, r.lease.expiry_ms, cp))
            })
            .collect()
    }

    /// Applies a write of a holder if the row is as `lease` says (owner and counter); checks
    /// that the table still gives the row to the writing incarnation.
    fn held_write(
        &self,
        inc: u32,
        lease: &Lease,
        bump: bool,
        change: impl FnOnce(&mut Lease),
    ) -> Result<Lease, LeaseError> {
        let mut rows = self.rows.lock().unwrap();
        let lost = || LeaseError::Lost {
            key: lease.key.clone(),
            owner: lease.owner.clone().unwrap_or_default(),
        };
        let row = rows.get_mut(&lease.key).ok_or_else(lost)?;
        if lease.owner.is_none()
            || row.lease.owner != lease.owner
            || row.lease.counter != lease.counter
        {
            return Err(lost());
        }
        if bump && row.holder != Some(inc) {
            let mut log = self.log.lock().unwrap();
            let (who, holder) = (log.who(inc), row.holder.map(|h| log.who(h)));
            log.violate(
                "write-without-lease",
                format!(
                    "shard {}: a write of {who} was applied while the table gives the lease to {}",
                    lease.key.shard_id,
                    holder.as_deref().unwrap_or("nobody")
                ),
            );
        }
        let old = row.lease.checkpoint.as_ref().map(cp_of);
        change(&mut row.lease);
        if bump {
            row.lease.counter += 1;
        }
        let new = row.lease.checkpoint.as_ref().map(cp_of);
        if new != old
            && let Some(new) = new
        {
            self.log
                .lock()
                .unwrap()
                .checkpointed(inc, &lease.key.shard_id, old, new);
        }
        if row.lease.owner.is_none() && row.holder.take().is_some() {
            let reserved = row.lease.handoff_to.clone();
            self.log.lock().unwrap().note(|| {
                format!(
                    "#{inc} released {} (reserved for {reserved:?})",
                    lease.key.shard_id
                )
            });
        }
        Ok(row.lease.clone())
    }
}

/// One instance's way to the table: its clock (true time + skew) and the faults it meets.
pub struct TableView {
    pub table: Arc<Table>,
    pub inc: u32,
    pub skew_ms: i64,
    pub faults: Arc<Faults>,
    /// Fires when the instance is killed: its calls never answer (nor reach the table).
    pub killed: CancellationToken,
    /// Fires when the instance is told to stop (gracefully).
    pub stopping: CancellationToken,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl TableView {
    /// This instance's clock.
    fn now(&self) -> u64 {
        now_ms().saturating_add_signed(self.skew_ms)
    }

    async fn wait(&self, d: Duration) {
        if d.is_zero() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = self.killed.cancelled() => std::future::pending().await,
        }
    }

    /// One call: faults before, the change applied (with this instance's clock as it was
    /// when the call was sent), faults after.
    async fn call<T>(
        &self,
        what: &str,
        write: bool,
        apply: impl FnOnce(&Table, u64) -> Result<T, LeaseError>,
    ) -> Result<T, LeaseError> {
        if self.killed.is_cancelled() {
            std::future::pending::<()>().await;
        }
        let now = self.now();
        let f = self.faults.store(self.inc, what, write);
        self.wait(f.before).await;
        if f.error_before {
            return Err(LeaseError::Store(format!("{what}: injected error")));
        }
        if self.killed.is_cancelled() {
            std::future::pending::<()>().await;
        }
        let result = apply(&self.table, now);
        self.wait(f.after).await;
        match result {
            Ok(_) if f.lost_answer && f.as_lost && what != "acquire" => Err(LeaseError::Lost {
                key: LeaseKey::new("?", what),
                owner: String::new(),
            }),
            Ok(_) if f.lost_answer => Err(LeaseError::Store(format!(
                "{what}: timed out (the write was applied; its answer was lost)"
            ))),
            other => other,
        }
    }
}

impl TableView {
    /// A lease given up (not on a stop, not handed off, not at SHARD_END) by a worker whose checkpoint write just
    /// failed with a store error while the lease was still valid: the error ended the worker,
    /// and what it handled since its last checkpoint is delivered again, where the write should
    /// have been tried again while the lease is valid (as a renewal is).
    fn released_after_store_error(&self, shard: &str) {
        let mut log = self.table.log.lock().unwrap();
        let now = log.now();
        let Some(&at) = log.checkpoint_errors.get(&(self.inc, shard.to_owned())) else {
            return;
        };
        // Near the lease's fence (the store failed renewals too; the next try, at most 2 s on,
        // would come after it), the lease ends anyway.
        let fence = log
            .grants
            .get(&(self.inc, shard.to_owned()))
            .into_iter()
            .flatten()
            .filter(|(answered, _)| *answered <= now)
            .map(|(_, sent)| sent + log.ttl_ms * 4 / 5)
            .max()
            .unwrap_or(0);
        // A worker whose subscription task died since fails for that (as it must).
        let died = log
            .subscription_panics
            .get(&(self.inc, shard.to_owned()))
            .is_some_and(|&died| died >= at);
        if now > at + 1000 || now + 2100 >= fence || died {
            return;
        }
        let who = log.who(self.inc);
        log.violate(
            "released-after-store-error",
            format!(
                "shard {shard}: {who} released its lease {} ms after a checkpoint write failed with a store error, without being told to stop",
                now - at
            ),
        );
    }
}

#[async_trait]
impl LeaseStore for TableView {
    async fn acquire(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, LeaseError> {
        let inc = self.inc;
        let sent = self.table.log.lock().unwrap().now();
        let taken = self
            .call("acquire", true, |t, now| {
                let mut rows = t.rows.lock().unwrap();
                let row = rows.entry(key.clone()).or_insert_with(|| Row {
                    lease: Lease::new(key.clone()),
                    holder: None,
                });
                if !row.lease.takeable_by(owner, now) {
                    return Ok(None);
                }
                let (was, until) = (row.lease.owner.clone(), row.lease.expiry_ms);
                t.log.lock().unwrap().note(|| {
                    format!(
                        "#{inc} acquires {} by its clock {now}: was {was:?} until {until}",
                        key.shard_id
                    )
                });
                row.lease.owner = Some(owner.to_owned());
                row.lease.expiry_ms = now.saturating_add(ms(ttl));
                row.lease.handoff_to = None;
                row.lease.counter += 1;
                row.holder = Some(inc);
                let cp = row.lease.checkpoint.as_ref().map(cp_of);
                t.log.lock().unwrap().took(inc, &key.shard_id, cp);
                Ok(Some(row.lease.clone()))
            })
            .await;
        if let Ok(Some(_)) = &taken {
            self.table
                .log
                .lock()
                .unwrap()
                .granted(inc, &key.shard_id, sent);
        }
        taken
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        let sent = self.table.log.lock().unwrap().now();
        let renewed = self
            .call("renew", true, |t, now| {
                t.held_write(self.inc, lease, true, |row| {
                    row.expiry_ms = now.saturating_add(ms(ttl));
                })
            })
            .await;
        if renewed.is_ok() {
            let shard = &lease.key.shard_id;
            self.table
                .log
                .lock()
                .unwrap()
                .granted(self.inc, shard, sent);
        }
        renewed
    }

    async fn checkpoint(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
    ) -> Result<Lease, LeaseError> {
        let written = self
            .call("checkpoint", true, |t, _| {
                t.held_write(self.inc, lease, true, |row| {
                    row.checkpoint = Some(checkpoint.clone());
                })
            })
            .await;
        if let Err(LeaseError::Store(_)) = &written {
            let mut log = self.table.log.lock().unwrap();
            let now = log.now();
            log.checkpoint_errors
                .insert((self.inc, lease.key.shard_id.clone()), now);
        }
        written
    }

    async fn mark_opened(&self, lease: &Lease, at_ms: u64) -> Result<Lease, LeaseError> {
        self.call("mark_opened", true, |t, _| {
            let marked = t.held_write(self.inc, lease, true, |row| {
                row.opened_ms.get_or_insert(at_ms);
            })?;
            let shard = lease.key.shard_id.clone();
            t.log.lock().unwrap().marked.insert(shard);
            Ok(marked)
        })
        .await
    }

    async fn read(&self, key: &LeaseKey) -> Result<Option<Lease>, LeaseError> {
        self.call("read", false, |t, _| {
            Ok(t.rows.lock().unwrap().get(key).map(|r| r.lease.clone()))
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        let reserve = lease.handoff_to.is_some();
        let ended = self
            .table
            .rows
            .lock()
            .unwrap()
            .get(&lease.key)
            .is_some_and(|r| r.lease.checkpoint == Some(Checkpoint::ShardEnd));
        if !reserve && !ended && !self.stopping.is_cancelled() {
            self.released_after_store_error(&lease.key.shard_id);
        }
        self.call("release", true, |t, _| {
            t.held_write(self.inc, lease, true, |row| {
                row.owner = None;
                if !reserve {
                    row.expiry_ms = 0;
                    row.handoff_to = None;
                }
            })
            .map(drop)
        })
        .await
    }

    async fn request_handoff(&self, lease: &Lease, requester: &str) -> Result<bool, LeaseError> {
        let inc = self.inc;
        self.call("request_handoff", true, |t, _| {
            let mut asked = false;
            match t.held_write(inc, lease, false, |row| {
                if row.handoff_to.is_none() {
                    row.handoff_to = Some(requester.to_owned());
                    asked = true;
                }
            }) {
                Ok(_) => Ok(asked),
                Err(LeaseError::Lost { .. }) => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
    }
}
