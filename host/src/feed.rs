//! Record files: NDJSON, one record per line, for `invoke` and the embedded stream's `feed`.
//!
//! Each line is a JSON object with `partition_key` (a string) and either `data` (any JSON value:
//! a string becomes its UTF-8 text, anything else its compact JSON) or `data_base64`. Blank lines
//! are skipped.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

/// A record to put into a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedRecord {
    pub partition_key: String,
    pub data: Vec<u8>,
}

/// A record file that cannot be read, with the place of the problem.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct FeedError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

/// Reads a whole record file.
pub fn load(path: &Path) -> Result<Vec<FeedRecord>, FeedError> {
    let text = std::fs::read_to_string(path).map_err(|e| FeedError {
        file: path.to_owned(),
        line: None,
        message: format!("cannot read the record file: {e}"),
    })?;
    parse(path, &text)
}

/// Parses record-file text as if read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<Vec<FeedRecord>, FeedError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record = parse_line(line).map_err(|message| FeedError {
            file: path.to_owned(),
            line: Some(i + 1),
            message,
        })?;
        out.push(record);
    }
    Ok(out)
}

fn parse_line(line: &str) -> Result<FeedRecord, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut object) = value else {
        return Err("expected a JSON object with `partition_key` and `data`".into());
    };
    let partition_key = match object.remove("partition_key") {
        Some(Value::String(s)) if !s.is_empty() => s,
        Some(Value::String(_)) => return Err("`partition_key` is empty".into()),
        Some(_) => return Err("`partition_key` must be a string".into()),
        None => return Err("missing `partition_key`".into()),
    };
    let data = match (object.remove("data"), object.remove("data_base64")) {
        (Some(_), Some(_)) => return Err("give `data` or `data_base64`, not both".into()),
        (Some(Value::String(s)), None) => s.into_bytes(),
        (Some(v), None) => serde_json::to_vec(&v).expect("a JSON value serializes"),
        (None, Some(Value::String(b64))) => base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| format!("`data_base64` is not base64: {e}"))?,
        (None, Some(_)) => return Err("`data_base64` must be a string".into()),
        (None, None) => return Err("missing `data` (or `data_base64`)".into()),
    };
    if let Some(key) = object.keys().next() {
        return Err(format!(
            "unknown key `{key}`; expected partition_key, data, data_base64"
        ));
    }
    Ok(FeedRecord {
        partition_key,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Result<FeedRecord, FeedError> {
        parse(Path::new("r.ndjson"), line).map(|mut v| v.remove(0))
    }

    #[test]
    fn data_becomes_compact_json_except_a_string_which_becomes_its_text() {
        let r = one(r#"{"partition_key":"k","data":{"id": 1, "sku": "x"}}"#).unwrap();
        assert_eq!(r.data, br#"{"id":1,"sku":"x"}"#);
        let r = one(r#"{"partition_key":"k","data":"plain text"}"#).unwrap();
        assert_eq!(r.data, b"plain text");
        let r = one(r#"{"partition_key":"k","data_base64":"AAEC"}"#).unwrap();
        assert_eq!(r.data, vec![0, 1, 2]);
    }

    #[test]
    fn a_bad_line_is_reported_with_its_file_and_line_number() {
        let err = parse(
            Path::new("shipments.ndjson"),
            "{\"partition_key\":\"a\",\"data\":1}\n\n{\"data\":2}\n",
        )
        .unwrap_err();
        assert_eq!(err.line, Some(3));
        assert_eq!(
            err.to_string(),
            "shipments.ndjson:3: missing `partition_key`"
        );
        assert!(one("[1]").is_err());
        assert!(one(r#"{"partition_key":"k"}"#).is_err());
        assert!(one(r#"{"partition_key":"k","data":1,"extra":2}"#).is_err());
    }
}
