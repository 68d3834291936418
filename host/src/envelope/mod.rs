//! The envelope around a record that shardhost publishes itself: a retry copy (the record again,
//! with its attempt number) or a dead letter (the record after its last attempt, with why).
//!
//! Layout: the 12 magic bytes `\0shardhost/2`, a 4-byte big-endian header length, the header as
//! JSON, a 32-byte HMAC-SHA256 under the fleet's [`EnvelopeKey`] (over the length, the header and
//! the data), then the original data unchanged. Only a record whose MAC verifies is an envelope:
//! anything else that starts like one (a forgery, another fleet's, an earlier layout, a record
//! that looks so by accident) is [`Rejected`] and treated as an ordinary record.
//!
//! A handler never sees a retry envelope: dispatch unwraps it, hands the original data over and
//! puts the attempt number in `batch-info.attempt`. Dead letters stay wrapped for whoever reads
//! the dead-letter stream (`shardhost dead-letters`).

pub mod key;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

pub use key::EnvelopeKey;

const MAGIC: &[u8; 12] = b"\0shardhost/2";
/// What every layout's magic starts with.
const FAMILY: &[u8] = b"\0shardhost/";
const MAC_LEN: usize = 32;

/// Why a record that starts like an envelope is not one of this fleet's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("an envelope of another layout (an earlier shardhost version)")]
    Layout,
    #[error("a truncated envelope")]
    Truncated,
    #[error("its MAC does not verify: made with another key, or altered")]
    Mac,
    #[error("its header does not parse")]
    Header,
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

/// Wraps `data` under `header`, authenticated with `key`.
pub fn wrap(key: &EnvelopeKey, header: &Header, data: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("a header serializes");
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
/// `key`; [`Rejected`] for a record that starts like an envelope but is not one of `key`'s.
pub fn unwrap<'a>(
    key: &EnvelopeKey,
    data: &'a [u8],
) -> Result<Option<(Header, &'a [u8])>, Rejected> {
    if !data.starts_with(FAMILY) {
        return Ok(None);
    }
    let rest = data
        .strip_prefix(MAGIC.as_slice())
        .ok_or(Rejected::Layout)?;
    let (len, rest) = rest.split_first_chunk::<4>().ok_or(Rejected::Truncated)?;
    let n = u32::from_be_bytes(*len) as usize;
    if rest.len() < n.saturating_add(MAC_LEN) {
        return Err(Rejected::Truncated);
    }
    let (json, rest) = rest.split_at(n);
    let (tag, original) = rest.split_at(MAC_LEN);
    // Constant time: a forger learns nothing from how long the check took.
    mac(key, len, json, original)
        .verify_slice(tag)
        .map_err(|_| Rejected::Mac)?;
    let header = serde_json::from_slice(json).map_err(|_| Rejected::Header)?;
    Ok(Some((header, original)))
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

    #[test]
    fn anything_but_an_envelope_made_under_the_key_is_rejected() {
        let k = key(1);
        let good = wrap(&k, &header(Kind::Retry), b"data");
        assert!(unwrap(&k, &good).unwrap().is_some());
        assert_eq!(unwrap(&key(2), &good), Err(Rejected::Mac), "another key");
        let mut altered = good.clone();
        *altered.last_mut().unwrap() ^= 1;
        assert_eq!(unwrap(&k, &altered), Err(Rejected::Mac), "altered data");
        let mut forged = good.clone();
        let at = 16 + good[16..].windows(3).position(|w| w == b"\":3").unwrap();
        forged[at + 2] = b'9';
        assert_eq!(unwrap(&k, &forged), Err(Rejected::Mac), "a forged attempt");
        // The first release's layout had no MAC at all.
        let json = serde_json::to_vec(&header(Kind::Retry)).unwrap();
        let mut v1 = b"\0shardhost/1".to_vec();
        v1.extend_from_slice(&(json.len() as u32).to_be_bytes());
        v1.extend_from_slice(&json);
        assert_eq!(unwrap(&k, &v1), Err(Rejected::Layout));
        assert_eq!(
            unwrap(&k, &good[..good.len() - 5 - 4]),
            Err(Rejected::Truncated)
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
