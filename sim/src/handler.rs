//! The simulation's handler, plugged in through the host's native handler seam: it answers each
//! record as its logical record's plan says (ack mostly, sometimes drop, sometimes retry,
//! retry-after or trap a few times before ack; a trap fails the whole call, which the host
//! bisects), takes a drawn while per call, and records every call (which incarnation, which
//! shard, which records, from when to when, and its answers) in the log.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use shardhost::handler::{CallContext, CallError, Handler, HandlerFactory};
use shardhost::record::{BatchInfo, BatchOutcome, Record};
use tokio_util::sync::CancellationToken;

use crate::faults::Faults;
use crate::log::{Ans, Log};
use crate::stream::{logical_of, pos_of};

/// Makes the handlers of one incarnation.
pub struct Factory {
    pub inc: u32,
    pub log: Arc<Mutex<Log>>,
    pub faults: Arc<Faults>,
    pub killed: CancellationToken,
}

#[async_trait]
impl HandlerFactory for Factory {
    fn version(&self) -> String {
        "sim".into()
    }

    async fn instantiate(&self, ctx: &CallContext) -> Result<Box<dyn Handler>, CallError> {
        Ok(Box::new(SimHandler {
            inc: self.inc,
            shard: ctx.shard_id.to_string(),
            log: self.log.clone(),
            faults: self.faults.clone(),
            killed: self.killed.clone(),
        }))
    }
}

struct SimHandler {
    inc: u32,
    shard: String,
    log: Arc<Mutex<Log>>,
    faults: Arc<Faults>,
    killed: CancellationToken,
}

/// Ends a call in the log when it is dropped unanswered (a lost lease, a stop's grace, a crash).
struct InCall {
    id: usize,
    log: Arc<Mutex<Log>>,
    answered: bool,
}

impl Drop for InCall {
    fn drop(&mut self) {
        if !self.answered
            && let Ok(mut log) = self.log.lock()
        {
            log.call_ended(self.id, None);
        }
    }
}

#[async_trait]
impl Handler for SimHandler {
    fn version(&self) -> &str {
        "sim"
    }

    async fn handle(
        &mut self,
        _info: &BatchInfo,
        records: &[Record],
    ) -> Result<BatchOutcome, CallError> {
        let recs: Vec<_> = records
            .iter()
            .map(|r| (pos_of(r), logical_of(&r.data).unwrap_or(u64::MAX)))
            .collect();
        let seqs = recs.iter().map(|r| r.0).collect();
        let id = self
            .log
            .lock()
            .unwrap()
            .call_started(self.inc, &self.shard, seqs);
        let mut in_call = InCall {
            id,
            log: self.log.clone(),
            answered: false,
        };
        tokio::select! {
            _ = tokio::time::sleep(self.faults.call_time()) => {}
            _ = self.killed.cancelled() => {
                // Killed: the process is gone, the call never answers.
                drop(in_call);
                std::future::pending::<()>().await;
                unreachable!()
            }
        }
        let mut log = self.log.lock().unwrap();
        let answers = log.answer_call(self.inc, &self.shard, &recs);
        log.call_ended(id, Some(answers.clone()));
        drop(log);
        in_call.answered = true;
        if answers.contains(&Ans::Trap) {
            return Err(CallError::Trap {
                version: "sim".into(),
                message: "injected: the record's plan traps".into(),
                said: false,
            });
        }
        let outcomes = answers
            .into_iter()
            .filter_map(|a| match a {
                Ans::Out(o) => Some(o),
                Ans::Trap => None,
            })
            .collect();
        Ok(BatchOutcome::Each(outcomes))
    }
}
