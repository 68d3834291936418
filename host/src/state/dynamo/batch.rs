//! `get-many` as BatchGetItem (100 keys a request) and `set-many` / `delete-many` as
//! BatchWriteItem (25 a request), the requests of one call sent concurrently within the grant's
//! `max_in_flight` (the first error ends the call), and what DynamoDB leaves unprocessed sent
//! again with a growing pause, until the call's deadline cuts it or nothing has been processed
//! for [`STALLED_ROUNDS`] rounds (throttled). A `get-many` stops once its values pass
//! [`MAX_ANSWER`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, KeysAndAttributes, PutRequest, WriteRequest,
};

use super::{DynamoStore, KEY, VALUE};
use crate::state::{MAX_ANSWER, Meter, STALLED_ROUNDS, StoreError, now_secs};

/// Keys of one BatchGetItem, items of one BatchWriteItem: DynamoDB's limits.
const GET_BATCH: usize = 100;
const WRITE_BATCH: usize = 25;

/// The rounds of one batch request: a growing pause between them, and a throttle error after
/// [`STALLED_ROUNDS`] in a row in which DynamoDB processed nothing.
struct Rounds<'a> {
    table: &'a str,
    backoff: Duration,
    stalled: u32,
}

impl<'a> Rounds<'a> {
    fn new(table: &'a str) -> Rounds<'a> {
        Rounds {
            table,
            backoff: Duration::from_millis(10),
            stalled: 0,
        }
    }

    /// Waits before the next round; `progressed`: the last round processed something.
    async fn wait(&mut self, progressed: bool) -> Result<(), StoreError> {
        self.stalled = if progressed { 0 } else { self.stalled + 1 };
        if self.stalled >= STALLED_ROUNDS {
            return Err(StoreError::Throttled {
                table: self.table.to_owned(),
                message: format!("{STALLED_ROUNDS} rounds in a row left every key unprocessed"),
            });
        }
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(Duration::from_millis(500));
        Ok(())
    }
}

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
        // The values fetched so far, over every chunk: past the answer's bound, stop.
        let fetched = AtomicUsize::new(0);
        let fetched = &fetched;
        let chunks = unique
            .chunks(GET_BATCH)
            .map(|chunk| self.get_chunk(m, chunk, fetched));
        let now = now_secs();
        let mut values: HashMap<String, Vec<u8>> = HashMap::new();
        for items in futures_util::future::try_join_all(chunks).await? {
            for item in items {
                let Some(Ok(key)) = item.get(KEY).map(|k| k.as_s()) else {
                    continue;
                };
                if let Some(value) = Self::read(&item, now) {
                    values.insert(key.clone(), value);
                }
            }
        }
        // A key asked twice is answered twice: count the answer as the guest gets it.
        let answer: usize = keys
            .iter()
            .filter_map(|k| values.get(k))
            .map(Vec::len)
            .sum();
        if answer > MAX_ANSWER {
            return Err(StoreError::AnswerTooLarge);
        }
        Ok(keys.iter().map(|k| values.get(k).cloned()).collect())
    }

    /// One BatchGetItem's keys, asked again for what DynamoDB leaves unprocessed.
    async fn get_chunk(
        &self,
        m: &Meter,
        chunk: &[&String],
        fetched: &AtomicUsize,
    ) -> Result<Vec<HashMap<String, AttributeValue>>, StoreError> {
        let mut pending: Vec<HashMap<String, AttributeValue>> =
            chunk.iter().map(|k| Self::key(k)).collect();
        let mut found = Vec::new();
        let mut rounds = Rounds::new(&self.table);
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
            let got = out
                .responses
                .and_then(|mut r| r.remove(&self.table))
                .unwrap_or_default();
            let bytes: usize = got
                .iter()
                .filter_map(|i| i.get(VALUE)?.as_b().ok())
                .map(|b| b.as_ref().len())
                .sum();
            if fetched.fetch_add(bytes, Ordering::Relaxed) + bytes > MAX_ANSWER {
                return Err(StoreError::AnswerTooLarge);
            }
            let progressed = !got.is_empty();
            found.extend(got);
            pending = out
                .unprocessed_keys
                .and_then(|mut u| u.remove(&self.table))
                .map(|k| k.keys)
                .unwrap_or_default();
            if !pending.is_empty() {
                rounds.wait(progressed).await?;
            }
        }
        Ok(found)
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
            let mut rounds = Rounds::new(&self.table);
            while !pending.is_empty() {
                let sent = pending.len();
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
                    rounds.wait(pending.len() < sent).await?;
                }
            }
            Ok::<(), StoreError>(())
        });
        futures_util::future::try_join_all(chunks).await?;
        Ok(())
    }
}
