//! A checkpoint written with state in one `TransactWriteItems`: the lease row's update,
//! conditioned on the lease as every checkpoint is, first; the state store's items after it
//! (`state::commit`). Either all of it lands or none.

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use super::DynamoLeaseStore;
use super::row::{CHECKPOINT, COUNTER, KEY, n, s};
use super::write::HELD;
use crate::lease::{Checkpoint, Lease, LeaseError};

/// Why one item of a cancelled transaction failed, as DynamoDB names it.
const CONDITION_FAILED: &str = "ConditionalCheckFailed";

impl DynamoLeaseStore {
    /// Writes `checkpoint` on the held `lease` and `items` in one transaction.
    pub(super) async fn checkpoint_with_items(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
        items: &[TransactWriteItem],
    ) -> Result<Lease, LeaseError> {
        let lost = || LeaseError::Lost {
            key: lease.key.clone(),
            owner: lease.owner.clone().unwrap_or_default(),
        };
        let owner = lease.owner.as_deref().ok_or_else(lost)?;
        let name = lease.key.to_string();
        let row = Update::builder()
            .table_name(&self.table)
            .key(KEY, s(name.as_str()))
            .update_expression(format!(
                "SET {CHECKPOINT} = :checkpoint, {COUNTER} = {COUNTER} + :one"
            ))
            .condition_expression(HELD)
            .expression_attribute_values(":checkpoint", s(checkpoint.to_stored()))
            .expression_attribute_values(":me", s(owner))
            .expression_attribute_values(":seen", n(lease.counter))
            .expression_attribute_values(":one", n(1))
            .build()
            .expect("an update has its table, key and expression");
        let mut all = Vec::with_capacity(items.len() + 1);
        all.push(TransactWriteItem::builder().update(row).build());
        all.extend_from_slice(items);
        let sent = self
            .client
            .transact_write_items()
            .set_transact_items(Some(all))
            .send()
            .await;
        let e = match sent {
            Ok(_) => {
                let written = Lease {
                    counter: lease.counter + 1,
                    checkpoint: Some(checkpoint.clone()),
                    ..lease.clone()
                };
                self.note(Some(&written));
                return Ok(written);
            }
            Err(e) => e,
        };
        let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
            e.as_service_error()
        else {
            return Err(self.sdk_error("checkpoint with state", &name, e));
        };
        let failed: Vec<usize> = cancelled
            .cancellation_reasons()
            .iter()
            .enumerate()
            .filter(|(_, r)| r.code() == Some(CONDITION_FAILED))
            .map(|(i, _)| i)
            .collect();
        match failed.first() {
            // The lease row: lost, unless it shows this very write (an attempt whose answer
            // was lost, sent again by the SDK).
            Some(0) => {
                let row = self.get(&lease.key).await?;
                let ours = row.filter(|r| {
                    r.owner == lease.owner
                        && r.counter == lease.counter.saturating_add(1)
                        && r.checkpoint.as_ref() == Some(checkpoint)
                });
                ours.ok_or_else(lost)
            }
            Some(&i) => Err(LeaseError::StateConflict { index: i - 1 }),
            // Another transaction on the same items, a throttle: nothing written, try again.
            None => Err(LeaseError::Store(format!(
                "checkpoint with state `{name}` in lease table `{}` was cancelled: {}",
                self.table,
                cancelled.message().unwrap_or("no reason given")
            ))),
        }
    }
}
