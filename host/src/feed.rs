//! Record files: NDJSON, one record per line, for `invoke`, `put`, `replay --file` and the
//! embedded stream's `feed`.
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

/// What every line of a record file must look like (said with every bad line).
pub const LINE_SHAPE: &str = r#"each line must be one JSON object: {"partition_key": "order-1", "data": {"id": 1}} (`data`: any JSON value, a string is taken as its text; or `data_base64`: "AAEC")"#;

/// A record file that cannot be read, with every bad line of it.
#[derive(Debug, thiserror::Error)]
pub struct FeedError {
    pub file: PathBuf,
    /// The bad lines, by line number (none when the file itself cannot be read).
    pub lines: Vec<BadLine>,
    /// Why the file cannot be read at all, when that is the problem.
    pub unreadable: Option<String>,
}

/// One bad line of a record file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for FeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = self.file.display();
        if let Some(why) = &self.unreadable {
            return write!(f, "{file}: cannot read the record file: {why}");
        }
        match self.lines.as_slice() {
            [one] => write!(f, "{file}:{}: {}; {LINE_SHAPE}", one.line, one.message),
            lines => {
                write!(f, "{file}: {} bad lines", lines.len())?;
                for bad in lines {
                    write!(f, "\n  line {}: {}", bad.line, bad.message)?;
                }
                write!(f, "\n{LINE_SHAPE}")
            }
        }
    }
}

/// Reads a whole record file.
pub fn load(path: &Path) -> Result<Vec<FeedRecord>, FeedError> {
    let text = std::fs::read_to_string(path).map_err(|e| FeedError {
        file: path.to_owned(),
        lines: Vec::new(),
        unreadable: Some(e.to_string()),
    })?;
    parse(path, &text)
}

/// Reads a whole record file, each record with its line number (from 1).
pub fn load_numbered(path: &Path) -> Result<Vec<(usize, FeedRecord)>, FeedError> {
    let text = std::fs::read_to_string(path).map_err(|e| FeedError {
        file: path.to_owned(),
        lines: Vec::new(),
        unreadable: Some(e.to_string()),
    })?;
    parse_numbered(path, &text)
}

/// Parses record-file text as if read from `path`; a bad line does not stop the reading, so
/// the error names every one.
pub fn parse(path: &Path, text: &str) -> Result<Vec<FeedRecord>, FeedError> {
    let numbered = parse_numbered(path, text)?;
    Ok(numbered.into_iter().map(|(_, record)| record).collect())
}

/// As [`parse`], each record with its line number (from 1).
pub fn parse_numbered(path: &Path, text: &str) -> Result<Vec<(usize, FeedRecord)>, FeedError> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(record) => out.push((i + 1, record)),
            Err(message) => bad.push(BadLine {
                line: i + 1,
                message,
            }),
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(FeedError {
            file: path.to_owned(),
            lines: bad,
            unreadable: None,
        })
    }
}

/// The start of a line, for a message: at most 40 characters.
fn quoted(line: &str) -> String {
    let line = line.trim();
    match line.char_indices().nth(40) {
        Some((end, _)) => format!("`{}…`", &line[..end]),
        None => format!("`{line}`"),
    }
}

fn parse_line(line: &str) -> Result<FeedRecord, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| {
        format!(
            "not JSON ({} at column {}): {}",
            describe_json_error(&e),
            e.column(),
            quoted(line)
        )
    })?;
    let Value::Object(mut object) = value else {
        return Err(format!("not a JSON object: {}", quoted(line)));
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

/// serde_json's reason without its own "at line 1 column N" (a record is one line).
fn describe_json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
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
        assert_eq!(err.lines.len(), 1);
        assert_eq!(err.lines[0].line, 3);
        assert_eq!(
            err.to_string(),
            format!("shipments.ndjson:3: missing `partition_key`; {LINE_SHAPE}")
        );
        assert!(one("[1]").is_err());
        assert!(one(r#"{"partition_key":"k"}"#).is_err());
        assert!(one(r#"{"partition_key":"k","data":1,"extra":2}"#).is_err());
    }

    #[test]
    fn every_bad_line_is_reported_not_only_the_first() {
        let err = parse(
            Path::new("r.ndjson"),
            "hello world\n{\"partition_key\":\"a\",\"data\":1}\n7\n{\"partition_key\":\"b\"}\n",
        )
        .unwrap_err();
        let lines: Vec<usize> = err.lines.iter().map(|b| b.line).collect();
        assert_eq!(lines, [1, 3, 4]);
        assert_eq!(
            err.lines[0].message,
            "not JSON (expected value at column 1): `hello world`"
        );
        assert_eq!(err.lines[1].message, "not a JSON object: `7`");
        let text = err.to_string();
        assert!(
            text.starts_with("r.ndjson: 3 bad lines\n  line 1: "),
            "{text}"
        );
        assert!(text.ends_with(LINE_SHAPE), "{text}");
    }
}
