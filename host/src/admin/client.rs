//! A small HTTP/1.1 client for the admin API (the `deploy` and `status` commands use it): plain
//! `http://` only, like the server.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;

/// The admin API the command talks to.
pub struct AdminClient {
    /// `host:port`
    authority: String,
    base: String,
    token: Option<String>,
}

/// An answer: its status and body.
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Answer {
    /// The `error` field of a JSON error body, else the body as text.
    pub fn message(&self) -> String {
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v.get("error")?.as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&self.body).trim().to_owned())
    }
}

impl AdminClient {
    /// `url` like `http://127.0.0.1:9750`.
    pub fn new(url: &str, token: Option<String>) -> Result<AdminClient, String> {
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("--admin {url}: not a URL: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "--admin {url}: expected an http:// URL (the admin API speaks plain HTTP; put \
                 TLS in front of it with a proxy)"
            ));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("--admin {url}: no host in the URL"))?;
        let port = authority.port_u16().unwrap_or(80);
        Ok(AdminClient {
            authority: format!("{}:{port}", authority.host()),
            base: url.trim_end_matches('/').to_owned(),
            token: token.filter(|t| !t.is_empty()),
        })
    }

    /// Sends one request and reads the whole answer.
    pub async fn send(&self, method: Method, path: &str, body: Vec<u8>) -> Result<Answer, String> {
        let url = format!("{}{path}", self.base);
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|e| {
                format!(
                    "cannot reach the admin API at {}: {e} (is the host running with [admin] \
                     listen set?)",
                    self.base
                )
            })?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        tokio::spawn(connection);
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.authority);
        if let Some(token) = &self.token {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("{url}: {e}"))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{url}: {e}"))?
            .to_bytes();
        Ok(Answer { status, body })
    }
}

/// What to tell the user about an answer that is not 2xx.
pub fn refused(answer: &Answer) -> String {
    match answer.status {
        StatusCode::UNAUTHORIZED => format!(
            "{}: pass the admin token with --token or SHARDHOST_ADMIN_TOKEN",
            answer.message()
        ),
        StatusCode::PAYLOAD_TOO_LARGE => format!(
            "the component is larger than the host accepts ([admin] max_upload): {}",
            answer.message()
        ),
        status => format!("{status}: {}", answer.message()),
    }
}
