//! The envelope around a record that shardhost publishes itself: a retry copy (the record again,
//! with its attempt number) or a dead letter (the record after its last attempt, with why).
//!
//! Layout: the 12 magic bytes `\0shardhost/1`, a 4-byte big-endian header length, the header as
//! JSON, then the original data unchanged. A plain record starting with those bytes by accident is
//! read as plain when its header does not parse.
//!
//! A handler never sees a retry envelope: dispatch unwraps it, hands the original data over and
//! puts the attempt number in `batch-info.attempt`. Dead letters stay wrapped for whoever reads
//! the dead-letter stream (`shardhost dead-letters`).

use serde::{Deserialize, Serialize};

const MAGIC: &[u8; 12] = b"\0shardhost/1";

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

/// Wraps `data` under `header`.
pub fn wrap(header: &Header, data: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("a header serializes");
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(data);
    out
}

/// The header and the original data, when `data` is an envelope.
pub fn unwrap(data: &[u8]) -> Option<(Header, &[u8])> {
    let rest = data.strip_prefix(MAGIC.as_slice())?;
    let (len, rest) = rest.split_first_chunk::<4>()?;
    let len = u32::from_be_bytes(*len) as usize;
    if rest.len() < len {
        return None;
    }
    let (json, original) = rest.split_at(len);
    let header = serde_json::from_slice(json).ok()?;
    Some((header, original))
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
        }
    }

    #[test]
    fn plain_data_is_not_an_envelope() {
        assert_eq!(unwrap(b"{\"id\":1}"), None);
        assert_eq!(unwrap(b""), None);
        assert_eq!(
            unwrap(b"\0shardhost/1\0\0\0\x05{bad}"),
            None,
            "a header that does not parse"
        );
        assert_eq!(
            unwrap(b"\0shardhost/1\0\0\0\x50{}"),
            None,
            "a header longer than the data"
        );
    }

    proptest! {
        #[test]
        fn wrap_then_unwrap_gives_back_header_and_data(data: Vec<u8>, dead: bool) {
            let h = header(if dead { Kind::DeadLetter } else { Kind::Retry });
            let wrapped = wrap(&h, &data);
            let (back, original) = unwrap(&wrapped).unwrap();
            prop_assert_eq!(back, h);
            prop_assert_eq!(original, &data[..]);
        }
    }
}
