//! The TLS client of outbound requests: rustls on `ring`, trusting the platform's roots
//! (read once per process) and a grant's `ca_file`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

/// Why a grant's TLS client cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("[subscription.http] ca_file {}: cannot read it: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("[subscription.http] ca_file {}: {why}", path.display())]
    Certificates { path: PathBuf, why: String },
    #[error("TLS client: {0}")]
    Client(#[from] rustls::Error),
}

/// The platform's trusted roots, read once (unreadable ones are skipped, as browsers do).
fn platform_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        if !found.errors.is_empty() {
            tracing::debug!(
                errors = ?found.errors,
                "some of the platform's root certificates could not be read"
            );
        }
        found.certs
    })
}

/// A TLS connector trusting the platform's roots and every certificate in `ca_file`.
pub(super) fn connector(ca_file: Option<&Path>) -> Result<tokio_rustls::TlsConnector, TlsError> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(platform_roots().iter().cloned());
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })?;
        let bad = |why: String| TlsError::Certificates {
            path: path.to_owned(),
            why,
        };
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("not PEM certificates: {e}")))?;
        if certs.is_empty() {
            return Err(bad("holds no PEM certificate (BEGIN CERTIFICATE)".into()));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| bad(format!("a certificate rustls cannot use: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}
