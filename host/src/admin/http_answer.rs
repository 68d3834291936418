//! `PUT /subscriptions/{name}/shadow` told what the shadow's unsent HTTP requests are answered
//! (`deploy --shadow --http-answer`): in headers, since the body is the component.
//!
//! | header                           | value                                            |
//! |----------------------------------|--------------------------------------------------|
//! | `x-shardhost-http-answer`        | the status, 200 to 599                           |
//! | `x-shardhost-http-answer-type`   | the answer's `content-type` (optional)           |
//! | `x-shardhost-http-answer-body`   | the answer's body, base64 (optional, ≤ 64 KiB)   |
//!
//! Without the first, the shadow's unsent requests are answered 503 with no body.

use axum::http::{HeaderMap, StatusCode};

use crate::effects::HttpAnswer;
use crate::effects::answer::MAX_SHADOW_BODY;

pub const ANSWER_HEADER: &str = "x-shardhost-http-answer";
pub const ANSWER_TYPE_HEADER: &str = "x-shardhost-http-answer-type";
pub const ANSWER_BODY_HEADER: &str = "x-shardhost-http-answer-body";

/// The answer the headers tell; 400 with why when they are malformed or out of bounds.
pub(super) fn answer_of(headers: &HeaderMap) -> Result<Option<HttpAnswer>, (StatusCode, String)> {
    let bad = |why: String| (StatusCode::BAD_REQUEST, why);
    let get = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().map_err(|_| bad(format!("`{name}` is not text"))))
            .transpose()
    };
    let Some(status) = get(ANSWER_HEADER)? else {
        return match [ANSWER_TYPE_HEADER, ANSWER_BODY_HEADER]
            .into_iter()
            .find(|h| headers.contains_key(*h))
        {
            Some(h) => Err(bad(format!("`{h}` needs `{ANSWER_HEADER}` (the status)"))),
            None => Ok(None),
        };
    };
    let status = status
        .trim()
        .parse::<u16>()
        .map_err(|_| bad(format!("`{ANSWER_HEADER}` is not a status (200 to 599)")))?;
    let body = match get(ANSWER_BODY_HEADER)? {
        Some(text) => HttpAnswer::body_of_base64(text)
            .ok_or_else(|| bad(format!("`{ANSWER_BODY_HEADER}` is not base64")))?,
        None => Vec::new(),
    };
    let answer = HttpAnswer {
        status,
        content_type: get(ANSWER_TYPE_HEADER)?.map(str::to_owned),
        body,
    };
    answer
        .check(MAX_SHADOW_BODY)
        .map_err(|e| bad(format!("the shadow's HTTP answer: {e}")))?;
    Ok(Some(answer))
}

/// The headers that tell `answer`.
pub fn answer_headers(answer: &HttpAnswer) -> Vec<(&'static str, String)> {
    let mut headers = vec![(ANSWER_HEADER, answer.status.to_string())];
    if let Some(t) = &answer.content_type {
        headers.push((ANSWER_TYPE_HEADER, t.clone()));
    }
    if !answer.body.is_empty() {
        headers.push((ANSWER_BODY_HEADER, answer.body_base64()));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn the_headers_tell_the_answer_and_malformed_ones_are_refused() {
        assert_eq!(answer_of(&HeaderMap::new()), Ok(None));
        let answer = HttpAnswer {
            status: 201,
            content_type: Some("application/json".into()),
            body: b"{}".to_vec(),
        };
        let sent: Vec<(&'static str, String)> = answer_headers(&answer);
        let pairs: Vec<(&'static str, &str)> = sent.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(answer_of(&headers(&pairs)), Ok(Some(answer)));
        for bad in [
            vec![(ANSWER_HEADER, "abc")],
            vec![(ANSWER_HEADER, "99")],
            vec![(ANSWER_BODY_HEADER, "e30=")],
            vec![(ANSWER_HEADER, "201"), (ANSWER_BODY_HEADER, "not base64!")],
        ] {
            let (status, _) = answer_of(&headers(&bad)).unwrap_err();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}");
        }
    }
}
