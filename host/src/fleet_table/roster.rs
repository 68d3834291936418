//! The fleet's roster: one row per instance in the lease table, written only by that instance,
//! holding its last heartbeat (a JSON text the fleet room, `fleet/`, writes and reads).
//!
//! | `lease_key`                           | attributes                                        |
//! |---------------------------------------|---------------------------------------------------|
//! | `#shardhost#instance#SERVICE#OWNER`   | `heartbeat` (S): that instance's last heartbeat; `expires_at` (N, seconds since the Unix epoch): when the row stops counting |
//!
//! A heartbeat is one write of this row (well under 1 KB: one write unit), whatever the size
//! of the fleet. `expires_at` can be the table's TTL attribute, so DynamoDB deletes the rows of
//! crashed instances; readers ignore an expired row either way (TTL deletes late, and dynalite
//! not at all). `#` and `%` in a service or owner name are escaped (`%23`, `%25`), so two names
//! never share a key and one service's prefix never covers another's rows.
//!
//! The table has a partition key only, so the roster is read by a Scan filtered on the key's
//! prefix: it reads (and is billed for) every row of the table, the lease rows and the stored
//! component bytes too, one page of up to 1 MB at a time. It is bounded by [`MAX_PAGES`] and
//! [`MAX_INSTANCES`]; past either it answers what it found and logs a warning. Reads are
//! eventually consistent (half the price of strongly consistent ones): a heartbeat written less
//! than a second ago may be missing, which the next one makes up for.

use aws_sdk_dynamodb::types::{AttributeValue, Select};

use super::FleetTable;
use crate::lease::dynamo_rows::{Item, KEY, n, s};
use crate::lease::{LeaseError, now_ms};

/// The heartbeat's JSON text (S).
const HEARTBEAT: &str = "heartbeat";
/// When the row stops counting (N, seconds since the Unix epoch): the TTL attribute.
const EXPIRES_AT: &str = "expires_at";

/// The most Scan pages (each reads up to 1 MB of the table) one roster read takes.
const MAX_PAGES: u32 = 400;
/// The most instances one roster read answers.
const MAX_INSTANCES: usize = 10_000;

/// `#` and `%` escaped, so `#` separates the parts of a key unambiguously.
fn escape(name: &str) -> String {
    name.replace('%', "%25").replace('#', "%23")
}

/// The prefix of every instance row of `service`.
fn prefix(service: &str) -> String {
    format!("#shardhost#instance#{}#", escape(service))
}

fn instance_key(service: &str, owner: &str) -> String {
    format!("{}{}", prefix(service), escape(owner))
}

/// What one roster read found.
#[derive(Debug, Default)]
pub struct Roster {
    /// Every row not yet expired.
    pub rows: Vec<RosterRow>,
    /// Scan requests sent (pages read).
    pub pages: u32,
}

/// One instance row as read: anyone who can write the table can write one, so its text is
/// checked before it is believed (`fleet/roster.rs`).
#[derive(Debug)]
pub struct RosterRow {
    /// Its `lease_key`.
    pub key: String,
    /// Its heartbeat text; `None` when the row holds none (or not as text).
    pub heartbeat: Option<String>,
}

impl RosterRow {
    /// Whether this is the row `owner` of `service` writes (a row under another key claiming to
    /// be `owner` is not).
    pub fn is_of(&self, service: &str, owner: &str) -> bool {
        self.key == instance_key(service, owner)
    }

    /// What its key says after the service's prefix: the (escaped) owner it was written for.
    pub fn owner_part<'k>(&'k self, service: &str) -> &'k str {
        self.key.strip_prefix(&prefix(service)).unwrap_or(&self.key)
    }
}

impl FleetTable {
    /// Writes `owner`'s heartbeat row, replacing the one before; the row counts until
    /// `expires_at` (seconds since the Unix epoch).
    pub async fn beat(
        &self,
        service: &str,
        owner: &str,
        heartbeat: &str,
        expires_at: u64,
    ) -> Result<(), LeaseError> {
        let key = instance_key(service, owner);
        // An UpdateItem of the whole (small) row costs what a PutItem would, and needs no
        // permission the lease store does not need already.
        self.client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(key.as_str()))
            .update_expression(format!("SET {HEARTBEAT} = :beat, {EXPIRES_AT} = :expires"))
            .expression_attribute_values(":beat", s(heartbeat))
            .expression_attribute_values(":expires", n(expires_at))
            .send()
            .await
            .map_err(|e| self.sdk_error("write a heartbeat", &key, e))?;
        Ok(())
    }

    /// Every heartbeat of `service` whose row has not expired, in no particular order.
    pub async fn roster(&self, service: &str) -> Result<Roster, LeaseError> {
        let prefix = prefix(service);
        let now_s = now_ms() / 1_000;
        let mut roster = Roster::default();
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(format!(
                    "begins_with({KEY}, :prefix) AND {EXPIRES_AT} > :now"
                ))
                .projection_expression("#k, #h")
                .expression_attribute_names("#k", KEY)
                .expression_attribute_names("#h", HEARTBEAT)
                .expression_attribute_values(":prefix", s(prefix.as_str()))
                .expression_attribute_values(":now", n(now_s))
                .select(Select::SpecificAttributes)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.sdk_error("read the fleet's heartbeats", &prefix, e))?;
            roster.pages += 1;
            roster.rows.extend(out.items().iter().map(|item| RosterRow {
                key: match item.get(KEY) {
                    Some(AttributeValue::S(key)) => key.clone(),
                    _ => String::new(),
                },
                heartbeat: match item.get(HEARTBEAT) {
                    Some(AttributeValue::S(text)) => Some(text.clone()),
                    _ => None,
                },
            }));
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(roster);
            }
            if roster.pages >= MAX_PAGES || roster.rows.len() >= MAX_INSTANCES {
                tracing::warn!(
                    table = self.table,
                    pages = roster.pages,
                    instances = roster.rows.len(),
                    "the fleet's roster was read only in part (at most {MAX_PAGES} pages of the \
                     lease table and {MAX_INSTANCES} instances): some instances may be missing"
                );
                roster.rows.truncate(MAX_INSTANCES);
                return Ok(roster);
            }
        }
    }

    /// Removes `owner`'s row, if it still holds `heartbeat` (so a live instance that just wrote
    /// a new one keeps it).
    pub async fn forget(
        &self,
        service: &str,
        owner: &str,
        heartbeat: &str,
    ) -> Result<(), LeaseError> {
        let key = instance_key(service, owner);
        let removed = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(KEY, s(key.as_str()))
            .condition_expression(format!("{HEARTBEAT} = :seen"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_hash_or_percent_never_share_a_key_or_a_prefix() {
        let keys = [
            instance_key("a", "b#c"),
            instance_key("a#b", "c"),
            instance_key("a%23b", "c"),
            instance_key("a", "b%23c"),
        ];
        for (i, k) in keys.iter().enumerate() {
            assert!(keys[i + 1..].iter().all(|other| other != k), "{keys:?}");
        }
        assert!(!instance_key("a#b", "c").starts_with(&prefix("a")));
        assert!(instance_key("a", "b#c").starts_with(&prefix("a")));
        assert_eq!(instance_key("svc", "ip-1"), "#shardhost#instance#svc#ip-1");
    }
}
