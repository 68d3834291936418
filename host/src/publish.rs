//! What a handler's `publish` reaches: the streams listed in its subscription's `publish_to`,
//! through the host's own stream source (so throttling is retried by the SDK's standard retry).

use std::sync::Arc;

use crate::source::StreamSource;

/// Publishes for one subscription's handlers.
pub struct Publisher {
    source: Arc<dyn StreamSource>,
    subscription: Arc<str>,
    allowed: Vec<String>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("subscription", &self.subscription)
            .field("allowed", &self.allowed)
            .finish()
    }
}

impl Publisher {
    pub fn new(source: Arc<dyn StreamSource>, subscription: &str, allowed: Vec<String>) -> Self {
        Publisher {
            source,
            subscription: Arc::from(subscription),
            allowed,
        }
    }

    /// Puts a record into `stream` if the subscription may publish there; answers its sequence
    /// number, or an error for the guest.
    pub async fn publish(
        &self,
        stream: &str,
        partition_key: &str,
        data: Vec<u8>,
    ) -> Result<String, String> {
        self.check(stream)?;
        self.source
            .put(stream, partition_key, data)
            .await
            .map_err(|e| format!("publish to `{stream}` failed: {e}"))
    }

    /// Whether the subscription may publish to `stream`: the refusal for the guest if not.
    pub fn check(&self, stream: &str) -> Result<(), String> {
        if !self.allowed.iter().any(|s| s == stream) {
            let allowed = if self.allowed.is_empty() {
                "it lists none".to_owned()
            } else {
                format!("it lists {}", self.allowed.join(", "))
            };
            return Err(format!(
                "publish to `{stream}` refused: not in `publish_to` of subscription `{}` ({allowed})",
                self.subscription
            ));
        }
        Ok(())
    }
}
