//! Rows that hold one JSON document and a revision (a rollout, a fleet's shadow): read whole,
//! checked before they are believed (anyone who can write the table can write them), and
//! written whole by an UpdateItem (no `PutItem`: the lease table's policy grants none), on the
//! condition that the revision is still the one read.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::FleetTable;
use crate::lease::LeaseError;
use crate::lease::dynamo_rows::{KEY, n, s};

/// The largest document read or written.
pub const MAX_DOC_BYTES: usize = 64 << 10;

/// The key of a subscription's row of one kind: `#shardhost#KIND#SERVICE#SUBSCRIPTION`.
pub(super) fn doc_key(kind: &str, service: &str, subscription: &str) -> String {
    format!(
        "#shardhost#{kind}#{}#{}",
        super::desired::escape(service),
        super::desired::escape(subscription)
    )
}

const REVISION: &str = "revision";

/// A document row as read: its revision (none: no row) and the document, or why it is
/// unusable.
#[derive(Clone, Debug)]
pub struct DocRead<T> {
    pub revision: Option<u64>,
    pub doc: Option<Result<T, String>>,
}

impl FleetTable {
    /// The document in attribute `attr` of row `key` (`what` names it in errors), checked.
    pub(super) async fn read_doc<T: DeserializeOwned>(
        &self,
        key: &str,
        attr: &str,
        what: &str,
        check: impl Fn(&T) -> Result<(), String>,
    ) -> Result<DocRead<T>, LeaseError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.sdk_error(&format!("read {what}"), key, e))?;
        let Some(item) = out.item() else {
            return Ok(DocRead {
                revision: None,
                doc: None,
            });
        };
        let revision = item
            .get(REVISION)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse::<u64>().ok());
        let doc = match item.get(attr).and_then(|v| v.as_s().ok()) {
            _ if revision.is_none() => Err(format!("`{REVISION}` is not a number")),
            None => Err(format!("no `{attr}` text")),
            Some(text) if text.len() > MAX_DOC_BYTES => {
                Err(format!("`{attr}` is larger than {MAX_DOC_BYTES} bytes"))
            }
            Some(text) => serde_json::from_str::<T>(text)
                .map_err(|e| format!("`{attr}` does not parse: {e}"))
                .and_then(|d| check(&d).map(|()| d)),
        };
        Ok(DocRead {
            revision: Some(revision.unwrap_or(0)),
            doc: Some(doc),
        })
    }

    /// Writes `doc` into attribute `attr` of row `key` if its revision is still `seen` (`None`:
    /// if there is no row); whether it was written. An UpdateItem setting the document and the
    /// next revision: the lease table's IAM policy (docs/operations/iam.md) grants no `PutItem`.
    pub(super) async fn write_doc<T: Serialize>(
        &self,
        key: &str,
        attr: &str,
        what: &str,
        doc: &T,
        seen: Option<u64>,
    ) -> Result<bool, LeaseError> {
        let text = serde_json::to_string(doc).expect("a document serializes");
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(key))
            .update_expression("SET #d = :doc, #r = :next")
            .expression_attribute_names("#d", attr)
            .expression_attribute_names("#r", REVISION)
            .expression_attribute_values(":doc", s(text.as_str()))
            .expression_attribute_values(":next", n(seen.map_or(1, |r| r + 1)));
        let update = match seen {
            None => update
                .condition_expression("attribute_not_exists(#k)")
                .expression_attribute_names("#k", KEY),
            Some(r) => update
                .condition_expression("#r = :seen")
                .expression_attribute_values(":seen", n(r)),
        };
        match update.send().await {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(e) => Err(self.sdk_error(&format!("write {what}"), key, e)),
        }
    }
}
