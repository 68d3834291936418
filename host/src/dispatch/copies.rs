//! What a read record is to a subscription: an ordinary record, a retry copy of its own (made
//! under one of the host's keys: unwrapped), another subscription's copy (skipped), or a copy
//! that claims to be its own but that no key of the host authenticates. That last one is never
//! handed to the handler as if it were a record: it is dead-lettered as it was read (held when
//! the subscription has no cap), with an error naming the key it claims to be made under.

use super::{Role, Run};
use crate::envelope::{self, Header, Kind, Origin, Rejected};
use crate::record::{Outcome, Record};
use crate::settle::Ticket;

/// What a read record is to this subscription.
pub(super) enum Copy {
    /// An ordinary record (or one that only looks like a copy: handled as it is).
    No,
    /// A retry copy for another subscription reading the same stream: not ours to handle.
    Foreign,
    /// A retry copy of ours: its header, and where the original data starts.
    Ours(Box<Header>, usize),
    /// A retry copy for this subscription that no key of this host authenticates.
    Unauthenticated(Rejected),
}

/// A record that claims to be a retry copy of ours, as read, with why it is not believed.
pub(super) struct Unbelieved {
    pub record: Record,
    pub ticket: Ticket,
    pub why: Rejected,
}

impl Run<'_> {
    /// Whether `record` is a retry copy to unwrap: made under one of the host's keys, for this
    /// subscription, on its retry stream. A record that looks like one but is not is an ordinary
    /// record (logged and counted); a dead letter read by a subscription is an ordinary record.
    pub(super) fn copy_of(&self, record: &Record) -> Copy {
        let copy = self.what_copy(record);
        if self.worker.plan.role == Role::RetryCopies && matches!(copy, Copy::No) {
            // Only the subscription's copies are its to handle on its own retry stream.
            let plan = &self.worker.plan;
            plan.metrics.contained(&plan.name, "not-a-copy-skipped");
            tracing::warn!(
                sequence_number = %record.position(), partition_key = %record.partition_key,
                "a record on the subscription's retry stream that is not one of its retry copies \
                 is skipped: from a retry stream of its own, a subscription handles only its copies"
            );
            return Copy::Foreign;
        }
        copy
    }

    /// What `record` is to this subscription, wherever it reads.
    fn what_copy(&self, record: &Record) -> Copy {
        let w = self.worker;
        let reject = |why: &dyn std::fmt::Display| {
            w.plan.metrics.envelope_rejected(&w.plan.name);
            tracing::warn!(
                sequence_number = %record.position(),
                "a record that looks like a retry copy is not one: {why}"
            );
            Copy::No
        };
        let (header, original) = match envelope::unwrap(&*w.plan.envelopes, &record.data) {
            Ok(Some((h, original))) if h.kind == Kind::Retry => (h, original),
            Ok(_) => return Copy::No,
            Err(why @ Rejected::Unauthenticated { .. }) => return self.unbelieved(record, why),
            Err(why) => return reject(&why),
        };
        if *header.subscription != *w.plan.name {
            self.foreign(record, &header.subscription);
            return Copy::Foreign;
        }
        match &w.plan.retry {
            Some(policy) if policy.retry_stream == *w.plan.stream => {
                let at = record.data.len() - original.len();
                Copy::Ours(Box::new(header), at)
            }
            _ => reject(&"it is not on this subscription's retry stream"),
        }
    }

    /// Another subscription's copy: skipped, and named in the log when no subscription of the
    /// host has that name (renamed or removed: nobody here will handle it).
    fn foreign(&self, record: &Record, copy_subscription: &str) {
        let plan = &self.worker.plan;
        if plan.subscriptions.iter().any(|s| **s == *copy_subscription) {
            return;
        }
        plan.metrics.retry_copy_unclaimed(&plan.name);
        tracing::warn!(
            sequence_number = %record.position(), copy_subscription,
            "a retry copy for subscription `{copy_subscription}`, which this host does not run \
             (renamed or removed?), is skipped: no subscription here handles it"
        );
    }

    /// A record that claims to be an envelope and is not authenticated: a retry copy for this
    /// subscription is kept from the handler; another subscription's is skipped (that one
    /// reports it, or nobody here runs it); anything else is an ordinary record.
    fn unbelieved(&self, record: &Record, why: Rejected) -> Copy {
        let Rejected::Unauthenticated { claimed, .. } = &why else {
            return Copy::No;
        };
        if claimed.kind != Kind::Retry {
            // A dead letter is an ordinary record to a subscription, believed or not.
            return Copy::No;
        }
        if *claimed.subscription == *self.worker.plan.name {
            // Only where this subscription's copies are read (under a cap, on its retry stream)
            // is it kept from the handler; elsewhere it is an ordinary record, as an
            // authenticated copy would be there (anyone who can put records must not be able
            // to hold a shard with one).
            let ours = self
                .worker
                .plan
                .retry
                .as_ref()
                .is_some_and(|p| p.retry_stream == *self.worker.plan.stream);
            return if ours {
                Copy::Unauthenticated(why)
            } else {
                Copy::No
            };
        }
        let plan = &self.worker.plan;
        if !plan
            .subscriptions
            .iter()
            .any(|s| **s == *claimed.subscription)
        {
            plan.metrics.envelope_rejected(&plan.name);
            // Anyone may have written it: escaped, so it cannot forge log lines.
            let copy_subscription = claimed.subscription.escape_debug().to_string();
            tracing::warn!(
                sequence_number = %record.position(), key_id = why.key_id().unwrap_or("none"),
                copy_subscription,
                "a retry copy for subscription `{copy_subscription}`, which this host does not \
                 run, is skipped: {why}"
            );
        }
        Copy::Foreign
    }

    /// A copy claiming to be ours that no key of the host authenticates: under a cap it goes to
    /// the dead-letter stream as it was read (so nothing is lost: once the key it was made under
    /// is among `retry_keys_previous`, `dead-letters --replay` puts it back and it is a retry
    /// again); without one it is held. Answers the error for the shard's status.
    pub(super) async fn not_a_copy(&mut self, u: Unbelieved) -> String {
        let w = self.worker;
        w.plan.metrics.envelope_rejected(&w.plan.name);
        let key_id = u.why.key_id().unwrap_or("none").to_owned();
        let error = format!(
            "a retry copy for this subscription that no key of this host authenticates: {}",
            u.why
        );
        let Some(policy) = &w.plan.retry else {
            tracing::error!(
                sequence_number = %u.record.position(), key_id,
                "{error}; it is not given to the handler but held (no retry cap): the shard's \
                 checkpoint waits in front of it"
            );
            self.tracker
                .hold(u.ticket, Outcome::Retry, &u.record.partition_key);
            return error;
        };
        tracing::error!(
            sequence_number = %u.record.position(), key_id,
            "{error}; it is not given to the handler but dead-lettered to `{}` as it was read",
            policy.dead_letter
        );
        let origin = Origin {
            stream: w.plan.stream.to_string(),
            shard_id: w.ctx.shard_id.to_string(),
            sequence_number: u.record.sequence_number.clone(),
            sub_sequence_number: u.record.sub_sequence_number,
            partition_key: u.record.partition_key.to_string(),
        };
        let reason = format!("{error}; the letter holds the copy as it was read");
        self.dead_letter(policy, u.record, u.ticket, 0, origin, (reason, 0))
            .await;
        error
    }
}
