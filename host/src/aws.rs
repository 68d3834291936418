//! The AWS SDK configuration shared by the Kinesis source and the DynamoDB lease store.

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_kinesis::config::{Credentials, SharedHttpClient};
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore, rustls_provider::CryptoMode};
use aws_smithy_http_client::{Builder, Connector};

/// Where and how to reach one AWS service.
pub struct Endpoint<'a> {
    /// An endpoint URL; `None`: the AWS chain (incl. `AWS_ENDPOINT_URL_<SERVICE>`).
    pub url: Option<&'a str>,
    pub region: Option<&'a str>,
    /// Static dummy credentials, for local stacks.
    pub test_credentials: bool,
    /// A CA certificate (PEM) trusted besides the platform's roots: an endpoint whose
    /// certificate a private CA signed. The config check parsed it whole.
    pub ca_pem: Option<Vec<u8>>,
}

/// An SDK configuration from the default chain, with the given endpoint, region, credentials,
/// retry strategy and timeouts.
pub async fn sdk_config(
    endpoint: &Endpoint<'_>,
    retry: RetryConfig,
    timeouts: TimeoutConfig,
) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client_trusting(endpoint.ca_pem.clone()))
        .retry_config(retry)
        .timeout_config(timeouts);
    let local = endpoint.url.is_some() || endpoint.test_credentials;
    match (endpoint.region, local) {
        (Some(region), _) => loader = loader.region(Region::new(region.to_owned())),
        // A local stack does not care; the SDK insists on some region.
        (None, true) => loader = loader.region(Region::new("us-east-1")),
        (None, false) => {}
    }
    if let Some(url) = endpoint.url {
        loader = loader.endpoint_url(url);
    }
    if endpoint.test_credentials {
        loader = loader.credentials_provider(Credentials::new(
            "test",
            "test",
            None,
            None,
            "shardhost-test",
        ));
    }
    loader.load().await
}

/// The HTTP(S) client of every SDK client: hyper 1 with rustls on the `ring` crypto provider.
/// The SDK's own default (feature `default-https-client`) is the same stack on aws-lc-rs, whose
/// C library takes about a minute of a cold release build. Like that default it trusts the
/// platform's root certificates (rustls-native-certs: `/etc/ssl/certs` from Debian's
/// `ca-certificates`, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), follows `HTTPS_PROXY`, `HTTP_PROXY`
/// and `NO_PROXY`, and takes its connect and read timeouts from the SDK config.
pub fn http_client() -> SharedHttpClient {
    http_client_trusting(None)
}

/// [`http_client`], trusting `ca_pem` (PEM certificates) besides the platform's roots. The
/// bytes must parse (the config check made sure): the SDK reads them only at its first
/// request, and panics on a bad one.
pub fn http_client_trusting(ca_pem: Option<Vec<u8>>) -> SharedHttpClient {
    let mut trust = TrustStore::default();
    if let Some(pem) = ca_pem {
        trust = trust.with_pem_certificate(pem);
    }
    let tls = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .expect("a TLS context from a trust store always builds");
    Builder::new().build_with_connector_fn(move |settings, components| {
        let mut connector = Connector::builder();
        connector.set_connector_settings(settings.cloned());
        connector.set_sleep_impl(components.and_then(|c| c.sleep_impl()));
        connector
            .proxy_config(ProxyConfig::from_env())
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .tls_context(tls.clone())
            .build()
    })
}
