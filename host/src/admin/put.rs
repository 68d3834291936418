//! `POST /subscriptions/{name}/records` (`shardhost put`): records put into a running host's
//! embedded stream, the stream the subscription reads, as `[subscription] feed` puts them at
//! start. The body is a records file (NDJSON, [`crate::feed`]); the answer names each record's
//! shard and sequence number, in the order given.
//!
//! Refused from the head, before the body is read (the token was checked before this runs): an
//! unknown subscription (404), a host that reads Kinesis (409: put there with the AWS CLI), a
//! declared length past [`PUT_MAX_BYTES`] (413). Then the body, bounded in size and time as an
//! upload's; a bad line or a record past [`RECORD_MAX_BYTES`] refuses the whole put (422).

use std::path::Path as FilePath;
use std::sync::Arc;

use axum::body::{Body, HttpBody};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::reply::{PutRecord, PutReply};
use super::{Shared, error, refusal};
use crate::deploy::DeployError;
use crate::feed::FeedRecord;

/// The largest body a put accepts: what one Kinesis PutRecords call takes.
pub const PUT_MAX_BYTES: usize = 5 << 20;
/// The largest record (partition key and data): what Kinesis takes.
pub const RECORD_MAX_BYTES: usize = 1 << 20;

/// What a put body is called in messages about its lines.
const BODY: &str = "the records sent";

/// Puts the records of the body into the subscription's embedded stream.
pub(super) async fn put(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    body: Body,
) -> Response {
    let state = &shared.state;
    let Some(sub) = state.subscriptions.iter().find(|s| s.name == name) else {
        let known = state.subscriptions.iter().map(|s| s.name.clone()).collect();
        return refusal(DeployError::UnknownSubscription { name, known });
    };
    let Some(embedded) = &state.embedded else {
        state.metrics.put(&name, None);
        return error(StatusCode::CONFLICT, kinesis_refusal(&name, &sub.stream));
    };
    if HttpBody::size_hint(&body).lower() > PUT_MAX_BYTES as u64 {
        state.metrics.put(&name, None);
        return too_large();
    }
    let body = match super::upload::read_body(body, PUT_MAX_BYTES).await {
        Ok(body) => body,
        Err(e) => {
            state.metrics.put(&name, None);
            return e.into_response();
        }
    };
    let records = match records_of(&body) {
        Ok(records) => records,
        Err(why) => {
            state.metrics.put(&name, None);
            tracing::warn!(subscription = %name, "admin API: put refused: {why}");
            return error(StatusCode::UNPROCESSABLE_ENTITY, why);
        }
    };
    let mut answers = Vec::with_capacity(records.len());
    for r in records {
        match embedded.put_now(&sub.stream, &r.partition_key, r.data) {
            Ok((shard_id, sequence_number)) => answers.push(PutRecord {
                shard_id,
                sequence_number,
            }),
            Err(e) => {
                // The stream is created at start and never removed: not expected.
                let message = format!("cannot put into the embedded stream: {e}");
                return error(StatusCode::INTERNAL_SERVER_ERROR, message);
            }
        }
    }
    state.metrics.put(&name, Some(answers.len() as u64));
    tracing::info!(
        subscription = %name, stream = %sub.stream, records = answers.len(),
        "records put into the embedded stream through the admin API"
    );
    axum::Json(PutReply {
        stream: sub.stream.clone(),
        records: answers,
    })
    .into_response()
}

fn too_large() -> Response {
    let message = format!(
        "the records sent are larger than a put takes ({PUT_MAX_BYTES} bytes, as one Kinesis \
         PutRecords call); split the file"
    );
    error(StatusCode::PAYLOAD_TOO_LARGE, message)
}

/// Why a subscription on Kinesis takes no put, and what to do instead.
fn kinesis_refusal(name: &str, stream: &str) -> String {
    format!(
        "subscription `{name}` reads the Kinesis stream `{stream}`, not the embedded stream: \
         put records there (aws kinesis put-record --stream-name {stream} --partition-key KEY \
         --data …); `shardhost put` puts only into a host's embedded stream ([kinesis] \
         endpoint = \"memory\")"
    )
}

/// The records of a body: a records file, each record within [`RECORD_MAX_BYTES`].
fn records_of(body: &[u8]) -> Result<Vec<FeedRecord>, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("{BODY} are not UTF-8 text: {e}"))?;
    let records = crate::feed::parse(FilePath::new(BODY), text).map_err(|e| e.to_string())?;
    if records.is_empty() {
        return Err(format!(
            "{BODY} hold no record; {}",
            crate::feed::LINE_SHAPE
        ));
    }
    for (i, r) in records.iter().enumerate() {
        let size = r.partition_key.len() + r.data.len();
        if size > RECORD_MAX_BYTES {
            return Err(format!(
                "record {} (key `{}`) is {size} bytes; a record takes at most \
                 {RECORD_MAX_BYTES} (partition key and data), as in Kinesis",
                i + 1,
                r.partition_key
            ));
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_a_records_file_and_every_record_is_bounded() {
        let ok = records_of(b"{\"partition_key\":\"a\",\"data\":{\"id\":1}}\n\n").unwrap();
        assert_eq!(ok[0].data, br#"{"id":1}"#);
        assert!(records_of(b"").unwrap_err().contains("no record"));
        assert!(
            records_of(b"{\"data\":1}")
                .unwrap_err()
                .contains("partition_key")
        );
        let big = format!(
            "{{\"partition_key\":\"big\",\"data\":\"{}\"}}",
            "x".repeat(RECORD_MAX_BYTES)
        );
        let why = records_of(big.as_bytes()).unwrap_err();
        assert!(why.contains("record 1 (key `big`)"), "{why}");
        assert!(kinesis_refusal("orders", "s").contains("aws kinesis put-record"));
    }
}
