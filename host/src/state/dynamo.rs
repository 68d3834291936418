//! The DynamoDB store: one item per key in a table keyed by `key` (S), shared by every
//! instance of a fleet. An item holds `value` (B) or, for a counter, `count` (N), and `expires`
//! (N, seconds since the epoch) when the grant has a `ttl`: DynamoDB's TTL deletes expired items
//! (within days), and until then every read and condition here treats them as absent.
//!
//! Reads are strongly consistent: "once" needs a read to see the write before it. Conditional
//! writes are DynamoDB condition expressions; `get-many` is BatchGetItem (100 keys a request),
//! `set-many` and `delete-many` BatchWriteItem (25 a request), sent concurrently within the
//! grant's `max_in_flight`, unprocessed keys sent again until the call's deadline.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, KeysAndAttributes, PutRequest, WriteRequest,
};
use tokio::sync::{OnceCell, Semaphore};

use super::{Meter, StateStore, StoreError, counter_of, counter_text, now_secs};
use crate::config::{StateGrant, StateStoreKind};

/// Keys of one BatchGetItem, items of one BatchWriteItem: DynamoDB's limits.
const GET_BATCH: usize = 100;
const WRITE_BATCH: usize = 25;

/// Attribute names, always through expression names (`key` is a reserved word).
const KEY: &str = "key";
const VALUE: &str = "value";
const COUNT: &str = "count";
const EXPIRES: &str = "expires";

/// The expression names every request uses.
fn names() -> HashMap<String, String> {
    [("#k", KEY), ("#v", VALUE), ("#c", COUNT), ("#e", EXPIRES)]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

/// "The item is live": no expiry, or one still ahead.
const LIVE: &str = "(attribute_not_exists(#e) OR #e > :now)";

pub struct DynamoStore {
    table: String,
    endpoint: Option<String>,
    region: Option<String>,
    test_credentials: bool,
    ttl: Option<Duration>,
    client: OnceCell<Client>,
    permits: Semaphore,
}

impl DynamoStore {
    pub fn new(grant: &StateGrant) -> DynamoStore {
        let StateStoreKind::Dynamo {
            table,
            endpoint,
            region,
            test_credentials,
        } = &grant.store
        else {
            unreachable!("a DynamoDB store of a memory grant")
        };
        DynamoStore {
            table: table.clone(),
            endpoint: endpoint.clone(),
            region: region.clone(),
            test_credentials: *test_credentials,
            ttl: grant.ttl,
            client: OnceCell::new(),
            permits: Semaphore::new(grant.max_in_flight as usize),
        }
    }

    /// The client, made on first use. Few retries and short timeouts: the call's deadline
    /// bounds everything, and an error the guest sees in time (it answers retry-after) is
    /// better than a call that times out.
    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let endpoint = crate::aws::Endpoint {
                    url: self.endpoint.as_deref(),
                    region: self.region.as_deref(),
                    test_credentials: self.test_credentials,
                };
                let sdk = crate::aws::sdk_config(
                    &endpoint,
                    RetryConfig::standard()
                        .with_max_attempts(3)
                        .with_initial_backoff(Duration::from_millis(50))
                        .with_max_backoff(Duration::from_millis(500)),
                    TimeoutConfig::builder()
                        .connect_timeout(Duration::from_secs(2))
                        .operation_attempt_timeout(Duration::from_secs(3))
                        .build(),
                )
                .await;
                Client::new(&sdk)
            })
            .await
    }

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
                && *k.key_type() == aws_sdk_dynamodb::types::KeyType::Hash)
                && description.attribute_definitions().iter().any(|d| {
                    d.attribute_name() == KEY
                        && *d.attribute_type() == aws_sdk_dynamodb::types::ScalarAttributeType::S
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
            use aws_sdk_dynamodb::types::TableStatus;
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

    /// One request's permit (the grant's `max_in_flight`) and its count.
    async fn permit(&self, m: &Meter) -> tokio::sync::SemaphorePermit<'_> {
        m.request();
        self.permits
            .acquire()
            .await
            .expect("the semaphore is never closed")
    }

    fn key(key: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([(KEY.to_owned(), s(key))])
    }

    /// A whole item holding `value`, with the grant's expiry.
    fn item(&self, key: &str, value: Vec<u8>) -> HashMap<String, AttributeValue> {
        let mut item = Self::key(key);
        item.insert(VALUE.to_owned(), AttributeValue::B(Blob::new(value)));
        if let Some(expires) = self.expires() {
            item.insert(EXPIRES.to_owned(), n(expires));
        }
        item
    }

    fn expires(&self) -> Option<u64> {
        self.ttl.map(|ttl| now_secs() + ttl.as_secs().max(1))
    }

    fn error<E, R>(&self, e: SdkError<E, R>) -> StoreError
    where
        E: std::error::Error + ProvideErrorMetadata + 'static,
        R: std::fmt::Debug,
    {
        let table = self.table.clone();
        let message = |e: &SdkError<E, R>| match e.as_service_error() {
            Some(s) => format!(
                "{}: {}",
                s.code().unwrap_or("error"),
                s.message().unwrap_or("")
            ),
            None => DisplayErrorContext(e).to_string(),
        };
        match &e {
            SdkError::ServiceError(_) => match e.code() {
                Some("ResourceNotFoundException") => StoreError::NoTable { table },
                Some(
                    "ProvisionedThroughputExceededException"
                    | "ThrottlingException"
                    | "RequestLimitExceeded",
                ) => StoreError::Throttled {
                    table,
                    message: message(&e),
                },
                Some(
                    "AccessDeniedException"
                    | "UnrecognizedClientException"
                    | "MissingAuthenticationTokenException",
                ) => StoreError::Denied {
                    table,
                    message: message(&e),
                },
                _ => StoreError::Other {
                    table,
                    message: message(&e),
                },
            },
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => StoreError::Unreachable {
                table,
                message: message(&e),
            },
            _ => StoreError::Other {
                table,
                message: message(&e),
            },
        }
    }

    /// The value of a live item, as `get` reads it.
    fn read(item: &HashMap<String, AttributeValue>, now: u64) -> Option<Vec<u8>> {
        let expired = item
            .get(EXPIRES)
            .and_then(|e| e.as_n().ok())
            .and_then(|e| e.parse::<u64>().ok())
            .is_some_and(|e| e <= now);
        if expired {
            return None;
        }
        if let Some(Ok(b)) = item.get(VALUE).map(|v| v.as_b()) {
            return Some(b.as_ref().to_vec());
        }
        let count = item.get(COUNT)?.as_n().ok()?.parse::<u64>().ok()?;
        Some(counter_text(count))
    }

    /// Sends one conditional put; whether its condition held.
    async fn put_if(
        &self,
        m: &Meter,
        key: &str,
        value: Vec<u8>,
        condition: &str,
        values: HashMap<String, AttributeValue>,
    ) -> Result<bool, StoreError> {
        let _permit = self.permit(m).await;
        let names: HashMap<_, _> = names()
            .into_iter()
            .filter(|(k, _)| condition.contains(k.as_str()))
            .collect();
        let sent = self
            .client()
            .await
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.item(key, value)))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
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

    async fn get_item(
        &self,
        m: &Meter,
        key: &str,
    ) -> Result<Option<HashMap<String, AttributeValue>>, StoreError> {
        let _permit = self.permit(m).await;
        let out = self
            .client()
            .await
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.error(e))?;
        Ok(out.item)
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

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

#[async_trait]
impl StateStore for DynamoStore {
    async fn get(&self, m: &Meter, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let item = self.get_item(m, key).await?;
        Ok(item.and_then(|i| Self::read(&i, now_secs())))
    }

    async fn set(&self, m: &Meter, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        let _permit = self.permit(m).await;
        self.client()
            .await
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.item(key, value)))
            .send()
            .await
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    async fn delete(&self, m: &Meter, key: &str) -> Result<(), StoreError> {
        let _permit = self.permit(m).await;
        self.client()
            .await
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(key)))
            .send()
            .await
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// ADD to a live counter (or to nothing) in one conditional update; an expired item is
    /// replaced by a fresh counter on the condition that it is still the one read.
    async fn increment(&self, m: &Meter, key: &str, delta: u64) -> Result<u64, StoreError> {
        for _ in 0..4 {
            let now = now_secs();
            let mut update = "ADD #c :d".to_owned();
            let mut values =
                HashMap::from([(":d".to_owned(), n(delta)), (":now".to_owned(), n(now))]);
            if let Some(expires) = self.expires() {
                update.push_str(" SET #e = :e");
                values.insert(":e".to_owned(), n(expires));
            }
            let sent = {
                let _permit = self.permit(m).await;
                self.client()
                    .await
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(Self::key(key)))
                    .update_expression(update)
                    .condition_expression(format!(
                        "attribute_not_exists(#k) OR (attribute_not_exists(#v) AND {LIVE})"
                    ))
                    .set_expression_attribute_names(Some(names()))
                    .set_expression_attribute_values(Some(values))
                    .return_values(aws_sdk_dynamodb::types::ReturnValue::UpdatedNew)
                    .send()
                    .await
            };
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
                    return count.parse::<u64>().map_err(|_| StoreError::Overflow);
                }
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_conditional_check_failed_exception()) => {}
                Err(e) => return Err(self.error(e)),
            }
            // A value `set` wrote, or an expired item: which?
            let Some(item) = self.get_item(m, key).await? else {
                continue;
            };
            if Self::read(&item, now_secs()).is_some() {
                return Err(StoreError::NotACounter);
            }
            // Expired: start again from `delta`, if nobody changed it meanwhile.
            let expires = item.get(EXPIRES).cloned().unwrap_or_else(|| n(0));
            let mut fresh = Self::key(key);
            fresh.insert(COUNT.to_owned(), n(delta));
            if let Some(e) = self.expires() {
                fresh.insert(EXPIRES.to_owned(), n(e));
            }
            let sent = {
                let _permit = self.permit(m).await;
                self.client()
                    .await
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(fresh))
                    .condition_expression("#e = :old")
                    .expression_attribute_names("#e", EXPIRES)
                    .expression_attribute_values(":old", expires)
                    .send()
                    .await
            };
            match sent {
                Ok(_) => return Ok(delta),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_conditional_check_failed_exception()) => {}
                Err(e) => return Err(self.error(e)),
            }
        }
        Err(StoreError::Other {
            table: self.table.clone(),
            message: "the counter kept changing under the increment".to_owned(),
        })
    }

    async fn set_if_absent(
        &self,
        m: &Meter,
        key: &str,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        let values = HashMap::from([(":now".to_owned(), n(now_secs()))]);
        self.put_if(
            m,
            key,
            value,
            "attribute_not_exists(#k) OR #e <= :now",
            values,
        )
        .await
    }

    async fn compare_and_set(
        &self,
        m: &Meter,
        key: &str,
        expected: &[u8],
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        let mut values = HashMap::from([
            (":now".to_owned(), n(now_secs())),
            (":x".to_owned(), AttributeValue::B(Blob::new(expected))),
        ]);
        let condition = match counter_of(expected) {
            Some(count) => {
                values.insert(":n".to_owned(), n(count));
                format!("(#v = :x OR #c = :n) AND {LIVE}")
            }
            None => format!("#v = :x AND {LIVE}"),
        };
        self.put_if(m, key, value, &condition, values).await
    }

    async fn get_many(
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

    async fn set_many(&self, m: &Meter, entries: Vec<(String, Vec<u8>)>) -> Result<(), StoreError> {
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

    async fn delete_many(&self, m: &Meter, keys: &[String]) -> Result<(), StoreError> {
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

    async fn list_keys(
        &self,
        _: &Meter,
        _prefix: &str,
        _cursor: Option<u64>,
    ) -> Result<(Vec<String>, Option<u64>), StoreError> {
        Err(StoreError::Unsupported(
            "list-keys is not offered by the dynamodb state store: listing a subscription's \
             keys would scan the whole table; keep an index of the keys you need under a key \
             of your own",
        ))
    }
}
