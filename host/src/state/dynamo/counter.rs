//! `increment`: one conditional `ADD` on a live counter (or on nothing); an expired item is
//! replaced by a fresh counter, on the condition that it is still the one read.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use super::{COUNT, DynamoStore, EXPIRES, LIVE, VALUE, n, names};
use crate::state::{Meter, StoreError, now_secs};

/// Rounds before an increment gives up on a counter that keeps changing under it.
const ROUNDS: usize = 4;

impl DynamoStore {
    pub(super) async fn add(&self, m: &Meter, key: &str, delta: u64) -> Result<u64, StoreError> {
        for _ in 0..ROUNDS {
            if let Some(count) = self.add_to_live(m, key, delta).await? {
                return Ok(count);
            }
            // A value `set` wrote, a counter the delta would overflow, or an expired item?
            let Some(item) = self.get_item(m, key).await? else {
                continue; // deleted meanwhile: add again
            };
            if Self::read(&item, now_secs()).is_some() {
                if item.contains_key(VALUE) {
                    return Err(StoreError::NotACounter);
                }
                if item.contains_key(COUNT) {
                    return Err(StoreError::Overflow);
                }
                continue; // changed meanwhile: add again
            }
            let expired = item.get(EXPIRES).cloned().unwrap_or_else(|| n(0));
            if self.restart(m, key, delta, expired).await? {
                return Ok(delta);
            }
        }
        Err(StoreError::Other {
            table: self.table.clone(),
            message: "the counter kept changing under the increment".to_owned(),
        })
    }

    /// `ADD` where the key holds a live counter the delta does not overflow, or nothing;
    /// `None`: it holds something else. Sent once: the SDK would send an `ADD` that DynamoDB
    /// applied before an error (a dropped connection, a 500) again, counting it twice.
    async fn add_to_live(
        &self,
        m: &Meter,
        key: &str,
        delta: u64,
    ) -> Result<Option<u64>, StoreError> {
        let mut update = "ADD #c :d".to_owned();
        let mut values = HashMap::from([
            (":d".to_owned(), n(delta)),
            (":now".to_owned(), n(now_secs())),
            (":lim".to_owned(), n(u64::MAX - delta)),
        ]);
        match self.expires() {
            Some(expires) => {
                update.push_str(" SET #e = :e");
                values.insert(":e".to_owned(), n(expires));
            }
            // A counter written under an earlier `ttl` lasts now.
            None => update.push_str(" REMOVE #e"),
        }
        let _permit = self.permit(m).await;
        let sent = self
            .client()
            .await
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(key)))
            .update_expression(update)
            .condition_expression(format!(
                "attribute_not_exists(#k) OR (attribute_not_exists(#v) AND {LIVE} \
                 AND (attribute_not_exists(#c) OR #c <= :lim))"
            ))
            .set_expression_attribute_names(Some(names()))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::UpdatedNew)
            .customize()
            .config_override(
                aws_sdk_dynamodb::config::Builder::default()
                    .retry_config(aws_config::retry::RetryConfig::disabled()),
            )
            .send()
            .await;
        match sent {
            Ok(out) => {
                let count = out
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get(COUNT))
                    .and_then(|c| c.as_n().ok())
                    .ok_or_else(|| StoreError::Other {
                        table: self.table.clone(),
                        message: "an increment's answer holds no count".to_owned(),
                    })?;
                count
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| StoreError::Overflow)
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(None)
            }
            Err(e) => Err(self.error(e)),
        }
    }

    /// Replaces the expired item at `key` (its `expires` was `expired`) by a counter of
    /// `delta`; whether it was still that item.
    async fn restart(
        &self,
        m: &Meter,
        key: &str,
        delta: u64,
        expired: AttributeValue,
    ) -> Result<bool, StoreError> {
        let mut fresh = Self::key(key);
        fresh.insert(COUNT.to_owned(), n(delta));
        if let Some(e) = self.expires() {
            fresh.insert(EXPIRES.to_owned(), n(e));
        }
        let _permit = self.permit(m).await;
        let sent = self
            .client()
            .await
            .put_item()
            .table_name(&self.table)
            .set_item(Some(fresh))
            .condition_expression("#e = :old")
            .expression_attribute_names("#e", EXPIRES)
            .expression_attribute_values(":old", expired)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(e) => Err(self.error(e)),
        }
    }
}
