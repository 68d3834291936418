//! What a version on trial gets for an HTTP request that is not sent: 503 with no body, or
//! the answer it was told to get (`replay --http-answer STATUS[:FILE]`, `deploy --shadow
//! --http-answer …`), so that its success path is compared too. A told answer is marked
//! stubbed wherever it shows (the report's effects, `status`).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

/// How large a replay's answer body may be (`--http-answer STATUS:FILE`).
pub const MAX_REPLAY_BODY: usize = 1 << 20;

/// How large a shadow's answer body may be: it travels in a header of the admin API and in the
/// fleet's shadow row (one DynamoDB item).
pub const MAX_SHADOW_BODY: usize = 64 << 10;

/// The answer every unsent request of a version on trial gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpAnswer {
    pub status: u16,
    /// `content-type` of the answer (`application/json` for a `.json` file); none without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The body, base64 in JSON.
    #[serde(default, with = "base64_body", skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<u8>,
}

/// Why an answer cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error(
        "--http-answer `{0}`: expected STATUS[:FILE], STATUS a number from 200 to 599 (e.g. 201, \
         or 201:answer.json)"
    )]
    Syntax(String),
    #[error(
        "--http-answer {0}: the status must be from 200 to 599 (a 1xx is never a final answer)"
    )]
    Status(u16),
    #[error("--http-answer: cannot read the answer body {}: {source}", .file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--http-answer: the answer body {} is {size} bytes, more than {max} allowed", .file.display())]
    TooLarge {
        file: PathBuf,
        size: u64,
        max: usize,
    },
    #[error("the HTTP answer's body is {size} bytes, more than {max} allowed")]
    BodyTooLarge { size: usize, max: usize },
    #[error("the HTTP answer's content type is not a media type (at most 128 bytes of text)")]
    ContentType,
}

/// `--http-answer STATUS[:FILE]` as typed: the file is read later ([`AnswerSpec::load`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnswerSpec {
    pub status: u16,
    pub file: Option<PathBuf>,
}

impl std::str::FromStr for AnswerSpec {
    type Err = AnswerError;

    fn from_str(text: &str) -> Result<AnswerSpec, AnswerError> {
        let (status, file) = match text.split_once(':') {
            Some((status, file)) if !file.is_empty() => (status, Some(PathBuf::from(file))),
            Some(_) => return Err(AnswerError::Syntax(text.to_owned())),
            None => (text, None),
        };
        let status: u16 = status
            .parse()
            .map_err(|_| AnswerError::Syntax(text.to_owned()))?;
        check_status(status)?;
        Ok(AnswerSpec { status, file })
    }
}

impl AnswerSpec {
    /// The answer, its body read from the file (at most `max` bytes); a file named `*.json`
    /// answers `content-type: application/json`.
    pub fn load(&self, max: usize) -> Result<HttpAnswer, AnswerError> {
        let Some(file) = &self.file else {
            return Ok(HttpAnswer::status(self.status));
        };
        let read = |source| AnswerError::Read {
            file: file.clone(),
            source,
        };
        let size = std::fs::metadata(file).map_err(read)?.len();
        let too_large = |size| AnswerError::TooLarge {
            file: file.clone(),
            size,
            max,
        };
        if size > max as u64 {
            return Err(too_large(size));
        }
        let body = std::fs::read(file).map_err(read)?;
        if body.len() > max {
            return Err(too_large(body.len() as u64));
        }
        Ok(HttpAnswer {
            status: self.status,
            content_type: is_json(file).then(|| "application/json".to_owned()),
            body,
        })
    }
}

fn is_json(file: &Path) -> bool {
    file.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

fn check_status(status: u16) -> Result<(), AnswerError> {
    match status {
        200..=599 => Ok(()),
        _ => Err(AnswerError::Status(status)),
    }
}

impl HttpAnswer {
    /// `status` with no body.
    pub fn status(status: u16) -> HttpAnswer {
        HttpAnswer {
            status,
            content_type: None,
            body: Vec::new(),
        }
    }

    /// Within bounds: a final status, a body of at most `max_body` bytes, a content type that
    /// can be a header.
    pub fn check(&self, max_body: usize) -> Result<(), AnswerError> {
        check_status(self.status)?;
        if self.body.len() > max_body {
            return Err(AnswerError::BodyTooLarge {
                size: self.body.len(),
                max: max_body,
            });
        }
        if let Some(t) = &self.content_type
            && (t.is_empty() || t.len() > 128 || hyper::header::HeaderValue::from_str(t).is_err())
        {
            return Err(AnswerError::ContentType);
        }
        Ok(())
    }

    /// `201 (stubbed)`, `200 (stubbed), 17 bytes of application/json`.
    pub fn describe(&self) -> String {
        let mut text = format!("{} (stubbed)", self.status);
        if !self.body.is_empty() {
            text += &format!(", {} bytes", self.body.len());
            if let Some(t) = &self.content_type {
                text += &format!(" of {t}");
            }
        }
        text
    }

    /// The body as the admin API's header carries it.
    pub fn body_base64(&self) -> String {
        BASE64.encode(&self.body)
    }

    /// A body from the admin API's header.
    pub fn body_of_base64(text: &str) -> Option<Vec<u8>> {
        BASE64.decode(text.trim()).ok()
    }
}

mod base64_body {
    use super::BASE64;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(body: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&BASE64.encode(body))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        BASE64.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_from_200_to_599_with_an_optional_file() {
        let spec: AnswerSpec = "201".parse().unwrap();
        assert_eq!((spec.status, spec.file), (201, None));
        let spec: AnswerSpec = "200:answer.json".parse().unwrap();
        assert_eq!(spec.file, Some(PathBuf::from("answer.json")));
        for bad in ["abc", "99", "100", "199", "600", "201:", "", ":x"] {
            let e = bad.parse::<AnswerSpec>().unwrap_err().to_string();
            assert!(e.contains("--http-answer"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_json_file_answers_json_and_a_large_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("answer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("booked.json");
        std::fs::write(&json, br#"{"booking":"b-1"}"#).unwrap();
        let spec = AnswerSpec {
            status: 201,
            file: Some(json.clone()),
        };
        let answer = spec.load(1024).unwrap();
        assert_eq!(answer.content_type.as_deref(), Some("application/json"));
        assert_eq!(answer.body, br#"{"booking":"b-1"}"#);
        assert_eq!(
            answer.describe(),
            "201 (stubbed), 17 bytes of application/json"
        );
        let e = spec.load(10).unwrap_err().to_string();
        assert!(e.contains("booked.json") && e.contains("17 bytes"), "{e}");
        let missing = AnswerSpec {
            status: 201,
            file: Some(dir.join("missing")),
        };
        let e = missing.load(1024).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_answer_round_trips_through_json_with_its_body_in_base64() {
        let answer = HttpAnswer {
            status: 200,
            content_type: Some("text/plain".into()),
            body: b"ok".to_vec(),
        };
        let text = serde_json::to_string(&answer).unwrap();
        assert!(text.contains("\"body\":\"b2s=\""), "{text}");
        assert_eq!(serde_json::from_str::<HttpAnswer>(&text).unwrap(), answer);
        let bare: HttpAnswer = serde_json::from_str(r#"{"status":201}"#).unwrap();
        assert_eq!(bare, HttpAnswer::status(201));
        assert!(HttpAnswer::status(99).check(10).is_err());
        assert!(answer.check(1).is_err());
    }
}
