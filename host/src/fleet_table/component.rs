//! The bytes of the fleet's handler components, cut into rows under DynamoDB's item limit.
//!
//! | `lease_key`                                                 | attributes |
//! |-------------------------------------------------------------|------------|
//! | `#shardhost#component#SERVICE#SUBSCRIPTION#VERSION#UPLOAD#I` | `bytes` (B): part `I` |
//!
//! Every upload writes parts of its own (`UPLOAD` is a fresh random id), so two deploys of the
//! same version never write, read or delete each other's parts. Parts written by the first
//! release have no upload id (`…#VERSION#I`); they are still read and removed.

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use super::FleetTable;
use super::desired::{CHUNK_BYTES, StoredComponent, escape};
use crate::lease::LeaseError;
use crate::lease::dynamo_rows::{KEY, s};

const BYTES: &str = "bytes";

fn chunk_key(service: &str, subscription: &str, stored: &StoredComponent, i: u32) -> String {
    let (service, subscription) = (escape(service), escape(subscription));
    let version = &stored.version;
    match &stored.upload {
        Some(upload) => {
            format!("#shardhost#component#{service}#{subscription}#{version}#{upload}#{i}")
        }
        None => format!("#shardhost#component#{service}#{subscription}#{version}#{i}"),
    }
}

/// A new upload id: 128 random bits in hex.
pub fn new_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).expect("the system's random source");
    hex::encode(bytes)
}

impl FleetTable {
    /// Stores `bytes` (whose version is `version`) as a new upload, in rows of at most
    /// [`CHUNK_BYTES`].
    pub async fn put_component(
        &self,
        service: &str,
        subscription: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<StoredComponent, LeaseError> {
        let mut stored = StoredComponent {
            version: version.to_owned(),
            size: bytes.len() as u64,
            chunks: 0,
            upload: Some(new_id()),
        };
        for (i, part) in bytes.chunks(CHUNK_BYTES).enumerate() {
            let key = chunk_key(service, subscription, &stored, i as u32);
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
            stored.chunks += 1;
        }
        Ok(stored)
    }

    /// The bytes of a stored component; `None` when a part is missing (a later deploy removed
    /// it) or the parts do not add up to its size. Never holds more than `stored.size` bytes
    /// (which the caller has checked), whatever the rows hold.
    pub async fn component(
        &self,
        service: &str,
        subscription: &str,
        stored: &StoredComponent,
    ) -> Result<Option<Vec<u8>>, LeaseError> {
        let size = usize::try_from(stored.size).unwrap_or(usize::MAX);
        let mut bytes = Vec::new();
        for i in 0..stored.chunks {
            let key = chunk_key(service, subscription, stored, i);
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
                Some(AttributeValue::B(part)) if part.as_ref().len() <= size - bytes.len() => {
                    bytes.extend_from_slice(part.as_ref())
                }
                _ => return Ok(None),
            }
        }
        Ok((bytes.len() == size).then_some(bytes))
    }

    /// Removes the rows of a stored component.
    pub async fn delete_component(
        &self,
        service: &str,
        subscription: &str,
        stored: &StoredComponent,
    ) -> Result<(), LeaseError> {
        for i in 0..stored.chunks {
            let key = chunk_key(service, subscription, stored, i);
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
    fn uploads_of_one_version_never_share_a_row() {
        let stored = |upload: Option<&str>| StoredComponent {
            version: "abc".into(),
            size: 1,
            chunks: 1,
            upload: upload.map(str::to_owned),
        };
        assert_eq!(
            chunk_key("shipping", "ship", &stored(None), 2),
            "#shardhost#component#shipping#ship#abc#2"
        );
        assert_ne!(
            chunk_key("s", "u", &stored(Some("x1")), 0),
            chunk_key("s", "u", &stored(Some("x2")), 0)
        );
        assert_ne!(new_id(), new_id());
        assert!(super::super::desired::is_id(&new_id()));
    }
}
