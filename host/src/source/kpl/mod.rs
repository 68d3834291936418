//! De-aggregation of records written by the Kinesis Producer Library (KPL).
//!
//! The KPL packs many user records into one Kinesis record: the 4 magic bytes `F3 89 9A C2`,
//! then a protobuf `AggregatedRecord` (tables of partition keys and explicit hash keys, and the
//! user records, each naming its keys by index), then the 16-byte MD5 digest of exactly the
//! protobuf bytes. [`deaggregate`] splits such a record back into its user records; anything
//! without the magic passes through untouched.
//!
//! Nothing is ever dropped: a record that carries the magic but does not check out (digest
//! mismatch, truncation, malformed protobuf, a key index past its table, no user records at all)
//! comes back as [`Deaggregated::Corrupt`], the original record plus the reason, and is delivered
//! to the handler as one plain record.
//!
//! The protobuf reader here is hand-written and small: it understands varints and
//! length-delimited fields, skips unknown fields of wire types 0, 1, 2 and 5, and refuses groups
//! (wire types 3 and 4), invalid wire types and truncation.

use md5::{Digest, Md5};

use crate::record::Record;

/// The bytes that open every KPL aggregate.
pub const MAGIC: [u8; 4] = [0xF3, 0x89, 0x9A, 0xC2];
const DIGEST_LEN: usize = 16;
/// The longest partition key Kinesis accepts (256 characters); an aggregate with a longer one
/// was not written by a KPL and is corrupt.
pub const MAX_KEY_LEN: usize = 256;
/// The most user records one aggregate may hold. A 1 MiB record of empty user records could
/// hold ~250 000; a KPL aggregate holds what fits in `AggregationMaxSize` (50 KiB by default).
pub const MAX_USER_RECORDS: usize = 100_000;
/// The largest field number protobuf allows.
const MAX_FIELD: u64 = (1 << 29) - 1;

/// What happened to one Kinesis record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deaggregated {
    /// Not an aggregate (no magic): the record, untouched.
    Plain(Record),
    /// An aggregate's user records, in order, with `sub_sequence_number` 0, 1, …; each has its
    /// own partition key and the outer record's sequence number and arrival time. A user
    /// record's explicit hash key is ignored: it only routes records on the producer side.
    /// Tags are ignored too.
    Users(Vec<Record>),
    /// The record carries the magic but is not a valid aggregate. It is to be delivered as one
    /// plain record (this is the original, untouched); the caller logs `reason` as a warning.
    /// An aggregate holding no user records lands here too (the KPL never writes one), so that
    /// nothing disappears silently.
    Corrupt { record: Record, reason: String },
}

/// Splits one Kinesis record into its user records if it is a KPL aggregate. Never panics.
pub fn deaggregate(record: Record) -> Deaggregated {
    let Some(body) = record.data.strip_prefix(&MAGIC) else {
        return Deaggregated::Plain(record);
    };
    match user_records(&record, body) {
        Ok(users) => Deaggregated::Users(users),
        Err(reason) => Deaggregated::Corrupt { record, reason },
    }
}

/// Flattens a batch for the reader: plain records as they are, aggregates as their user records,
/// corrupt aggregates as themselves after calling `warn(&record, reason)`. Order is kept.
pub fn deaggregate_all(records: Vec<Record>, mut warn: impl FnMut(&Record, &str)) -> Vec<Record> {
    // The common read holds no aggregate: hand it back as it came, without a second vector.
    if !records.iter().any(|r| r.data.starts_with(&MAGIC)) {
        return records;
    }
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        match deaggregate(record) {
            Deaggregated::Plain(record) => out.push(record),
            Deaggregated::Users(users) => out.extend(users),
            Deaggregated::Corrupt { record, reason } => {
                warn(&record, &reason);
                out.push(record);
            }
        }
    }
    out
}

/// `body` is everything after the magic: protobuf bytes, then their digest.
fn user_records(outer: &Record, body: &[u8]) -> Result<Vec<Record>, String> {
    let Some(split) = body.len().checked_sub(DIGEST_LEN) else {
        return Err(format!(
            "truncated KPL aggregate: {} bytes after the magic, too few for the {DIGEST_LEN}-byte digest",
            body.len()
        ));
    };
    let (message, digest) = body.split_at(split);
    if Md5::digest(message).as_slice() != digest {
        return Err("KPL aggregate's MD5 digest does not match its contents".to_string());
    }
    let aggregate = parse_aggregate(message).map_err(|e| format!("bad KPL aggregate: {e}"))?;
    if aggregate.records.is_empty() {
        return Err("KPL aggregate holds no user records".to_string());
    }
    if aggregate.records.len() > MAX_USER_RECORDS {
        return Err(format!(
            "KPL aggregate holds {} user records, more than the {MAX_USER_RECORDS} accepted",
            aggregate.records.len()
        ));
    }
    // One allocation per key, shared by every user record that names it.
    let keys: Vec<std::sync::Arc<str>> = aggregate.keys.iter().map(|&k| k.into()).collect();
    let mut users = Vec::with_capacity(aggregate.records.len());
    for (i, bytes) in aggregate.records.iter().enumerate() {
        let bad = |e: String| format!("bad KPL aggregate: user record {i}: {e}");
        let user = parse_user_record(bytes).map_err(bad)?;
        let key = usize::try_from(user.key_index)
            .ok()
            .and_then(|k| keys.get(k))
            .ok_or_else(|| {
                bad(format!(
                    "partition key index {} past the table of {}",
                    user.key_index,
                    aggregate.keys.len()
                ))
            })?;
        if let Some(index) = user.hash_key_index
            && usize::try_from(index).map_or(true, |h| h >= aggregate.hash_keys)
        {
            return Err(bad(format!(
                "explicit hash key index {index} past the table of {}",
                aggregate.hash_keys
            )));
        }
        let sub_sequence_number =
            u32::try_from(i).map_err(|_| bad("too many user records".to_string()))?;
        users.push(Record {
            partition_key: key.clone(),
            sequence_number: outer.sequence_number.clone(),
            sub_sequence_number,
            approximate_arrival_timestamp: outer.approximate_arrival_timestamp,
            data: user.data.to_vec(),
        });
    }
    Ok(users)
}

/// An `AggregatedRecord`, fields borrowed from the input.
#[derive(Default)]
struct Aggregate<'a> {
    keys: Vec<&'a str>,
    /// Only the size of the explicit hash key table matters (the keys themselves are ignored).
    hash_keys: usize,
    records: Vec<&'a [u8]>,
}

fn parse_aggregate(message: &[u8]) -> Result<Aggregate<'_>, String> {
    let mut aggregate = Aggregate::default();
    let mut reader = Reader { buf: message };
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => {
                let key = value.bytes(field)?;
                let key = std::str::from_utf8(key)
                    .map_err(|_| "a partition key is not UTF-8".to_string())?;
                if key.chars().count() > MAX_KEY_LEN {
                    return Err(format!(
                        "a partition key of {} bytes, longer than the {MAX_KEY_LEN} characters Kinesis allows",
                        key.len()
                    ));
                }
                aggregate.keys.push(key);
            }
            2 => {
                value.bytes(field)?;
                aggregate.hash_keys += 1;
            }
            3 => aggregate.records.push(value.bytes(field)?),
            _ => {}
        }
    }
    Ok(aggregate)
}

/// A `Record` inside the aggregate.
struct UserRecord<'a> {
    key_index: u64,
    hash_key_index: Option<u64>,
    data: &'a [u8],
}

fn parse_user_record(message: &[u8]) -> Result<UserRecord<'_>, String> {
    let (mut key_index, mut hash_key_index, mut data) = (None, None, None);
    let mut reader = Reader { buf: message };
    while let Some((field, value)) = reader.next_field()? {
        match field {
            1 => key_index = Some(value.varint(field)?),
            2 => hash_key_index = Some(value.varint(field)?),
            3 => data = Some(value.bytes(field)?),
            // Tags: checked to be length-delimited, otherwise ignored.
            4 => _ = value.bytes(field)?,
            _ => {}
        }
    }
    Ok(UserRecord {
        key_index: key_index.ok_or("the required partition key index is missing")?,
        hash_key_index,
        data: data.ok_or("the required data is missing")?,
    })
}

/// One field's value as read off the wire.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed 32- or 64-bit value; none of the known fields use these, so they are only skipped.
    Fixed,
}

impl<'a> Value<'a> {
    fn varint(self, field: u64) -> Result<u64, String> {
        match self {
            Value::Varint(v) => Ok(v),
            _ => Err(format!("field {field} should be a varint")),
        }
    }

    fn bytes(self, field: u64) -> Result<&'a [u8], String> {
        match self {
            Value::Bytes(b) => Ok(b),
            _ => Err(format!("field {field} should be length-delimited")),
        }
    }
}

/// Reads protobuf fields off a byte slice.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// The next field's number and value, or `None` at the end of the message.
    fn next_field(&mut self) -> Result<Option<(u64, Value<'a>)>, String> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let field = tag >> 3;
        if field == 0 || field > MAX_FIELD {
            return Err(format!("invalid field number {field}"));
        }
        let value = match tag & 7 {
            0 => Value::Varint(self.varint()?),
            1 => self.take(8).map(|_| Value::Fixed)?,
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| truncated())?;
                Value::Bytes(self.take(len)?)
            }
            5 => self.take(4).map(|_| Value::Fixed)?,
            wire @ (3 | 4) => return Err(format!("field {field} is a group (wire type {wire})")),
            wire => return Err(format!("field {field} has invalid wire type {wire}")),
        };
        Ok(Some((field, value)))
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.buf.split_first().ok_or_else(truncated)?;
            self.buf = rest;
            // The tenth byte may only hold the 64th bit.
            if shift == 63 && byte > 1 {
                break;
            }
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint overflows 64 bits".to_string())
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let (head, rest) = self.buf.split_at_checked(len).ok_or_else(truncated)?;
        self.buf = rest;
        Ok(head)
    }
}

fn truncated() -> String {
    "truncated protobuf".to_string()
}

#[cfg(test)]
mod tests;
