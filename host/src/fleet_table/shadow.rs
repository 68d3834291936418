//! A fleet's shadow of a subscription (`deploy --shadow` with a DynamoDB lease table), in a
//! row of its own: `#shardhost#shadow#SERVICE#SUBSCRIPTION`, attributes `shadow` (S, a JSON
//! [`FleetShadow`]) and `revision` (N). A row without `http_answer` (written before it
//! existed, or without `--http-answer`) answers the shadow's unsent requests 503. Every instance runs the shadow the row names while it
//! is `on`; its bytes are stored as a deploy's are.

use serde::{Deserialize, Serialize};

use super::FleetTable;
use super::desired::StoredComponent;
use super::desired::{is_id, is_version};
use super::doc::{DocRead, doc_key};
use crate::effects::HttpAnswer;
use crate::effects::answer::MAX_SHADOW_BODY;
use crate::lease::LeaseError;
use crate::signing::Signed;

const SHADOW: &str = "shadow";

/// The shadow a fleet runs for one subscription.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetShadow {
    /// Made anew by each `deploy --shadow`: an instance follows a change of it.
    pub shadow_id: String,
    pub version: String,
    pub size: u64,
    pub chunks: u32,
    pub upload: String,
    pub set_by: String,
    pub set_at_ms: u64,
    /// Off: dropped (`--shadow-off`) or promoted.
    pub on: bool,
    /// Its signature (`deploy --shadow --sign-key`): over the table, service, subscription, id
    /// and version, and the HTTP answer when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<Signed>,
    /// What its unsent HTTP requests are answered (`deploy --shadow --http-answer`); none: 503.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_answer: Option<HttpAnswer>,
}

impl FleetShadow {
    pub fn component(&self) -> StoredComponent {
        StoredComponent {
            version: self.version.clone(),
            size: self.size,
            chunks: self.chunks,
            upload: Some(self.upload.clone()),
        }
    }

    /// Every field within bounds; the first that is not, named.
    pub fn check(&self) -> Result<(), String> {
        if !is_id(&self.shadow_id) {
            return Err("`shadow_id` is not an id".into());
        }
        if !is_version(&self.version) {
            return Err("`version` is not a sha256".into());
        }
        if !is_id(&self.upload) {
            return Err("`upload` is not an id".into());
        }
        if self.set_by.len() > 256 {
            return Err("`set_by` is longer than 256 bytes".into());
        }
        if let Some(s) = &self.signed
            && (s.key.len() > 256 || s.signature.len() > 256)
        {
            return Err("`signed` is longer than 256 bytes".into());
        }
        if let Some(a) = &self.http_answer {
            a.check(MAX_SHADOW_BODY)
                .map_err(|e| format!("`http_answer`: {e}"))?;
        }
        Ok(())
    }
}

impl FleetTable {
    /// The shadow row of `subscription`.
    pub async fn fleet_shadow(
        &self,
        service: &str,
        subscription: &str,
    ) -> Result<DocRead<FleetShadow>, LeaseError> {
        let key = doc_key("shadow", service, subscription);
        self.read_doc(&key, SHADOW, "the fleet's shadow", FleetShadow::check)
            .await
    }

    /// Writes the shadow row of `subscription` if its revision is still `seen`.
    pub async fn set_fleet_shadow(
        &self,
        service: &str,
        subscription: &str,
        shadow: &FleetShadow,
        seen: Option<u64>,
    ) -> Result<bool, LeaseError> {
        let key = doc_key("shadow", service, subscription);
        self.write_doc(&key, SHADOW, "the fleet's shadow", shadow, seen)
            .await
    }
}
