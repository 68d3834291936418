//! A small HTTP/1.1 client for the admin API (the `deploy` and `status` commands use it): plain
//! `http://` only, like the server. The bodies are the server's own types
//! ([`reply`](crate::admin::reply)).

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;

use crate::admin::reply::{ErrorReply, PutReply, ShadowReply, SwapReply};
use crate::admin::signed::{
    DEPLOY_ID_HEADER, GENERATION_HEADER, SIGNATURE_HEADER, SIGNED_BY_HEADER,
};
use crate::fleet::Intent;
use crate::status::Report;

/// The admin API the command talks to.
pub struct AdminClient {
    /// `host:port`
    authority: String,
    base: String,
    token: Option<String>,
}

/// Why `--admin` names no admin API this client can talk to.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("--admin {url}: not a URL: {source}")]
    NotAUrl {
        url: String,
        source: hyper::http::uri::InvalidUri,
    },
    #[error(
        "--admin {url}: expected an http:// URL (the admin API speaks plain HTTP; put TLS in \
         front of it with a proxy)"
    )]
    NotHttp { url: String },
    #[error("--admin {url}: no host in the URL")]
    NoHost { url: String },
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(
        "cannot reach the admin API at {base}: {source} (is the host running with [admin] \
         listen set?)"
    )]
    Unreachable {
        base: String,
        source: std::io::Error,
    },
    #[error("{url}: {source}")]
    Http { url: String, source: hyper::Error },
    #[error("{url}: {source}")]
    Request {
        url: String,
        source: hyper::http::Error,
    },
}

/// An answer that is not 2xx, and what to tell the user about it.
#[derive(Debug, thiserror::Error)]
#[error("{call} refused: {}", advice(.call, *.status, .message))]
pub struct Refused {
    /// What was asked (`deploy`, `status`).
    pub call: &'static str,
    pub status: StatusCode,
    /// The server's reason ([`ErrorReply`]), else its body as text.
    pub message: String,
}

fn advice(call: &str, status: StatusCode, message: &str) -> String {
    match status {
        StatusCode::UNAUTHORIZED => {
            format!("{message}: pass the admin token with --token or SHARDHOST_ADMIN_TOKEN")
        }
        StatusCode::PAYLOAD_TOO_LARGE if call == "put" => message.to_owned(),
        StatusCode::PAYLOAD_TOO_LARGE => {
            format!("the component is larger than the host accepts ([admin] max_upload): {message}")
        }
        status => format!("{status}: {message}"),
    }
}

/// Why a call to the admin API did not answer what was asked for.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Send(#[from] SendError),
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("the admin API answered something that is not {what}: {source}")]
    Unexpected {
        what: &'static str,
        source: serde_json::Error,
    },
}

/// An answer: its status and body.
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Answer {
    /// The `error` field of a JSON error body ([`ErrorReply`]), else the body as text.
    pub fn message(&self) -> String {
        serde_json::from_slice::<ErrorReply>(&self.body)
            .map(|r| r.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(&self.body).trim().to_owned())
    }

    /// The body as `T` when the answer is 2xx; `call` and `what` name the request and the
    /// body in errors.
    fn into_reply<T: DeserializeOwned>(
        self,
        call: &'static str,
        what: &'static str,
    ) -> Result<T, AdminError> {
        if !self.status.is_success() {
            return Err(AdminError::Refused(Refused {
                call,
                status: self.status,
                message: self.message(),
            }));
        }
        serde_json::from_slice(&self.body).map_err(|source| AdminError::Unexpected { what, source })
    }
}

impl AdminClient {
    /// `url` like `http://127.0.0.1:9750`.
    pub fn new(url: &str, token: Option<String>) -> Result<AdminClient, UrlError> {
        let uri: Uri = url.parse().map_err(|source| UrlError::NotAUrl {
            url: url.to_owned(),
            source,
        })?;
        if uri.scheme_str() != Some("http") {
            return Err(UrlError::NotHttp {
                url: url.to_owned(),
            });
        }
        let authority = uri.authority().ok_or_else(|| UrlError::NoHost {
            url: url.to_owned(),
        })?;
        let port = authority.port_u16().unwrap_or(80);
        Ok(AdminClient {
            authority: format!("{}:{port}", authority.host()),
            base: url.trim_end_matches('/').to_owned(),
            token: token.filter(|t| !t.is_empty()),
        })
    }

    /// `GET /status`.
    pub async fn status(&self) -> Result<Report, AdminError> {
        let answer = self.send(Method::GET, "/status", Vec::new()).await?;
        answer.into_reply("status", "a status report")
    }

    /// `PUT /subscriptions/{subscription}/handler` with the component (and, when signed, the
    /// signature made for the generation it should get).
    pub async fn deploy(
        &self,
        subscription: &str,
        component: Vec<u8>,
        signed: Option<&Intent>,
    ) -> Result<SwapReply, AdminError> {
        let path = format!("/subscriptions/{subscription}/handler");
        let headers = signed.map(signature_headers).unwrap_or_default();
        let answer = self
            .send_with(Method::PUT, &path, &headers, component)
            .await?;
        answer.into_reply("deploy", SWAP)
    }

    /// `POST /subscriptions/{subscription}/rollback` (signed like a deploy).
    pub async fn rollback(
        &self,
        subscription: &str,
        signed: Option<&Intent>,
    ) -> Result<SwapReply, AdminError> {
        let path = format!("/subscriptions/{subscription}/rollback");
        let headers = signed.map(signature_headers).unwrap_or_default();
        let answer = self
            .send_with(Method::POST, &path, &headers, Vec::new())
            .await?;
        answer.into_reply("deploy", SWAP)
    }

    /// `PUT /subscriptions/{subscription}/shadow` with the candidate component, its unsent
    /// HTTP requests answered `http_answer` (none: 503).
    pub async fn shadow(
        &self,
        subscription: &str,
        component: Vec<u8>,
        http_answer: Option<&crate::effects::HttpAnswer>,
    ) -> Result<ShadowReply, AdminError> {
        let path = format!("/subscriptions/{subscription}/shadow");
        let headers = http_answer
            .map(crate::admin::http_answer::answer_headers)
            .unwrap_or_default();
        let answer = self
            .send_with(Method::PUT, &path, &headers, component)
            .await?;
        answer.into_reply("deploy --shadow", SHADOW)
    }

    /// `DELETE /subscriptions/{subscription}/shadow`.
    pub async fn shadow_off(&self, subscription: &str) -> Result<ShadowReply, AdminError> {
        let path = format!("/subscriptions/{subscription}/shadow");
        let answer = self.send(Method::DELETE, &path, Vec::new()).await?;
        answer.into_reply("deploy --shadow-off", SHADOW)
    }

    /// `POST /subscriptions/{subscription}/promote` (signed like a deploy).
    pub async fn promote(
        &self,
        subscription: &str,
        signed: Option<&Intent>,
    ) -> Result<SwapReply, AdminError> {
        let path = format!("/subscriptions/{subscription}/promote");
        let headers = signed.map(signature_headers).unwrap_or_default();
        let answer = self
            .send_with(Method::POST, &path, &headers, Vec::new())
            .await?;
        answer.into_reply("deploy --promote", SWAP)
    }

    /// `POST /subscriptions/{subscription}/records` with a records file's text (NDJSON): put
    /// into the host's embedded stream.
    pub async fn put(&self, subscription: &str, records: Vec<u8>) -> Result<PutReply, AdminError> {
        let path = format!("/subscriptions/{subscription}/records");
        let answer = self.send(Method::POST, &path, records).await?;
        answer.into_reply("put", "a put's answer")
    }

    /// Sends one request and reads the whole answer.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> Result<Answer, SendError> {
        self.send_with(method, path, &[], body).await
    }

    /// Sends one request with extra headers and reads the whole answer.
    pub async fn send_with(
        &self,
        method: Method,
        path: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<Answer, SendError> {
        let url = format!("{}{path}", self.base);
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|source| SendError::Unreachable {
                base: self.base.clone(),
                source,
            })?;
        let http = |source| SendError::Http {
            url: url.clone(),
            source,
        };
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http)?;
        tokio::spawn(connection);
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.authority);
        if let Some(token) = &self.token {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|source| SendError::Request {
                url: url.clone(),
                source,
            })?;
        let response = sender.send_request(request).await.map_err(http)?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(http)?
            .to_bytes();
        Ok(Answer { status, body })
    }
}

/// The headers that carry a deploy's signature (see `admin::signed`).
fn signature_headers(intent: &Intent) -> Vec<(&'static str, String)> {
    vec![
        (GENERATION_HEADER, intent.generation.to_string()),
        (DEPLOY_ID_HEADER, intent.deploy_id.clone()),
        (SIGNATURE_HEADER, intent.signed.signature.clone()),
        (SIGNED_BY_HEADER, intent.signed.key.clone()),
    ]
}

/// What a deploy or rollback answers.
const SWAP: &str = "a deploy reply";
/// What a shadow call answers.
const SHADOW: &str = "a shadow reply";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_call_and_what_to_do() {
        let refused = |status, body: &str| {
            Answer {
                status,
                body: Bytes::from(body.to_owned()),
            }
            .into_reply::<SwapReply>("deploy", SWAP)
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            refused(StatusCode::UNAUTHORIZED, r#"{"error":"no token"}"#),
            "deploy refused: no token: pass the admin token with --token or SHARDHOST_ADMIN_TOKEN"
        );
        assert_eq!(
            refused(StatusCode::CONFLICT, "plain text\n"),
            "deploy refused: 409 Conflict: plain text"
        );
        assert!(refused(StatusCode::OK, "{}").starts_with(
            "the admin API answered something that is not a deploy reply: missing field"
        ));
    }
}
