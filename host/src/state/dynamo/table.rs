//! The check at start: the state table exists, is keyed by `key` (S) alone, and is active.

use std::time::Duration;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{KeyType, ScalarAttributeType, TableStatus};

use super::{DynamoStore, KEY};
use crate::state::StoreError;

impl DynamoStore {
    /// Checks at start that the table exists, is usable and is keyed by `key` (S) alone. A
    /// table still being created is waited for (up to a minute); without permission to
    /// describe it the check is skipped (its first use says what is wrong).
    pub async fn check_table(&self) -> Result<(), StoreError> {
        let table = self.table.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let described = self
                .client()
                .await
                .describe_table()
                .table_name(&self.table)
                .send()
                .await;
            let description = match described {
                Ok(out) => out.table,
                Err(e) if e.code() == Some("AccessDeniedException") => {
                    tracing::warn!(
                        table,
                        "cannot check the state table at start: DescribeTable is denied; going on"
                    );
                    return Ok(());
                }
                Err(e) => return Err(self.error(e)),
            };
            let Some(description) = description else {
                return Err(StoreError::Other {
                    table,
                    message: "DescribeTable answered no table".to_owned(),
                });
            };
            let keyed_by_key = matches!(description.key_schema(), [k] if k.attribute_name() == KEY
                && *k.key_type() == KeyType::Hash)
                && description.attribute_definitions().iter().any(|d| {
                    d.attribute_name() == KEY && *d.attribute_type() == ScalarAttributeType::S
                });
            if !keyed_by_key {
                let found: Vec<String> = description
                    .key_schema()
                    .iter()
                    .map(|k| format!("{} ({})", k.attribute_name(), k.key_type().as_str()))
                    .collect();
                return Err(StoreError::Other {
                    table,
                    message: format!(
                        "it is keyed by [{}]; a state table has exactly one string partition \
                         key, `key`, and no sort key",
                        found.join(", ")
                    ),
                });
            }
            match description.table_status() {
                None | Some(TableStatus::Active) | Some(TableStatus::Updating) => return Ok(()),
                Some(TableStatus::Creating) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await
                }
                Some(status) => {
                    return Err(StoreError::Other {
                        table,
                        message: format!("it is {status}, not ACTIVE"),
                    });
                }
            }
        }
    }
}
