//! The lease table's attributes, and reading a row's attributes back into a [`Lease`].

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::lease::{Checkpoint, Lease, LeaseError, LeaseKey};

/// The partition key (S): `stream:shard`, or a bare shard id in an earlier-version row.
pub(super) const KEY: &str = "lease_key";
/// The holder (S); absent while nobody holds the lease.
pub(super) const OWNER: &str = "lease_owner";
/// When the lease ends (N, ms since the Unix epoch); 0 after a release.
pub(super) const EXPIRY: &str = "lease_expiry";
/// Bumped by every write (N).
pub(super) const COUNTER: &str = "lease_counter";
/// The shard's checkpoint (S): `SEQ`, `SEQ/SUB` or `SHARD_END`.
pub(super) const CHECKPOINT: &str = "checkpoint";

/// One item as the SDK answers it.
pub(super) type Item = HashMap<String, AttributeValue>;

/// A string attribute value.
pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute value.
pub(super) fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// Reads the row of `key` (as the table answered it) into a [`Lease`].
pub(super) fn lease(table: &str, key: &LeaseKey, item: &Item) -> Result<Lease, LeaseError> {
    let name = key.to_string();
    let stored = string(table, &name, item, KEY)?;
    if stored.as_deref() != Some(name.as_str()) {
        return Err(LeaseError::Store(format!(
            "lease table `{table}`: the row answered for `{name}` has {KEY} {stored:?}"
        )));
    }
    Ok(Lease {
        key: key.clone(),
        owner: string(table, &name, item, OWNER)?,
        expiry_ms: number(table, &name, item, EXPIRY)?.unwrap_or(0),
        counter: number(table, &name, item, COUNTER)?.unwrap_or(0),
        checkpoint: checkpoint(table, &name, item)?,
    })
}

/// The `checkpoint` attribute of the row keyed `row`, if it has one.
pub(super) fn checkpoint(
    table: &str,
    row: &str,
    item: &Item,
) -> Result<Option<Checkpoint>, LeaseError> {
    let Some(text) = string(table, row, item, CHECKPOINT)? else {
        return Ok(None);
    };
    Checkpoint::from_stored(&text).map(Some).ok_or_else(|| {
        malformed(
            table,
            row,
            CHECKPOINT,
            "a sequence number, SEQ/SUB or SHARD_END",
            &format!("{text:?}"),
        )
    })
}

fn string(table: &str, row: &str, item: &Item, attr: &str) -> Result<Option<String>, LeaseError> {
    match item.get(attr) {
        None => Ok(None),
        Some(AttributeValue::S(v)) => Ok(Some(v.clone())),
        Some(other) => Err(malformed(
            table,
            row,
            attr,
            "a string (S)",
            &format!("{other:?}"),
        )),
    }
}

fn number(table: &str, row: &str, item: &Item, attr: &str) -> Result<Option<u64>, LeaseError> {
    let expected = "a whole number (N) of at least 0";
    match item.get(attr) {
        None => Ok(None),
        Some(AttributeValue::N(v)) => v
            .parse()
            .map(Some)
            .map_err(|_| malformed(table, row, attr, expected, &format!("N({v:?})"))),
        Some(other) => Err(malformed(table, row, attr, expected, &format!("{other:?}"))),
    }
}

fn malformed(table: &str, row: &str, attr: &str, expected: &str, found: &str) -> LeaseError {
    LeaseError::Store(format!(
        "lease table `{table}`: row `{row}` has a malformed `{attr}`: expected {expected}, found {found}"
    ))
}
