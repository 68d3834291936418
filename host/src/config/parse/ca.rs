//! A `ca_file` key (`[kinesis]`, `[subscription.http]`): a PEM file of CA certificates, read
//! and parsed whole when the config is read, so a bad one is a config error naming the file
//! and the key, never a failure (or, in the AWS SDK, a panic) at the first connection.

use std::path::PathBuf;

use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;

use super::walk::{Field, Walker};

/// The path of a readable PEM file holding one or more certificates, every one of which
/// parses; else reports what is wrong with it and answers `None`.
pub(crate) fn ca_file(w: &mut Walker<'_>, field: &Field<'_, '_>) -> Option<PathBuf> {
    let path = w.existing_file(field, "CA")?;
    let problem = match std::fs::read(&path) {
        Err(e) => Some(format!("cannot read {}: {e}", path.display())),
        Ok(pem) => check_pem(&pem)
            .err()
            .map(|why| format!("{} {why}", path.display())),
    };
    match problem {
        Some(message) => {
            w.report_at(field, message);
            None
        }
        None => Some(path),
    }
}

/// Whether `pem` holds at least one certificate and every certificate block in it parses.
fn check_pem(pem: &[u8]) -> Result<(), String> {
    let mut count = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        match cert {
            Ok(der) if der.is_empty() => return Err("holds an empty certificate".into()),
            Ok(_) => count += 1,
            Err(e) => return Err(format!("is not a PEM certificate file: {e}")),
        }
    }
    if count == 0 {
        return Err("holds no PEM certificate (a \"-----BEGIN CERTIFICATE-----\" block)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_pem;

    const CA: &str = include_str!("../../../../tests/tls/ca.pem");

    #[test]
    fn a_pem_file_of_certificates_is_taken_and_anything_else_is_named() {
        assert_eq!(check_pem(CA.as_bytes()), Ok(()));
        assert!(
            check_pem(b"hello")
                .unwrap_err()
                .contains("holds no PEM certificate")
        );
        let cut = &CA[..CA.len() / 2];
        assert!(check_pem(cut.as_bytes()).is_err(), "a cut certificate");
        let garbled = CA.replacen("MII", "M!I", 1);
        assert!(check_pem(garbled.as_bytes()).is_err(), "a garbled one");
    }
}
