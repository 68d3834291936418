//! Outbound HTTP requests, through the host's `wasi:http`.
//!
//! The host sends a request only for a subscription with a `[subscription.http]` table, and
//! only to the origins its `allow` lists; a request elsewhere fails with [`Error::Denied`]
//! (not a trap). Each request is bounded by the grant's `timeout` and by what is left of the
//! call's timeout, and its response body by `max_body`.
//!
//! ```no_run
//! use shardhost_guest::http;
//!
//! # fn book(url: &str, id: u64, shipment: &[u8]) -> Result<(), http::Error> {
//! let response = http::post(url)
//!     .header("Idempotency-Key", id.to_string())
//!     .header("Content-Type", "application/json")
//!     .body(shipment)
//!     .send()?;
//! if response.status() >= 500 { /* retry later */ }
//! # Ok(())
//! # }
//! ```
//!
//! [`send_all`] sends several requests at once (up to the grant's `max_in_flight` wait at the
//! same time) and answers when all are done: about the time of the slowest, not of their sum.
//!
//! Redirects (301, 302, 303, 307, 308 with a `Location`) are followed, up to
//! [`MAX_REDIRECTS`]; each one is a new request the host checks against `allow`. A 303, and a
//! 301 or 302 of a request other than GET or HEAD, continues as a GET without a body.

mod url;
#[cfg(target_arch = "wasm32")]
mod wasi;

use std::fmt;

pub use url::Url;

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 10;

/// An HTTP request to send: made by [`get`], [`post`], [`put`], [`patch`], [`delete`] or
/// [`Request::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

/// A GET request.
pub fn get(url: impl Into<String>) -> Request {
    Request::new("GET", url)
}

/// A POST request.
pub fn post(url: impl Into<String>) -> Request {
    Request::new("POST", url)
}

/// A PUT request.
pub fn put(url: impl Into<String>) -> Request {
    Request::new("PUT", url)
}

/// A PATCH request.
pub fn patch(url: impl Into<String>) -> Request {
    Request::new("PATCH", url)
}

/// A DELETE request.
pub fn delete(url: impl Into<String>) -> Request {
    Request::new("DELETE", url)
}

impl Request {
    /// A request with this method (`GET`, `POST`, …) to this absolute `http` or `https` URL.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Request {
        Request {
            method: method.into().to_ascii_uppercase(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Adds a header (a name may be given more than once).
    pub fn header(mut self, name: impl Into<String>, value: impl AsRef<[u8]>) -> Request {
        self.headers.push((name.into(), value.as_ref().to_vec()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` as JSON, and `Content-Type: application/json`.
    ///
    /// # Errors
    ///
    /// When `value` cannot be written as JSON (a map with keys that are not strings).
    pub fn json<T: serde::Serialize + ?Sized>(self, value: &T) -> Result<Request, Error> {
        let body = serde_json::to_vec(value).map_err(|e| Error::Body {
            url: self.url.clone(),
            why: e.to_string(),
        })?;
        Ok(self.header("Content-Type", "application/json").body(body))
    }

    /// The method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends the request and waits for its whole response (redirects followed).
    ///
    /// # Errors
    ///
    /// See [`Error`]. A response with any status (404, 500, …) is `Ok`.
    pub fn send(self) -> Result<Response, Error> {
        send(self)
    }

    /// The request a redirect to `location` (with `status`) continues as.
    fn redirected(&self, status: u16, location: &Url) -> Request {
        let keeps_method = matches!(status, 307 | 308)
            || (matches!(status, 301 | 302) && matches!(self.method.as_str(), "GET" | "HEAD"));
        let mut next = self.clone();
        next.url = location.to_string();
        if !keeps_method {
            next.method = if self.method == "HEAD" { "HEAD" } else { "GET" }.to_owned();
            next.body.clear();
            next.headers.retain(|(name, _)| {
                !name.eq_ignore_ascii_case("content-type")
                    && !name.eq_ignore_ascii_case("content-length")
            });
        }
        next
    }
}

/// A whole response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    status: u16,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Response {
    /// The status code (200, 404, …).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The URL that answered (the last one, after redirects).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The first value of a header, by name in any case, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// Every header, in the order received.
    pub fn headers(&self) -> &[(String, Vec<u8>)] {
        &self.headers
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body as UTF-8 text.
    ///
    /// # Errors
    ///
    /// When the body is not UTF-8.
    pub fn text(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.body)
    }

    /// The body as JSON.
    ///
    /// # Errors
    ///
    /// When the body is not JSON of that shape.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// Why a request got no response.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The URL is not an absolute `http` or `https` URL.
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The subscription does not allow this origin (or grants no HTTP at all).
    Denied {
        /// `scheme://host[:port]` of the request.
        origin: String,
    },
    /// No response within the request's timeout or what was left of the call's.
    Timeout {
        /// The request's URL.
        url: String,
    },
    /// The server could not be reached (DNS, refused, reset, TLS).
    Connect {
        /// The request's URL.
        url: String,
        /// The host's error code.
        why: String,
    },
    /// The response body is larger than the subscription's `max_body`.
    BodyTooLarge {
        /// The request's URL.
        url: String,
    },
    /// More than [`MAX_REDIRECTS`] redirects.
    TooManyRedirects {
        /// The first request's URL.
        url: String,
    },
    /// The request body could not be made.
    Body {
        /// The request's URL.
        url: String,
        /// Why.
        why: String,
    },
    /// Anything else the host answered.
    Other {
        /// The request's URL.
        url: String,
        /// The host's answer.
        why: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Url { url, why } => write!(f, "{url}: not an http(s) URL: {why}"),
            Error::Denied { origin } => write!(
                f,
                "{origin}: denied: this origin is not in the subscription's [subscription.http] allow"
            ),
            Error::Timeout { url } => write!(f, "{url}: timed out"),
            Error::Connect { url, why } => write!(f, "{url}: cannot connect: {why}"),
            Error::BodyTooLarge { url } => write!(
                f,
                "{url}: the response body is larger than the subscription's max_body"
            ),
            Error::TooManyRedirects { url } => {
                write!(f, "{url}: more than {MAX_REDIRECTS} redirects")
            }
            Error::Body { url, why } => write!(f, "{url}: cannot make the body: {why}"),
            Error::Other { url, why } => write!(f, "{url}: {why}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Whether trying again later may succeed: a timeout or a connection error.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Timeout { .. } | Error::Connect { .. })
    }
}

/// Sends one request and waits for its whole response (redirects followed).
///
/// # Errors
///
/// See [`Error`]. A response with any status (404, 500, …) is `Ok`.
pub fn send(request: Request) -> Result<Response, Error> {
    send_all([request]).pop().expect("one answer per request")
}

/// Sends every request at once and answers when all are done, one result per request in the
/// same order (redirects followed).
pub fn send_all(requests: impl IntoIterator<Item = Request>) -> Vec<Result<Response, Error>> {
    let mut pending: Vec<Request> = requests.into_iter().collect();
    let mut results: Vec<Option<Result<Response, Error>>> = vec![None; pending.len()];
    let mut todo: Vec<(usize, Request, usize)> = pending
        .drain(..)
        .enumerate()
        .map(|(i, r)| (i, r, 0))
        .collect();
    while !todo.is_empty() {
        let round: Vec<(Request, Result<Url, Error>)> = todo
            .iter()
            .map(|(_, r, _)| (r.clone(), Url::parse(&r.url)))
            .collect();
        let answers = imp::exchange(&round);
        let mut next = Vec::new();
        for ((i, request, hops), answer) in todo.drain(..).zip(answers) {
            match answer.and_then(|raw| follow(&request, raw, hops)) {
                Ok(Step::Done(response)) => results[i] = Some(Ok(response)),
                Ok(Step::Redirect(to)) => next.push((i, to, hops + 1)),
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        todo = next;
    }
    results
        .into_iter()
        .map(|r| r.expect("every request answered"))
        .collect()
}

enum Step {
    Done(Response),
    Redirect(Request),
}

/// A response, or the request its redirect continues as.
fn follow(request: &Request, response: Response, hops: usize) -> Result<Step, Error> {
    let location = match response.status {
        301 | 302 | 303 | 307 | 308 => response.header("location"),
        _ => None,
    };
    let Some(location) = location else {
        return Ok(Step::Done(response));
    };
    if hops >= MAX_REDIRECTS {
        return Err(Error::TooManyRedirects {
            url: request.url.clone(),
        });
    }
    let base = Url::parse(&response.url)?;
    let to = base.join(location)?;
    Ok(Step::Redirect(request.redirected(response.status, &to)))
}

#[cfg(target_arch = "wasm32")]
use wasi as imp;

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::{Error, Request, Response, Url};

    /// Natively there is no host: every request fails.
    pub(super) fn exchange(
        round: &[(Request, Result<Url, Error>)],
    ) -> Vec<Result<Response, Error>> {
        round
            .iter()
            .map(|(request, url)| {
                url.clone().and_then(|_| {
                    Err(Error::Other {
                        url: request.url.clone(),
                        why: "not running inside shardhost (native build)".to_owned(),
                    })
                })
            })
            .collect()
    }
}
