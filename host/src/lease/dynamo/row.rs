//! The lease table's attributes, and reading a row's attributes back into a [`Lease`].

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::lease::{Checkpoint, Lease, LeaseError, LeaseKey, claimed_by_another};

/// The partition key (S): `stream:shard`, `stream:shard#SUBSCRIPTION` for a subscription's own
/// rows, or a bare shard id in an earlier-version row.
pub(crate) const KEY: &str = "lease_key";
/// The holder (S); absent while nobody holds the lease.
pub(super) const OWNER: &str = "lease_owner";
/// When the lease ends (N, ms since the Unix epoch); 0 after a release.
pub(super) const EXPIRY: &str = "lease_expiry";
/// Bumped by every write (N).
pub(super) const COUNTER: &str = "lease_counter";
/// The shard's checkpoint (S): `SEQ`, `SEQ/SUB` or `SHARD_END`.
pub(super) const CHECKPOINT: &str = "checkpoint";
/// shardhost's own (N, ms since the Unix epoch): when a reader first opened the shard while it
/// had no checkpoint. Other readers of the table ignore it.
pub(super) const OPENED: &str = "opened_at";
/// shardhost's own (S): the owner another instance asked the holder to hand the shard to; on a
/// row without `lease_owner`, the one owner that may take it until `lease_expiry`.
pub(super) const HANDOFF_TO: &str = "handoff_to";

/// shardhost's own (S): the subscription that took the row; no other subscription takes it.
/// Absent in rows only other readers (ruststream-kinesis, earlier shardhost) wrote.
pub(super) const SUBSCRIPTION: &str = "subscription";

/// How far ahead of this host's clock a `lease_expiry` may lie before the row is malformed: a
/// lease lasts at most its ttl (an hour at most), so a day covers any clock skew.
const MAX_EXPIRY_AHEAD_MS: u64 = 24 * 3_600_000;

/// One item as the SDK answers it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// A string attribute value.
pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// A number attribute value.
pub(crate) fn n(v: u64) -> AttributeValue {
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
    if let Some(theirs) = claim(table, &name, item)?
        && let Some(ours) = &key.subscription
        && theirs != *ours
    {
        let place = format!(" in lease table `{table}`");
        return Err(claimed_by_another(&place, key, &theirs));
    }
    let expiry_ms = number(table, &name, item, EXPIRY)?.unwrap_or(0);
    if expiry_ms > crate::lease::now_ms().saturating_add(MAX_EXPIRY_AHEAD_MS) {
        return Err(malformed(
            table,
            &name,
            EXPIRY,
            "a time at most a day ahead of this host's clock (ms since the Unix epoch)",
            &format!("N({expiry_ms:?})"),
        ));
    }
    Ok(Lease {
        key: key.clone(),
        owner: string(table, &name, item, OWNER)?,
        expiry_ms,
        counter: number(table, &name, item, COUNTER)?.unwrap_or(0),
        checkpoint: checkpoint(table, &name, item)?,
        opened_ms: number(table, &name, item, OPENED)?,
        handoff_to: string(table, &name, item, HANDOFF_TO)?,
    })
}

/// The subscription that took the row keyed `row`, if one did.
pub(super) fn claim(table: &str, row: &str, item: &Item) -> Result<Option<String>, LeaseError> {
    string(table, row, item, SUBSCRIPTION)
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
    LeaseError::Malformed(format!(
        "lease table `{table}`: row `{row}` has a malformed `{attr}`: expected {expected}, found {found}"
    ))
}
