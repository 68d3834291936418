//! The JSON bodies of the admin API's answers, defined once for the server (`admin`) and the
//! command line's client (`cli::admin_client`), so the two cannot drift. `GET /status` answers a
//! [`Report`](crate::status::Report).

use serde::{Deserialize, Serialize};

use crate::deploy::Deployed;

/// 200 to `PUT /subscriptions/{name}/handler` and `POST /subscriptions/{name}/rollback`: the
/// version that served before and the one serving now (equal when the upload already ran).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwapReply {
    // `new` first: the order of the keys on the wire since the first release.
    pub new: String,
    pub old: String,
    /// With a DynamoDB lease table: the fleet's deploy generation the swap belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

impl From<Deployed> for SwapReply {
    fn from(d: Deployed) -> Self {
        SwapReply {
            new: d.swapped.new,
            old: d.swapped.old,
            generation: d.generation,
        }
    }
}

/// 200 to `PUT /subscriptions/{name}/shadow` (the candidate now in shadow, the current
/// version, the shadow it replaced) and to `DELETE` (`shadow` is the one dropped).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowReply {
    pub shadow: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
}

/// 200 to `POST /subscriptions/{name}/records`: the stream the records went into and, for
/// each record in the order sent, where it went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutReply {
    pub stream: String,
    pub records: Vec<PutRecord>,
}

/// Where one put record went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PutRecord {
    pub shard_id: String,
    pub sequence_number: String,
}

/// The body of every JSON refusal (4xx, 5xx): why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_form_is_the_documented_one() {
        let swap = SwapReply {
            old: "a".into(),
            new: "b".into(),
            generation: None,
        };
        assert_eq!(
            serde_json::to_string(&swap).unwrap(),
            r#"{"new":"b","old":"a"}"#
        );
        let refusal = ErrorReply { error: "no".into() };
        assert_eq!(
            serde_json::to_string(&refusal).unwrap(),
            r#"{"error":"no"}"#
        );
    }
}
