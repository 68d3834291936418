//! The AWS SDK configuration shared by the Kinesis source and the DynamoDB lease store.

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_kinesis::config::Credentials;

/// Where and how to reach one AWS service.
pub struct Endpoint<'a> {
    /// An endpoint URL; `None`: the AWS chain (incl. `AWS_ENDPOINT_URL_<SERVICE>`).
    pub url: Option<&'a str>,
    pub region: Option<&'a str>,
    /// Static dummy credentials, for local stacks.
    pub test_credentials: bool,
}

/// An SDK configuration from the default chain, with the given endpoint, region, credentials,
/// retry strategy and timeouts.
pub async fn sdk_config(
    endpoint: &Endpoint<'_>,
    retry: RetryConfig,
    timeouts: TimeoutConfig,
) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
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
