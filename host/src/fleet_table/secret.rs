//! The fleet's envelope key, kept in the lease table in a row of its own: made once (random) by
//! whichever instance comes first, read by every other. Its `lease_key` holds a `#`, which no
//! Kinesis stream name or shard id does, so it never meets a lease row (`stream:shard`) or an
//! earlier-version row (a bare shard id).

use aws_sdk_dynamodb::types::ReturnValue;

use super::FleetTable;
use crate::lease::LeaseError;
use crate::lease::dynamo_rows::{KEY, s};

/// The row's key.
pub(super) const ROW: &str = "#shardhost#envelope-key";
/// The key, as 64 hex digits (S).
const ATTR: &str = "envelope_key";

impl FleetTable {
    /// The 32 bytes of the fleet's envelope key, made on first use.
    pub async fn envelope_key(&self) -> Result<[u8; 32], LeaseError> {
        if let Some(key) = self.stored_envelope_key().await? {
            return Ok(key);
        }
        let mut fresh = [0u8; 32];
        getrandom::getrandom(&mut fresh)
            .map_err(|e| LeaseError::Store(format!("cannot make a random key: {e}")))?;
        let made = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(ROW))
            .update_expression(format!("SET {ATTR} = :k"))
            .condition_expression(format!("attribute_not_exists({KEY})"))
            .expression_attribute_values(":k", s(hex::encode(fresh)))
            .return_values(ReturnValue::None)
            .send()
            .await;
        match made {
            Ok(_) => Ok(fresh),
            // Another instance made it first: use theirs.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                self.stored_envelope_key().await?.ok_or_else(|| {
                    LeaseError::Malformed(format!(
                        "lease table `{}`: row `{ROW}` has no `{ATTR}`",
                        self.table
                    ))
                })
            }
            Err(e) => Err(self.sdk_error("make the envelope key", ROW, e)),
        }
    }

    /// The fleet's envelope key when one was made (never makes one).
    pub async fn stored_envelope_key(&self) -> Result<Option<[u8; 32]>, LeaseError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(ROW))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.sdk_error("read the envelope key", ROW, e))?;
        let Some(item) = out.item() else {
            return Ok(None);
        };
        let bad = || {
            LeaseError::Malformed(format!(
                "lease table `{}`: row `{ROW}` has a malformed `{ATTR}`: expected 64 hex digits",
                self.table
            ))
        };
        let text = item.get(ATTR).and_then(|v| v.as_s().ok()).ok_or_else(bad)?;
        let bytes = hex::decode(text).map_err(|_| bad())?;
        <[u8; 32]>::try_from(bytes.as_slice())
            .map(Some)
            .map_err(|_| bad())
    }
}
