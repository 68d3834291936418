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
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::*;

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A message of length-delimited fields, in the order given.
    fn message(fields: &[(u64, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (field, bytes) in fields {
            put_varint(&mut out, field << 3 | 2);
            put_varint(&mut out, bytes.len() as u64);
            out.extend_from_slice(bytes);
        }
        out
    }

    /// Magic + protobuf + MD5 of the protobuf.
    fn seal(message: &[u8]) -> Vec<u8> {
        [&MAGIC[..], message, Md5::digest(message).as_slice()].concat()
    }

    /// One user `Record` message, with `extra` raw bytes appended.
    fn user(key: u64, hash_key: Option<u64>, data: &[u8], extra: &[u8]) -> Vec<u8> {
        let mut out = vec![1 << 3];
        put_varint(&mut out, key);
        if let Some(h) = hash_key {
            out.push(2 << 3);
            put_varint(&mut out, h);
        }
        [out, message(&[(3, data)]), extra.to_vec()].concat()
    }

    /// The protobuf `AggregatedRecord`, keys shared through the tables as the KPL does.
    fn encode(records: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
        fn index<'a>(table: &mut Vec<&'a str>, key: &'a str) -> u64 {
            let i = table.iter().position(|k| *k == key);
            i.unwrap_or_else(|| (table.push(key), table.len() - 1).1) as u64
        }
        let (mut keys, mut hash_keys, mut users) = (Vec::new(), Vec::new(), Vec::new());
        for (key, hash_key, data) in records {
            let k = index(&mut keys, key);
            let h = hash_key.map(|h| index(&mut hash_keys, h));
            users.push(user(k, h, data, &[]));
        }
        let keys = keys.iter().map(|k| (1, k.as_bytes()));
        let hash_keys = hash_keys.iter().map(|h| (2, h.as_bytes()));
        let users = users.iter().map(|u| (3, u.as_slice()));
        message(&keys.chain(hash_keys).chain(users).collect::<Vec<_>>())
    }

    fn aggregate(records: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
        seal(&encode(records))
    }

    fn outer(data: Vec<u8>) -> Record {
        Record {
            partition_key: "outer-key".into(),
            sequence_number: "49590338271490256608559692538361571095921575989136588898".into(),
            sub_sequence_number: 0,
            approximate_arrival_timestamp: 1_700_000_000_123,
            data,
        }
    }

    /// What `outer`'s user records should be: own key and data, the outer position and time.
    fn expected<'a>(
        outer: &Record,
        users: impl Iterator<Item = (&'a str, &'a [u8])>,
    ) -> Vec<Record> {
        let user = |(i, (key, data)): (usize, (&str, &[u8]))| Record {
            partition_key: key.into(),
            sub_sequence_number: i as u32,
            data: data.into(),
            ..outer.clone()
        };
        users.enumerate().map(user).collect()
    }

    fn assert_corrupt(data: Vec<u8>, why: &str) {
        let input = outer(data);
        match deaggregate(input.clone()) {
            Deaggregated::Corrupt { record, reason } => {
                assert_eq!(record, input, "{why}");
                assert!(!reason.is_empty());
            }
            other => panic!("{why}: expected Corrupt, got {other:?}"),
        }
    }

    const THREE: &[(&str, Option<&str>, &[u8])] = &[
        ("alpha", None, b"one"),
        ("beta", Some("12345"), b""),
        ("alpha", None, b"3"),
    ];

    #[test]
    fn plain_records_pass_through_untouched() {
        let near_magic = [0xF3, 0x89, 0x9A, 0xC3, 0, 0];
        for data in [&b""[..], b"hello", &MAGIC[..3], &near_magic] {
            let input = outer(data.to_vec());
            assert_eq!(deaggregate(input.clone()), Deaggregated::Plain(input));
        }
    }

    #[test]
    fn an_aggregate_yields_its_user_records_with_their_own_keys_and_sub_sequence_numbers() {
        let input = outer(aggregate(THREE));
        let users = expected(&input, THREE.iter().map(|(k, _, d)| (*k, *d)));
        assert_eq!(users[2].sub_sequence_number, 2);
        assert_eq!(deaggregate(input), Deaggregated::Users(users));
    }

    #[test]
    fn a_bad_digest_is_delivered_as_one_plain_record() {
        let mut data = aggregate(THREE);
        *data.last_mut().unwrap() ^= 1;
        assert_corrupt(data.clone(), "flipped digest");
        let (input, mut warned) = (outer(data), Vec::<(Record, String)>::new());
        let out = deaggregate_all(vec![input.clone()], |r, why| {
            warned.push((r.clone(), why.into()))
        });
        assert_eq!(out, vec![input.clone()]);
        assert_eq!(warned.len(), 1);
        assert_eq!(warned[0].0, input);
        assert!(warned[0].1.contains("digest"), "{:?}", warned[0].1);
    }

    #[test]
    fn a_truncated_aggregate_is_delivered_as_one_plain_record() {
        let data = aggregate(THREE);
        for len in MAGIC.len()..data.len() {
            assert_corrupt(data[..len].to_vec(), "cut short");
        }
        // Truncated protobuf under a digest that matches it (one user record, so no prefix of
        // the message is itself a valid aggregate).
        let message = encode(&[("alpha", None, b"one")]);
        for len in 1..message.len() {
            assert_corrupt(seal(&message[..len]), "truncated protobuf");
        }
    }

    #[test]
    fn unknown_fields_are_skipped() {
        // Field 9 varint, 10 fixed64, 12 fixed32, 11 and the largest field number bytes.
        let mut unknown = vec![9 << 3];
        put_varint(&mut unknown, u64::MAX);
        unknown.extend([10 << 3 | 1, 1, 2, 3, 4, 5, 6, 7, 8, 12 << 3 | 5, 1, 2, 3, 4]);
        unknown.extend(message(&[(11, b"skip me"), (MAX_FIELD, b"")]));
        let tag = message(&[(1, b"key"), (2, b"value")]);
        let extra = [unknown.clone(), message(&[(4, &tag)]), unknown.clone()].concat();
        let record = user(0, None, b"payload", &extra);
        let fields = message(&[(3, &record), (1, b"pk")]);
        let message = [&unknown[..], &fields, &unknown].concat();
        let input = outer(seal(&message));
        let users = expected(&input, [("pk", &b"payload"[..])].into_iter());
        assert_eq!(deaggregate(input), Deaggregated::Users(users));

        // Groups (wire types 3 and 4) are refused, at the top and inside a user record.
        let group = [9 << 3 | 3, 9 << 3 | 4];
        assert_corrupt(seal(&[&message[..], &group].concat()), "group");
        let record = user(0, None, b"x", &group);
        assert_corrupt(seal(&message_of(b"pk", &record)), "group in a user record");
    }

    fn message_of(key: &[u8], user: &[u8]) -> Vec<u8> {
        message(&[(1, key), (3, user)])
    }

    #[test]
    fn an_index_past_the_key_table_is_corrupt() {
        let past = message_of(b"only", &user(1, None, b"x", &[]));
        assert_corrupt(seal(&past), "partition key index");
        let past = message_of(b"only", &user(0, Some(0), b"x", &[]));
        assert_corrupt(seal(&past), "explicit hash key index");
        let no_table = message(&[(3, &user(0, None, b"x", &[]))]);
        assert_corrupt(seal(&no_table), "no key table at all");
    }

    #[test]
    fn an_aggregate_without_user_records_is_corrupt() {
        assert_corrupt(seal(&[]), "empty aggregate");
        assert_corrupt(seal(&message(&[(1, b"unused")])), "keys but no records");
    }

    type Users = Vec<(String, Option<String>, Vec<u8>)>;

    fn users() -> impl Strategy<Value = Users> {
        let hash_key = proptest::option::of("[0-9]{1,39}");
        vec((".{0,12}", hash_key, vec(any::<u8>(), 0..40)), 0..12)
    }

    fn refs(users: &Users) -> Vec<(&str, Option<&str>, &[u8])> {
        let refs = users.iter().map(|(k, h, d)| (&k[..], h.as_deref(), &d[..]));
        refs.collect()
    }

    /// Truncates at `at`, or flips bits there (`xor` made non-zero).
    fn mutate(mut bytes: Vec<u8>, (at, xor, cut): (Index, u8, bool)) -> Vec<u8> {
        if !bytes.is_empty() {
            let i = at.index(bytes.len());
            if cut {
                bytes.truncate(i);
            } else {
                bytes[i] ^= xor.max(1);
            }
        }
        bytes
    }

    fn any_data() -> impl Strategy<Value = Vec<u8>> {
        let bytes = || vec(any::<u8>(), 0..80);
        let how = || (any::<Index>(), any::<u8>(), any::<bool>());
        prop_oneof![
            bytes(),
            bytes().prop_map(|b| [&MAGIC[..], &b].concat()),
            bytes().prop_map(|b| seal(&b)),
            (users(), how()).prop_map(|(u, how)| mutate(aggregate(&refs(&u)), how)),
            (users(), how()).prop_map(|(u, how)| seal(&mutate(encode(&refs(&u)), how))),
        ]
    }

    fn digest_matches(data: &[u8]) -> bool {
        data.strip_prefix(&MAGIC)
            .and_then(|b| b.len().checked_sub(DIGEST_LEN).map(|n| b.split_at(n)))
            .is_some_and(|(m, d)| Md5::digest(m).as_slice() == d)
    }

    proptest! {
        #[test]
        fn aggregates_round_trip(users in users(), seq in "[0-9]{1,56}", at in any::<u64>()) {
            let input = Record {
                sequence_number: seq,
                approximate_arrival_timestamp: at,
                ..outer(aggregate(&refs(&users)))
            };
            let want = expected(&input, users.iter().map(|(k, _, d)| (k.as_str(), d.as_slice())));
            match deaggregate(input.clone()) {
                Deaggregated::Corrupt { record, .. } if users.is_empty() => {
                    prop_assert_eq!(record, input)
                }
                got => prop_assert_eq!(got, Deaggregated::Users(want)),
            }
        }

        #[test]
        fn no_input_panics_or_is_lost(data in any_data()) {
            let input = outer(data);
            let has_magic = input.data.starts_with(&MAGIC);
            match deaggregate(input.clone()) {
                Deaggregated::Plain(record) => prop_assert!(!has_magic && record == input),
                Deaggregated::Corrupt { record, reason } => {
                    prop_assert!(has_magic && record == input && !reason.is_empty())
                }
                Deaggregated::Users(users) => {
                    prop_assert!(digest_matches(&input.data) && !users.is_empty());
                    for (i, user) in users.iter().enumerate() {
                        prop_assert_eq!(user.sub_sequence_number as usize, i);
                        prop_assert_eq!(&user.sequence_number, &input.sequence_number);
                    }
                }
            }
        }
    }
}
