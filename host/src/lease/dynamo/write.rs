//! Conditional writes: every lease write is one UpdateItem whose condition says what the row
//! must be (takeable, unasked, still the caller's), so a writer that lost the row writes nothing.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use super::row::{self, CHECKPOINT, COUNTER, EXPIRY, HANDOFF_TO, KEY, OWNER, SUBSCRIPTION, n, s};
use super::{DynamoLeaseStore, expiry};
use crate::lease::{Checkpoint, Lease, LeaseError, LeaseKey, now_ms};

/// One conditional UpdateItem.
pub(super) struct Write<'a> {
    /// What the write does, for error messages ("renew", "checkpoint", ...).
    what: &'static str,
    update: String,
    condition: String,
    values: Vec<(&'static str, AttributeValue)>,
    key: &'a LeaseKey,
}

/// The condition of acquire ([`Lease::takeable_by`]): the row is free or expired, already the
/// caller's, or released to the caller by a handoff.
pub(super) const TAKEABLE: &str = "(attribute_not_exists(lease_key) OR lease_owner = :me \
                        OR lease_expiry <= :now \
                        OR (attribute_not_exists(lease_owner) \
                            AND (attribute_not_exists(handoff_to) OR handoff_to = :me)))";

/// The condition of a handoff request: the row is as the requester read it, and nobody asked yet.
pub(super) const UNASKED: &str = "lease_owner = :me AND lease_counter = :seen \
                       AND attribute_not_exists(handoff_to)";

/// The condition of renew, checkpoint and release: the row is as the caller last saw it.
pub(super) const HELD: &str = "lease_owner = :me AND lease_counter = :seen";

impl DynamoLeaseStore {
    /// Sends one conditional UpdateItem; `None` when its condition failed.
    pub(super) async fn write(&self, w: Write<'_>) -> Result<Option<Lease>, LeaseError> {
        let name = w.key.to_string();
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(name.as_str()))
            .update_expression(w.update)
            .condition_expression(w.condition)
            .return_values(ReturnValue::AllNew);
        for (placeholder, value) in w.values {
            request = request.expression_attribute_values(placeholder, value);
        }
        match request.send().await {
            Ok(out) => {
                let item = out.attributes().ok_or_else(|| {
                    LeaseError::Store(format!(
                        "{} `{name}` in lease table `{}`: the answer holds no row",
                        w.what, self.table
                    ))
                })?;
                let lease = row::lease(&self.table, w.key, item)?;
                self.note(Some(&lease));
                Ok(Some(lease))
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(None)
            }
            Err(e) => Err(self.sdk_error(w.what, &name, e)),
        }
    }

    /// Takes the row for `owner` if it is takeable; with `adopt`, also writes that checkpoint,
    /// on the condition that the row has none yet.
    pub(super) async fn take(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
        adopt: Option<&Checkpoint>,
    ) -> Result<Option<Lease>, LeaseError> {
        let now = now_ms();
        let mut update = format!(
            "SET {OWNER} = :me, {EXPIRY} = :expiry, \
             {COUNTER} = if_not_exists({COUNTER}, :zero) + :one"
        );
        let mut values = vec![
            (":me", s(owner)),
            (":now", n(now)),
            (":expiry", n(expiry(now, ttl))),
            (":zero", n(0)),
            (":one", n(1)),
        ];
        let mut condition = TAKEABLE.to_owned();
        if let Some(subscription) = &key.subscription {
            // The row is the subscription's, or nobody's yet: never another subscription's.
            update.push_str(&format!(", {SUBSCRIPTION} = :sub"));
            values.push((":sub", s(subscription)));
            condition.push_str(&format!(
                " AND (attribute_not_exists({SUBSCRIPTION}) OR {SUBSCRIPTION} = :sub)"
            ));
        }
        if let Some(checkpoint) = adopt {
            update.push_str(&format!(", {CHECKPOINT} = :legacy"));
            values.push((":legacy", s(checkpoint.to_stored())));
            condition.push_str(&format!(" AND attribute_not_exists({CHECKPOINT})"));
        }
        update.push_str(&format!(" REMOVE {HANDOFF_TO}"));
        self.write(Write {
            what: "acquire",
            update,
            condition,
            values,
            key,
        })
        .await
    }

    /// Takes the row starting from the checkpoint of another row, `from` (an earlier-version
    /// row, or the shared row the subscription read through before it had rows of its own).
    pub(super) async fn adopt(
        &self,
        key: &LeaseKey,
        owner: &str,
        ttl: Duration,
        checkpoint: &Checkpoint,
        from: &str,
    ) -> Result<Option<Lease>, LeaseError> {
        if let Some(lease) = self.take(key, owner, ttl, Some(checkpoint)).await? {
            tracing::info!(
                table = %self.table,
                key = %key,
                checkpoint = %checkpoint,
                "adopted the checkpoint of {from}"
            );
            return Ok(Some(lease));
        }
        // Held by another owner, or the row got a checkpoint of its own meanwhile (which wins).
        match self.get(key).await? {
            Some(row) if row.checkpoint.is_some() => self.take(key, owner, ttl, None).await,
            _ => Ok(None),
        }
    }

    /// A write on a held lease, conditional on its owner and counter as the caller saw them.
    /// `shows` tells whether a row shows this write applied (see [`Self::applied_before`]).
    pub(super) async fn guarded(
        &self,
        lease: &Lease,
        what: &'static str,
        set: &str,
        values: Vec<(&'static str, AttributeValue)>,
        shows: Shows<'_>,
    ) -> Result<Lease, LeaseError> {
        let update = format!("{set}, {COUNTER} = {COUNTER} + :one");
        self.conditional(lease, what, update, HELD, values, Some(shows))
            .await
    }

    /// A write on a row as the caller last saw it (owner and counter in `condition`). With
    /// `shows`, the write bumps the counter, and a failed condition is looked into.
    pub(super) async fn conditional(
        &self,
        lease: &Lease,
        what: &'static str,
        update: String,
        condition: &str,
        mut values: Vec<(&'static str, AttributeValue)>,
        shows: Option<Shows<'_>>,
    ) -> Result<Lease, LeaseError> {
        let lost = || LeaseError::Lost {
            key: lease.key.clone(),
            owner: lease.owner.clone().unwrap_or_default(),
        };
        let owner = lease.owner.as_deref().ok_or_else(lost)?;
        values.extend([(":me", s(owner)), (":seen", n(lease.counter))]);
        if update.contains(":one") {
            values.push((":one", n(1)));
        }
        let write = Write {
            what,
            update,
            condition: condition.to_owned(),
            values,
            key: &lease.key,
        };
        match (self.write(write).await?, shows) {
            (Some(written), _) => Ok(written),
            (None, Some(shows)) => self
                .applied_before(lease, what, shows)
                .await?
                .ok_or_else(lost),
            (None, None) => Err(lost()),
        }
    }

    /// A write whose condition failed may have failed on itself: the SDK sends a write again
    /// when an attempt's answer does not come in time, and when the first attempt was applied
    /// the second finds the counter moved. The row then shows exactly that write: the counter
    /// one past what the caller saw, and what the write set (`shows`; an expiry is the
    /// millisecond the writer computed, a checkpoint its own). Answers that row.
    async fn applied_before(
        &self,
        lease: &Lease,
        what: &'static str,
        shows: Shows<'_>,
    ) -> Result<Option<Lease>, LeaseError> {
        let row = self.get(&lease.key).await?;
        let ours = row.filter(|r| r.counter == lease.counter.saturating_add(1) && shows(r));
        if ours.is_some() {
            tracing::info!(lease = %lease.key, "{what}: an earlier attempt was applied although its answer was lost; going on with it");
            self.note(ours.as_ref());
        }
        Ok(ours)
    }
}

/// Whether a row shows a write applied (its owner and what it set).
pub(super) type Shows<'a> = &'a (dyn Fn(&Lease) -> bool + Send + Sync);
