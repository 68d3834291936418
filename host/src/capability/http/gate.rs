//! The gate of one HTTP grant: its TLS client, made once per grant per runtime ([`Gates`]),
//! and the log of the requests it denied.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper as http;

use super::{HttpGrant, Origin, address, tls};
pub use tls::TlsError;

/// What every instance of one component may do over HTTP: the grant, and the TLS client
/// made from it once.
pub struct HttpGate {
    pub(super) grant: HttpGrant,
    pub(super) tls: tokio_rustls::TlsConnector,
    denials: Mutex<DenialLog>,
}

impl std::fmt::Debug for HttpGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpGate")
            .field("grant", &self.grant)
            .finish()
    }
}

impl HttpGate {
    /// The gate of a grant; reads its `ca_file` (and the platform's roots, once per process).
    pub(super) fn new(grant: &HttpGrant) -> Result<HttpGate, TlsError> {
        Ok(HttpGate {
            tls: tls::connector(grant.ca_file.as_deref())?,
            grant: grant.clone(),
            denials: Mutex::new(DenialLog::default()),
        })
    }

    /// Logs a denied request, at most once per [`DENIAL_LOG_EVERY`] per component (with how
    /// many were not logged in between), so a guest that loops on a denied origin cannot flood
    /// the log.
    pub(super) fn log_denied(&self, subscription: &str, origin: &str) {
        let Some(quiet) = self.may_log_denial() else {
            return;
        };
        tracing::warn!(
            subscription,
            origin,
            not_logged_since = quiet,
            "handler request denied: {origin} is not in the subscription's [subscription.http] allow"
        );
    }

    /// Logs a request denied because its allowed name resolved only to addresses inside the
    /// host's networks, naming them; rate-limited as [`HttpGate::log_denied`].
    pub(super) fn log_refused(
        &self,
        subscription: &str,
        origin: &Origin,
        refused: &[address::Refused],
    ) {
        let Some(quiet) = self.may_log_denial() else {
            return;
        };
        let addresses: Vec<String> = refused
            .iter()
            .map(|r| format!("{} ({})", r.addr.ip(), r.inside))
            .collect();
        let addresses = addresses.join(", ");
        tracing::warn!(
            subscription,
            %origin,
            addresses,
            not_logged_since = quiet,
            "handler request denied: {origin} resolved to {addresses}, inside the host's networks; \
             allow it with allow_private = true in [subscription.http], or by listing the address \
             and port as an origin"
        );
    }

    /// Whether a denial may be logged now: `Some(denials not logged since the last line)`.
    fn may_log_denial(&self) -> Option<u64> {
        let mut log = self.denials.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if log
            .last
            .is_some_and(|at| now.duration_since(at) < DENIAL_LOG_EVERY)
        {
            log.quiet += 1;
            return None;
        }
        log.last = Some(now);
        Some(std::mem::take(&mut log.quiet))
    }
}

/// How often a denied request is logged per component, at most.
const DENIAL_LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Default)]
struct DenialLog {
    last: Option<Instant>,
    /// Denials since the last line.
    quiet: u64,
}

/// The origin of a request's URI, normalized as the grant's origins are (`None`: no scheme or
/// host, or a scheme not http/https).
pub(super) fn origin_of(uri: &http::Uri) -> Option<Origin> {
    let scheme = uri.scheme_str()?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    Some(Origin::from_parts(scheme, uri.host()?, uri.port_u16()))
}

/// The gates of a host's components, by grant: one TLS client per grant, not per load.
#[derive(Default)]
pub struct Gates(Mutex<Vec<Arc<HttpGate>>>);

impl Gates {
    pub fn of(&self, grant: &HttpGrant) -> Result<Arc<HttpGate>, TlsError> {
        let mut gates = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(gate) = gates.iter().find(|g| g.grant == *grant) {
            return Ok(gate.clone());
        }
        let gate = Arc::new(HttpGate::new(grant)?);
        gates.push(gate.clone());
        Ok(gate)
    }
}

#[cfg(test)]
mod tests {
    use super::origin_of;

    fn origin(uri: &str) -> Option<String> {
        origin_of(&uri.parse().unwrap()).map(|o| o.to_string())
    }

    #[test]
    fn a_request_s_origin_is_its_scheme_host_and_port_as_a_browser_compares_them() {
        assert_eq!(
            origin("https://API.Carrier.example/book?x=1").as_deref(),
            Some("https://api.carrier.example")
        );
        assert_eq!(
            origin("https://api.carrier.example:443/").as_deref(),
            Some("https://api.carrier.example")
        );
        assert_eq!(
            origin("http://127.0.0.1:8090/x").as_deref(),
            Some("http://127.0.0.1:8090")
        );
        assert_eq!(origin("http://[::1]:80/").as_deref(), Some("http://[::1]"));
        assert_eq!(origin("http://[0:0::1]/").as_deref(), Some("http://[::1]"));
        assert_eq!(origin("ftp://files.example/"), None);
        assert_eq!(origin("/relative"), None);
    }
}
