//! The `http` command: each record's data is a request; all of a call's go out at once.

use shardhost_guest::http::{self, Error, Request, Response};
use shardhost_guest::serde::Deserialize;
use shardhost_guest::{Outcome, Record};
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(crate = "shardhost_guest::serde")]
struct Wanted {
    #[serde(default = "get")]
    method: String,
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: String,
    expect_body: Option<String>,
}

fn get() -> String {
    "GET".to_owned()
}

/// The outcome of each record's request, in order.
pub fn send_all<'a>(records: impl Iterator<Item = &'a Record>) -> Vec<Outcome> {
    let wanted: Vec<Option<Wanted>> = records.map(|r| r.json::<Wanted>().ok()).collect();
    let requests: Vec<Request> = wanted
        .iter()
        .flatten()
        .map(|w| {
            w.headers
                .iter()
                .fold(Request::new(&*w.method, &*w.url), |r, (k, v)| r.header(k, v))
                .body(w.body.as_bytes())
        })
        .collect();
    let mut answers = http::send_all(requests).into_iter();
    wanted
        .iter()
        .map(|w| match w {
            None => Outcome::Drop,
            Some(w) => outcome(w, answers.next().expect("one answer per request")),
        })
        .collect()
}

fn outcome(wanted: &Wanted, answer: Result<Response, Error>) -> Outcome {
    let code = match answer {
        Ok(response) => match &wanted.expect_body {
            Some(body) if body.as_bytes() != response.body() => 6,
            _ => u64::from(response.status()),
        },
        Err(e) => {
            shardhost_guest::info!("request failed: {e}");
            match e {
                Error::Denied { .. } => 1,
                Error::Timeout { .. } => 2,
                Error::Connect { .. } => 3,
                Error::BodyTooLarge { .. } => 4,
                _ => 5,
            }
        }
    };
    Outcome::RetryAfter(code)
}
