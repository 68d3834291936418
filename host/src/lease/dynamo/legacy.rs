//! Earlier-version rows: keyed by the bare shard id, read only through `legacy_stream`.
//!
//! The bare row of a shard is read at most once per store (shardhost never writes bare rows), and
//! only while the `stream:shard` row has no checkpoint of its own.

use aws_sdk_dynamodb::types::AttributeValue;

use super::DynamoLeaseStore;
use super::row::{self, KEY};
use crate::lease::{Checkpoint, LeaseError, LeaseKey, LeaseRows};

/// What an earlier-version row means for a `stream:shard` row without a checkpoint.
pub(super) enum Legacy {
    /// The new row starts from this checkpoint of the bare row.
    Adopt(Checkpoint),
    /// The shard must not be taken: the message says why.
    Refuse(String),
}

impl DynamoLeaseStore {
    /// What the bare row of `key`'s shard means for `key`; `None` when it is to be ignored (no
    /// bare row, no checkpoint in it, or `legacy_stream` names another stream).
    pub(super) async fn legacy(&self, key: &LeaseKey) -> Result<Option<Legacy>, LeaseError> {
        if key.rows != LeaseRows::Stream {
            // A subscription's own rows were never bare: only the shared ones were.
            return Ok(None);
        }
        if let Some(stream) = &self.legacy_stream
            && *stream != key.stream
        {
            return Ok(None);
        }
        let Some(checkpoint) = self.bare_checkpoint(&key.shard_id).await? else {
            return Ok(None);
        };
        Ok(Some(match &self.legacy_stream {
            Some(_) => Legacy::Adopt(checkpoint),
            None => Legacy::Refuse(format!(
                "lease table `{table}` holds an earlier-version row for shard `{shard}` (keyed by \
                 the bare shard id, with checkpoint {checkpoint}), and shardhost cannot tell which \
                 stream it belongs to, so it does not take shard `{shard}` of stream `{stream}`. \
                 If those rows belong to `{stream}`, set `[leases] legacy_stream = \"{stream}\"` \
                 to resume from them",
                table = self.table,
                shard = key.shard_id,
                stream = key.stream,
            )),
        }))
    }

    /// The checkpoint of the bare row `shard`, read once and cached for the life of the store.
    async fn bare_checkpoint(&self, shard: &str) -> Result<Option<Checkpoint>, LeaseError> {
        if let Some(cached) = self
            .bare_rows
            .lock()
            .expect("bare rows poisoned")
            .get(shard)
        {
            return Ok(cached.clone());
        }
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(shard.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.sdk_error("read the earlier-version row", shard, e))?;
        let checkpoint = match out.item() {
            Some(item) => row::checkpoint(&self.table, shard, item)?,
            None => None,
        };
        self.bare_rows
            .lock()
            .expect("bare rows poisoned")
            .insert(shard.to_owned(), checkpoint.clone());
        Ok(checkpoint)
    }
}
