//! The envelope around a record that shardhost publishes itself: a retry copy (the record again,
//! with its attempt number) or a dead letter (the record after its last attempt, with why).
//!
//! Layout: the 12 magic bytes `\0shardhost/2`, a 4-byte big-endian header length, the header as
//! JSON, a 32-byte HMAC-SHA256 under the fleet's [`EnvelopeKey`] (over the length, the header and
//! the data), then the original data unchanged. The header names the key by its id (`key_id`,
//! [`EnvelopeKey::id`]); envelopes made before key ids were written have none and are tried
//! under every key the host has. Only a record whose MAC verifies under one of the host's keys
//! ([`EnvelopeKeys`]: the current key and the previous ones) is an envelope; anything else that
//! starts like one is [`Rejected`], with the header it claims when it has one, so that dispatch
//! can tell a copy made under a key it lacks from a record that only looks like one.
//!
//! A handler never sees a retry envelope: dispatch unwraps it, hands the original data over and
//! puts the attempt number in `batch-info.attempt`. Dead letters stay wrapped for whoever reads
//! the dead-letter stream (`shardhost dead-letters`).

pub mod key;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

pub use key::{EnvelopeKey, EnvelopeKeys};

const MAGIC: &[u8; 12] = b"\0shardhost/2";
/// The first release's layout: the same, without a MAC.
const MAGIC_V1: &[u8; 12] = b"\0shardhost/1";
/// What every layout's magic starts with.
const FAMILY: &[u8] = b"\0shardhost/";
const MAC_LEN: usize = 32;

/// Why a record that starts like an envelope is not one of this fleet's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("an envelope of another layout (a later shardhost version)")]
    Layout,
    #[error("a truncated envelope")]
    Truncated,
    #[error("its header does not parse")]
    Header,
    /// A whole envelope with a header that parses, which no key of this host authenticates: what
    /// it claims is known, and believed in nothing.
    #[error("{why}")]
    Unauthenticated {
        claimed: Box<Header>,
        why: Unauthenticated,
    },
}

/// Why an envelope whose header parses is not authenticated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    #[error(
        "made under key {0}, which this host does not have (neither `retry_key` nor one of \
         `retry_keys_previous`)"
    )]
    UnknownKey(String),
    #[error("its MAC does not verify under key {0}: altered, or forged")]
    Mac(String),
    #[error(
        "its MAC does not verify under any key this host has: made under another key (before \
         key ids were written), or altered"
    )]
    MacNoKeyId,
    #[error("the first release's layout, which carries no MAC")]
    NoMac,
}

impl Rejected {
    /// The key id the envelope names, when it names one.
    pub fn key_id(&self) -> Option<&str> {
        match self {
            Rejected::Unauthenticated {
                why: Unauthenticated::UnknownKey(id) | Unauthenticated::Mac(id),
                ..
            } => Some(id),
            _ => None,
        }
    }
}

/// The header as written: the [`Header`] and the id of the key the envelope was made under.
#[derive(Serialize)]
struct WireOut<'a> {
    #[serde(flatten)]
    header: &'a Header,
    key_id: String,
}

#[derive(Deserialize)]
struct WireIn {
    #[serde(flatten)]
    header: Header,
    #[serde(default)]
    key_id: Option<String>,
}

/// What an envelope says about the record inside.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub kind: Kind,
    /// The subscription that published it: a retry copy is handled only by it (other
    /// subscriptions reading the same stream skip it).
    pub subscription: String,
    /// The delivery this copy is for (2 for the first retry); for a dead letter, how many
    /// deliveries the record had.
    pub attempt: u32,
    /// Where the record was first read.
    pub origin: Origin,
    /// Dead letters: why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Dead letters: the handler version that gave up on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_version: Option<String>,
    /// A dead letter that is only a reference: the record's data (this many bytes) did not fit
    /// into a Kinesis record beside the envelope, so it is left out; the record is still in
    /// its stream at `origin` until the stream's retention ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_omitted: Option<u64>,
}

/// The largest record Kinesis takes: data and partition key together.
pub const MAX_RECORD_BYTES: usize = 1 << 20;
/// The longest reason kept in a dead letter, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// `reason` cut to [`MAX_REASON_BYTES`] (on a character boundary), saying it was cut.
pub fn short_reason(reason: &str) -> String {
    if reason.len() <= MAX_REASON_BYTES {
        return reason.to_owned();
    }
    let mut end = MAX_REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} … [cut: {} bytes in all]", &reason[..end], reason.len())
}

/// Whether wrapped data under this partition key fits into one Kinesis record.
pub fn fits(wrapped: &[u8], partition_key: &str) -> bool {
    wrapped.len() + partition_key.len() <= MAX_RECORD_BYTES
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Retry,
    DeadLetter,
}

/// The first place a record was read from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub stream: String,
    pub shard_id: String,
    pub sequence_number: String,
    #[serde(default)]
    pub sub_sequence_number: u32,
    pub partition_key: String,
}

/// Wraps `data` under `header`, authenticated with `key` (and naming it).
pub fn wrap(key: &EnvelopeKey, header: &Header, data: &[u8]) -> Vec<u8> {
    let wire = WireOut {
        header,
        key_id: key.id(),
    };
    let json = serde_json::to_vec(&wire).expect("a header serializes");
    let len = (json.len() as u32).to_be_bytes();
    let mac = mac(key, &len, &json, data).finalize().into_bytes();
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + MAC_LEN + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&len);
    out.extend_from_slice(&json);
    out.extend_from_slice(&mac);
    out.extend_from_slice(data);
    out
}

fn mac(key: &EnvelopeKey, len: &[u8; 4], json: &[u8], data: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.bytes()).expect("HMAC takes any key length");
    mac.update(len);
    mac.update(json);
    mac.update(data);
    mac
}

/// `Ok(None)` for a plain record; the header and the original data of an envelope made under
/// one of `keys` (an [`EnvelopeKey`], or a host's [`EnvelopeKeys`]); [`Rejected`] for a record
/// that starts like an envelope but is not one of theirs.
pub fn unwrap<'a, K: AsRef<[EnvelopeKey]> + ?Sized>(
    keys: &K,
    data: &'a [u8],
) -> Result<Option<(Header, &'a [u8])>, Rejected> {
    if !data.starts_with(FAMILY) {
        return Ok(None);
    }
    if let Some(rest) = data.strip_prefix(MAGIC_V1.as_slice()) {
        let (_, json, _) = split(rest, 0)?;
        let wire: WireIn = serde_json::from_slice(json).map_err(|_| Rejected::Header)?;
        return Err(unauthenticated(wire.header, Unauthenticated::NoMac));
    }
    let rest = data
        .strip_prefix(MAGIC.as_slice())
        .ok_or(Rejected::Layout)?;
    let (len, json, rest) = split(rest, MAC_LEN)?;
    let (tag, original) = rest.split_at(MAC_LEN);
    let mut wire: WireIn = serde_json::from_slice(json).map_err(|_| Rejected::Header)?;
    // Believed in nothing yet, and written into logs: only the shape of a key id is kept.
    wire.key_id = wire
        .key_id
        .filter(|id| id.len() <= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()));
    let keys = keys.as_ref();
    let named = |k: &&EnvelopeKey| wire.key_id.as_ref().is_none_or(|id| k.id() == *id);
    let mut tried = false;
    for key in keys.iter().filter(named) {
        tried = true;
        // Constant time: a forger learns nothing from how long the check took.
        if mac(key, len, json, original).verify_slice(tag).is_ok() {
            return Ok(Some((wire.header, original)));
        }
    }
    let why = match wire.key_id {
        Some(id) if tried => Unauthenticated::Mac(id),
        Some(id) => Unauthenticated::UnknownKey(id),
        None => Unauthenticated::MacNoKeyId,
    };
    Err(unauthenticated(wire.header, why))
}

/// An envelope after its magic: the header's length (as written), the header, and the rest.
type Parts<'a> = (&'a [u8; 4], &'a [u8], &'a [u8]);

/// After the magic: the length, the header and the rest (at least `then` bytes of it).
fn split(rest: &[u8], then: usize) -> Result<Parts<'_>, Rejected> {
    let (len, rest) = rest.split_first_chunk::<4>().ok_or(Rejected::Truncated)?;
    let n = u32::from_be_bytes(*len) as usize;
    if rest.len() < n.saturating_add(then) {
        return Err(Rejected::Truncated);
    }
    let (json, rest) = rest.split_at(n);
    Ok((len, json, rest))
}

fn unauthenticated(claimed: Header, why: Unauthenticated) -> Rejected {
    Rejected::Unauthenticated {
        claimed: Box::new(claimed),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(kind: Kind) -> Header {
        Header {
            kind,
            subscription: "ship".into(),
            attempt: 3,
            origin: Origin {
                stream: "shipments".into(),
                shard_id: "shardId-000000000001".into(),
                sequence_number: "4960".into(),
                sub_sequence_number: 0,
                partition_key: "order-1".into(),
            },
            reason: (kind == Kind::DeadLetter).then(|| "handler answered retry".into()),
            handler_version: None,
            data_omitted: None,
        }
    }

    fn key(seed: u8) -> EnvelopeKey {
        EnvelopeKey::from_bytes([seed; 32])
    }

    #[test]
    fn plain_data_is_not_an_envelope() {
        assert_eq!(unwrap(&key(1), b"{\"id\":1}"), Ok(None));
        assert_eq!(unwrap(&key(1), b""), Ok(None));
    }

    /// What `unwrap` says of a record it rejects: why, and whether it claims a header.
    fn why(r: Result<Option<(Header, &[u8])>, Rejected>) -> (Option<Unauthenticated>, bool) {
        match r {
            Err(Rejected::Unauthenticated { why, claimed }) => (Some(why), claimed.attempt == 3),
            Err(other) => panic!("rejected as {other:?}"),
            Ok(ok) => panic!("accepted: {ok:?}"),
        }
    }

    /// An envelope as hosts wrote them before key ids: the header without `key_id`.
    fn without_key_id(k: &EnvelopeKey, h: &Header, data: &[u8]) -> Vec<u8> {
        let json = serde_json::to_vec(h).unwrap();
        let len = (json.len() as u32).to_be_bytes();
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&len);
        out.extend_from_slice(&json);
        out.extend_from_slice(&mac(k, &len, &json, data).finalize().into_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn anything_but_an_envelope_made_under_the_key_is_rejected() {
        let k = key(1);
        let good = wrap(&k, &header(Kind::Retry), b"data");
        assert!(unwrap(&k, &good).unwrap().is_some());
        let other = key(2).id();
        assert_eq!(
            why(unwrap(&key(2), &good)),
            (Some(Unauthenticated::UnknownKey(k.id())), true),
            "another key: named by the id of the key it was made under, {other} not tried"
        );
        let mut altered = good.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert_eq!(
            why(unwrap(&k, &altered)),
            (Some(Unauthenticated::Mac(k.id())), true),
            "altered data"
        );
        let mut forged = good.clone();
        let at = 16 + good[16..].windows(3).position(|w| w == b"\":3").unwrap();
        forged[at + 2] = b'9';
        assert_eq!(
            why(unwrap(&k, &forged)).0,
            Some(Unauthenticated::Mac(k.id())),
            "a forged attempt"
        );
        // The first release's layout had no MAC at all.
        let json = serde_json::to_vec(&header(Kind::Retry)).unwrap();
        let mut v1 = b"\0shardhost/1".to_vec();
        v1.extend_from_slice(&(json.len() as u32).to_be_bytes());
        v1.extend_from_slice(&json);
        assert_eq!(why(unwrap(&k, &v1)), (Some(Unauthenticated::NoMac), true));
        assert_eq!(
            unwrap(&k, &good[..good.len() - 5 - 4]),
            Err(Rejected::Truncated)
        );
        assert_eq!(unwrap(&k, b"\0shardhost/9...."), Err(Rejected::Layout));
        let json = br#"{"kind":"retry","subscription":"ship","attempt":3,"origin":{"stream":"s","shard_id":"x","sequence_number":"1","partition_key":"k"},"key_id":"zz\nforged log line"}"#;
        let mut forged = MAGIC.to_vec();
        forged.extend_from_slice(&(json.len() as u32).to_be_bytes());
        forged.extend_from_slice(json);
        forged.extend_from_slice(&[0; MAC_LEN]);
        assert_eq!(
            why(unwrap(&k, &forged)).0,
            Some(Unauthenticated::MacNoKeyId),
            "a key id that is not one is not repeated"
        );
    }

    #[test]
    fn a_previous_key_opens_what_it_made_and_new_envelopes_name_the_current_key() {
        let (old, new) = (key(1), key(2));
        let keys = EnvelopeKeys::new(new.clone(), vec![old.clone()]);
        let made_before = wrap(&old, &header(Kind::Retry), b"data");
        let (h, data) = unwrap(&keys, &made_before).unwrap().unwrap();
        assert_eq!((h, data), (header(Kind::Retry), &b"data"[..]));
        let made_now = wrap(keys.current(), &header(Kind::Retry), b"data");
        assert!(unwrap(&new, &made_now).unwrap().is_some());
        let json = String::from_utf8_lossy(&made_now[16..]).into_owned();
        assert!(
            json.contains(&format!("\"key_id\":\"{}\"", new.id())),
            "{json}"
        );
        assert_eq!(
            why(unwrap(&old, &made_now)).0,
            Some(Unauthenticated::UnknownKey(new.id()))
        );
    }

    #[test]
    fn envelopes_made_before_key_ids_still_open_under_any_key_of_the_host() {
        let (old, new) = (key(1), key(2));
        let before = without_key_id(&old, &header(Kind::Retry), b"data");
        let keys = EnvelopeKeys::new(new.clone(), vec![old]);
        assert!(unwrap(&keys, &before).unwrap().is_some());
        assert_eq!(
            why(unwrap(&new, &before)).0,
            Some(Unauthenticated::MacNoKeyId)
        );
    }

    proptest! {
        #[test]
        fn wrap_then_unwrap_gives_back_header_and_data(data: Vec<u8>, dead: bool) {
            let h = header(if dead { Kind::DeadLetter } else { Kind::Retry });
            let wrapped = wrap(&key(7), &h, &data);
            let (back, original) = unwrap(&key(7), &wrapped).unwrap().unwrap();
            prop_assert_eq!(back, h);
            prop_assert_eq!(original, &data[..]);
        }
    }
}
