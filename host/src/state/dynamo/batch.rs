//! `get-many` as BatchGetItem (100 keys a request) and `set-many` / `delete-many` as
//! BatchWriteItem (25 a request), the requests of one call sent concurrently within the grant's
//! `max_in_flight`, and what DynamoDB leaves unprocessed sent again (with a growing pause) until
//! the call's deadline cuts it.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, KeysAndAttributes, PutRequest, WriteRequest,
};

use super::{DynamoStore, KEY};
use crate::state::{Meter, StoreError, now_secs};

/// Keys of one BatchGetItem, items of one BatchWriteItem: DynamoDB's limits.
const GET_BATCH: usize = 100;
const WRITE_BATCH: usize = 25;

impl DynamoStore {
    pub(super) async fn batch_get(
        &self,
        m: &Meter,
        keys: &[String],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        // BatchGetItem refuses a key asked twice: ask each once.
        let mut unique: Vec<&String> = keys.iter().collect();
        unique.sort();
        unique.dedup();
        let chunks = unique.chunks(GET_BATCH).map(|chunk| async move {
            let mut pending: Vec<HashMap<String, AttributeValue>> =
                chunk.iter().map(|k| Self::key(k)).collect();
            let mut found = Vec::new();
            let mut backoff = Duration::from_millis(10);
            while !pending.is_empty() {
                let ask = KeysAndAttributes::builder()
                    .set_keys(Some(pending))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| StoreError::Other {
                        table: self.table.clone(),
                        message: e.to_string(),
                    })?;
                let out = {
                    let _permit = self.permit(m).await;
                    self.client()
                        .await
                        .batch_get_item()
                        .request_items(self.table.clone(), ask)
                        .send()
                        .await
                        .map_err(|e| self.error(e))?
                };
                if let Some(mut responses) = out.responses {
                    found.extend(responses.remove(&self.table).unwrap_or_default());
                }
                pending = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.table))
                    .map(|k| k.keys)
                    .unwrap_or_default();
                if !pending.is_empty() {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
            }
            Ok::<_, StoreError>(found)
        });
        let now = now_secs();
        let mut values: HashMap<String, Vec<u8>> = HashMap::new();
        for items in futures_util::future::join_all(chunks).await {
            for item in items? {
                let Some(Ok(key)) = item.get(KEY).map(|k| k.as_s()) else {
                    continue;
                };
                if let Some(value) = Self::read(&item, now) {
                    values.insert(key.clone(), value);
                }
            }
        }
        Ok(keys.iter().map(|k| values.get(k).cloned()).collect())
    }

    pub(super) async fn batch_put(
        &self,
        m: &Meter,
        entries: Vec<(String, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        // BatchWriteItem refuses a key written twice in one request: the last value wins.
        let mut last: HashMap<String, Vec<u8>> = HashMap::new();
        let mut order = Vec::new();
        for (key, value) in entries {
            if last.insert(key.clone(), value).is_none() {
                order.push(key);
            }
        }
        let requests = order
            .into_iter()
            .map(|key| {
                let value = last.remove(&key).unwrap_or_default();
                let put = PutRequest::builder()
                    .set_item(Some(self.item(&key, value)))
                    .build()
                    .expect("an item is set");
                WriteRequest::builder().put_request(put).build()
            })
            .collect();
        self.write_all(m, requests).await
    }

    pub(super) async fn batch_delete(&self, m: &Meter, keys: &[String]) -> Result<(), StoreError> {
        let mut unique: Vec<&String> = keys.iter().collect();
        unique.sort();
        unique.dedup();
        let requests = unique
            .into_iter()
            .map(|key| {
                let delete = DeleteRequest::builder()
                    .set_key(Some(Self::key(key)))
                    .build()
                    .expect("a key is set");
                WriteRequest::builder().delete_request(delete).build()
            })
            .collect();
        self.write_all(m, requests).await
    }

    /// Writes `requests` in BatchWriteItem requests of 25, concurrently, again for what
    /// DynamoDB leaves unprocessed.
    async fn write_all(&self, m: &Meter, requests: Vec<WriteRequest>) -> Result<(), StoreError> {
        let chunks = requests.chunks(WRITE_BATCH).map(|chunk| async move {
            let mut pending = chunk.to_vec();
            let mut backoff = Duration::from_millis(10);
            while !pending.is_empty() {
                let out = {
                    let _permit = self.permit(m).await;
                    self.client()
                        .await
                        .batch_write_item()
                        .request_items(self.table.clone(), pending)
                        .send()
                        .await
                        .map_err(|e| self.error(e))?
                };
                pending = out
                    .unprocessed_items
                    .and_then(|mut u| u.remove(&self.table))
                    .unwrap_or_default();
                if !pending.is_empty() {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
            }
            Ok::<(), StoreError>(())
        });
        for result in futures_util::future::join_all(chunks).await {
            result?;
        }
        Ok(())
    }
}
