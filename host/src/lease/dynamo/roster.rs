//! The fleet's roster: one row per service in the lease table, one attribute per live instance
//! holding its heartbeat (a JSON text the fleet room writes and reads; see `crate::fleet`).
//!
//! | `lease_key`                 | attributes                                              |
//! |-----------------------------|---------------------------------------------------------|
//! | `#shardhost#fleet#SERVICE`  | `instance#OWNER` (S): that instance's last heartbeat      |
//!
//! One row, not a row per instance: reading the whole fleet is one GetItem (a lease table has no
//! index to query and a Scan would read every lease), and instances write their own attribute
//! without touching the others'.

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use super::DynamoLeaseStore;
use super::row::{Item, KEY, s};
use crate::lease::LeaseError;

/// The prefix of an instance's attribute.
const INSTANCE: &str = "instance#";

fn roster_key(service: &str) -> String {
    format!(
        "#shardhost#fleet#{}",
        service.replace('%', "%25").replace('#', "%23")
    )
}

/// Every `(owner, heartbeat)` of a roster row.
fn entries(item: &Item) -> Vec<(String, String)> {
    item.iter()
        .filter_map(|(attr, value)| {
            let owner = attr.strip_prefix(INSTANCE)?;
            let AttributeValue::S(text) = value else {
                return None;
            };
            Some((owner.to_owned(), text.clone()))
        })
        .collect()
}

impl DynamoLeaseStore {
    /// Writes `owner`'s heartbeat; answers every entry of the roster as it is after the write.
    pub async fn beat(
        &self,
        service: &str,
        owner: &str,
        heartbeat: &str,
    ) -> Result<Vec<(String, String)>, LeaseError> {
        let key = roster_key(service);
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(key.as_str()))
            .update_expression("SET #me = :beat")
            .expression_attribute_names("#me", format!("{INSTANCE}{owner}"))
            .expression_attribute_values(":beat", s(heartbeat))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| self.sdk_error("write a heartbeat", &key, e))?;
        Ok(out.attributes().map(entries).unwrap_or_default())
    }

    /// Every `(owner, heartbeat)` of `service`'s roster.
    pub async fn roster(&self, service: &str) -> Result<Vec<(String, String)>, LeaseError> {
        let key = roster_key(service);
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(key.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.sdk_error("read the fleet's heartbeats", &key, e))?;
        Ok(out.item().map(entries).unwrap_or_default())
    }

    /// Removes `owner`'s entry, if it is still `heartbeat` (so a live instance that just wrote
    /// a new one keeps it).
    pub async fn forget(
        &self,
        service: &str,
        owner: &str,
        heartbeat: &str,
    ) -> Result<(), LeaseError> {
        let key = roster_key(service);
        let removed = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(key.as_str()))
            .update_expression("REMOVE #it")
            .condition_expression("#it = :seen")
            .expression_attribute_names("#it", format!("{INSTANCE}{owner}"))
            .expression_attribute_values(":seen", s(heartbeat))
            .send()
            .await;
        match removed {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(self.sdk_error("remove a heartbeat", &key, e)),
        }
    }
}
