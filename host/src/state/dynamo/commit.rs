//! State committed with the checkpoint, in DynamoDB: versioned reads, and the items a commit
//! adds to the lease row's checkpoint transaction. Each written item gets `ver` one higher; a
//! key that was read first is written only if it still holds the version read (or, read as
//! absent, is still absent or expired).

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem, Update};

use super::DynamoStore;
use super::item::{COUNT, EXPIRES, KEY, VALUE, VERSION, WRITER, n};
use crate::state::commit::{CommitWrite, Held, Seen, Versioned};
use crate::state::{Meter, StoreError, now_secs};

impl DynamoStore {
    /// What `key` holds, with its version (0 for an item no commit wrote).
    pub(super) async fn versioned(&self, m: &Meter, key: &str) -> Result<Versioned, StoreError> {
        let absent = Versioned {
            held: Held::Absent,
            seen: Seen::Absent,
        };
        let Some(item) = self.get_item(m, key).await? else {
            return Ok(absent);
        };
        let number = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if number(EXPIRES).is_some_and(|e| e <= now_secs()) {
            return Ok(absent);
        }
        let held = if let Some(Ok(b)) = item.get(VALUE).map(|v| v.as_b()) {
            Held::Bytes(b.as_ref().to_vec())
        } else if let Some(count) = number(COUNT) {
            Held::Counter(count)
        } else {
            return Ok(absent);
        };
        Ok(Versioned {
            held,
            seen: Seen::Version(number(VERSION).unwrap_or(0)),
        })
    }

    /// One write of a commit as a transaction item.
    pub(super) fn commit_item(&self, w: &CommitWrite) -> TransactWriteItem {
        let mut names: HashMap<String, String> = HashMap::new();
        let mut values: HashMap<String, AttributeValue> = HashMap::new();
        let mut name = |alias: &str, attribute: &str| {
            names.insert(alias.to_owned(), attribute.to_owned());
        };
        let condition = match w.expect {
            None => None,
            Some(Seen::Absent) => {
                name("#k", KEY);
                name("#e", EXPIRES);
                values.insert(":now".into(), n(now_secs()));
                Some("attribute_not_exists(#k) OR #e <= :now".to_owned())
            }
            Some(Seen::Version(0)) => {
                name("#k", KEY);
                name("#ver", VERSION);
                Some("attribute_exists(#k) AND attribute_not_exists(#ver)".to_owned())
            }
            Some(Seen::Version(v)) => {
                name("#ver", VERSION);
                values.insert(":ver".into(), n(v));
                Some("#ver = :ver".to_owned())
            }
        };
        let key = Self::key(&w.key);
        if w.to == Held::Absent {
            let delete = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key))
                .set_condition_expression(condition)
                .set_expression_attribute_names((!names.is_empty()).then_some(names))
                .set_expression_attribute_values((!values.is_empty()).then_some(values))
                .build()
                .expect("a delete has its table and key");
            return TransactWriteItem::builder().delete(delete).build();
        }
        let (set, remove) = match &w.to {
            Held::Bytes(b) => {
                values.insert(":val".into(), AttributeValue::B(Blob::new(b.clone())));
                ("#v", "#c")
            }
            Held::Counter(c) => {
                values.insert(":val".into(), n(*c));
                ("#c", "#v")
            }
            Held::Absent => unreachable!("a delete is made above"),
        };
        name("#v", VALUE);
        name("#c", COUNT);
        name("#ver", VERSION);
        name("#w", WRITER);
        name("#e", EXPIRES);
        values.insert(":one".into(), n(1));
        let expiry = match self.expires() {
            Some(at) => {
                values.insert(":exp".into(), n(at));
                format!("SET {set} = :val, #e = :exp REMOVE {remove}, #w")
            }
            None => format!("SET {set} = :val REMOVE {remove}, #w, #e"),
        };
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression(format!("{expiry} ADD #ver :one"))
            .set_condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .expect("an update has its table, key and expression");
        TransactWriteItem::builder().update(update).build()
    }
}
