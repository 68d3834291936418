//! Who may talk to the admin API: no web page (no `Origin`), no other host name (DNS
//! rebinding), and with a token set, only a client that sends it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::metrics::Metrics;

/// A connection must send a complete request head within this (also between requests).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections open at once (each costs a file descriptor); past it the one that has waited
/// longest without a request in flight is closed to make room (`conns.rs`).
pub const MAX_CONNECTIONS: usize = 256;
/// The longest a request may take, from its head to its answer (a deploy compiles).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// After the last answer on a connection, how long what the client still sends (a body that
/// was refused unread) is discarded before the connection is closed (`serve.rs`: `linger`).
pub const LINGER: Duration = Duration::from_secs(2);
/// The longest an upload's body may take to arrive.
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// The `Host` names a request may carry.
pub(super) struct Origins {
    /// Any host (listening on every address: the token guards it).
    any: bool,
    listen: IpAddr,
    metrics: Arc<Metrics>,
}

impl Origins {
    pub(super) fn new(listen: SocketAddr, metrics: Arc<Metrics>) -> Self {
        Origins {
            any: listen.ip().is_unspecified(),
            listen: listen.ip(),
            metrics,
        }
    }

    /// Whether a `Host` header value names this server: `localhost`, a loopback address or
    /// the listen address, with any port.
    fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        name.parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip == self.listen)
    }
}

/// Refuses a request a web page made (it carries `Origin`), and one addressed to another host
/// name: on loopback without a token, a page the operator opens could otherwise roll back or
/// (through DNS rebinding) deploy.
pub(super) async fn same_origin(
    State(origins): State<Arc<Origins>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if let Some(origin) = headers.get(header::ORIGIN) {
        origins.metrics.contained("(admin)", "admin-cross-origin");
        tracing::warn!(
            origin = ?origin, path = %request.uri().path(),
            "admin API: refused a request from a web page (it carries an Origin header)"
        );
        return super::error(
            StatusCode::FORBIDDEN,
            "requests from web pages (with an Origin header) are refused".into(),
        );
    }
    if let Some(host) = headers.get(header::HOST)
        && !host.to_str().is_ok_and(|h| origins.allows(h))
    {
        origins.metrics.contained("(admin)", "admin-foreign-host");
        tracing::warn!(
            host = ?host, path = %request.uri().path(),
            "admin API: refused a request for another host name (DNS rebinding?)"
        );
        return super::error(
            StatusCode::FORBIDDEN,
            "the Host header names neither this server's address nor localhost".into(),
        );
    }
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => super::error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the request did not finish within {REQUEST_TIMEOUT:?}"),
        ),
    }
}

/// The configured token, kept as its digest so that comparing takes the same time whatever
/// the lengths.
pub(super) struct Token([u8; 32]);

impl Token {
    pub(super) fn new(token: &str) -> Token {
        Token(Sha256::digest(token.as_bytes()).into())
    }

    fn matches(&self, given: &str) -> bool {
        let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        self.0.ct_eq(&given).into()
    }
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme in any case).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
}

/// Answers 401 unless the request carries the token (when one is set). Runs before the body
/// is read, so an unauthenticated upload costs nothing.
pub(super) async fn require_token(
    State(token): State<Option<Arc<Token>>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        if !given.is_some_and(|g| token.matches(g)) {
            let mut response = super::error(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token (Authorization: Bearer TOKEN)".into(),
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("valid"));
            return response;
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origins(listen: &str) -> Origins {
        Origins::new(listen.parse().unwrap(), Arc::new(Metrics::new()))
    }

    #[test]
    fn host_names_other_than_the_listen_address_or_localhost_are_refused() {
        let o = origins("127.0.0.1:9750");
        for ok in [
            "127.0.0.1:9750",
            "localhost:9750",
            "LOCALHOST",
            "[::1]:9750",
            "127.0.0.1",
        ] {
            assert!(o.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:9750",
            "evil.example",
            "10.0.0.1:9750",
            "[fe80::1]:1",
            "",
        ] {
            assert!(!o.allows(bad), "{bad}");
        }
        let o = origins("10.0.0.5:9750");
        assert!(o.allows("10.0.0.5:9750"));
        assert!(!o.allows("10.0.0.6:9750"));
        assert!(origins("0.0.0.0:9750").allows("anything.example"));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_the_token_exact() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("BEARER  abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearerabc"), None);
        let t = Token::new("s3cret");
        assert!(t.matches("s3cret"));
        assert!(!t.matches("s3cre"));
        assert!(!t.matches("s3cret "));
    }
}
