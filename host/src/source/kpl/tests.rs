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
fn expected<'a>(outer: &Record, users: impl Iterator<Item = (&'a str, &'a [u8])>) -> Vec<Record> {
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
