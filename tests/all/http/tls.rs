//! https to a server whose certificate a private CA signed: trusted with the grant's
//! `ca_file`, a connection error without it.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use shardhost::capability::http::HttpGrant;
use shardhost::config::Limits;
use shardhost::record::{BatchOutcome, Outcome};
use shardhost::testing::Runtime;

use super::{call, ctx, grant, request};
use crate::support::{Scratch, guest};

/// A CA and a certificate it signed for 127.0.0.1, made with the openssl command line.
fn private_ca(dir: &Scratch) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&dir.0)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=shardhost test CA",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
    );
    dir.write(
        "server.ext",
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    );
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
    (
        dir.0.join("ca.pem"),
        dir.0.join("server.pem"),
        dir.0.join("server.key"),
    )
}

/// An HTTPS server on 127.0.0.1 answering 200 to everything, with this certificate: its origin.
async fn https_server(cert: &std::path::Path, key: &std::path::Path) -> String {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return; // a client that does not trust us hangs up
                };
                let service = hyper::service::service_fn(|_| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(
                        http_body_util::Full::new(hyper::body::Bytes::from("secure")),
                    ))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    format!("https://{addr}")
}

#[tokio::test]
async fn https_to_a_private_ca_is_trusted_only_with_its_ca_file() {
    let dir = Scratch::new("tls");
    let (ca, cert, key) = private_ca(&dir);
    let origin = https_server(&cert, &key).await;
    let runtime = Runtime::new(None, false).unwrap();
    let get = [request(0, &format!("{origin}/book"))];
    let mut with_ca = grant(&[&origin], Duration::from_secs(5));
    with_ca.update(|http: &mut HttpGrant| http.ca_file = Some(ca));
    let trusting = runtime
        .load_file(&guest("conformance"), Limits::default(), &with_ca)
        .await
        .unwrap();
    let answer = call(trusting.as_ref(), &ctx(None), &get).await.unwrap();
    assert_eq!(answer, BatchOutcome::Each(vec![Outcome::RetryAfter(200)]));

    let without = grant(&[&origin], Duration::from_secs(5));
    let doubting = runtime
        .load_file(&guest("conformance"), Limits::default(), &without)
        .await
        .unwrap();
    let answer = call(doubting.as_ref(), &ctx(None), &get).await.unwrap();
    assert_eq!(
        answer,
        BatchOutcome::Each(vec![Outcome::RetryAfter(3)]),
        "a certificate of an unknown CA is a connection error"
    );
}
