//! The fleet's desired handler versions, in rows of the lease table beside the leases (see
//! `fleet/`); the components' bytes are in `component.rs`.
//!
//! | `lease_key`                               | attributes |
//! |-------------------------------------------|------------|
//! | `#shardhost#desired#SERVICE#SUBSCRIPTION` | `version` (S, sha256 hex), `size` (N), `chunks` (N), `upload` (S), `generation` (N), `deploy_id` (S), `deployed_by` (S), `deployed_at` (N, ms), `signature` (S), `signed_by` (S), and `previous_version`, `previous_size`, `previous_chunks`, `previous_upload`, with the signature the previous version was deployed under: `previous_generation` (N), `previous_deploy_id` (S), `previous_signature` (S), `previous_signed_by` (S) |
//!
//! Every key starts with `#`, which no Kinesis stream name or shard id holds, so these rows never
//! meet a lease row (`stream:shard`) or an earlier-version row (a bare shard id). `#` and `%` in
//! a service or subscription name are escaped (`%23`, `%25`), so two names never share a key.
//!
//! **A desired row is untrusted input**: anyone who can write the table can write it. Reading
//! it checks every attribute ([`parse`]) before anything is allocated or fetched; a row that
//! fails is a [`BadRow`] naming the attribute, never a panic. The next deploy replaces it: its
//! write is conditional on the row's `generation` attribute exactly as it was read ([`Seen`]),
//! whatever its type.

use aws_sdk_dynamodb::types::AttributeValue;

mod parse;
mod write;

use super::FleetTable;
use crate::lease::LeaseError;
use crate::lease::dynamo_rows::{Item, KEY, n, s};
use crate::signing::{Intent, Signed};
use parse::parse;
use write::Write;

/// The most bytes of a component one row holds: under DynamoDB's 400 KB item limit with room
/// for the key and the attribute name.
pub const CHUNK_BYTES: usize = 350_000;

/// The highest generation a row may hold: far beyond any number of deploys, and exact in every
/// JSON reader (2^53), so adding one never overflows.
pub const MAX_GENERATION: u64 = 1 << 53;

const VERSION: &str = "version";
const GENERATION: &str = "generation";
const SIZE: &str = "size";
const CHUNKS: &str = "chunks";
const UPLOAD: &str = "upload";
const DEPLOY_ID: &str = "deploy_id";
const DEPLOYED_BY: &str = "deployed_by";
const DEPLOYED_AT: &str = "deployed_at";
const SIGNATURE: &str = "signature";
const SIGNED_BY: &str = "signed_by";
const PREVIOUS_VERSION: &str = "previous_version";
const PREVIOUS_SIZE: &str = "previous_size";
const PREVIOUS_CHUNKS: &str = "previous_chunks";
const PREVIOUS_UPLOAD: &str = "previous_upload";
const PREVIOUS_GENERATION: &str = "previous_generation";
const PREVIOUS_DEPLOY_ID: &str = "previous_deploy_id";
const PREVIOUS_SIGNATURE: &str = "previous_signature";
const PREVIOUS_SIGNED_BY: &str = "previous_signed_by";

/// The longest `deployed_by` kept (it is shown, never trusted).
const MAX_DEPLOYED_BY: usize = 256;

/// A component stored in the table: its version (sha256 of its bytes), how it is cut, and the
/// upload its parts belong to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredComponent {
    pub version: String,
    pub size: u64,
    pub chunks: u32,
    /// The upload the parts were written by (every upload writes parts of its own, so two
    /// deploys never share or delete each other's parts); `None`: parts of the first release,
    /// keyed by version.
    pub upload: Option<String>,
}

impl StoredComponent {
    /// Whether `other` names the same stored parts.
    pub fn same_parts(&self, other: &StoredComponent) -> bool {
        self.version == other.version && self.upload == other.upload
    }
}

/// What one subscription of one service should run, fleet-wide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub component: StoredComponent,
    /// Grows with every deploy and rollback (at most [`MAX_GENERATION`]).
    pub generation: u64,
    /// The row's lineage: made when a deploy finds no (usable) row, kept by every later write.
    /// A new lineage tells instances that the row was replaced, so a lower generation is news.
    /// Empty in rows of the first release.
    pub deploy_id: String,
    pub deployed_by: String,
    /// ms since the Unix epoch.
    pub deployed_at_ms: u64,
    /// What ran before (what `--rollback` restores); its bytes are kept.
    pub previous: Option<StoredComponent>,
    /// The signature `previous` was deployed under, with the generation and lineage it was made
    /// for: what a signed rollback verifies before it signs anything.
    pub previous_signed: Option<Intent>,
    /// The deploy's signature, when it was signed.
    pub signed: Option<Signed>,
}

/// A desired row that cannot be used, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the desired row's `{attribute}` {problem}")]
pub struct BadRow {
    pub attribute: &'static str,
    pub problem: String,
    /// What the row says it deploys and its generation, when those could be read (for reports).
    pub version: Option<String>,
    pub generation: Option<u64>,
}

/// The row's `generation` as it was read: what the next write is conditional on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Seen {
    exists: bool,
    generation: Option<AttributeValue>,
}

impl Seen {
    /// No row.
    pub fn nothing() -> Seen {
        Seen::default()
    }
}

/// A desired row as read: what the next write is conditional on, and what it says.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredRead {
    pub seen: Seen,
    /// `None`: no row.
    pub row: Option<Result<Desired, BadRow>>,
}

/// Why a desired-state write did not happen.
#[derive(Debug)]
pub enum SetDesired {
    /// Written.
    Done,
    /// Another deploy wrote the row since it was read.
    Conflict,
}

/// `#` and `%` escaped, so `#` separates the parts of a key unambiguously.
pub(super) fn escape(name: &str) -> String {
    name.replace('%', "%25").replace('#', "%23")
}

fn desired_key(service: &str, subscription: &str) -> String {
    format!(
        "#shardhost#desired#{}#{}",
        escape(service),
        escape(subscription)
    )
}

/// Whether `text` is a sha256 in lowercase hex.
pub fn is_version(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `text` may name an upload or a lineage: 1–64 of `[0-9a-zA-Z-]`.
pub fn is_id(text: &str) -> bool {
    (1..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

impl FleetTable {
    /// The desired row of `subscription` of `service`, checked against `max_size`.
    pub async fn desired(
        &self,
        service: &str,
        subscription: &str,
        max_size: u64,
    ) -> Result<DesiredRead, LeaseError> {
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
        Ok(match out.item() {
            None => DesiredRead {
                seen: Seen::nothing(),
                row: None,
            },
            Some(item) => DesiredRead {
                seen: Seen {
                    exists: true,
                    generation: item.get(GENERATION).cloned(),
                },
                row: Some(parse(item, max_size)),
            },
        })
    }

    /// Writes `desired` as the row of `subscription`, on the condition that the row is still as
    /// `seen` (no row; or its `generation` attribute unchanged, whatever its type).
    pub async fn set_desired(
        &self,
        service: &str,
        subscription: &str,
        desired: &Desired,
        seen: &Seen,
    ) -> Result<SetDesired, LeaseError> {
        let key = desired_key(service, subscription);
        let mut w = Write::default();
        let c = &desired.component;
        w.set(VERSION, s(c.version.as_str()));
        w.set(SIZE, n(c.size));
        w.set(CHUNKS, n(u64::from(c.chunks)));
        w.maybe(UPLOAD, c.upload.as_deref().map(s));
        w.set(GENERATION, n(desired.generation));
        w.maybe(
            DEPLOY_ID,
            Some(desired.deploy_id.as_str())
                .filter(|d| !d.is_empty())
                .map(s),
        );
        w.set(DEPLOYED_BY, s(desired.deployed_by.as_str()));
        w.set(DEPLOYED_AT, n(desired.deployed_at_ms));
        w.maybe(
            SIGNATURE,
            desired.signed.as_ref().map(|x| s(x.signature.as_str())),
        );
        w.maybe(
            SIGNED_BY,
            desired.signed.as_ref().map(|x| s(x.key.as_str())),
        );
        let p = desired.previous.as_ref();
        w.maybe(PREVIOUS_VERSION, p.map(|p| s(p.version.as_str())));
        w.maybe(PREVIOUS_SIZE, p.map(|p| n(p.size)));
        w.maybe(PREVIOUS_CHUNKS, p.map(|p| n(u64::from(p.chunks))));
        w.maybe(PREVIOUS_UPLOAD, p.and_then(|p| p.upload.as_deref()).map(s));
        let ps = desired.previous_signed.as_ref();
        w.maybe(PREVIOUS_GENERATION, ps.map(|p| n(p.generation)));
        w.maybe(PREVIOUS_DEPLOY_ID, ps.map(|p| s(p.deploy_id.as_str())));
        w.maybe(
            PREVIOUS_SIGNATURE,
            ps.map(|p| s(p.signed.signature.as_str())),
        );
        w.maybe(PREVIOUS_SIGNED_BY, ps.map(|p| s(p.signed.key.as_str())));
        w.condition(seen);
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(key.as_str()))
            .update_expression(w.expression())
            .condition_expression(w.condition.clone());
        for (placeholder, name) in w.names {
            request = request.expression_attribute_names(placeholder, name);
        }
        for (placeholder, value) in w.values {
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
}

#[cfg(test)]
mod tests;
