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
use aws_sdk_dynamodb::types::AttributeValue;
use tokio::sync::{OnceCell, Semaphore};

mod batch;
mod commit;
mod counter;
mod item;
mod table;

use item::{COUNT, EXPIRES, KEY, LIVE, VALUE, WRITER, n, names, s, write_token};

use super::{Meter, StateStore, StoreError, counter_of, counter_text, now_secs};
use super::{StateGrant, StateStoreKind};

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
    /// The store of `grant`, with the grant's `max_in_flight` permits.
    pub fn new(grant: &StateGrant) -> DynamoStore {
        DynamoStore::with_permits(grant, grant.max_in_flight as usize)
    }

    /// The store of `grant` with `permits` requests in flight at most, its own.
    pub fn with_permits(grant: &StateGrant, permits: usize) -> DynamoStore {
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
            permits: Semaphore::new(permits.max(1)),
        }
    }

    /// The client, made on first use. Few retries and short timeouts: the call's deadline
    /// bounds everything, and an error the guest sees in time (it answers retry-after) is
    /// better than a call that times out.
    async fn client(&self) -> &Client {
        self.client
            .get_or_init(|| async {
                let endpoint = crate::aws::Endpoint {
                    ca_pem: None,
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

    /// The expiry of an item written now: never earlier than `ttl` from now (the clock is read
    /// in whole seconds, so a second is added rather than lost).
    fn expires(&self) -> Option<u64> {
        self.ttl.map(|ttl| now_secs() + ttl.as_secs().max(1) + 1)
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
    ///
    /// The SDK sends a request again after an error that may have come after DynamoDB applied
    /// it (a dropped connection, a 500, an attempt timeout); the second attempt then fails its
    /// condition against the first one's write. So the item carries a token of this write
    /// (`writer`), and a failed condition is checked against it: our own write is a success.
    async fn put_if(
        &self,
        m: &Meter,
        key: &str,
        value: Vec<u8>,
        condition: &str,
        values: HashMap<String, AttributeValue>,
    ) -> Result<bool, StoreError> {
        let token = write_token();
        let names: HashMap<_, _> = names()
            .into_iter()
            .filter(|(k, _)| condition.contains(k.as_str()))
            .collect();
        let mut item = self.item(key, value);
        item.insert(WRITER.to_owned(), AttributeValue::S(token.clone()));
        let sent = {
            let _permit = self.permit(m).await;
            self.client()
                .await
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(values))
                .send()
                .await
        };
        match sent {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                let now = self.get_item(m, key).await?;
                let ours = now
                    .as_ref()
                    .and_then(|i| i.get(WRITER))
                    .and_then(|w| w.as_s().ok())
                    .is_some_and(|w| *w == token);
                Ok(ours)
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
}

#[async_trait]
impl StateStore for DynamoStore {
    async fn read_versioned(
        &self,
        m: &Meter,
        key: &str,
    ) -> Result<crate::state::commit::Versioned, StoreError> {
        self.versioned(m, key).await
    }

    fn commit_items(
        &self,
        set: &crate::state::commit::CommitSet,
    ) -> Option<Vec<aws_sdk_dynamodb::types::TransactWriteItem>> {
        Some(set.writes.iter().map(|w| self.commit_item(w)).collect())
    }

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

    async fn increment(&self, m: &Meter, key: &str, delta: u64) -> Result<u64, StoreError> {
        self.add(m, key, delta).await
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
        self.batch_get(m, keys).await
    }

    async fn set_many(&self, m: &Meter, entries: Vec<(String, Vec<u8>)>) -> Result<(), StoreError> {
        self.batch_put(m, entries).await
    }

    async fn delete_many(&self, m: &Meter, keys: &[String]) -> Result<(), StoreError> {
        self.batch_delete(m, keys).await
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
