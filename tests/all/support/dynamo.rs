//! A plain aws-sdk-dynamodb client for arranging lease-table tests against dynalite (independent
//! of the host's own store): create tables, read and write rows raw.

use std::collections::HashMap;
use std::time::Duration;

use super::wait_until_async;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType,
    ScalarAttributeType, TableStatus,
};

/// One item, as the SDK answers it.
pub type Row = HashMap<String, AttributeValue>;

/// One key of a table: attribute name, HASH or RANGE, attribute type.
pub type KeySpec<'a> = (&'a str, KeyType, ScalarAttributeType);

/// A string attribute value.
pub fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

/// A number attribute value.
pub fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A raw client; use it from async tests.
pub struct Dynamo {
    pub client: Client,
}

impl Dynamo {
    pub fn new(endpoint: &str) -> Dynamo {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(shardhost::testing::http_client())
            .endpoint_url(endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .build();
        Dynamo {
            client: Client::from_conf(config),
        }
    }

    /// Creates a lease table (`lease_key` S, HASH) and waits until it is ACTIVE.
    pub async fn create_lease_table(&self, table: &str) {
        self.create_table(
            table,
            &[("lease_key", KeyType::Hash, ScalarAttributeType::S)],
        )
        .await
    }

    /// Creates a table with this key schema and waits until it is ACTIVE.
    pub async fn create_table(&self, table: &str, keys: &[KeySpec<'_>]) {
        let mut request = self
            .client
            .create_table()
            .table_name(table)
            .billing_mode(BillingMode::PayPerRequest);
        for (name, key_type, ty) in keys {
            request = request
                .attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(*name)
                        .attribute_type(ty.clone())
                        .build()
                        .unwrap(),
                )
                .key_schema(
                    KeySchemaElement::builder()
                        .attribute_name(*name)
                        .key_type(key_type.clone())
                        .build()
                        .unwrap(),
                );
        }
        request.send().await.unwrap();
        let active = async || {
            let out = self
                .client
                .describe_table()
                .table_name(table)
                .send()
                .await
                .unwrap();
            out.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active)
        };
        wait_until_async(
            &format!("table {table} to become ACTIVE"),
            Duration::from_secs(6),
            active,
        )
        .await;
    }

    /// How many items the table holds (a consistent scan).
    pub async fn count(&self, table: &str) -> usize {
        self.rows(table).await.len()
    }

    /// Every row of the table (a consistent scan).
    pub async fn rows(&self, table: &str) -> Vec<Row> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(table)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            rows.extend(out.items().iter().cloned());
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                return rows;
            }
        }
    }

    /// The row keyed `key`, read consistently.
    pub async fn row(&self, table: &str, key: &str) -> Option<Row> {
        self.row_keyed(table, "lease_key", key).await
    }

    /// The item whose partition key `attr` is `key`, read consistently.
    pub async fn row_keyed(&self, table: &str, attr: &str, key: &str) -> Option<Row> {
        self.client
            .get_item()
            .table_name(table)
            .key(attr, s(key))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item()
            .cloned()
    }

    /// Writes a whole row (e.g. an earlier-version row keyed by a bare shard id).
    pub async fn put_row(&self, table: &str, attrs: &[(&str, AttributeValue)]) {
        let mut request = self.client.put_item().table_name(table);
        for (name, value) in attrs {
            request = request.item(*name, value.clone());
        }
        request.send().await.unwrap();
    }

    /// Sets one attribute of the row keyed `key`, unconditionally (as another writer would).
    pub async fn set(&self, table: &str, key: &str, attr: &str, value: AttributeValue) {
        self.client
            .update_item()
            .table_name(table)
            .key("lease_key", s(key))
            .update_expression("SET #a = :v")
            .expression_attribute_names("#a", attr)
            .expression_attribute_values(":v", value)
            .send()
            .await
            .unwrap();
    }
}

impl Dynamo {
    /// Deletes the row keyed `key`, unconditionally (as another writer would).
    pub async fn delete_row(&self, table: &str, key: &str) {
        self.client
            .delete_item()
            .table_name(table)
            .key("lease_key", s(key))
            .send()
            .await
            .unwrap();
    }
}
