//! The fleet's desired handler versions and their bytes, in rows of the lease table beside the
//! leases (see `crate::fleet`).
//!
//! | `lease_key`                                         | attributes                          |
//! |-----------------------------------------------------|-------------------------------------|
//! | `#shardhost#desired#SERVICE#SUBSCRIPTION`           | `version` (S, sha256), `generation` (N), `size` (N), `chunks` (N), `deployed_by` (S), `deployed_at` (N, ms), `previous_version` (S), `previous_size` (N), `previous_chunks` (N) |
//! | `#shardhost#component#SERVICE#SUBSCRIPTION#VERSION#I` | `bytes` (B): part `I` of the component |
//!
//! Every key starts with `#`, which no Kinesis stream name or shard id holds, so these rows never
//! meet a lease row (`stream:shard`) or an earlier-version row (a bare shard id). `#` and `%` in
//! a service or subscription name are escaped (`%23`, `%25`), so two names never share a key.

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use super::DynamoLeaseStore;
use super::row::{Item, KEY, n, s};
use crate::lease::LeaseError;

/// The most bytes of a component one row holds: under DynamoDB's 400 KB item limit with room
/// for the key and the attribute name.
pub const CHUNK_BYTES: usize = 350_000;

const VERSION: &str = "version";
const GENERATION: &str = "generation";
const SIZE: &str = "size";
const CHUNKS: &str = "chunks";
const DEPLOYED_BY: &str = "deployed_by";
const DEPLOYED_AT: &str = "deployed_at";
const PREVIOUS_VERSION: &str = "previous_version";
const PREVIOUS_SIZE: &str = "previous_size";
const PREVIOUS_CHUNKS: &str = "previous_chunks";
const BYTES: &str = "bytes";

/// A component stored in the table: its version (sha256 of its bytes) and how it is cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredComponent {
    pub version: String,
    pub size: u64,
    pub chunks: u32,
}

/// What one subscription of one service should run, fleet-wide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub component: StoredComponent,
    /// Grows by one with every deploy and rollback.
    pub generation: u64,
    pub deployed_by: String,
    /// ms since the Unix epoch.
    pub deployed_at_ms: u64,
    /// What ran before (what `--rollback` restores); its bytes are kept.
    pub previous: Option<StoredComponent>,
}

/// Why a desired-state write did not happen.
#[derive(Debug)]
pub enum SetDesired {
    /// Written.
    Done,
    /// Another deploy wrote the row since it was read (the generation moved).
    Conflict,
}

/// `#` and `%` escaped, so `#` separates the parts of a key unambiguously.
fn escape(name: &str) -> String {
    name.replace('%', "%25").replace('#', "%23")
}

fn desired_key(service: &str, subscription: &str) -> String {
    format!(
        "#shardhost#desired#{}#{}",
        escape(service),
        escape(subscription)
    )
}

fn chunk_key(service: &str, subscription: &str, version: &str, i: u32) -> String {
    format!(
        "#shardhost#component#{}#{}#{version}#{i}",
        escape(service),
        escape(subscription)
    )
}

impl DynamoLeaseStore {
    /// The desired row of `subscription` of `service`; `None` before the first fleet deploy.
    pub async fn desired(
        &self,
        service: &str,
        subscription: &str,
    ) -> Result<Option<Desired>, LeaseError> {
        let key = desired_key(service, subscription);
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(key.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.sdk_error("read the desired version", &key, e))?;
        out.item()
            .map(|item| self.parse_desired(&key, item))
            .transpose()
    }

    fn parse_desired(&self, key: &str, item: &Item) -> Result<Desired, LeaseError> {
        let text = |attr: &str| match item.get(attr) {
            Some(AttributeValue::S(v)) => Ok(Some(v.clone())),
            None => Ok(None),
            Some(_) => Err(self.malformed(key, attr, "a string (S)")),
        };
        let number = |attr: &str| match item.get(attr) {
            Some(AttributeValue::N(v)) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| self.malformed(key, attr, "a whole number (N)")),
            None => Ok(None),
            Some(_) => Err(self.malformed(key, attr, "a whole number (N)")),
        };
        let need = |v: Option<u64>, attr: &str| v.ok_or_else(|| self.malformed(key, attr, "N"));
        let component = StoredComponent {
            version: text(VERSION)?.ok_or_else(|| self.malformed(key, VERSION, "S"))?,
            size: need(number(SIZE)?, SIZE)?,
            chunks: need(number(CHUNKS)?, CHUNKS)? as u32,
        };
        let previous = match text(PREVIOUS_VERSION)? {
            Some(version) => Some(StoredComponent {
                version,
                size: need(number(PREVIOUS_SIZE)?, PREVIOUS_SIZE)?,
                chunks: need(number(PREVIOUS_CHUNKS)?, PREVIOUS_CHUNKS)? as u32,
            }),
            None => None,
        };
        Ok(Desired {
            component,
            generation: need(number(GENERATION)?, GENERATION)?,
            deployed_by: text(DEPLOYED_BY)?.unwrap_or_default(),
            deployed_at_ms: number(DEPLOYED_AT)?.unwrap_or(0),
            previous,
        })
    }

    fn malformed(&self, key: &str, attr: &str, expected: &str) -> LeaseError {
        LeaseError::Malformed(format!(
            "lease table `{}`: row `{key}` has a malformed or missing `{attr}`: expected {expected}",
            self.table
        ))
    }

    /// Writes `desired` as the row of `subscription`, on the condition that the row's generation
    /// is still `seen` (`None`: that there is no row yet). `desired.generation` is `seen + 1`.
    pub async fn set_desired(
        &self,
        service: &str,
        subscription: &str,
        desired: &Desired,
        seen: Option<u64>,
    ) -> Result<SetDesired, LeaseError> {
        let key = desired_key(service, subscription);
        let c = &desired.component;
        // Every attribute through a name placeholder: `size`, `bytes` and others are reserved
        // words in DynamoDB expressions.
        let mut names = vec![
            ("#v", VERSION),
            ("#g", GENERATION),
            ("#size", SIZE),
            ("#chunks", CHUNKS),
            ("#by", DEPLOYED_BY),
            ("#at", DEPLOYED_AT),
            ("#pv", PREVIOUS_VERSION),
            ("#ps", PREVIOUS_SIZE),
            ("#pc", PREVIOUS_CHUNKS),
        ];
        let mut values = vec![
            (":v", s(c.version.as_str())),
            (":g", n(desired.generation)),
            (":size", n(c.size)),
            (":chunks", n(u64::from(c.chunks))),
            (":by", s(desired.deployed_by.as_str())),
            (":at", n(desired.deployed_at_ms)),
        ];
        let mut update =
            "SET #v = :v, #g = :g, #size = :size, #chunks = :chunks, #by = :by, #at = :at"
                .to_owned();
        match &desired.previous {
            Some(p) => {
                update.push_str(", #pv = :pv, #ps = :ps, #pc = :pc");
                values.push((":pv", s(p.version.as_str())));
                values.push((":ps", n(p.size)));
                values.push((":pc", n(u64::from(p.chunks))));
            }
            None => update.push_str(" REMOVE #pv, #ps, #pc"),
        }
        let condition = match seen {
            Some(g) => {
                values.push((":seen", n(g)));
                "#g = :seen".to_owned()
            }
            None => {
                names.push(("#key", KEY));
                "attribute_not_exists(#key)".to_owned()
            }
        };
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(key.as_str()))
            .update_expression(update)
            .condition_expression(condition);
        for (placeholder, name) in names {
            request = request.expression_attribute_names(placeholder, name);
        }
        for (placeholder, value) in values {
            request = request.expression_attribute_values(placeholder, value);
        }
        match request.send().await {
            Ok(_) => Ok(SetDesired::Done),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(SetDesired::Conflict)
            }
            Err(e) => Err(self.sdk_error("write the desired version", &key, e)),
        }
    }

    /// Stores `bytes` (whose version is `version`) in rows of at most [`CHUNK_BYTES`].
    pub async fn put_component(
        &self,
        service: &str,
        subscription: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<StoredComponent, LeaseError> {
        let mut chunks = 0;
        for (i, part) in bytes.chunks(CHUNK_BYTES).enumerate() {
            let key = chunk_key(service, subscription, version, i as u32);
            self.client
                .update_item()
                .table_name(&self.table)
                .key(KEY, s(key.as_str()))
                .update_expression("SET #b = :b")
                .expression_attribute_names("#b", BYTES)
                .expression_attribute_values(":b", AttributeValue::B(Blob::new(part)))
                .send()
                .await
                .map_err(|e| self.sdk_error("store a handler component", &key, e))?;
            chunks += 1;
        }
        Ok(StoredComponent {
            version: version.to_owned(),
            size: bytes.len() as u64,
            chunks,
        })
    }

    /// The bytes of a stored component; `None` when a part is missing (a later deploy removed
    /// it) or the parts do not add up to its size.
    pub async fn component(
        &self,
        service: &str,
        subscription: &str,
        stored: &StoredComponent,
    ) -> Result<Option<Vec<u8>>, LeaseError> {
        let mut bytes = Vec::with_capacity(usize::try_from(stored.size).unwrap_or(0));
        for i in 0..stored.chunks {
            let key = chunk_key(service, subscription, &stored.version, i);
            let out = self
                .client
                .get_item()
                .table_name(&self.table)
                .key(KEY, s(key.as_str()))
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| self.sdk_error("read a handler component", &key, e))?;
            match out.item().and_then(|item| item.get(BYTES)) {
                Some(AttributeValue::B(part)) => bytes.extend_from_slice(part.as_ref()),
                _ => return Ok(None),
            }
        }
        Ok((bytes.len() as u64 == stored.size).then_some(bytes))
    }

    /// Removes the rows of a stored component.
    pub async fn delete_component(
        &self,
        service: &str,
        subscription: &str,
        stored: &StoredComponent,
    ) -> Result<(), LeaseError> {
        for i in 0..stored.chunks {
            let key = chunk_key(service, subscription, &stored.version, i);
            self.client
                .delete_item()
                .table_name(&self.table)
                .key(KEY, s(key.as_str()))
                .send()
                .await
                .map_err(|e| self.sdk_error("remove an old handler component", &key, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_the_separator_never_share_a_key() {
        assert_ne!(desired_key("a#b", "c"), desired_key("a", "b#c"));
        assert_ne!(desired_key("a%23", "c"), desired_key("a#", "c"));
        assert!(desired_key("shipping", "ship").starts_with('#'));
        assert_eq!(
            chunk_key("shipping", "ship", "abc", 2),
            "#shardhost#component#shipping#ship#abc#2"
        );
    }
}
